// Command txnload is the load generator of benchmarks/transactions.py: transactional
// producers (franz-go) that each run transactions of a fixed number of produce
// requests against one broker, for a fixed time, and report what they did as one
// JSON line.
//
// A "produce request" is one Flush of -records-per-request records spread evenly over
// -partitions partitions: the producer lingers a minute (franz-go's maximum), so records wait in its buffer
// until Flush sends them all as one Produce request (one batch per partition). Each
// producer loops: BeginTransaction, -requests-per-txn times (produce the records,
// Flush), EndTransaction(commit). Request counts come from franz-go's broker-write
// hook, so the report says how many Produce, AddPartitionsToTxn and EndTxn requests
// really went out.
//
// Protocol with the harness: after every producer has run InitProducerId and two
// untimed transactions it prints "READY" and waits for a line on stdin; it then runs
// -seconds, lets every open transaction finish, and prints the JSON report.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

type requestCounter struct {
	byKey [128]atomic.Int64
}

// OnBrokerWrite implements kgo.HookBrokerWrite.
func (c *requestCounter) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if err == nil && key >= 0 && int(key) < len(c.byKey) {
		c.byKey[key].Add(1)
	}
}

func (c *requestCounter) snapshot() map[string]int64 {
	names := map[int16]string{0: "Produce", 22: "InitProducerId", 24: "AddPartitionsToTxn", 26: "EndTxn", 10: "FindCoordinator"}
	out := map[string]int64{}
	for key, name := range names {
		out[name] = c.byKey[key].Load()
	}
	return out
}

type config struct {
	bootstrap         string
	topic             string
	partitions        int
	producers         int
	requestsPerTxn    int
	recordsPerRequest int
	valueBytes        int
	seconds           float64
	idPrefix          string
	logLevel          string
	txnVersion        int
}

type totals struct {
	transactions atomic.Int64
	records      atomic.Int64
	aborted      atomic.Int64
	errors       atomic.Int64
	firstError   atomic.Value
}

type producer struct {
	client *kgo.Client
	cfg    config
	value  []byte
}

// versionOptions pins transaction version 1 (AddPartitionsToTxn before a partition's
// first produce, EndTxn keeps the epoch) by capping the requests whose newer versions
// are KIP-890 part 2's; with 2 franz-go uses version 2 when the broker finalizes it.
func versionOptions(txnVersion int) []kgo.Opt {
	if txnVersion != 1 {
		return nil
	}
	versions := kversion.Stable()
	versions.SetMaxKeyVersion(int16(kmsg.Produce), 11)
	versions.SetMaxKeyVersion(int16(kmsg.EndTxn), 4)
	versions.SetMaxKeyVersion(int16(kmsg.TxnOffsetCommit), 4)
	return []kgo.Opt{kgo.MaxVersions(versions)}
}

func newProducer(cfg config, index int, counter *requestCounter) (*producer, error) {
	opts := append(versionOptions(cfg.txnVersion),
		kgo.SeedBrokers(cfg.bootstrap),
		kgo.TransactionalID(fmt.Sprintf("%s-%d", cfg.idPrefix, index)),
		kgo.TransactionTimeout(60*time.Second),
		kgo.DefaultProduceTopic(cfg.topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(time.Minute), // only Flush sends: one request per Flush
		kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.MaxBufferedRecords(1_000_000),
		kgo.WithHooks(counter),
		kgo.WithLogger(kgo.BasicLogger(os.Stderr, logLevel(cfg.logLevel), func() string { return time.Now().Format("15:04:05.000 ") })),
	)
	client, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, err
	}
	return &producer{client: client, cfg: cfg, value: make([]byte, cfg.valueBytes)}, nil
}

