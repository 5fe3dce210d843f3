package dev.weir.compat;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.stream.Collectors;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.ConsumerGroupListing;
import org.apache.kafka.clients.admin.CreateTopicsOptions;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.clients.admin.ListOffsetsResult.ListOffsetsResultInfo;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.errors.GroupNotEmptyException;
import org.apache.kafka.common.errors.InvalidPartitionsException;
import org.apache.kafka.common.errors.TopicExistsException;
import org.apache.kafka.common.errors.UnknownTopicOrPartitionException;
import org.junit.jupiter.api.Test;

/** The AdminClient: topics, partitions, configs, offsets, records, the cluster, consumer groups. */
class AdminTest {
    // Recent: a record older than the topic's retention.ms (7 days) may be deleted by retention.
    private static final long TIMESTAMP_BASE_MS = System.currentTimeMillis() - 3_600_000L;

    @Test
    void createsDescribesGrowsAndDeletesTopics() {
        String plain = Weir.uniqueName("admin-plain");
        String configured = Weir.uniqueName("admin-configured");
        try (Admin admin = Weir.admin()) {
            NewTopic first = new NewTopic(plain, 3, (short) 1);
            NewTopic second = new NewTopic(configured, Optional.empty(), Optional.empty())
                    .configs(Map.of("retention.ms", "3600000", "cleanup.policy", "compact"));
            Weir.get(admin.createTopics(List.of(first), new CreateTopicsOptions().validateOnly(true)).all());
            assertFalse(Weir.get(admin.listTopics().names()).contains(plain), "validateOnly created the topic");
            Weir.get(admin.createTopics(List.of(first, second)).all());
            assertInstanceOf(TopicExistsException.class, Weir.failure(admin.createTopics(List.of(first)).all()));

            assertTrue(Weir.get(admin.listTopics().names()).containsAll(Set.of(plain, configured)));
            Node node = Weir.get(admin.describeCluster().nodes()).iterator().next();
            Map<String, TopicDescription> described = Weir.get(admin.describeTopics(List.of(plain, configured)).allTopicNames());
            TopicDescription description = described.get(plain);
            assertEquals(3, description.partitions().size());
            assertEquals(1, described.get(configured).partitions().size(), "the broker's default partition count");
            assertNotEquals(Uuid.ZERO_UUID, description.topicId());
            assertFalse(description.isInternal());
            for (TopicPartitionInfo partition : description.partitions()) {
                assertEquals(node.id(), partition.leader().id());
                assertEquals(List.of(node.id()), ids(partition.replicas()));
                assertEquals(List.of(node.id()), ids(partition.isr()));
            }
            // By topic id, as the 3.x+ admin can.
            Map<Uuid, TopicDescription> byId = Weir.get(admin.describeTopics(
                    org.apache.kafka.common.TopicCollection.ofTopicIds(List.of(description.topicId()))).allTopicIds());
            assertEquals(plain, byId.get(description.topicId()).name());

            Weir.get(admin.createPartitions(Map.of(plain, NewPartitions.increaseTo(5))).all());
            assertEquals(5, Weir.get(admin.describeTopics(List.of(plain)).allTopicNames()).get(plain).partitions().size());
            assertInstanceOf(InvalidPartitionsException.class,
                    Weir.failure(admin.createPartitions(Map.of(plain, NewPartitions.increaseTo(2))).all()));

            Weir.get(admin.deleteTopics(List.of(plain, configured)).all());
            Weir.waitUntil(Weir.TIMEOUT, () -> {
                Set<String> names = Weir.get(admin.listTopics().names());
                return !names.contains(plain) && !names.contains(configured);
            }, () -> "deleted topics still listed");
            assertInstanceOf(UnknownTopicOrPartitionException.class,
                    Weir.failure(admin.describeTopics(List.of(plain)).allTopicNames()));
        }
    }

