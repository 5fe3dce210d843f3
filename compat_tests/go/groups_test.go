package compat

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kgo"
)

const (
	groupPartitions = 4
	groupBatch      = 10 // records per partition per round
	waitTimeout     = 30 * time.Second
)

// memberState is what one group member saw: its current assignment, every
// offset it consumed, and the partitions taken from it in each revocation.
type memberState struct {
	mu          sync.Mutex
	assignment  map[int32]bool
	seen        map[int32]map[int64]bool
	revocations [][]int32
}

func newMemberState() *memberState {
	return &memberState{assignment: map[int32]bool{}, seen: map[int32]map[int64]bool{}}
}

func (s *memberState) assign(partitions []int32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range partitions {
		s.assignment[p] = true
	}
}

func (s *memberState) revoke(partitions []int32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range partitions {
		delete(s.assignment, p)
	}
	s.revocations = append(s.revocations, slices.Sorted(slices.Values(partitions)))
}

func (s *memberState) consumed(partition int32, offset int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.seen[partition] == nil {
		s.seen[partition] = map[int64]bool{}
	}
	s.seen[partition][offset] = true
}

func (s *memberState) assigned() []int32 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var partitions []int32
	for p := range s.assignment {
		partitions = append(partitions, p)
	}
	slices.Sort(partitions)
	return partitions
}

func (s *memberState) revocationLog() [][]int32 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.revocations)
}

// sawAll tells whether the members together consumed offsets [from, to) of every partition.
func sawAll(from, to int64, members ...*memberState) bool {
	for partition := range int32(groupPartitions) {
		for offset := from; offset < to; offset++ {
			found := false
			for _, m := range members {
				m.mu.Lock()
				found = found || m.seen[partition][offset]
				m.mu.Unlock()
			}
			if !found {
				return false
			}
		}
	}
	return true
}