// transaction runs one transaction; it returns the records committed (0 if aborted).
func (p *producer) transaction(ctx context.Context, t *totals) (int, error) {
	if err := p.client.BeginTransaction(); err != nil {
		return 0, fmt.Errorf("BeginTransaction: %w", err)
	}
	var failed atomic.Value
	record := func(r *kgo.Record, err error) {
		if err != nil {
			failed.CompareAndSwap(nil, err)
		}
	}
	for request := 0; request < p.cfg.requestsPerTxn; request++ {
		for i := 0; i < p.cfg.recordsPerRequest; i++ {
			p.client.Produce(ctx, &kgo.Record{Partition: int32(i % p.cfg.partitions), Value: p.value}, record)
		}
		if err := p.client.Flush(ctx); err != nil {
			return 0, fmt.Errorf("Flush: %w", err)
		}
	}
	end := kgo.TryCommit
	if failed.Load() != nil {
		end = kgo.TryAbort
		t.errors.Add(1)
		t.firstError.CompareAndSwap(nil, fmt.Sprint(failed.Load()))
	}
	if err := p.client.EndTransaction(ctx, end); err != nil {
		return 0, fmt.Errorf("EndTransaction: %w", err)
	}
	if end == kgo.TryAbort {
		t.aborted.Add(1)
		return 0, nil
	}
	return p.cfg.requestsPerTxn * p.cfg.recordsPerRequest, nil
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
	flag.StringVar(&cfg.bootstrap, "bootstrap", "127.0.0.1:9092", "broker address")
	flag.StringVar(&cfg.topic, "topic", "txn-bench", "topic (must exist with -partitions partitions)")
	flag.IntVar(&cfg.partitions, "partitions", 4, "partitions each request writes (one batch each)")
	flag.IntVar(&cfg.producers, "producers", 4, "concurrent transactional producers (one client each)")
	flag.IntVar(&cfg.requestsPerTxn, "requests-per-txn", 1, "produce requests (flushes) per transaction")
	flag.IntVar(&cfg.recordsPerRequest, "records-per-request", 100, "records per produce request")
	flag.IntVar(&cfg.valueBytes, "value-bytes", 100, "bytes per record value (no key)")
	flag.Float64Var(&cfg.seconds, "seconds", 8, "measured time; open transactions finish after it")
	flag.StringVar(&cfg.idPrefix, "transactional-id-prefix", "txn-bench", "transactional ids are <prefix>-<n>")
	flag.StringVar(&cfg.logLevel, "log-level", "error", "franz-go's log on stderr: error, warn, info or debug")
	flag.IntVar(&cfg.txnVersion, "transaction-version", 2, "1 pins transaction version 1; 2 uses 2 when the broker offers it")
	flag.Parse()
	if err := run(cfg); err != nil {
		fmt.Fprintln(os.Stderr, "txnload:", err)
		os.Exit(1)
	}
}

func run(cfg config) error {
	ctx := context.Background()
	counter := &requestCounter{}
	producers := make([]*producer, cfg.producers)
	var warm totals
	for i := range producers {
		p, err := newProducer(cfg, i, counter)
		if err != nil {
			return err
		}
		defer p.client.Close()
		producers[i] = p
		// InitProducerId, the coordinator, metadata; franz-go opts in to transaction
		// version 2 at the first transaction's end, with one more InitProducerId.
		for range 2 {
			if _, err := p.transaction(ctx, &warm); err != nil {
				return fmt.Errorf("untimed first transactions: %w", err)
			}
		}
	}
	fmt.Println("READY")
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		return fmt.Errorf("waiting for the start line: %w", err)
	}
	before := counter.snapshot()
	var t totals
	started := time.Now()
	deadline := started.Add(time.Duration(cfg.seconds * float64(time.Second)))
	var wg sync.WaitGroup
	errs := make(chan error, len(producers))
	for _, p := range producers {
		wg.Add(1)
		go func(p *producer) {
			defer wg.Done()
			for time.Now().Before(deadline) {
				committed, err := p.transaction(ctx, &t)
				if err != nil {
					errs <- err
					return
				}
				if committed > 0 {
					t.transactions.Add(1)
					t.records.Add(int64(committed))
				}
			}
		}(p)
	}
	wg.Wait()
	elapsed := time.Since(started).Seconds()
	close(errs)
	for err := range errs {
		return err
	}
	after := counter.snapshot()
	requests := map[string]int64{}
	for name, n := range after {
		requests[name] = n - before[name]
	}
	firstError, _ := t.firstError.Load().(string)
	report := map[string]any{
		"elapsed_s":              elapsed,
		"transactions":           t.transactions.Load(),
		"records":                t.records.Load(),
		"aborted_transactions":   t.aborted.Load(),
		"failed_produce_batches": t.errors.Load(),
		"first_error":            firstError,
		"requests":               requests,
		"config": map[string]any{
			"partitions": cfg.partitions, "producers": cfg.producers,
			"requests_per_txn": cfg.requestsPerTxn, "records_per_request": cfg.recordsPerRequest,
			"value_bytes": cfg.valueBytes, "seconds": cfg.seconds, "transaction_version": cfg.txnVersion,
		},
	}
	return json.NewEncoder(os.Stdout).Encode(report)
}
