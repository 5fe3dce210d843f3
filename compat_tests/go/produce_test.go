package compat

import (
	"fmt"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kgo"
)

const recordsPerPartition = 200

// codecs are every compression codec Kafka defines, as each client names it.
var kgoCodecs = map[string]kgo.CompressionCodec{
	"none":   kgo.NoCompression(),
	"gzip":   kgo.GzipCompression(),
	"snappy": kgo.SnappyCompression(),
	"lz4":    kgo.Lz4Compression(),
	"zstd":   kgo.ZstdCompression(),
}

var saramaCodecs = map[string]sarama.CompressionCodec{
	"none":   sarama.CompressionNone,
	"gzip":   sarama.CompressionGZIP,
	"snappy": sarama.CompressionSnappy,
	"lz4":    sarama.CompressionLZ4,
	"zstd":   sarama.CompressionZSTD,
}

// expectedRecords is what each producer test writes: per partition, numbered
// keys and values with two headers, in order.
func expectedRecords(partitions int32) []record {
	var records []record
	for partition := range partitions {
		for i := range recordsPerPartition {
			records = append(records, record{
				Partition: partition,
				Key:       fmt.Sprintf("k%d-%d", partition, i),
				Value:     fmt.Sprintf("value %d of partition %d", i, partition),
				Headers:   fmt.Sprintf("seq=%d,origin=go", i),
			})
		}
	}
	return records
}

// codecIDs are the RecordBatch attribute values of each codec.
var codecIDs = map[string]uint8{"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}

// assertReadBack reads the topic back and checks every record's partition, key,
// value and headers, that each partition holds them in production order, and
// that they were stored in batches of the given codec carrying a producer id
// (written idempotently).
func assertReadBack(t *testing.T, topic string, partitions int32, codec string) {
	t.Helper()
	want := expectedRecords(partitions)
	got := consumeAll(t, topic, len(want))
	byPartition := map[int32][]record{}
	for _, r := range got {
		if r.ProducerID < 0 {
			t.Fatalf("partition %d offset %d: stored without a producer id, not idempotently", r.Partition, r.Offset)
		}
		if stored := r.Attrs.CompressionType(); stored != codecIDs[codec] {
			t.Fatalf("partition %d offset %d: stored with codec %d, produced with %s", r.Partition, r.Offset, stored, codec)
		}
		if r.Offset != int64(len(byPartition[r.Partition])) {
			t.Fatalf("partition %d: offset %d where %d was expected", r.Partition, r.Offset, len(byPartition[r.Partition]))
		}
		byPartition[r.Partition] = append(byPartition[r.Partition], record{
			Partition: r.Partition, Key: string(r.Key), Value: string(r.Value), Headers: headersString(r.Headers),
		})
	}
	var flattened []record
	for partition := range partitions {
		flattened = append(flattened, byPartition[partition]...)
	}
	for i := range want {
		if flattened[i] != want[i] {
			t.Fatalf("record %d: read %+v, produced %+v", i, flattened[i], want[i])
		}
	}
}

func TestFranzGoIdempotentProducerWritesEveryCodecInOrder(t *testing.T) {
	t.Parallel()
	for name, codec := range kgoCodecs {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			topic := createTopic(t, 2, nil)
			// kgo's defaults: idempotent, acks=all, 5 requests in flight per broker.
			producer := newKgoClient(t,
				kgo.DefaultProduceTopic(topic),
				kgo.ProducerBatchCompression(codec),
				kgo.RecordPartitioner(kgo.ManualPartitioner()),
				kgo.ProducerLinger(5*time.Millisecond),
			)
			ctx := testContext(t, 30*time.Second)
			var records []*kgo.Record
			for _, r := range expectedRecords(2) {
				records = append(records, &kgo.Record{
					Partition: r.Partition,
					Key:       []byte(r.Key),
					Value:     []byte(r.Value),
					Headers:   kgoHeaders(r.Headers),
				})
			}
			if err := producer.ProduceSync(ctx, records...).FirstErr(); err != nil {
				t.Fatalf("produce: %v", err)
			}
			for _, r := range records {
				if r.ProducerID < 0 {
					t.Fatalf("record at offset %d carries no producer id: not idempotent", r.Offset)
				}
			}
			assertReadBack(t, topic, 2, name)
		})
	}
}

func kgoHeaders(encoded string) []kgo.RecordHeader {
	var seq int
	if _, err := fmt.Sscanf(encoded, "seq=%d,origin=go", &seq); err != nil {
		panic(err)
	}
	return []kgo.RecordHeader{
		{Key: "seq", Value: fmt.Appendf(nil, "%d", seq)},
		{Key: "origin", Value: []byte("go")},
	}
}