func waitFor(t *testing.T, what string, condition func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for !condition() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for: %s", waitTimeout, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// produceRound writes groupBatch records to every partition of topic.
func produceRound(t *testing.T, topic string, round int) {
	t.Helper()
	producer := newKgoClient(t, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	var records []*kgo.Record
	for partition := range int32(groupPartitions) {
		for i := range groupBatch {
			records = append(records, &kgo.Record{Partition: partition, Value: fmt.Appendf(nil, "r%d-p%d-%d", round, partition, i)})
		}
	}
	if err := producer.ProduceSync(testContext(t, waitTimeout), records...).FirstErr(); err != nil {
		t.Fatalf("produce round %d: %v", round, err)
	}
	producer.Close()
}

func allPartitions() []int32 { return []int32{0, 1, 2, 3} }

// splitEvenly tells whether two members hold disjoint halves of the topic.
func splitEvenly(a, b *memberState) bool {
	first, second := a.assigned(), b.assigned()
	union := slices.Sorted(slices.Values(append(slices.Clone(first), second...)))
	return len(first) == groupPartitions/2 && len(second) == groupPartitions/2 && slices.Equal(union, allPartitions())
}

// assertCommitted checks the group's committed offsets through kadm.
func assertCommitted(t *testing.T, group, topic string, want int64) {
	t.Helper()
	admin := newAdmin(t)
	offsets, err := admin.FetchOffsets(testContext(t, waitTimeout), group)
	if err != nil {
		t.Fatalf("fetch offsets of %s: %v", group, err)
	}
	for partition := range int32(groupPartitions) {
		committed, ok := offsets.Lookup(topic, partition)
		if !ok || committed.Err != nil || committed.At != want {
			t.Fatalf("group %s partition %d: committed %+v (found %v), want %d", group, partition, committed, ok, want)
		}
	}
}

// groupScenario is the same story for every client and protocol: one member
// takes every partition; a second joins and they split them; the second leaves
// and the first takes everything back; no record is missed on the way and the
// group's committed offsets end at the log end.
func groupScenario(t *testing.T, start func(t *testing.T, group, topic string) (*memberState, func())) (first *memberState) {
	topic := createTopic(t, groupPartitions, nil)
	group := uniqueName(t, "group")
	produceRound(t, topic, 0)

	first, stopFirst := start(t, group, topic)
	waitFor(t, "the first member to own every partition", func() bool { return slices.Equal(first.assigned(), allPartitions()) })
	waitFor(t, "the first member to read round 0", func() bool { return sawAll(0, groupBatch, first) })

	second, stopSecond := start(t, group, topic)
	waitFor(t, "two members splitting the partitions", func() bool { return splitEvenly(first, second) })
	produceRound(t, topic, 1)
	waitFor(t, "two members reading round 1", func() bool { return sawAll(groupBatch, 2*groupBatch, first, second) })

	stopSecond()
	waitFor(t, "the first member owning every partition after the second left", func() bool {
		return slices.Equal(first.assigned(), allPartitions())
	})
	produceRound(t, topic, 2)
	waitFor(t, "the remaining member reading round 2", func() bool { return sawAll(2*groupBatch, 3*groupBatch, first) })
	stopFirst()
	assertCommitted(t, group, topic, 3*groupBatch)
	return first
}

// --- sarama ---------------------------------------------------------------------------

type saramaHandler struct {
	topic string
	state *memberState
}

func (h saramaHandler) Setup(session sarama.ConsumerGroupSession) error {
	h.state.assign(session.Claims()[h.topic])
	return nil
}

func (h saramaHandler) Cleanup(session sarama.ConsumerGroupSession) error {
	h.state.revoke(session.Claims()[h.topic])
	return nil
}

func (h saramaHandler) ConsumeClaim(session sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	for message := range claim.Messages() {
		h.state.consumed(message.Partition, message.Offset)
		session.MarkMessage(message, "")
	}
	return nil
}

func saramaGroupConfig(strategy sarama.BalanceStrategy) *sarama.Config {
	config := saramaConfig(sarama.MaxVersion)
	config.Consumer.Offsets.Initial = sarama.OffsetOldest
	config.Consumer.Offsets.AutoCommit.Interval = 200 * time.Millisecond
	config.Consumer.Group.Rebalance.GroupStrategies = []sarama.BalanceStrategy{strategy}
	config.Consumer.Group.Session.Timeout = 6 * time.Second
	config.Consumer.Group.Heartbeat.Interval = 300 * time.Millisecond
	config.Consumer.MaxWaitTime = 200 * time.Millisecond
	return config
}

// startSaramaMember runs one sarama ConsumerGroup member until the returned stop
// is called; stop closes the group, which commits and leaves.
func startSaramaMember(t *testing.T, group, topic string, config *sarama.Config) (*memberState, func()) {
	t.Helper()
	consumerGroup, err := sarama.NewConsumerGroup(bootstrap(), group, config)
	if err != nil {
		t.Fatalf("sarama.NewConsumerGroup: %v", err)
	}
	state := newMemberState()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		for ctx.Err() == nil {
			if err := consumerGroup.Consume(ctx, []string{topic}, saramaHandler{topic, state}); err != nil {
				if errors.Is(err, sarama.ErrClosedConsumerGroup) {
					break
				}
				done <- err
				return
			}
		}
		done <- nil
	}()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("sarama member of %s: %v", group, err)
			}
			if err := consumerGroup.Close(); err != nil {
				t.Errorf("close sarama member of %s: %v", group, err)
			}
		})
	}
	t.Cleanup(stop)
	go func() {
		for err := range consumerGroup.Errors() {
			t.Errorf("sarama group %s: %v", group, err)
		}
	}()
	return state, stop
}

func TestSaramaConsumerGroupRebalancesAsMembersJoinAndLeave(t *testing.T) {
	t.Parallel()
	strategies := map[string]sarama.BalanceStrategy{
		"range":      sarama.NewBalanceStrategyRange(),
		"sticky":     sarama.NewBalanceStrategySticky(),
		"roundrobin": sarama.NewBalanceStrategyRoundRobin(),
	}
	for name, strategy := range strategies {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			config := saramaGroupConfig(strategy)
			config.Consumer.Return.Errors = true
			groupScenario(t, func(t *testing.T, group, topic string) (*memberState, func()) {
				return startSaramaMember(t, group, topic, config)
			})
		})
	}
}

// --- franz-go ---------------------------------------------------------------------------

