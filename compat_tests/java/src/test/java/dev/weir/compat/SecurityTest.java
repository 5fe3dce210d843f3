package dev.weir.compat;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.fail;

import java.io.IOException;
import java.io.Reader;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;
import java.util.stream.IntStream;
import java.util.stream.Stream;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.errors.SaslAuthenticationException;
import org.apache.kafka.common.errors.SslAuthenticationException;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * The Java client over TLS and SASL. Not part of the suite's default run (the pom excludes it):
 * compat_tests/test_security_clients.py runs it with -Dtest=SecurityTest and
 * -Dweir.security.cases=DIR, a directory of NAME.properties files, one case each: the client's
 * settings (bootstrap.servers, security.protocol, sasl.*, ssl.* as
 * compat_tests/security_harness.py java_properties writes them) plus weir.topic and weir.expect
 * (round-trip, authentication-error or tls-error).
 */
class SecurityTest {
    private static final int RECORDS = 10;

    static Stream<String> cases() {
        String dir = System.getProperty("weir.security.cases", "");
        if (dir.isBlank()) {
            fail("no cases: run with -Dweir.security.cases=DIR (compat_tests/test_security_clients.py does)");
        }
        try (Stream<Path> files = Files.list(Path.of(dir))) {
            return files.map(Path::toString).filter(name -> name.endsWith(".properties")).sorted()
                    .collect(Collectors.toList()).stream();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    private static Properties load(String file) {
        Properties properties = new Properties();
        try (Reader reader = Files.newBufferedReader(Path.of(file))) {
            properties.load(reader);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        return properties;
    }

    /** The client settings of a case (every key but weir.*). */
    private static Map<String, Object> clientConfig(Properties properties) {
        Map<String, Object> config = new HashMap<>();
        properties.stringPropertyNames().stream().filter(key -> !key.startsWith("weir."))
                .forEach(key -> config.put(key, properties.getProperty(key)));
        return config;
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("cases")
    void clientConnectsOrFailsAsExpected(String file) throws Exception {
        Properties properties = load(file);
        Map<String, Object> config = clientConfig(properties);
        String topic = properties.getProperty("weir.topic");
        switch (properties.getProperty("weir.expect")) {
            case "round-trip" -> roundTrip(config, topic);
            case "authentication-error" -> assertInstanceOf(SaslAuthenticationException.class, loginFailure(config));
            case "tls-error" -> assertInstanceOf(SslAuthenticationException.class, loginFailure(config));
            default -> fail("unknown weir.expect in " + file);
        }
    }

    private static void roundTrip(Map<String, Object> config, String topic) {
        List<String> values = IntStream.range(0, RECORDS).mapToObj(i -> "secured-" + i).collect(Collectors.toList());
        Map<String, Object> producerConfig = Weir.producerConfig(Map.of());
        producerConfig.putAll(config);
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(producerConfig)) {
            Weir.produceAll(producer, values.stream()
                    .map(v -> new ProducerRecord<byte[], byte[]>(topic, v.getBytes()))
                    .collect(Collectors.toList()));
        }
        Map<String, Object> consumerConfig = Weir.consumerConfig(Map.of());
        consumerConfig.putAll(config);
        consumerConfig.put(ConsumerConfig.GROUP_ID_CONFIG, topic + "-java");
        List<String> read = new ArrayList<>();
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(consumerConfig)) {
            consumer.subscribe(List.of(topic));
            long deadline = System.nanoTime() + Weir.TIMEOUT.toNanos();
            while (read.size() < RECORDS && System.nanoTime() < deadline) {
                for (ConsumerRecord<byte[], byte[]> record : consumer.poll(Duration.ofMillis(200))) {
                    read.add(new String(record.value()));
                }
            }
        }
        read.sort(null);
        values.sort(null);
        assertEquals(values, read);
    }

    /** The cause an admin request fails with when the login or handshake is refused. */
    private static Throwable loginFailure(Map<String, Object> config) throws InterruptedException {
        Map<String, Object> adminConfig = new HashMap<>(config);
        adminConfig.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, 15_000);
        adminConfig.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, 10_000);
        try (Admin admin = Admin.create(adminConfig)) {
            admin.describeCluster().clusterId().get(20, TimeUnit.SECONDS);
        } catch (ExecutionException e) {
            return e.getCause();
        } catch (java.util.concurrent.TimeoutException e) {
            fail("the client neither connected nor failed within 20 s (a hang)", e);
        }
        return fail("the client connected with a bad login");
    }
}
