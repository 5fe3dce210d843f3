// The queues page: the share groups (paged, sorted and filtered by the broker) with
// their records totals, and the push subscriptions with their delivery status.
"use strict";

document.addEventListener("alpine:init", () => {
  Alpine.data("queueList", () => ({
    columns: [
      ["share_group_id", "Share group", false],
      ["state", "State", false],
      ["coordinator", "Coordinator", false],
      ["available", "Available", true],
      ["acquired", "Acquired", true],
      ["delayed", "Delayed", true],
      ["dead_lettered", "Dead-lettered", true],
      ["partitions_led_here", "Partitions here", true],
    ],
    groups: [],
    q: "",
    sort: "share_group_id",
    order: "asc",
    page: 1,
    pageSize: 50,
    total: 0,
    hasNext: false,
    brokerNote: "",
    error: "",
    init() {
      this.stop = Weir.poll(() => this.refresh(), 5000);
    },
    destroy() {
      this.stop();
    },
    sortBy(field) {
      if (this.sort === field) {
        this.order = this.order === "asc" ? "desc" : "asc";
      } else {
        this.sort = field;
        this.order = field === "share_group_id" || field === "state" ? "asc" : "desc";
      }
      this.page = 1;
      this.refresh();
    },
    async refresh() {
      const query = new URLSearchParams({
        q: this.q,
        sort: this.sort,
        order: this.order,
        page: String(this.page),
        page_size: String(this.pageSize),
      });
      try {
        const body = await Weir.api(await Weir.clusterPath("/share-groups?" + query));
        this.groups = body.data;
        this.total = body.metadata.total;
        this.hasNext = Boolean(body.metadata.next);
        this.error = body.brokers_not_answering.length
          ? "brokers not answering: " + body.brokers_not_answering.join(", ")
          : "";
        this.brokerNote = String(body.records_from_broker);
      } catch (error) {
        this.error = error.message;
        throw error;
      }
    },
    coordinatorOf(group) {
      return group.coordinator.related.split("/").pop();
    },
    stateClass(state) {
      return { STABLE: "good", EMPTY: "", DEAD: "bad" }[state] || "warn";
    },
  }));

  Alpine.data("subscriptionList", () => ({
    subscriptions: [],
    error: "",
    init() {
      this.stop = Weir.poll(() => this.refresh(), 5000);
    },
    destroy() {
      this.stop();
    },
    async refresh() {
      try {
        const listed = await Weir.api("/v1/subscriptions");
        const detailed = await Promise.all(
          listed.subscriptions.map((s) =>
            Weir.api("/v1/subscriptions/" + encodeURIComponent(s.name)).catch(() => s)
          )
        );
        this.subscriptions = detailed.map((s) => this.summarize(s));
        this.error = "";
      } catch (error) {
        this.error = error.message;
        throw error;
      }
    },
    // One row: the subscription with its partitions' status added up, and the
    // newest of their last errors.
    summarize(s) {
      const totals = { delivered: 0, failed: 0, dead_lettered: 0, in_flight: 0, last_delivered_ms: null };
      let lastError = null;
      for (const p of s.partitions || []) {
        for (const field of ["delivered", "failed", "dead_lettered", "in_flight"]) {
          totals[field] += p[field];
        }
        if (p.last_delivered_ms && (!totals.last_delivered_ms || p.last_delivered_ms > totals.last_delivered_ms)) {
          totals.last_delivered_ms = p.last_delivered_ms;
        }
        for (const e of p.last_errors || []) {
          if (!lastError || (e.time_ms || 0) >= (lastError.time_ms || 0)) lastError = e;
        }
      }
      return { ...s, totals, lastError: lastError ? this.errorText(lastError) : "" };
    },
    errorText(e) {
      return e.error || e.message || JSON.stringify(e);
    },
    statusText(s) {
      if (s.paused) return "paused";
      return s.lastError ? "failing" : "delivering";
    },
    async setPaused(s, paused) {
      try {
        await Weir.api(
          "/v1/subscriptions/" + encodeURIComponent(s.name) + (paused ? "/pause" : "/resume"),
          { method: "POST" }
        );
        await this.refresh();
      } catch (error) {
        this.error = error.message;
      }
    },
  }));
});
