package dev.weir.compat;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.atomic.AtomicReference;
import java.util.stream.Collectors;
import java.util.stream.IntStream;
import java.util.stream.LongStream;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ListOffsetsOptions;
import org.apache.kafka.clients.admin.ListOffsetsResult.ListOffsetsResultInfo;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.IsolationLevel;
import org.apache.kafka.common.TopicPartition;
import org.junit.jupiter.api.Test;

/** Consumers without group membership: assign, seek, pause/resume, commits; read_committed. */
class ConsumerTest {

    @Test
    void assignedConsumerSeeksPausesResumesAndCommits() {
        String topic = Weir.createTopic("assign", 2);
        Weir.produceValues(topic, 2, 40); // 20 records per partition: even values on 0, odd on 1
        TopicPartition p0 = new TopicPartition(topic, 0);
        TopicPartition p1 = new TopicPartition(topic, 1);
        String group = Weir.uniqueName("assign-group");
        try (KafkaConsumer<byte[], byte[]> consumer = Weir.consumer(Map.of(ConsumerConfig.GROUP_ID_CONFIG, group))) {
            consumer.assign(List.of(p0, p1));
            assertEquals(Map.of(p0, 0L, p1, 0L), consumer.beginningOffsets(List.of(p0, p1)));
            assertEquals(Map.of(p0, 20L, p1, 20L), consumer.endOffsets(List.of(p0, p1)));
            consumer.seek(p0, 15);
            consumer.pause(List.of(p1));
            assertEquals(Set.of(p1), consumer.paused());
            List<ConsumerRecord<byte[], byte[]>> read = pollUntil(consumer, p0, 20);
            assertEquals(LongStream.range(15, 20).boxed().collect(Collectors.toList()), offsetsOf(read, p0));
            assertEquals(List.of(), offsetsOf(read, p1), "a paused partition returned records");
            assertEquals("v30", new String(read.get(0).value()));

            consumer.resume(List.of(p1));
            consumer.seek(p1, 3);
            read = pollUntil(consumer, p1, 20);
            assertEquals(LongStream.range(3, 20).boxed().collect(Collectors.toList()), offsetsOf(read, p1));

            consumer.seekToBeginning(List.of(p0));
            assertEquals(0L, consumer.position(p0));
            consumer.seekToEnd(List.of(p0));
            assertEquals(20L, consumer.position(p0));

            AtomicReference<Object> callback = new AtomicReference<>();
            consumer.commitAsync(Map.of(p0, new OffsetAndMetadata(20, "async")), (offsets, exception) ->
                    callback.set(exception == null ? offsets : exception));
            consumer.commitSync(Map.of(p1, new OffsetAndMetadata(7, "sync")));
            // commitSync completes the earlier commitAsync first and runs its callback.
            assertEquals(Map.of(p0, new OffsetAndMetadata(20, "async")), callback.get());
            Map<TopicPartition, OffsetAndMetadata> committed = consumer.committed(Set.of(p0, p1));
            assertEquals(20L, committed.get(p0).offset());
            assertEquals("async", committed.get(p0).metadata());
            assertEquals(7L, committed.get(p1).offset());
            assertEquals("sync", committed.get(p1).metadata());
        }
        // A new consumer of the same group starts at the committed positions.
        try (KafkaConsumer<byte[], byte[]> consumer = Weir.consumer(Map.of(ConsumerConfig.GROUP_ID_CONFIG, group))) {
            consumer.assign(List.of(p0, p1));
            assertEquals(20L, consumer.position(p0));
            assertEquals(7L, consumer.position(p1));
            List<ConsumerRecord<byte[], byte[]>> read = pollUntil(consumer, p1, 20);
            assertEquals(LongStream.range(7, 20).boxed().collect(Collectors.toList()), offsetsOf(read, p1));
        }
    }

    @Test
    void readCommittedConsumerReadsEverythingProduced() {
        int partitions = 3;
        String topic = Weir.createTopic("read-committed", partitions);
        Weir.produceValues(topic, partitions, 300);
        Map<String, Object> readCommitted = Map.of(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        Map<Integer, List<ConsumerRecord<byte[], byte[]>>> stored = Weir.readAll(topic, partitions, readCommitted);
        for (int partition = 0; partition < partitions; partition++) {
            List<String> expected = new ArrayList<>();
            for (int i = partition; i < 300; i += partitions) {
                expected.add("v" + i);
            }
            List<String> values = stored.get(partition).stream()
                    .map(r -> new String(r.value()))
                    .collect(Collectors.toList());
            assertEquals(expected, values, "partition " + partition);
        }
        // With no transactions the last stable offset is the high watermark.
        try (Admin admin = Weir.admin()) {
            Map<TopicPartition, OffsetSpec> latest = Weir.allPartitions(topic, partitions).stream()
                    .collect(Collectors.toMap(tp -> tp, tp -> OffsetSpec.latest()));
            Map<TopicPartition, ListOffsetsResultInfo> committed = Weir.get(
                    admin.listOffsets(latest, new ListOffsetsOptions(IsolationLevel.READ_COMMITTED)).all());
            committed.values().forEach(info -> assertEquals(100L, info.offset()));
        }
    }

    @Test
    void subscribedReadCommittedGroupMemberReadsEverything() {
        String topic = Weir.createTopic("read-committed-group", 2);
        Weir.produceValues(topic, 2, 50);
        Map<String, Object> settings = new java.util.HashMap<>(Groups.classic(Weir.uniqueName("rc-group"), "range"));
        settings.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        try (MemberThread member = new MemberThread("rc", List.of(topic), settings)) {
            Weir.waitUntil(Weir.TIMEOUT, () -> member.records.size() >= 50, member::toString);
            assertEquals(
                    IntStream.range(0, 50).mapToObj(i -> "v" + i).collect(Collectors.toSet()),
                    Set.copyOf(member.values()));
            assertEquals(50, member.records.size());
        }
    }

    /** Polls until the consumer's position on `partition` reaches `end`; returns every record read. */
    private static List<ConsumerRecord<byte[], byte[]>> pollUntil(
            KafkaConsumer<byte[], byte[]> consumer, TopicPartition partition, long end) {
        List<ConsumerRecord<byte[], byte[]>> read = new ArrayList<>();
        long deadline = System.nanoTime() + Weir.TIMEOUT.toNanos();
        while (consumer.position(partition) < end) {
            assertTrue(System.nanoTime() < deadline, "position of " + partition + " stuck at " + consumer.position(partition));
            consumer.poll(Duration.ofMillis(200)).forEach(read::add);
        }
        return read;
    }

    private static List<Long> offsetsOf(List<ConsumerRecord<byte[], byte[]>> records, TopicPartition partition) {
        return records.stream()
                .filter(r -> r.partition() == partition.partition())
                .map(ConsumerRecord::offset)
                .collect(Collectors.toList());
    }
}
