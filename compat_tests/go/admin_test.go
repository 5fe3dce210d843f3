package compat

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const adminTimeout = 20 * time.Second

func ptr(s string) *string { return &s }

// topicConfigs describes a topic's configs as name -> (value, source).
func topicConfigs(t *testing.T, admin *kadm.Client, topic string) map[string]kadm.Config {
	t.Helper()
	described, err := admin.DescribeTopicConfigs(testContext(t, adminTimeout), topic)
	if err != nil {
		t.Fatalf("describe configs of %s: %v", topic, err)
	}
	resource, err := described.On(topic, nil)
	if err != nil || resource.Err != nil {
		t.Fatalf("describe configs of %s: %v / %v", topic, err, resource.Err)
	}
	configs := map[string]kadm.Config{}
	for _, config := range resource.Configs {
		configs[config.Key] = config
	}
	return configs
}

func assertConfig(t *testing.T, configs map[string]kadm.Config, name, value string, source kmsg.ConfigSource) {
	t.Helper()
	config, ok := configs[name]
	if !ok {
		t.Fatalf("config %s is not described", name)
	}
	if config.MaybeValue() != value || config.Source != source {
		t.Fatalf("config %s = %q from %v, want %q from %v", name, config.MaybeValue(), config.Source, value, source)
	}
}

// listTopic describes one topic through a new kadm client: kadm answers metadata
// from its client's cache for up to MetadataMinAge (5 s, kgo's
// RequestCachedMetadata), so a client that looked before a create or delete would
// see the old state.
func listTopic(t *testing.T, topic string) kadm.TopicDetails {
	t.Helper()
	topics, err := newAdmin(t).ListTopics(testContext(t, adminTimeout), topic)
	if err != nil {
		t.Fatalf("list topic %s: %v", topic, err)
	}
	return topics
}

func partitionCount(t *testing.T, topic string) int {
	t.Helper()
	topics := listTopic(t, topic)
	detail, ok := topics[topic]
	if !ok || detail.Err != nil {
		return 0
	}
	return len(detail.Partitions)
}

