package dev.weir.compat;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.function.Function;
import java.util.stream.Collectors;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.WakeupException;

/**
 * One group member: a KafkaConsumer owned by its own thread (the client is not thread-safe),
 * subscribed with a rebalance listener that records every call, polling every 100 ms and
 * keeping what it reads. Other threads act on the consumer only through {@link #call}.
 */
final class MemberThread implements AutoCloseable {
    /** One call of the rebalance listener: "assigned", "revoked" or "lost", with its partitions. */
    record ListenerCall(String kind, Set<Integer> partitions) {
        @Override
        public String toString() {
            return kind + partitions;
        }
    }

    final String name;
    final List<ListenerCall> listenerCalls = new CopyOnWriteArrayList<>();
    final List<ConsumerRecord<byte[], byte[]>> records = new CopyOnWriteArrayList<>();
    private final Set<Integer> owned = java.util.Collections.synchronizedSet(new TreeSet<>());
    private final Set<TopicPartition> ownedTopicPartitions = java.util.concurrent.ConcurrentHashMap.newKeySet();
    private final ConcurrentLinkedQueue<Runnable> tasks = new ConcurrentLinkedQueue<>();
    private final CompletableFuture<Void> finished = new CompletableFuture<>();
    private final Thread thread;
    private volatile boolean running = true;
    private volatile KafkaConsumer<byte[], byte[]> consumer;

    MemberThread(String name, Collection<String> topics, Map<String, Object> settings) {
        this(name, (consumer, listener) -> consumer.subscribe(topics, listener), settings);
    }

    /** A member subscribed by a regular expression (resolved by the client against metadata). */
    MemberThread(String name, java.util.regex.Pattern pattern, Map<String, Object> settings) {
        this(name, (consumer, listener) -> consumer.subscribe(pattern, listener), settings);
    }

    /**
     * A member subscribed by a KIP-848 {@code SubscriptionPattern} (RE2/J syntax), which the
     * broker resolves against its topics. The class is new in kafka-clients 4.0, so it is
     * reached by reflection: the suite also compiles against 3.9, where such tests skip.
     */
    static MemberThread withSubscriptionPattern(String name, String regex, Map<String, Object> settings) {
        return new MemberThread(name, (consumer, listener) -> {
            try {
                Class<?> patternClass = Class.forName("org.apache.kafka.clients.consumer.SubscriptionPattern");
                Object pattern = patternClass.getConstructor(String.class).newInstance(regex);
                KafkaConsumer.class
                        .getMethod("subscribe", patternClass, ConsumerRebalanceListener.class)
                        .invoke(consumer, pattern, listener);
            } catch (java.lang.reflect.InvocationTargetException e) {
                throw e.getCause() instanceof RuntimeException r ? r : new IllegalStateException(e.getCause());
            } catch (ReflectiveOperationException e) {
                throw new IllegalStateException("kafka-clients has no SubscriptionPattern", e);
            }
        }, settings);
    }

    private MemberThread(
            String name,
            java.util.function.BiConsumer<KafkaConsumer<byte[], byte[]>, ConsumerRebalanceListener> subscribe,
            Map<String, Object> settings) {
        this.name = name;
        this.thread = new Thread(() -> run(subscribe, settings), "member-" + name);
        this.thread.setDaemon(true);
        this.thread.start();
    }

    private void run(
            java.util.function.BiConsumer<KafkaConsumer<byte[], byte[]>, ConsumerRebalanceListener> subscribe,
            Map<String, Object> settings) {
        try (KafkaConsumer<byte[], byte[]> owner = Weir.consumer(settings)) {
            consumer = owner;
            subscribe.accept(owner, new Listener());
            while (running) {
                try {
                    for (ConsumerRecord<byte[], byte[]> record : owner.poll(Duration.ofMillis(100))) {
                        records.add(record);
                    }
                } catch (WakeupException e) {
                    // close() or call() woke the poll up: run the tasks, check `running`.
                }
                Runnable task;
                while ((task = tasks.poll()) != null) {
                    task.run();
                }
            }
        } catch (RuntimeException | Error e) {
            finished.completeExceptionally(e);
            return;
        }
        // Only now is the consumer closed (and, in a group, has left it).
        finished.complete(null);
    }

    private final class Listener implements ConsumerRebalanceListener {
        @Override
        public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
            listenerCalls.add(new ListenerCall("assigned", numbers(partitions)));
            owned.addAll(numbers(partitions));
            ownedTopicPartitions.addAll(partitions);
        }

        @Override
        public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
            listenerCalls.add(new ListenerCall("revoked", numbers(partitions)));
            owned.removeAll(numbers(partitions));
            ownedTopicPartitions.removeAll(partitions);
        }

        @Override
        public void onPartitionsLost(Collection<TopicPartition> partitions) {
            listenerCalls.add(new ListenerCall("lost", numbers(partitions)));
            owned.removeAll(numbers(partitions));
            ownedTopicPartitions.removeAll(partitions);
        }
    }

    private static Set<Integer> numbers(Collection<TopicPartition> partitions) {
        return partitions.stream().map(TopicPartition::partition).collect(Collectors.toCollection(TreeSet::new));
    }

    /** The partitions the listener says this member owns now. */
    Set<Integer> owned() {
        synchronized (owned) {
            return new TreeSet<>(owned);
        }
    }

    /** The topic partitions the listener says this member owns now (any topic). */
    Set<TopicPartition> ownedTopicPartitions() {
        return Set.copyOf(ownedTopicPartitions);
    }

    List<ListenerCall> calls(String kind) {
        return listenerCalls.stream().filter(c -> c.kind().equals(kind)).collect(Collectors.toList());
    }

    /** Values of every record read so far, as strings. */
    List<String> values() {
        List<String> values = new ArrayList<>();
        for (ConsumerRecord<byte[], byte[]> record : records) {
            values.add(new String(record.value()));
        }
        return values;
    }

    /** Runs `action` on the member's thread between two polls and returns its result. */
    <T> T call(Function<KafkaConsumer<byte[], byte[]>, T> action) {
        CompletableFuture<T> result = new CompletableFuture<>();
        tasks.add(() -> {
            try {
                result.complete(action.apply(consumer));
            } catch (RuntimeException | Error e) {
                result.completeExceptionally(e);
            }
        });
        try {
            return result.get(Weir.TIMEOUT.toMillis(), TimeUnit.MILLISECONDS);
        } catch (InterruptedException | TimeoutException e) {
            throw new AssertionError(name + ": the call did not run within " + Weir.TIMEOUT, e);
        } catch (ExecutionException e) {
            throw new AssertionError(name + ": the call failed: " + e.getCause(), e.getCause());
        }
    }

    /** Stops polling and closes the consumer on its thread (leaving the group); rethrows its failure. */
    @Override
    public void close() {
        running = false;
        try {
            finished.get(Weir.TIMEOUT.toMillis(), TimeUnit.MILLISECONDS);
        } catch (InterruptedException | TimeoutException e) {
            throw new AssertionError(name + ": did not close within " + Weir.TIMEOUT, e);
        } catch (ExecutionException e) {
            throw new AssertionError(name + ": the member thread failed: " + e.getCause(), e.getCause());
        }
    }

    @Override
    public String toString() {
        return name + " owns " + owned() + " after " + listenerCalls;
    }
}
