// One queue (share group): per partition its records by state, the delivery-count
// histogram, the members, the dead letters with their reasons; redrive and purge.
"use strict";

document.addEventListener("alpine:init", () => {
  const HEADER_PREFIX = "__dlq.errors.";
  const DEAD_LETTER_WINDOW = 50;

  function decodeHeader(value) {
    if (value === null || value === undefined) return "";
    try {
      return new TextDecoder().decode(Uint8Array.from(atob(value), (c) => c.charCodeAt(0)));
    } catch (_) {
      return value;
    }
  }

  // A read record's key or value ({type, data}): JSON as JSON text, text as it is,
  // binary as its base64.
  function shown(part) {
    if (part === null || part === undefined) return "";
    if (typeof part !== "object" || !("data" in part)) return JSON.stringify(part);
    if (part.data === null) return "";
    return part.type === "JSON" ? JSON.stringify(part.data) : String(part.data);
  }

  Alpine.data("queue", () => ({
    groupId: Weir.param("id", ""),
    group: null,
    totals: {},
    histogram: [],
    deadLetters: [],
    deadLetterWindow: DEAD_LETTER_WINDOW,
    error: "",
    notice: "",
    busy: false,
    init() {
      document.title = this.groupId + " · Queues · Weir";
      this.stop = Weir.poll(() => this.refresh(), 5000);
    },
    destroy() {
      this.stop();
    },
    groupPath(suffix = "") {
      return Weir.clusterPath("/share-groups/" + encodeURIComponent(this.groupId) + suffix);
    },
    async refresh() {
      try {
        this.group = await Weir.api(await this.groupPath());
        this.summarize();
        this.deadLetters = await this.readDeadLetters();
        this.error = "";
      } catch (error) {
        this.error = error.message;
        throw error;
      }
    },
    summarize() {
      const totals = { available: 0, acquired: 0, delayed: 0, dead_lettered: 0 };
      let elsewhere = 0;
      let notFinishedElsewhere = 0;
      const counts = {};
      for (const p of this.group.partitions) {
        // Live states where this broker leads; the stored state elsewhere.
        const source = p.records || p.stored_records;
        if (!source) continue;
        if (p.records) {
          for (const field of Object.keys(totals)) totals[field] += p.records[field];
        } else {
          elsewhere += 1;
          notFinishedElsewhere += p.stored_records.not_finished;
          totals.delayed += p.stored_records.delayed;
        }
        for (const [count, records] of Object.entries(source.delivery_counts || {})) {
          counts[count] = (counts[count] || 0) + records;
        }
      }
      this.totals = { ...totals, elsewhere, not_finished_elsewhere: notFinishedElsewhere };
      const most = Math.max(1, ...Object.values(counts));
      this.histogram = Object.entries(counts)
        .map(([count, records]) => ({
          count: Number(count),
          records,
          percent: Math.max(1, Math.round((100 * records) / most)),
        }))
        .sort((a, b) => a.count - b.count);
    },
    // The group's dead letters among the last DEAD_LETTER_WINDOW records of each
    // partition of its dead-letter topic (bounded reads: never the whole topic).
    async readDeadLetters() {
      const topic = this.group.dead_letter_topic;
      if (!topic) return [];
      const topicPath = await Weir.clusterPath("/topics/" + encodeURIComponent(topic));
      const partitions = (await Weir.api(topicPath + "/partitions")).data;
      const letters = [];
      for (const partition of partitions) {
        const base = topicPath + "/partitions/" + partition.partition_id + "/records";
        const end = partition.high_watermark;
        if (end === null) continue;
        const first = Math.max(partition.log_start_offset || 0, end - DEAD_LETTER_WINDOW);
        if (first >= end) continue;
        const read = await Weir.api(
          base + "?offset=" + first + "&max_records=" + DEAD_LETTER_WINDOW + "&format=auto"
        );
        for (const record of read.records) {
          const letter = this.deadLetter(partition.partition_id, record);
          if (letter) letters.push(letter);
        }
      }
      return letters.reverse();
    },
    deadLetter(partitionId, record) {
      const headers = {};
      for (const h of record.headers) {
        if (h.name.startsWith(HEADER_PREFIX)) {
          headers[h.name.slice(HEADER_PREFIX.length)] = decodeHeader(h.value);
        }
      }
      if (headers.group !== this.groupId) return null;
      return {
        id: partitionId + ":" + record.offset,
        source: headers.topic + "/" + headers.partition + "@" + headers.offset,
        deliveries: headers["delivery.count"],
        reason: headers.message,
        time: record.timestamp,
        key: shown(record.key),
        value: shown(record.value),
      };
    },
    async redrive() {
      this.busy = true;
      try {
        const result = await Weir.api(await this.groupPath("/redrive"), { method: "POST" });
        this.notice =
          "Redrove " + result.redriven + " dead letters from " + result.dead_letter_topic +
          " (" + result.records_left + " records left past the redrive's position).";
        this.error = "";
        await this.refresh();
      } catch (error) {
        this.error = error.message;
      } finally {
        this.busy = false;
      }
    },
    async purge() {
      const question =
        "Purge " + this.groupId + "? Every record produced so far will be skipped " +
        "(never delivered to this group). The group must have no members.";
      if (!window.confirm(question)) return;
      this.busy = true;
      try {
        const result = await Weir.api(await this.groupPath("/purge"), { method: "POST" });
        this.notice = "Purged " + result.partitions.length + " partitions.";
        this.error = "";
        await this.refresh();
      } catch (error) {
        this.error = error.message;
      } finally {
        this.busy = false;
      }
    },
  }));
});
