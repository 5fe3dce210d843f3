// The consumer groups list: one page at a time, searched and sorted by the broker
// (GET /v3/clusters/<id>/consumer-groups?q=&sort=&order=&page=&page_size=).
"use strict";

document.addEventListener("alpine:init", () => {
  Alpine.data("groups", () => ({
    columns: [
      { field: "consumer_group_id", title: "Group" },
      { field: "state", title: "State" },
      { field: "type", title: "Type" },
      { field: "members_count", title: "Members", num: true },
      { field: "total_lag", title: "Total lag", num: true },
      { field: "coordinator_id", title: "Coordinator", num: true },
    ],
    rows: [],
    total: 0,
    silent: [],
    q: Weir.param("q", ""),
    sort: Weir.param("sort", "consumer_group_id"),
    order: Weir.param("order", "asc"),
    page: Number(Weir.param("page", "1")) || 1,
    pageSize: 50,
    loaded: false,
    error: "",
    deleted: Weir.param("deleted", ""),
    init() {
      this.stop = Weir.poll(() => this.refresh(), 5000);
    },
    destroy() {
      this.stop();
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
        const body = await Weir.api((await Weir.clusterPath("/consumer-groups")) + "?" + query);
        this.rows = body.data;
        this.total = body.metadata.total;
        this.silent = body.brokers_not_answering || [];
        this.loaded = true;
        this.error = "";
      } catch (error) {
        this.error = error.message;
        throw error;
      }
    },
    keepInUrl() {
      const params = { q: this.q, sort: this.sort, order: this.order, page: this.page };
      this.deleted = "";
      history.replaceState(null, "", Weir.link("groups", params));
    },
    search() {
      this.page = 1;
      this.reload();
    },
    sortBy(field) {
      if (this.sort === field) {
        this.order = this.order === "asc" ? "desc" : "asc";
      } else {
        this.sort = field;
        this.order = field === "total_lag" || field === "members_count" ? "desc" : "asc";
      }
      this.page = 1;
      this.reload();
    },
    go(page) {
      this.page = Math.min(Math.max(1, page), this.pages());
      this.reload();
    },
    reload() {
      this.keepInUrl();
      this.refresh().catch(() => {});
    },
    pages() {
      return Math.max(1, Math.ceil(this.total / this.pageSize));
    },
    totalText() {
      if (!this.loaded) return "";
      return Weir.fmtCount(this.total) + (this.total === 1 ? " group" : " groups");
    },
    arrow(field) {
      if (this.sort !== field) return "";
      return this.order === "asc" ? " ▲" : " ▼";
    },
    ariaSort(field) {
      if (this.sort !== field) return "none";
      return this.order === "asc" ? "ascending" : "descending";
    },
    stateClass(state) {
      return groupStateClass(state);
    },
  }));
});

// The colour of a group's state: stable is good, rebalancing is a warning, dead bad.
function groupStateClass(state) {
  if (state === "STABLE") return "good";
  if (state === "DEAD") return "bad";
  if (/REBALANCE|ASSIGNING|RECONCILING/.test(state || "")) return "warn";
  return "";
}
