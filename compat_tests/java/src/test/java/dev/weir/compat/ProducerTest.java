package dev.weir.compat;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.TreeMap;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.record.TimestampType;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/** Producers with the client's defaults (idempotent, acks=all) and every codec; read back exactly. */
class ProducerTest {
    // Recent: a record older than the topic's retention.ms (7 days) may be deleted by retention.
    private static final long TIMESTAMP_BASE_MS = System.currentTimeMillis() - 3_600_000L;

    @ParameterizedTest(name = "compression.type={0}")
    @ValueSource(strings = {"none", "gzip", "snappy", "lz4", "zstd"})
    void idempotentProducerStoresEveryRecordOnceInOrderWithEachCodec(String codec) {
        int partitions = 3;
        String topic = Weir.createTopic("codec-" + codec, partitions);
        List<ProducerRecord<byte[], byte[]>> records = new ArrayList<>();
        for (int i = 0; i < 600; i++) {
            records.add(varied(topic, i, partitions));
        }
        Map<String, Object> settings = Map.of(ProducerConfig.COMPRESSION_TYPE_CONFIG, codec, ProducerConfig.LINGER_MS_CONFIG, 20);
        sendAndReadBack(topic, partitions, records, settings);
    }

    @Test
    void defaultProducerSettingsAreIdempotentWithAcksAll() {
        // What the tests below rely on: nothing set means enable.idempotence=true, acks=all.
        ProducerConfig config = new ProducerConfig(Weir.producerConfig(Map.of()));
        assertEquals(true, config.getBoolean(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG));
        String acks = config.getString(ProducerConfig.ACKS_CONFIG);
        assertTrue(acks.equals("all") || acks.equals("-1"), "default acks: " + acks);
        assertEquals(5, config.getInt(ProducerConfig.MAX_IN_FLIGHT_REQUESTS_PER_CONNECTION));
        int partitions = 2;
        String topic = Weir.createTopic("defaults", partitions);
        List<ProducerRecord<byte[], byte[]>> records = new ArrayList<>();
        for (int i = 0; i < 200; i++) {
            records.add(varied(topic, i, partitions));
        }
        sendAndReadBack(topic, partitions, records, Map.of());
    }

    @Test
    void largeBatchesOfAboutOneMebibyteArriveIntact() {
        int partitions = 2;
        String topic = Weir.createTopic("large-batches", partitions);
        Random random = new Random(42);
        List<ProducerRecord<byte[], byte[]>> records = new ArrayList<>();
        for (int i = 0; i < 240; i++) {
            byte[] value = new byte[16 * 1024];
            random.nextBytes(value);
            records.add(new ProducerRecord<>(topic, i % partitions, ("k" + i).getBytes(StandardCharsets.UTF_8), value));
        }
        Map<String, Object> settings = Map.of(
                ProducerConfig.BATCH_SIZE_CONFIG, 1_000_000,
                ProducerConfig.LINGER_MS_CONFIG, 200,
                ProducerConfig.MAX_REQUEST_SIZE_CONFIG, 4 * 1024 * 1024,
                ProducerConfig.BUFFER_MEMORY_CONFIG, 32 * 1024 * 1024);
        sendAndReadBack(topic, partitions, records, settings);
    }

    @Test
    void oneRecordBatchesWithFiveRequestsInFlightStayInOrder() {
        int partitions = 2;
        String topic = Weir.createTopic("small-batches", partitions);
        List<ProducerRecord<byte[], byte[]>> records = new ArrayList<>();
        for (int i = 0; i < 800; i++) {
            records.add(varied(topic, i, partitions));
        }
        Map<String, Object> settings = Map.of(
                ProducerConfig.BATCH_SIZE_CONFIG, 0, // no batching: every record is its own batch
                ProducerConfig.LINGER_MS_CONFIG, 0,
                ProducerConfig.MAX_IN_FLIGHT_REQUESTS_PER_CONNECTION, 5,
                ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, true,
                ProducerConfig.ACKS_CONFIG, "all");
        sendAndReadBack(topic, partitions, records, settings);
    }

