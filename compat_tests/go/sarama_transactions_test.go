package compat

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Transactions with sarama (issue 21): a SyncProducer with Producer.Transaction.ID
// commits and aborts transactions that franz-go's read_committed consumer honours, and
// commits a consumer group's offsets inside its transactions (AddMessageToTxn, which
// sends AddOffsetsToTxn and TxnOffsetCommit), at each Kafka version sarama is told.

func TestSaramaTransactionalProducerCommitsAndAborts(t *testing.T) {
	t.Parallel()
	for versionName, version := range saramaVersions {
		t.Run(versionName, func(t *testing.T) {
			t.Parallel()
			saramaTransacts(t, version)
			saramaTransactsConsumedOffsets(t, version)
		})
	}
}

func newSaramaTransactionalProducer(t *testing.T, version sarama.KafkaVersion) sarama.SyncProducer {
	t.Helper()
	config := saramaConfig(version)
	config.Producer.Transaction.ID = uniqueName(t, "txn")
	config.Producer.Transaction.Timeout = 30 * time.Second
	config.Producer.Idempotent = true
	config.Producer.RequiredAcks = sarama.WaitForAll
	config.Producer.Return.Successes = true
	config.Producer.Partitioner = sarama.NewManualPartitioner
	config.Net.MaxOpenRequests = 1
	producer, err := sarama.NewSyncProducer(bootstrap(), config)
	if err != nil {
		t.Fatalf("sarama.NewSyncProducer: %v", err)
	}
	t.Cleanup(func() { producer.Close() })
	if !producer.IsTransactional() {
		t.Fatal("the producer is not transactional")
	}
	return producer
}

// saramaMessages makes value i a message for partition i % partitions.
func saramaMessages(topic string, values []string, partitions int32) []*sarama.ProducerMessage {
	messages := make([]*sarama.ProducerMessage, len(values))
	for i, value := range values {
		messages[i] = &sarama.ProducerMessage{Topic: topic, Partition: int32(i) % partitions, Value: sarama.StringEncoder(value)}
	}
	return messages
}

func saramaTransacts(t *testing.T, version sarama.KafkaVersion) {
	topic := createTopic(t, 2, nil)
	producer := newSaramaTransactionalProducer(t, version)
	transact := func(commit bool, values ...string) {
		t.Helper()
		if err := producer.BeginTxn(); err != nil {
			t.Fatalf("BeginTxn: %v", err)
		}
		if err := producer.SendMessages(saramaMessages(topic, values, 2)); err != nil {
			t.Fatalf("send in a transaction: %v", err)
		}
		end, name := producer.CommitTxn, "CommitTxn"
		if !commit {
			end, name = producer.AbortTxn, "AbortTxn"
		}
		if err := end(); err != nil {
			t.Fatalf("%s: %v (status %v)", name, err, producer.TxnStatus())
		}
	}
	transact(true, "c0", "c1", "c2", "c3")
	transact(false, "a0", "a1", "a2", "a3")
	transact(true, "c4", "c5", "c6", "c7")

	awaitStable(t, topic)
	committed := readIsolated(t, topic, kgo.ReadCommitted(), 8)
	want := map[int32][]string{0: {"c0", "c2", "c4", "c6"}, 1: {"c1", "c3", "c5", "c7"}}
	if got := valuesByPartition(committed); !mapsOfSlicesEqual(got, want) {
		t.Fatalf("read_committed read %v, want %v", got, want)
	}
	// One marker per partition per transaction, each taking an offset.
	if got := offsetsOf(committed, 0); !slices.Equal(got, []int64{0, 1, 6, 7}) {
		t.Fatalf("read_committed offsets of partition 0: %v, want [0 1 6 7]", got)
	}
	everything := readIsolated(t, topic, kgo.ReadUncommitted(), 12)
	want = map[int32][]string{
		0: {"c0", "c2", "a0", "a2", "c4", "c6"},
		1: {"c1", "c3", "a1", "a3", "c5", "c7"},
	}
	if got := valuesByPartition(everything); !mapsOfSlicesEqual(got, want) {
		t.Fatalf("read_uncommitted read %v, want %v", got, want)
	}
}

