// The topic list: one page at a time, searched and sorted on the server
// (GET .../topics?q=&sort=&order=&page=&page_size=), each row's size and
// records per second summed over the live brokers' statistics for that page's
// topics (GET .../brokers/{id}/stats?topics=...); create and delete.
"use strict";

document.addEventListener("alpine:init", () => {
  function parseConfigs(text) {
    const configs = [];
    for (const raw of text.split("\n")) {
      const line = raw.trim();
      if (!line || line.startsWith("#")) continue;
      const at = line.indexOf("=");
      if (at <= 0) throw new Error("a config line is name=value: " + line);
      configs.push({ name: line.slice(0, at).trim(), value: line.slice(at + 1).trim() });
    }
    return configs;
  }

  Alpine.data("topics", () => ({
    rows: [],
    q: Weir.param("q", ""),
    sort: Weir.param("sort", "topic_name"),
    order: Weir.param("order", "asc"),
    page: Number(Weir.param("page", "1")) || 1,
    pageSize: Number(Weir.param("page_size", "50")) || 50,
    total: 0,
    hasNext: false,
    loaded: false,
    statsLoaded: false,
    creating: false,
    busy: false,
    error: "",
    notice: "",
    form: { name: "", partitions: "", replication: "", configs: "" },
    init() {
      this.stop = Weir.poll(() => this.load(), 10000);
    },
    destroy() {
      this.stop();
    },
    async load() {
      const params = new URLSearchParams({
        sort: this.sort,
        order: this.order,
        page: String(this.page),
        page_size: String(this.pageSize),
      });
      if (this.q) params.set("q", this.q);
      try {
        const body = await Weir.api((await Weir.clusterPath("/topics")) + "?" + params);
        const previous = new Map(this.rows.map((r) => [r.topic_name, r.stats]));
        const rows = body.data.map((t) => ({ ...t, stats: previous.get(t.topic_name) || null }));
        this.rows = rows;
        this.total = body.metadata.total;
        this.hasNext = Boolean(body.metadata.next);
        this.loaded = true;
        this.error = "";
        history.replaceState(null, "", Weir.link("topics", {
          q: this.q, sort: this.sort === "topic_name" ? "" : this.sort,
          order: this.order === "asc" ? "" : this.order, page: this.page > 1 ? this.page : "",
          page_size: this.pageSize === 50 ? "" : this.pageSize,
        }));
        this.loadStats(rows.map((r) => r.topic_name));
      } catch (error) {
        this.error = error.message;
        throw error;
      }
    },
    async loadStats(names) {
      if (!names.length) return;
      const brokers = (await Weir.api(await Weir.clusterPath("/brokers"))).data;
      const query = "?topics=" + encodeURIComponent(names.join(","));
      const answers = await Promise.all(
        brokers.map(async (b) => {
          try {
            return await Weir.api((await Weir.clusterPath("/brokers/" + b.broker_id + "/stats")) + query);
          } catch (_) {
            return null;
          }
        })
      );
      const answered = answers.filter(Boolean);
      if (!answered.length) {
        // No broker would say (DESCRIBE on the cluster is needed): sizes stay unknown.
        this.statsLoaded = true;
        return;
      }
      const sums = new Map(names.map((n) => [n, {
        leader_bytes: 0, produced_records_per_s: 0, fetched_records_per_s: 0,
      }]));
      for (const answer of answered) {
        for (const t of answer.topics) {
          const sum = sums.get(t.topic_name);
          if (!sum) continue;
          sum.leader_bytes += t.leader_bytes;
          sum.produced_records_per_s += t.produced_records_per_s;
          sum.fetched_records_per_s += t.fetched_records_per_s;
        }
      }
      this.rows = this.rows.map((r) => (sums.has(r.topic_name) ? { ...r, stats: sums.get(r.topic_name) } : r));
      this.statsLoaded = true;
    },
    search() {
      this.page = 1;
      this.load();
    },
    go(page) {
      this.page = Math.max(1, page);
      this.load();
    },
    sortBy(field) {
      if (this.sort === field) this.order = this.order === "asc" ? "desc" : "asc";
      else {
        this.sort = field;
        this.order = "asc";
      }
      this.go(1);
    },
    arrow(field) {
      return this.sort === field ? (this.order === "asc" ? "▲" : "▼") : "";
    },
    pageInfo() {
      if (!this.loaded) return "loading…";
      if (!this.total) return "no topics";
      const first = (this.page - 1) * this.pageSize + 1;
      const last = Math.min(this.page * this.pageSize, this.total);
      return first + "–" + last + " of " + Weir.fmtCount(this.total);
    },
    retention(t) {
      const parts = [];
      if (t.retention_ms !== undefined && t.retention_ms !== null) {
        parts.push(t.retention_ms < 0 ? "forever" : Weir.fmtDurationMs(t.retention_ms));
      }
      if (t.retention_bytes !== undefined && t.retention_bytes !== null && t.retention_bytes >= 0) {
        parts.push(Weir.fmtBytes(t.retention_bytes));
      }
      return parts.join(", ") || "–";
    },
    async create() {
      this.busy = true;
      try {
        const body = { topic_name: this.form.name.trim(), configs: parseConfigs(this.form.configs) };
        if (this.form.partitions) body.partitions_count = Number(this.form.partitions);
        if (this.form.replication) body.replication_factor = Number(this.form.replication);
        await Weir.api(await Weir.clusterPath("/topics"), { method: "POST", body });
        this.notice = "Created topic " + body.topic_name;
        this.form = { name: "", partitions: "", replication: "", configs: "" };
        this.creating = false;
        this.error = "";
        await this.load();
      } catch (error) {
        this.error = error.message;
      } finally {
        this.busy = false;
      }
    },
    async remove(name) {
      if (!confirm("Delete topic " + name + " and all its records? This cannot be undone.")) return;
      try {
        await Weir.api(await Weir.clusterPath("/topics/" + encodeURIComponent(name)), { method: "DELETE" });
        this.notice = "Deleted topic " + name;
        this.error = "";
        await this.load();
      } catch (error) {
        this.error = error.message;
      }
    },
  }));
});
