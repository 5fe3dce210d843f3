package main

import (
	"math/bits"
	"time"
)

// histogram counts latencies in microseconds, log-linear: values below subBuckets
// exactly, above that subBuckets buckets per power of two (about 1.6% wide). It is
// not safe for concurrent use: each producer client or consumer has its own, and
// they are merged once the run is over.
const (
	subBucketBits = 6
	subBuckets    = 1 << subBucketBits
	maxExponent   = 40 // 2^46 µs: far beyond any run
)

type histogram struct {
	counts [subBuckets * (maxExponent + 1)]uint64
	count  uint64
	sumUs  uint64
	maxUs  uint64
}

func bucketOf(us uint64) int {
	if us < subBuckets {
		return int(us)
	}
	shift := bits.Len64(us) - subBucketBits - 1 // us>>shift is in [subBuckets, 2*subBuckets)
	index := subBuckets*(shift+1) + int(us>>shift) - subBuckets
	return min(index, subBuckets*(maxExponent+1)-1)
}

// bucketLowUs is the smallest value that falls in bucket index.
func bucketLowUs(index int) uint64 {
	if index < subBuckets {
		return uint64(index)
	}
	shift := index/subBuckets - 1
	return uint64(index%subBuckets+subBuckets) << shift
}

func (h *histogram) record(d time.Duration) { h.recordN(d, 1) }

// recordN counts n values of d (the records of one request).
func (h *histogram) recordN(d time.Duration, n uint64) {
	us := uint64(max(d.Microseconds(), 0))
	h.counts[bucketOf(us)] += n
	h.count += n
	h.sumUs += us * n
	h.maxUs = max(h.maxUs, us)
}

func (h *histogram) merge(other *histogram) {
	for i, n := range other.counts {
		h.counts[i] += n
	}
	h.count += other.count
	h.sumUs += other.sumUs
	h.maxUs = max(h.maxUs, other.maxUs)
}

// percentileUs is the lower bound of the bucket holding the q-quantile (0 < q <= 1).
func (h *histogram) percentileUs(q float64) uint64 {
	total := h.count
	if total == 0 {
		return 0
	}
	rank := uint64(q*float64(total) + 0.5)
	rank = max(rank, 1)
	var seen uint64
	for i := range h.counts {
		seen += h.counts[i]
		if seen >= rank {
			return min(bucketLowUs(i), h.maxUs)
		}
	}
	return h.maxUs
}

// latencySummary is the JSON form, in milliseconds.
type latencySummary struct {
	Count  uint64  `json:"count"`
	MeanMs float64 `json:"mean_ms"`
	P50Ms  float64 `json:"p50_ms"`
	P99Ms  float64 `json:"p99_ms"`
	P999Ms float64 `json:"p99_9_ms"`
	MaxMs  float64 `json:"max_ms"`
}

func (h *histogram) summary() *latencySummary {
	count := h.count
	if count == 0 {
		return nil
	}
	ms := func(us uint64) float64 { return float64(us) / 1000 }
	return &latencySummary{
		Count:  count,
		MeanMs: ms(h.sumUs) / float64(count),
		P50Ms:  ms(h.percentileUs(0.50)),
		P99Ms:  ms(h.percentileUs(0.99)),
		P999Ms: ms(h.percentileUs(0.999)),
		MaxMs:  ms(h.maxUs),
	}
}
