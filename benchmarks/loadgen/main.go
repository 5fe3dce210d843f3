// Command loadgen is the load generator of benchmarks/omb.py: compiled and
// multi-threaded (franz-go, one client per producer or consumer, each in its own
// goroutine) so that on this machine the broker saturates before the generator does.
//
// Modes (the topic must exist; e2e and backlog expect it fresh, i.e. empty):
//
//	produce  -producers clients produce -value-bytes records, at the highest rate the
//	         broker takes or at -rate records/s in total, until -records or
//	         -duration; latency is send -> acknowledgement.
//	consume  -consumers clients read the topic from its start (assign: partitions
//	         split among them; with -group: a consumer group) until -records were
//	         read, or nothing came for -idle.
//	e2e      consumers start first, then a produce at -rate with the send time in
//	         each payload; latency is send -> acknowledgement and send -> receipt.
//	backlog  a produce (fill), then the consumers drain everything it wrote.
//
// Produce goes through franz-go's producer (produce.go: linger, batch size, acks,
// no idempotence by default), or with -raw through requests built here (raw.go:
// next to no CPU per record); consume through franz-go's consumer (consume.go), or
// with -raw through Fetch requests whose records are counted from the batch
// headers, not decoded (rawfetch.go; e2e reads only each value's send time). Latencies go to a log-linear histogram (histogram.go).
//
// Protocol with the harness: "MARK <phase> start" and "MARK <phase> end" on stdout
// around each measured window (so the harness can read the broker's CPU at those
// moments), then the report as one JSON line. Throughput counts the records of the
// window; before it each producer sends one record synchronously (connections and
// metadata resolved), reported as "primed".
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"runtime/debug"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kversion"
)

type config struct {
	mode            string
	bootstrap       string
	topic           string
	partitions      int
	producers       int
	consumers       int
	records         int64
	duration        time.Duration
	rate            float64
	warmup          time.Duration
	valueBytes      int
	linger          time.Duration
	batchBytes      int
	requestBytes    int
	bufferedRecords int
	inflight        int
	acks            string
	idempotent      bool
	partitioner     string
	group           string
	raw             bool
	idle            time.Duration
	timeout         time.Duration
	maxVersions     string
}

func parseFlags() config {
	var c config
	flag.StringVar(&c.mode, "mode", "produce", "produce, consume, e2e or backlog")
	flag.StringVar(&c.bootstrap, "bootstrap", "127.0.0.1:9092", "host:port")
	flag.StringVar(&c.topic, "topic", "loadgen", "topic (it must exist)")
	flag.IntVar(&c.partitions, "partitions", 1, "the topic's partition count (assigned consumers)")
	flag.IntVar(&c.producers, "producers", 4, "producer clients, one goroutine each")
	flag.IntVar(&c.consumers, "consumers", 4, "consumer clients, one goroutine each")
	flag.Int64Var(&c.records, "records", 0, "produce: at most this many; consume: read this many (0: until -idle)")
	flag.DurationVar(&c.duration, "duration", 0, "produce for this long (0: until -records)")
	flag.Float64Var(&c.rate, "rate", 0, "records/s over all producers (0: as fast as the broker takes them)")
	flag.DurationVar(&c.warmup, "warmup", 0, "records sent in the window's first part stay out of the latencies")
	flag.IntVar(&c.valueBytes, "value-bytes", 1024, "record value size (e2e: at least 8, the send time)")
	flag.DurationVar(&c.linger, "linger", 5*time.Millisecond, "linger.ms")
	flag.IntVar(&c.batchBytes, "batch-bytes", 131072, "batch.size")
	flag.IntVar(&c.requestBytes, "request-bytes", 1048576, "-raw: batches per request up to max.request.size")
	flag.IntVar(&c.bufferedRecords, "buffered-records", 100000, "records buffered per producer client")
	flag.IntVar(&c.inflight, "inflight", 5, "produce requests in flight per connection (no idempotence)")
	flag.StringVar(&c.acks, "acks", "all", "all, 1 or 0")
	flag.BoolVar(&c.idempotent, "idempotent", false, "idempotent producer (Kafka's perf runs in BENCHMARKS.md: off)")
	flag.StringVar(&c.partitioner, "partitioner", "sticky", "sticky (null keys: Kafka's default) or roundrobin")
	flag.BoolVar(&c.raw, "raw", false, "produce with batches built here, not franz-go's producer (raw.go)")
	flag.StringVar(&c.group, "group", "", "consume in this consumer group (default: assign)")
	flag.DurationVar(&c.idle, "idle", 10*time.Second, "consume: stop after this long without records")
	flag.StringVar(&c.maxVersions, "max-versions", "", "request versions of this Kafka release at most, e.g. v3.7.0")
	flag.DurationVar(&c.timeout, "timeout", 5*time.Minute, "give up after this long")
	flag.Parse()
	if c.mode == "e2e" && c.valueBytes < 8 {
		fail("-value-bytes must be at least 8 in e2e mode")
	}
	if c.raw && c.idempotent {
		fail("-raw sends batches without a producer id: no -idempotent")
	}
	if c.raw && c.mode == "consume" && c.records == 0 {
		fail("-raw consume needs -records")
	}
	if c.rate > 0 && c.duration == 0 {
		fail("-rate needs -duration")
	}
	if c.mode != "consume" && c.records == 0 && c.duration == 0 {
		fail("-records or -duration is needed to produce")
	}
	return c
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "loadgen: "+format+"\n", args...)
	os.Exit(2)
}