func TestKadmCreatesAltersAndDeletesTopics(t *testing.T) {
	t.Parallel()
	admin := newAdmin(t)
	ctx := testContext(t, adminTimeout)
	topic := uniqueName(t, "topic")

	dry, err := admin.ValidateCreateTopics(ctx, 2, 1, nil, topic)
	if err != nil || dry[topic].Err != nil {
		t.Fatalf("validate-only create: %v / %v", err, dry[topic].Err)
	}
	if n := partitionCount(t, topic); n != 0 {
		t.Fatalf("validate-only create made %s with %d partitions", topic, n)
	}

	created, err := admin.CreateTopic(ctx, 2, 1, map[string]*string{"retention.ms": ptr("3600000")}, topic)
	if err != nil || created.Err != nil {
		t.Fatalf("create %s: %v / %v", topic, err, created.Err)
	}
	if created.NumPartitions != 2 || created.ReplicationFactor != 1 {
		t.Fatalf("created %+v, want 2 partitions of 1 replica", created)
	}
	again, err := admin.CreateTopic(ctx, 2, 1, nil, topic)
	// kadm's one-topic call returns the topic's error both ways.
	if !errors.Is(err, kerr.TopicAlreadyExists) || !errors.Is(again.Err, kerr.TopicAlreadyExists) {
		t.Fatalf("creating %s twice: %v / %v, want TOPIC_ALREADY_EXISTS", topic, err, again.Err)
	}

	topics := listTopic(t, topic)
	if len(topics[topic].Partitions) != 2 {
		t.Fatalf("%s listed with partitions %v, want 2", topic, topics[topic].Partitions.Numbers())
	}
	for _, partition := range topics[topic].Partitions.Sorted() {
		if partition.Leader < 0 || !slices.Equal(partition.Replicas, []int32{partition.Leader}) || !slices.Equal(partition.ISR, partition.Replicas) {
			t.Fatalf("partition %d: leader %d, replicas %v, ISR %v", partition.Partition, partition.Leader, partition.Replicas, partition.ISR)
		}
	}
	if topics[topic].ID == (kadm.TopicID{}) {
		t.Fatalf("topic %s has no topic id", topic)
	}

	grown, err := admin.CreatePartitions(ctx, 1, topic)
	if err != nil || grown[topic].Err != nil {
		t.Fatalf("create partitions: %v / %v", err, grown[topic].Err)
	}
	if n := partitionCount(t, topic); n != 3 {
		t.Fatalf("%s has %d partitions after adding one to 2", topic, n)
	}
	shrink, err := admin.UpdatePartitions(ctx, 2, topic)
	if err != nil || !errors.Is(shrink[topic].Err, kerr.InvalidPartitions) {
		t.Fatalf("shrinking %s: %v / %v, want INVALID_PARTITIONS", topic, err, shrink[topic].Err)
	}

	configs := topicConfigs(t, admin, topic)
	assertConfig(t, configs, "retention.ms", "3600000", kmsg.ConfigSourceDynamicTopicConfig)
	assertConfig(t, configs, "cleanup.policy", "delete", kmsg.ConfigSourceDefaultConfig)

	// Incremental: set one, delete another (back to its default).
	altered, err := admin.AlterTopicConfigs(ctx, []kadm.AlterConfig{
		{Op: kadm.SetConfig, Name: "cleanup.policy", Value: ptr("compact")},
		{Op: kadm.DeleteConfig, Name: "retention.ms"},
	}, topic)
	if err != nil || altered[0].Err != nil {
		t.Fatalf("incremental alter: %v / %+v", err, altered)
	}
	configs = topicConfigs(t, admin, topic)
	assertConfig(t, configs, "cleanup.policy", "compact", kmsg.ConfigSourceDynamicTopicConfig)
	assertConfig(t, configs, "retention.ms", "604800000", kmsg.ConfigSourceDefaultConfig)

	// Legacy AlterConfigs replaces the whole set: cleanup.policy reverts.
	replaced, err := admin.AlterTopicConfigsState(ctx, []kadm.AlterConfig{{Name: "retention.ms", Value: ptr("1000")}}, topic)
	if err != nil || replaced[0].Err != nil {
		t.Fatalf("alter configs (state): %v / %+v", err, replaced)
	}
	configs = topicConfigs(t, admin, topic)
	assertConfig(t, configs, "retention.ms", "1000", kmsg.ConfigSourceDynamicTopicConfig)
	assertConfig(t, configs, "cleanup.policy", "delete", kmsg.ConfigSourceDefaultConfig)

	refused, err := admin.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "no.such.config", Value: ptr("1")}}, topic)
	if err != nil || !errors.Is(refused[0].Err, kerr.InvalidConfig) {
		t.Fatalf("unknown config: %v / %+v, want INVALID_CONFIG", err, refused)
	}

	deleted, err := admin.DeleteTopic(ctx, topic)
	if err != nil || deleted.Err != nil {
		t.Fatalf("delete %s: %v / %v", topic, err, deleted.Err)
	}
	waitFor(t, topic+" gone from metadata", func() bool { return partitionCount(t, topic) == 0 })
}

func TestKadmDescribesBrokerConfigsAndTheCluster(t *testing.T) {
	t.Parallel()
	admin := newAdmin(t)
	ctx := testContext(t, adminTimeout)
	metadata, err := admin.BrokerMetadata(ctx)
	if err != nil {
		t.Fatalf("broker metadata: %v", err)
	}
	if len(metadata.Brokers) != 1 || metadata.Controller != metadata.Brokers[0].NodeID {
		t.Fatalf("brokers %+v, controller %d: want one broker that is the controller", metadata.Brokers, metadata.Controller)
	}
	broker := metadata.Brokers[0]
	if address := fmt.Sprintf("%s:%d", broker.Host, broker.Port); address != bootstrap()[0] {
		t.Fatalf("broker advertises %s, clients bootstrap from %s", address, bootstrap()[0])
	}
	if metadata.Cluster == "" {
		t.Fatal("metadata carries no cluster id")
	}

	request := kmsg.NewPtrDescribeClusterRequest()
	response, err := request.RequestWith(ctx, newKgoClient(t))
	if err != nil || response.ErrorCode != 0 {
		t.Fatalf("DescribeCluster: %v / error code %d", err, response.ErrorCode)
	}
	if response.ClusterID != metadata.Cluster || response.ControllerID != broker.NodeID || len(response.Brokers) != 1 {
		t.Fatalf("DescribeCluster %+v disagrees with metadata %+v", response, metadata)
	}

	configs, err := admin.DescribeBrokerConfigs(ctx, broker.NodeID)
	if err != nil {
		t.Fatalf("describe broker configs: %v", err)
	}
	resource, err := configs.On(fmt.Sprint(broker.NodeID), nil)
	if err != nil || resource.Err != nil || len(resource.Configs) == 0 {
		t.Fatalf("broker %d configs: %v / %+v", broker.NodeID, err, resource)
	}

	versions, err := admin.ApiVersions(ctx)
	if err != nil {
		t.Fatalf("api versions: %v", err)
	}
	for _, brokerVersions := range versions {
		if brokerVersions.Err != nil {
			t.Fatalf("api versions of %d: %v", brokerVersions.NodeID, brokerVersions.Err)
		}
		if _, _, ok := brokerVersions.KeyVersions(int16(kmsg.ConsumerGroupHeartbeat)); !ok {
			t.Fatal("the broker does not advertise ConsumerGroupHeartbeat")
		}
	}
}

