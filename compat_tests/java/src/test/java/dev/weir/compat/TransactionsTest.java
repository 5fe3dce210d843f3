package dev.weir.compat;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.reflect.Method;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;
import java.util.stream.IntStream;
import org.apache.kafka.clients.admin.AbortTransactionSpec;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.FinalizedVersionRange;
import org.apache.kafka.clients.admin.ListConsumerGroupOffsetsOptions;
import org.apache.kafka.clients.admin.ListOffsetsOptions;
import org.apache.kafka.clients.admin.ListTransactionsOptions;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.ProducerState;
import org.apache.kafka.clients.admin.TransactionDescription;
import org.apache.kafka.clients.admin.TransactionListing;
import org.apache.kafka.clients.admin.TransactionState;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.IsolationLevel;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.InvalidTxnStateException;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.junit.jupiter.api.Test;

/**
 * Transactions with the Java client (issue 21): commit and abort under both isolation levels,
 * the last stable offset, fencing of a zombie, consume-transform-produce with the offsets in
 * the transaction, the broker aborting a transaction that outlived its timeout, and the Admin
 * API for transactions (describe, list with filters, describe producers, abort a hanging one).
 *
 * <p>kafka-clients 4.x speaks transaction version 2 (KIP-890: every EndTxn bumps the epoch)
 * when the broker finalizes {@code transaction.version} 2; 3.9 speaks version 1.
 *
 * <p>A transaction's markers are written after EndTxn answers, so every check of what a
 * read_committed consumer sees first waits until the partitions are stable (last stable
 * offset = high watermark).
 */
