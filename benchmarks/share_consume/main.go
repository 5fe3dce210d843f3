// Command share_consume is the load generator of benchmarks/share_consume.py: it fills a
// topic (-mode produce), or drains it with N consumers of one group (franz-go, one
// client each) and reports how fast, as one JSON line.
//
// Consume modes:
//
//	share     a share group (KIP-932): every record acknowledged ACCEPT explicitly
//	classic   a classic consumer group (JoinGroup/SyncGroup, cooperative-sticky),
//	          offsets auto-committed and committed once more at the end
//	consumer  a KIP-848 consumer group (ConsumerGroupHeartbeat, the broker assigns;
//	          range), committed like classic
//
// The share group's share.auto.offset.reset must be earliest before it starts (the
// harness sets it with IncrementalAlterConfigs); classic and consumer groups start at
// the log start. The drain ends once every one of -records distinct records (partition,
// offset) was seen; then every consumer flushes its acknowledgements (share) or commits
// (classic, consumer) before the report, so the acknowledgements are inside the time.
//
// Protocol with the harness (consume modes): the program prints "READY", waits for a
// line on stdin, creates its consumers (which join the group), prints "FIRST" when the
// first record arrives, and prints the JSON report when the drain is done. Throughput
// is counted from FIRST (group joins excluded) to the end of the last flush or commit.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"maps"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

type config struct {
	mode       string
	bootstrap  string
	topic      string
	group      string
	partitions int
	consumers  int
	records    int64
	valueBytes int
	maxRecords int
	timeout    time.Duration
	logLevel   string
}

// seen is one bit per (partition, offset): a record counts once however often it comes.
type seen struct {
	bits     [][]atomic.Uint64
	distinct atomic.Int64
}

func newSeen(partitions int, records int64) *seen {
	s := &seen{bits: make([][]atomic.Uint64, partitions)}
	for p := range s.bits {
		s.bits[p] = make([]atomic.Uint64, records/64+1)
	}
	return s
}

// mark returns whether the record is new; offsets past the expected end are ignored.
func (s *seen) mark(partition int32, offset int64) bool {
	if int(partition) >= len(s.bits) || offset < 0 || offset/64 >= int64(len(s.bits[partition])) {
		return false
	}
	mask := uint64(1) << (offset % 64)
	if s.bits[partition][offset/64].Or(mask)&mask != 0 {
		return false
	}
	s.distinct.Add(1)
	return true
}

type drain struct {
	cfg         config
	seen        *seen
	deliveries  atomic.Int64
	redelivered atomic.Int64 // delivery count above 1 (share)
	polls       atomic.Int64
	firstOnce   sync.Once
	first       time.Time
	done        chan struct{}
	doneOnce    sync.Once
	errMu       sync.Mutex
	errs        []string
	ackErrs     map[string]int64 // partition results of acknowledgements, by error
}

// onAckResults counts the broker's refusals of acknowledgements (a refused ACCEPT
// leaves the record locked until its lock expires).
func (d *drain) onAckResults(_ *kgo.Client, results kgo.ShareAckResults) {
	for _, r := range results {
		if r.Err == nil {
			continue
		}
		d.errMu.Lock()
		d.ackErrs[r.Err.Error()]++
		d.errMu.Unlock()
	}
}

func (d *drain) fail(format string, args ...any) {
	d.errMu.Lock()
	defer d.errMu.Unlock()
	if len(d.errs) < 20 {
		d.errs = append(d.errs, fmt.Sprintf(format, args...))
	}
}

