package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The -raw produce builds its Produce requests itself and sends them through each
// franz-go client's connection: one record batch (RecordBatch v2, uncompressed, no
// producer id, at most -batch-bytes of records) for each partition the client owns
// (partitions i, i+n, ... of n clients), at most -inflight requests at a time.
// franz-go's per-record producer path costs about 0.7 µs a record here, more than a
// broker spends on a 100 B record; this path spends next to nothing per record.
//
//   - max rate: the same batches, built once, sent again and again; latency is each
//     request's send -> response, counted for each of its records;
//   - fixed rate (-rate): every -linger, each client sends the records that fell due
//     since the last tick (a producer whose batches fill slower than -batch-bytes),
//     each record's value starting with its due time (Unix ns); its latency runs
//     from that due time, so linger and any backlog count (no coordinated omission).
//
// One broker only: every partition must have the same leader.

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// encodeBatch returns a RecordBatch v2 holding one record of value per stamp (the
// record's first 8 bytes replaced by the stamp when value has room), keys null.
func encodeBatch(value []byte, stamps []int64) []byte {
	var scratch [binary.MaxVarintLen64]byte
	varintLen := func(v int64) int { return binary.PutVarint(scratch[:], v) }
	batch := make([]byte, batchHeaderBytes, batchHeaderBytes+len(stamps)*(len(value)+24))
	for i, stamp := range stamps {
		length := 1 + varintLen(0) + varintLen(int64(i)) + varintLen(-1) +
			varintLen(int64(len(value))) + len(value) + varintLen(0)
		batch = binary.AppendVarint(batch, int64(length))
		batch = append(batch, 0)                     // attributes
		batch = binary.AppendVarint(batch, 0)        // timestamp delta
		batch = binary.AppendVarint(batch, int64(i)) // offset delta
		batch = binary.AppendVarint(batch, -1)       // key: null
		batch = binary.AppendVarint(batch, int64(len(value)))
		start := len(batch)
		batch = append(batch, value...)
		if len(value) >= 8 {
			binary.BigEndian.PutUint64(batch[start:], uint64(stamp))
		}
		batch = binary.AppendVarint(batch, 0) // headers
	}
	timestampMs := uint64(time.Now().UnixMilli())
	header := batch[:batchHeaderBytes]
	binary.BigEndian.PutUint64(header[0:], 0)                     // base offset (the broker sets it)
	binary.BigEndian.PutUint32(header[8:], uint32(len(batch)-12)) // batch length
	binary.BigEndian.PutUint32(header[12:], 0xffffffff)           // partition leader epoch: -1
	header[16] = 2                                                // magic
	binary.BigEndian.PutUint16(header[21:], 0)                    // attributes: no compression
	binary.BigEndian.PutUint32(header[23:], uint32(len(stamps)-1))
	binary.BigEndian.PutUint64(header[27:], timestampMs)
	binary.BigEndian.PutUint64(header[35:], timestampMs)
	binary.BigEndian.PutUint64(header[43:], 0xffffffffffffffff) // producer id: -1
	binary.BigEndian.PutUint16(header[51:], 0xffff)             // producer epoch: -1
	binary.BigEndian.PutUint32(header[53:], 0xffffffff)         // base sequence: -1
	binary.BigEndian.PutUint32(header[57:], uint32(len(stamps)))
	binary.BigEndian.PutUint32(header[17:], crc32.Checksum(batch[21:], castagnoli))
	return batch
}

// rawSender is one client's connection to the leader and the partitions it owns.
type rawSender struct {
	leader     *kgo.Broker
	topicID    [16]byte
	partitions []int32
}

// rawRequest is one batch per owned partition (nil: none for it), and per record
// its due time (Unix ns; nil at max rate, where latency counts from the send).
type rawRequest struct {
	batches [][]byte
	records int64
	dues    []int64
}

type rawCounts struct {
	latency  histogram // per record: from its due time (paced) or send
	requests histogram // per request: send -> response
	acked    int64
	bytes    int64
}