class TransactionsTest {
    private static final Map<String, Object> READ_COMMITTED =
            Map.of(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
    private static final Map<String, Object> READ_UNCOMMITTED =
            Map.of(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_uncommitted");
    /** Long enough that no test's transaction times out unless it means to. */
    private static final int TRANSACTION_TIMEOUT_MS = 30_000;
    /** The timed-out transaction's timeout; the broker checks for timed-out ones periodically. */
    private static final int SHORT_TRANSACTION_TIMEOUT_MS = 1_000;
    private static final Duration ABORT_BY_BROKER_TIMEOUT = Duration.ofSeconds(40);

    @Test
    void committedRecordsAreReadCommittedAndAbortedOnesOnlyReadUncommitted() {
        String topic = Weir.createTopic("txn-commit-abort", 2);
        try (KafkaProducer<byte[], byte[]> producer = transactionalProducer(Weir.uniqueName("commit-abort"))) {
            producer.initTransactions();
            producer.beginTransaction();
            send(producer, topic, 2, List.of("c0", "c1", "c2", "c3"));
            producer.commitTransaction();
            producer.beginTransaction();
            send(producer, topic, 2, List.of("a0", "a1", "a2", "a3"));
            producer.abortTransaction();
            producer.beginTransaction();
            send(producer, topic, 2, List.of("c4", "c5", "c6", "c7"));
            producer.commitTransaction();
        }
        awaitStable(topic, 2);
        Map<Integer, List<ConsumerRecord<byte[], byte[]>>> committed = Weir.readAll(topic, 2, READ_COMMITTED);
        assertEquals(List.of("c0", "c2", "c4", "c6"), values(committed.get(0)));
        assertEquals(List.of("c1", "c3", "c5", "c7"), values(committed.get(1)));
        // Each transaction ends with one marker per partition, which takes an offset.
        assertEquals(List.of(0L, 1L, 6L, 7L), offsets(committed.get(0)));
        Map<Integer, List<ConsumerRecord<byte[], byte[]>>> everything = Weir.readAll(topic, 2, READ_UNCOMMITTED);
        assertEquals(List.of("c0", "c2", "a0", "a2", "c4", "c6"), values(everything.get(0)));
        assertEquals(List.of("c1", "c3", "a1", "a3", "c5", "c7"), values(everything.get(1)));
        assertEquals(List.of(0L, 1L, 3L, 4L, 6L, 7L), offsets(everything.get(1)));
        assertEquals(Map.of(0, 9L, 1, 9L), latestOffsets(topic, 2, IsolationLevel.READ_UNCOMMITTED));
        assertEquals(Map.of(0, 9L, 1, 9L), latestOffsets(topic, 2, IsolationLevel.READ_COMMITTED));
    }

    @Test
    void anOpenTransactionHoldsReadCommittedConsumersAtItsFirstOffset() {
        String topic = Weir.createTopic("txn-lso", 1);
        try (KafkaProducer<byte[], byte[]> plain = Weir.producer(Map.of());
                KafkaProducer<byte[], byte[]> producer = transactionalProducer(Weir.uniqueName("lso"))) {
            send(plain, topic, 1, List.of("before0", "before1")); // offsets 0, 1
            producer.initTransactions();
            producer.beginTransaction();
            send(producer, topic, 1, List.of("t0", "t1", "t2")); // offsets 2..4, not committed
            send(plain, topic, 1, List.of("after")); // offset 5, behind the open transaction
            assertEquals(Map.of(0, 6L), latestOffsets(topic, 1, IsolationLevel.READ_UNCOMMITTED));
            assertEquals(Map.of(0, 2L), latestOffsets(topic, 1, IsolationLevel.READ_COMMITTED));
            assertEquals(List.of("before0", "before1"), values(Weir.readAll(topic, 1, READ_COMMITTED).get(0)));
            assertEquals(
                    List.of("before0", "before1", "t0", "t1", "t2", "after"),
                    values(Weir.readAll(topic, 1, READ_UNCOMMITTED).get(0)));
            producer.commitTransaction();
        }
        awaitStable(topic, 1);
        assertEquals(Map.of(0, 7L), latestOffsets(topic, 1, IsolationLevel.READ_COMMITTED));
        assertEquals(
                List.of("before0", "before1", "t0", "t1", "t2", "after"),
                values(Weir.readAll(topic, 1, READ_COMMITTED).get(0)));
    }

    @Test
    void aSecondProducerWithTheSameTransactionalIdFencesTheFirst() {
        String topic = Weir.createTopic("txn-fence", 1);
        String transactionalId = Weir.uniqueName("fenced");
        try (KafkaProducer<byte[], byte[]> zombie = transactionalProducer(transactionalId);
                KafkaProducer<byte[], byte[]> successor = transactionalProducer(transactionalId)) {
            zombie.initTransactions();
            zombie.beginTransaction();
            send(zombie, topic, 1, List.of("zombie0"));
            // The successor's InitProducerId bumps the epoch and aborts the zombie's transaction.
            successor.initTransactions();
            assertThrows(ProducerFencedException.class, zombie::commitTransaction);
            // Fenced is fatal: the zombie sends nothing more.
            ExecutionException late = assertThrows(ExecutionException.class, () -> zombie
                    .send(new ProducerRecord<>(topic, 0, null, "zombie1".getBytes()))
                    .get(Weir.TIMEOUT.toMillis(), TimeUnit.MILLISECONDS));
            assertInstanceOf(ProducerFencedException.class, late.getCause());
            successor.beginTransaction();
            send(successor, topic, 1, List.of("successor0"));
            successor.commitTransaction();
        }
        awaitStable(topic, 1);
        assertEquals(List.of("successor0"), values(Weir.readAll(topic, 1, READ_COMMITTED).get(0)));
        // The successor aborted the zombie's transaction; the zombie's late record never left it.
        assertEquals(List.of("zombie0", "successor0"), values(Weir.readAll(topic, 1, READ_UNCOMMITTED).get(0)));
    }

    @Test
    void consumeTransformProduceCommitsOffsetsOnlyWithItsTransaction() {
        String input = Weir.createTopic("txn-ctp-in", 2);
        String output = Weir.createTopic("txn-ctp-out", 2);
        String group = Weir.uniqueName("txn-ctp-group");
        send(input, 2, List.of("i0", "i1", "i2", "i3", "i4", "i5"));
        Map<String, Object> member = new HashMap<>(Groups.classic(group, "range"));
        member.putAll(READ_COMMITTED);
        try (Admin admin = Weir.admin();
                KafkaProducer<byte[], byte[]> producer = transactionalProducer(Weir.uniqueName("ctp"))) {
            producer.initTransactions();
            try (KafkaConsumer<byte[], byte[]> consumer = Weir.consumer(member)) {
                consumer.subscribe(List.of(input));
                List<ConsumerRecord<byte[], byte[]>> batch = pollAtLeast(consumer, 6);
                assertEquals(6, batch.size());
                producer.beginTransaction();
                transform(producer, output, batch);
                producer.sendOffsetsToTransaction(positions(consumer), consumer.groupMetadata());
                assertEquals(Map.of(), committedOffsets(admin, group, false), "offsets visible before the commit");
                producer.commitTransaction();
                awaitCommittedOffsets(admin, group, Map.of(0, 3L, 1, 3L));

                // An aborted round: its output and its offsets both vanish.
                send(input, 2, List.of("i6", "i7", "i8", "i9"));
                batch = pollAtLeast(consumer, 4);
                assertEquals(4, batch.size());
                producer.beginTransaction();
                transform(producer, output, batch);
                // abortTransaction drops records not sent yet (its javadoc): flush, so the
                // aborted records are in the log and read_committed must skip them.
                producer.flush();
                producer.sendOffsetsToTransaction(positions(consumer), consumer.groupMetadata());
                producer.abortTransaction();
                assertEquals(Map.of(0, 3L, 1, 3L), stableCommittedOffsets(admin, group, 2));
            }
            // A new member resumes from the committed offsets and processes the rest again.
            try (KafkaConsumer<byte[], byte[]> consumer = Weir.consumer(member)) {
                consumer.subscribe(List.of(input));
                List<ConsumerRecord<byte[], byte[]>> batch = pollAtLeast(consumer, 4);
                assertEquals(List.of("i6", "i7", "i8", "i9"), sortedValues(batch));
                producer.beginTransaction();
                transform(producer, output, batch);
                producer.sendOffsetsToTransaction(positions(consumer), consumer.groupMetadata());
                producer.commitTransaction();
            }
            awaitCommittedOffsets(admin, group, Map.of(0, 5L, 1, 5L));
        }
        awaitStable(output, 2);
        List<String> expected = IntStream.range(0, 10).mapToObj(i -> "I" + i).collect(Collectors.toList());
        assertEquals(expected, sortedValues(flatten(Weir.readAll(output, 2, READ_COMMITTED))));
        assertEquals(14, flatten(Weir.readAll(output, 2, READ_UNCOMMITTED)).size());
    }

    @Test
    void theBrokerAbortsATransactionThatOutlivesItsTimeout() {
        String topic = Weir.createTopic("txn-timeout", 1);
        String transactionalId = Weir.uniqueName("timeout");
        try (Admin admin = Weir.admin();
                KafkaProducer<byte[], byte[]> producer = transactionalProducer(
                        transactionalId, Map.of(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, SHORT_TRANSACTION_TIMEOUT_MS))) {
            producer.initTransactions();
            int initialEpoch = describe(admin, transactionalId).producerEpoch();
            producer.beginTransaction();
            send(producer, topic, 1, List.of("stalled0", "stalled1"));
            // The producer stalls; the coordinator aborts and writes the markers on its own.
            Weir.waitUntil(ABORT_BY_BROKER_TIMEOUT,
                    () -> describe(admin, transactionalId).state() == TransactionState.COMPLETE_ABORT,
                    () -> "the transaction was not aborted by the broker: " + describe(admin, transactionalId));
            awaitStable(topic, 1);
            assertEquals(List.of(), values(Weir.readAll(topic, 1, READ_COMMITTED).get(0)));
            // The coordinator bumped the epoch when it aborted: the late commit fails (transaction
            // version 2 reports the transaction's state, version 1 a fenced producer) and the
            // producer is left in its fatal error state.
            boolean version2 = Weir.clientMajorVersion() >= 4;
            KafkaException commitError = assertThrows(KafkaException.class, producer::commitTransaction);
            Class<? extends KafkaException> expected =
                    version2 ? InvalidTxnStateException.class : ProducerFencedException.class;
            assertEquals(expected, commitError.getClass(), commitError::toString);
            assertThrows(KafkaException.class, producer::abortTransaction);
            TransactionDescription aborted = describe(admin, transactionalId);
            assertEquals(initialEpoch + 1, aborted.producerEpoch(), aborted::toString);
            assertEquals(Set.of(), aborted.topicPartitions(), aborted::toString);
        }
        assertEquals(List.of("stalled0", "stalled1"), values(Weir.readAll(topic, 1, READ_UNCOMMITTED).get(0)));
        assertEquals(List.of(), values(Weir.readAll(topic, 1, READ_COMMITTED).get(0)));
    }

    @Test
    void adminDescribesListsAndAbortsAHangingTransaction() throws Exception {
        String topic = Weir.createTopic("txn-admin", 1);
        TopicPartition partition = new TopicPartition(topic, 0);
        String transactionalId = Weir.uniqueName("hanging");
        send(topic, 1, List.of("before")); // offset 0
        // A producer that began a transaction, wrote and then went silent: never closed
        // here (close() would abort), only force-closed at the end.
        KafkaProducer<byte[], byte[]> hanging = transactionalProducer(transactionalId);
        try (Admin admin = Weir.admin()) {
            hanging.initTransactions();
            hanging.beginTransaction();
            send(hanging, topic, 1, List.of("h0", "h1")); // offsets 1, 2
            long startedBefore = System.currentTimeMillis();

            TransactionDescription described = describe(admin, transactionalId);
            assertEquals(TransactionState.ONGOING, described.state());
            assertEquals(TRANSACTION_TIMEOUT_MS, described.transactionTimeoutMs());
            assertEquals(Set.of(partition), described.topicPartitions());
            assertTrue(described.transactionStartTimeMs().isPresent(), described::toString);
            assertTrue(described.transactionStartTimeMs().getAsLong() <= startedBefore, described::toString);
            long producerId = described.producerId();

            ProducerState state = Weir.get(admin.describeProducers(List.of(partition)).partitionResult(partition))
                    .activeProducers().stream()
                    .filter(p -> p.producerId() == producerId)
                    .findFirst()
                    .orElseThrow(() -> new AssertionError("producer " + producerId + " not described"));
            assertEquals(described.producerEpoch(), state.producerEpoch());
            assertEquals(1L, state.currentTransactionStartOffset().orElse(-1L), state::toString);
            assertEquals(1, state.lastSequence(), state::toString);

            TransactionListing listing = new TransactionListing(transactionalId, producerId, TransactionState.ONGOING);
            assertTrue(list(admin, new ListTransactionsOptions()).contains(listing));
            assertTrue(list(admin, new ListTransactionsOptions().filterStates(List.of(TransactionState.ONGOING)))
                    .contains(listing));
            assertFalse(ids(list(admin, new ListTransactionsOptions()
                            .filterStates(List.of(TransactionState.COMPLETE_COMMIT, TransactionState.EMPTY))))
                    .contains(transactionalId));
            assertEquals(List.of(listing),
                    list(admin, new ListTransactionsOptions().filterProducerIds(List.of(producerId))));
            Thread.sleep(50);
            assertTrue(ids(list(admin, new ListTransactionsOptions().filterOnDuration(20))).contains(transactionalId));
            assertFalse(ids(list(admin, new ListTransactionsOptions().filterOnDuration(3_600_000)))
                    .contains(transactionalId));
            Method byPattern = patternFilter();
            if (byPattern != null) { // kafka-clients 4.1+ (KIP-1152)
                assertEquals(List.of(listing), list(admin,
                        (ListTransactionsOptions) byPattern.invoke(new ListTransactionsOptions(), transactionalId + "$")));
                assertEquals(List.of(), list(admin,
                        (ListTransactionsOptions) byPattern.invoke(new ListTransactionsOptions(), "^no-such-id-.*")));
            }
            assertEquals(Map.of(0, 1L), latestOffsets(topic, 1, IsolationLevel.READ_COMMITTED));

            Weir.get(admin.abortTransaction(new AbortTransactionSpec(
                    partition, producerId, (short) state.producerEpoch(), state.coordinatorEpoch().orElse(0))).all());
            awaitStable(topic, 1);
            assertEquals(Map.of(0, 4L), latestOffsets(topic, 1, IsolationLevel.READ_COMMITTED));
            assertEquals(List.of("before"), values(Weir.readAll(topic, 1, READ_COMMITTED).get(0)));
            ProducerState after = Weir.get(admin.describeProducers(List.of(partition)).partitionResult(partition))
                    .activeProducers().stream()
                    .filter(p -> p.producerId() == producerId)
                    .findFirst()
                    .orElseThrow();
            assertTrue(after.currentTransactionStartOffset().isEmpty(), after::toString);
        } finally {
            hanging.close(Duration.ZERO);
        }
    }

    /**
     * The broker finalizes transaction.version 2 (as Kafka 4.x does), and the client picks its
     * generation from it: under version 2 each commit and abort bumps the producer's epoch.
     */
    @Test
    void theTransactionVersionDecidesWhetherEndingATransactionBumpsTheEpoch() {
        String topic = Weir.createTopic("txn-version", 1);
        String transactionalId = Weir.uniqueName("tv");
        try (Admin admin = Weir.admin();
                KafkaProducer<byte[], byte[]> producer = transactionalProducer(transactionalId)) {
            FinalizedVersionRange finalized = Weir.get(admin.describeFeatures().featureMetadata())
                    .finalizedFeatures().get("transaction.version");
            assertEquals(2, finalized == null ? 0 : finalized.maxVersionLevel(), "finalized transaction.version");
            producer.initTransactions();
            int initialEpoch = describe(admin, transactionalId).producerEpoch();
            producer.beginTransaction();
            send(producer, topic, 1, List.of("v0"));
            producer.commitTransaction();
            producer.beginTransaction();
            send(producer, topic, 1, List.of("v1"));
            producer.abortTransaction();
            boolean version2 = Weir.clientMajorVersion() >= 4;
            Weir.waitUntil(Weir.TIMEOUT,
                    () -> describe(admin, transactionalId).state() == TransactionState.COMPLETE_ABORT,
                    () -> describe(admin, transactionalId).toString());
            assertEquals(initialEpoch + (version2 ? 2 : 0), describe(admin, transactionalId).producerEpoch(),
                    "producer epoch after a commit and an abort (transaction version " + (version2 ? 2 : 1) + ")");
            producer.beginTransaction();
            send(producer, topic, 1, List.of("v2"));
            producer.commitTransaction();
        }
        awaitStable(topic, 1);
        assertEquals(List.of("v0", "v2"), values(Weir.readAll(topic, 1, READ_COMMITTED).get(0)));
    }

    // ------------------------------------------------------------------------- helpers

    private static KafkaProducer<byte[], byte[]> transactionalProducer(String transactionalId) {
        return transactionalProducer(transactionalId, Map.of());
    }

    private static KafkaProducer<byte[], byte[]> transactionalProducer(
            String transactionalId, Map<String, Object> overrides) {
        Map<String, Object> config = new HashMap<>();
        config.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, transactionalId);
        config.put(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, TRANSACTION_TIMEOUT_MS);
        config.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, (int) Weir.TIMEOUT.toMillis());
        config.putAll(overrides);
        return Weir.producer(config);
    }

