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

type consumers struct {
	cfg         *config
	clients     []*kgo.Client
	stamped     bool         // values carry their send time (e2e)
	measureFrom atomic.Int64 // Unix ns: records sent before stay out of the latencies
	target      atomic.Int64 // records to read (0: not known yet)
	records     atomic.Int64
	bytes       atomic.Int64
	firstNs     atomic.Int64
	lastNs      atomic.Int64
	errs        errorLog
	done        chan struct{}
	doneOnce    sync.Once
}

type consumeResult struct {
	window
	Latency      *latencySummary `json:"latency,omitempty"`
	TimedOut     bool            `json:"timed_out"`
	PerConsumer  []int64         `json:"per_consumer"`
	Errors       int64           `json:"errors"`
	ErrorSamples []string        `json:"error_samples,omitempty"`
}

// consumerOptions: assigned partitions i, i+n, i+2n... from the start, or a group.
func consumerOptions(c *config, index int) []kgo.Opt {
	opts := baseOptions(c, fmt.Sprintf("loadgen-consumer-%d", index))
	if c.group != "" {
		return append(opts, kgo.ConsumerGroup(c.group), kgo.ConsumeTopics(c.topic),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	}
	mine := map[int32]kgo.Offset{}
	for p := index; p < c.partitions; p += c.consumers {
		mine[int32(p)] = kgo.NewOffset().AtStart()
	}
	return append(opts, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{c.topic: mine}))
}

func newConsumers(c *config, stamped bool) (*consumers, error) {
	cs := &consumers{cfg: c, stamped: stamped, done: make(chan struct{})}
	count := c.consumers
	if c.group == "" {
		count = min(count, c.partitions) // an assigned consumer without partitions idles
	}
	for i := range count {
		cl, err := kgo.NewClient(consumerOptions(c, i)...)
		if err != nil {
			cs.close()
			return nil, err
		}
		cs.clients = append(cs.clients, cl)
	}
	return cs, nil
}

func (cs *consumers) close() {
	for _, cl := range cs.clients {
		cl.Close()
	}
}

func (cs *consumers) finish() { cs.doneOnce.Do(func() { close(cs.done) }) }

// expect sets how many records make the drain complete.
func (cs *consumers) expect(records int64) {
	cs.target.Store(records)
	if cs.records.Load() >= records {
		cs.finish()
	}
}

// run reads until the target count (0: set later by expect, or until -idle without
// records). The window ends at the last record's arrival; it starts when the
// assigned consumers start polling, or in a group at the first record's arrival
// (the join left out; that first fetch's records are counted, its time is not).
// A non-empty phase is marked on stdout at those moments.
func (cs *consumers) run(ctx context.Context, target int64, phase string) consumeResult {
	ctx, cancel := context.WithCancel(ctx)
	perConsumer := make([]int64, len(cs.clients))
	latencies := make([]histogram, len(cs.clients)) // send -> receipt, per consumer
	if target > 0 {
		cs.expect(target)
	}
	if cs.cfg.group == "" {
		cs.firstNs.Store(time.Now().UnixNano())
		if phase != "" {
			mark(phase, "start")
		}
	}
	var wg sync.WaitGroup
	for i, cl := range cs.clients {
		wg.Go(func() { perConsumer[i] = cs.poll(ctx, cl, phase, &latencies[i]) })
	}
	timedOut := cs.wait(ctx)
	if phase != "" && cs.firstNs.Load() != 0 {
		mark(phase, "end")
	}
	cancel()
	wg.Wait()
	cs.close()
	first, last := cs.firstNs.Load(), cs.lastNs.Load()
	errCount, samples := cs.errs.snapshot()
	var latency histogram
	for i := range latencies {
		latency.merge(&latencies[i])
	}
	return consumeResult{
		window:       newWindow(cs.records.Load(), cs.bytes.Load(), time.Duration(last-first)),
		Latency:      latency.summary(),
		TimedOut:     timedOut,
		PerConsumer:  perConsumer,
		Errors:       errCount,
		ErrorSamples: samples,
	}
}

// wait returns when done, or after -idle without a record (false), or on the
// overall timeout (true).
func (cs *consumers) wait(ctx context.Context) bool {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	started := time.Now().UnixNano()
	for {
		select {
		case <-cs.done:
			return false
		case <-ctx.Done():
			return true
		case <-tick.C:
			last := max(cs.lastNs.Load(), started)
			if cs.target.Load() == 0 && time.Duration(time.Now().UnixNano()-last) > cs.cfg.idle {
				return false
			}
		}
	}
}

func (cs *consumers) poll(ctx context.Context, cl *kgo.Client, phase string, latency *histogram) int64 {
	var mine int64
	for ctx.Err() == nil {
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return mine
		}
		fetches.EachError(func(topic string, partition int32, err error) {
			cs.errs.add(fmt.Errorf("%s[%d]: %w", topic, partition, err))
		})
		var n, size int64
		now := time.Now().UnixNano()
		from := cs.measureFrom.Load()
		fetches.EachRecord(func(r *kgo.Record) {
			n++
			size += int64(len(r.Value))
			if cs.stamped && len(r.Value) >= 8 {
				if sent := int64(binary.BigEndian.Uint64(r.Value)); from != 0 && sent >= from && sent <= now {
					latency.record(time.Duration(now - sent))
				}
			}
		})
		if n == 0 {
			continue
		}
		mine += n
		if cs.firstNs.CompareAndSwap(0, now) && phase != "" {
			mark(phase, "start")
		}
		cs.bytes.Add(size)
		total := cs.records.Add(n)
		atomicMax(&cs.lastNs, time.Now().UnixNano())
		if target := cs.target.Load(); target > 0 && total >= target {
			cs.finish()
		}
	}
	return mine
}
