package dev.weir.compat;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import org.junit.jupiter.api.parallel.Execution;
import org.junit.jupiter.api.parallel.ExecutionMode;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * A member in a child JVM is SIGKILLed (no LeaveGroup, no more heartbeats): when its session
 * expires, the broker moves its partitions to the surviving member. The cases run concurrently
 * (each has its own topic and group): most of their time is waiting for a session to expire.
 */
@Execution(ExecutionMode.CONCURRENT)
class KilledMemberTest {
    private static final Set<Integer> ALL = Set.of(0, 1, 2, 3);

    @ParameterizedTest(name = "{0}")
    @ValueSource(strings = {"classic-range", "classic-cooperative-sticky", "consumer"})
    void killedMembersPartitionsMoveToTheSurvivor(String protocol) throws Exception {
        if (protocol.equals("consumer")) {
            // Skipped on 3.9 (the wrapper checks exactly which tests are skipped per version).
            assumeTrue(Weir.consumerGroupProtocolAvailable(), "KIP-848 consumer is GA from kafka-clients 4.0");
        }
        String topic = Weir.createTopic("killed-" + protocol, 4);
        String group = Weir.uniqueName("killed-group");
        Map<String, Object> settings = protocol.equals("consumer")
                ? Groups.consumerProtocol(group, null)
                : Groups.classic(group, protocol.substring("classic-".length()));
        try (MemberThread survivor = new MemberThread("survivor", List.of(topic), settings);
                ChildMember child = new ChildMember(topic, asStrings(settings))) {
            Weir.waitUntil(
                    Groups.REBALANCE_TIMEOUT,
                    () -> isSplit(survivor.owned(), child.assignment()),
                    () -> survivor + "; child: " + child.output());
            Set<Integer> ofChild = child.assignment();
            child.kill();
            Weir.waitUntil(
                    Groups.TAKEOVER_TIMEOUT,
                    () -> survivor.owned().equals(ALL),
                    () -> "the killed member's partitions " + ofChild + " did not move: " + survivor);
            List<MemberThread.ListenerCall> calls = Groups.nonEmptyCalls(survivor);
            MemberThread.ListenerCall last = calls.get(calls.size() - 1);
            // Eager (range) reassigns everything; cooperative and KIP-848 add only what moved.
            Set<Integer> added = protocol.equals("classic-range") ? ALL : ofChild;
            assertEquals(ClassicGroupTest.call("assigned", added), last, survivor.toString());
            Groups.consumeOwnPartitionsAndCommit(topic, group, survivor);
        }
    }

    private static boolean isSplit(Set<Integer> survivor, Set<Integer> child) {
        if (child == null || child.isEmpty() || survivor.isEmpty()) {
            return false;
        }
        Set<Integer> union = new TreeSet<>(survivor);
        union.addAll(child);
        return union.equals(ALL) && survivor.size() + child.size() == ALL.size();
    }

    private static Map<String, String> asStrings(Map<String, Object> settings) {
        Map<String, String> strings = new HashMap<>();
        settings.forEach((key, value) -> strings.put(key, value.toString()));
        return strings;
    }
}
