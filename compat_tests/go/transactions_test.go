package compat

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Transactions with franz-go (issue 21): a transactional producer's commits are read by
// read_committed consumers and its aborts are not; a GroupTransactSession consumes,
// transforms and produces exactly once, its offsets committed with its transactions.
//
// A transaction's markers are written after EndTxn answers, so each check of what a
// read_committed consumer sees first waits until the partitions are stable (last stable
// offset = high watermark).

const txnTimeout = 60 * time.Second

func TestTransactionalProducerCommitsAreReadCommittedAndAbortsAreNot(t *testing.T) {
	t.Parallel()
	topic := createTopic(t, 2, nil)
	ctx := testContext(t, txnTimeout)
	producer := newKgoClient(t,
		kgo.TransactionalID(uniqueName(t, "txn")),
		kgo.TransactionTimeout(30*time.Second),
		kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
	)
	transact := func(end kgo.TransactionEndTry, values ...string) {
		t.Helper()
		if err := producer.BeginTransaction(); err != nil {
			t.Fatalf("BeginTransaction: %v", err)
		}
		if err := producer.ProduceSync(ctx, spread(values, 2)...).FirstErr(); err != nil {
			t.Fatalf("produce in a transaction: %v", err)
		}
		if err := producer.EndTransaction(ctx, end); err != nil {
			t.Fatalf("EndTransaction(commit=%v): %v", end, err)
		}
	}
	transact(kgo.TryCommit, "c0", "c1", "c2", "c3")
	transact(kgo.TryAbort, "a0", "a1", "a2", "a3")
	transact(kgo.TryCommit, "c4", "c5", "c6", "c7")

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

func TestGroupTransactSessionConsumesTransformsAndProducesExactlyOnce(t *testing.T) {
	t.Parallel()
	input := createTopic(t, 2, nil)
	output := createTopic(t, 2, nil)
	group := uniqueName(t, "group")
	ctx := testContext(t, 2*txnTimeout)
	plain := newKgoClient(t, kgo.DefaultProduceTopic(input), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	produce := func(values ...string) {
		t.Helper()
		if err := plain.ProduceSync(ctx, spread(values, 2)...).FirstErr(); err != nil {
			t.Fatalf("produce input: %v", err)
		}
	}

	session, err := kgo.NewGroupTransactSession(
		kgo.SeedBrokers(bootstrap()...),
		kgo.TransactionalID(uniqueName(t, "txn")),
		kgo.TransactionTimeout(30*time.Second),
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(input),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.RequireStableFetchOffsets(),
		kgo.FetchMaxWait(200*time.Millisecond),
		kgo.DefaultProduceTopic(output),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
	)
	if err != nil {
		t.Fatalf("NewGroupTransactSession: %v", err)
	}
	defer session.Close()

	var committedInputs []string
	// One round: poll, produce each value upper-cased to the same output partition, end.
	round := func(end kgo.TransactionEndTry) []string {
		t.Helper()
		fetches := session.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("no records before the deadline; committed so far: %v", committedInputs)
		}
		fetches.EachError(func(topic string, partition int32, err error) {
			t.Fatalf("fetch %s[%d]: %v", topic, partition, err)
		})
		records := fetches.Records()
		if len(records) == 0 {
			return nil
		}
		if err := session.Begin(); err != nil {
			t.Fatalf("Begin: %v", err)
		}
		var polled []string
		for _, record := range records {
			polled = append(polled, string(record.Value))
			out := &kgo.Record{Value: []byte(strings.ToUpper(string(record.Value))), Partition: record.Partition}
			if err := session.ProduceSync(ctx, out).FirstErr(); err != nil {
				t.Fatalf("produce output: %v", err)
			}
		}
		committed, err := session.End(ctx, end)
		if err != nil {
			t.Fatalf("End(commit=%v): %v", end, err)
		}
		if committed != bool(end) {
			t.Fatalf("End(commit=%v) reported committed=%v", end, committed)
		}
		if committed {
			committedInputs = append(committedInputs, polled...)
		}
		return polled
	}

	produce("i0", "i1", "i2", "i3", "i4", "i5")
	for len(committedInputs) < 6 {
		round(kgo.TryCommit)
	}
	// An aborted round: its output and offsets vanish, and the session rewinds to the
	// committed offsets, so the same inputs come back.
	produce("i6", "i7", "i8", "i9")
	var aborted []string
	for len(aborted) == 0 {
		aborted = round(kgo.TryAbort)
	}
	t.Logf("aborted a round of %v", aborted)
	for len(committedInputs) < 10 {
		round(kgo.TryCommit)
	}
	want := []string{"i0", "i1", "i2", "i3", "i4", "i5", "i6", "i7", "i8", "i9"}
	if got := slices.Sorted(slices.Values(committedInputs)); !slices.Equal(got, want) {
		t.Fatalf("committed transforms of %v, want each of %v once", got, want)
	}

	// The offsets are written with the transaction's markers, after EndTxn answers:
	// RequireStable (KIP-447) waits for the pending ones instead of reading the last.
	fetched, err := kadm.NewClient(newKgoClient(t)).FetchOffsets(kadm.RequireStable(ctx), group)
	if err != nil || fetched.Error() != nil {
		t.Fatalf("FetchOffsets: %v / %v", err, fetched.Error())
	}
	for partition := range int32(2) {
		if offset, ok := fetched.Lookup(input, partition); !ok || offset.At != 5 {
			t.Fatalf("committed offset of %s[%d]: %+v (found %v), want 5", input, partition, offset, ok)
		}
	}

	awaitStable(t, output)
	var outputs []string
	for _, record := range readIsolated(t, output, kgo.ReadCommitted(), 10) {
		outputs = append(outputs, string(record.Value))
	}
	wantOutputs := []string{"I0", "I1", "I2", "I3", "I4", "I5", "I6", "I7", "I8", "I9"}
	if got := slices.Sorted(slices.Values(outputs)); !slices.Equal(got, wantOutputs) {
		t.Fatalf("read_committed output %v, want %v", got, wantOutputs)
	}
	if n := len(readIsolated(t, output, kgo.ReadUncommitted(), 10+len(aborted))); n != 10+len(aborted) {
		t.Fatalf("read_uncommitted output has %d records, want %d", n, 10+len(aborted))
	}
}

// spread makes value i a record for partition i % partitions.
func spread(values []string, partitions int32) []*kgo.Record {
	records := make([]*kgo.Record, len(values))
	for i, value := range values {
		records[i] = &kgo.Record{Value: []byte(value), Partition: int32(i) % partitions}
	}
	return records
}

// awaitStable waits until every partition's last stable offset (ListOffsets with
// read_committed) has caught up with its high watermark.
func awaitStable(t *testing.T, topic string) {
	t.Helper()
	admin := newAdmin(t)
	ctx := testContext(t, waitTimeout)
	for {
		stable, errStable := admin.ListCommittedOffsets(ctx, topic)
		ends, errEnds := admin.ListEndOffsets(ctx, topic)
		if errStable == nil && errEnds == nil && stable.Error() == nil && ends.Error() == nil &&
			fmt.Sprint(offsetsByPartition(stable, topic)) == fmt.Sprint(offsetsByPartition(ends, topic)) {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("%s: last stable offsets %v behind high watermarks %v", topic,
				offsetsByPartition(stable, topic), offsetsByPartition(ends, topic))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func offsetsByPartition(offsets kadm.ListedOffsets, topic string) map[int32]int64 {
	byPartition := map[int32]int64{}
	for partition, listed := range offsets[topic] {
		byPartition[partition] = listed.Offset
	}
	return byPartition
}

// readIsolated reads the topic from the start at `level` until `want` records arrived,
// then polls once more to make sure no other record follows.
func readIsolated(t *testing.T, topic string, level kgo.IsolationLevel, want int) []*kgo.Record {
	t.Helper()
	client := newKgoClient(t,
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(level),
		kgo.FetchMaxWait(200*time.Millisecond),
	)
	ctx := testContext(t, waitTimeout)
	var records []*kgo.Record
	for len(records) < want {
		fetches := client.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d records of %s before the deadline", len(records), want, topic)
		}
		fetches.EachError(func(topic string, partition int32, err error) {
			t.Fatalf("fetch %s[%d]: %v", topic, partition, err)
		})
		records = append(records, fetches.Records()...)
	}
	extra, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	records = append(records, client.PollFetches(extra).Records()...)
	if len(records) != want {
		t.Fatalf("read %d records of %s, want exactly %d", len(records), topic, want)
	}
	return records
}

func valuesByPartition(records []*kgo.Record) map[int32][]string {
	byPartition := map[int32][]string{}
	for _, record := range records {
		byPartition[record.Partition] = append(byPartition[record.Partition], string(record.Value))
	}
	return byPartition
}

func offsetsOf(records []*kgo.Record, partition int32) []int64 {
	var offsets []int64
	for _, record := range records {
		if record.Partition == partition {
			offsets = append(offsets, record.Offset)
		}
	}
	return offsets
}

func mapsOfSlicesEqual(a, b map[int32][]string) bool {
	if len(a) != len(b) {
		return false
	}
	for key, values := range a {
		if !slices.Equal(values, b[key]) {
			return false
		}
	}
	return true
}
