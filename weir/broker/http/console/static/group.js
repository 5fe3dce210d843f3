// One consumer group: its state, members and their assignments, committed offsets
// and lag per partition (polled; the total lag charted while the page is open), and
// the operator's actions: reset offsets (dry run, then apply) and delete.
"use strict";

document.addEventListener("alpine:init", () => {
  Alpine.data("group", () => ({
    id: Weir.param("id", ""),
    info: {},
    members: [],
    lags: [],
    loaded: false,
    error: "",
    notice: "",
    resetError: "",
    deleteError: "",
    busy: false,
    reset: { strategy: "earliest", time: "", shift: "0", offset: "0", topic: "" },
    plan: null,
    chart: null,
    init() {
      document.title = this.id + " · Consumer group · Weir";
      this.chart = Weir.timeChart(this.$refs.chart, ["total lag"], {
        values: (u, ticks) => ticks.map((t) => Weir.fmtCount(t)),
      });
      this.stop = Weir.poll(() => this.refresh(), 2000);
    },
    destroy() {
      this.stop();
    },
    async base() {
      return Weir.clusterPath("/consumer-groups/" + encodeURIComponent(this.id));
    },
    async refresh() {
      if (!this.id) {
        this.error = "No group given: open a group from the consumer groups list.";
        return;
      }
      try {
        const base = await this.base();
        const [info, consumers, lags] = await Promise.all([
          Weir.api(base),
          Weir.api(base + "/consumers"),
          Weir.api(base + "/lags"),
        ]);
        this.info = info;
        this.members = consumers.data;
        this.lags = lags.data;
        this.loaded = true;
        this.error = "";
        this.chart.push(Date.now() / 1000, [this.totalLag()]);
      } catch (error) {
        this.error = error.message;
        throw error;
      }
    },
    totalLag() {
      return this.lags.reduce((sum, l) => sum + (l.lag || 0), 0);
    },
    coordinator() {
      const url = this.info.coordinator && this.info.coordinator.related;
      return url ? url.split("/").pop() : "–";
    },
    topics() {
      return [...new Set(this.lags.map((l) => l.topic_name))].sort();
    },
    assignmentText(member) {
      const byTopic = {};
      for (const a of member.assignments) (byTopic[a.topic_name] ||= []).push(a.partition_id);
      const text = Object.keys(byTopic)
        .sort()
        .map((t) => t + " [" + byTopic[t].sort((x, y) => x - y).join(", ") + "]")
        .join("; ");
      return text || "–";
    },
    stateClass(state) {
      if (state === "STABLE") return "good";
      if (state === "DEAD") return "bad";
      return /REBALANCE|ASSIGNING|RECONCILING/.test(state || "") ? "warn" : "";
    },
    resetBody(dryRun) {
      const body = { strategy: this.reset.strategy, dry_run: dryRun };
      if (this.reset.strategy === "timestamp") {
        const ms = new Date(this.reset.time).getTime();
        if (!this.reset.time || Number.isNaN(ms)) throw new Error("Choose a time to reset to.");
        body.timestamp_ms = ms;
      }
      if (this.reset.strategy === "shift_by") body.shift_by = parseInt(this.reset.shift, 10);
      if (this.reset.strategy === "offset") body.offset = parseInt(this.reset.offset, 10);
      if (this.reset.topic) body.topics = [{ topic_name: this.reset.topic }];
      return body;
    },
    async sendReset(dryRun) {
      this.busy = true;
      this.notice = "";
      this.resetError = "";
      try {
        const body = this.resetBody(dryRun);
        return await Weir.api((await this.base()) + "/reset-offsets", { method: "POST", body });
      } catch (error) {
        this.resetError = error.message;
        return null;
      } finally {
        this.busy = false;
      }
    },
    async dryRun() {
      this.plan = null;
      const answer = await this.sendReset(true);
      if (answer) this.plan = answer;
    },
    async apply() {
      const count = this.plan ? this.plan.offsets.length : 0;
      if (!confirm("Commit the new offsets of " + count + " partition(s) for group " + this.id + "?")) return;
      const answer = await this.sendReset(false);
      if (answer) {
        this.plan = null;
        this.notice = "Offsets reset on " + answer.offsets.length + " partition(s).";
        await this.refresh().catch(() => {});
      }
    },
    planTitle() {
      if (!this.plan) return "";
      const n = this.plan.offsets.length;
      return n === 0
        ? "Dry run: nothing to reset (the group has no offsets there)."
        : "Dry run: the new offsets of " + n + " partition(s). Nothing has changed yet.";
    },
    async remove() {
      if (!confirm("Delete consumer group " + this.id + " and its committed offsets?")) return;
      this.busy = true;
      this.deleteError = "";
      try {
        await Weir.api(await this.base(), { method: "DELETE" });
        this.stop();
        location.assign(Weir.link("groups", { deleted: this.id }));
      } catch (error) {
        this.deleteError = error.message;
      } finally {
        this.busy = false;
      }
    },
  }));
});
