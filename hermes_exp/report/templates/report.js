// The trajectory browser: builds the list from the embedded JSON, renders a conversation when it is
// opened, and filters by prompt text, run and state. All text goes through textContent (no HTML).
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("hx-data").textContent);
  var list = document.getElementById("traj-list");
  var q = document.getElementById("q");
  var runFilter = document.getElementById("run-filter");
  var stateFilter = document.getElementById("state-filter");
  var verdictFilter = document.getElementById("verdict-filter");  // absent when nothing was verified
  var shown = document.getElementById("shown");
  var TAGS = { think: "reasoning", tool_call: "tool call", tool_response: "tool response" };
  var STATES = { done: "kept", filtered: "filtered", error: "failed" };
  var VERDICTS = { passed: "passed", failed: "not passed", suspect: "verifier suspect", error: "verifier error" };
  var multiSample = data.entries.some(function (e) { return e.sample; });
  var items = [];

  function el(tag, cls, text) {
    var node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text !== undefined) node.textContent = text;
    return node;
  }

  function renderPart(part) {
    var kind = part[0], text = part[1];
    if (kind === "text") return el("pre", "part text", text);
    var box = el("div", "part " + kind + (text ? "" : " empty"));
    box.appendChild(el("div", "tag", text || kind !== "think" ? TAGS[kind] : "no reasoning"));
    if (text) box.appendChild(el("pre", "", text));
    return box;
  }

  // The system prompt holds every tool's JSON schema: folded, so a trajectory opens on the conversation.
  function folded(turn) {
    var d = el("details", "system");
    var size = turn.parts.reduce(function (n, p) { return n + p[1].length; }, 0);
    d.appendChild(el("summary", "muted", "system prompt (" + size.toLocaleString("en-US") + " characters)"));
    return d;
  }

  var PHASES = ["sandbox", "fixtures", "agent", "verifier", "close"];

  function timings(entry) {  // "sandbox 0.21 s · fixtures 0.01 s · agent 3.2 s · ..."; results of before have none
    var t = entry.timings;
    return PHASES.filter(function (p) { return t[p] !== undefined; }).map(function (p) {
      return p + " " + (t[p] < 10 ? t[p].toFixed(2) : t[p].toFixed(1)) + " s";
    }).join(" \u00b7 ");
  }

  function renderTurns(entry) {
    var wrap = el("div", "turns");
    if (entry.timings) wrap.appendChild(el("p", "timings muted", timings(entry)));
    entry.turns.forEach(function (turn) {
      var box = el("div", "turn turn-" + turn.from);
      box.setAttribute("data-turn", turn.from);
      box.appendChild(el("div", "role", turn.from));
      var into = turn.from === "system" ? box.appendChild(folded(turn)) : box;
      turn.parts.forEach(function (part) { into.appendChild(renderPart(part)); });
      wrap.appendChild(box);
    });
    return wrap;
  }

  function assistantTurns(entry) {
    var n = entry.turns.filter(function (t) { return t.from === "gpt"; }).length;
    return n + " assistant turn" + (n === 1 ? "" : "s");
  }

  function verdict(entry) {
    var text = VERDICTS[entry.verdict];
    if (entry.reward !== null && entry.verdict !== "error") text += " " + Number(entry.reward).toFixed(2);
    return el("span", "badge verdict verdict-" + entry.verdict, text);
  }

  function summary(entry) {
    var s = el("summary");
    s.appendChild(el("span", "badge", entry.run));
    s.appendChild(el("span", "badge", "#" + entry.index + (multiSample ? " sample " + entry.sample : "")));
    s.appendChild(el("span", "badge state-" + entry.state, STATES[entry.state] + (entry.why ? ": " + entry.why : "")));
    if (entry.verdict) s.appendChild(verdict(entry));
    s.appendChild(el("span", "badge turn-count", assistantTurns(entry)));
    s.appendChild(el("span", "prompt", entry.prompt.split("\n")[0]));
    return s;
  }

  function build() {
    var frag = document.createDocumentFragment();
    data.entries.forEach(function (entry, i) {
      var d = el("details", "traj state-" + entry.state);
      d.setAttribute("data-traj", String(i));
      d.setAttribute("data-state", entry.state);
      d.setAttribute("data-run", entry.run);
      d.setAttribute("data-verdict", entry.verdict || "none");
      d.appendChild(summary(entry));
      d.addEventListener("toggle", function () {
        if (d.open && !d.hasAttribute("data-rendered")) {
          d.appendChild(renderTurns(entry));
          d.setAttribute("data-rendered", "");
        }
      });
      items.push({ node: d, prompt: entry.prompt.toLowerCase() });
      frag.appendChild(d);
    });
    list.appendChild(frag);
  }

  function apply() {
    var term = q.value.trim().toLowerCase(), run = runFilter.value, state = stateFilter.value, n = 0;
    var verdictWanted = verdictFilter ? verdictFilter.value : "";
    items.forEach(function (item) {
      var d = item.node;
      var ok = (!term || item.prompt.indexOf(term) !== -1) &&
        (!run || d.getAttribute("data-run") === run) && (!state || d.getAttribute("data-state") === state) &&
        (!verdictWanted || d.getAttribute("data-verdict") === verdictWanted);
      d.hidden = !ok;
      if (ok) n += 1;
    });
    shown.textContent = String(n);
    var hash = term ? "#q=" + encodeURIComponent(q.value.trim()) : "";
    if (location.hash !== hash) {
      try { history.replaceState(null, "", location.pathname + location.search + hash); } catch (e) { /* opaque origin */ }
    }
  }

  build();
  var m = /^#q=(.*)$/.exec(location.hash);
  if (m) q.value = decodeURIComponent(m[1]);
  [q, runFilter, stateFilter, verdictFilter].forEach(function (c) { if (c) c.addEventListener("input", apply); });
  apply();
  var first = items.filter(function (item) { return !item.node.hidden; })[0];
  if (first) first.node.open = true;
})();
