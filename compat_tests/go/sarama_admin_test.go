package compat

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/IBM/sarama"
)

func newSaramaAdmin(t *testing.T, version sarama.KafkaVersion) sarama.ClusterAdmin {
	t.Helper()
	admin, err := sarama.NewClusterAdmin(bootstrap(), saramaConfig(version))
	if err != nil {
		t.Fatalf("sarama.NewClusterAdmin: %v", err)
	}
	t.Cleanup(func() { admin.Close() })
	return admin
}

// saramaOK tells whether a sarama result carries no error: sarama reports success
// as nil or as the KError ErrNoError.
func saramaOK(err error) bool {
	return err == nil || errors.Is(err, sarama.ErrNoError)
}

func saramaTopicConfig(t *testing.T, admin sarama.ClusterAdmin, topic string) map[string]sarama.ConfigEntry {
	t.Helper()
	entries, err := admin.DescribeConfig(sarama.ConfigResource{Type: sarama.TopicResource, Name: topic})
	if err != nil {
		t.Fatalf("describe config of %s: %v", topic, err)
	}
	configs := map[string]sarama.ConfigEntry{}
	for _, entry := range entries {
		configs[entry.Name] = entry
	}
	return configs
}

func saramaPartitions(t *testing.T, admin sarama.ClusterAdmin, topic string) []int32 {
	t.Helper()
	described, err := admin.DescribeTopics([]string{topic})
	if err != nil || len(described) != 1 || !saramaOK(described[0].Err) {
		t.Fatalf("describe topic %s: %v / %+v", topic, err, described)
	}
	var partitions []int32
	for _, partition := range described[0].Partitions {
		partitions = append(partitions, partition.ID)
	}
	slices.Sort(partitions)
	return partitions
}

func TestSaramaClusterAdminManagesTopicsConfigsRecordsAndGroups(t *testing.T) {
	t.Parallel()
	for versionName, version := range saramaVersions {
		t.Run(versionName, func(t *testing.T) {
			t.Parallel()
			saramaAdministers(t, version)
		})
	}
}