    @Test
    void describesAndIncrementallyAltersTopicConfigs() {
        String topic = Weir.createTopic("admin-configs", 1, Map.of("retention.ms", "3600000"));
        ConfigResource resource = new ConfigResource(ConfigResource.Type.TOPIC, topic);
        try (Admin admin = Weir.admin()) {
            Config config = describe(admin, resource);
            ConfigEntry retention = config.get("retention.ms");
            assertEquals("3600000", retention.value());
            assertEquals(ConfigEntry.ConfigSource.DYNAMIC_TOPIC_CONFIG, retention.source());
            assertFalse(retention.isDefault());
            ConfigEntry cleanup = config.get("cleanup.policy");
            assertEquals("delete", cleanup.value());
            assertTrue(cleanup.isDefault());

            Collection<AlterConfigOp> changes = List.of(
                    new AlterConfigOp(new ConfigEntry("retention.ms", null), AlterConfigOp.OpType.DELETE),
                    new AlterConfigOp(new ConfigEntry("segment.bytes", "1048576"), AlterConfigOp.OpType.SET),
                    new AlterConfigOp(new ConfigEntry("cleanup.policy", "compact"), AlterConfigOp.OpType.APPEND));
            Weir.get(admin.incrementalAlterConfigs(Map.of(resource, changes)).all());
            config = describe(admin, resource);
            assertEquals("604800000", config.get("retention.ms").value());
            assertTrue(config.get("retention.ms").isDefault());
            assertEquals("1048576", config.get("segment.bytes").value());
            assertEquals(ConfigEntry.ConfigSource.DYNAMIC_TOPIC_CONFIG, config.get("segment.bytes").source());
            assertEquals("delete,compact", config.get("cleanup.policy").value());

            // The broker's own configs are described too (static: read-only here).
            Node node = Weir.get(admin.describeCluster().nodes()).iterator().next();
            Config brokerConfig = describe(admin, new ConfigResource(ConfigResource.Type.BROKER, node.idString()));
            assertFalse(brokerConfig.entries().isEmpty(), "the broker described no configs");
        }
    }

    @Test
    void listsOffsetsByEarliestLatestTimestampAndMaxTimestamp() {
        String topic = Weir.createTopic("admin-offsets", 2);
        TopicPartition p0 = new TopicPartition(topic, 0);
        TopicPartition p1 = new TopicPartition(topic, 1);
        long[] timestampDeltas = {0, 5_000, 2_000, 1_000};
        try (KafkaProducer<byte[], byte[]> producer = Weir.producer(Map.of())) {
            // One batch per record: the max timestamp's offset is exact, not a batch's last offset.
            for (int i = 0; i < timestampDeltas.length; i++) {
                Weir.produceAll(producer, List.of(new ProducerRecord<>(
                        topic, 0, TIMESTAMP_BASE_MS + timestampDeltas[i], null, ("r" + i).getBytes())));
            }
        }
        try (Admin admin = Weir.admin()) {
            assertEquals(0L, offset(admin, p0, OffsetSpec.earliest()).offset());
            assertEquals(4L, offset(admin, p0, OffsetSpec.latest()).offset());
            assertEquals(0L, offset(admin, p1, OffsetSpec.latest()).offset());
            // The first record at or after the timestamp: offset 1 (base + 5 s).
            ListOffsetsResultInfo byTime = offset(admin, p0, OffsetSpec.forTimestamp(TIMESTAMP_BASE_MS + 1_500));
            assertEquals(1L, byTime.offset());
            assertEquals(TIMESTAMP_BASE_MS + 5_000, byTime.timestamp());
            assertEquals(0L, offset(admin, p0, OffsetSpec.forTimestamp(TIMESTAMP_BASE_MS)).offset());
            assertEquals(-1L, offset(admin, p0, OffsetSpec.forTimestamp(TIMESTAMP_BASE_MS + 9_000)).offset());
            ListOffsetsResultInfo max = offset(admin, p0, OffsetSpec.maxTimestamp());
            assertEquals(1L, max.offset());
            assertEquals(TIMESTAMP_BASE_MS + 5_000, max.timestamp());

            // deleteRecords moves the log start: earliest follows.
            long low = Weir.get(admin.deleteRecords(Map.of(p0, RecordsToDelete.beforeOffset(2)))
                    .lowWatermarks().get(p0)).lowWatermark();
            assertEquals(2L, low);
            assertEquals(2L, offset(admin, p0, OffsetSpec.earliest()).offset());
            assertEquals(4L, offset(admin, p0, OffsetSpec.latest()).offset());
            assertEquals(2L, offset(admin, p0, OffsetSpec.forTimestamp(TIMESTAMP_BASE_MS)).offset());
        }
    }