// startKgoMember runs one kgo group member until stop, which commits what it
// polled and leaves the group.
func startKgoMember(t *testing.T, group, topic string, opts ...kgo.Opt) (*memberState, func()) {
	t.Helper()
	state := newMemberState()
	onAssigned := func(_ context.Context, _ *kgo.Client, assigned map[string][]int32) { state.assign(assigned[topic]) }
	onRevoked := func(_ context.Context, _ *kgo.Client, revoked map[string][]int32) {
		if len(revoked[topic]) > 0 {
			state.revoke(revoked[topic])
		}
	}
	client, err := kgo.NewClient(append([]kgo.Opt{
		kgo.SeedBrokers(bootstrap()...),
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(200 * time.Millisecond),
		kgo.SessionTimeout(6 * time.Second),
		kgo.HeartbeatInterval(300 * time.Millisecond),
		kgo.AutoCommitInterval(200 * time.Millisecond),
		kgo.OnPartitionsAssigned(onAssigned),
		kgo.OnPartitionsRevoked(onRevoked),
		kgo.OnPartitionsLost(onRevoked),
	}, opts...)...)
	if err != nil {
		t.Fatalf("kgo.NewClient: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			fetches := client.PollFetches(ctx)
			fetches.EachError(func(topic string, partition int32, err error) {
				if !errors.Is(err, context.Canceled) {
					t.Errorf("member of %s: fetch %s[%d]: %v", group, topic, partition, err)
				}
			})
			fetches.EachRecord(func(r *kgo.Record) { state.consumed(r.Partition, r.Offset) })
		}
	}()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			<-done
			if err := client.CommitUncommittedOffsets(testContext(t, waitTimeout)); err != nil {
				t.Errorf("member of %s: final commit: %v", group, err)
			}
			client.Close() // leaves the group
		})
	}
	t.Cleanup(stop)
	return state, stop
}

func TestFranzGoCooperativeStickyGroupRebalancesIncrementally(t *testing.T) {
	t.Parallel()
	first := groupScenario(t, func(t *testing.T, group, topic string) (*memberState, func()) {
		return startKgoMember(t, group, topic, kgo.Balancers(kgo.CooperativeStickyBalancer()))
	})
	// Cooperative: when the second member joined, the first gave up only the two
	// partitions that moved, never its whole assignment.
	revocations := first.revocationLog()
	if len(revocations) == 0 || len(revocations[0]) != groupPartitions/2 {
		t.Fatalf("first member's revocations %v: the first should take exactly %d partitions", revocations, groupPartitions/2)
	}
}

// kgo v1.22.2 speaks KIP-848 when asked with ServerSideBalancer and its first
// balancer is range or sticky (consumer_group_848.go: should848), and the broker
// serves ConsumerGroupHeartbeat v1.
func TestFranzGoKIP848GroupRebalancesOnTheBroker(t *testing.T) {
	t.Parallel()
	for name, balancer := range map[string]kgo.GroupBalancer{"uniform": kgo.CooperativeStickyBalancer(), "range": kgo.RangeBalancer()} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var checkedProtocol bool
			groupScenario(t, func(t *testing.T, group, topic string) (*memberState, func()) {
				state, stop := startKgoMember(t, group, topic, kgo.Balancers(balancer), kgo.ServerSideBalancer())
				if !checkedProtocol {
					checkedProtocol = true
					assertConsumerProtocolGroup(t, group, name)
				}
				return state, stop
			})
		})
	}
}

// assertConsumerProtocolGroup proves a group is a KIP-848 group: ConsumerGroupDescribe
// knows it, with the server-side assignor the client asked for.
func assertConsumerProtocolGroup(t *testing.T, group, assignor string) {
	t.Helper()
	admin := newAdmin(t)
	waitFor(t, "ConsumerGroupDescribe to show a member of "+group, func() bool {
		described, err := admin.DescribeConsumerGroups(testContext(t, waitTimeout), group)
		if err != nil {
			return false
		}
		g, ok := described[group]
		return ok && g.Err == nil && len(g.Members) == 1
	})
	described, err := admin.DescribeConsumerGroups(testContext(t, waitTimeout), group)
	if err != nil {
		t.Fatalf("describe consumer group %s: %v", group, err)
	}
	if got := described[group].AssignorName; got != assignor {
		t.Fatalf("group %s uses assignor %q, want %q", group, got, assignor)
	}
	listed, err := admin.ListGroupsByType(testContext(t, waitTimeout), []string{"consumer"})
	if err != nil {
		t.Fatalf("list groups of type consumer: %v", err)
	}
	if _, ok := listed[group]; !ok {
		t.Fatalf("ListGroups(type=consumer) does not list %s: %v", group, listed.Groups())
	}
}
