"""The HTML report's inline stylesheet and script.

Both are inlined so the report is one file that opens from disk or as a CI artifact with no
network. They hold no ``//`` at all (no line comments, no URLs): the tests reject any URL
reference in the page. The script only ever writes text through ``textContent`` and
attributes through ``setAttribute``/``dataset``, because node names and messages come from
user files.
"""

from __future__ import annotations

CSS = """
:root { --fg: #1d232b; --muted: #5b6672; --line: #d9dee4; --bg: #f6f7f9; --card: #fff;
  --err: #c62828; --warn: #b26a00; --info: #1565c0; --ok: #2e7d32; --cpu: #6b7280; }
* { box-sizing: border-box; }
body { margin: 0; font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif;
  color: var(--fg); background: var(--bg); }
code, pre, .mono, .nname, .nop, .chip { font-family: ui-monospace, "DejaVu Sans Mono", Menlo,
  Consolas, monospace; font-size: 12.5px; }
header.top { position: sticky; top: 0; z-index: 5; display: flex; gap: 16px; align-items: center;
  padding: 10px 20px; background: #17202b; color: #fff; }
header.top h1 { font-size: 17px; margin: 0; font-weight: 600; }
header.top .sub { color: #aab4bf; font-size: 12px; }
header.top .search { margin-left: auto; position: relative; }
#search { width: 340px; padding: 6px 10px; border-radius: 6px; border: 1px solid #45505c;
  background: #232e3a; color: #fff; }
#results { position: absolute; right: 0; top: 36px; width: 520px; max-height: 60vh;
  overflow: auto; background: var(--card); color: var(--fg); border: 1px solid var(--line);
  border-radius: 8px; box-shadow: 0 8px 24px rgba(0,0,0,.18); }
#results .rhead { padding: 6px 10px; color: var(--muted); border-bottom: 1px solid var(--line); }
#results button { display: block; width: 100%; text-align: left; border: 0; background: none;
  padding: 4px 10px; cursor: pointer; font: inherit; }
#results button:hover { background: #eef3f8; }
main { padding: 16px 20px 60px; margin-right: 380px; }
nav.programs a { margin-right: 12px; }
section.program { margin-bottom: 40px; }
h2 { font-size: 18px; margin: 8px 0 12px; word-break: break-all; }
h3 { font-size: 15px; margin: 22px 0 8px; }
.cards { display: grid; grid-template-columns: repeat(auto-fill, minmax(150px, 1fr)); gap: 10px; }
.card { background: var(--card); border: 1px solid var(--line); border-radius: 8px; padding: 10px; }
.card .n { font-size: 24px; font-weight: 650; }
.card .l { color: var(--muted); font-size: 12px; }
.card.bad .n { color: var(--err); }
.card.silent .n { color: #7b1fa2; }
.card.ok .n { color: var(--ok); }
.ratio { display: flex; height: 10px; border-radius: 5px; overflow: hidden; margin: 10px 0 4px;
  background: var(--cpu); }
.ratio .c { background: #2f80ed; }
.legend { color: var(--muted); font-size: 12px; }
.legend span { margin-right: 14px; }
.sw { display: inline-block; width: 10px; height: 10px; border-radius: 2px; margin-right: 4px;
  vertical-align: -1px; }
pre.code { background: #111821; color: #e6edf3; padding: 10px 12px; border-radius: 6px;
  overflow: auto; white-space: pre-wrap; word-break: break-all; margin: 6px 0; }
table.t { border-collapse: collapse; width: 100%; background: var(--card);
  border: 1px solid var(--line); }
table.t th, table.t td { text-align: left; padding: 5px 8px; border-bottom: 1px solid var(--line);
  vertical-align: top; }
table.t th { background: #eef1f4; font-weight: 600; font-size: 12px; }
table.t tr[data-goto-node] { cursor: pointer; }
table.t tr[data-goto-node]:hover { background: #f3f7fb; }
.pair { display: grid; grid-template-columns: minmax(0, 1fr) minmax(0, 2fr); gap: 16px; }
.kv { display: grid; grid-template-columns: max-content minmax(0, 1fr); gap: 4px 12px; }
.kv > span { min-width: 0; overflow-wrap: anywhere; }
.kv .k { color: var(--muted); }
.sev { display: inline-block; padding: 0 6px; border-radius: 4px; font-size: 11.5px;
  font-weight: 600; color: #fff; background: var(--info); }
.sev.error { background: var(--err); }
.sev.warning { background: var(--warn); }
.tag { display: inline-block; padding: 0 5px; border-radius: 4px; font-size: 11px;
  border: 1px solid var(--line); color: var(--muted); margin-left: 6px; background: #fff; }
.tag.refused { border-color: var(--err); color: var(--err); }
.tag.agrees { border-color: var(--ok); color: var(--ok); }
.tag.diverges { border-color: var(--err); color: #fff; background: var(--err); }
#minimap-wrap svg { width: 100%; height: 44px; display: block; background: #fff;
  border: 1px solid var(--line); border-radius: 6px; cursor: pointer; }
.controls { margin: 8px 0; display: flex; gap: 8px; align-items: center; flex-wrap: wrap; }
.controls button, .more { font: inherit; font-size: 12.5px; padding: 3px 10px;
  border: 1px solid var(--line); border-radius: 5px; background: #fff; cursor: pointer; }
.flow { display: flex; flex-direction: column; gap: 14px; position: relative; }
.flow::before { content: ""; position: absolute; left: 28px; top: 0; bottom: 0;
  border-left: 2px solid #9aa5b1; }
.item, .node, section.program { scroll-margin-top: 64px; }
.item { border-radius: 10px; position: relative; content-visibility: auto;
  contain-intrinsic-size: auto 64px; }
.island { background: hsl(var(--h) 70% 96%); border: 2px solid hsl(var(--h) 55% 55%); }
.cpu { background: repeating-linear-gradient(135deg, #eceef1 0 8px, #e4e7eb 8px 16px);
  border: 2px dashed #9aa5b1; }
.item > .head { padding: 7px 12px; cursor: pointer; display: flex; gap: 10px;
  align-items: baseline; flex-wrap: wrap; }
.item > .head::before { content: "\\25B8"; color: var(--muted); }
.item.open > .head::before { content: "\\25BE"; }
.item .ttl { font-weight: 650; }
.island .ttl { color: hsl(var(--h) 60% 28%); }
.cpu .ttl { color: #374151; }
.item .meta { color: var(--muted); font-size: 12.5px; }
.item.hit { box-shadow: inset 0 0 0 3px #f5b400; }
.item.flash { box-shadow: inset 0 0 0 3px #2f80ed; }
.only-findings .item.clean { display: none; }
.bound { padding: 0 12px 8px 30px; display: flex; flex-wrap: wrap; gap: 4px 14px; }
.bound .sidebox { display: inline-flex; flex-wrap: wrap; gap: 4px; align-items: baseline; }
.bound .side { color: var(--muted); font-size: 12px; }
.chip { background: #fff; border: 1px solid var(--line); border-radius: 5px; padding: 1px 6px;
  white-space: nowrap; }
.chip .dt { color: #7a5a00; }
.peer { color: #1f5fbf; cursor: pointer; text-decoration: underline dotted; }
.body { display: none; padding: 0 8px 8px 8px; }
.item.open > .body { display: block; }
.nwrap { background: rgba(255,255,255,.85); border-radius: 5px; margin: 2px 0; }
.node { display: flex; gap: 10px; padding: 2px 8px; cursor: pointer; align-items: baseline; }
.node:hover { background: #eef3f8; }
.node.sel { background: #dbe9fb; }
.node .nname { min-width: 150px; font-weight: 600; word-break: break-all; }
.node .nop { color: #374151; }
.node .nwhy { color: var(--cpu); font-size: 12px; }
.node.on-cpu .nname::before { content: "CPU "; color: #fff; background: var(--cpu);
  border-radius: 3px; font-size: 10px; padding: 0 3px; margin-right: 5px; }
.pin { margin: 2px 8px 6px 24px; padding: 6px 10px; border-left: 4px solid var(--info);
  background: #fff; border-radius: 4px; }
.pin.error { border-left-color: var(--err); }
.pin.warning { border-left-color: var(--warn); }
.pin .code { font-weight: 700; margin-right: 6px; }
.pin .outc { font-size: 11.5px; color: var(--muted); margin-right: 6px; }
.pin .loc { margin-top: 3px; color: var(--muted); font-size: 12.5px; }
.pin .loc code { color: var(--fg); background: #f1f3f5; padding: 0 4px; border-radius: 3px;
  margin-left: 6px; }
.pin .fix { margin-top: 3px; font-size: 12.5px; }
.pin .fix b { color: var(--ok); }
aside#details { position: fixed; right: 0; top: 60px; bottom: 0; width: 370px; overflow: auto;
  background: var(--card); border-left: 1px solid var(--line); padding: 14px 16px; }
aside#details h4 { margin: 0 0 8px; font-size: 15px; word-break: break-all; }
aside#details .empty { color: var(--muted); }
aside#details .sec { margin-top: 12px; font-weight: 600; font-size: 12px; color: var(--muted);
  text-transform: uppercase; letter-spacing: .04em; }
aside#details code, .pin code { white-space: pre-wrap; overflow-wrap: anywhere; }
aside#details .tens { font-size: 12.5px; margin: 3px 0; word-break: break-all; }
footer.status { position: fixed; left: 0; bottom: 0; right: 380px; padding: 4px 20px;
  font-size: 11.5px; color: var(--muted); background: rgba(246,247,249,.95);
  border-top: 1px solid var(--line); }
@media (max-width: 900px) { main { margin-right: 0; } aside#details { position: static;
  width: auto; } footer.status { right: 0; } }
"""

