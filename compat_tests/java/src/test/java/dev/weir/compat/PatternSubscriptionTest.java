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
 * metadata and subscribes to what matches, a topic created later included. (KIP-848's
 * broker-side SubscriptionPattern is not served by Weir; see docs/java.md.)
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
}
