package compat

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const (
	resumePartitions    = 2
	resumeRecords       = 20 // per partition
	resumeCommittedUpTo = 12 // the first consumer commits this offset on each partition
)

func produceForResume(t *testing.T) string {
	t.Helper()
	topic := createTopic(t, resumePartitions, nil)
	producer := newKgoClient(t, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	var records []*kgo.Record
	for partition := range int32(resumePartitions) {
		for i := range resumeRecords {
			records = append(records, &kgo.Record{Partition: partition, Value: fmt.Appendf(nil, "p%d-%d", partition, i)})
		}
	}
	if err := producer.ProduceSync(testContext(t, waitTimeout), records...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	return topic
}

// offsetsAfterCommit are the offsets a restarted member must read: from the
// committed offset to the end, on every partition.
func offsetsAfterCommit() map[int32][]int64 {
	want := map[int32][]int64{}
	for partition := range int32(resumePartitions) {
		for offset := int64(resumeCommittedUpTo); offset < resumeRecords; offset++ {
			want[partition] = append(want[partition], offset)
		}
	}
	return want
}

func assertResumed(t *testing.T, got map[int32][]int64) {
	t.Helper()
	want := offsetsAfterCommit()
	for partition := range int32(resumePartitions) {
		if !slices.Equal(got[partition], want[partition]) {
			t.Fatalf("partition %d: the restarted member read offsets %v, want %v", partition, got[partition], want[partition])
		}
	}
}

// A kgo group member reads everything, commits offset 12 on each partition and
// stops; a new member of the same group starts at 12, not at the reset offset.
func TestFranzGoGroupMemberResumesFromCommittedOffsetsAfterRestart(t *testing.T) {
	t.Parallel()
	topic := produceForResume(t)
	group := uniqueName(t, "group")
	member := func() *kgo.Client {
		return newKgoClient(t,
			kgo.ConsumerGroup(group),
			kgo.ConsumeTopics(topic),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
			kgo.DisableAutoCommit(),
			kgo.FetchMaxWait(200*time.Millisecond),
		)
	}
	first := member()
	ctx := testContext(t, waitTimeout)
	for read := 0; read < resumePartitions*resumeRecords; {
		fetches := first.PollFetches(ctx)
		if err := fetches.Err0(); err != nil {
			t.Fatalf("first member: %v", err)
		}
		read += fetches.NumRecords()
	}
	commit := map[string]map[int32]kgo.EpochOffset{topic: {}}
	for partition := range int32(resumePartitions) {
		commit[topic][partition] = kgo.EpochOffset{Epoch: -1, Offset: resumeCommittedUpTo}
	}
	var commitErr error
	first.CommitOffsetsSync(ctx, commit, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, response *kmsg.OffsetCommitResponse, err error) {
		commitErr = err
		for _, topic := range response.Topics {
			for _, partition := range topic.Partitions {
				if partition.ErrorCode != 0 && commitErr == nil {
					commitErr = fmt.Errorf("partition %d: error code %d", partition.Partition, partition.ErrorCode)
				}
			}
		}
	})
	if commitErr != nil {
		t.Fatalf("commit: %v", commitErr)
	}
	first.Close()

	second := member()
	got := map[int32][]int64{}
	for read := 0; read < resumePartitions*(resumeRecords-resumeCommittedUpTo); {
		fetches := second.PollFetches(ctx)
		if err := fetches.Err0(); err != nil {
			t.Fatalf("restarted member: %v", err)
		}
		fetches.EachRecord(func(r *kgo.Record) { got[r.Partition] = append(got[r.Partition], r.Offset) })
		read += fetches.NumRecords()
	}
	assertResumed(t, got)
}

// sarama marks messages below offset 12 only; after Close (which commits) a
// new ConsumerGroup member of the same group starts at 12.
type markBelowHandler struct {
	markBelow int64
	mu        sync.Mutex
	read      map[int32][]int64
	reached   chan struct{}
	once      sync.Once
	target    int
}

func (h *markBelowHandler) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (h *markBelowHandler) Cleanup(sarama.ConsumerGroupSession) error { return nil }
func (h *markBelowHandler) ConsumeClaim(session sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	for message := range claim.Messages() {
		if message.Offset < h.markBelow {
			session.MarkMessage(message, "")
		}
		h.mu.Lock()
		h.read[message.Partition] = append(h.read[message.Partition], message.Offset)
		total := 0
		for _, offsets := range h.read {
			total += len(offsets)
		}
		h.mu.Unlock()
		if total >= h.target {
			h.once.Do(func() { close(h.reached) })
		}
	}
	return nil
}

func runSaramaUntil(t *testing.T, group, topic string, handler *markBelowHandler) {
	t.Helper()
	config := saramaGroupConfig(sarama.NewBalanceStrategyRange())
	consumerGroup, err := sarama.NewConsumerGroup(bootstrap(), group, config)
	if err != nil {
		t.Fatalf("sarama.NewConsumerGroup: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- consumerGroup.Consume(ctx, []string{topic}, handler) }()
	select {
	case <-handler.reached:
	case <-time.After(waitTimeout):
		t.Fatalf("sarama member read %v before the deadline", handler.read)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("sarama consume: %v", err)
	}
	if err := consumerGroup.Close(); err != nil { // commits what was marked
		t.Fatalf("sarama close: %v", err)
	}
}

func TestSaramaConsumerGroupResumesFromCommittedOffsetsAfterRestart(t *testing.T) {
	t.Parallel()
	topic := produceForResume(t)
	group := uniqueName(t, "group")
	first := &markBelowHandler{markBelow: resumeCommittedUpTo, read: map[int32][]int64{}, reached: make(chan struct{}), target: resumePartitions * resumeRecords}
	runSaramaUntil(t, group, topic, first)
	second := &markBelowHandler{markBelow: 0, read: map[int32][]int64{}, reached: make(chan struct{}), target: resumePartitions * (resumeRecords - resumeCommittedUpTo)}
	runSaramaUntil(t, group, topic, second)
	second.mu.Lock()
	defer second.mu.Unlock()
	assertResumed(t, second.read)
}