    @Test
    void earliestLocalIsTheLogStartAndNothingIsTiered() {
        // ListOffsets v8 (EARLIEST_LOCAL, -4) and v9 (LATEST_TIERED, -5): without remote
        // storage the local log starts at the log start, and no offset is tiered.
        String topic = Weir.createTopic("admin-tiered-offsets", 1);
        TopicPartition p0 = new TopicPartition(topic, 0);
        try (KafkaProducer<byte[], byte[]> producer = Weir.producer(Map.of())) {
            for (int i = 0; i < 4; i++) {
                Weir.produceAll(producer, List.of(new ProducerRecord<>(
                        topic, 0, TIMESTAMP_BASE_MS + i, null, ("r" + i).getBytes())));
            }
        }
        try (Admin admin = Weir.admin()) {
            ListOffsetsResultInfo earliest = offset(admin, p0, OffsetSpec.earliest());
            ListOffsetsResultInfo earliestLocal = offset(admin, p0, OffsetSpec.earliestLocal());
            assertEquals(0L, earliestLocal.offset());
            assertEquals(-1L, earliestLocal.timestamp());
            assertEquals(earliest.leaderEpoch(), earliestLocal.leaderEpoch());
            assertEquals(Optional.of(0), earliestLocal.leaderEpoch());

            ListOffsetsResultInfo latestTiered = offset(admin, p0, OffsetSpec.latestTiered());
            assertEquals(-1L, latestTiered.offset());
            assertEquals(-1L, latestTiered.timestamp());
            assertEquals(Optional.empty(), latestTiered.leaderEpoch());
            if (hasEarliestPendingUpload()) {
                // ListOffsets v11 (EARLIEST_PENDING_UPLOAD, -6): nothing awaits upload.
                // OffsetSpec.earliestPendingUpload() is new in 4.3; the suite also compiles against 3.9.
                ListOffsetsResultInfo pending = offset(admin, p0, earliestPendingUpload());
                assertEquals(-1L, pending.offset());
                assertEquals(-1L, pending.timestamp());
                assertEquals(Optional.empty(), pending.leaderEpoch());
            }

            // deleteRecords moves the log start, and with it the local log start.
            Weir.get(admin.deleteRecords(Map.of(p0, RecordsToDelete.beforeOffset(3))).all());
            assertEquals(3L, offset(admin, p0, OffsetSpec.earliestLocal()).offset());
            assertEquals(-1L, offset(admin, p0, OffsetSpec.latestTiered()).offset());
        }
    }

    @Test
    void describesTheCluster() {
        try (Admin admin = Weir.admin()) {
            DescribeClusterResult cluster = admin.describeCluster();
            Collection<Node> nodes = Weir.get(cluster.nodes());
            assertEquals(1, nodes.size());
            Node node = nodes.iterator().next();
            assertEquals(Weir.bootstrap(), node.host() + ":" + node.port());
            assertEquals(node.id(), Weir.get(cluster.controller()).id());
            String clusterId = Weir.get(cluster.clusterId());
            assertNotNull(clusterId);
            assertFalse(clusterId.isEmpty());
        }
    }

