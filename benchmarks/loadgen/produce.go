package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// claimChunk: producers take their share of -records this many at a time, so the
// shared counter is not touched for every record.
const claimChunk = 256

type producer struct {
	cfg     *config
	senders []*sender
	stamp   bool // the send time (Unix ns) in each value's first 8 bytes
	value   []byte
	claimed atomic.Int64
	errs    errorLog
	from    time.Time // records due before this stay out of the latencies
	primed  int64
}

// sender is one producer client and what its acknowledgements counted. franz-go
// calls one client's promises one at a time, so the counts need no lock; they are
// read once Flush has returned.
type sender struct {
	p       *producer
	client  *kgo.Client
	pool    sync.Pool // of *pending
	latency histogram // send (when due, if paced) -> acknowledgement
	acked   int64
	bytes   int64
	lagMax  time.Duration // how far behind its schedule a paced send went
}

// pending is a record in flight, reused once acknowledged (franz-go is done with a
// record when it calls its promise), so a send allocates nothing.
type pending struct {
	record kgo.Record
	value  []byte // stamped copy of the value (e2e)
	due    time.Time
	ack    func(*kgo.Record, error)
}

type produceResult struct {
	window
	Primed       int64           `json:"primed"`
	TargetRate   float64         `json:"target_rate,omitempty"`
	SendLagMaxMs float64         `json:"send_lag_max_ms,omitempty"`
	Latency      *latencySummary `json:"latency"`
	Requests     *latencySummary `json:"request_latency,omitempty"` // -raw: per request
	Errors       int64           `json:"errors"`
	ErrorSamples []string        `json:"error_samples,omitempty"`
}

func producerOptions(c *config, index int) []kgo.Opt {
	opts := append(baseOptions(c, fmt.Sprintf("loadgen-producer-%d", index)),
		kgo.DefaultProduceTopic(c.topic),
		kgo.ProducerLinger(c.linger),
		kgo.ProducerBatchMaxBytes(int32(c.batchBytes)),
		kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.MaxBufferedRecords(c.bufferedRecords),
	)
	switch c.acks {
	case "all":
		opts = append(opts, kgo.RequiredAcks(kgo.AllISRAcks()))
	case "1":
		opts = append(opts, kgo.RequiredAcks(kgo.LeaderAck()))
	case "0":
		opts = append(opts, kgo.RequiredAcks(kgo.NoAck()))
	default:
		fail("-acks: all, 1 or 0, not %q", c.acks)
	}
	if !c.idempotent {
		opts = append(opts, kgo.DisableIdempotentWrite(), kgo.MaxProduceRequestsInflightPerBroker(c.inflight))
	}
	switch c.partitioner {
	case "sticky":
		opts = append(opts, kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)))
	case "roundrobin":
		opts = append(opts, kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	default:
		fail("-partitioner: sticky or roundrobin, not %q", c.partitioner)
	}
	return opts
}

// newProducer connects its clients and primes each with one synchronous record.
func newProducer(c *config, stamp bool) (*producer, error) {
	p := &producer{cfg: c, stamp: stamp, value: make([]byte, c.valueBytes)}
	for i := 8; i < len(p.value); i++ { // the first 8: a send time, or 0 (none)
		p.value[i] = byte('a' + i%26)
	}
	for i := range c.producers {
		cl, err := kgo.NewClient(producerOptions(c, i)...)
		if err != nil {
			p.close()
			return nil, err
		}
		p.senders = append(p.senders, p.newSender(cl))
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err = cl.ProduceSync(ctx, &kgo.Record{Value: p.value}).FirstErr()
		cancel()
		if err != nil {
			p.close()
			return nil, fmt.Errorf("priming producer %d: %w", i, err)
		}
		p.primed++
	}
	return p, nil
}

func (p *producer) newSender(cl *kgo.Client) *sender {
	s := &sender{p: p, client: cl}
	s.pool.New = func() any {
		pd := &pending{}
		pd.ack = func(r *kgo.Record, err error) { s.onAck(pd, err) }
		if p.stamp {
			pd.value = append([]byte(nil), p.value...)
		}
		return pd
	}
	return s
}