func (d *drain) options(index int) []kgo.Opt {
	opts := []kgo.Opt{
		kgo.SeedBrokers(d.cfg.bootstrap),
		kgo.ClientID(fmt.Sprintf("share-consume-%d", index)),
		kgo.ConsumeTopics(d.cfg.topic),
		kgo.WithLogger(kgo.BasicLogger(os.Stderr, logLevel(d.cfg.logLevel), func() string {
			return time.Now().Format("15:04:05.000 ")
		})),
	}
	switch d.cfg.mode {
	case "share":
		opts = append(opts, kgo.ShareGroup(d.cfg.group), kgo.ShareMaxRecords(int32(d.cfg.maxRecords)),
			kgo.ShareAckCallback(d.onAckResults))
	case "classic":
		opts = append(opts, kgo.ConsumerGroup(d.cfg.group), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	case "consumer":
		opts = append(opts, kgo.ConsumerGroup(d.cfg.group), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
			kgo.ServerSideBalancer(), kgo.Balancers(kgo.RangeBalancer()))
	}
	return opts
}

func (d *drain) finish() { d.doneOnce.Do(func() { close(d.done) }) }

// consume polls until the drain is done, then flushes acknowledgements or commits.
func (d *drain) consume(ctx context.Context, cl *kgo.Client, got *atomic.Int64) {
	share := d.cfg.mode == "share"
	for {
		select {
		case <-d.done:
			d.settle(cl)
			return
		case <-ctx.Done():
			return
		default:
		}
		pollCtx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		fetches := cl.PollRecords(pollCtx, d.cfg.maxRecords)
		cancel()
		for _, fe := range fetches.Errors() {
			if !errors.Is(fe.Err, context.DeadlineExceeded) && !errors.Is(fe.Err, context.Canceled) {
				d.fail("poll %s/%d: %v", fe.Topic, fe.Partition, fe.Err)
			}
		}
		records := fetches.Records()
		if len(records) == 0 {
			continue
		}
		d.polls.Add(1)
		d.firstOnce.Do(func() {
			d.first = time.Now()
			fmt.Println("FIRST")
		})
		for _, r := range records {
			if share {
				r.Ack(kgo.AckAccept)
				if r.DeliveryCount() > 1 {
					d.redelivered.Add(1)
				}
			}
			d.seen.mark(r.Partition, r.Offset)
		}
		d.deliveries.Add(int64(len(records)))
		got.Add(int64(len(records)))
		if d.seen.distinct.Load() >= d.cfg.records {
			d.finish()
		}
	}
}

func (d *drain) settle(cl *kgo.Client) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var err error
	if d.cfg.mode == "share" {
		err = cl.FlushAcks(ctx)
	} else {
		err = cl.CommitUncommittedOffsets(ctx)
	}
	if err != nil {
		d.fail("settle: %v", err)
	}
}

func runDrain(cfg config) int {
	d := &drain{
		cfg: cfg, seen: newSeen(cfg.partitions, cfg.records), done: make(chan struct{}),
		ackErrs: map[string]int64{},
	}
	fmt.Println("READY")
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		fmt.Fprintln(os.Stderr, "no start signal:", err)
		return 2
	}
	started := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), cfg.timeout)
	defer cancel()
	clients := make([]*kgo.Client, cfg.consumers)
	for i := range clients {
		cl, err := kgo.NewClient(d.options(i)...)
		if err != nil {
			fmt.Fprintln(os.Stderr, "client:", err)
			return 1
		}
		clients[i] = cl
	}
	got := make([]atomic.Int64, cfg.consumers) // deliveries per consumer
	var wg sync.WaitGroup
	for i, cl := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d.consume(ctx, cl, &got[i])
		}()
	}
	wg.Wait()
	ended := time.Now()
	timedOut := ctx.Err() != nil && d.seen.distinct.Load() < cfg.records
	first := d.first
	if first.IsZero() {
		first = ended
	}
	d.errMu.Lock()
	ackErrs := maps.Clone(d.ackErrs)
	d.errMu.Unlock()
	perConsumer := make([]int64, cfg.consumers)
	for i := range got {
		perConsumer[i] = got[i].Load()
	}
	report := map[string]any{
		"per_consumer": perConsumer,
		"ack_errors":   ackErrs,
		"mode":         cfg.mode,
		"consumers":    cfg.consumers,
		"records":      d.seen.distinct.Load(),
		"expected":     cfg.records,
		"deliveries":   d.deliveries.Load(),
		"redelivered":  d.redelivered.Load(),
		"polls":        d.polls.Load(),
		"elapsed_s":    ended.Sub(first).Seconds(),
		"join_s":       first.Sub(started).Seconds(),
		"timed_out":    timedOut,
		"errors":       d.errs,
	}
	data, _ := json.Marshal(report)
	fmt.Println(string(data))
	// Leaving the group (and closing share sessions) is after the report: not timed.
	closeCtx, closeCancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer closeCancel()
	for _, cl := range clients {
		if cfg.mode != "share" {
			_ = cl.LeaveGroupContext(closeCtx)
		}
		cl.Close()
	}
	if timedOut {
		return 1
	}
	return 0
}

