package dev.weir.compat;

import java.io.BufferedReader;
import java.io.File;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.stream.Collectors;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;

/**
 * A group member in a child JVM, so that a test can SIGKILL it: no LeaveGroup, no last
 * heartbeat, its partitions stay with it until the broker's session timeout expires.
 *
 * <p>The child ({@link #main}) subscribes, prints "assigned 0,1" after every rebalance
 * (its whole assignment) and polls until it is killed.
 */
final class ChildMember implements AutoCloseable {
    private final Process process;
    private final List<String> lines = new CopyOnWriteArrayList<>();

    /** Starts `java ChildMember BOOTSTRAP TOPIC key=value...` with the test's own classpath. */
    ChildMember(String topic, Map<String, String> settings) throws IOException {
        String classpath = System.getProperty("surefire.test.class.path", System.getProperty("java.class.path"));
        List<String> command = new ArrayList<>();
        command.add(System.getProperty("java.home") + File.separator + "bin" + File.separator + "java");
        command.add("-Xshare:auto");
        command.add("-XX:TieredStopAtLevel=1");
        command.add("-Dorg.slf4j.simpleLogger.defaultLogLevel=warn");
        command.add("-cp");
        command.add(classpath);
        command.add(ChildMember.class.getName());
        command.add(Weir.bootstrap());
        command.add(topic);
        settings.forEach((key, value) -> command.add(key + "=" + value));
        process = new ProcessBuilder(command).redirectErrorStream(true).start();
        Thread reader = new Thread(this::readOutput, "child-member-output");
        reader.setDaemon(true);
        reader.start();
    }

    private void readOutput() {
        try (BufferedReader output = new BufferedReader(new InputStreamReader(process.getInputStream(), StandardCharsets.UTF_8))) {
            String line;
            while ((line = output.readLine()) != null) {
                lines.add(line);
            }
        } catch (IOException e) {
            lines.add("output lost: " + e);
        }
    }

    /** The child's whole assignment after its latest rebalance (null before its first one). */
    Set<Integer> assignment() {
        for (int i = lines.size() - 1; i >= 0; i--) {
            String line = lines.get(i);
            if (line.startsWith("assigned ")) {
                String list = line.substring("assigned ".length()).trim();
                Set<Integer> partitions = new TreeSet<>();
                if (!list.isEmpty()) {
                    for (String number : list.split(",")) {
                        partitions.add(Integer.parseInt(number));
                    }
                }
                return partitions;
            }
        }
        return null;
    }

    String output() {
        return String.join("\n", lines);
    }

    /** SIGKILL (Process.destroyForcibly on Unix) and wait for the child to be gone. */
    void kill() throws InterruptedException {
        process.destroyForcibly().waitFor();
    }

    @Override
    public void close() throws InterruptedException {
        kill();
    }

    public static void main(String[] args) {
        String bootstrap = args[0];
        String topic = args[1];
        Map<String, Object> settings = new java.util.HashMap<>();
        for (int i = 2; i < args.length; i++) {
            String[] pair = args[i].split("=", 2);
            settings.put(pair[0], pair[1]);
        }
        System.setProperty("weir.bootstrap", bootstrap);
        try (KafkaConsumer<byte[], byte[]> consumer = Weir.consumer(settings)) {
            consumer.subscribe(List.of(topic), new ConsumerRebalanceListener() {
                @Override
                public void onPartitionsRevoked(Collection<TopicPartition> partitions) {}

                @Override
                public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
                    String owned = consumer.assignment().stream()
                            .map(tp -> Integer.toString(tp.partition()))
                            .sorted()
                            .collect(Collectors.joining(","));
                    System.out.println("assigned " + owned);
                    System.out.flush();
                }
            });
            while (true) {
                consumer.poll(Duration.ofMillis(100));
            }
        }
    }
}
