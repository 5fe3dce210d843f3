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
	compressionBits        = 0x07
)

// scanBatches counts the records of the whole v2 batches in data (control
// batches apart) and returns the offset after the last one (next; -1: none). With
// stamped, it hands it each record's send time (its value's first 8 bytes).
func scanBatches(data []byte, stamped func(int64)) (records int64, next int64) {
	next = -1
	for len(data) >= batchHeaderBytes {
		size := 12 + int(binary.BigEndian.Uint32(data[8:12]))
		if len(data) < size {
			break // a partial batch ends a response
		}
		base := int64(binary.BigEndian.Uint64(data[0:8]))
		lastDelta := int64(int32(binary.BigEndian.Uint32(data[23:27])))
		attributes := binary.BigEndian.Uint16(data[21:23])
		if attributes&controlBatch == 0 {
			records += int64(int32(binary.BigEndian.Uint32(data[57:61])))
			if stamped != nil && attributes&compressionBits == 0 {
				scanStamps(data[batchHeaderBytes:size], stamped)
			}
		}
		next = base + lastDelta + 1
		data = data[size:]
	}
	return records, next
}

// scanStamps walks uncompressed records: length, attributes, timestamp delta,
// offset delta, key, then the value, whose first 8 bytes are the send time.
func scanStamps(records []byte, stamped func(int64)) {
	for len(records) > 0 {
		length, n := binary.Varint(records)
		if n <= 0 || int(length) > len(records)-n {
			return
		}
		body := records[n : n+int(length)]
		records = records[n+int(length):]
		at := 1       // attributes
		for range 2 { // timestamp delta, offset delta
			_, n = binary.Varint(body[at:])
			at += n
		}
		keyLength, n := binary.Varint(body[at:])
		at += n + int(max(keyLength, 0))
		valueLength, n := binary.Varint(body[at:])
		at += n
		if valueLength >= 8 && at+8 <= len(body) {
			stamped(int64(binary.BigEndian.Uint64(body[at:])))
		}
	}
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

// rawFetcher is -consumers clients fetching from one leader; it stops once it has
// read target records (set up front, or by expect once the producer is done).
type rawFetcher struct {
	cfg         *config
	clients     []*kgo.Client
	leader      int32
	topicID     [16]byte
	target      atomic.Int64 // 0: not known yet
	measureFrom atomic.Int64 // Unix ns; records sent before stay out of the latencies
	total       atomic.Int64
	endNs       atomic.Int64 // when the last record needed arrived
	errs        errorLog
}

func newRawFetcher(ctx context.Context, c *config) (*rawFetcher, error) {
	f := &rawFetcher{cfg: c}
	for i := range min(c.consumers, c.partitions) {
		cl, err := kgo.NewClient(baseOptions(c, fmt.Sprintf("loadgen-fetcher-%d", i))...)
		if err != nil {
			f.close()
			return nil, err
		}
		f.clients = append(f.clients, cl)
	}
	var err error
	if f.leader, f.topicID, err = topicLeader(ctx, f.clients[0], c.topic); err != nil {
		f.close()
		return nil, err
	}
	return f, nil
}

func (f *rawFetcher) close() {
	for _, cl := range f.clients {
		cl.Close()
	}
}

func (f *rawFetcher) expect(records int64) { f.target.Store(records) }

// run fetches until the target; stamped (e2e): each record's send -> receipt
// latency. The window runs from the first request to the response that completed
// the count; a non-empty phase is marked on stdout around it.
func (f *rawFetcher) run(ctx context.Context, phase string, stamped bool) consumeResult {
	defer f.close()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	perConsumer := make([]int64, len(f.clients))
	latencies := make([]histogram, len(f.clients))
	start := time.Now()
	if phase != "" {
		mark(phase, "start")
	}
	var wg sync.WaitGroup
	for i, cl := range f.clients {
		wg.Go(func() {
			perConsumer[i] = f.poll(ctx, cancel, cl, i, stamped, &latencies[i])
		})
	}
	wg.Wait()
	if phase != "" {
		mark(phase, "end")
	}
	var latency histogram
	for i := range latencies {
		latency.merge(&latencies[i])
	}
	records := f.total.Load()
	errCount, samples := f.errs.snapshot()
	return consumeResult{
		window:       newWindow(records, records*int64(f.cfg.valueBytes), time.Duration(f.endNs.Load()-start.UnixNano())),
		Latency:      latency.summary(),
		TimedOut:     records < f.target.Load() || f.target.Load() == 0,
		PerConsumer:  perConsumer,
		Errors:       errCount,
		ErrorSamples: samples,
	}
}

func (f *rawFetcher) poll(ctx context.Context, done context.CancelFunc, cl *kgo.Client, index int,
	stamped bool, latency *histogram) int64 {
	fetch := fetchRequest(f.cfg, f.topicID, index)
	var mine int64
	for ctx.Err() == nil {
		resp, err := cl.Broker(int(f.leader)).Request(ctx, fetch)
		if err != nil {
			if ctx.Err() == nil {
				f.errs.add(err)
				time.Sleep(10 * time.Millisecond)
			}
			continue
		}
		var onStamp func(int64)
		if stamped {
			now, from := time.Now().UnixNano(), f.measureFrom.Load()
			onStamp = func(sent int64) {
				if sent >= from && sent <= now {
					latency.record(time.Duration(now - sent))
				}
			}
		}
		n := advance(fetch, resp.(*kmsg.FetchResponse), onStamp, &f.errs)
		mine += n
		total := f.total.Add(n)
		if n > 0 {
			atomicMax(&f.endNs, time.Now().UnixNano())
		}
		if target := f.target.Load(); target > 0 && total >= target {
			done()
		}
	}
	return mine
}

// rawDrain reads target records (consume and backlog modes).
func rawDrain(ctx context.Context, c *config, target int64, phase string) (consumeResult, error) {
	f, err := newRawFetcher(ctx, c)
	if err != nil {
		return consumeResult{}, err
	}
	f.expect(target)
	return f.run(ctx, phase, false), nil
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
func advance(req *kmsg.FetchRequest, resp *kmsg.FetchResponse, stamped func(int64),
	errs *errorLog) int64 {
	var records int64
	partitions := req.Topics[0].Partitions
	for _, topic := range resp.Topics {
		for _, part := range topic.Partitions {
			if err := kerr.ErrorForCode(part.ErrorCode); err != nil {
				errs.add(fmt.Errorf("fetch partition %d: %w", part.Partition, err))
				continue
			}
			n, next := scanBatches(part.RecordBatches, stamped)
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
