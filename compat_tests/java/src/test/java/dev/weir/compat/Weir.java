package dev.weir.compat;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.fail;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.UUID;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.function.BooleanSupplier;
import java.util.function.Supplier;
import java.util.stream.Collectors;
import java.util.stream.IntStream;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.KafkaFuture;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/** The broker under test (from -Dweir.bootstrap) and the clients every test builds on it. */
final class Weir {
    static final Duration TIMEOUT = Duration.ofSeconds(30);

    private Weir() {}

    /** host:port of the Weir under test; fails the calling test when it was not given. */
    static String bootstrap() {
        String bootstrap = System.getProperty("weir.bootstrap", "");
        if (bootstrap.isBlank()) {
            fail("no broker to test: run with -Dweir.bootstrap=HOST:PORT (compat_tests/test_java_client.py does)");
        }
        return bootstrap;
    }

    /** The kafka-clients version on the classpath, as the client reports it. */
    static String clientVersion() {
        // kafka-clients' own version file (AppInfoParser moved to an internal package in 4.x).
        try (java.io.InputStream in = Weir.class.getResourceAsStream("/kafka/kafka-version.properties")) {
            java.util.Properties properties = new java.util.Properties();
            properties.load(java.util.Objects.requireNonNull(in, "kafka/kafka-version.properties is missing"));
            return properties.getProperty("version");
        } catch (java.io.IOException e) {
            throw new java.io.UncheckedIOException(e);
        }
    }

    static int clientMajorVersion() {
        return Integer.parseInt(clientVersion().split("\\.")[0]);
    }

    /** True for clients where KIP-848's group.protocol=consumer is generally available (4.0+). */
    static boolean consumerGroupProtocolAvailable() {
        return clientMajorVersion() >= 4;
    }

    static String uniqueName(String prefix) {
        return prefix + "-" + UUID.randomUUID().toString().replace("-", "").substring(0, 10);
    }

