// Command share-consumer drives one franz-go share-group (KIP-932) consumer from a JSON
// spec on stdin and prints what it saw as JSON lines on stdout: the contract of
// compat_tests/share_clients/driver_spec.py, shared with the confluent-kafka and
// kafka-clients drivers.
//
// franz-go differs from the other two in ways the driver bridges: a record not
// acknowledged before the next poll is accepted by that poll, a renewed record is not
// returned again (so the driver renews, flushes, sleeps pause_ms and takes the renewed
// records' next actions itself, in rounds), and the acknowledgement callback reports a
// partition without its offsets (the driver fills in the offsets it acknowledged on that
// partition since the last result).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

type spec struct {
	Bootstrap      string              `json:"bootstrap"`
	Group          string              `json:"group"`
	Topics         []string            `json:"topics"`
	ClientID       string              `json:"client_id"`
	Actions        map[string][]string `json:"actions"`
	DefaultAction  string              `json:"default_action"`
	PauseMs        int64               `json:"pause_ms"`
	Commit         string              `json:"commit"`
	MaxDeliveries  int                 `json:"max_deliveries"`
	IdleMs         int64               `json:"idle_ms"`
	DeadlineMs     int64               `json:"deadline_ms"`
	PollMs         int64               `json:"poll_ms"`
	AcquireMode    string              `json:"acquire_mode"`
	MaxPollRecords int32               `json:"max_poll_records"`
	Debug          bool                `json:"debug"`
}

var ackStatus = map[string]kgo.AckStatus{
	"ACCEPT":  kgo.AckAccept,
	"RELEASE": kgo.AckRelease,
	"REJECT":  kgo.AckReject,
	"RENEW":   kgo.AckRenew,
}

type driver struct {
	spec       spec
	out        sync.Mutex
	sightings  map[string]int
	deliveries int
	pendingMu  sync.Mutex
	pending    map[string][]int64 // "topic/partition" -> offsets acknowledged since the last result
}

func (d *driver) emit(event string, fields map[string]any) {
	line := map[string]any{"event": event, "consumer": d.spec.ClientID, "t_ms": time.Now().UnixMilli()}
	for k, v := range fields {
		line[k] = v
	}
	data, err := json.Marshal(line)
	if err != nil {
		panic(err)
	}
	d.out.Lock()
	defer d.out.Unlock()
	fmt.Println(string(data))
}

func (d *driver) actionFor(partition int32, offset int64, sighting int) string {
	listed := d.spec.Actions[fmt.Sprintf("%d:%d", partition, offset)]
	if len(listed) == 0 {
		return d.spec.DefaultAction
	}
	return listed[min(sighting, len(listed))-1]
}

func errorName(err error) any {
	if err == nil {
		return nil
	}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Message
	}
	return err.Error()
}

func (d *driver) onAckResults(_ *kgo.Client, results kgo.ShareAckResults) {
	for _, r := range results {
		key := fmt.Sprintf("%s/%d", r.Topic, r.Partition)
		d.pendingMu.Lock()
		offsets := d.pending[key]
		delete(d.pending, key)
		d.pendingMu.Unlock()
		if offsets == nil {
			offsets = []int64{}
		}
		d.emit("ack_result", map[string]any{
			"topic": r.Topic, "partition": r.Partition, "offsets": offsets, "error": errorName(r.Err),
		})
	}
}

func (d *driver) options() []kgo.Opt {
	opts := []kgo.Opt{
		kgo.SeedBrokers(d.spec.Bootstrap),
		kgo.ClientID(d.spec.ClientID),
		kgo.ConsumeTopics(d.spec.Topics...),
		kgo.ShareGroup(d.spec.Group),
		kgo.ShareAckCallback(d.onAckResults),
	}
	if d.spec.MaxPollRecords > 0 {
		opts = append(opts, kgo.ShareMaxRecords(d.spec.MaxPollRecords))
	}
	if d.spec.AcquireMode == "record_limit" {
		opts = append(opts, kgo.ShareMaxRecordsStrict())
	}
	if d.spec.Debug {
		opts = append(opts, kgo.WithLogger(kgo.BasicLogger(os.Stderr, kgo.LogLevelDebug, nil)))
	}
	return opts
}