func (p *producer) runRaw(ctx context.Context) (produceResult, error) {
	senders := make([]rawSender, len(p.senders))
	for i, s := range p.senders {
		var err error
		if senders[i], err = p.rawSender(ctx, s.client, i); err != nil {
			return produceResult{}, err
		}
	}
	start := time.Now()
	p.from = start.Add(p.cfg.warmup)
	var deadline time.Time
	if p.cfg.duration > 0 {
		deadline = start.Add(p.cfg.duration)
	}
	counts := make([]rawCounts, len(senders)*p.cfg.inflight)
	var wg sync.WaitGroup
	for i := range senders {
		work := make(chan rawRequest)
		for j := range p.cfg.inflight {
			wg.Go(func() { p.rawWorker(ctx, &senders[i], work, &counts[i*p.cfg.inflight+j]) })
		}
		wg.Go(func() {
			defer close(work)
			if p.cfg.rate > 0 {
				p.rawPaced(ctx, &senders[i], start, deadline, work)
			} else {
				p.rawMaxRate(ctx, &senders[i], deadline, work)
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	var total rawCounts
	for i := range counts {
		total.latency.merge(&counts[i].latency)
		total.requests.merge(&counts[i].requests)
		total.acked += counts[i].acked
		total.bytes += counts[i].bytes
	}
	errCount, samples := p.errs.snapshot()
	return produceResult{
		window:       newWindow(total.acked, total.bytes, elapsed),
		Primed:       p.primed,
		TargetRate:   p.cfg.rate,
		Latency:      total.latency.summary(),
		Requests:     total.requests.summary(),
		Errors:       errCount,
		ErrorSamples: samples,
	}, nil
}

// rawSender: the topic's leader and the partitions client index owns.
func (p *producer) rawSender(ctx context.Context, cl *kgo.Client, index int) (rawSender, error) {
	leader, topicID, err := topicLeader(ctx, cl, p.cfg.topic)
	if err != nil {
		return rawSender{}, err
	}
	s := rawSender{leader: cl.Broker(int(leader)), topicID: topicID}
	for partition := index; partition < p.cfg.partitions; partition += p.cfg.producers {
		s.partitions = append(s.partitions, int32(partition))
	}
	if len(s.partitions) == 0 { // more clients than partitions: they share
		s.partitions = []int32{int32(index % p.cfg.partitions)}
	}
	return s, nil
}

// recordsPerBatch fills -batch-bytes (at least one record).
func (p *producer) recordsPerBatch() int {
	return max(1, p.cfg.batchBytes/(p.cfg.valueBytes+16))
}

// partitionsPerRequest: as many batches as fit -request-bytes (the Java client's
// max.request.size), at least one.
func (p *producer) partitionsPerRequest(s *rawSender) int {
	return max(1, min(len(s.partitions), p.cfg.requestBytes/p.cfg.batchBytes))
}

// rawMaxRate hands full batches to the workers as fast as they take them, the
// owned partitions a request's worth at a time, in turn; the batches are built once.
func (p *producer) rawMaxRate(ctx context.Context, s *rawSender, deadline time.Time,
	work chan<- rawRequest) {
	stamps := make([]int64, p.recordsPerBatch())
	batch := encodeBatch(p.value, stamps)
	group := p.partitionsPerRequest(s)
	var requests []rawRequest
	for first := 0; first < len(s.partitions); first += group {
		request := rawRequest{batches: make([][]byte, len(s.partitions))}
		for i := first; i < min(first+group, len(s.partitions)); i++ {
			request.batches[i] = batch
			request.records += int64(len(stamps))
		}
		requests = append(requests, request)
	}
	for n := 0; ctx.Err() == nil && (deadline.IsZero() || time.Now().Before(deadline)); n++ {
		request := requests[n%len(requests)]
		if p.cfg.records > 0 && p.claimed.Add(request.records)-request.records >= p.cfg.records {
			return
		}
		work <- request
	}
}

// rawPaced: every -linger, the records due since the last tick, in as many
// requests as -batch-bytes per partition and -request-bytes need.
func (p *producer) rawPaced(ctx context.Context, s *rawSender, start, deadline time.Time,
	work chan<- rawRequest) {
	perSecond := p.cfg.rate / float64(p.cfg.producers)
	group := p.partitionsPerRequest(s)
	perRequest := p.recordsPerBatch() * group
	var sent int64
	tick := time.NewTicker(p.cfg.linger)
	defer tick.Stop()
	for n := 0; ctx.Err() == nil; {
		now := <-tick.C
		if !deadline.IsZero() && now.After(deadline) {
			now = deadline
		}
		due := int64(now.Sub(start).Seconds() * perSecond)
		for ; sent < due; n++ {
			count := min(due-sent, int64(perRequest))
			dues := make([]int64, count)
			for k := range dues {
				dues[k] = start.UnixNano() + int64(float64(sent+int64(k))/perSecond*1e9)
			}
			sent += count
			work <- p.pacedRequest(s, dues, n*group, group)
		}
		if now.Equal(deadline) {
			return
		}
	}
}

// pacedRequest deals the records out over group owned partitions from first on.
func (p *producer) pacedRequest(s *rawSender, dues []int64, first, group int) rawRequest {
	request := rawRequest{batches: make([][]byte, len(s.partitions)), records: int64(len(dues)),
		dues: dues}
	per := (len(dues) + group - 1) / group
	for k := range group {
		from, to := min(k*per, len(dues)), min((k+1)*per, len(dues))
		if from < to {
			request.batches[(first+k)%len(s.partitions)] = encodeBatch(p.value, dues[from:to])
		}
	}
	return request
}

// rawWorker sends the requests it is handed and counts the acknowledgements.
func (p *producer) rawWorker(ctx context.Context, s *rawSender, work <-chan rawRequest,
	counts *rawCounts) {
	req := kmsg.NewPtrProduceRequest()
	req.Acks = p.acksValue()
	req.TimeoutMillis = 30000
	for request := range work {
		topic := kmsg.NewProduceRequestTopic()
		topic.Topic, topic.TopicID = p.cfg.topic, s.topicID
		for i, batch := range request.batches {
			if batch != nil {
				part := kmsg.NewProduceRequestTopicPartition()
				part.Partition, part.Records = s.partitions[i], batch
				topic.Partitions = append(topic.Partitions, part)
			}
		}
		req.Topics = []kmsg.ProduceRequestTopic{topic}
		sent := time.Now()
		resp, err := s.leader.Request(ctx, req)
		if err != nil {
			p.errs.add(err)
			time.Sleep(10 * time.Millisecond)
			continue
		}
		p.countResponse(resp.(*kmsg.ProduceResponse), request, sent, counts)
	}
}

func (p *producer) countResponse(resp *kmsg.ProduceResponse, request rawRequest,
	sent time.Time, counts *rawCounts) {
	now := time.Now()
	failed := false
	for _, t := range resp.Topics {
		for _, part := range t.Partitions {
			if err := kerr.ErrorForCode(part.ErrorCode); err != nil {
				p.errs.add(fmt.Errorf("partition %d: %w", part.Partition, err))
				failed = true
			}
		}
	}
	if failed { // none of a request with a failed partition counts
		return
	}
	counts.requests.record(now.Sub(sent))
	counts.acked += request.records
	counts.bytes += request.records * int64(p.cfg.valueBytes)
	if request.dues == nil {
		if !sent.Before(p.from) {
			counts.latency.recordN(now.Sub(sent), uint64(request.records))
		}
		return
	}
	from := p.from.UnixNano()
	for _, due := range request.dues {
		if due >= from {
			counts.latency.record(time.Duration(now.UnixNano() - due))
		}
	}
}

func (p *producer) acksValue() int16 {
	switch p.cfg.acks {
	case "1":
		return 1
	case "0":
		return 0
	}
	return -1
}
