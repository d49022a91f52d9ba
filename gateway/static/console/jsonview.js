/* Render JSON as text whose every node carries its issue path (the validator's `param`
   grammar: `.name` for simple names, `["..."]` otherwise, `[i]` for array items), so a lint
   issue or a strictify change can be highlighted where it applies. Never parses markup: all text
   goes through textContent. */
"use strict";
(function () {
  const SIMPLE = /^[A-Za-z_$][A-Za-z0-9_$-]*$/;
  const LAST = /(\.[A-Za-z_$][A-Za-z0-9_$-]*|\[(?:\d+|"(?:[^"\\]|\\.)*")\])$/;
  const SEGMENT = /\.?([A-Za-z_$][A-Za-z0-9_$-]*)|\[(\d+)\]|\[("(?:[^"\\]|\\.)*")\]/y;

  function joinName(path, name) {
    if (SIMPLE.test(name)) return path ? path + "." + name : name;
    return path + "[" + JSON.stringify(name) + "]";
  }

  function span(cls, text) {
    const s = document.createElement("span");
    if (cls) s.className = cls;
    if (text !== undefined) s.textContent = text;
    return s;
  }

  function scalar(value) {
    if (typeof value === "string") return span("s", JSON.stringify(value));
    if (typeof value === "number") return span("n", String(value));
    if (value === null) return span("b", "null");
    return span("b", String(value));
  }

  /** Render `value` (rooted at `rootPath`) into a <pre class="jv">; `pre.paths` maps path -> node. */
  function render(value, rootPath) {
    const pre = document.createElement("pre");
    pre.className = "jv";
    const paths = new Map();
    function node(v, path, indent) {
      const wrap = span("node");
      wrap.dataset.path = path;
      paths.set(path, wrap);
      if (Array.isArray(v)) {
        if (v.length === 0) { wrap.append("[]"); return wrap; }
        wrap.append("[\n");
        v.forEach((item, i) => {
          wrap.append(indent + "  ");
          wrap.append(node(item, path + "[" + i + "]", indent + "  "));
          wrap.append(i < v.length - 1 ? ",\n" : "\n");
        });
        wrap.append(indent + "]");
      } else if (v !== null && typeof v === "object") {
        const keys = Object.keys(v);
        if (keys.length === 0) { wrap.append("{}"); return wrap; }
        wrap.append("{\n");
        keys.forEach((k, i) => {
          const childPath = joinName(path, k);
          const member = span("member");
          member.append(span("k", JSON.stringify(k)), ": ", node(v[k], childPath, indent + "  "));
          // The member (key and value) is what a highlight on childPath marks.
          paths.set(childPath, member);
          member.dataset.path = childPath;
          wrap.append(indent + "  ", member, i < keys.length - 1 ? ",\n" : "\n");
        });
        wrap.append(indent + "}");
      } else {
        wrap.append(scalar(v));
      }
      return wrap;
    }
    pre.append(node(value, rootPath, ""));
    pre.paths = paths;
    return pre;
  }

  /** The node for `path`, or for its nearest rendered ancestor (null if none). */
  function find(pre, path) {
    let p = path;
    while (p) {
      const hit = pre.paths.get(p);
      if (hit) return hit;
      const m = LAST.exec(p);
      if (!m) break;
      p = p.slice(0, p.length - m[0].length);
    }
    return null;
  }

  function mark(pre, path, cls) {
    const hit = find(pre, path);
    if (hit) hit.classList.add(cls);
    return hit;
  }

  /** Resolve a path like `tools[0].function.parameters` inside `doc` (undefined if absent). */
  function resolve(doc, path) {
    let cur = doc;
    SEGMENT.lastIndex = 0;
    while (SEGMENT.lastIndex < path.length) {
      const m = SEGMENT.exec(path);
      if (!m) return undefined;
      const key = m[1] !== undefined ? m[1] : m[2] !== undefined ? Number(m[2]) : JSON.parse(m[3]);
      if (cur === null || typeof cur !== "object" || !(key in cur)) return undefined;
      cur = cur[key];
    }
    return cur;
  }

  window.JsonView = { render, find, mark, resolve, joinName };
})();