func (d *driver) flush(cl *kgo.Client) {
	if d.spec.Commit != "sync" {
		return // "async" and "poll": franz-go flushes in the background and with the next poll
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := cl.FlushAcks(ctx); err != nil {
		d.emit("error", map[string]any{"where": "commit", "error": errorName(err), "message": err.Error()})
	}
}

func (d *driver) ack(cl *kgo.Client, r *kgo.Record, action string) {
	r.Ack(ackStatus[action])
	key := fmt.Sprintf("%s/%d", r.Topic, r.Partition)
	d.pendingMu.Lock()
	d.pending[key] = append(d.pending[key], r.Offset)
	d.pendingMu.Unlock()
	d.emit("acknowledge", map[string]any{"topic": r.Topic, "partition": r.Partition, "offset": r.Offset, "type": action})
}

// handle acknowledges one poll's records; false after a HOLD (then the driver exits).
func (d *driver) handle(cl *kgo.Client, records []*kgo.Record, deadline time.Time) bool {
	for _, r := range records {
		d.deliveries++
		d.emit("delivered", map[string]any{
			"topic": r.Topic, "partition": r.Partition, "offset": r.Offset,
			"key": text(r.Key), "value": text(r.Value), "delivery_count": r.DeliveryCount(),
		})
	}
	// Rounds: pause, acknowledge, flush; the records renewed in a round are taken up again
	// in the next (kafka-clients returns them from its next poll instead).
	pause := time.Duration(d.spec.PauseMs) * time.Millisecond
	active := records
	for len(active) > 0 {
		if pause > 0 {
			time.Sleep(pause)
		}
		var renewed []*kgo.Record
		for _, r := range active {
			key := fmt.Sprintf("%s/%d:%d", r.Topic, r.Partition, r.Offset)
			d.sightings[key]++
			action := d.actionFor(r.Partition, r.Offset, d.sightings[key])
			if action == "HOLD" {
				d.emit("holding", nil)
				time.Sleep(time.Until(deadline))
				return false
			}
			d.ack(cl, r, action)
			if action == "RENEW" {
				renewed = append(renewed, r)
			}
		}
		d.flush(cl)
		active = renewed
	}
	return true
}

func (d *driver) run() int {
	d.emit("started", map[string]any{"client": "franz-go"})
	cl, err := kgo.NewClient(d.options()...)
	if err != nil {
		d.emit("error", map[string]any{"where": "poll", "error": errorName(err), "message": err.Error()})
		return 1
	}
	started := time.Now()
	deadline := started.Add(time.Duration(d.spec.DeadlineMs) * time.Millisecond)
	var lastDelivery time.Time
	for time.Now().Before(deadline) {
		if !lastDelivery.IsZero() && time.Since(lastDelivery) > time.Duration(d.spec.IdleMs)*time.Millisecond {
			break
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Duration(d.spec.PollMs)*time.Millisecond)
		fetches := cl.PollRecords(ctx, int(d.spec.MaxPollRecords))
		cancel()
		for _, fe := range fetches.Errors() {
			if errors.Is(fe.Err, context.DeadlineExceeded) {
				continue
			}
			d.emit("error", map[string]any{"where": "poll", "error": errorName(fe.Err), "message": fe.Err.Error()})
		}
		records := fetches.Records()
		if len(records) == 0 {
			continue
		}
		if !d.handle(cl, records, deadline) {
			break
		}
		lastDelivery = time.Now() // idle counts from the end of handling
		if d.spec.MaxDeliveries > 0 && d.deliveries >= d.spec.MaxDeliveries {
			break
		}
	}
	cl.Close()
	d.emit("closed", nil)
	return 0
}

func text(b []byte) any {
	if b == nil {
		return nil
	}
	return string(b)
}

func main() {
	data, err := io.ReadAll(os.Stdin)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	d := &driver{sightings: map[string]int{}, pending: map[string][]int64{}}
	d.spec = spec{DefaultAction: "ACCEPT", Commit: "sync", IdleMs: 3000, DeadlineMs: 30000, PollMs: 200}
	if err := json.Unmarshal(data, &d.spec); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	os.Exit(d.run())
}
