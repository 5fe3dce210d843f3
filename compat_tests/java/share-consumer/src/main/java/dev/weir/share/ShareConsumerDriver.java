package dev.weir.share;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;

import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicIdPartition;
import org.apache.kafka.common.errors.ApiException;
import org.apache.kafka.common.protocol.Errors;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.Set;
import java.util.TreeSet;

/**
 * Drives one KafkaShareConsumer in explicit acknowledgement mode from a JSON spec on stdin
 * and prints what it saw as JSON lines on stdout. The spec and the events are
 * compat_tests/share_clients/driver_spec.py's: the n-th time this consumer sees a record it
 * acknowledges it with {@code actions["P:O"][n-1]} (the last entry repeating, the default
 * action for a record not listed), or HOLDs it (stops polling and sleeps until its deadline);
 * then it commits the poll's acknowledgements (commitSync, commitAsync or with the next poll).
 */
public final class ShareConsumerDriver {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final String CLIENT = "kafka-clients";

    private final JsonNode spec;
    private final String consumerId;
    private final Map<String, Integer> sightings = new HashMap<>();
    private int deliveries = 0;

    private ShareConsumerDriver(JsonNode spec) {
        this.spec = spec;
        this.consumerId = spec.get("client_id").asText();
    }

    public static void main(String[] args) throws IOException {
        JsonNode spec = JSON.readTree(new String(System.in.readAllBytes(), StandardCharsets.UTF_8));
        // before the first logger exists: warnings only, or the wire requests when debugging
        System.setProperty("org.slf4j.simpleLogger.defaultLogLevel", "warn");
        if (spec.path("debug").asBoolean(false)) {
            System.setProperty("org.slf4j.simpleLogger.log.org.apache.kafka.clients.NetworkClient", "debug");
        }
        System.exit(new ShareConsumerDriver(spec).run());
    }

    private synchronized void emit(String event, ObjectNode fields) {
        ObjectNode line = JSON.createObjectNode();
        line.put("event", event);
        line.put("consumer", consumerId);
        line.put("t_ms", System.currentTimeMillis());
        line.setAll(fields);
        System.out.println(line.toString());
        System.out.flush();
    }

    private static ObjectNode fields() {
        return JSON.createObjectNode();
    }

    private Properties config() {
        Properties props = new Properties();
        props.put("bootstrap.servers", spec.get("bootstrap").asText());
        props.put("group.id", spec.get("group").asText());
        props.put("client.id", consumerId);
        props.put("share.acknowledgement.mode", "explicit");
        props.put("key.deserializer", ByteArrayDeserializer.class.getName());
        props.put("value.deserializer", ByteArrayDeserializer.class.getName());
        String acquireMode = spec.path("acquire_mode").asText("");
        if (!acquireMode.isEmpty()) {
            props.put("share.acquire.mode", acquireMode);
        }
        int maxPollRecords = spec.path("max_poll_records").asInt(0);
        if (maxPollRecords > 0) {
            props.put("max.poll.records", Integer.toString(maxPollRecords));
        }
        return props;
    }

    private String actionFor(int partition, long offset, int sighting) {
        JsonNode listed = spec.path("actions").path(partition + ":" + offset);
        if (!listed.isArray() || listed.isEmpty()) {
            return spec.path("default_action").asText("ACCEPT");
        }
        return listed.get(Math.min(sighting, listed.size()) - 1).asText();
    }

    private int run() {
        emit("started", fields().put("client", CLIENT));
        long deadlineMs = spec.path("deadline_ms").asLong(30000);
        long idleMs = spec.path("idle_ms").asLong(3000);
        long pollMs = spec.path("poll_ms").asLong(200);
        int maxDeliveries = spec.path("max_deliveries").asInt(0);
        long started = System.currentTimeMillis();
        Long lastDelivery = null;
        KafkaShareConsumer<byte[], byte[]> consumer = new KafkaShareConsumer<>(config());
        consumer.setAcknowledgementCommitCallback(this::onAcknowledgementsCommitted);
        List<String> topics = new ArrayList<>();
        spec.get("topics").forEach(t -> topics.add(t.asText()));
        consumer.subscribe(topics);
        try {
            while (System.currentTimeMillis() - started < deadlineMs) {
                if (lastDelivery != null && System.currentTimeMillis() - lastDelivery > idleMs) {
                    break;
                }
                ConsumerRecords<byte[], byte[]> records;
                try {
                    records = consumer.poll(Duration.ofMillis(pollMs));
                } catch (KafkaException e) {
                    emitError("poll", e);
                    continue;
                }
                if (records.isEmpty()) {
                    continue;
                }
                if (!handle(consumer, records, started, deadlineMs)) {
                    break;
                }
                lastDelivery = System.currentTimeMillis(); // idle counts from the end of handling
                if (maxDeliveries > 0 && deliveries >= maxDeliveries) {
                    break;
                }
            }
        } finally {
            try {
                consumer.close(Duration.ofSeconds(10));
            } catch (KafkaException e) {
                emitError("close", e);
            }
            emit("closed", fields());
        }
        return 0;
    }

