package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The -raw drain: each consumer client fetches its partitions (i, i+n, ... of n
// clients) from offset 0 with its own Fetch requests, one at a time, sessionless,
// the Java consumer's sizes (50 MiB a response, 1 MiB a partition, 500 ms wait), and
// counts the records from the batch headers without decoding them: franz-go's
// consumer spends about half a microsecond on each record it decodes, as much as a
// broker spends serving it. One broker only, like the -raw produce.

const (
	fetchMaxBytes          = 50 << 20
	fetchPartitionMaxBytes = 1 << 20
	fetchMaxWaitMs         = 500
	batchHeaderBytes       = 61
	controlBatch           = 0x20
)

// scanBatches counts the records of the whole v2 batches in data (control
// batches apart) and returns the offset after the last one (next; -1: none).
func scanBatches(data []byte) (records int64, next int64) {
	next = -1
	for len(data) >= batchHeaderBytes {
		size := 12 + int(binary.BigEndian.Uint32(data[8:12]))
		if len(data) < size {
			break // a partial batch ends a response
		}
		base := int64(binary.BigEndian.Uint64(data[0:8]))
		lastDelta := int64(int32(binary.BigEndian.Uint32(data[23:27])))
		if binary.BigEndian.Uint16(data[21:23])&controlBatch == 0 {
			records += int64(int32(binary.BigEndian.Uint32(data[57:61])))
		}
		next = base + lastDelta + 1
		data = data[size:]
	}
	return records, next
}

// topicLeader is the topic's id and its one leader (Produce and Fetch v13 name
// topics by id).
func topicLeader(ctx context.Context, cl *kgo.Client, topic string) (int32, [16]byte, error) {
	req := kmsg.NewPtrMetadataRequest()
	requested := kmsg.NewMetadataRequestTopic()
	requested.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, requested)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return 0, [16]byte{}, err
	}
	if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0 {
		return 0, [16]byte{}, fmt.Errorf("metadata of %s: %+v", topic, resp.Topics)
	}
	described := resp.Topics[0]
	leader := described.Partitions[0].Leader
	for _, partition := range described.Partitions {
		if partition.Leader != leader {
			return 0, [16]byte{}, errors.New("-raw needs every partition on one leader")
		}
	}
	return leader, described.TopicID, nil
}

// rawDrain reads target records; the window runs from the first request to the
// response that completed the count.
func rawDrain(ctx context.Context, c *config, target int64, phase string) (consumeResult, error) {
	count := min(c.consumers, c.partitions)
	clients := make([]*kgo.Client, 0, count)
	defer func() {
		for _, cl := range clients {
			cl.Close()
		}
	}()
	for i := range count {
		cl, err := kgo.NewClient(baseOptions(c, fmt.Sprintf("loadgen-fetcher-%d", i))...)
		if err != nil {
			return consumeResult{}, err
		}
		clients = append(clients, cl)
	}
	leader, topicID, err := topicLeader(ctx, clients[0], c.topic)
	if err != nil {
		return consumeResult{}, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var total, endNs atomic.Int64
	var errs errorLog
	perConsumer := make([]int64, count)
	start := time.Now()
	mark(phase, "start")
	var wg sync.WaitGroup
	for i, cl := range clients {
		fetch := fetchRequest(c, topicID, i)
		wg.Go(func() {
			for ctx.Err() == nil {
				resp, err := cl.Broker(int(leader)).Request(ctx, fetch)
				if err != nil {
					if ctx.Err() == nil {
						errs.add(err)
						time.Sleep(10 * time.Millisecond)
					}
					continue
				}
				n := advance(fetch, resp.(*kmsg.FetchResponse), &errs)
				perConsumer[i] += n
				if total.Add(n) >= target {
					atomicMax(&endNs, time.Now().UnixNano())
					cancel()
				}
			}
		})
	}
	wg.Wait()
	mark(phase, "end")
	records := total.Load()
	elapsed := time.Duration(endNs.Load() - start.UnixNano())
	errCount, samples := errs.snapshot()
	return consumeResult{
		window:       newWindow(records, records*int64(c.valueBytes), elapsed),
		TimedOut:     records < target,
		PerConsumer:  perConsumer,
		Errors:       errCount,
		ErrorSamples: samples,
	}, nil
}

func fetchRequest(c *config, topicID [16]byte, index int) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID = -1
	req.MaxWaitMillis = fetchMaxWaitMs
	req.MinBytes = 1
	req.MaxBytes = fetchMaxBytes
	req.SessionEpoch = -1 // no fetch session: every request names its partitions
	topic := kmsg.NewFetchRequestTopic()
	topic.Topic, topic.TopicID = c.topic, topicID
	for partition := index; partition < c.partitions; partition += c.consumers {
		part := kmsg.NewFetchRequestTopicPartition()
		part.Partition, part.FetchOffset = int32(partition), 0
		part.PartitionMaxBytes = fetchPartitionMaxBytes
		topic.Partitions = append(topic.Partitions, part)
	}
	req.Topics = []kmsg.FetchRequestTopic{topic}
	return req
}

// advance moves each partition's fetch offset past what the response carried and
// returns the records counted.
func advance(req *kmsg.FetchRequest, resp *kmsg.FetchResponse, errs *errorLog) int64 {
	var records int64
	partitions := req.Topics[0].Partitions
	for _, topic := range resp.Topics {
		for _, part := range topic.Partitions {
			if err := kerr.ErrorForCode(part.ErrorCode); err != nil {
				errs.add(fmt.Errorf("fetch partition %d: %w", part.Partition, err))
				continue
			}
			n, next := scanBatches(part.RecordBatches)
			records += n
			for i := range partitions {
				if partitions[i].Partition == part.Partition && next >= 0 {
					partitions[i].FetchOffset = next
				}
			}
		}
	}
	return records
}
