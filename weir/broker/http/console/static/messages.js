// The messages view (/console/messages?topic=<name>): browse a topic from an
// offset, a time or the end, one partition or all; filter by key, header and a
// value substring (on the server, a bounded scan at a time); render keys, values
// and headers as JSON, text or hex; follow live; produce; download a range.
// Every call is the public records API (docs/http-records.md) as the user.
"use strict";

(() => {
  // Records kept on screen: reading more, or following, drops the oldest.
  const SHOWN_RECORDS_MAX = 2000;
  // What one filtered read scans at most, per partition (the API's default).
  const SCAN_RECORDS = 10000;
  // Parallel reads when browsing every partition.
  const READS_IN_FLIGHT = 8;
  // A download: at most this many records, read this many at a time.
  const DOWNLOAD_RECORDS_MAX = 100000;
  const DOWNLOAD_READ_RECORDS = 1000;
  const DOWNLOAD_TEXT_CHARS_MAX = 64 * 1024 * 1024;
  const HEX_BYTES_SHOWN = 4096;

  // -- bytes and their renderings ---------------------------------------------------

  function bytesOf(base64) {
    const binary = atob(base64);
    const bytes = new Uint8Array(binary.length);
    for (let i = 0; i < binary.length; i += 1) bytes[i] = binary.charCodeAt(i);
    return bytes;
  }

  function base64Of(bytes) {
    let binary = "";
    for (let i = 0; i < bytes.length; i += 1) binary += String.fromCharCode(bytes[i]);
    return btoa(binary);
  }

  function utf8(bytes) {
    try {
      return new TextDecoder("utf-8", { fatal: true }).decode(bytes);
    } catch (_) {
      return null;
    }
  }

  function isText(text) {
    // eslint-disable-next-line no-control-regex
    return !/[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f]/.test(text);
  }

  function hex(bytes) {
    const shown = bytes.subarray(0, HEX_BYTES_SHOWN);
    const rows = [];
    for (let i = 0; i < shown.length; i += 16) {
      const row = Array.from(shown.subarray(i, i + 16), (b) => b.toString(16).padStart(2, "0"));
      rows.push(row.join(" "));
    }
    if (bytes.length > shown.length) rows.push("… " + (bytes.length - shown.length) + " more bytes");
    return rows.join("\n");
  }

  function asJson(text) {
    if (text === null) return null;
    try {
      return JSON.stringify(JSON.parse(text), null, 2);
    } catch (_) {
      return null;
    }
  }

  // {kind, text} of a key or value read with format=binary ({"type": "BINARY",
  // "data": base64} or null) as `mode` (auto, json, text, hex) shows it. Auto:
  // JSON when it parses, else text when it is UTF-8 without control characters,
  // else hex. JSON that does not parse, and text that is not UTF-8, show as hex.
  function render(part, mode) {
    if (part === null || part === undefined) return { kind: "null", text: "null" };
    const bytes = bytesOf(part.data);
    if (mode === "hex") return { kind: "hex", text: hex(bytes) };
    const text = utf8(bytes);
    if (mode === "auto" || mode === "json") {
      const json = asJson(text);
      if (json !== null) return { kind: "json", text: json };
      if (mode === "json") return { kind: "hex", text: hex(bytes) };
    }
    if (text !== null && (mode === "text" || isText(text))) return { kind: "text", text };
    if (mode === "text") return { kind: "text", text: new TextDecoder().decode(bytes) };
    return { kind: "hex", text: hex(bytes) };
  }

  function headerText(base64) {
    if (base64 === null) return "null";
    const bytes = bytesOf(base64);
    const text = utf8(bytes);
    return text !== null && isText(text) ? text : "0x " + hex(bytes).replace(/\n/g, " ");
  }

  // "2026-11-27 10:00:00" (UTC unless it says otherwise), an ISO time, or ms.
  function parseTime(text) {
    const trimmed = String(text).trim();
    if (/^\d+$/.test(trimmed)) return Number(trimmed);
    let iso = trimmed.replace(" ", "T");
    if (!/(Z|[+-]\d\d:?\d\d)$/i.test(iso)) iso += "Z";
    const ms = Date.parse(iso);
    return Number.isNaN(ms) ? null : ms;
  }

  function parseOffset(text, what) {
    const trimmed = String(text).trim();
    if (!/^\d{1,18}$/.test(trimmed)) throw new Error(what + " must be an offset (0 or more)");
    return Number(trimmed);
  }

  function recordId(record) {
    return record.partition_id + ":" + record.offset;
  }

  // Runs `task` on every item, at most `width` at a time.
  async function eachLimited(items, width, task) {
    const queue = items.slice();
    async function worker() {
      while (queue.length) await task(queue.shift());
    }
    await Promise.all(Array.from({ length: Math.min(width, items.length) }, worker));
  }

  // -- server-sent events over fetch() -------------------------------------------------

  // Follows an event stream with fetch() rather than EventSource, which cannot send
  // the Authorization header a secured broker needs. Calls onEvent(name, data) per
  // event; resolves when the stream ends; `signal` stops it.
  async function followEvents(path, signal, onOpen, onEvent) {
    const headers = { Accept: "text/event-stream", "X-Weir-Console": "1" };
    const auth = Weir.authorization();
    if (auth) headers.Authorization = auth;
    const response = await fetch(path, { headers, signal, cache: "no-store" });
    if (!response.ok) {
      let message = "HTTP " + response.status;
      try {
        message = (await response.json()).message || message;
      } catch (_) {
        /* not JSON */
      }
      if (response.status === 401) location.assign("/console/login?next=" + encodeURIComponent(location.pathname + location.search));
      throw new Weir.ApiError(response.status, message);
    }
    onOpen(); // the stream has taken its start offsets
    const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buffer += value.replace(/\r\n/g, "\n");
      let end;
      while ((end = buffer.indexOf("\n\n")) >= 0) {
        const block = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        let name = "message";
        const data = [];
        for (const line of block.split("\n")) {
          if (line.startsWith("event:")) name = line.slice(6).trim();
          else if (line.startsWith("data:")) data.push(line.slice(5).replace(/^ /, ""));
        }
        if (data.length) onEvent(name, JSON.parse(data.join("\n")));
      }
    }
  }

  document.addEventListener("alpine:init", () => {
    Alpine.data("messages", () => ({
      topic: Weir.param("topic", ""),
      partitionIds: [],
      partition: Weir.param("partition", "all"),
      start: Weir.param("from", "end"),
      startOffset: Weir.param("offset", "0"),
      startTime: Weir.param("time", ""),
      pageSize: 50,
      filterKey: "",
      filterHeaderName: "",
      filterHeaderValue: "",
      filterValue: "",
      render: "auto",
      records: [],
      cursors: {},
      status: "",
      error: "",
      loading: false,
      following: false,
      followState: "paused",
      followAbort: null,
      produceForm: { partition: "", key: "", valueType: "JSON", value: "", headers: "" },
      produced: "",
      produceError: "",
      producing: false,
      downloadForm: { partition: "0", from: "0", to: "99", format: "jsonl" },
      downloadStatus: "",
      downloading: false,

      async init() {
        if (!this.topic) {
          this.error = "No topic: open this page from a topic (?topic=<name>).";
          return;
        }
        try {
          const info = await Weir.api(await this.topicPath(""));
          this.partitionIds = Array.from({ length: info.partitions_count }, (_, i) => i);
          await this.browse();
        } catch (error) {
          this.error = error.message;
        }
        window.addEventListener("beforeunload", () => this.stopFollowing());
      },

      async topicPath(suffix) {
        return Weir.clusterPath("/topics/" + encodeURIComponent(this.topic) + suffix);
      },

      topicLink() {
        return Weir.link("topic", { name: this.topic });
      },

      selectedPartitions() {
        return this.partition === "all" ? this.partitionIds : [Number(this.partition)];
      },

      filterParams() {
        const params = {};
        if (this.filterKey) params.key = this.filterKey;
        if (this.filterHeaderName) params.header_name = this.filterHeaderName;
        if (this.filterHeaderName && this.filterHeaderValue) params.header_value = this.filterHeaderValue;
        if (this.filterValue) params.value_contains = this.filterValue;
        return params;
      },

      filtering() {
        return Object.keys(this.filterParams()).length > 0;
      },

      clearFilters() {
        this.filterKey = this.filterHeaderName = this.filterHeaderValue = this.filterValue = "";
        this.browse();
      },

      shown(part) {
        return render(part, this.render);
      },

      headerText,
      recordId,

      get canLoadMore() {
        return Object.values(this.cursors).some((c) => !c.done);
      },

      perPartitionRecords() {
        const count = this.selectedPartitions().length || 1;
        return Math.max(10, Math.ceil(this.pageSize / count));
      },

      // Where each partition starts: query parameters of its first read.
      async startParams(partition) {
        if (this.start === "offset") return { offset: parseOffset(this.startOffset, "The start") };
        if (this.start === "timestamp") {
          const ms = parseTime(this.startTime);
          if (ms === null) throw new Error("The time must be like 2026-11-27 10:00:00, or ms since 1970");
          return { timestamp: ms };
        }
        if (this.start === "end") {
          // The newest records: a window before the end (the page size, or with a
          // filter the scan's size) read forward.
          const path = await this.topicPath("/partitions/" + partition + "/records");
          const end = await Weir.api(path + "?from=end&max_records=1");
          const window = this.filtering() ? SCAN_RECORDS : this.perPartitionRecords();
          return { offset: Math.max(end.log_start_offset, end.next_offset - window) };
        }
        return { from: "beginning" };
      },

      async browse() {
        this.error = "";
        this.stopFollowing();
        this.records = [];
        this.cursors = {};
        try {
          for (const p of this.selectedPartitions()) {
            this.cursors[p] = { params: await this.startParams(p), done: false, scanned: 0 };
          }
        } catch (error) {
          this.error = error.message;
          return;
        }
        await this.more();
      },

      async more() {
        if (this.loading) return;
        this.loading = true;
        this.error = "";
        const pending = Object.keys(this.cursors).filter((p) => !this.cursors[p].done);
        const found = [];
        let scanned = 0;
        try {
          await eachLimited(pending, READS_IN_FLIGHT, async (p) => {
            const cursor = this.cursors[p];
            const query = new URLSearchParams({
              ...cursor.params,
              ...this.filterParams(),
              max_records: String(this.perPartitionRecords()),
              format: "binary",
            });
            const path = await this.topicPath("/partitions/" + p + "/records");
            let page;
            try {
              page = await Weir.api(path + "?" + query);
            } catch (error) {
              if (error.status !== 422) throw error;
              cursor.done = true; // an offset past the end: nothing there
              return;
            }
            found.push(...page.records);
            scanned += page.scanned_records;
            cursor.scanned += page.scanned_records;
            cursor.params = { offset: page.next_offset };
            cursor.done = page.stopped === "end";
          });
        } catch (error) {
          this.error = error.message;
        }
        found.sort((a, b) => a.timestamp_ms - b.timestamp_ms || a.partition_id - b.partition_id || a.offset - b.offset);
        this.show(found);
        this.status = this.describe(found.length, scanned);
        this.loading = false;
      },

      // Adds records to the table (one already there, read again after it came
      // live, is not shown twice), keeping the newest SHOWN_RECORDS_MAX.
      show(found) {
        const shownIds = new Set(this.records.map(recordId));
        const fresh = found.filter((r) => !shownIds.has(recordId(r)));
        this.records = this.records.concat(fresh).slice(-SHOWN_RECORDS_MAX);
      },

      describe(foundCount, scanned) {
        const positions = Object.entries(this.cursors)
          .map(([p, c]) => "p" + p + (c.done ? " at the end" : " next " + (c.params.offset ?? "?")))
          .join(", ");
        const what = this.filtering()
          ? foundCount + " matching of " + Weir.fmtCount(scanned) + " records scanned"
          : foundCount + " records read";
        return what + "; " + positions + (this.canLoadMore ? "" : ". Nothing more now.");
      },

      toggleFollow() {
        if (this.following) this.stopFollowing();
        else this.follow();
      },

      stopFollowing() {
        if (this.followAbort) this.followAbort.abort();
        this.followAbort = null;
        this.following = false;
        this.followState = "paused";
      },

      async follow() {
        this.error = "";
        const abort = new AbortController();
        this.followAbort = abort;
        this.following = true;
        this.followState = "connecting";
        const query = new URLSearchParams({ from: "end", format: "binary", ...this.filterParams() });
        const suffix =
          this.partition === "all" ? "/records/stream" : "/partitions/" + this.partition + "/records/stream";
        try {
          const path = (await this.topicPath(suffix)) + "?" + query;
          const opened = () => {
            if (this.followAbort === abort) this.followState = "live";
          };
          await followEvents(path, abort.signal, opened, (name, data) => {
            if (name === "record") {
              data.live = true;
              this.show([data]);
            } else if (name === "error") {
              this.error = data.message;
            }
          });
        } catch (error) {
          if (error.name !== "AbortError") this.error = "Following stopped: " + error.message;
        }
        if (this.followAbort === abort) {
          this.followAbort = null;
          this.following = false;
          this.followState = "paused";
        }
      },

      // -- produce -------------------------------------------------------------------

      produceBody() {
        const form = this.produceForm;
        const body = {};
        if (form.partition !== "") body.partition_id = Number(form.partition);
        if (form.key !== "") body.key = { type: "STRING", data: form.key };
        if (form.valueType === "JSON") {
          let data;
          try {
            data = JSON.parse(form.value);
          } catch (error) {
            throw new Error("The value is not JSON: " + error.message);
          }
          body.value = { type: "JSON", data };
        } else if (form.valueType === "HEX") {
          const digits = form.value.replace(/\s+/g, "");
          if (!/^([0-9a-fA-F]{2})*$/.test(digits)) throw new Error("The value is not hex bytes");
          const bytes = new Uint8Array(digits.length / 2);
          for (let i = 0; i < bytes.length; i += 1) bytes[i] = parseInt(digits.substr(i * 2, 2), 16);
          body.value = { type: "BINARY", data: base64Of(bytes) };
        } else {
          body.value = { type: "STRING", data: form.value };
        }
        const headers = form.headers
          .split("\n")
          .filter((line) => line.trim() !== "")
          .map((line) => {
            const at = line.indexOf(":");
            if (at <= 0) throw new Error("A header is a line 'name: value'");
            const value = new TextEncoder().encode(line.slice(at + 1).trim());
            return { name: line.slice(0, at).trim(), value: base64Of(value) };
          });
        if (headers.length) body.headers = headers;
        return body;
      },

      async produce() {
        this.produced = this.produceError = "";
        this.producing = true;
        try {
          const body = this.produceBody();
          const report = await Weir.api(await this.topicPath("/records"), { method: "POST", body });
          this.produced = "Written to partition " + report.partition_id + " at offset " + report.offset + ".";
        } catch (error) {
          this.produceError = error.message;
        }
        this.producing = false;
      },

      // -- download ------------------------------------------------------------------

      async download() {
        this.downloadStatus = "";
        this.downloading = true;
        try {
          const form = this.downloadForm;
          const from = parseOffset(form.from, "From");
          const to = parseOffset(form.to, "To");
          if (to < from) throw new Error("To must not be before From");
          if (to - from + 1 > DOWNLOAD_RECORDS_MAX) {
            throw new Error("A download holds at most " + Weir.fmtCount(DOWNLOAD_RECORDS_MAX) + " records");
          }
          const lines = await this.readRange(Number(form.partition), from, to);
          const text = form.format === "json" ? "[" + lines.join(",\n") + "]\n" : lines.map((l) => l + "\n").join("");
          const type = form.format === "json" ? "application/json" : "application/x-ndjson";
          const name = this.topic + "-" + form.partition + "-" + from + "-" + to + "." + form.format;
          saveFile(name, type, text);
          this.downloadStatus = "Saved " + name + ": " + Weir.fmtCount(lines.length) + " records.";
        } catch (error) {
          this.downloadStatus = "Download failed: " + error.message;
        }
        this.downloading = false;
      },

      // The records of `partition` from `from` to `to` (included) as JSON texts,
      // read a bounded page at a time; stops early at the end of the partition.
      async readRange(partition, from, to) {
        const path = await this.topicPath("/partitions/" + partition + "/records");
        const lines = [];
        let chars = 0;
        let offset = from;
        while (offset <= to) {
          const wanted = Math.min(DOWNLOAD_READ_RECORDS, to - offset + 1);
          const page = await Weir.api(path + "?" + new URLSearchParams({ offset, max_records: wanted }));
          for (const record of page.records) {
            if (record.offset > to) break;
            const line = JSON.stringify(record);
            chars += line.length;
            if (chars > DOWNLOAD_TEXT_CHARS_MAX) throw new Error("the range is over 64 MiB of JSON: take a smaller one");
            lines.push(line);
          }
          this.downloadStatus = "Read " + Weir.fmtCount(lines.length) + " records…";
          if (page.stopped === "end" || page.next_offset <= offset) break;
          offset = page.next_offset;
        }
        return lines;
      },
    }));
  });

  function saveFile(name, type, text) {
    const url = URL.createObjectURL(new Blob([text], { type }));
    const a = document.createElement("a");
    a.href = url;
    a.download = name;
    document.body.append(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(url), 60000);
  }
})();