    /** Acknowledges one poll's records and commits; false after a HOLD (then the driver exits). */
    private boolean handle(KafkaShareConsumer<byte[], byte[]> consumer, ConsumerRecords<byte[], byte[]> records,
                           long started, long deadlineMs) {
        List<ConsumerRecord<byte[], byte[]>> polled = new ArrayList<>();
        for (ConsumerRecord<byte[], byte[]> record : records) {
            deliveries++;
            polled.add(record);
            ObjectNode f = fields()
                .put("topic", record.topic())
                .put("partition", record.partition())
                .put("offset", record.offset())
                .put("key", text(record.key()))
                .put("value", text(record.value()));
            Optional<Short> count = record.deliveryCount();
            if (count.isPresent()) {
                f.put("delivery_count", count.get().intValue());
            } else {
                f.putNull("delivery_count");
            }
            emit("delivered", f);
        }
        long pauseMs = spec.path("pause_ms").asLong(0);
        if (pauseMs > 0) {
            sleep(pauseMs);
        }
        for (ConsumerRecord<byte[], byte[]> record : polled) {
            String key = record.topic() + "/" + record.partition() + ":" + record.offset();
            int sighting = sightings.merge(key, 1, Integer::sum);
            String action = actionFor(record.partition(), record.offset(), sighting);
            if (action.equals("HOLD")) {
                emit("holding", fields());
                sleep(Math.max(0, deadlineMs - (System.currentTimeMillis() - started)));
                return false;
            }
            try {
                consumer.acknowledge(record, AcknowledgeType.valueOf(action));
            } catch (RuntimeException e) {
                emitError("acknowledge", e);
                continue;
            }
            emit("acknowledge", fields()
                .put("topic", record.topic())
                .put("partition", record.partition())
                .put("offset", record.offset())
                .put("type", action));
        }
        commit(consumer);
        return true;
    }

    private void commit(KafkaShareConsumer<byte[], byte[]> consumer) {
        String mode = spec.path("commit").asText("sync");
        if (mode.equals("async")) {
            consumer.commitAsync();
        } else if (mode.equals("sync")) {
            Map<TopicIdPartition, Optional<KafkaException>> results;
            try {
                results = consumer.commitSync(Duration.ofSeconds(10));
            } catch (KafkaException e) {
                emitError("commit", e);
                return;
            }
            ArrayNode list = JSON.createArrayNode();
            results.forEach((tp, error) -> list.addObject()
                .put("topic", tp.topic())
                .put("partition", tp.partition())
                .put("error", error.map(ShareConsumerDriver::errorName).orElse(null)));
            ObjectNode f = fields();
            f.set("results", list);
            emit("commit", f);
        }
    }

    private void onAcknowledgementsCommitted(Map<TopicIdPartition, Set<Long>> offsets, Exception exception) {
        offsets.forEach((tp, acked) -> {
            ArrayNode list = JSON.createArrayNode();
            new TreeSet<>(acked).forEach(list::add);
            ObjectNode f = fields()
                .put("topic", tp.topic())
                .put("partition", tp.partition())
                .put("error", exception == null ? null : errorName(exception));
            f.set("offsets", list);
            emit("ack_result", f);
        });
    }

    private void emitError(String where, Exception e) {
        emit("error", fields().put("where", where).put("error", errorName(e)).put("message", String.valueOf(e.getMessage())));
    }

    /** Kafka's protocol error name for an ApiException, else the exception's class name. */
    static String errorName(Throwable e) {
        Errors error = e instanceof ApiException ? Errors.forException(e) : Errors.UNKNOWN_SERVER_ERROR;
        return error == Errors.UNKNOWN_SERVER_ERROR ? e.getClass().getSimpleName() : error.name();
    }

    private static String text(byte[] data) {
        return data == null ? null : new String(data, StandardCharsets.UTF_8);
    }

    private static void sleep(long ms) {
        try {
            Thread.sleep(ms);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
