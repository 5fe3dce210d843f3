package dev.weir.compat;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.stream.Collectors;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.MemberDescription;
import org.apache.kafka.common.TopicPartition;
import org.junit.jupiter.api.Test;

/** Classic consumer groups (JoinGroup/SyncGroup/Heartbeat) with the client-side assignors. */
class ClassicGroupTest {
    private static final Set<Integer> ALL = Set.of(0, 1, 2, 3);

    @Test
    void rangeAssignorSplitsContiguousRangesAndEagerListenersRevokeEverything() {
        String topic = Weir.createTopic("classic-range", 4);
        String group = Weir.uniqueName("range-group");
        Map<String, Object> settings = Groups.classic(group, "range");
        try (MemberThread a = new MemberThread("a", List.of(topic), settings)) {
            Groups.awaitOwns(a, ALL);
            try (MemberThread b = new MemberThread("b", List.of(topic), settings)) {
                Groups.awaitSplit(4, a, b);
                Set<Integer> ofA = a.owned();
                Set<Integer> ofB = b.owned();
                assertTrue(Set.of(Set.of(0, 1), Set.of(2, 3)).contains(ofA), "range hands out contiguous ranges: " + a);
                // Eager rebalancing: every partition is revoked before the new assignment.
                assertEquals(
                        List.of(call("assigned", ALL), call("revoked", ALL), call("assigned", ofA)),
                        Groups.nonEmptyCalls(a));
                assertEquals(List.of(call("assigned", ofB)), Groups.nonEmptyCalls(b));
                assertDescribedAs(group, "range", Map.of(a, ofA, b, ofB));
                Groups.consumeOwnPartitionsAndCommit(topic, group, a, b);
            }
            // b left the group on close: its partitions come back to a.
            Groups.awaitOwns(a, ALL);
            List<MemberThread.ListenerCall> calls = Groups.nonEmptyCalls(a);
            assertEquals(call("assigned", ALL), calls.get(calls.size() - 1));
        }
    }

    @Test
    void cooperativeStickyRevokesOnlyThePartitionsThatMove() {
        String topic = Weir.createTopic("classic-coop", 4);
        String group = Weir.uniqueName("coop-group");
        Map<String, Object> settings = Groups.classic(group, "cooperative-sticky");
        try (MemberThread a = new MemberThread("a", List.of(topic), settings)) {
            Groups.awaitOwns(a, ALL);
            try (MemberThread b = new MemberThread("b", List.of(topic), settings)) {
                Groups.awaitSplit(4, a, b);
                Set<Integer> moved = b.owned();
                assertEquals(2, moved.size(), Groups.describe(a, b));
                // a keeps what it does not give up: one revocation, of exactly b's partitions.
                assertEquals(List.of(call("assigned", ALL), call("revoked", moved)), Groups.nonEmptyCalls(a));
                assertEquals(List.of(call("assigned", moved)), Groups.nonEmptyCalls(b));
                assertDescribedAs(group, "cooperative-sticky", Map.of(a, a.owned(), b, moved));
                Groups.consumeOwnPartitionsAndCommit(topic, group, a, b);
                // b leaves: a is given back only the partitions it lacks.
                b.close();
                Groups.awaitOwns(a, ALL);
                List<MemberThread.ListenerCall> calls = Groups.nonEmptyCalls(a);
                assertEquals(call("assigned", moved), calls.get(calls.size() - 1));
            }
        }
    }

    static MemberThread.ListenerCall call(String kind, Set<Integer> partitions) {
        return new MemberThread.ListenerCall(kind, new TreeSet<>(partitions));
    }

    /** DescribeGroups agrees with the members: Stable, the protocol, each member's partitions. */
    @SuppressWarnings({"deprecation", "removal"}) // state(): ConsumerGroupState is deprecated in 4.x, groupState() absent in 3.9
    static void assertDescribedAs(String group, String assignor, Map<MemberThread, Set<Integer>> owned) {
        try (Admin admin = Weir.admin()) {
            ConsumerGroupDescription description =
                    Weir.get(admin.describeConsumerGroups(List.of(group)).describedGroups().get(group));
            assertEquals("Stable", description.state().toString(), description.toString());
            assertEquals(assignor, description.partitionAssignor(), description.toString());
            Set<Set<Integer>> described = description.members().stream()
                    .map(ClassicGroupTest::partitionsOf)
                    .collect(Collectors.toSet());
            assertEquals(Set.copyOf(owned.values()), described, description.toString());
        }
    }

    static Set<Integer> partitionsOf(MemberDescription member) {
        return member.assignment().topicPartitions().stream()
                .map(TopicPartition::partition)
                .collect(Collectors.toCollection(TreeSet::new));
    }
}
