package dev.weir.compat;

import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.regex.Pattern;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.junit.jupiter.api.parallel.Execution;
import org.junit.jupiter.api.parallel.ExecutionMode;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * subscribe(java.util.regex.Pattern): the client matches the pattern against all-topics
 * metadata and subscribes to what matches, a topic created later included.
 * subscribe(SubscriptionPattern) (KIP-848, kafka-clients 4.0+): the broker resolves the
 * RE2/J expression against its topics, again when topics are created.
 */
@Execution(ExecutionMode.CONCURRENT)
class PatternSubscriptionTest {

    @ParameterizedTest(name = "group.protocol={0}")
    @ValueSource(strings = {"classic", "consumer"})
    void patternSubscriptionFollowsMatchingTopicsIncludingNewOnes(String protocol) {
        if (protocol.equals("consumer")) {
            assumeTrue(Weir.consumerGroupProtocolAvailable(), "KIP-848 consumer is GA from kafka-clients 4.0");
        }
        String prefix = Weir.uniqueName("pattern-" + protocol);
        Weir.createTopicNamed(prefix + "-a", 2, Map.of());
        Weir.createTopicNamed(prefix + "-b", 1, Map.of());
        Weir.createTopic("pattern-unmatched", 1);
        String group = Weir.uniqueName("pattern-group");
        Map<String, Object> settings = new HashMap<>(protocol.equals("consumer")
                ? Groups.consumerProtocol(group, null)
                : Groups.classic(group, "range"));
        settings.put(ConsumerConfig.METADATA_MAX_AGE_CONFIG, 500);
        Pattern pattern = Pattern.compile(Pattern.quote(prefix) + "-.*");
        try (MemberThread member = new MemberThread("pattern", pattern, settings)) {
            Set<TopicPartition> matching = Set.of(
                    new TopicPartition(prefix + "-a", 0),
                    new TopicPartition(prefix + "-a", 1),
                    new TopicPartition(prefix + "-b", 0));
            Weir.waitUntil(Groups.REBALANCE_TIMEOUT, () -> member.ownedTopicPartitions().equals(matching), member::toString);

            Weir.createTopicNamed(prefix + "-c", 2, Map.of());
            Set<TopicPartition> grown = new java.util.HashSet<>(matching);
            grown.add(new TopicPartition(prefix + "-c", 0));
            grown.add(new TopicPartition(prefix + "-c", 1));
            Weir.waitUntil(Groups.REBALANCE_TIMEOUT, () -> member.ownedTopicPartitions().equals(grown), member::toString);

            try (KafkaProducer<byte[], byte[]> producer = Weir.producer(Map.of())) {
                Weir.produceAll(producer, List.of(new ProducerRecord<>(prefix + "-c", 1, null, "late".getBytes())));
            }
            Weir.waitUntil(Weir.TIMEOUT, () -> member.values().contains("late"), member::toString);
        }
    }

    @org.junit.jupiter.api.Test
    void brokerResolvesSubscriptionPatternIncludingTopicsCreatedLater() {
        assumeTrue(Weir.consumerGroupProtocolAvailable(), "SubscriptionPattern is new in kafka-clients 4.0");
        String prefix = Weir.uniqueName("re2");
        Weir.createTopicNamed(prefix + "-orders-a", 2, Map.of());
        Weir.createTopicNamed(prefix + "-payments", 1, Map.of());
        String group = Weir.uniqueName("re2-group");
        Map<String, Object> settings = new HashMap<>(Groups.consumerProtocol(group, null));
        // RE2/J syntax; the whole topic name must match, so "-payments" stays out.
        String regex = prefix + "-orders-[a-z]+";
        try (MemberThread member = MemberThread.withSubscriptionPattern("re2", regex, settings)) {
            Set<TopicPartition> matching = Set.of(
                    new TopicPartition(prefix + "-orders-a", 0),
                    new TopicPartition(prefix + "-orders-a", 1));
            Weir.waitUntil(Groups.REBALANCE_TIMEOUT, () -> member.ownedTopicPartitions().equals(matching), member::toString);

            // The broker resolves a group's expressions again at most every 10 s.
            Weir.createTopicNamed(prefix + "-orders-b", 1, Map.of());
            Set<TopicPartition> grown = new java.util.HashSet<>(matching);
            grown.add(new TopicPartition(prefix + "-orders-b", 0));
            Weir.waitUntil(Groups.REBALANCE_TIMEOUT, () -> member.ownedTopicPartitions().equals(grown), member::toString);

            try (KafkaProducer<byte[], byte[]> producer = Weir.producer(Map.of())) {
                Weir.produceAll(producer, List.of(
                        new ProducerRecord<>(prefix + "-orders-b", 0, null, "late".getBytes()),
                        new ProducerRecord<>(prefix + "-payments", 0, null, "unmatched".getBytes())));
            }
            Weir.waitUntil(Weir.TIMEOUT, () -> member.values().contains("late"), member::toString);
            org.junit.jupiter.api.Assertions.assertFalse(member.values().contains("unmatched"), member.toString());
        }
    }
}
