// What every console page shares: the API client (credentials, the console
// header, errors), the cluster id, the navigation bar, formatting, polling and
// time charts. Pages register their Alpine.js components in their own script,
// on the `alpine:init` event, and use `Weir.*`.
"use strict";

(() => {
  const AUTH_KEY = "weir.console.authorization";
  const USER_KEY = "weir.console.user";

  class ApiError extends Error {
    constructor(status, message, body) {
      super(message);
      this.status = status;
      this.body = body;
    }
  }

  function authorization() {
    return sessionStorage.getItem(AUTH_KEY);
  }

  function loginPage() {
    const next = location.pathname + location.search;
    return "/console/login?next=" + encodeURIComponent(next);
  }

  function errorMessage(status, body) {
    if (body && typeof body === "object") {
      return body.message || body.error || body.detail || JSON.stringify(body);
    }
    return body ? String(body) : "HTTP " + status;
  }

  // One call of the HTTP API as the logged-in user: JSON in and out. Throws an
  // ApiError with the status and the API's own message; status 0 when the broker
  // did not answer. A 401 sends the browser to the login page.
  async function api(path, options = {}) {
    const headers = { "X-Weir-Console": "1", Accept: "application/json" };
    const auth = authorization();
    if (auth) headers.Authorization = auth;
    let body = options.body;
    if (body !== undefined && typeof body !== "string") {
      body = JSON.stringify(body);
      headers["Content-Type"] = "application/json";
    }
    Object.assign(headers, options.headers || {});
    let response;
    try {
      response = await fetch(path, {
        method: options.method || "GET",
        headers,
        body,
        signal: options.signal,
        cache: "no-store",
      });
    } catch (error) {
      if (error.name === "AbortError") throw error;
      Weir.brokerUnreachable(true);
      throw new ApiError(0, "the broker did not answer (" + error.message + ")");
    }
    Weir.brokerUnreachable(false);
    const text = await response.text();
    let parsed = text;
    if ((response.headers.get("content-type") || "").includes("json") && text) {
      try {
        parsed = JSON.parse(text);
      } catch (_) {
        parsed = text;
      }
    }
    if (response.status === 401 && !options.noLoginRedirect) {
      location.assign(loginPage());
      throw new ApiError(401, "authentication required", parsed);
    }
    if (!response.ok) {
      throw new ApiError(response.status, errorMessage(response.status, parsed), parsed);
    }
    return parsed;
  }

  let clusterIdPromise = null;
  function clusterId() {
    if (!clusterIdPromise) {
      clusterIdPromise = api("/v3/clusters").then((body) => body.data[0].cluster_id);
      clusterIdPromise.catch(() => {
        clusterIdPromise = null;
      });
    }
    return clusterIdPromise;
  }

  // The path of a resource of this cluster: clusterPath("/topics") is
  // "/v3/clusters/<id>/topics".
  async function clusterPath(suffix) {
    return "/v3/clusters/" + encodeURIComponent(await clusterId()) + suffix;
  }

  const PAGES = [
    ["overview", "Overview"],
    ["topics", "Topics"],
    ["groups", "Consumer groups"],
    ["queues", "Queues"],
    ["transactions", "Transactions"],
    ["security", "Security"],
  ];

  function currentPage() {
    return location.pathname.replace(/^\/console\/?/, "").split("/")[0] || "overview";
  }

  function renderNav() {
    const nav = document.getElementById("weir-nav");
    if (!nav) return;
    const page = currentPage();
    const section = document.body.dataset.section || page;
    const links = PAGES.map(([name, title]) => {
      const a = document.createElement("a");
      a.href = "/console/" + name;
      a.textContent = title;
      a.dataset.page = name;
      if (name === section) a.setAttribute("aria-current", "page");
      return a;
    });
    const brand = document.createElement("a");
    brand.href = "/console/overview";
    brand.className = "brand";
    brand.textContent = "Weir";
    const menu = document.createElement("div");
    menu.className = "links";
    menu.append(...links);
    const who = document.createElement("div");
    who.className = "who";
    const user = sessionStorage.getItem(USER_KEY);
    if (user) {
      const name = document.createElement("span");
      name.id = "weir-user";
      name.textContent = user;
      const out = document.createElement("a");
      out.href = "#";
      out.id = "weir-logout";
      out.textContent = "Log out";
      out.addEventListener("click", (event) => {
        event.preventDefault();
        logout();
      });
      who.append(name, out);
    }
    nav.append(brand, menu, who);
    const banner = document.createElement("div");
    banner.id = "weir-unreachable";
    banner.className = "banner error";
    banner.hidden = true;
    banner.textContent =
      "This broker is not answering. The console retries; any other broker of the cluster serves it too.";
    nav.after(banner);
  }

  function brokerUnreachable(unreachable) {
    const banner = document.getElementById("weir-unreachable");
    if (banner) banner.hidden = !unreachable;
  }

  function login(user, authorizationValue) {
    sessionStorage.setItem(AUTH_KEY, authorizationValue);
    sessionStorage.setItem(USER_KEY, user);
    clusterIdPromise = null;
  }

  function logout() {
    sessionStorage.removeItem(AUTH_KEY);
    sessionStorage.removeItem(USER_KEY);
    location.assign("/console/login");
  }

  // -- formatting ----------------------------------------------------------------

  function fmtBytes(n) {
    if (n === null || n === undefined || Number.isNaN(n)) return "–";
    const units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let value = Number(n);
    let unit = 0;
    while (Math.abs(value) >= 1024 && unit < units.length - 1) {
      value /= 1024;
      unit += 1;
    }
    return (unit === 0 ? String(value) : value.toFixed(value < 10 ? 1 : 0)) + " " + units[unit];
  }

  function fmtCount(n) {
    if (n === null || n === undefined || Number.isNaN(n)) return "–";
    return Number(n).toLocaleString("en-US");
  }

  function fmtRate(perSecond) {
    if (perSecond === null || perSecond === undefined || Number.isNaN(perSecond)) return "–";
    if (perSecond >= 100) return Math.round(perSecond).toLocaleString("en-US") + "/s";
    return perSecond.toFixed(1) + "/s";
  }

  function fmtDurationMs(ms) {
    if (ms === null || ms === undefined || Number.isNaN(ms)) return "–";
    const s = ms / 1000;
    if (s < 1) return Math.round(ms) + " ms";
    if (s < 120) return s.toFixed(s < 10 ? 1 : 0) + " s";
    if (s < 7200) return Math.round(s / 60) + " min";
    if (s < 172800) return Math.round(s / 3600) + " h";
    return Math.round(s / 86400) + " d";
  }

  function fmtTime(ms) {
    if (ms === null || ms === undefined || ms < 0) return "–";
    return new Date(Number(ms)).toISOString().replace("T", " ").replace("Z", " UTC");
  }

  // -- page plumbing -------------------------------------------------------------

  function param(name, fallback = null) {
    const value = new URLSearchParams(location.search).get(name);
    return value === null ? fallback : value;
  }

  function link(page, params = {}) {
    const query = new URLSearchParams(
      Object.entries(params).filter(([, v]) => v !== null && v !== undefined && v !== "")
    ).toString();
    return "/console/" + page + (query ? "?" + query : "");
  }

  // Runs `task` now and every `intervalMs` while the page is visible; returns a
  // function that stops it. A failing run does not stop the polling.
  function poll(task, intervalMs) {
    let stopped = false;
    let timer = null;
    async function run() {
      if (stopped) return;
      if (!document.hidden) {
        try {
          await task();
        } catch (error) {
          if (error.name !== "AbortError") console.debug("poll:", error.message);
        }
      }
      if (!stopped) timer = setTimeout(run, intervalMs);
    }
    run();
    return () => {
      stopped = true;
      if (timer) clearTimeout(timer);
    };
  }

  // A uPlot time chart in `element` with one line per name in `series`; push()
  // adds a point (seconds since the epoch, one value per series) and keeps the
  // last `points` of them.
  function timeChart(element, series, options = {}) {
    const points = options.points || 120;
    const data = [[], ...series.map(() => [])];
    const palette = ["#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c", "#0891b2"];
    const width = () => Math.max(240, element.clientWidth || 600);
    const plot = new uPlot(
      {
        width: width(),
        height: options.height || 200,
        series: [
          {},
          ...series.map((label, i) => ({ label, stroke: palette[i % palette.length], width: 2 })),
        ],
        axes: [{}, { size: 70, values: options.values }],
        scales: { x: { time: true } },
      },
      data,
      element
    );
    const resize = () => plot.setSize({ width: width(), height: options.height || 200 });
    window.addEventListener("resize", resize);
    return {
      plot,
      push(timeS, values) {
        data[0].push(timeS);
        values.forEach((v, i) => data[i + 1].push(v));
        if (data[0].length > points) data.forEach((column) => column.shift());
        plot.setData(data);
      },
      set(columns) {
        columns.forEach((column, i) => {
          data[i] = column.slice(-points);
        });
        plot.setData(data);
      },
    };
  }

  // What a page shows for a failed call: a 403 as a clear "not authorized" (the
  // logged-in user's ACLs do not allow it), anything else as the API's message.
  function errorText(error) {
    if (error && error.status === 403) {
      return "Not authorized: your user's ACLs do not allow this (" + error.message + ").";
    }
    return error && error.message ? error.message : String(error);
  }

  window.Weir = {
    ApiError,
    api,
    clusterId,
    clusterPath,
    login,
    logout,
    authorization,
    brokerUnreachable,
    fmtBytes,
    fmtCount,
    fmtRate,
    fmtDurationMs,
    fmtTime,
    param,
    link,
    poll,
    timeChart,
    errorText,
  };

  document.addEventListener("DOMContentLoaded", renderNav);
})();