    @Test
    @SuppressWarnings({"deprecation", "removal"}) // listConsumerGroups and state(): deprecated in 4.x, what 3.9 has
    void listsDescribesAltersAndDeletesConsumerGroupsAndTheirOffsets() {
        String topic = Weir.createTopic("admin-groups", 2);
        Weir.produceValues(topic, 2, 20);
        TopicPartition p0 = new TopicPartition(topic, 0);
        TopicPartition p1 = new TopicPartition(topic, 1);
        String group = Weir.uniqueName("admin-group");
        try (KafkaConsumer<byte[], byte[]> consumer = Weir.consumer(Map.of(ConsumerConfig.GROUP_ID_CONFIG, group))) {
            consumer.assign(List.of(p0, p1));
            consumer.commitSync(Map.of(p0, new OffsetAndMetadata(4, "m0"), p1, new OffsetAndMetadata(6)));
        }
        try (Admin admin = Weir.admin()) {
            Collection<ConsumerGroupListing> listed = Weir.get(admin.listConsumerGroups().all());
            assertTrue(listed.stream().anyMatch(g -> g.groupId().equals(group)), "group not listed: " + listed);
            ConsumerGroupDescription description = Weir.get(admin.describeConsumerGroups(List.of(group)).all()).get(group);
            assertEquals("Empty", description.state().toString(), description.toString());
            assertTrue(description.members().isEmpty());

            assertEquals(Map.of(p0, new OffsetAndMetadata(4, "m0"), p1, new OffsetAndMetadata(6)),
                    Weir.get(admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata()));
            Weir.get(admin.alterConsumerGroupOffsets(group, Map.of(p0, new OffsetAndMetadata(9))).all());
            assertEquals(9L, committed(admin, group).get(p0));
            Weir.get(admin.deleteConsumerGroupOffsets(group, Set.of(p1)).all());
            assertEquals(Map.of(p0, 9L), committed(admin, group));

            // A group with a live member cannot be deleted.
            try (MemberThread member = new MemberThread("m", List.of(topic), Groups.classic(group, "range"))) {
                Groups.awaitOwns(member, Set.of(0, 1));
                ConsumerGroupDescription active = Weir.get(admin.describeConsumerGroups(List.of(group)).all()).get(group);
                assertEquals("Stable", active.state().toString(), active.toString());
                assertEquals(1, active.members().size());
                assertInstanceOf(GroupNotEmptyException.class,
                        Weir.failure(admin.deleteConsumerGroups(List.of(group)).all()));
            }
            Weir.get(admin.deleteConsumerGroups(List.of(group)).all());
            assertFalse(Weir.get(admin.listConsumerGroups().all()).stream().anyMatch(g -> g.groupId().equals(group)));
            assertEquals(Map.of(), committed(admin, group));
        }
    }

    private static Map<TopicPartition, Long> committed(Admin admin, String group) {
        return Weir.get(admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata()).entrySet().stream()
                .filter(e -> e.getValue() != null)
                .collect(Collectors.toMap(Map.Entry::getKey, e -> e.getValue().offset()));
    }

    /** kafka-clients 4.3+ (KIP-1023). */
    private static boolean hasEarliestPendingUpload() {
        String[] version = Weir.clientVersion().split("\\.");
        int major = Integer.parseInt(version[0]);
        return major > 4 || (major == 4 && Integer.parseInt(version[1]) >= 3);
    }

    private static OffsetSpec earliestPendingUpload() {
        try {
            return (OffsetSpec) OffsetSpec.class.getMethod("earliestPendingUpload").invoke(null);
        } catch (ReflectiveOperationException e) {
            throw new AssertionError("kafka-clients " + Weir.clientVersion() + " has no earliestPendingUpload()", e);
        }
    }

    private static ListOffsetsResultInfo offset(Admin admin, TopicPartition partition, OffsetSpec spec) {
        return Weir.get(admin.listOffsets(Map.of(partition, spec)).partitionResult(partition));
    }

    private static Config describe(Admin admin, ConfigResource resource) {
        return Weir.get(admin.describeConfigs(List.of(resource)).all()).get(resource);
    }

    private static List<Integer> ids(List<Node> nodes) {
        return nodes.stream().map(Node::id).collect(Collectors.toList());
    }
}
