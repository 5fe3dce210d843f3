// Package compat drives a real Weir broker with the two Go Kafka clients people
// use: franz-go (kgo and kadm) and sarama. The broker's bootstrap address comes
// from WEIR_BOOTSTRAP; without it every test run fails (it never skips), so a
// wrapper that forgets to start a broker cannot pass by running nothing.
package compat

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// BootstrapEnv names the variable holding the broker's host:port.
const BootstrapEnv = "WEIR_BOOTSTRAP"

// saramaVersions are the Kafka versions sarama is told the broker speaks
// (Config.Version): sarama picks every request's version from it. Its default,
// 2.8.0, works; the producer and ClusterAdmin tests run at each of these, the
// group tests at the newest.
var saramaVersions = map[string]sarama.KafkaVersion{
	"default-2.8.0": sarama.DefaultVersion,
	"3.9.0":         sarama.V3_9_0_0,
	"newest":        sarama.MaxVersion,
}

var topicCounter atomic.Int64

func TestMain(m *testing.M) {
	if os.Getenv(BootstrapEnv) == "" {
		fmt.Fprintf(os.Stderr, "%s is not set: start a weir broker and export its host:port\n", BootstrapEnv)
		os.Exit(2)
	}
	os.Exit(m.Run())
}

func bootstrap() []string {
	return strings.Split(os.Getenv(BootstrapEnv), ",")
}

// uniqueName returns a topic or group name no other test (or run) uses.
func uniqueName(t *testing.T, kind string) string {
	name := strings.NewReplacer("/", ".", "#", ".").Replace(t.Name())
	if len(name) > 60 {
		name = name[:60]
	}
	return fmt.Sprintf("go.%s.%s.%d.%d", kind, name, time.Now().UnixNano()%1_000_000_000, topicCounter.Add(1))
}

func testContext(t *testing.T, timeout time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	return ctx
}

func newKgoClient(t *testing.T, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	client, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(bootstrap()...)}, opts...)...)
	if err != nil {
		t.Fatalf("kgo.NewClient: %v", err)
	}
	t.Cleanup(client.Close)
	return client
}

func newAdmin(t *testing.T) *kadm.Client {
	t.Helper()
	return kadm.NewClient(newKgoClient(t))
}

// createTopic creates a topic with the given partitions (replication factor 1).
func createTopic(t *testing.T, partitions int32, configs map[string]*string) string {
	t.Helper()
	topic := uniqueName(t, "topic")
	admin := newAdmin(t)
	resp, err := admin.CreateTopic(testContext(t, 15*time.Second), partitions, 1, configs, topic)
	if err != nil || resp.Err != nil {
		t.Fatalf("create topic %s: %v / %v", topic, err, resp.Err)
	}
	return topic
}

func saramaConfig(version sarama.KafkaVersion) *sarama.Config {
	config := sarama.NewConfig()
	config.Version = version
	config.ClientID = "weir-go-compat"
	config.Metadata.Retry.Backoff = 100 * time.Millisecond
	return config
}

// record is what a test compares: the fields a producer sets and a consumer reads.
type record struct {
	Partition int32
	Key       string
	Value     string
	Headers   string
}

func headersString(headers []kgo.RecordHeader) string {
	parts := make([]string, 0, len(headers))
	for _, header := range headers {
		parts = append(parts, header.Key+"="+string(header.Value))
	}
	return strings.Join(parts, ",")
}

// consumeAll reads partitions of topic from the start with a direct (groupless)
// kgo consumer until want records arrived, in the order each partition holds them.
func consumeAll(t *testing.T, topic string, want int) []*kgo.Record {
	t.Helper()
	client := newKgoClient(t,
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(200*time.Millisecond),
	)
	ctx := testContext(t, 20*time.Second)
	var records []*kgo.Record
	for len(records) < want {
		fetches := client.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d records of %s before the deadline", len(records), want, topic)
		}
		for _, fetchErr := range fetches.Errors() {
			t.Fatalf("fetch %s[%d]: %v", fetchErr.Topic, fetchErr.Partition, fetchErr.Err)
		}
		records = append(records, fetches.Records()...)
	}
	if len(records) != want {
		t.Fatalf("read %d records of %s, want exactly %d", len(records), topic, want)
	}
	return records
}
