package compat

import (
	"context"
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// createNamedTopic creates a topic of the given name (one partition, replication factor 1).
func createNamedTopic(t *testing.T, name string) {
	t.Helper()
	resp, err := newAdmin(t).CreateTopic(testContext(t, 15*time.Second), 1, 1, nil, name)
	if err != nil || resp.Err != nil {
		t.Fatalf("create topic %s: %v / %v", name, err, resp.Err)
	}
}

func produceValue(t *testing.T, topic, value string) {
	t.Helper()
	producer := newKgoClient(t)
	record := &kgo.Record{Topic: topic, Value: []byte(value)}
	if err := producer.ProduceSync(testContext(t, waitTimeout), record).FirstErr(); err != nil {
		t.Fatalf("produce to %s: %v", topic, err)
	}
	producer.Close()
}

// kgo's ConsumeRegex in a KIP-848 group (ServerSideBalancer, no excludes) sends the
// expression to the broker as SubscribedTopicRegex (consumer_group_848.go, wrapped
// in .*(?:...).* because the broker matches whole names): the broker resolves it
// against its topics, including one created while the member runs.
func TestFranzGoKIP848RegexSubscriptionIsResolvedByTheBroker(t *testing.T) {
	t.Parallel()
	prefix := uniqueName(t, "re")
	ordersA, ordersB, payments := prefix+"-orders-a", prefix+"-orders-b", prefix+"-payments"
	createNamedTopic(t, ordersA)
	createNamedTopic(t, payments)
	group := uniqueName(t, "group")
	consumer := newKgoClient(t,
		kgo.ConsumerGroup(group),
		kgo.ConsumeRegex(),
		kgo.ConsumeTopics("^"+regexp.QuoteMeta(prefix)+"-orders-.*"),
		kgo.Balancers(kgo.CooperativeStickyBalancer()),
		kgo.ServerSideBalancer(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(200*time.Millisecond),
		kgo.MetadataMinAge(100*time.Millisecond),
		kgo.MetadataMaxAge(time.Second),
	)
	produceValue(t, ordersA, "early")
	produceValue(t, payments, "unmatched")

	seen := map[string]string{} // value -> topic
	pollUntil := func(value string) {
		t.Helper()
		ctx := testContext(t, waitTimeout)
		for seen[value] == "" {
			fetches := consumer.PollFetches(ctx)
			if ctx.Err() != nil {
				t.Fatalf("did not read %q before the deadline; read %v", value, seen)
			}
			fetches.EachError(func(topic string, partition int32, err error) {
				if !errors.Is(err, context.DeadlineExceeded) {
					t.Fatalf("fetch %s[%d]: %v", topic, partition, err)
				}
			})
			fetches.EachRecord(func(r *kgo.Record) { seen[string(r.Value)] = r.Topic })
		}
	}
	pollUntil("early")
	assertConsumerProtocolGroup(t, group, "uniform")
	described, err := newAdmin(t).DescribeConsumerGroups(testContext(t, waitTimeout), group)
	if err != nil {
		t.Fatalf("describe consumer group %s: %v", group, err)
	}
	member := described[group].Members[0]
	if member.SubscribedTopicRegex == nil || !strings.Contains(*member.SubscribedTopicRegex, regexp.QuoteMeta(prefix)) {
		t.Fatalf("ConsumerGroupDescribe shows regex %v, want the member's expression", member.SubscribedTopicRegex)
	}

	// The broker resolves a group's expressions again at most every 10 s.
	createNamedTopic(t, ordersB)
	produceValue(t, ordersB, "late")
	pollUntil("late")
	if seen["late"] != ordersB {
		t.Fatalf("read %q from %s, want %s", "late", seen["late"], ordersB)
	}
	if topic, ok := seen["unmatched"]; ok {
		t.Fatalf("read a record of %s, which the expression does not match", topic)
	}
}
