package dev.weir.compat;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.DescribeClusterOptions;
import org.apache.kafka.clients.admin.DescribeConsumerGroupsOptions;
import org.apache.kafka.clients.admin.DescribeTopicsOptions;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.acl.AclOperation;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.errors.InvalidConfigurationException;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Kafka behaviours a client library's own suite found missing (issue 10): topic-level
 * compression.type with recompression, KIP-430 authorized operations, and KIP-848 group configs.
 */
class BrokerFeaturesTest {
    private static final int RECORD_COUNT = 200;

    /** The broker rewrites gzip batches into the topic's codec; the Java consumer must read them
     * (lz4 included: Java reads only lz4 frames of independent blocks). */
    @ParameterizedTest(name = "compression.type={0}")
    @ValueSource(strings = {"lz4", "zstd", "snappy", "uncompressed"})
    void aTopicsCompressionTypeIsAppliedAndItsBatchesReadBack(String codec) {
        String topic = Weir.createTopic("codec-" + codec, 1, Map.of("compression.type", codec));
        List<ProducerRecord<byte[], byte[]>> sent = new ArrayList<>();
        for (int i = 0; i < RECORD_COUNT; i++) {
            byte[] value = ("value " + i + " " + "x".repeat(i % 50)).getBytes(StandardCharsets.UTF_8);
            sent.add(new ProducerRecord<>(topic, 0, ("k" + i).getBytes(StandardCharsets.UTF_8), value));
        }
        try (KafkaProducer<byte[], byte[]> producer = Weir.producer(Map.of(ProducerConfig.COMPRESSION_TYPE_CONFIG, "gzip"))) {
            Weir.produceAll(producer, sent);
        }

        List<ConsumerRecord<byte[], byte[]>> read = Weir.readAll(topic, 1, Map.of()).get(0);
        assertEquals(RECORD_COUNT, read.size());
        for (int i = 0; i < RECORD_COUNT; i++) {
            assertEquals(i, read.get(i).offset());
            assertArrayEquals(sent.get(i).key(), read.get(i).key());
            assertArrayEquals(sent.get(i).value(), read.get(i).value());
        }
        try (Admin admin = Weir.admin()) {
            ConfigResource resource = new ConfigResource(ConfigResource.Type.TOPIC, topic);
            Config config = Weir.get(admin.describeConfigs(List.of(resource)).all()).get(resource);
            assertEquals(codec, config.get("compression.type").value());
        }
    }

    @Test
    void authorizedOperationsAreTheFullSetWhenAskedFor() {
        String topic = Weir.createTopic("acl-ops", 1);
        String group = Weir.uniqueName("acl-ops-group");
        try (KafkaConsumer<byte[], byte[]> consumer = Weir.consumer(Map.of(ConsumerConfig.GROUP_ID_CONFIG, group))) {
            TopicPartition partition = new TopicPartition(topic, 0);
            consumer.assign(List.of(partition));
            consumer.commitSync(Map.of(partition, new OffsetAndMetadata(0L)));
        }
        try (Admin admin = Weir.admin()) {
            TopicDescription description = Weir.get(admin.describeTopics(
                    List.of(topic), new DescribeTopicsOptions().includeAuthorizedOperations(true)).allTopicNames()).get(topic);
            assertEquals(Set.of(AclOperation.READ, AclOperation.WRITE, AclOperation.CREATE, AclOperation.DELETE,
                    AclOperation.ALTER, AclOperation.DESCRIBE, AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS),
                    description.authorizedOperations());

            Set<AclOperation> cluster = Weir.get(admin.describeCluster(
                    new DescribeClusterOptions().includeAuthorizedOperations(true)).authorizedOperations());
            assertNotNull(cluster);
            assertTrue(cluster.containsAll(Set.of(AclOperation.CREATE, AclOperation.ALTER, AclOperation.DESCRIBE,
                    AclOperation.CLUSTER_ACTION, AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS,
                    AclOperation.IDEMPOTENT_WRITE)), "cluster operations: " + cluster);

            ConsumerGroupDescription described = Weir.get(admin.describeConsumerGroups(
                    List.of(group), new DescribeConsumerGroupsOptions().includeAuthorizedOperations(true)).all()).get(group);
            assertEquals(Set.of(AclOperation.READ, AclOperation.DELETE, AclOperation.DESCRIBE,
                    AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS), described.authorizedOperations());
        }
    }

    /** KIP-848 group configs (ConfigResource type GROUP = 32, known to kafka-clients from 4.0). */
    @Test
    void aGroupsConsumerTimeoutsAreDescribedAndAltered() {
        ConfigResource.Type groupType = ConfigResource.Type.forId((byte) 32);
        Assumptions.assumeTrue(groupType != ConfigResource.Type.UNKNOWN, "this client has no GROUP config resource");
        ConfigResource resource = new ConfigResource(groupType, Weir.uniqueName("configured-group"));
        try (Admin admin = Weir.admin()) {
            Weir.get(admin.incrementalAlterConfigs(Map.of(resource, List.of(new AlterConfigOp(
                    new ConfigEntry("consumer.session.timeout.ms", "50000"), AlterConfigOp.OpType.SET)))).all());
            Config config = Weir.get(admin.describeConfigs(List.of(resource)).all()).get(resource);
            ConfigEntry session = config.get("consumer.session.timeout.ms");
            assertEquals("50000", session.value());
            assertEquals("DYNAMIC_GROUP_CONFIG", session.source().name());
            assertNotNull(config.get("consumer.heartbeat.interval.ms"));

            Throwable refused = Weir.failure(admin.incrementalAlterConfigs(Map.of(resource, List.of(new AlterConfigOp(
                    new ConfigEntry("consumer.session.timeout.ms", "1"), AlterConfigOp.OpType.SET)))).all());
            assertInstanceOf(InvalidConfigurationException.class, refused);
        }
    }
}