// runProduce writes -records records of -value-bytes, round-robin over the partitions.
func runProduce(cfg config) int {
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(cfg.bootstrap),
		kgo.DefaultProduceTopic(cfg.topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(5*time.Millisecond),
		kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.ProducerBatchMaxBytes(256*1024),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.MaxBufferedRecords(200_000),
	)
	if err != nil {
		fmt.Fprintln(os.Stderr, "client:", err)
		return 1
	}
	defer cl.Close()
	value := make([]byte, cfg.valueBytes)
	for i := range value {
		value[i] = byte('a' + i%26)
	}
	started := time.Now()
	var failed atomic.Int64
	var firstErr atomic.Value
	ctx, cancel := context.WithTimeout(context.Background(), cfg.timeout)
	defer cancel()
	for i := int64(0); i < cfg.records; i++ {
		record := &kgo.Record{Partition: int32(i % int64(cfg.partitions)), Value: value}
		cl.Produce(ctx, record, func(_ *kgo.Record, err error) {
			if err != nil {
				failed.Add(1)
				firstErr.CompareAndSwap(nil, err.Error())
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "flush:", err)
		return 1
	}
	report := map[string]any{
		"records": cfg.records, "failed": failed.Load(), "first_error": firstErr.Load(),
		"elapsed_s": time.Since(started).Seconds(),
	}
	data, _ := json.Marshal(report)
	fmt.Println(string(data))
	if failed.Load() > 0 {
		return 1
	}
	return 0
}

func logLevel(name string) kgo.LogLevel {
	switch name {
	case "debug":
		return kgo.LogLevelDebug
	case "info":
		return kgo.LogLevelInfo
	case "warn":
		return kgo.LogLevelWarn
	}
	return kgo.LogLevelError
}

func main() {
	var cfg config
	flag.StringVar(&cfg.mode, "mode", "share", "produce, share, classic or consumer")
	flag.StringVar(&cfg.bootstrap, "bootstrap", "127.0.0.1:9092", "broker address")
	flag.StringVar(&cfg.topic, "topic", "share-bench", "topic (must exist)")
	flag.StringVar(&cfg.group, "group", "share-bench", "group id (a fresh one per drain)")
	flag.IntVar(&cfg.partitions, "partitions", 1, "the topic's partitions")
	flag.IntVar(&cfg.consumers, "consumers", 1, "consumers in the group (one client each)")
	flag.Int64Var(&cfg.records, "records", 100_000, "records in the topic (produce: to write)")
	flag.IntVar(&cfg.valueBytes, "value-bytes", 100, "produce: bytes per record value (no key)")
	flag.IntVar(&cfg.maxRecords, "max-records", 500, "records per poll (share: ShareFetch MaxRecords)")
	flag.DurationVar(&cfg.timeout, "timeout", 5*time.Minute, "give up after")
	flag.StringVar(&cfg.logLevel, "log-level", "error", "franz-go's log on stderr")
	flag.Parse()
	switch cfg.mode {
	case "produce":
		os.Exit(runProduce(cfg))
	case "share", "classic", "consumer":
		os.Exit(runDrain(cfg))
	}
	fmt.Fprintln(os.Stderr, "unknown -mode", cfg.mode)
	os.Exit(2)
}
