package dev.weir.compat;

import static dev.weir.compat.ClassicGroupTest.call;
import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.List;
import java.util.Map;
import java.util.Set;
import org.junit.jupiter.api.condition.EnabledIf;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * KIP-848 groups (group.protocol=consumer: ConsumerGroupHeartbeat, assignment by the broker).
 * Generally available from kafka-clients 4.0; on 3.9 it is an early-access preview, so these
 * tests run on 4.x only (the wrapper checks that exactly these are skipped on 3.9).
 */
@EnabledIf(value = "dev.weir.compat.Weir#consumerGroupProtocolAvailable", disabledReason = "KIP-848 consumer is GA from kafka-clients 4.0")
class ConsumerProtocolGroupTest {
    private static final Set<Integer> ALL = Set.of(0, 1, 2, 3);

    @ParameterizedTest(name = "group.remote.assignor={0}")
    @ValueSource(strings = {"uniform", "range"})
    void brokerAssignsAndMembersRevokeOnlyWhatMoves(String assignor) {
        String topic = Weir.createTopic("kip848-" + assignor, 4);
        String group = Weir.uniqueName("kip848-group");
        Map<String, Object> settings = Groups.consumerProtocol(group, assignor);
        try (MemberThread a = new MemberThread("a", List.of(topic), settings)) {
            Groups.awaitOwns(a, ALL);
            try (MemberThread b = new MemberThread("b", List.of(topic), settings)) {
                Groups.awaitSplit(4, a, b);
                Set<Integer> moved = b.owned();
                assertEquals(2, moved.size(), Groups.describe(a, b));
                if (assignor.equals("range")) {
                    assertEquals(true, Set.of(Set.of(0, 1), Set.of(2, 3)).contains(moved), Groups.describe(a, b));
                }
                assertEquals(List.of(call("assigned", ALL), call("revoked", moved)), Groups.nonEmptyCalls(a));
                assertEquals(List.of(call("assigned", moved)), Groups.nonEmptyCalls(b));
                ClassicGroupTest.assertDescribedAs(group, assignor, Map.of(a, a.owned(), b, moved));
                Groups.consumeOwnPartitionsAndCommit(topic, group, a, b);
                b.close();
                Groups.awaitOwns(a, ALL);
                List<MemberThread.ListenerCall> calls = Groups.nonEmptyCalls(a);
                assertEquals(call("assigned", moved), calls.get(calls.size() - 1));
            }
        }
    }
}
