// The transactions page: the cluster's transactional ids (every broker's
// ListTransactions), one described by its coordinator with the open transactions
// on its partitions, hanging transactions, and abort (an abort marker at the
// partition's leader, which needs CLUSTER_ACTION on the cluster).
"use strict";

document.addEventListener("alpine:init", () => {
  const STATES = ["Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort", "Dead", "PrepareEpochFence"];
  // A transaction's partitions asked for their producers: a bounded number.
  const PARTITIONS_SHOWN_MAX = 50;
  const HANGING_TIMEOUT_MS_DEFAULT = 900000;

  Alpine.data("transactions", () => ({
    loaded: false,
    canAbort: false,
    states: STATES,
    state: Weir.param("state", ""),
    pattern: "",
    list: [],
    silent: [],
    error: "",
    notice: "",
    selected: null,
    detailError: "",
    openOnPartitions: [],
    hangingTopic: "",
    hangingTimeoutMs: String(HANGING_TIMEOUT_MS_DEFAULT),
    hanging: [],
    hangingError: "",
    hangingSearched: false,

    async init() {
      try {
        const body = await Weir.api(await Weir.clusterPath("/authorized-operations"));
        this.canAbort = body.cluster.includes("CLUSTER_ACTION");
      } catch (error) {
        this.canAbort = false;
      }
      this.loaded = true;
      this.stop = Weir.poll(() => this.load(), 5000);
      const chosen = Weir.param("transactional_id");
      if (chosen) this.select(chosen);
    },

    destroy() {
      this.stop();
    },

    stateClass(state) {
      if (state === "Ongoing") return "warn";
      if (state === "CompleteCommit") return "good";
      if (state === "CompleteAbort" || state === "PrepareAbort" || state === "Dead") return "bad";
      return "";
    },

    brokerOf(coordinator) {
      const url = coordinator && coordinator.related;
      return url ? "broker " + url.split("/").pop() : "–";
    },

    async load() {
      const query = new URLSearchParams();
      if (this.state) query.append("state", this.state);
      if (this.pattern.trim()) query.append("transactional_id_pattern", this.pattern.trim());
      const suffix = "/transactions" + (query.toString() ? "?" + query : "");
      try {
        const body = await Weir.api(await Weir.clusterPath(suffix));
        this.list = body.data;
        this.silent = body.brokers_not_answering || [];
        this.error = "";
      } catch (error) {
        this.error = Weir.errorText(error);
        throw error;
      }
    },

    async select(transactionalId) {
      this.detailError = "";
      this.openOnPartitions = [];
      try {
        const path = "/transactions/" + encodeURIComponent(transactionalId);
        this.selected = await Weir.api(await Weir.clusterPath(path));
      } catch (error) {
        this.selected = { transactional_id: transactionalId };
        this.detailError = Weir.errorText(error);
        return;
      }
      await this.loadOpen();
    },

    // The open transactions of the selected producer on the transaction's partitions.
    async loadOpen() {
      const selected = this.selected;
      const found = [];
      for (const p of (selected.partitions || []).slice(0, PARTITIONS_SHOWN_MAX)) {
        const path = "/topics/" + encodeURIComponent(p.topic_name) + "/partitions/" + p.partition_id + "/producers";
        try {
          const body = await Weir.api(await Weir.clusterPath(path));
          found.push(...body.data.filter(
            (producer) => producer.current_transaction_start_offset !== null &&
              producer.producer_id === selected.producer_id
          ));
        } catch (error) {
          this.detailError = Weir.errorText(error);
        }
      }
      this.openOnPartitions = found;
    },

    async findHanging() {
      this.hangingError = "";
      const query = new URLSearchParams({ max_transaction_timeout_ms: this.hangingTimeoutMs || "0" });
      if (this.hangingTopic.trim()) query.append("topic_name", this.hangingTopic.trim());
      try {
        const body = await Weir.api(await Weir.clusterPath("/hanging-transactions?" + query));
        this.hanging = body.data;
      } catch (error) {
        this.hanging = [];
        this.hangingError = Weir.errorText(error);
      }
      this.hangingSearched = true;
    },

    async abort(p, fromHanging = false) {
      const where = p.topic_name + "-" + p.partition_id;
      const question = "Abort producer " + p.producer_id + "'s open transaction on " + where +
        " (from offset " + p.current_transaction_start_offset + ")? Its records there are discarded.";
      if (!confirm(question)) return;
      const path = "/topics/" + encodeURIComponent(p.topic_name) + "/partitions/" + p.partition_id + "/abort-transaction";
      try {
        await Weir.api(await Weir.clusterPath(path), {
          method: "POST",
          body: { start_offset: p.current_transaction_start_offset },
        });
        this.notice = "Aborted producer " + p.producer_id + "'s transaction on " + where + ".";
      } catch (error) {
        const message = Weir.errorText(error);
        if (fromHanging) this.hangingError = message;
        else this.detailError = message;
        return;
      }
      if (fromHanging) await this.findHanging();
      else if (this.selected) await this.loadOpen();
    },
  }));
});
