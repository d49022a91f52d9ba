/* Schema playground: POST /admin/schemas/check (the same check as /v1/schemas/check), then
   show every issue with its `param` highlighted in the pasted schema, the limits counted,
   and the strictify projection beside the original (or the refusals). No model call. */
"use strict";
(function () {
  const CHANGE_PATH = /^((?:[A-Za-z0-9_$.-]|\[(?:\d+|"(?:[^"\\]|\\.)*")\])+): /;
  const EXAMPLE_TOOL = {
    type: "function",
    function: {
      name: "create_refund",
      strict: true,
      parameters: {
        type: "object",
        properties: {
          order_id: { type: "string" },
          amount_pence: { type: "integer", minimum: 1 },
          reason: { type: "string", enum: ["damaged", "late", "other"] },
          note: { type: "object", properties: { text: { type: "string" } } },
        },
        required: ["order_id", "amount_pence"],
      },
    },
  };
  const EXAMPLE_RF = {
    type: "json_schema",
    json_schema: {
      name: "ticket", strict: true,
      schema: { type: "object", properties: { title: { type: "string" }, tags: { type: "array", items: { type: "string" } } } },
    },
  };
  let ctx = null;

  /** Turn what was pasted into a /schemas/check request body. */
  function requestBody(value) {
    if (Array.isArray(value)) return { tools: value };
    if (value === null || typeof value !== "object") throw new Error("Paste a JSON object or array.");
    if (value.tools || value.response_format || value.output_config) {
      const body = {};
      for (const k of ["tools", "response_format", "output_config"]) if (value[k] !== undefined) body[k] = value[k];
      return body;
    }
    if (value.type === "function" || value.function || value.input_schema) return { tools: [value] };
    if (value.type === "json_schema" && value.json_schema) return { response_format: value };
    if (value.json_schema) return { response_format: { type: "json_schema", ...value } };
    return { tools: [{ type: "function", function: { name: "playground", strict: true, parameters: value } }] };
  }

  function issueList(issues, pre, cls) {
    const { el } = ctx;
    const ul = el("ul", { class: "issues" });
    for (const i of issues) {
      const li = el("li", { "data-param": i.param }, el("code", {}, i.param), " ", el("span", { class: "badge bad" }, i.code), " ", i.message);
      li.addEventListener("click", () => {
        for (const f of pre.querySelectorAll(".focus")) f.classList.remove("focus");
        const hit = window.JsonView.find(pre, i.param);
        if (hit) { hit.classList.add("focus"); hit.scrollIntoView({ block: "center" }); }
      });
      ul.append(li);
      window.JsonView.mark(pre, i.param, cls);
    }
    return ul;
  }

  function limits(counts) {
    const { el } = ctx;
    const t = el("table", { class: "grid limits" });
    t.append(el("tr", {}, el("th", {}, "limit"), el("th", { class: "num" }, "counted"), el("th", { class: "num" }, "max"), el("th", {}, "")));
    for (const [name, c] of Object.entries(counts || {})) {
      const bar = el("i");
      const frac = c.limit ? Math.min(1, c.value / c.limit) : 0;
      bar.style.width = (100 * frac).toFixed(1) + "%";
      if (frac > 0.8) bar.classList.add("hot");
      t.append(el("tr", { "data-limit": name }, el("td", {}, name), el("td", { class: "num" }, c.value.toLocaleString("en-US")),
        el("td", { class: "num" }, c.limit.toLocaleString("en-US")), el("td", {}, el("span", { class: "meter" }, bar))));
    }
    return t;
  }

  function entryCard(entry, body) {
    const { el } = ctx;
    const original = window.JsonView.resolve(body, entry.param);
    const card = el("div", { class: "pg-entry", "data-param": entry.param });
    const verdict = entry.ok ? el("span", { class: "badge ok" }, "strict-ready")
      : el("span", { class: "badge bad" }, entry.issues.length + " issue" + (entry.issues.length === 1 ? "" : "s"));
    card.append(el("h2", {}, (entry.name || "(unnamed)") + " ", el("code", {}, entry.param), " ", verdict));
    const origPre = window.JsonView.render(original, entry.param);
    origPre.dataset.pane = "original";
    if (entry.issues.length) card.append(issueList(entry.issues, origPre, "hl"));
    const right = el("div", { class: "pane", "data-pane": "projection" });
    const s = entry.strictify;
    if (s === null) {
      right.append(el("h3", {}, "No projection needed"), el("p", { class: "muted" }, "The schema is already in the strict subset."));
    } else if (s.ok) {
      const projPre = window.JsonView.render(s.schema, entry.param);
      projPre.dataset.pane = "projection";
      for (const change of s.changes) {
        const m = CHANGE_PATH.exec(change);
        if (m) window.JsonView.mark(projPre, m[1], "chg");
      }
      right.append(el("h3", {}, "Strict projection (strictify)"), projPre);
      if (s.changes.length) right.append(el("ul", { class: "issues changes" }, ...s.changes.map((c) => el("li", {}, c))));
    } else {
      right.append(el("h3", {}, "No strict projection: refused"));
      right.append(issueList(s.refusals, origPre, "hl"));
    }
    const left = el("div", { class: "pane" }, el("h3", {}, "Original"), origPre);
    card.append(el("div", { class: "pg-panes" }, left, right));
    card.append(el("h3", {}, "Limits counted"), limits(entry.counts));
    return card;
  }

  async function check() {
    const { $, api } = ctx;
    $("pg-error").textContent = "";
    $("pg-verdict").textContent = "";
    $("pg-results").replaceChildren();
    let body;
    try {
      body = requestBody(JSON.parse($("pg-input").value));
    } catch (e) {
      $("pg-error").textContent = "Not usable JSON: " + e.message;
      return;
    }
    try {
      const res = await api("POST", "/admin/schemas/check", body);
      $("pg-verdict").textContent = res.ok ? "every schema is strict-ready" : res.issues.length + " issue(s) found";
      $("pg-results").replaceChildren(...res.schemas.map((e) => entryCard(e, body)));
    } catch (e) {
      $("pg-error").textContent = e.message + (e.param ? " (" + e.param + ")" : "");
    }
  }

  function init(context) {
    ctx = context;
    const { $ } = ctx;
    $("pg-check").addEventListener("click", check);
    $("pg-example-tool").addEventListener("click", () => { $("pg-input").value = JSON.stringify(EXAMPLE_TOOL, null, 2); });
    $("pg-example-rf").addEventListener("click", () => { $("pg-input").value = JSON.stringify(EXAMPLE_RF, null, 2); });
  }

  window.Playground = { init, requestBody };
})();
