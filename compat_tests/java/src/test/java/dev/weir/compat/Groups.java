package dev.weir.compat;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.stream.Collectors;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.CooperativeStickyAssignor;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.consumer.RangeAssignor;
import org.apache.kafka.common.TopicPartition;

/**
 * Consumer settings for the three group protocols under test, and checks shared by their tests.
 *
 * <p>Session timeouts: classic members ask for 6 s (Kafka's group.min.session.timeout.ms, so any
 * broker accepts it); KIP-848 members get theirs from the broker
 * (group.consumer.session.timeout.ms, 6 s in the wrapper's weir.toml).
 */
final class Groups {
    static final Duration REBALANCE_TIMEOUT = Duration.ofSeconds(30);
    /** A killed member's partitions move within its session (6 s) plus a rebalance. */
    static final Duration TAKEOVER_TIMEOUT = Duration.ofSeconds(25);

    private Groups() {}

    /** A classic-protocol member with `assignor` ("range" or "cooperative-sticky"). */
    static Map<String, Object> classic(String group, String assignor) {
        Map<String, Object> settings = new HashMap<>();
        settings.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        settings.put("group.protocol", "classic");
        settings.put(ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG, assignorClass(assignor));
        settings.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, 6_000);
        settings.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, 500);
        settings.put(ConsumerConfig.MAX_POLL_INTERVAL_MS_CONFIG, 20_000);
        return settings;
    }

    /** A KIP-848 member (group.protocol=consumer): the broker assigns, with `remoteAssignor` if not null. */
    static Map<String, Object> consumerProtocol(String group, String remoteAssignor) {
        Map<String, Object> settings = new HashMap<>();
        settings.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        settings.put("group.protocol", "consumer");
        if (remoteAssignor != null) {
            settings.put("group.remote.assignor", remoteAssignor);
        }
        settings.put(ConsumerConfig.MAX_POLL_INTERVAL_MS_CONFIG, 20_000);
        return settings;
    }

    static String assignorClass(String assignor) {
        switch (assignor) {
            case "range":
                return RangeAssignor.class.getName();
            case "cooperative-sticky":
                return CooperativeStickyAssignor.class.getName();
            default:
                throw new IllegalArgumentException(assignor);
        }
    }

    /** Waits until the members' owned partitions are disjoint, cover `count` partitions and none is empty. */
    static void awaitSplit(int count, MemberThread... members) {
        Weir.waitUntil(REBALANCE_TIMEOUT, () -> isSplit(count, members), () -> describe(members));
    }

    static boolean isSplit(int count, MemberThread... members) {
        Set<Integer> union = new TreeSet<>();
        int total = 0;
        for (MemberThread member : members) {
            Set<Integer> owned = member.owned();
            if (owned.isEmpty()) {
                return false;
            }
            union.addAll(owned);
            total += owned.size();
        }
        return total == count && union.size() == count;
    }

    static void awaitOwns(MemberThread member, Set<Integer> partitions) {
        Weir.waitUntil(REBALANCE_TIMEOUT, () -> member.owned().equals(partitions), () -> describe(member));
    }

    static String describe(MemberThread... members) {
        return List.of(members).stream().map(MemberThread::toString).collect(Collectors.joining("; "));
    }

    /** Listener calls with at least one partition (some client versions also report empty ones). */
    static List<MemberThread.ListenerCall> nonEmptyCalls(MemberThread member) {
        return member.listenerCalls.stream().filter(c -> !c.partitions().isEmpty()).collect(Collectors.toList());
    }

    /**
     * Produces "v0".."v39" round-robin over 4 partitions, waits until each member has read exactly
     * the records of the partitions it owns, commits them with commitSync, and checks the group's
     * committed offsets through the AdminClient.
     */
    static void consumeOwnPartitionsAndCommit(String topic, String group, MemberThread... members) {
        int partitions = 4;
        int count = 40;
        Weir.produceValues(topic, partitions, count);
        for (MemberThread member : members) {
            Set<Integer> owned = member.owned();
            List<String> expected = new java.util.ArrayList<>();
            for (int i = 0; i < count; i++) {
                if (owned.contains(i % partitions)) {
                    expected.add("v" + i);
                }
            }
            Weir.waitUntil(
                    Weir.TIMEOUT,
                    () -> member.records.size() >= expected.size(),
                    () -> member.name + " read " + member.values() + ", expected " + expected);
            assertEquals(new TreeSet<>(expected), new TreeSet<>(member.values()), member.name + " read");
            assertEquals(expected.size(), member.records.size(), member.name + " read a record twice");
            member.call(consumer -> {
                consumer.commitSync();
                return null;
            });
        }
        try (Admin admin = Weir.admin()) {
            Map<TopicPartition, OffsetAndMetadata> committed =
                    Weir.get(admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata());
            Map<TopicPartition, Long> offsets = committed.entrySet().stream()
                    .collect(Collectors.toMap(Map.Entry::getKey, e -> e.getValue().offset()));
            Map<TopicPartition, Long> expected = Weir.allPartitions(topic, partitions).stream()
                    .collect(Collectors.toMap(tp -> tp, tp -> (long) (count / partitions)));
            assertEquals(expected, offsets, "committed offsets");
        }
    }
}
