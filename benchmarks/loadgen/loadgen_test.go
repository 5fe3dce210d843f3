package main

import (
	"encoding/binary"
	"hash/crc32"
	"testing"
	"time"
)

// A batch built by encodeBatch is read back by scanBatches and scanStamps, and its
// CRC32C covers what Kafka's does (attributes to the end).
func TestBatchRoundTrip(t *testing.T) {
	value := make([]byte, 100)
	stamps := []int64{11, 22, 33}
	batch := encodeBatch(value, stamps)
	if got := crc32.Checksum(batch[21:], castagnoli); got != binary.BigEndian.Uint32(batch[17:21]) {
		t.Fatalf("CRC %x, header says %x", got, binary.BigEndian.Uint32(batch[17:21]))
	}
	var seen []int64
	records, next := scanBatches(append(batch, batch[:30]...), func(s int64) { seen = append(seen, s) })
	if records != 3 || next != 3 {
		t.Fatalf("records %d next %d, want 3 and 3 (the partial second batch ignored)", records, next)
	}
	if len(seen) != 3 || seen[0] != 11 || seen[2] != 33 {
		t.Fatalf("stamps %v", seen)
	}
}

func TestHistogramPercentiles(t *testing.T) {
	var h histogram
	for us := 1; us <= 1000; us++ {
		h.record(time.Duration(us) * time.Microsecond)
	}
	h.recordN(50*time.Millisecond, 10)
	s := h.summary()
	if s.Count != 1010 || s.MaxMs != 50 {
		t.Fatalf("count %d max %v", s.Count, s.MaxMs)
	}
	if s.P50Ms < 0.49 || s.P50Ms > 0.52 { // log-linear buckets: within 1.6%
		t.Fatalf("p50 %v ms", s.P50Ms)
	}
	if s.P999Ms < 49 {
		t.Fatalf("p99.9 %v ms: the ten 50 ms values are the top 1%%", s.P999Ms)
	}
}