    /** Sends value i to partition i % partitions and waits for every acknowledgement. */
    private static void send(KafkaProducer<byte[], byte[]> producer, String topic, int partitions, List<String> values) {
        List<ProducerRecord<byte[], byte[]>> records = IntStream.range(0, values.size())
                .mapToObj(i -> new ProducerRecord<byte[], byte[]>(topic, i % partitions, null, values.get(i).getBytes()))
                .collect(Collectors.toList());
        Weir.produceAll(producer, records);
    }

    /** The same, with a plain (non-transactional) producer. */
    private static void send(String topic, int partitions, List<String> values) {
        try (KafkaProducer<byte[], byte[]> producer = Weir.producer(Map.of())) {
            send(producer, topic, partitions, values);
        }
    }

    /** The consume-transform-produce step: each input value upper-cased, to the same partition. */
    private static void transform(
            KafkaProducer<byte[], byte[]> producer, String output, List<ConsumerRecord<byte[], byte[]>> batch) {
        for (ConsumerRecord<byte[], byte[]> record : batch) {
            producer.send(new ProducerRecord<>(output, record.partition(), null,
                    new String(record.value()).toUpperCase(java.util.Locale.ROOT).getBytes()));
        }
    }

    private static List<ConsumerRecord<byte[], byte[]>> pollAtLeast(KafkaConsumer<byte[], byte[]> consumer, int count) {
        List<ConsumerRecord<byte[], byte[]>> read = new ArrayList<>();
        long deadline = System.nanoTime() + Groups.REBALANCE_TIMEOUT.toNanos();
        while (read.size() < count) {
            assertTrue(System.nanoTime() < deadline, "read " + read.size() + " of " + count + " records");
            consumer.poll(Duration.ofMillis(200)).forEach(read::add);
        }
        return read;
    }

