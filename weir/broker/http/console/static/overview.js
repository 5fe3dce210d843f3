// The overview page: the cluster's health (GET .../health), each live broker's
// statistics (GET .../brokers/{id}/stats, any broker answers for all) and the
// cluster's throughput over the last 15 minutes, summed over the brokers.
"use strict";

document.addEventListener("alpine:init", () => {
  const BUCKET_MS = 10000;

  // Sums the brokers' samples into one series per field, by 10-second bucket,
  // then adds the interval in progress (the brokers' `current`) at its end.
  function clusterSeries(statsList, fields) {
    const buckets = new Map();
    for (const stats of statsList) {
      for (const sample of stats.samples) {
        const key = Math.round(sample.time_ms / BUCKET_MS) * BUCKET_MS;
        const sums = buckets.get(key) || fields.map(() => 0);
        fields.forEach((field, i) => (sums[i] += sample[field]));
        buckets.set(key, sums);
      }
    }
    const times = [...buckets.keys()].sort((a, b) => a - b);
    const columns = [times.map((t) => t / 1000), ...fields.map((_, i) => times.map((t) => buckets.get(t)[i]))];
    const current = statsList.map((s) => s.current).filter(Boolean);
    if (current.length) {
      const at = Math.max(...current.map((c) => c.time_ms));
      if (!times.length || at > times[times.length - 1] + 1000) {
        columns[0].push(at / 1000);
        fields.forEach((field, i) => columns[i + 1].push(current.reduce((sum, c) => sum + c[field], 0)));
      }
    }
    return columns;
  }

  Alpine.data("overview", () => ({
    clusterId: "",
    brokers: [],
    controllerId: null,
    partitionsCount: null,
    offlineCount: null,
    underReplicatedCount: null,
    underReplicated: [],
    isrShrinks: null,
    loopLagMs: null,
    diskBytes: null,
    error: "",
    get liveCount() {
      return this.brokers.filter((b) => b.live).length;
    },
    init() {
      this.bytesChart = Weir.timeChart(document.getElementById("throughput-chart"), ["in", "out"], {
        points: 100,
        values: (u, ticks) => ticks.map((v) => Weir.fmtBytes(v)),
      });
      this.recordsChart = Weir.timeChart(document.getElementById("records-chart"), ["produced", "fetched"], {
        points: 100,
      });
      this.stop = Weir.poll(() => this.refresh(), 5000);
    },
    destroy() {
      this.stop();
    },
    async refresh() {
      try {
        this.clusterId = await Weir.clusterId();
        const health = await Weir.api(await Weir.clusterPath("/health"));
        const statsPaths = health.brokers
          .filter((b) => b.live)
          .map(async (b) => {
            try {
              return await Weir.api(await Weir.clusterPath("/brokers/" + b.broker_id + "/stats"));
            } catch (error) {
              if (error.status === 0) throw error; // this broker itself is gone
              return null; // that broker went away since: shown without its statistics
            }
          });
        const stats = (await Promise.all(statsPaths)).filter(Boolean);
        const byId = new Map(stats.map((s) => [s.broker_id, s]));
        this.brokers = health.brokers.map((b) => {
          const s = byId.get(b.broker_id) || null;
          return { ...b, stats: s, rate: s ? s.current || s.samples[s.samples.length - 1] || null : null };
        });
        this.controllerId = health.controller_id;
        this.partitionsCount = health.partitions_count;
        this.offlineCount = health.offline_partitions_count;
        this.underReplicatedCount = health.under_replicated_partitions_count;
        this.underReplicated = health.under_replicated_partitions;
        this.isrShrinks = stats.reduce((sum, s) => sum + s.isr_shrinks_total, 0);
        this.loopLagMs = stats.length ? Math.max(...stats.map((s) => s.loop_lag_worst_last_minute_ms)) : null;
        this.diskBytes = stats.reduce((sum, s) => sum + s.disk_bytes, 0);
        this.drawCharts(stats);
        this.error = "";
      } catch (error) {
        this.error = error.message;
        throw error;
      }
    },
    drawCharts(stats) {
      const bytes = clusterSeries(stats, ["produced_bytes_per_s", "fetched_bytes_per_s"]);
      this.bytesChart.set(bytes);
      this.recordsChart.set(clusterSeries(stats, ["produced_records_per_s", "fetched_records_per_s"]));
      // What the tests (and a curious reader) can see of the chart's latest point.
      const el = document.getElementById("throughput-chart");
      const last = bytes[0].length - 1;
      el.dataset.points = String(bytes[0].length);
      el.dataset.lastIn = last >= 0 ? String(bytes[1][last]) : "0";
      el.dataset.lastOut = last >= 0 ? String(bytes[2][last]) : "0";
      el.dataset.maxIn = String(Math.max(0, ...bytes[1]));
    },
  }));
});