func (p *producer) close() {
	for _, s := range p.senders {
		s.client.Close()
	}
}

// claim reserves up to claimChunk of the -records budget; 0 when it is spent.
func (p *producer) claim() int64 {
	if p.cfg.records == 0 {
		return claimChunk
	}
	end := p.claimed.Add(claimChunk)
	return max(min(claimChunk, p.cfg.records-(end-claimChunk)), 0)
}

// onAck counts an acknowledgement; its latency counts from due (not the record's
// Timestamp: franz-go truncates that to milliseconds).
func (s *sender) onAck(pd *pending, err error) {
	if err != nil {
		s.p.errs.add(err)
	} else {
		s.acked++
		s.bytes += int64(len(pd.record.Value))
		if !pd.due.Before(s.p.from) {
			s.latency.record(time.Since(pd.due))
		}
	}
	s.pool.Put(pd)
}

func (p *producer) run(ctx context.Context) produceResult {
	start := time.Now()
	p.from = start.Add(p.cfg.warmup)
	var deadline time.Time
	if p.cfg.duration > 0 {
		deadline = start.Add(p.cfg.duration)
	}
	var wg sync.WaitGroup
	for _, s := range p.senders {
		wg.Go(func() { s.send(ctx, start, deadline) })
	}
	wg.Wait()
	for _, s := range p.senders {
		if err := s.client.Flush(ctx); err != nil {
			p.errs.add(fmt.Errorf("flush: %w", err))
		}
	}
	elapsed := time.Since(start)
	var latency histogram
	var acked, bytes int64
	var lagMax time.Duration
	for _, s := range p.senders {
		latency.merge(&s.latency)
		acked, bytes, lagMax = acked+s.acked, bytes+s.bytes, max(lagMax, s.lagMax)
	}
	errCount, samples := p.errs.snapshot()
	return produceResult{
		window:       newWindow(acked, bytes, elapsed),
		Primed:       p.primed,
		TargetRate:   p.cfg.rate,
		SendLagMaxMs: float64(lagMax) / 1e6,
		Latency:      latency.summary(),
		Errors:       errCount,
		ErrorSamples: samples,
	}
}

// runEither runs the -raw produce or franz-go's.
func (p *producer) runEither(ctx context.Context) (produceResult, error) {
	if p.cfg.raw {
		return p.runRaw(ctx)
	}
	return p.run(ctx), nil
}

// send is one producer's loop. Paced (-rate), record n of this producer is due at
// start + n*interval, and its latency counts from then (a send that falls behind
// its schedule is not excused: no coordinated omission); it sleeps only when ahead.
func (s *sender) send(ctx context.Context, start, deadline time.Time) {
	p := s.p
	var interval time.Duration
	if p.cfg.rate > 0 {
		interval = time.Duration(float64(time.Second) * float64(p.cfg.producers) / p.cfg.rate)
	}
	var n int64
	for {
		budget := p.claim()
		if budget == 0 {
			return
		}
		for range budget {
			now := time.Now()
			if !deadline.IsZero() && now.After(deadline) || ctx.Err() != nil {
				return
			}
			due := now
			if interval > 0 {
				due = start.Add(time.Duration(n) * interval)
				n++
				if wait := due.Sub(now); wait > 0 {
					time.Sleep(wait)
				} else {
					s.lagMax = max(s.lagMax, -wait)
				}
			}
			pd := s.pool.Get().(*pending)
			pd.due = due
			pd.record = kgo.Record{Value: p.value, Timestamp: due}
			if p.stamp {
				binary.BigEndian.PutUint64(pd.value, uint64(due.UnixNano()))
				pd.record.Value = pd.value
			}
			s.client.Produce(ctx, &pd.record, pd.ack)
		}
	}
}

func atomicMax(v *atomic.Int64, x int64) {
	for {
		seen := v.Load()
		if x <= seen || v.CompareAndSwap(seen, x) {
			return
		}
	}
}