    private static Map<TopicPartition, OffsetAndMetadata> positions(KafkaConsumer<byte[], byte[]> consumer) {
        Map<TopicPartition, OffsetAndMetadata> positions = new HashMap<>();
        for (TopicPartition partition : consumer.assignment()) {
            positions.put(partition, new OffsetAndMetadata(consumer.position(partition)));
        }
        return positions;
    }

    /** The group's committed offsets by partition; `requireStable` waits out pending transactional ones. */
    private static Map<Integer, Long> committedOffsets(Admin admin, String group, boolean requireStable) {
        Map<TopicPartition, OffsetAndMetadata> offsets = Weir.get(admin.listConsumerGroupOffsets(
                group, new ListConsumerGroupOffsetsOptions().requireStable(requireStable))
                .partitionsToOffsetAndMetadata());
        Map<Integer, Long> byPartition = new TreeMap<>();
        offsets.forEach((tp, offset) -> {
            if (offset != null) {
                byPartition.put(tp.partition(), offset.offset());
            }
        });
        return byPartition;
    }

    /** Waits until the group's committed offsets are `expected` (markers land after EndTxn answers). */
    private static void awaitCommittedOffsets(Admin admin, String group, Map<Integer, Long> expected) {
        Weir.waitUntil(Weir.TIMEOUT, () -> committedOffsets(admin, group, false).equals(expected),
                () -> "committed offsets " + committedOffsets(admin, group, false) + ", expected " + expected);
    }