func mark(phase, edge string) { fmt.Printf("MARK %s %s\n", phase, edge) }

// errorLog counts errors and keeps the first few messages.
type errorLog struct {
	mu      sync.Mutex
	count   int64
	samples []string
}

func (e *errorLog) add(err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.count++
	if len(e.samples) < 10 {
		e.samples = append(e.samples, err.Error())
	}
}

func (e *errorLog) snapshot() (int64, []string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.count, append([]string(nil), e.samples...)
}

// window is a measured phase's throughput.
type window struct {
	Records     int64   `json:"records"`
	Bytes       int64   `json:"bytes"`
	ElapsedS    float64 `json:"elapsed_s"`
	RecordsPerS float64 `json:"records_per_s"`
	MBPerS      float64 `json:"mb_per_s"`
}

func newWindow(records, bytes int64, elapsed time.Duration) window {
	s := elapsed.Seconds()
	w := window{Records: records, Bytes: bytes, ElapsedS: s}
	if s > 0 {
		w.RecordsPerS = float64(records) / s
		w.MBPerS = float64(bytes) / s / 1e6
	}
	return w
}

func baseOptions(c *config, clientID string) []kgo.Opt {
	opts := []kgo.Opt{
		kgo.SeedBrokers(c.bootstrap),
		kgo.ClientID(clientID),
		kgo.WithLogger(kgo.BasicLogger(os.Stderr, kgo.LogLevelWarn, nil)),
	}
	if c.maxVersions != "" {
		versions := kversion.FromString(c.maxVersions)
		if versions == nil {
			fail("-max-versions: unknown release %q", c.maxVersions)
		}
		opts = append(opts, kgo.MaxVersions(versions))
	}
	return opts
}

func main() {
	c := parseFlags()
	debug.SetGCPercent(400) // fewer collections: GC was a fifth of the generator's CPU
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	var report any
	var err error
	switch c.mode {
	case "produce":
		report, err = runProduce(ctx, &c)
	case "consume":
		report, err = runConsume(ctx, &c)
	case "e2e":
		report, err = runEndToEnd(ctx, &c)
	case "backlog":
		report, err = runBacklog(ctx, &c)
	default:
		fail("unknown -mode %q", c.mode)
	}
	if err != nil {
		fail("%v", err)
	}
	line, err := json.Marshal(report)
	if err != nil {
		fail("%v", err)
	}
	fmt.Println(string(line))
}

func runProduce(ctx context.Context, c *config) (any, error) {
	p, err := newProducer(c, false)
	if err != nil {
		return nil, err
	}
	defer p.close()
	mark("produce", "start")
	result, err := p.runEither(ctx)
	mark("produce", "end")
	return map[string]any{"mode": c.mode, "produce": result}, err
}

func runConsume(ctx context.Context, c *config) (any, error) {
	if c.raw {
		result, err := rawDrain(ctx, c, c.records, "consume")
		return map[string]any{"mode": c.mode, "consume": result}, err
	}
	cons, err := newConsumers(c, false)
	if err != nil {
		return nil, err
	}
	result := cons.run(ctx, c.records, "consume")
	return map[string]any{"mode": c.mode, "consume": result}, nil
}

// runEndToEnd: consumers first (assigned from the start of the fresh topic), then
// the paced produce; the consumers stop once they have every record written.
func runEndToEnd(ctx context.Context, c *config) (any, error) {
	var read func(context.Context) consumeResult
	var setFrom, expect func(int64)
	var closeReaders func()
	if c.raw {
		f, err := newRawFetcher(ctx, c)
		if err != nil {
			return nil, err
		}
		read = func(ctx context.Context) consumeResult { return f.run(ctx, "", true) }
		setFrom, expect, closeReaders = f.measureFrom.Store, f.expect, f.close
	} else {
		cons, err := newConsumers(c, true)
		if err != nil {
			return nil, err
		}
		read = func(ctx context.Context) consumeResult { return cons.run(ctx, 0, "") }
		setFrom, expect, closeReaders = cons.measureFrom.Store, cons.expect, cons.close
	}
	p, err := newProducer(c, true)
	if err != nil {
		closeReaders()
		return nil, err
	}
	defer p.close()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	consumed := make(chan consumeResult, 1)
	go func() { consumed <- read(ctx) }()
	mark("produce", "start")
	setFrom(time.Now().Add(c.warmup).UnixNano())
	result, err := p.runEither(ctx)
	mark("produce", "end")
	if err != nil {
		cancel()
		<-consumed
		return nil, err
	}
	expect(result.Records + result.Primed)
	got := <-consumed
	return map[string]any{"mode": c.mode, "produce": result, "consume": got}, nil
}

// runBacklog: fill the fresh topic, then drain all of it.
func runBacklog(ctx context.Context, c *config) (any, error) {
	p, err := newProducer(c, false)
	if err != nil {
		return nil, err
	}
	mark("fill", "start")
	fill, err := p.runEither(ctx)
	mark("fill", "end")
	p.close()
	if err != nil {
		return nil, err
	}
	var drain consumeResult
	if c.raw {
		drain, err = rawDrain(ctx, c, fill.Records+fill.Primed, "drain")
		if err != nil {
			return nil, err
		}
	} else {
		cons, err := newConsumers(c, false)
		if err != nil {
			return nil, err
		}
		drain = cons.run(ctx, fill.Records+fill.Primed, "drain")
	}
	return map[string]any{"mode": c.mode, "fill": fill, "drain": drain}, nil
}
