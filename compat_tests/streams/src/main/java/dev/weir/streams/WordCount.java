package dev.weir.streams;

import java.time.Duration;
import java.util.Arrays;
import java.util.Locale;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;

/**
 * Counts the words of the input topic's values into the output topic (key: the word,
 * value: its count so far as an 8-byte big-endian long; every update, no cache), with
 * {@code processing.guarantee=exactly_once_v2}.
 *
 * <p>Arguments: BOOTSTRAP INPUT_TOPIC OUTPUT_TOPIC APPLICATION_ID STATE_DIR REPLICATION_FACTOR.
 * The replication factor is that of the app's internal topics (the changelog of the counts
 * and the repartition topic); at 3 or more, they also get min.insync.replicas=2.
 *
 * <p>Prints "state NEW_STATE" on stdout at every state change and runs until SIGTERM, when it
 * closes the Streams instance (which commits or aborts its open transaction) and exits 0.
 */
public final class WordCount {
    private static final Duration CLOSE_TIMEOUT = Duration.ofSeconds(20);

    private WordCount() {}

    public static void main(String[] args) throws InterruptedException {
        if (args.length != 6) {
            System.err.println("usage: WordCount BOOTSTRAP INPUT OUTPUT APPLICATION_ID STATE_DIR REPLICATION_FACTOR");
            System.exit(2);
        }
        String input = args[1];
        String output = args[2];
        int replicationFactor = Integer.parseInt(args[5]);

        Properties config = new Properties();
        config.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        config.put(StreamsConfig.APPLICATION_ID_CONFIG, args[3]);
        config.put(StreamsConfig.STATE_DIR_CONFIG, args[4]);
        config.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
        config.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, replicationFactor);
        if (replicationFactor >= 3) {
            config.put(StreamsConfig.topicPrefix("min.insync.replicas"), "2");
        }
        config.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, 1);
        // Small transactions, often: the test's input is small and its run short.
        config.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 200);
        // No record cache: every count update reaches the output, so a replayed update shows.
        config.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0L);

        StreamsBuilder builder = new StreamsBuilder();
        builder.stream(input, Consumed.with(Serdes.String(), Serdes.String()))
                .flatMapValues(line -> Arrays.asList(line.toLowerCase(Locale.ROOT).split("\\W+")))
                .filter((key, word) -> !word.isEmpty())
                .groupBy((key, word) -> word, Grouped.with(Serdes.String(), Serdes.String()))
                .count(Materialized.as("word-counts"))
                .toStream()
                .to(output, Produced.with(Serdes.String(), Serdes.Long()));

        KafkaStreams streams = new KafkaStreams(builder.build(), config);
        streams.setStateListener((newState, oldState) -> System.out.println("state " + newState));
        // A broker's death is transient: a failed stream thread is replaced, not the app ended.
        streams.setUncaughtExceptionHandler(error -> {
            System.out.println("thread failed: " + error);
            return StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.REPLACE_THREAD;
        });
        CountDownLatch closed = new CountDownLatch(1);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            streams.close(CLOSE_TIMEOUT);
            closed.countDown();
        }, "word-count-shutdown"));
        streams.start();
        closed.await();
    }
}