// saramaTransactsConsumedOffsets consumes an input partition with sarama and, in each
// transaction, produces the values upper-cased and commits the consumed messages'
// offsets for a group: the committed round's offsets stick, the aborted round's do not.
func saramaTransactsConsumedOffsets(t *testing.T, version sarama.KafkaVersion) {
	input := createTopic(t, 1, nil)
	output := createTopic(t, 1, nil)
	group := uniqueName(t, "group")
	ctx := testContext(t, txnTimeout)
	plain := newKgoClient(t, kgo.DefaultProduceTopic(input))
	for _, value := range []string{"i0", "i1", "i2", "i3", "i4"} {
		if err := plain.ProduceSync(ctx, &kgo.Record{Value: []byte(value)}).FirstErr(); err != nil {
			t.Fatalf("produce input: %v", err)
		}
	}
	consumed := saramaConsume(t, version, input, 5)
	producer := newSaramaTransactionalProducer(t, version)
	admin := newAdmin(t)
	// The group's offsets are written with the transaction's markers, after EndTxn
	// answers, so a commit's offset shows in FetchOffsets a moment after CommitTxn.
	awaitCommittedOffset := func(want int64) {
		t.Helper()
		var got int64 = -1
		for deadline := time.Now().Add(waitTimeout); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
			fetched, err := admin.FetchOffsets(ctx, group)
			if err != nil || fetched.Error() != nil {
				t.Fatalf("FetchOffsets: %v / %v", err, fetched.Error())
			}
			if offset, ok := fetched.Lookup(input, 0); ok {
				got = offset.At
			}
			if got == want {
				return
			}
		}
		t.Fatalf("offset of %s[0] committed for %s: %d, want %d", input, group, got, want)
	}
	round := func(commit bool, messages []*sarama.ConsumerMessage) {
		t.Helper()
		if err := producer.BeginTxn(); err != nil {
			t.Fatalf("BeginTxn: %v", err)
		}
		for _, message := range messages {
			out := &sarama.ProducerMessage{Topic: output, Value: sarama.StringEncoder(strings.ToUpper(string(message.Value)))}
			if _, _, err := producer.SendMessage(out); err != nil {
				t.Fatalf("send output: %v", err)
			}
			if err := producer.AddMessageToTxn(message, group, nil); err != nil {
				t.Fatalf("AddMessageToTxn: %v", err)
			}
		}
		end, name := producer.CommitTxn, "CommitTxn"
		if !commit {
			end, name = producer.AbortTxn, "AbortTxn"
		}
		if err := end(); err != nil {
			t.Fatalf("%s: %v (status %v)", name, err, producer.TxnStatus())
		}
	}

	round(true, consumed[:3])
	awaitCommittedOffset(3)
	// sarama sends a transaction's offsets only when it commits; an abort drops them.
	round(false, consumed[3:])
	awaitStable(t, output)
	awaitCommittedOffset(3)
	round(true, consumed[3:])
	awaitCommittedOffset(5)

	awaitStable(t, output)
	var outputs []string
	for _, record := range readIsolated(t, output, kgo.ReadCommitted(), 5) {
		outputs = append(outputs, string(record.Value))
	}
	if want := []string{"I0", "I1", "I2", "I3", "I4"}; !slices.Equal(outputs, want) {
		t.Fatalf("read_committed output %v, want %v", outputs, want)
	}
	if n := len(readIsolated(t, output, kgo.ReadUncommitted(), 7)); n != 7 {
		t.Fatalf("read_uncommitted output has %d records, want 7", n)
	}
}

// saramaConsume reads the first `want` messages of partition 0 with a read_committed
// sarama consumer.
func saramaConsume(t *testing.T, version sarama.KafkaVersion, topic string, want int) []*sarama.ConsumerMessage {
	t.Helper()
	config := saramaConfig(version)
	config.Consumer.IsolationLevel = sarama.ReadCommitted
	config.Consumer.MaxWaitTime = 200 * time.Millisecond
	consumer, err := sarama.NewConsumer(bootstrap(), config)
	if err != nil {
		t.Fatalf("sarama.NewConsumer: %v", err)
	}
	defer consumer.Close()
	partition, err := consumer.ConsumePartition(topic, 0, sarama.OffsetOldest)
	if err != nil {
		t.Fatalf("ConsumePartition: %v", err)
	}
	defer partition.Close()
	deadline := time.After(waitTimeout)
	var messages []*sarama.ConsumerMessage
	for len(messages) < want {
		select {
		case message := <-partition.Messages():
			messages = append(messages, message)
		case err := <-partition.Errors():
			t.Fatalf("consume %s: %v", topic, err)
		case <-deadline:
			t.Fatalf("consumed %d of %d messages of %s before the deadline", len(messages), want, topic)
		}
	}
	return messages
}
