// The overview page: the cluster and its brokers.
"use strict";

document.addEventListener("alpine:init", () => {
  Alpine.data("overview", () => ({
    clusterId: "",
    brokers: [],
    error: "",
    init() {
      this.stop = Weir.poll(() => this.refresh(), 5000);
    },
    destroy() {
      this.stop();
    },
    async refresh() {
      try {
        this.clusterId = await Weir.clusterId();
        const body = await Weir.api(await Weir.clusterPath("/brokers"));
        this.brokers = body.data;
        this.error = "";
      } catch (error) {
        this.error = error.message;
        throw error;
      }
    },
  }));
});