JS = r"""
(function () {
  "use strict";
  var t0 = performance.now();
  var DATA = JSON.parse(document.getElementById("coreml-lint-data").textContent);
  var PAGE = 400;
  var OPEN_ALL_BELOW = 400;
  var CPU_ROWS_NOW = 8;
  var CHIPS = 4;
  var selected = null;
  var hits = [];

  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) { e.className = cls; }
    if (text !== undefined && text !== null) { e.textContent = String(text); }
    return e;
  }
  function add(parent, tag, cls, text) {
    var e = el(tag, cls, text);
    parent.appendChild(e);
    return e;
  }
  function hue(pid) { return Math.round((pid * 137.508 + 200) % 360); }
  function plural(n, word) { return n + " " + word + (n === 1 ? "" : "s"); }

  function prepare(prog, p) {
    prog.p = p;
    prog.partById = {};
    prog.partitions.forEach(function (part) { prog.partById[part.id] = part; });
    prog.nodeItem = new Int32Array(prog.nodes.length).fill(-1);
    prog.partItem = {};
    prog.items.forEach(function (item, i) {
      var members = item.k === "p" ? prog.partById[item.id].nodes : item.nodes;
      if (item.k === "p") { prog.partItem[item.id] = i; }
      members.forEach(function (n) { prog.nodeItem[n] = i; });
    });
    prog.nodeFindings = {};
    prog.itemFindings = {};
    prog.findings.forEach(function (f, fi) {
      if (f.nodeIndex < 0) { return; }
      (prog.nodeFindings[f.nodeIndex] = prog.nodeFindings[f.nodeIndex] || []).push(fi);
      var it = prog.nodeItem[f.nodeIndex];
      (prog.itemFindings[it] = prog.itemFindings[it] || []).push(fi);
    });
    prog.itemEls = [];
    prog.byName = null;
  }

  function nameIndex(prog) {
    if (!prog.byName) {
      prog.byName = {};
      prog.nodes.forEach(function (nd, n) { prog.byName[nd[0]] = n; });
    }
    return prog.byName;
  }

  function wiring(prog) {
    if (!prog.producer) {
      prog.producer = {};
      prog.users = {};
      prog.nodes.forEach(function (nd, n) {
        nd[7].forEach(function (t) { prog.producer[t] = n; });
        nd[6].forEach(function (t) { (prog.users[t] = prog.users[t] || []).push(n); });
      });
    }
  }

  function tensorChip(parent, name, dtype, shape) {
    var c = add(parent, "span", "chip");
    c.appendChild(document.createTextNode(name + " "));
    add(c, "span", "dt", dtype + shape);
    return c;
  }

  function peerLink(parent, prog, peer) {
    if (peer[0] === "p") {
      var a = add(parent, "span", "peer", "partition " + peer[1]);
      a.dataset.gotoItem = prog.partItem[peer[1]];
      a.dataset.p = prog.p;
    } else if (peer[0] === "n") {
      var b = add(parent, "span", "peer", "CPU " + prog.nodes[peer[1]][0]);
      b.dataset.gotoNode = peer[1];
      b.dataset.p = prog.p;
    } else {
      add(parent, "span", "", peer[1]);
    }
  }

  function boundarySide(bound, prog, label, entries, arrow) {
    if (!entries.length) { return; }
    var box = add(bound, "span", "sidebox");
    box.dataset.side = label;
    add(box, "span", "side", label + " (" + entries.length + "):");
    entries.forEach(function (e, i) {
      var c = tensorChip(box, e[0], e[1], e[2]);
      if (i >= CHIPS) { c.classList.add("extra"); c.hidden = true; }
      if (e[3] && e[3].length) {
        c.appendChild(document.createTextNode(" " + arrow + " "));
        e[3].forEach(function (peer, k) {
          if (k) { c.appendChild(document.createTextNode(", ")); }
          peerLink(c, prog, peer);
        });
      }
    });
    if (entries.length > CHIPS) {
      var more = add(box, "button", "more", "+" + (entries.length - CHIPS) + " more");
      more.dataset.showExtra = "1";
    }
  }

  function findingBadges(head, prog, list) {
    if (!list) { return; }
    var seen = {};
    list.forEach(function (fi) {
      var f = prog.findings[fi];
      if (seen[f.code]) { return; }
      seen[f.code] = 1;
      var b = add(head, "span", "sev " + f.severity, f.code);
      b.title = f.outcome + ": " + f.message;
    });
  }

  function opSummary(prog, ops, k) {
    return ops.slice(0, k).map(function (o) {
      return prog.ops[o[0]].replace(/^aten\./, "") + (o[1] > 1 ? " \u00d7" + o[1] : "");
    }).join(", ") + (ops.length > k ? ", \u2026" : "");
  }

  function buildIsland(prog, item, i) {
    var part = prog.partById[item.id];
    var box = el("div", "item island");
    box.style.setProperty("--h", hue(part.id));
    var head = add(box, "div", "head");
    head.tabIndex = 0;
    add(head, "span", "ttl", "Core ML partition " + part.id);
    add(head, "span", "meta", plural(part.nodes.length, "node") + " \u00b7 " +
      opSummary(prog, part.ops, 4));
    findingBadges(head, prog, prog.itemFindings[i]);
    if (part.verify) {
      var v = add(head, "span", "tag " + part.verify.status.replace(/ /g, "-"),
        "eager: " + part.verify.status);
      v.title = part.verify.detail || "";
    }
    var bound = add(box, "div", "bound");
    boundarySide(bound, prog, "in", part.inputs, "\u2190");
    boundarySide(bound, prog, "out", part.outputs, "\u2192");
    boundarySide(bound, prog, "state", part.states.map(function (s) {
      return [s[0], s[1], s[2], []];
    }), "");
    if (part.constants.length) {
      var c = add(bound, "span", "side", plural(part.constants.length, "constant") + " owned");
      c.title = part.constants.slice(0, 40).map(function (t) {
        return t[0] + " " + t[1] + t[2];
      }).join("\n");
    }
    add(box, "div", "body");
    return box;
  }

  function buildCpu(prog, item) {
    var box = el("div", "item cpu");
    var head = add(box, "div", "head");
    head.tabIndex = 0;
    add(head, "span", "ttl", "CPU \u00b7 " + plural(item.nodes.length, "node"));
    var ops = {}, why = {};
    item.nodes.forEach(function (n) {
      ops[prog.ops[prog.nodes[n][1]]] = 1;
      why[prog.reasons[prog.nodes[n][5]]] = 1;
    });
    var opList = Object.keys(ops);
    var more = opList.length > 4 ? ", \u2026" : "";
    add(head, "span", "meta", opList.slice(0, 4).join(", ") + more + " \u2014 " +
      Object.keys(why).slice(0, 2).join("; "));
    add(box, "div", "body");
    return box;
  }

  function pin(prog, f) {
    var box = el("div", "pin " + f.severity);
    add(box, "span", "code", f.code);
    add(box, "span", "sev " + f.severity, f.severity);
    add(box, "span", "outc", " " + f.outcome);
    add(box, "span", "msg", f.message + (f.count > 1 ? " (\u00d7" + f.count + ")" : ""));
    if (f.loc) {
      var l = add(box, "div", "loc", f.loc[0] + ":" + f.loc[1]);
      if (f.loc[2]) { add(l, "code", "", f.loc[2]); }
    }
    if (f.fix) {
      var x = add(box, "div", "fix");
      add(x, "b", "", "fix: ");
      x.appendChild(document.createTextNode(f.fix));
    }
    if (f.partitioner) {
      var y = add(box, "div", "fix");
      add(y, "b", "", "or partitioner: ");
      add(y, "code", "", f.partitioner);
    }
    return box;
  }

  function row(prog, n) {
    var nd = prog.nodes[n];
    var wrap = el("div", "nwrap");
    var r = add(wrap, "div", "node " + (nd[3] ? "on-coreml" : "on-cpu"));
    r.tabIndex = 0;
    r.dataset.n = n;
    r.dataset.p = prog.p;
    add(r, "span", "nname", nd[0]);
    add(r, "span", "nop", prog.ops[nd[1]]);
    if (!nd[3]) { add(r, "span", "nwhy", prog.reasons[nd[5]]); }
    if (nd[8] & 4) { add(r, "span", "tag refused", "refused by lower"); }
    if (nd[8] & 2) { add(r, "span", "tag", "decomposed"); }
    r.title = prog.ops[nd[1]] + ": " + prog.reasons[nd[5]];
    (prog.nodeFindings[n] || []).forEach(function (fi) {
      wrap.appendChild(pin(prog, prog.findings[fi]));
    });
    return wrap;
  }

  function members(prog, i) {
    var item = prog.items[i];
    return item.k === "p" ? prog.partById[item.id].nodes : item.nodes;
  }

  function renderRows(prog, i, upto) {
    var box = prog.itemEls[i];
    var body = box.querySelector(".body");
    var list = members(prog, i);
    var done = Number(box.dataset.rows || 0);
    var end = Math.min(list.length, Math.max(done + PAGE, upto + 1));
    if (end <= done) { return; }
    var old = body.querySelector(":scope > .more");
    if (old) { old.remove(); }
    var frag = document.createDocumentFragment();
    for (var k = done; k < end; k++) { frag.appendChild(row(prog, list[k])); }
    body.appendChild(frag);
    box.dataset.rows = end;
    if (end < list.length) {
      var more = add(body, "button", "more", "show " + Math.min(PAGE, list.length - end) +
        " more of " + (list.length - end) + " nodes");
      more.dataset.moreRows = i;
      more.dataset.p = prog.p;
    }
  }

  function setOpen(prog, i, open) {
    var box = prog.itemEls[i];
    if (open && !box.dataset.rows) { renderRows(prog, i, 0); }
    box.classList.toggle("open", open);
  }

  function renderFlow(prog) {
    var flow = document.querySelector('.flow[data-program="' + prog.p + '"]');
    var frag = document.createDocumentFragment();
    var small = prog.nodes.length <= OPEN_ALL_BELOW;
    prog.items.forEach(function (item, i) {
      var box = item.k === "p" ? buildIsland(prog, item, i) : buildCpu(prog, item);
      box.dataset.item = i;
      box.dataset.p = prog.p;
      if (!prog.itemFindings[i]) { box.classList.add("clean"); }
      prog.itemEls.push(box);
      frag.appendChild(box);
    });
    flow.appendChild(frag);
    prog.items.forEach(function (item, i) {
      if (small || (item.k === "c" && item.nodes.length <= CPU_ROWS_NOW)) {
        setOpen(prog, i, true);
      }
    });
    flow.dataset.rendered = prog.items.length;
  }

  function detailsTensor(box, prog, name, arrow, peers) {
    var d = add(box, "div", "tens");
    var t = prog.tensors[name] === undefined ? ["?", "?"] : prog.types[prog.tensors[name]];
    tensorChip(d, name, t[0], t[1]);
    if (peers.length) { d.appendChild(document.createTextNode(" " + arrow + " ")); }
    peers.forEach(function (n, k) {
      if (k) { d.appendChild(document.createTextNode(", ")); }
      var a = add(d, "span", "peer", prog.nodes[n][0]);
      a.dataset.gotoNode = n;
      a.dataset.p = prog.p;
    });
  }

  function showDetails(prog, n) {
    var nd = prog.nodes[n];
    var panel = document.getElementById("details");
    panel.textContent = "";
    add(panel, "h4", "", nd[0]);
    var kv = add(panel, "div", "kv");
    function pair(k, v) { add(kv, "span", "k", k); return add(kv, "span", "v", v); }
    pair("edge op", prog.ops[nd[1]]).className = "mono";
    pair("graph op", prog.ops[nd[2]]).className = "mono";
    var where = pair("runs on", nd[3] ? "Core ML" : "CPU");
    if (nd[4] >= 0) {
      where.appendChild(document.createTextNode(", "));
      peerLink(where, prog, ["p", nd[4]]);
    }
    pair("why", prog.reasons[nd[5]]);
    var flags = [];
    if (nd[8] & 1) { flags.push("kept whole (not decomposed)"); }
    if (nd[8] & 2) { flags.push("decomposed by to_edge"); }
    if (nd[8] & 4) { flags.push("refused by coreml-lint lower"); }
    if (flags.length) { pair("notes", flags.join("; ")); }
    if (nd[9] >= 0) {
      var loc = prog.locs[nd[9]];
      var s = pair("source", loc[0] + ":" + loc[1]);
      if (loc[2]) { add(s, "code", "", " " + loc[2]); }
    }
    wiring(prog);
    add(panel, "div", "sec", "inputs");
    nd[6].forEach(function (t) {
      var p = prog.producer[t];
      detailsTensor(panel, prog, t, "\u2190", p === undefined ? [] : [p]);
    });
    add(panel, "div", "sec", "outputs");
    nd[7].forEach(function (t) { detailsTensor(panel, prog, t, "\u2192", prog.users[t] || []); });
    var fs = prog.nodeFindings[n] || [];
    if (fs.length) { add(panel, "div", "sec", "findings"); }
    fs.forEach(function (fi) {
      var f = prog.findings[fi];
      var box = panel.appendChild(pin(prog, f));
      add(box, "div", "fix", f.name + (f.lowerFixes ? " \u00b7 coreml-lint lower fixes it" : ""));
    });
  }

  function flash(box) {
    box.classList.add("flash");
    setTimeout(function () { box.classList.remove("flash"); }, 1600);
  }

  function gotoItem(prog, i) {
    var box = prog.itemEls[i];
    if (!box) { return; }
    box.scrollIntoView({ block: "start" });
    flash(box);
  }

  function reveal(prog, n) {
    var i = prog.nodeItem[n];
    if (i < 0) { return null; }
    var box = prog.itemEls[i];
    box.parentNode.classList.remove("only-findings");
    setOpen(prog, i, true);
    renderRows(prog, i, members(prog, i).indexOf(n));
    var r = box.querySelector('.node[data-n="' + n + '"]');
    select(prog, n, r);
    if (r) {
      r.scrollIntoView({ block: "center" });
      requestAnimationFrame(function () { r.scrollIntoView({ block: "center" }); });
    }
    return r;
  }

  function select(prog, n, r) {
    if (selected) { selected.classList.remove("sel"); }
    selected = r;
    if (r) { r.classList.add("sel"); }
    showDetails(prog, n);
  }

  function clearHits() {
    hits.forEach(function (b) { b.classList.remove("hit"); });
    hits = [];
  }

  function resultButton(list, prog, n) {
    var nd = prog.nodes[n];
    var where = nd[4] >= 0 ? "partition " + nd[4] : "CPU";
    var text = nd[0] + "  \u00b7  " + prog.ops[nd[1]] + "  \u00b7  " + where;
    var b = add(list, "button", "mono", text);
    b.dataset.gotoNode = n;
    b.dataset.p = prog.p;
  }

  function search(text) {
    var q = text.trim().toLowerCase();
    var list = document.getElementById("results");
    list.textContent = "";
    clearHits();
    if (q.length < 2) { list.hidden = true; return 0; }
    var total = 0, shown = 0, items = 0, head = add(list, "div", "rhead");
    DATA.programs.forEach(function (prog) {
      if (!prog.hay) {
        prog.hay = prog.nodes.map(function (nd) {
          return (nd[0] + "\n" + prog.ops[nd[1]] + "\n" + prog.ops[nd[2]]).toLowerCase();
        });
      }
      for (var n = 0; n < prog.hay.length; n++) {
        if (prog.hay[n].indexOf(q) < 0) { continue; }
        total++;
        var box = prog.itemEls[prog.nodeItem[n]];
        if (box && !box.classList.contains("hit")) {
          box.classList.add("hit");
          hits.push(box);
          items++;
        }
        if (shown < 100) { resultButton(list, prog, n); shown++; }
      }
    });
    head.textContent = plural(total, "node") + " match in " + plural(items, "block") +
      (total > shown ? " (first " + shown + " listed)" : "");
    list.hidden = false;
    return total;
  }

  function progOf(e) { return DATA.programs[Number(e.dataset.p || 0)]; }

  function onClick(ev) {
    var t = ev.target;
    var g = t.closest("[data-goto-node]");
    if (g) { reveal(progOf(g), Number(g.dataset.gotoNode)); return; }
    g = t.closest("[data-goto-item]");
    if (g) { gotoItem(progOf(g), Number(g.dataset.gotoItem)); return; }
    g = t.closest("[data-more-rows]");
    if (g) { var pm = progOf(g); renderRows(pm, Number(g.dataset.moreRows), 0); return; }
    g = t.closest("[data-show-extra]");
    if (g) {
      g.parentNode.querySelectorAll(".extra").forEach(function (c) { c.hidden = false; });
      g.remove();
      return;
    }
    g = t.closest(".node");
    if (g) { select(progOf(g), Number(g.dataset.n), g); return; }
    g = t.closest(".item > .head");
    if (g) {
      var box = g.parentNode, prog = progOf(box), i = Number(box.dataset.item);
      setOpen(prog, i, !box.classList.contains("open"));
      return;
    }
    g = t.closest("[data-mini]");
    if (g) { gotoItem(progOf(g), Number(g.dataset.mini)); return; }
    g = t.closest("[data-action]");
    if (g) { control(g); }
  }

  function control(button) {
    var prog = progOf(button), action = button.dataset.action;
    var flow = document.querySelector('.flow[data-program="' + prog.p + '"]');
    if (action === "only-findings") { flow.classList.toggle("only-findings"); return; }
    prog.items.forEach(function (item, i) {
      if (action === "collapse") { setOpen(prog, i, false); }
      if (action === "open-findings" && prog.itemFindings[i]) { setOpen(prog, i, true); }
      if (action === "open-all") { setOpen(prog, i, true); }
    });
  }

  function fromHash() {
    var h = decodeURIComponent(location.hash.replace(/^#/, ""));
    if (h.indexOf("node=") === 0) {
      var name = h.slice(5);
      DATA.programs.some(function (prog) {
        var n = nameIndex(prog)[name];
        if (n === undefined) { return false; }
        reveal(prog, n);
        return true;
      });
    } else if (h.indexOf("q=") === 0) {
      document.getElementById("search").value = h.slice(2);
      search(h.slice(2));
    } else if (h === "open=all") {
      DATA.programs.forEach(function (prog) {
        prog.items.forEach(function (it, i) { setOpen(prog, i, true); });
      });
    }
  }

  DATA.programs.forEach(prepare);
  DATA.programs.forEach(renderFlow);
  document.addEventListener("click", onClick);
  document.addEventListener("keydown", function (ev) {
    if ((ev.key === "Enter" || ev.key === " ") && ev.target.matches(".item > .head, .node")) {
      ev.preventDefault();
      ev.target.click();
    }
  });
  var timer = null;
  document.getElementById("search").addEventListener("input", function (ev) {
    clearTimeout(timer);
    timer = setTimeout(function () { search(ev.target.value); }, 120);
  });
  document.getElementById("search").addEventListener("keydown", function (ev) {
    if (ev.key !== "Enter") { return; }
    var first = document.querySelector("#results [data-goto-node]");
    if (first) { first.click(); }
  });
  fromHash();
  window.addEventListener("hashchange", fromHash);
  var ms = performance.now() - t0;
  document.documentElement.dataset.renderMs = ms.toFixed(1);
  document.documentElement.dataset.readyMs = performance.now().toFixed(1);
  document.getElementById("status").textContent = "rendered " +
    DATA.programs.reduce(function (a, p) { return a + p.items.length; }, 0) +
    " blocks in " + ms.toFixed(0) + " ms";
  window.coremlLintReport = { search: search, reveal: function (p, name) {
    var prog = DATA.programs[p];
    return reveal(prog, nameIndex(prog)[name]);
  } };
})();
"""