func idempotentSaramaConfig(version sarama.KafkaVersion, codec sarama.CompressionCodec) *sarama.Config {
	config := saramaConfig(version)
	config.Producer.Idempotent = true
	config.Producer.RequiredAcks = sarama.WaitForAll
	config.Net.MaxOpenRequests = 1
	config.Producer.Return.Successes = true
	config.Producer.Compression = codec
	config.Producer.Partitioner = sarama.NewManualPartitioner
	config.Producer.Flush.Frequency = 5 * time.Millisecond
	config.Producer.Retry.Max = 10
	config.Producer.Retry.Backoff = 100 * time.Millisecond
	return config
}

func TestSaramaIdempotentProducerWritesEveryCodecInOrder(t *testing.T) {
	t.Parallel()
	for versionName, version := range saramaVersions {
		for name, codec := range saramaCodecs {
			t.Run(versionName+"/"+name, func(t *testing.T) {
				t.Parallel()
				saramaProduceAndReadBack(t, version, name, codec)
			})
		}
	}
}

func saramaProduceAndReadBack(t *testing.T, version sarama.KafkaVersion, name string, codec sarama.CompressionCodec) {
	topic := createTopic(t, 2, nil)
	producer, err := sarama.NewAsyncProducer(bootstrap(), idempotentSaramaConfig(version, codec))
	if err != nil {
		t.Fatalf("sarama.NewAsyncProducer: %v", err)
	}
	want := expectedRecords(2)
	go func() {
		for _, r := range want {
			var seq int
			fmt.Sscanf(r.Headers, "seq=%d,origin=go", &seq)
			producer.Input() <- &sarama.ProducerMessage{
				Topic:     topic,
				Partition: r.Partition,
				Key:       sarama.StringEncoder(r.Key),
				Value:     sarama.StringEncoder(r.Value),
				Headers: []sarama.RecordHeader{
					{Key: []byte("seq"), Value: fmt.Appendf(nil, "%d", seq)},
					{Key: []byte("origin"), Value: []byte("go")},
				},
			}
		}
	}()
	deadline := time.After(30 * time.Second)
	for acked := 0; acked < len(want); {
		select {
		case <-producer.Successes():
			acked++
		case produceErr := <-producer.Errors():
			t.Fatalf("produce: %v", produceErr.Err)
		case <-deadline:
			t.Fatalf("%d of %d records acknowledged before the deadline", acked, len(want))
		}
	}
	if err := producer.Close(); err != nil {
		t.Fatalf("close producer: %v", err)
	}
	assertReadBack(t, topic, 2, name)
}

// A sarama SyncProducer with acks=all and idempotence reports the offsets the
// broker assigned, densely from 0.
func TestSaramaSyncProducerReportsAssignedOffsets(t *testing.T) {
	t.Parallel()
	topic := createTopic(t, 1, nil)
	producer, err := sarama.NewSyncProducer(bootstrap(), idempotentSaramaConfig(sarama.MaxVersion, sarama.CompressionNone))
	if err != nil {
		t.Fatalf("sarama.NewSyncProducer: %v", err)
	}
	defer producer.Close()
	for i := range 5 {
		partition, offset, err := producer.SendMessage(&sarama.ProducerMessage{
			Topic: topic, Value: sarama.StringEncoder(fmt.Sprintf("m%d", i)),
		})
		if err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
		if partition != 0 || offset != int64(i) {
			t.Fatalf("send %d landed at %d/%d, want 0/%d", i, partition, offset, i)
		}
	}
}

// Null keys and values stay null (not empty) through the broker, and an empty
// value stays empty: kgo reads a null field back as a nil slice.
func TestFranzGoNullAndEmptyKeysAndValuesRoundTrip(t *testing.T) {
	t.Parallel()
	topic := createTopic(t, 1, nil)
	producer := newKgoClient(t, kgo.DefaultProduceTopic(topic))
	records := []*kgo.Record{
		{Key: nil, Value: []byte("null key")},
		{Key: []byte("null value"), Value: nil},
		{Key: []byte{}, Value: []byte{}},
		{Key: nil, Value: nil, Headers: []kgo.RecordHeader{{Key: "h", Value: nil}}},
	}
	if err := producer.ProduceSync(testContext(t, waitTimeout), records...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	got := consumeAll(t, topic, len(records))
	type nullness struct{ keyNil, keyEmpty, valueNil, valueEmpty, headerValueNil bool }
	describe := func(r *kgo.Record) nullness {
		headerNil := len(r.Headers) == 1 && r.Headers[0].Value == nil
		return nullness{r.Key == nil, r.Key != nil && len(r.Key) == 0, r.Value == nil, r.Value != nil && len(r.Value) == 0, headerNil}
	}
	for i := range records {
		if want, read := describe(records[i]), describe(got[i]); want != read {
			t.Fatalf("record %d: produced %+v, read back %+v", i, want, read)
		}
	}
}