    static Admin admin() {
        Map<String, Object> config = new HashMap<>();
        config.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap());
        config.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, (int) TIMEOUT.toMillis());
        config.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, 15_000);
        return Admin.create(config);
    }

    static String createTopic(String prefix, int partitions) {
        return createTopic(prefix, partitions, Map.of());
    }

    static String createTopic(String prefix, int partitions, Map<String, String> configs) {
        String name = uniqueName(prefix);
        createTopicNamed(name, partitions, configs);
        return name;
    }

    static void createTopicNamed(String name, int partitions, Map<String, String> configs) {
        try (Admin admin = admin()) {
            get(admin.createTopics(List.of(new NewTopic(name, partitions, (short) 1).configs(configs))).all());
        }
    }

    /** Producer settings: the client's defaults (idempotent, acks=all) plus `overrides`. */
    static Map<String, Object> producerConfig(Map<String, Object> overrides) {
        Map<String, Object> config = new HashMap<>();
        config.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap());
        config.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        config.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        config.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, 30_000);
        config.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, 15_000);
        config.putAll(overrides);
        return config;
    }

    static KafkaProducer<byte[], byte[]> producer(Map<String, Object> overrides) {
        return new KafkaProducer<>(producerConfig(overrides));
    }

    static Map<String, Object> consumerConfig(Map<String, Object> overrides) {
        Map<String, Object> config = new HashMap<>();
        config.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap());
        config.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        config.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        config.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        config.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
        config.put(ConsumerConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, (int) TIMEOUT.toMillis());
        config.put(ConsumerConfig.REQUEST_TIMEOUT_MS_CONFIG, 15_000);
        config.putAll(overrides);
        return config;
    }

    static KafkaConsumer<byte[], byte[]> consumer(Map<String, Object> overrides) {
        return new KafkaConsumer<>(consumerConfig(overrides));
    }

    /** Sends every record and waits for all acknowledgements; returns their metadata in send order. */
    static List<RecordMetadata> produceAll(
            KafkaProducer<byte[], byte[]> producer, List<ProducerRecord<byte[], byte[]>> records) {
        List<java.util.concurrent.Future<RecordMetadata>> futures = new ArrayList<>();
        for (ProducerRecord<byte[], byte[]> record : records) {
            futures.add(producer.send(record));
        }
        producer.flush();
        List<RecordMetadata> acknowledged = new ArrayList<>();
        for (java.util.concurrent.Future<RecordMetadata> future : futures) {
            try {
                acknowledged.add(future.get(TIMEOUT.toMillis(), TimeUnit.MILLISECONDS));
            } catch (InterruptedException | ExecutionException | TimeoutException e) {
                throw new AssertionError("a send was not acknowledged", e);
            }
        }
        return acknowledged;
    }

    /** `count` records with values "v0".."v{count-1}", record i on partition i % partitions. */
    static void produceValues(String topic, int partitions, int count) {
        List<ProducerRecord<byte[], byte[]>> records = IntStream.range(0, count)
                .mapToObj(i -> new ProducerRecord<byte[], byte[]>(topic, i % partitions, null, ("v" + i).getBytes()))
                .collect(Collectors.toList());
        try (KafkaProducer<byte[], byte[]> producer = producer(Map.of())) {
            produceAll(producer, records);
        }
    }

    /** Every record of the topic's partitions, read with assign + seekToBeginning up to the end offsets. */
    static Map<Integer, List<ConsumerRecord<byte[], byte[]>>> readAll(
            String topic, int partitions, Map<String, Object> overrides) {
        List<TopicPartition> assignment = IntStream.range(0, partitions)
                .mapToObj(p -> new TopicPartition(topic, p))
                .collect(Collectors.toList());
        Map<Integer, List<ConsumerRecord<byte[], byte[]>>> byPartition = new TreeMap<>();
        assignment.forEach(tp -> byPartition.put(tp.partition(), new ArrayList<>()));
        try (KafkaConsumer<byte[], byte[]> consumer = consumer(overrides)) {
            consumer.assign(assignment);
            consumer.seekToBeginning(assignment);
            Map<TopicPartition, Long> ends = consumer.endOffsets(assignment);
            long deadline = System.nanoTime() + TIMEOUT.toNanos();
            while (!reachedEnds(consumer, ends)) {
                if (System.nanoTime() > deadline) {
                    fail("did not read up to the end offsets " + ends + " within " + TIMEOUT);
                }
                for (ConsumerRecord<byte[], byte[]> record : consumer.poll(Duration.ofMillis(200))) {
                    byPartition.get(record.partition()).add(record);
                }
            }
        }
        return byPartition;
    }

    private static boolean reachedEnds(KafkaConsumer<byte[], byte[]> consumer, Map<TopicPartition, Long> ends) {
        return ends.entrySet().stream().allMatch(e -> consumer.position(e.getKey()) >= e.getValue());
    }

    static <T> T get(KafkaFuture<T> future) {
        try {
            return future.get(TIMEOUT.toMillis(), TimeUnit.MILLISECONDS);
        } catch (InterruptedException | TimeoutException e) {
            throw new AssertionError("no answer within " + TIMEOUT, e);
        } catch (ExecutionException e) {
            throw new AssertionError("the request failed: " + e.getCause(), e.getCause());
        }
    }

    /** The exception a future fails with (an AssertionError when it succeeds instead). */
    static Throwable failure(KafkaFuture<?> future) {
        try {
            future.get(TIMEOUT.toMillis(), TimeUnit.MILLISECONDS);
        } catch (ExecutionException e) {
            return e.getCause();
        } catch (InterruptedException | TimeoutException e) {
            throw new AssertionError("no answer within " + TIMEOUT, e);
        }
        throw new AssertionError("expected the request to fail, it succeeded");
    }

    /** Waits (polling every 50 ms) until `condition` holds; fails with `description()` after `timeout`. */
    static void waitUntil(Duration timeout, BooleanSupplier condition, Supplier<String> description) {
        long deadline = System.nanoTime() + timeout.toNanos();
        while (!condition.getAsBoolean()) {
            if (System.nanoTime() > deadline) {
                fail("not true within " + timeout + ": " + description.get());
            }
            try {
                Thread.sleep(50);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new AssertionError("interrupted while waiting", e);
            }
        }
    }

    static Set<TopicPartition> partitions(String topic, Collection<Integer> numbers) {
        return numbers.stream().map(p -> new TopicPartition(topic, p)).collect(Collectors.toSet());
    }

    static Set<TopicPartition> allPartitions(String topic, int count) {
        return IntStream.range(0, count).mapToObj(p -> new TopicPartition(topic, p)).collect(Collectors.toSet());
    }

    static void assertOffsetsDense(List<ConsumerRecord<byte[], byte[]>> records, long firstOffset) {
        for (int i = 0; i < records.size(); i++) {
            assertEquals(firstOffset + i, records.get(i).offset(), "offsets must be dense and in order");
        }
    }
}