func TestKadmListsOffsetsByPositionAndTimeAndDeletesRecords(t *testing.T) {
	t.Parallel()
	admin := newAdmin(t)
	ctx := testContext(t, adminTimeout)
	topic := createTopic(t, 1, nil)
	base := time.UnixMilli(1_700_000_000_000)
	producer := newKgoClient(t, kgo.DefaultProduceTopic(topic))
	var records []*kgo.Record
	for i := range 10 {
		records = append(records, &kgo.Record{Value: fmt.Appendf(nil, "t%d", i), Timestamp: base.Add(time.Duration(i) * time.Second)})
	}
	if err := producer.ProduceSync(ctx, records...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}

	assertOffset := func(what string, listed kadm.ListedOffsets, err error, want int64) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		offset, ok := listed.Lookup(topic, 0)
		if !ok || offset.Err != nil || offset.Offset != want {
			t.Fatalf("%s: %+v, want offset %d", what, offset, want)
		}
	}
	listed, err := admin.ListStartOffsets(ctx, topic)
	assertOffset("start", listed, err, 0)
	listed, err = admin.ListEndOffsets(ctx, topic)
	assertOffset("end", listed, err, 10)
	listed, err = admin.ListOffsetsAfterMilli(ctx, base.Add(2500*time.Millisecond).UnixMilli(), topic)
	assertOffset("after base+2.5s", listed, err, 3)
	if stamp := listed[topic][0].Timestamp; stamp != base.Add(3*time.Second).UnixMilli() {
		t.Fatalf("offset by time carries timestamp %d, want %d", stamp, base.Add(3*time.Second).UnixMilli())
	}
	listed, err = admin.ListOffsetsAfterMilli(ctx, base.Add(time.Hour).UnixMilli(), topic)
	assertOffset("after every record (kadm: the end offset)", listed, err, 10)
	listed, err = admin.ListMaxTimestampOffsets(ctx, topic)
	assertOffset("max timestamp", listed, err, 9)

	var upTo kadm.Offsets
	upTo.Add(kadm.Offset{Topic: topic, Partition: 0, At: 4})
	deleted, err := admin.DeleteRecords(ctx, upTo)
	if err != nil {
		t.Fatalf("delete records: %v", err)
	}
	if response, _ := deleted.Lookup(topic, 0); response.Err != nil || response.LowWatermark != 4 {
		t.Fatalf("delete records: %+v, want low watermark 4", response)
	}
	listed, err = admin.ListStartOffsets(ctx, topic)
	assertOffset("start after deleting records", listed, err, 4)
	remaining := consumeAll(t, topic, 6)
	if remaining[0].Offset != 4 || string(remaining[0].Value) != "t4" {
		t.Fatalf("first record after delete: offset %d %q", remaining[0].Offset, remaining[0].Value)
	}
	var beyond kadm.Offsets
	beyond.Add(kadm.Offset{Topic: topic, Partition: 0, At: 11})
	refused, err := admin.DeleteRecords(ctx, beyond)
	if err != nil {
		t.Fatalf("delete records beyond the end: %v", err)
	}
	if response, _ := refused.Lookup(topic, 0); !errors.Is(response.Err, kerr.OffsetOutOfRange) {
		t.Fatalf("deleting beyond the end: %+v, want OFFSET_OUT_OF_RANGE", response)
	}
}

