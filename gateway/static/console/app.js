/* Syntic console: login, routing, overview, keys and requests. Talks only to /admin/*.
   The admin key lives in sessionStorage and is sent as a bearer header; it is never
   written into the page or a URL. All data is rendered with textContent. */
"use strict";
(function () {
  const STORE = "syntic.adminKey";
  const $ = (id) => document.getElementById(id);
  const PAGES = ["overview", "keys", "requests", "playground"];
  let keyNames = new Map();
  // Each page load takes a ticket; a response arriving after a newer load started is dropped,
  // so a slow unfiltered answer never overwrites a filtered one.
  const tickets = { overview: 0, keys: 0, requests: 0 };
  const ticket = (page) => ++tickets[page];
  const current = (page, t) => tickets[page] === t;

  class ApiError extends Error {
    constructor(status, body) {
      const err = (body && body.error) || {};
      super(err.message || "HTTP " + status);
      this.status = status;
      this.code = err.code || "";
      this.param = err.param || null;
    }
  }

  async function api(method, path, body) {
    const headers = { authorization: "Bearer " + (sessionStorage.getItem(STORE) || "") };
    if (body !== undefined) headers["content-type"] = "application/json";
    const res = await fetch(path, {
      method, headers, body: body === undefined ? undefined : JSON.stringify(body),
      cache: "no-store", credentials: "omit", referrerPolicy: "no-referrer",
    });
    let data = null;
    try { data = await res.json(); } catch (e) { data = null; }
    if (!res.ok) {
      if (res.status === 401 && sessionStorage.getItem(STORE)) logout("Your admin key was refused (revoked?). Sign in again.");
      throw new ApiError(res.status, data);
    }
    return data;
  }

  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === "class") e.className = v;
      else if (k.startsWith("data-")) e.dataset[k.slice(5).replace(/-(.)/g, (_, c) => c.toUpperCase())] = v;
      else e[k] = v;
    }
    for (const c of children) if (c !== null && c !== undefined) e.append(c instanceof Node ? c : String(c));
    return e;
  }

  const fmtInt = (n) => Number(n || 0).toLocaleString("en-US");
  const fmtPct = (r) => (100 * (r || 0)).toFixed(r && r < 0.1 ? 2 : 1) + "%";
  const fmtTime = (t) => new Date(t * 1000).toISOString().replace("T", " ").slice(0, 19);
  const keyLabel = (id) => (id === null || id === undefined ? "(no key)" : keyNames.has(id) ? keyNames.get(id) + " · " + id : id);

  function table(node, columns, rows, rowAttrs) {
    node.replaceChildren();
    node.append(el("thead", {}, el("tr", {}, ...columns.map((c) => el("th", { class: c.num ? "num" : "" }, c.title)))));
    const body = el("tbody");
    for (const r of rows) {
      const tr = el("tr", rowAttrs ? rowAttrs(r) : {});
      for (const c of columns) {
        const v = c.render(r);
        tr.append(el("td", { class: (c.num ? "num " : "") + (c.cls || "") }, v));
      }
      body.append(tr);
    }
    if (!rows.length) body.append(el("tr", {}, el("td", { colSpan: columns.length, class: "muted" }, "nothing yet")));
    node.append(body);
  }

  async function loadKeyNames() {
    const keys = (await api("GET", "/admin/keys")).data;
    keyNames = new Map(keys.map((k) => [k.id, k.name]));
    return keys;
  }

  // -- login / routing ----------------------------------------------------------------

  function logout(message) {
    sessionStorage.removeItem(STORE);
    $("nav").hidden = true; $("logout").hidden = true;
    for (const p of PAGES) $("page-" + p).hidden = true;
    $("login").hidden = false;
    $("login-error").textContent = message || "";
    $("pg-results").replaceChildren();
    $("key-secret").hidden = true; $("key-secret-value").textContent = "";
  }

  async function login(ev) {
    ev.preventDefault();
    const input = $("login-key");
    sessionStorage.setItem(STORE, input.value.trim());
    input.value = "";
    try {
      await api("GET", "/admin/keys");
    } catch (e) {
      sessionStorage.removeItem(STORE);
      $("login-error").textContent = e.status === 403
        ? "That is a customer key: the console needs an admin key (sk_admin_…)."
        : e.message;
      return;
    }
    $("login-error").textContent = "";
    if (!location.hash || location.hash === "#") location.hash = "#overview";
    route();
  }

  function route() {
    if (!sessionStorage.getItem(STORE)) { logout(); return; }
    const page = PAGES.includes(location.hash.slice(1)) ? location.hash.slice(1) : "overview";
    $("login").hidden = true; $("nav").hidden = false; $("logout").hidden = false;
    for (const p of PAGES) $("page-" + p).hidden = p !== page;
    if (page !== "keys") { $("key-secret").hidden = true; $("key-secret-value").textContent = ""; }
    for (const a of document.querySelectorAll("#nav a")) a.classList.toggle("active", a.dataset.page === page);
    const loaders = { overview: loadOverview, keys: loadKeys, requests: () => loadRequests(false), playground: () => {} };
    Promise.resolve(loaders[page]()).catch((e) => {
      const target = { overview: "ov-tiles", keys: "key-error", requests: "req-error" }[page];
      if (target) $(target).textContent = "Could not load: " + e.message;
    });
  }

  // -- overview -------------------------------------------------------------------------

  function timeGrid(report) {
    const step = report.bucket_seconds;
    const start = Math.floor(report.since / step) * step;
    const times = [];
    for (let t = start; t < report.until; t += step) times.push(t);
    return times;
  }

  function seriesOf(rows, times, groupField, value, limit) {
    const totals = new Map();
    for (const r of rows) totals.set(r[groupField], (totals.get(r[groupField]) || 0) + r.requests);
    const groups = [...totals.entries()].sort((a, b) => b[1] - a[1]).slice(0, limit).map((e) => e[0]);
    const index = new Map(times.map((t, i) => [t, i]));
    return groups.map((g) => {
      const values = times.map(() => 0);
      for (const r of rows) if (r[groupField] === g && index.has(r.t)) values[index.get(r.t)] = value(r);
      return { name: groupField === "key_id" ? keyLabel(g) : g === null ? "(no model)" : g, values };
    });
  }

  async function loadOverview() {
    const t0 = ticket("overview");
    await loadKeyNames();
    const since = $("ov-window").value;
    const report = await api("GET", "/admin/usage?since=" + encodeURIComponent(since));
    if (!current("overview", t0)) return;
    const t = report.totals;
    const tiles = [
      ["requests", fmtInt(t.requests)],
      ["422 rate", fmtPct(t.unprocessable_rate)],
      ["correction rate", fmtPct(t.correction_rate)],
      ["tokens on corrections", fmtInt(t.correction_tokens)],
      ["first-attempt tokens", fmtInt(t.first_attempt_tokens)],
      ["cached prompt tokens", fmtInt(t.cache_read_tokens)],
      ["5xx", fmtInt(t.errors_5xx)],
    ];
    $("ov-tiles").replaceChildren(...tiles.map(([l, v]) =>
      el("div", { class: "tile", "data-tile": l }, el("div", { class: "v" }, v), el("div", { class: "l" }, l))));
    const times = timeGrid(report);
    const byKey = $("ov-split").value === "key";
    const rows = byKey ? report.series.by_key : report.series.by_model;
    const field = byKey ? "key_id" : "model";
    const per = byKey ? "per key" : "per model";
    const charts = [
      ["requests", "Requests " + per, (r) => r.requests, null],
      ["422", "422 rate " + per, (r) => r.unprocessable_rate, fmtPct],
      ["correction-rate", "Correction rate " + per, (r) => r.correction_rate, fmtPct],
      ["correction-tokens", "Tokens spent on corrections " + per, (r) => r.correction_tokens, null],
    ];
    $("ov-charts").replaceChildren(...charts.map(([id, title, value, format]) =>
      window.Charts.lineChart({ id, title, times, series: seriesOf(rows, times, field, value, 8), format: format || undefined })));
    const cols = (first) => [
      first,
      { title: "requests", num: true, render: (r) => fmtInt(r.requests) },
      { title: "422", num: true, render: (r) => fmtInt(r.unprocessable_422) },
      { title: "422 rate", num: true, render: (r) => fmtPct(r.unprocessable_rate) },
      { title: "corrected", num: true, render: (r) => fmtInt(r.corrected_requests) },
      { title: "correction rate", num: true, render: (r) => fmtPct(r.correction_rate) },
      { title: "first-attempt tok", num: true, render: (r) => fmtInt(r.first_attempt_tokens) },
      { title: "correction tok", num: true, render: (r) => fmtInt(r.correction_tokens) },
    ];
    table($("ov-by-key"), cols({ title: "key", render: (r) => keyLabel(r.key_id) }), report.by_key);
    table($("ov-by-model"), cols({ title: "model", render: (r) => r.model ?? "(none)" }), report.by_model);
    table($("ov-by-code"), cols({ title: "error code", render: (r) => r.error_code ?? "(ok)" }), report.by_error_code);
    table($("ov-by-endpoint"), cols({ title: "endpoint", render: (r) => r.endpoint }), report.by_endpoint);
  }

  // -- keys -----------------------------------------------------------------------------

  async function loadKeys() {
    const t0 = ticket("keys");
    const keys = await loadKeyNames();
    if (!current("keys", t0)) return;
    const shown = $("keys-revoked").checked ? keys : keys.filter((k) => !k.revoked);
    const limit = (v) => (v === null ? "unlimited" : fmtInt(v));
    table($("keys-table"), [
      { title: "id", cls: "mono", render: (k) => k.id },
      { title: "name", render: (k) => k.name },
      { title: "kind", render: (k) => el("span", { class: "badge" + (k.kind === "admin" ? " bad" : "") }, k.kind) },
      { title: "prefix", cls: "mono", render: (k) => k.display_prefix + "…" },
      { title: "rpm", num: true, render: (k) => limit(k.rpm) },
      { title: "tpm", num: true, render: (k) => limit(k.tpm) },
      { title: "created", render: (k) => fmtTime(k.created_at) },
      { title: "status", render: (k) => (k.revoked ? "revoked " + fmtTime(k.revoked_at) : "active") },
      { title: "", cls: "actions", render: (k) => (k.revoked || k.admin ? "" : revokeButton(k)) },
    ], shown, (k) => ({ class: k.revoked ? "revoked" : "", "data-key-id": k.id }));
  }

  function revokeButton(k) {
    const b = el("button", { type: "button", class: "danger", textContent: "Revoke" });
    b.addEventListener("click", async () => {
      if (!b.classList.contains("confirm")) {
        b.classList.add("confirm"); b.textContent = "Confirm revoke";
        return;
      }
      b.disabled = true;
      try { await api("DELETE", "/admin/keys/" + encodeURIComponent(k.id)); }
      catch (e) { $("key-error").textContent = e.message; }
      await loadKeys();
    });
    return b;
  }

  async function createKey(ev) {
    ev.preventDefault();
    $("key-error").textContent = "";
    const num = (id) => ($(id).value ? Number($(id).value) : null);
    try {
      const res = await api("POST", "/admin/keys", {
        name: $("key-name").value, rpm: num("key-rpm"), tpm: num("key-tpm"), test: $("key-test").checked,
      });
      $("key-secret-id").textContent = res.key.id + " (" + res.key.name + ")";
      $("key-secret-value").textContent = res.secret;
      $("key-copied").textContent = "";
      $("key-secret").hidden = false;
      $("key-form").reset();
    } catch (e) {
      $("key-error").textContent = e.message;
    }
    await loadKeys();
  }

  async function copySecret() {
    const text = $("key-secret-value").textContent;
    try {
      await navigator.clipboard.writeText(text);
      $("key-copied").textContent = "copied";
    } catch (e) {
      const range = document.createRange();
      range.selectNodeContents($("key-secret-value"));
      const sel = window.getSelection(); sel.removeAllRanges(); sel.addRange(range);
      $("key-copied").textContent = "selected: press Ctrl+C";
    }
  }

  // -- requests -------------------------------------------------------------------------

  let reqRows = [];
  let reqNext = null;

  async function loadRequests(more) {
    const t0 = ticket("requests");
    const keys = await loadKeyNames();
    if (!current("requests", t0)) return;
    const select = $("req-key");
    const chosen = select.value;
    select.replaceChildren(el("option", { value: "" }, "any key"),
      ...keys.map((k) => el("option", { value: k.id }, k.name + " · " + k.id)));
    select.value = chosen;
    const q = new URLSearchParams({ limit: "100" });
    if (select.value) q.set("key_id", select.value);
    if ($("req-model").value.trim()) q.set("model", $("req-model").value.trim());
    if ($("req-code").value.trim()) q.set("error_code", $("req-code").value.trim());
    if (more && reqNext !== null) q.set("before", String(reqNext));
    const res = await api("GET", "/admin/requests?" + q.toString());
    if (!current("requests", t0)) return;
    reqRows = more ? reqRows.concat(res.data) : res.data;
    reqNext = res.next_before;
    $("req-more").hidden = reqNext === null;
    $("req-error").textContent = "";
    const status = (r) => el("span", { class: "badge " + (r.status >= 400 ? "bad" : "ok") }, String(r.status));
    table($("req-table"), [
      { title: "started (UTC)", render: (r) => fmtTime(r.started_at) },
      { title: "request", cls: "mono", render: (r) => r.request_id },
      { title: "key", render: (r) => keyLabel(r.key_id) },
      { title: "model", render: (r) => r.model ?? "" },
      { title: "endpoint", render: (r) => r.endpoint },
      { title: "status", render: status },
      { title: "code", render: (r) => r.error_code ?? "" },
      { title: "retries", num: true, render: (r) => r.schema_retries },
      { title: "first tok", num: true, render: (r) => fmtInt(r.prompt_tokens + r.completion_tokens) },
      { title: "corr tok", num: true, render: (r) => fmtInt(r.correction_prompt_tokens + r.correction_completion_tokens) },
      { title: "cached tok", num: true, render: (r) => fmtInt(r.cache_read_tokens) },
      { title: "ms", num: true, render: (r) => Math.round(r.latency_ms) },
      { title: "", render: (r) => (r.streamed ? "stream" : "") + (r.estimated ? " est." : "") },
    ], reqRows, (r) => ({ "data-request-id": r.request_id }));
  }

  // -- wiring ---------------------------------------------------------------------------

  document.addEventListener("DOMContentLoaded", () => {
    $("login-form").addEventListener("submit", login);
    $("logout").addEventListener("click", () => { logout(); location.hash = ""; });
    window.addEventListener("hashchange", route);
    $("ov-refresh").addEventListener("click", route);
    $("ov-window").addEventListener("change", route);
    $("ov-split").addEventListener("change", route);
    $("key-form").addEventListener("submit", createKey);
    $("key-copy").addEventListener("click", copySecret);
    $("key-secret-done").addEventListener("click", () => { $("key-secret").hidden = true; $("key-secret-value").textContent = ""; });
    $("keys-revoked").addEventListener("change", loadKeys);
    $("req-form").addEventListener("submit", (ev) => { ev.preventDefault(); loadRequests(false).catch((e) => { $("req-error").textContent = e.message; }); });
    $("req-more").addEventListener("click", () => loadRequests(true));
    window.Playground.init({ api, el, $ });
    route();
  });
})();