    /**
     * The group's committed offsets once no transactional commit is pending on any of its
     * `partitions` (requireStable: a partition with pending offsets is retried or left out).
     */
    private static Map<Integer, Long> stableCommittedOffsets(Admin admin, String group, int partitions) {
        Weir.waitUntil(Weir.TIMEOUT, () -> committedOffsets(admin, group, true).size() == partitions,
                () -> "stable committed offsets " + committedOffsets(admin, group, true));
        return committedOffsets(admin, group, true);
    }

    /** Waits until every partition's last stable offset has caught up with its high watermark. */
    private static void awaitStable(String topic, int partitions) {
        Weir.waitUntil(Weir.TIMEOUT,
                () -> latestOffsets(topic, partitions, IsolationLevel.READ_COMMITTED)
                        .equals(latestOffsets(topic, partitions, IsolationLevel.READ_UNCOMMITTED)),
                () -> "last stable offsets " + latestOffsets(topic, partitions, IsolationLevel.READ_COMMITTED)
                        + " behind high watermarks " + latestOffsets(topic, partitions, IsolationLevel.READ_UNCOMMITTED));
    }

    private static Map<Integer, Long> latestOffsets(String topic, int partitions, IsolationLevel isolation) {
        try (Admin admin = Weir.admin()) {
            Map<TopicPartition, OffsetSpec> latest = Weir.allPartitions(topic, partitions).stream()
                    .collect(Collectors.toMap(tp -> tp, tp -> OffsetSpec.latest()));
            Map<Integer, Long> byPartition = new TreeMap<>();
            Weir.get(admin.listOffsets(latest, new ListOffsetsOptions(isolation)).all())
                    .forEach((tp, info) -> byPartition.put(tp.partition(), info.offset()));
            return byPartition;
        }
    }