func TestKadmManagesGroupsAndTheirOffsets(t *testing.T) {
	t.Parallel()
	admin := newAdmin(t)
	ctx := testContext(t, 2*adminTimeout)
	topic := createTopic(t, 2, nil)
	group := uniqueName(t, "group")

	var commit kadm.Offsets
	commit.Add(kadm.Offset{Topic: topic, Partition: 0, At: 3, LeaderEpoch: -1, Metadata: "m0"})
	commit.Add(kadm.Offset{Topic: topic, Partition: 1, At: 5, LeaderEpoch: -1})
	if err := admin.CommitAllOffsets(ctx, group, commit); err != nil {
		t.Fatalf("commit offsets: %v", err)
	}
	fetched, err := admin.FetchOffsets(ctx, group)
	if err != nil || fetched.Error() != nil {
		t.Fatalf("fetch offsets: %v / %v", err, fetched.Error())
	}
	if p0, _ := fetched.Lookup(topic, 0); p0.At != 3 || p0.Metadata != "m0" {
		t.Fatalf("partition 0 committed %+v, want 3 with metadata m0", p0)
	}
	if p1, _ := fetched.Lookup(topic, 1); p1.At != 5 {
		t.Fatalf("partition 1 committed %+v, want 5", p1)
	}

	listed, err := admin.ListGroups(ctx)
	if err != nil {
		t.Fatalf("list groups: %v", err)
	}
	if _, ok := listed[group]; !ok {
		t.Fatalf("ListGroups does not list %s", group)
	}

	// An active classic member: the group is Stable and cannot be deleted.
	_, stop := startKgoMember(t, group, topic, kgo.Balancers(kgo.CooperativeStickyBalancer()))
	waitFor(t, "the group to be Stable with one member", func() bool {
		described, err := admin.DescribeGroups(ctx, group)
		return err == nil && described[group].State == "Stable" && len(described[group].Members) == 1
	})
	described, _ := admin.DescribeGroups(ctx, group)
	if g := described[group]; g.ProtocolType != "consumer" || g.Protocol != "cooperative-sticky" {
		t.Fatalf("described %+v, want protocol type consumer with cooperative-sticky", g)
	}
	if deleted, err := admin.DeleteGroup(ctx, group); !errors.Is(err, kerr.NonEmptyGroup) || !errors.Is(deleted.Err, kerr.NonEmptyGroup) {
		t.Fatalf("deleting an active group: %v / %v, want NON_EMPTY_GROUP", err, deleted.Err)
	}
	subscribed, err := admin.DeleteOffsets(ctx, group, kadm.TopicsSet{topic: {0: {}}})
	if err != nil {
		t.Fatalf("delete offsets of a subscribed topic: %v", err)
	}
	if partitionErr, _ := subscribed.Lookup(topic, 0); !errors.Is(partitionErr, kerr.GroupSubscribedToTopic) {
		t.Fatalf("deleting offsets of a subscribed topic: %v, want GROUP_SUBSCRIBED_TO_TOPIC", partitionErr)
	}
	stop()

	waitFor(t, "the group to be Empty", func() bool {
		described, err := admin.DescribeGroups(ctx, group)
		return err == nil && described[group].State == "Empty"
	})
	removed, err := admin.DeleteOffsets(ctx, group, kadm.TopicsSet{topic: {0: {}}})
	if err != nil || removed.Error() != nil {
		t.Fatalf("delete offsets: %v / %v", err, removed.Error())
	}
	fetched, err = admin.FetchOffsets(ctx, group)
	if err != nil {
		t.Fatalf("fetch offsets: %v", err)
	}
	if p0, ok := fetched.Lookup(topic, 0); ok && p0.At >= 0 {
		t.Fatalf("partition 0 still committed at %d after its offset was deleted", p0.At)
	}

	deleted, err := admin.DeleteGroup(ctx, group)
	if err != nil || deleted.Err != nil {
		t.Fatalf("delete group: %v / %v", err, deleted.Err)
	}
	listed, err = admin.ListGroups(ctx)
	if err != nil {
		t.Fatalf("list groups: %v", err)
	}
	if _, ok := listed[group]; ok {
		t.Fatalf("deleted group %s is still listed", group)
	}
	afterDelete, err := admin.DescribeGroups(ctx, group)
	if err != nil || afterDelete[group].State != "Dead" {
		t.Fatalf("deleted group described as %+v (%v), want Dead", afterDelete[group], err)
	}
}
