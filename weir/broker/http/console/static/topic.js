// One topic: its partitions (leader, replicas, ISR, offsets), its configs with
// each override's default beside it (edit: PUT .../configs/{name}, reset:
// DELETE), a link to browse its messages, delete with a confirmation.
"use strict";

document.addEventListener("alpine:init", () => {
  Alpine.data("topic", () => ({
    name: Weir.param("name", ""),
    topic: null,
    partitions: [],
    configs: [],
    overridesOnly: false,
    editing: null,
    draft: "",
    error: "",
    notice: "",
    get recordsCount() {
      if (!this.partitions.length) return null;
      return this.partitions.reduce(
        (sum, p) => sum + Math.max(0, (p.high_watermark ?? 0) - (p.log_start_offset ?? 0)),
        0
      );
    },
    get underReplicated() {
      return this.partitions.filter((p) => p.isr.length < p.replica_ids.length).length;
    },
    init() {
      document.title = this.name + " · Topic · Weir";
      this.loadConfigs();
      this.stop = Weir.poll(() => this.load(), 5000);
    },
    destroy() {
      this.stop();
    },
    path(suffix = "") {
      return Weir.clusterPath("/topics/" + encodeURIComponent(this.name) + suffix);
    },
    async load() {
      try {
        this.topic = await Weir.api(await this.path());
        this.partitions = (await Weir.api(await this.path("/partitions"))).data;
        this.error = "";
      } catch (error) {
        this.error = error.message;
        throw error;
      }
    },
    async loadConfigs() {
      try {
        this.configs = (await Weir.api(await this.path("/configs"))).data;
      } catch (error) {
        this.error = error.message;
      }
    },
    shownConfigs() {
      return this.overridesOnly ? this.configs.filter((c) => !c.is_default) : this.configs;
    },
    // The value the config would have without this topic's override.
    defaultOf(config) {
      const fallback = (config.synonyms || []).find((s) => s.source !== "DYNAMIC_TOPIC_CONFIG");
      return fallback ? fallback.value : null;
    },
    edit(config) {
      this.editing = config.name;
      this.draft = config.value ?? "";
    },
    async save(name) {
      try {
        await Weir.api(await this.path("/configs/" + encodeURIComponent(name)), {
          method: "PUT",
          body: { value: this.draft },
        });
        this.notice = "Set " + name + " = " + this.draft;
        this.error = "";
        this.editing = null;
        await this.loadConfigs();
      } catch (error) {
        this.error = error.message;
      }
    },
    async reset(name) {
      try {
        await Weir.api(await this.path("/configs/" + encodeURIComponent(name)), { method: "DELETE" });
        this.notice = "Reset " + name + " to its default";
        this.error = "";
        await this.loadConfigs();
      } catch (error) {
        this.error = error.message;
      }
    },
    async remove() {
      if (!confirm("Delete topic " + this.name + " and all its records? This cannot be undone.")) return;
      try {
        await Weir.api(await this.path(), { method: "DELETE" });
        location.assign("/console/topics");
      } catch (error) {
        this.error = error.message;
      }
    },
  }));
});