func saramaAdministers(t *testing.T, version sarama.KafkaVersion) {
	admin := newSaramaAdmin(t, version)
	topic := uniqueName(t, "topic")
	detail := &sarama.TopicDetail{NumPartitions: 2, ReplicationFactor: 1, ConfigEntries: map[string]*string{"retention.ms": ptr("3600000")}}

	if err := admin.CreateTopic(topic, detail, true); err != nil {
		t.Fatalf("validate-only create: %v", err)
	}
	if topics, err := admin.ListTopics(); err != nil || topics[topic].NumPartitions != 0 {
		t.Fatalf("validate-only create made the topic: %v / %+v", err, topics[topic])
	}
	if err := admin.CreateTopic(topic, detail, false); err != nil {
		t.Fatalf("create %s: %v", topic, err)
	}
	if err := admin.CreateTopic(topic, detail, false); !errors.Is(err, sarama.ErrTopicAlreadyExists) {
		t.Fatalf("creating %s twice: %v, want TOPIC_ALREADY_EXISTS", topic, err)
	}
	topics, err := admin.ListTopics()
	if err != nil || topics[topic].NumPartitions != 2 || topics[topic].ReplicationFactor != 1 {
		t.Fatalf("ListTopics: %v / %+v", err, topics[topic])
	}
	if got := topics[topic].ConfigEntries["retention.ms"]; got == nil || *got != "3600000" {
		t.Fatalf("ListTopics shows retention.ms %v, want 3600000", got)
	}
	if err := admin.CreatePartitions(topic, 3, nil, false); err != nil {
		t.Fatalf("create partitions: %v", err)
	}
	if partitions := saramaPartitions(t, admin, topic); !slices.Equal(partitions, []int32{0, 1, 2}) {
		t.Fatalf("partitions after growing to 3: %v", partitions)
	}

	if config := saramaTopicConfig(t, admin, topic)["retention.ms"]; config.Value != "3600000" || config.Source != sarama.SourceTopic {
		t.Fatalf("retention.ms described as %+v", config)
	}
	set := map[string]sarama.IncrementalAlterConfigsEntry{
		"cleanup.policy": {Operation: sarama.IncrementalAlterConfigsOperationSet, Value: ptr("compact")},
	}
	if err := admin.IncrementalAlterConfig(sarama.TopicResource, topic, set, false); err != nil {
		t.Fatalf("incremental alter: %v", err)
	}
	if config := saramaTopicConfig(t, admin, topic)["cleanup.policy"]; config.Value != "compact" {
		t.Fatalf("cleanup.policy after incremental alter: %+v", config)
	}
	if err := admin.AlterConfig(sarama.TopicResource, topic, map[string]*string{"retention.ms": ptr("86400000")}, false); err != nil {
		t.Fatalf("alter config: %v", err)
	}
	configs := saramaTopicConfig(t, admin, topic)
	if configs["retention.ms"].Value != "86400000" || configs["cleanup.policy"].Value != "delete" || !configs["cleanup.policy"].Default {
		t.Fatalf("after AlterConfig (replaces every override): %+v / %+v", configs["retention.ms"], configs["cleanup.policy"])
	}

	producer, err := sarama.NewSyncProducer(bootstrap(), idempotentSaramaConfig(version, sarama.CompressionNone))
	if err != nil {
		t.Fatalf("producer: %v", err)
	}
	for i := range 10 {
		if _, _, err := producer.SendMessage(&sarama.ProducerMessage{Topic: topic, Partition: 0, Value: sarama.StringEncoder(fmt.Sprint(i))}); err != nil {
			t.Fatalf("send: %v", err)
		}
	}
	producer.Close()
	listOffset := func(at int64) int64 {
		t.Helper()
		listed, err := admin.ListOffsets(map[string]map[int32]int64{topic: {0: at}}, nil)
		if err != nil || listed[topic][0] == nil || !saramaOK(listed[topic][0].Err) {
			t.Fatalf("list offsets (%d): %v / %+v", at, err, listed[topic][0])
		}
		return listed[topic][0].Offset
	}
	if end := listOffset(sarama.OffsetNewest); end != 10 {
		t.Fatalf("end offset %d, want 10", end)
	}
	if err := admin.DeleteRecords(topic, map[int32]int64{0: 4}); err != nil {
		t.Fatalf("delete records: %v", err)
	}
	if start := listOffset(sarama.OffsetOldest); start != 4 {
		t.Fatalf("start offset after deleting records: %d, want 4", start)
	}

	brokers, controller, err := admin.DescribeCluster()
	if err != nil || len(brokers) != 1 || brokers[0].ID() != controller || brokers[0].Addr() != bootstrap()[0] {
		t.Fatalf("DescribeCluster: %v, controller %d, brokers %v", err, controller, brokers)
	}

	group := uniqueName(t, "group")
	committed := map[string]map[int32]sarama.OffsetAndMetadata{topic: {0: {Offset: 3, LeaderEpoch: -1}, 1: {Offset: 5, Metadata: "m1", LeaderEpoch: -1}}}
	if response, err := admin.AlterConsumerGroupOffsets(group, committed, nil); err != nil || response.Errors[topic][0] != sarama.ErrNoError {
		t.Fatalf("alter group offsets: %v / %+v", err, response)
	}
	fetched, err := admin.ListConsumerGroupOffsets(group, map[string][]int32{topic: {0, 1}})
	if err != nil || fetched.GetBlock(topic, 0).Offset != 3 || fetched.GetBlock(topic, 1).Offset != 5 || fetched.GetBlock(topic, 1).Metadata != "m1" {
		t.Fatalf("group offsets: %v / %+v %+v", err, fetched.GetBlock(topic, 0), fetched.GetBlock(topic, 1))
	}
	groups, err := admin.ListConsumerGroups()
	if _, listed := groups[group]; err != nil || !listed {
		t.Fatalf("ListConsumerGroups: %v, %s listed: %v", err, group, listed)
	}
	descriptions, err := admin.DescribeConsumerGroups([]string{group})
	if err != nil || len(descriptions) != 1 || descriptions[0].State != "Empty" {
		t.Fatalf("DescribeConsumerGroups: %v / %+v", err, descriptions)
	}
	if err := admin.DeleteConsumerGroupOffset(group, topic, 0); err != nil {
		t.Fatalf("delete group offset: %v", err)
	}
	fetched, err = admin.ListConsumerGroupOffsets(group, map[string][]int32{topic: {0, 1}})
	if err != nil || fetched.GetBlock(topic, 0).Offset != -1 || fetched.GetBlock(topic, 1).Offset != 5 {
		t.Fatalf("group offsets after deleting partition 0's: %v / %+v %+v", err, fetched.GetBlock(topic, 0), fetched.GetBlock(topic, 1))
	}
	if err := admin.DeleteConsumerGroup(group); err != nil {
		t.Fatalf("delete group: %v", err)
	}
	groups, err = admin.ListConsumerGroups()
	if _, listed := groups[group]; err != nil || listed {
		t.Fatalf("ListConsumerGroups after deleting %s: %v, still listed: %v", group, err, listed)
	}

	if err := admin.DeleteTopic(topic); err != nil {
		t.Fatalf("delete topic: %v", err)
	}
	waitFor(t, topic+" gone", func() bool {
		topics, err := admin.ListTopics()
		_, exists := topics[topic]
		return err == nil && !exists
	})
}