    /**
     * Record i: a key (null every 7th), a value (null every 11th, empty every 13th), headers
     * (none every 5th; a repeated key and a null header value on others), an explicit timestamp
     * on even records, an explicit partition on records not divisible by 3 (the partitioner
     * places the others).
     */
    private static ProducerRecord<byte[], byte[]> varied(String topic, int i, int partitions) {
        byte[] key = i % 7 == 0 ? null : ("key-" + (i % 17)).getBytes(StandardCharsets.UTF_8);
        byte[] value = i % 11 == 0 ? null : i % 13 == 0 ? new byte[0] : ("value-" + i + "-" + "x".repeat(i % 50)).getBytes(StandardCharsets.UTF_8);
        List<Header> headers = new ArrayList<>();
        if (i % 5 != 0) {
            headers.add(new RecordHeader("index", Integer.toString(i).getBytes(StandardCharsets.UTF_8)));
            headers.add(new RecordHeader("trace", new byte[] {1, 2, (byte) i}));
            headers.add(new RecordHeader("index", "again".getBytes(StandardCharsets.UTF_8)));
            headers.add(new RecordHeader("empty", null));
        }
        Integer partition = i % 3 == 0 ? null : i % partitions;
        Long timestamp = i % 2 == 0 ? TIMESTAMP_BASE_MS + i : null;
        return new ProducerRecord<>(topic, partition, timestamp, key, value, headers);
    }

    /** Sends, then reads every partition back and checks offsets, keys, values, headers, timestamps. */
    private static void sendAndReadBack(
            String topic, int partitions, List<ProducerRecord<byte[], byte[]>> records, Map<String, Object> settings) {
        List<RecordMetadata> acknowledged;
        try (KafkaProducer<byte[], byte[]> producer = Weir.producer(settings)) {
            acknowledged = Weir.produceAll(producer, records);
        }
        Map<Integer, List<Integer>> sentByPartition = new TreeMap<>();
        for (int i = 0; i < records.size(); i++) {
            sentByPartition.computeIfAbsent(acknowledged.get(i).partition(), p -> new ArrayList<>()).add(i);
        }
        Map<String, Object> consumerSettings = new HashMap<>();
        consumerSettings.put("max.partition.fetch.bytes", 2 * 1024 * 1024);
        Map<Integer, List<ConsumerRecord<byte[], byte[]>>> stored = Weir.readAll(topic, partitions, consumerSettings);
        int total = 0;
        for (int partition = 0; partition < partitions; partition++) {
            List<Integer> sent = sentByPartition.getOrDefault(partition, List.of());
            List<ConsumerRecord<byte[], byte[]>> read = stored.get(partition);
            Weir.assertOffsetsDense(read, 0);
            assertEquals(sent.size(), read.size(), "records in partition " + partition);
            for (int n = 0; n < sent.size(); n++) {
                int i = sent.get(n);
                assertSame(records.get(i), acknowledged.get(i), read.get(n), "record " + i);
            }
            total += read.size();
        }
        assertEquals(records.size(), total);
    }

    private static void assertSame(
            ProducerRecord<byte[], byte[]> sent, RecordMetadata metadata, ConsumerRecord<byte[], byte[]> read, String what) {
        assertEquals(metadata.offset(), read.offset(), what + ": offset the producer was told");
        assertArrayEquals(sent.key(), read.key(), what + ": key");
        assertArrayEquals(sent.value(), read.value(), what + ": value");
        assertEquals(TimestampType.CREATE_TIME, read.timestampType(), what + ": timestamp type");
        if (sent.timestamp() != null) {
            assertEquals(sent.timestamp().longValue(), read.timestamp(), what + ": timestamp");
        }
        assertEquals(metadata.timestamp(), read.timestamp(), what + ": timestamp the producer was told");
        Header[] sentHeaders = sent.headers().toArray();
        Header[] readHeaders = read.headers().toArray();
        assertEquals(sentHeaders.length, readHeaders.length, what + ": header count");
        for (int h = 0; h < sentHeaders.length; h++) {
            assertEquals(sentHeaders[h].key(), readHeaders[h].key(), what + ": header key " + h);
            assertArrayEquals(sentHeaders[h].value(), readHeaders[h].value(), what + ": header value " + h);
        }
    }
}