    private static TransactionDescription describe(Admin admin, String transactionalId) {
        return Weir.get(admin.describeTransactions(List.of(transactionalId)).description(transactionalId));
    }

    private static List<TransactionListing> list(Admin admin, ListTransactionsOptions options) {
        return new ArrayList<>(Weir.get(admin.listTransactions(options).all()));
    }

    private static Set<String> ids(Collection<TransactionListing> listings) {
        return listings.stream().map(TransactionListing::transactionalId).collect(Collectors.toSet());
    }

    /** ListTransactionsOptions.filterOnTransactionalIdPattern, where the client has it. */
    private static Method patternFilter() {
        try {
            return ListTransactionsOptions.class.getMethod("filterOnTransactionalIdPattern", String.class);
        } catch (NoSuchMethodException e) {
            assertTrue(Weir.clientMajorVersion() < 4, "kafka-clients 4.x lacks filterOnTransactionalIdPattern");
            return null;
        }
    }

    private static List<String> values(List<ConsumerRecord<byte[], byte[]>> records) {
        return records.stream().map(r -> new String(r.value())).collect(Collectors.toList());
    }

    private static List<Long> offsets(List<ConsumerRecord<byte[], byte[]>> records) {
        return records.stream().map(ConsumerRecord::offset).collect(Collectors.toList());
    }

    private static List<String> sortedValues(List<ConsumerRecord<byte[], byte[]>> records) {
        return values(records).stream().sorted().collect(Collectors.toList());
    }

    private static List<ConsumerRecord<byte[], byte[]>> flatten(Map<Integer, List<ConsumerRecord<byte[], byte[]>>> byPartition) {
        return byPartition.values().stream().flatMap(List::stream).collect(Collectors.toList());
    }

    private static List<Throwable> causes(Throwable error) {
        List<Throwable> chain = new ArrayList<>();
        for (Throwable t = error; t != null && !chain.contains(t); t = t.getCause()) {
            chain.add(t);
        }
        return chain;
    }
}
