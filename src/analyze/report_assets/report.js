/* report.js — draws the `mstrace analyze` HTML report from the analysis JSON
 * embedded in the same page (<script type="application/json" id="mst-data">,
 * exactly what `--json` writes). Hand-written inline SVG, no library, no
 * network: every number shown is read from that JSON, so the page and
 * `--json` agree by construction (docs/analyze.md, "The HTML report").
 *
 * Every number printed in the page carries data-path (the JSON path it was
 * read from, as a JSON array) and, when scaled for display (a share shown
 * in %), data-scale; the browser test compares them with the JSON. */
(function () {
  "use strict";

  var STAGES = ["schedule", "model", "ipc", "output", "waiting"];
  /* The parts of a step's wall time (they sum to it); output runs beside them. */
  var PARTS = ["schedule", "model", "ipc", "waiting"];
  var STAGE_LABEL = { schedule: "schedule", model: "model (forward)", ipc: "IPC / sync",
                      output: "output (API server, concurrent)", waiting: "waiting (host bubble)", queue: "queued",
                      capacity: "capacity (KV cache / max_num_seqs)" };
  var SVGNS = "http://www.w3.org/2000/svg";
  var D = null;

  /* ------------------------------------------------------------ helpers */

  function el(tag, attrs, kids) {
    var e = document.createElement(tag);
    setAttrs(e, attrs);
    addKids(e, kids);
    return e;
  }
  function sv(tag, attrs, kids) {
    var e = document.createElementNS(SVGNS, tag);
    setAttrs(e, attrs);
    addKids(e, kids);
    return e;
  }
  function setAttrs(e, attrs) {
    if (!attrs) return;
    Object.keys(attrs).forEach(function (k) {
      var v = attrs[k];
      if (v === null || v === undefined) return;
      if (k === "text") e.textContent = String(v);
      else if (k === "cls") e.setAttribute("class", v);
      else e.setAttribute(k, String(v));
    });
  }
  function addKids(e, kids) {
    if (kids === null || kids === undefined) return;
    if (!Array.isArray(kids)) kids = [kids];
    kids.forEach(function (k) {
      if (k === null || k === undefined || k === false) return;
      e.appendChild(typeof k === "string" ? document.createTextNode(k) : k);
    });
  }
  function get(obj, path) {
    for (var i = 0; i < path.length; i++) {
      if (obj === null || obj === undefined) return undefined;
      obj = obj[path[i]];
    }
    return obj;
  }
  function isNum(x) { return typeof x === "number" && isFinite(x); }
  function arr(x) { return Array.isArray(x) ? x : []; }

  /* Decimals so that a value keeps about four significant digits. */
  function decimals(x) {
    var a = Math.abs(x);
    if (a >= 1000) return 0;
    if (a >= 100) return 1;
    if (a >= 10) return 2;
    return 3;
  }
  function fmt(x, unit) {
    if (!isNum(x)) return "\u2014";
    if (unit === "int") return String(Math.round(x));
    if (unit === "%") return (x * 100).toFixed(1) + " %";
    if (unit === "p") return x < 0.0001 ? x.toExponential(1) : x.toFixed(4);
    if (unit === "pct") return (x > 0 ? "+" : "") + x.toFixed(1) + " %";
    return x.toFixed(decimals(x)) + (unit ? " " + unit : "");
  }
  /* A number read from D at `path`, printed with its JSON path attached. */
  function num(path, unit, cls) {
    var v = get(D, path);
    var attrs = { cls: cls || null, "data-path": JSON.stringify(path) };
    if (unit === "%") attrs["data-scale"] = "100";
    if (unit === "p" && isNum(v) && v < 0.0001) attrs["data-exp"] = "1";
    return el("span", attrs, fmt(v, unit));
  }
  function fmtMs(x) { return fmt(x, "ms"); }
  function fmtTime(ns) {
    if (!isNum(ns)) return "\u2014";
    var d = new Date(ns / 1e6);
    return d.toISOString().replace("T", " ").replace("Z", " UTC");
  }
  function stageColor(s) {
    return STAGES.indexOf(s) >= 0 || s === "queue" ? "var(--" + s + ")" : "var(--other)";
  }
  function swatch(s) { return el("span", { cls: "swatch", style: "background:" + stageColor(s) }); }
  function legend(keys) {
    return el("div", { cls: "legend" }, keys.map(function (k) {
      return el("span", null, [swatch(k), STAGE_LABEL[k] || k]);
    }));
  }
  function card(id, title, caption, kids) {
    return el("section", { cls: "card", id: id }, [el("h2", { text: title }),
      caption ? el("div", { cls: "caption", text: caption }) : null].concat(kids));
  }
  function empty(text) { return el("div", { cls: "empty", text: text }); }

  /* One tooltip for the page: any element with data-tip shows it; charts
   * that track the mouse call showTip directly. */
  var tip = null;
  function showTip(text, evt) {
    tip.textContent = text;
    tip.style.display = "block";
    var x = evt.clientX + 14, y = evt.clientY + 14;
    var w = tip.offsetWidth, h = tip.offsetHeight;
    if (x + w > window.innerWidth - 8) x = evt.clientX - w - 14;
    if (y + h > window.innerHeight - 8) y = evt.clientY - h - 14;
    tip.style.left = Math.max(4, x) + "px";
    tip.style.top = Math.max(4, y) + "px";
  }
  function hideTip() { tip.style.display = "none"; }
  function installTips() {
    tip = el("div", { id: "tip" });
    document.body.appendChild(tip);
    document.addEventListener("mousemove", function (evt) {
      var t = evt.target;
      while (t && t.getAttribute && !t.getAttribute("data-tip")) t = t.parentNode;
      if (t && t.getAttribute && t.getAttribute("data-tip")) showTip(t.getAttribute("data-tip"), evt);
      else if (!evt.target.closest || !evt.target.closest("[data-track]")) hideTip();
    });
  }

  /* ------------------------------------------------------------ scales */

  function niceStep(span, n) {
    var raw = span / Math.max(1, n), p = Math.pow(10, Math.floor(Math.log10(raw)));
    var m = raw / p;
    return (m <= 1 ? 1 : m <= 2 ? 2 : m <= 5 ? 5 : 10) * p;
  }
  function ticks(lo, hi, n) {
    if (!(hi > lo)) return [lo];
    var st = niceStep(hi - lo, n), out = [];
    for (var v = Math.ceil(lo / st) * st; v <= hi + st * 1e-9; v += st) out.push(+v.toPrecision(12));
    return out;
  }
  function niceMax(x) {
    if (!(x > 0)) return 1;
    var st = niceStep(x, 5);
    return Math.ceil(x / st) * st;
  }
  function lin(d0, d1, r0, r1) {
    var k = d1 === d0 ? 0 : (r1 - r0) / (d1 - d0);
    return function (v) { return r0 + (v - d0) * k; };
  }
  function tickLabel(v) {
    var a = Math.abs(v);
    if (a >= 1e6) return (v / 1e6).toPrecision(3) + "M";
    if (a >= 1e4) return (v / 1e3).toPrecision(3) + "k";
    return String(+v.toPrecision(4));
  }

  /* A plot frame: axes, grid, labels. Returns {svg, x, y, W, H, L, T}. */
  function frame(opts) {
    var W = opts.width || 1040, H = opts.height || 260, L = 58, R = 16, T = 10, B = 38;
    var g = sv("svg", { viewBox: "0 0 " + W + " " + H, role: "img", "aria-label": opts.label || "" });
    var x = lin(opts.x0, opts.x1, L, W - R), y = lin(opts.y0, opts.y1, H - B, T);
    var grid = sv("g", { cls: "grid" }), axis = sv("g", { cls: "axis" });
    ticks(opts.y0, opts.y1, 5).forEach(function (v) {
      grid.appendChild(sv("line", { x1: L, x2: W - R, y1: y(v), y2: y(v) }));
      axis.appendChild(sv("text", { x: L - 6, y: y(v) + 4, "text-anchor": "end", text: tickLabel(v) }));
    });
    var xt = opts.xticks || ticks(opts.x0, opts.x1, 8).map(function (v) { return [v, tickLabel(v)]; });
    xt.forEach(function (t) {
      axis.appendChild(sv("line", { x1: x(t[0]), x2: x(t[0]), y1: H - B, y2: H - B + 4 }));
      axis.appendChild(sv("text", { x: x(t[0]), y: H - B + 16, "text-anchor": "middle", text: t[1] }));
    });
    axis.appendChild(sv("line", { x1: L, x2: W - R, y1: H - B, y2: H - B }));
    axis.appendChild(sv("line", { x1: L, x2: L, y1: T, y2: H - B }));
    if (opts.xlabel) axis.appendChild(sv("text", { x: (L + W - R) / 2, y: H - 4, "text-anchor": "middle",
                                                   text: opts.xlabel }));
    if (opts.ylabel) axis.appendChild(sv("text", { x: 12, y: (T + H - B) / 2, "text-anchor": "middle",
                                                   transform: "rotate(-90 12 " + (T + H - B) / 2 + ")",
                                                   text: opts.ylabel }));
    g.appendChild(grid);
    g.appendChild(axis);
    return { svg: g, x: x, y: y, W: W, H: H, L: L, R: R, T: T, B: B };
  }

  /* Mouse x in a frame's data coordinates (the SVG is scaled by CSS). */
  function trackX(f, evt) {
    var r = f.svg.getBoundingClientRect();
    return (evt.clientX - r.left) * f.W / r.width;
  }
  function guideLine(f) {
    var g = sv("line", { cls: "guide", y1: f.T, y2: f.H - f.B, x1: 0, x2: 0, visibility: "hidden" });
    f.svg.appendChild(g);
    return g;
  }
  /* Nearest index of sorted `xs` to v. */
  function nearest(xs, v) {
    var lo = 0, hi = xs.length - 1;
    if (hi < 0) return -1;
    while (hi - lo > 1) {
      var mid = (lo + hi) >> 1;
      if (xs[mid] < v) lo = mid; else hi = mid;
    }
    return Math.abs(xs[lo] - v) <= Math.abs(xs[hi] - v) ? lo : hi;
  }

  /* ------------------------------------------------------------ sections */

  function headerSection() {
    var inputs = arr(D.inputs);
    var names = inputs.map(function (i) { return (i.kind || "?") + ": " + (i.name || "?"); }).join(", ");
    return el("header", { cls: "top" }, [
      el("div", null, [el("h1", { text: "Where the time went" }),
                       el("div", { cls: "sub", text: names || "no inputs" })]),
      el("div", { cls: "sub", text: (D.generated_by || "mstrace") + " \u00b7 " + (D.schema || "") })
    ]);
  }

  /* A flight-recorder dump: why it was written, and the requests it names with their split. */
  function flightSection() {
    var fr = D.flight_recorder;
    if (!fr) return null;
    var kids = arr(fr.triggers).map(function (t, ti) {
      var base = ["flight_recorder", "triggers", ti];
      var reqs = arr(t.requests).map(function (q, qi) {
        var p = base.concat(["requests", qi]);
        if (!q.in_dump) return el("li", null, ["request ", el("code", { text: q.id }), " (not in this dump)"]);
        return el("li", null, ["request ", el("code", { text: q.id }), ": e2e ", num(p.concat(["e2e_ms"]), "ms"),
                               " (queue ", num(p.concat(["queue_ms"]), "ms"),
                               ", prefill ", num(p.concat(["prefill_ms"]), "ms"),
                               ", decode ", num(p.concat(["decode_ms"]), "ms"),
                               ") over ", num(p.concat(["steps"]), "int"), " steps"]);
      });
      var more = (t.request_ids_total || 0) - arr(t.requests).length;
      if (more > 0) reqs.push(el("li", { text: "and " + more + " more requests" }));
      return el("div", { cls: "banner lossy" }, [
        el("b", { text: "Flight-recorder dump: " }), "trigger ", el("code", { text: t.trigger || "(unnamed)" }),
        t.on_demand ? " (the whole ring)" : "",
        ", window of ", num(base.concat(["window_ms"]), "ms"), " from ", fmtTime(t.start_ns),
        reqs.length ? el("ul", null, reqs) : null]);
    });
    if (fr.triggers_not_shown)
      kids.push(el("div", { text: fr.triggers_not_shown + " more trigger spans in this dump (not shown)" }));
    return el("section", { cls: "card", id: "flight-recorder" }, [el("h2", { text: "Why this dump" })].concat(kids));
  }

  function verdictSection() {
    var v = D.verdict || {};
    var b = v.bottleneck;
    var kids = [];
    var row = el("div", { cls: "row" }, [
      isNum(v.share) ? num(["verdict", "share"], "%", "share") : null,
      el("div", null, [
        el("div", { cls: "headline" }, b ? ["Bottleneck: ", swatch(b), STAGE_LABEL[b] || b]
                                         : "No single stage bounds throughput"),
        el("div", { text: v.sentence || "" })])
    ]);
    kids.push(row);
    var sec = el("section", { cls: "card verdict", id: "verdict",
                              style: "border-left-color:" + (b ? stageColor(b) : "var(--ok)") },
                 [el("h2", { text: "Verdict" })].concat(kids));
    var changed = D.compare && arr(D.compare.metrics).some(function (m) { return m.significant; });
    if (D.compare && D.compare.verdict)
      sec.appendChild(el("div", { cls: "banner " + (changed ? "lossy" : "clean"), style: "margin-top:12px" },
                         [el("b", { text: "Run against run: " }), D.compare.verdict]));
    return sec;
  }

  function dataQualitySection() {
    var q = D.data_quality || {};
    var warnings = arr(q.warnings).slice();
    /* Input warnings the analysis did not already repeat in data_quality. */
    function known(w) { return warnings.some(function (k) { return k.indexOf(w) >= 0; }); }
    arr(D.inputs).forEach(function (inp) {
      if (inp.truncated) warnings.push((inp.name || "an input") + " ends early (cut file): analysed up to the cut.");
      arr(inp.warnings).forEach(function (w) { if (!known(w)) warnings.push((inp.name ? inp.name + ": " : "") + w); });
    });
    var lossy = !!q.lossy || warnings.length > 0;
    var banner = el("div", { cls: "banner " + (q.lossy ? "lossy" : "clean") }, [
      el("b", { text: q.lossy ? "This report is built on lossy data: read the numbers below with that in mind."
                              : (lossy ? "No spans were lost; notes on the input:" : "No spans were lost and every request joined.") }),
      warnings.length ? el("ul", null, warnings.map(function (w) { return el("li", { text: w }); })) : null
    ]);
    function chip(label, path, bad) {
      var v = get(D, path);
      return el("span", { cls: "chip" + (bad && isNum(v) && v > 0 ? " bad" : "") },
                [label + " ", el("b", null, num(path, "int"))]);
    }
    var chips = el("div", { cls: "chips" }, [
      chip("spans", ["data_quality", "spans"]),
      el("span", { cls: "chip" }, ["processes ", el("b", { text: String(arr(q.processes).length) })]),
      chip("requests", ["requests", "count"]),
      chip("joined", ["requests", "joined"]),
      chip("steps", ["steps", "count"]),
      chip("unjoined requests", ["data_quality", "unjoined_requests"], true),
      chip("spans dropped", ["data_quality", "spans_dropped"], true),
      chip("spans failed", ["data_quality", "spans_failed"], true),
      chip("short traces", ["data_quality", "short_traces"], true),
      chip("negative gaps", ["data_quality", "negative_gaps"], true)
    ]);
    var kids = [banner, chips];
    if (arr(q.unjoined_examples).length)
      kids.push(el("div", { cls: "caption", style: "margin-top:8px" },
                   ["Unjoined request ids (examples): ",
                    el("code", { text: arr(q.unjoined_examples).join(", ") })]));
    if (arr(D.inputs).length) {
      kids.push(el("details", null, [el("summary", { text: "Inputs read" }),
        table(["input", "kind", "spans", "bytes", "cut short"], ["l", "l", "", "", ""], arr(D.inputs).map(function (inp, i) {
          var base = ["inputs", i];
          return [el("code", { text: String(inp.name || "") }), inp.kind || "", num(base.concat("spans"), "int"),
                  num(base.concat("bytes"), "int"), inp.truncated ? el("b", { text: "yes" }) : "no"];
        }), null, true)]));
    }
    if (arr(q.processes).length) {
      kids.push(el("details", null, [el("summary", { text: "Processes seen" }),
        table(["pid", "role", "input", "spans"], ["l", "l", "", ""], arr(q.processes).map(function (p, i) {
          var base = ["data_quality", "processes", i];
          return [num(base.concat("pid"), "int"), p.role || "", num(base.concat("input"), "int"),
                  num(base.concat("spans"), "int")];
        }))]));
    }
    return el("section", { cls: "card", id: "data-quality" }, [el("h2", { text: "Data quality" })].concat(kids));
  }

  function findingsSection() {
    var fs = arr(D.findings);
    if (!fs.length) return card("findings", "Findings", null, [empty("No rule was evaluated.")]);
    var order = { critical: 0, warning: 1, info: 2 };
    var idx = fs.map(function (f, i) { return i; });
    var fired = idx.filter(function (i) { return fs[i].fired; })
                   .sort(function (a, b) { return (order[fs[a].severity] || 3) - (order[fs[b].severity] || 3); });
    var quiet = idx.filter(function (i) { return !fs[i].fired; });
    function row(i) {
      var f = fs[i];
      var nums = Object.keys(f.numbers || {}).map(function (k) {
        return el("span", { cls: "k" }, [k + " = ", num(["findings", i, "numbers", k])]);
      });
      return el("div", { cls: "finding", "data-rule": f.rule }, [
        el("div", { cls: "sev " + (f.fired ? (f.severity || "info") : "pass"),
                    text: f.fired ? (f.severity || "info") : "no" }),
        el("div", null, [el("b", { text: f.rule }), " \u2014 ", f.sentence || "",
                         nums.length ? el("div", { cls: "nums" }, nums) : null])
      ]);
    }
    var kids = [];
    if (fired.length) kids.push(el("div", null, fired.map(row)));
    else kids.push(empty("No rule fired: no stage stands out."));
    if (quiet.length)
      kids.push(el("details", null, [el("summary", { text: quiet.length + " rules checked and not fired" }),
                                     el("div", null, quiet.map(row))]));
    return card("findings", "Findings", "Every rule of the analysis with the numbers it was decided on.", kids);
  }

  /* A table; `full` shows every row (no scrolling box). */
  function table(heads, aligns, rows, rowCls, full) {
    return el("div", { cls: full ? "tablewrap full" : "tablewrap" }, el("table", null, [
      el("thead", null, el("tr", null, heads.map(function (h, i) {
        return el("th", { cls: aligns[i] || null, text: h });
      }))),
      el("tbody", null, rows.map(function (r, ri) {
        return el("tr", { cls: rowCls ? rowCls(ri) : null }, r.map(function (c, i) {
          return el("td", { cls: aligns[i] || null }, typeof c === "string" ? c : c);
        }));
      }))
    ]));
  }

  function stagesSection() {
    var st = D.stages || {};
    var present = STAGES.filter(function (s) { return st[s]; });
    if (!present.length) return card("stages", "Stages", null, [empty("No engine steps were found.")]);
    var anyShare = present.some(function (s) { return isNum(st[s].share) && st[s].share > 0; });
    var parts = present.filter(function (s) { return PARTS.indexOf(s) >= 0; });
    var bar = !anyShare ? null : el("div", { cls: "stagebar" }, parts.map(function (s) {
      var share = isNum(st[s].share) ? st[s].share : 0;
      return el("div", { style: "width:" + (share * 100) + "%;background:" + stageColor(s),
                         "data-tip": (STAGE_LABEL[s] || s) + ": " + fmt(share, "%") + " of step time, " +
                                     fmtMs(st[s].total_ms) + " total" });
    }));
    var outShare = st.output && isNum(st.output.share) ? st.output.share : null;
    var rows = present.map(function (s) {
      var b = ["stages", s];
      return [el("span", null, [swatch(s), STAGE_LABEL[s] || s]), num(b.concat("total_ms"), "ms"),
              num(b.concat("share"), "%"), num(b.concat("mean_ms"), "ms"), num(b.concat("p50_ms"), "ms"),
              num(b.concat("p90_ms"), "ms"), num(b.concat("p99_ms"), "ms"), num(b.concat("count"), "int")];
    });
    return card("stages", "Stages", "Where engine-step time went, summed over every busy step: schedule, model, ipc " +
                "and waiting split each step's wall time and sum to 100 % (the bar). Output processing runs in the " +
                "API server beside the engine: its share is the part of the engine's busy time in which it was busy" +
                (outShare !== null ? " (" + fmt(outShare, "%") + ")" : "") + ", never added to the others.", [
      bar, anyShare ? legend(parts) : null,
      table(["stage", "total", "share", "mean", "p50", "p90", "p99", "steps"], ["l"], rows)]);
  }

  function stepSplitSection() {
    /* In time order (several engines interleave), so the axis never goes back. */
    var series = arr(get(D, ["steps", "series"])).slice().sort(function (a, b) { return a.start_ns - b.start_ns; });
    if (!series.length) return card("step-split", "Stage split per step", null, [empty("No engine steps.")]);
    var n = series.length;
    var tops = series.map(function (s) {
      var t = 0;
      PARTS.forEach(function (k) { t += isNum(s[k + "_ms"]) ? s[k + "_ms"] : 0; });
      return t;
    });
    /* One very slow step would flatten every other: the axis stops near the
     * 99th percentile and the steps above it are cut and marked. */
    var sorted = tops.slice().sort(function (a, b) { return a - b; });
    var top = sorted[n - 1], p99 = sorted[Math.min(n - 1, Math.floor(n * 0.99))];
    var ymax = niceMax(top > 2 * p99 && p99 > 0 ? p99 * 1.25 : top);
    var cut = tops.filter(function (t) { return t > ymax; }).length;
    var t0 = series[0].start_ns, t1 = series[n - 1].start_ns;
    function since(ns) {  /* "+1.5 s", or ms for a run shorter than 2 s */
      var d = ns - t0;
      if (t1 - t0 < 2e9) return "+" + (d / 1e6).toFixed(t1 - t0 < 2e7 ? 1 : 0) + " ms";
      return "+" + (d / 1e9).toFixed(t1 - t0 > 1e10 ? 0 : 1) + " s";
    }
    var xt = ticks(0, n, 8).filter(function (v) { return v < n; }).map(function (v) {
      var i = Math.min(n - 1, Math.round(v));
      return [i + 0.5, since(series[i].start_ns)];
    });
    var f = frame({ x0: 0, x1: n, y0: 0, y1: ymax, height: 280, xticks: xt, label: "stage split per step",
                    xlabel: "engine steps in time order (time since the first step)", ylabel: "ms per step" });
    var base = new Array(n).fill(0);
    var bw = (f.x(1) - f.x(0));
    PARTS.forEach(function (k) {
      var d = "";
      for (var i = 0; i < n; i++) {
        var v = isNum(series[i][k + "_ms"]) ? series[i][k + "_ms"] : 0;
        if (v <= 0) continue;
        var x0 = f.x(i), y0 = f.y(base[i] + v), h = f.y(base[i]) - y0;
        d += "M" + x0.toFixed(2) + " " + y0.toFixed(2) + "h" + Math.max(bw * (n > 300 ? 1 : 0.86), 0.6).toFixed(2) +
             "v" + h.toFixed(2) + "h" + (-Math.max(bw * (n > 300 ? 1 : 0.86), 0.6)).toFixed(2) + "z";
        base[i] += v;
      }
      if (d) f.svg.appendChild(sv("path", { d: d, fill: stageColor(k), "data-stage": k,
                                            "clip-path": cut ? "url(#step-split-clip)" : null }));
    });
    if (cut) {
      f.svg.appendChild(sv("clipPath", { id: "step-split-clip" }, sv("rect", { x: f.L, y: f.T, width: f.W - f.L - f.R,
                                                                            height: f.H - f.T - f.B })));
      var marks = "";
      for (var j = 0; j < n; j++)
        if (tops[j] > ymax) {
          var cx = f.x(j + 0.5);
          marks += "M" + (cx - 4).toFixed(1) + " " + (f.T + 7) + "L" + cx.toFixed(1) + " " + f.T + "L" +
                   (cx + 4).toFixed(1) + " " + (f.T + 7) + "z";
        }
      f.svg.appendChild(sv("path", { d: marks, fill: "var(--crit)", cls: "cut-mark" }));
    }
    var guide = guideLine(f);
    f.svg.setAttribute("data-track", "1");
    f.svg.addEventListener("mousemove", function (evt) {
      var i = Math.floor((trackX(f, evt) - f.L) / bw);
      if (i < 0 || i >= n) { guide.setAttribute("visibility", "hidden"); hideTip(); return; }
      var s = series[i];
      guide.setAttribute("x1", f.x(i + 0.5)); guide.setAttribute("x2", f.x(i + 0.5));
      guide.setAttribute("visibility", "visible");
      var lines = ["step " + s.index + " (pid " + s.pid + ", " + (s.kind || "?") + ")",
                   since(s.start_ns) + " (" + ((s.start_ns - t0) / 1e9).toFixed(6) + " s)",
                   "batch " + s.batch_size + " req, " + s.scheduled_tokens + " tokens"];
      PARTS.forEach(function (k) { lines.push((STAGE_LABEL[k] || k) + ": " + fmtMs(s[k + "_ms"])); });
      lines.push("total: " + fmtMs(tops[i]));
      lines.push("output (API server, concurrent): " + fmtMs(s.output_ms));
      showTip(lines.join("\n"), evt);
    });
    f.svg.addEventListener("mouseleave", function () { guide.setAttribute("visibility", "hidden"); hideTip(); });
    var cap = "Each column is one engine step (schedule \u2192 executor \u2192 worker \u2192 host gap), stacked by the " +
              "parts of its wall time, in time order (output processing, concurrent, is in the tooltip). " +
              (get(D, ["steps", "count"]) > n ? n + " of " + D.steps.count + " steps, evenly sampled." : n + " steps.") +
              (cut ? " The axis stops at " + fmtMs(ymax) + ": " + cut + (cut > 1 ? " steps go" : " step goes") +
                     " above it (red marks; hover for the values; the slowest is " + fmtMs(top) + ")." : "");
    return card("step-split", "Stage split per step over time", cap, [legend(PARTS), f.svg]);
  }

  function modelFitSection() {
    var series = arr(get(D, ["steps", "series"]));
    var fit = get(D, ["steps", "model_fit"]) || {};
    var xkey = fit.x === "scheduled_tokens" ? "scheduled_tokens" : "batch_size";
    var pts = series.filter(function (s) { return isNum(s[xkey]) && isNum(s.model_ms); });
    if (!pts.length) return card("model-fit", "Model time vs batch", null, [empty("No steps with a model time.")]);
    var xmax = niceMax(Math.max.apply(null, pts.map(function (s) { return s[xkey]; })));
    var ymax = niceMax(Math.max.apply(null, pts.map(function (s) { return s.model_ms; })));
    var f = frame({ x0: 0, x1: xmax, y0: 0, y1: ymax, height: 300, label: "model time vs " + xkey,
                    xlabel: xkey === "batch_size" ? "batch size (requests in the step)" : "scheduled tokens",
                    ylabel: "model ms" });
    var kindColor = { prefill: "var(--schedule)", decode: "var(--model)", mixed: "var(--output)" };
    var g = sv("g", { "fill-opacity": "0.55" });
    pts.forEach(function (s) {
      g.appendChild(sv("circle", { cx: f.x(s[xkey]).toFixed(1), cy: f.y(s.model_ms).toFixed(1), r: 3.2,
                                   fill: kindColor[s.kind] || "var(--other)",
                                   "data-tip": "step " + s.index + " (" + (s.kind || "?") + ")\n" + xkey + ": " +
                                               s[xkey] + "\nmodel: " + fmtMs(s.model_ms) }));
    });
    f.svg.appendChild(g);
    var kids = [el("div", { cls: "legend" }, ["prefill", "decode", "mixed"].map(function (k) {
      return el("span", null, [el("span", { cls: "swatch", style: "background:" + kindColor[k] }), k + "-like steps"]);
    }))];
    if (isNum(fit.slope_ms) && isNum(fit.intercept_ms)) {
      var y0 = fit.intercept_ms, y1 = fit.intercept_ms + fit.slope_ms * xmax;
      /* The line is clipped to the plot area, not bent into it. */
      f.svg.appendChild(sv("clipPath", { id: "model-fit-clip" }, sv("rect", { x: f.L, y: f.T, width: f.W - f.L - f.R,
                                                                             height: f.H - f.T - f.B })));
      f.svg.appendChild(sv("line", { x1: f.x(0), y1: f.y(y0), x2: f.x(xmax), y2: f.y(y1),
                                     "clip-path": "url(#model-fit-clip)",
                                     stroke: "#1d2330", "stroke-width": 2, "stroke-dasharray": "6 4",
                                     "data-tip": "least-squares fit: model ms = " + fmt(fit.intercept_ms) + " + " +
                                                 fmt(fit.slope_ms) + " \u00d7 " + xkey }));
      kids.push(el("div", { cls: "caption" }, ["Fitted line: model time = ", num(["steps", "model_fit", "intercept_ms"], "ms"),
        " + ", num(["steps", "model_fit", "slope_ms"], "ms"), " per " + (xkey === "batch_size" ? "request" : "token") +
        " (r\u00b2 = ", num(["steps", "model_fit", "r2"]), "). A steep, well-fitting line means the model's " +
        "compute grows with the batch; a flat one with scattered points means something else drives it."]));
    }
    kids.push(f.svg);
    return card("model-fit", "Model time vs " + (xkey === "batch_size" ? "batch size" : "scheduled tokens"),
                "One point per sampled step.", kids);
  }

  function cdfChart(key, title) {
    var pts = arr(get(D, ["requests", "cdf", key])).filter(function (p) { return Array.isArray(p) && isNum(p[0]); });
    var box = el("div", { id: "cdf-" + key }, [el("h3", { text: title })]);
    var q = get(D, ["requests", key]) || {};
    box.appendChild(el("div", { cls: "caption" }, ["p50 ", num(["requests", key, "p50"], "ms"), " \u00b7 p90 ",
      num(["requests", key, "p90"], "ms"), " \u00b7 p99 ", num(["requests", key, "p99"], "ms"), " \u00b7 mean ",
      num(["requests", key, "mean"], "ms")]));
    if (!pts.length) { box.appendChild(empty("No data.")); return box; }
    var xmax = niceMax(pts[pts.length - 1][0]);
    var f = frame({ x0: 0, x1: xmax, y0: 0, y1: 1, width: 500, height: 220, label: title + " CDF",
                    xlabel: "ms", ylabel: "fraction of requests" });
    var d = "M" + f.x(0).toFixed(1) + " " + f.y(0).toFixed(1);
    pts.forEach(function (p) { d += "H" + f.x(p[0]).toFixed(1) + "V" + f.y(p[1]).toFixed(1); });
    ["p50", "p90", "p99"].forEach(function (k) {
      if (!isNum(q[k])) return;
      f.svg.appendChild(sv("line", { x1: f.x(q[k]), x2: f.x(q[k]), y1: f.T, y2: f.H - f.B, stroke: "#aab",
                                     "stroke-dasharray": "2 3" }));
      f.svg.appendChild(sv("text", { x: f.x(q[k]) + 3, y: f.T + 10, text: k }));
    });
    f.svg.appendChild(sv("path", { d: d, fill: "none", stroke: "var(--schedule)", "stroke-width": 2 }));
    var dot = sv("circle", { r: 4, cx: 0, cy: 0, fill: "var(--schedule)", visibility: "hidden" });
    f.svg.appendChild(dot);
    var xs = pts.map(function (p) { return p[0]; });
    f.svg.setAttribute("data-track", "1");
    f.svg.addEventListener("mousemove", function (evt) {
      var i = nearest(xs, (trackX(f, evt) - f.L) / (f.W - f.L - f.R) * xmax);
      if (i < 0) return;
      dot.setAttribute("cx", f.x(pts[i][0])); dot.setAttribute("cy", f.y(pts[i][1]));
      dot.setAttribute("visibility", "visible");
      showTip(title + " \u2264 " + fmtMs(pts[i][0]) + "\nfor " + (pts[i][1] * 100).toFixed(1) + " % of requests", evt);
    });
    f.svg.addEventListener("mouseleave", function () { dot.setAttribute("visibility", "hidden"); hideTip(); });
    box.appendChild(f.svg);
    return box;
  }

  /* Time since the first step, for axes over the whole run. */
  function runClock(t0, t1) {
    var span = t1 - t0;
    return function (ns) {
      var d = ns - t0;
      if (span < 2e9) return "+" + (d / 1e6).toFixed(span < 2e7 ? 1 : 0) + " ms";
      return "+" + (d / 1e9).toFixed(span > 1e10 ? 0 : 1) + " s";
    };
  }
  function timeTicks(t0, t1) {
    var label = runClock(t0, t1);
    return ticks(0, t1 - t0, 8).map(function (d) { return [t0 + d, label(t0 + d)]; });
  }

  /* Engines as lanes on one real time axis: each sampled step where and
   * how long it ran, coloured by the part that took most of it. */
  function engineLanesSection() {
    var engines = arr(D.engines), series = arr(get(D, ["steps", "series"]));
    if (!engines.length || !series.length) return card("engine-lanes", "Engines over time", null, [empty("No engine steps.")]);
    var t0 = Infinity, t1 = -Infinity;
    series.forEach(function (s) {
      t0 = Math.min(t0, s.start_ns);
      t1 = Math.max(t1, s.start_ns + (isNum(s.wall_ms) ? s.wall_ms * 1e6 : 0));
    });
    if (!(t1 > t0)) t1 = t0 + 1;
    var laneH = 26, W = 1040, L = 190, R = 16, T = 6, B = 34, H = T + B + laneH * engines.length;
    var g = sv("svg", { viewBox: "0 0 " + W + " " + H, role: "img", "aria-label": "engines over time" });
    var x = lin(t0, t1, L, W - R), axis = sv("g", { cls: "axis" }), grid = sv("g", { cls: "grid" });
    timeTicks(t0, t1).forEach(function (t) {
      grid.appendChild(sv("line", { x1: x(t[0]), x2: x(t[0]), y1: T, y2: H - B }));
      axis.appendChild(sv("text", { x: x(t[0]), y: H - B + 15, "text-anchor": "middle", text: t[1] }));
    });
    axis.appendChild(sv("text", { x: (L + W - R) / 2, y: H - 3, "text-anchor": "middle", text: "time since the first step" }));
    g.appendChild(grid); g.appendChild(axis);
    var lane = {};
    engines.forEach(function (e, i) {
      lane[e.pid + ":" + e.input] = i;
      g.appendChild(sv("text", { x: L - 8, y: T + i * laneH + laneH / 2 + 4, "text-anchor": "end",
                                 text: "pid " + e.pid + (engines.length > 1 ? " (input " + e.input + ")" : "") }));
    });
    var byPid = {};
    engines.forEach(function (e, i) { if (byPid[e.pid] === undefined) byPid[e.pid] = i; });
    series.forEach(function (s) {
      var li = byPid[s.pid];
      if (li === undefined) return;
      var best = "schedule";
      PARTS.forEach(function (k) { if ((s[k + "_ms"] || 0) > (s[best + "_ms"] || 0)) best = k; });
      var a = x(s.start_ns), b = x(s.start_ns + (s.wall_ms || 0) * 1e6);
      g.appendChild(sv("rect", { x: a.toFixed(2), y: T + li * laneH + 4, width: Math.max(0.8, b - a).toFixed(2),
                                 height: laneH - 8, fill: stageColor(best), "data-lane": li,
                                 "data-tip": "step " + s.index + " (pid " + s.pid + ")\nwall " + fmtMs(s.wall_ms) +
                                             ", mostly " + (STAGE_LABEL[best] || best) + "\nbatch " + s.batch_size +
                                             " req, " + s.scheduled_tokens + " tokens" }));
    });
    var rows = engines.map(function (e, i) {
      var b = ["engines", i];
      return [num(b.concat("pid"), "int"), el("code", { text: String(e.input_name || "") }), num(b.concat("busy_steps"), "int"),
              num(b.concat("wall_p50_ms"), "ms"), num(b.concat("wall_p90_ms"), "ms"),
              num(b.concat("stage_p50_ms", "model"), "ms"), num(b.concat("stage_p50_ms", "schedule"), "ms")];
    });
    return card("engine-lanes", "Engines over time", "One lane per engine process on one time axis; each sampled " +
                "step is drawn where and as long as it ran, coloured by the part of its wall time that was largest.",
                [legend(PARTS), g, table(["pid", "input", "busy steps", "step p50", "step p90", "model p50",
                                          "schedule p50"], ["l", "l"], rows)]);
  }

  function timelineFrame(bins, ymax, label, ylabel, height) {
    var binNs = get(D, ["steps", "timeline", "bin_ns"]) || 1;
    var t0 = bins[0].start_ns, t1 = bins[bins.length - 1].start_ns + binNs;
    return { f: frame({ x0: t0, x1: t1, y0: 0, y1: ymax, height: height || 220, xticks: timeTicks(t0, t1),
                        label: label, xlabel: "time since the first step", ylabel: ylabel }), binNs: binNs };
  }

  /* Prefill and decode tokens scheduled, per time bin. */
  function tokenMixSection() {
    var bins = arr(get(D, ["steps", "timeline", "bins"]));
    var known = bins.filter(function (b) { return isNum(b.prefill_tokens) || isNum(b.decode_tokens); });
    if (!known.length) return card("token-mix", "Prefill and decode tokens", null,
                                   [empty("The steps carry no step record (step.tokens, step.phase).")]);
    var ymax = niceMax(Math.max.apply(null, bins.map(function (b) { return (b.prefill_tokens || 0) + (b.decode_tokens || 0); })));
    var tf = timelineFrame(bins, ymax, "prefill and decode tokens per time bin", "tokens"), f = tf.f;
    bins.forEach(function (b, i) {
      var x0 = f.x(b.start_ns), w = Math.max(0.6, f.x(b.start_ns + tf.binNs) - x0);
      var dec = b.decode_tokens || 0, pre = b.prefill_tokens || 0;
      var tip = "bin " + i + ": " + b.steps + " steps\nprefill " + pre + " tokens\ndecode " + dec + " tokens";
      if (dec > 0) f.svg.appendChild(sv("rect", { x: x0.toFixed(2), y: f.y(dec).toFixed(2), width: w.toFixed(2),
                                                  height: (f.y(0) - f.y(dec)).toFixed(2), fill: "var(--model)",
                                                  "data-bin": i, "data-kind": "decode", "data-tip": tip }));
      if (pre > 0) f.svg.appendChild(sv("rect", { x: x0.toFixed(2), y: f.y(dec + pre).toFixed(2), width: w.toFixed(2),
                                                  height: (f.y(dec) - f.y(dec + pre)).toFixed(2), fill: "var(--schedule)",
                                                  "data-bin": i, "data-kind": "prefill", "data-tip": tip }));
    });
    return card("token-mix", "Prefill and decode tokens", "Tokens the scheduler gave to prefill (chunks p and P) and to " +
                "decode (d) in each of " + bins.length + " equal time bins, from the step records.",
                [el("div", { cls: "legend" }, [el("span", null, [el("span", { cls: "swatch", style: "background:var(--schedule)" }), "prefill"]),
                                               el("span", null, [el("span", { cls: "swatch", style: "background:var(--model)" }), "decode"])]),
                 f.svg]);
  }

  /* Waiting and running requests, KV-cache usage and preemptions over time. */
  function schedulerStateSection() {
    var bins = arr(get(D, ["steps", "timeline", "bins"]));
    var known = bins.filter(function (b) { return isNum(b.waiting_max) || isNum(b.running_max); });
    if (!known.length) return card("scheduler-state", "Scheduler state", null,
                                   [empty("No step carries scheduler.waiting / scheduler.running.")]);
    var ymax = niceMax(Math.max.apply(null, bins.map(function (b) { return Math.max(b.waiting_max || 0, b.running_max || 0); })));
    var tf = timelineFrame(bins, ymax, "waiting and running requests", "requests (max per bin)"), f = tf.f;
    function line(key, color) {
      var d = "";
      bins.forEach(function (b) {
        if (!isNum(b[key])) return;
        d += (d ? "L" : "M") + f.x(b.start_ns + tf.binNs / 2).toFixed(1) + " " + f.y(b[key]).toFixed(1);
      });
      f.svg.appendChild(sv("path", { d: d, fill: "none", stroke: color, "stroke-width": 2, "data-series": key }));
    }
    line("waiting_max", "var(--crit)");
    line("running_max", "var(--model)");
    var kf = timelineFrame(bins, 1, "KV-cache usage and preemptions", "KV usage (max per bin)", 180), k = kf.f;
    var d = "";
    bins.forEach(function (b) {
      if (!isNum(b.kv_usage_max)) return;
      d += (d ? "L" : "M") + k.x(b.start_ns + kf.binNs / 2).toFixed(1) + " " + k.y(Math.min(1, b.kv_usage_max)).toFixed(1);
    });
    k.svg.appendChild(sv("path", { d: d, fill: "none", stroke: "var(--ipc)", "stroke-width": 2, "data-series": "kv_usage_max" }));
    bins.forEach(function (b, i) {
      if (!(b.preemptions > 0)) return;
      var cx = k.x(b.start_ns + kf.binNs / 2);
      k.svg.appendChild(sv("circle", { cx: cx.toFixed(1), cy: k.y(1).toFixed(1), r: 3 + Math.min(6, b.preemptions),
                                       fill: "var(--crit)", "data-preemptions": b.preemptions,
                                       "data-tip": "bin " + i + ": " + b.preemptions + " preemptions, KV usage up to " +
                                                   fmt(b.kv_usage_max, "%") }));
    });
    var r = D.requests || {};
    return card("scheduler-state", "Scheduler state over time", null, [
      el("div", { cls: "caption" }, ["The most requests waiting and running in each time bin, the KV cache's usage and the " +
        "preemptions (red dots, sized by count): ", num(["requests", "preemptions"], "int"), " preemptions in all, ",
        num(["requests", "recomputed_tokens"], "int"), " tokens computed again."]),
      el("div", { cls: "legend" }, [el("span", null, [el("span", { cls: "swatch", style: "background:var(--crit)" }), "waiting"]),
                                    el("span", null, [el("span", { cls: "swatch", style: "background:var(--model)" }), "running"]),
                                    el("span", null, [el("span", { cls: "swatch", style: "background:var(--ipc)" }), "KV-cache usage"])]),
      f.svg, k.svg]);
  }

  function latencySection() {
    var r = D.requests || {};
    return card("latency", "Request latency", "Cumulative distributions over " + (isNum(r.joined) ? r.joined : "the") +
                " joined requests, with vLLM's definitions: queue (the engine received it \u2192 first scheduled), " +
                "time to first token, time per output token, every inter-token gap, prefill, decode, end to end.",
                [el("div", { cls: "grid2" }, [
      cdfChart("queue_ms", "Queue time"), cdfChart("ttft_ms", "Time to first token"),
      cdfChart("tpot_ms", "Time per output token"), cdfChart("itl_ms", "Inter-token latency (every gap)"),
      cdfChart("prefill_ms", "Prefill"), cdfChart("decode_ms", "Decode"),
      cdfChart("e2e_ms", "End to end")])]);
  }

  function waterfallSection() {
    var reqs = arr(get(D, ["requests", "slowest"]));
    if (!reqs.length) return card("waterfall", "Slowest requests", null, [empty("No joined requests.")]);
    var span = 0;
    reqs.forEach(function (r) {
      var end = isNum(r.e2e_ms) ? r.e2e_ms : 0;
      arr(r.step_windows).forEach(function (w) { end = Math.max(end, (w[1] - r.arrival_ns) / 1e6); });
      span = Math.max(span, end);
    });
    var xmax = niceMax(span), rowH = 22, W = 1040, L = 190, R = 16, T = 6, B = 34;
    var H = T + B + rowH * reqs.length;
    var g = sv("svg", { viewBox: "0 0 " + W + " " + H, role: "img", "aria-label": "slowest requests waterfall" });
    var x = lin(0, xmax, L, W - R);
    var axis = sv("g", { cls: "axis" }), grid = sv("g", { cls: "grid" });
    ticks(0, xmax, 8).forEach(function (v) {
      grid.appendChild(sv("line", { x1: x(v), x2: x(v), y1: T, y2: H - B }));
      axis.appendChild(sv("text", { x: x(v), y: H - B + 15, "text-anchor": "middle", text: tickLabel(v) }));
    });
    axis.appendChild(sv("text", { x: (L + W - R) / 2, y: H - 3, "text-anchor": "middle",
                                  text: "ms since the request arrived" }));
    g.appendChild(grid); g.appendChild(axis);
    reqs.forEach(function (r, ri) {
      var y = T + ri * rowH, id = String(r.id);
      g.appendChild(sv("text", { x: L - 8, y: y + rowH / 2 + 4, "text-anchor": "end",
                                 text: (id.length > 26 ? id.slice(0, 12) + "\u2026" + id.slice(-12) : id) }));
      var e2e = isNum(r.e2e_ms) ? r.e2e_ms : 0;
      g.appendChild(sv("rect", { x: x(0), y: y + 3, width: Math.max(1, x(e2e) - x(0)), height: rowH - 6, rx: 3,
                                 fill: "#f0f2f5", stroke: "#d5dae1",
                                 "data-tip": "request " + id + "\narrival " + fmtTime(r.arrival_ns) + "\nqueue " +
                                             fmtMs(r.queue_ms) + ", TTFT " + fmtMs(r.ttft_ms) + ", TPOT " +
                                             fmtMs(r.tpot_ms) + "\nend to end " + fmtMs(r.e2e_ms) + "\n" + r.steps +
                                             " steps, shared with up to " + r.max_shared + " others" }));
      if (isNum(r.queue_ms) && r.queue_ms > 0)
        g.appendChild(sv("rect", { x: x(0), y: y + 7, width: Math.max(1, x(r.queue_ms) - x(0)), height: rowH - 14,
                                   fill: "var(--queue)", "data-tip": "request " + id + "\nqueued " + fmtMs(r.queue_ms) }));
      arr(r.step_windows).forEach(function (w) {
        var a = (w[0] - r.arrival_ns) / 1e6, b = (w[1] - r.arrival_ns) / 1e6;
        g.appendChild(sv("rect", { x: x(a), y: y + 5, width: Math.max(1, x(b) - x(a)), height: rowH - 10,
                                   fill: stageColor(w[2]),
                                   "data-tip": "request " + id + "\n" + (STAGE_LABEL[w[2]] || w[2]) + ": " +
                                               fmtMs(b - a) + "\nfrom +" + fmtMs(a) + " to +" + fmtMs(b) }));
      });
    });
    var rows = reqs.map(function (r, i) {
      var b = ["requests", "slowest", i];
      return [el("code", { text: String(r.id) }), num(b.concat("queue_ms"), "ms"), num(b.concat("ttft_ms"), "ms"),
              num(b.concat("tpot_ms"), "ms"), num(b.concat("e2e_ms"), "ms"), num(b.concat("steps"), "int"),
              num(b.concat("max_shared"), "int"), fmtTime(r.arrival_ns)];
    });
    return card("waterfall", "Slowest requests", "The " + reqs.length + " slowest requests, aligned on their arrival: " +
                "grey = queued, colour = the engine steps they were in, by stage. Hover for values.",
                [legend(["queue"].concat(STAGES)), g,
                 table(["request", "queue", "TTFT", "TPOT", "end to end", "steps", "max shared", "arrival"],
                       ["l", "", "", "", "", "", "", "l"], rows)]);
  }

  function spanNamesSection() {
    var rows = arr(D.span_names).map(function (s, i) {
      var b = ["span_names", i];
      return [el("code", { text: s.name }), num(b.concat("count"), "int"), num(b.concat("total_ms"), "ms"),
              num(b.concat("p50_ms"), "ms"), num(b.concat("p90_ms"), "ms"), num(b.concat("p99_ms"), "ms"),
              num(b.concat("max_ms"), "ms")];
    });
    if (!rows.length) return card("span-names", "Spans by name", null, [empty("No spans.")]);
    return card("span-names", "Spans by name", "Every span name seen (also names no rule knows), by total time.",
                [table(["span", "count", "total", "p50", "p90", "p99", "max"], ["l"], rows)]);
  }

  function profileSection() {
    var t = arr(D.profile_targets);
    if (!t.length) return card("profile", "Where to aim a profiler", null, [empty("No target: nothing stands out.")]);
    var rows = t.map(function (p, i) {
      var b = ["profile_targets", i];
      return [p.what || "", num(b.concat("pid"), "int"), fmtTime(p.start_ns),
              isNum(p.start_ns) && isNum(p.end_ns) ? fmtMs((p.end_ns - p.start_ns) / 1e6) : "\u2014",
              el("span", { text: p.why || "" })];
    });
    return card("profile", "Where to aim a profiler",
                "The worst steps and requests: the process and time window to record with a profiler " +
                "(e.g. perf record -p PID, py-spy record --pid PID) when the slowdown recurs.",
                [table(["what", "pid", "from", "length", "why"], ["l", "", "l", "", "wrap"], rows, null, true)]);
  }

  function compareSection() {
    var c = D.compare;
    if (!c) return null;
    var ms = arr(c.metrics);
    var maxAbs = 1;
    ms.forEach(function (m) { if (isNum(m.change_pct)) maxAbs = Math.max(maxAbs, Math.abs(m.change_pct)); });
    maxAbs = niceMax(maxAbs);
    var rows = ms.map(function (m, i) {
      var b = ["compare", "metrics", i], w = 120;
      var pct = isNum(m.change_pct) ? m.change_pct : 0, len = Math.abs(pct) / maxAbs * (w / 2);
      var bar = sv("svg", { viewBox: "0 0 " + w + " 14", width: w, height: 14, style: "display:inline-block;width:" + w + "px" }, [
        sv("line", { x1: w / 2, x2: w / 2, y1: 0, y2: 14, stroke: "#c5ccd6" }),
        sv("rect", { x: pct >= 0 ? w / 2 : w / 2 - len, y: 3, width: Math.max(len, 0.5), height: 8,
                     fill: m.significant ? (pct > 0 ? "var(--crit)" : "var(--ok)") : "#b8bfc9" })]);
      return [el("div", null, [el("b", { text: m.metric }), el("div", { cls: "caption", text: m.sentence || "" })]),
              num(b.concat("before", "p50"), "ms"), num(b.concat("after", "p50"), "ms"),
              num(b.concat("before", "p90"), "ms"), num(b.concat("after", "p90"), "ms"),
              num(b.concat("before", "p99"), "ms"), num(b.concat("after", "p99"), "ms"),
              num(b.concat("change_pct"), "pct", m.significant ? (pct > 0 ? "up" : "down") : null), bar,
              num(b.concat("p_value"), "p"), m.significant ? el("b", { text: "yes" }) : "no"];
    });
    return card("compare", "Run against run", "Before: " + (c.before || "?") + " \u2192 after: " + (c.after || "?") +
                ". Change of the median, p90 and p99; a metric is significant when the test named in its sentence " +
                "gives p < " + (isNum(c.alpha) ? c.alpha : "?") + " and the quantile it tests moved by at least " +
                (isNum(c.min_change_pct) ? c.min_change_pct : "?") + " %. Before: " + arr(c.before_inputs).join(", ") +
                "; after: " + arr(c.after_inputs).join(", ") + ".",
                [el("div", { cls: "banner " + (ms.some(function (m) { return m.significant; }) ? "lossy" : "clean") },
                    el("b", { text: c.verdict || "" })),
                 table(["metric", "p50 before", "p50 after", "p90 before", "p90 after", "p99 before", "p99 after",
                        "change", "", "p", "significant"], ["wrap"],
                       rows, function (ri) { return ms[ri].significant ? "sig" : null; }, true)]);
  }

  function render() {
    var root = el("main");
    [headerSection(), flightSection(), verdictSection(), dataQualitySection(), compareSection(), findingsSection(),
     stagesSection(), stepSplitSection(), engineLanesSection(), tokenMixSection(), schedulerStateSection(), modelFitSection(),
     latencySection(), waterfallSection(), spanNamesSection(),
     profileSection(),
     el("footer", { text: "Self-contained report: this file fetches nothing. Every number comes from the analysis " +
                          "JSON embedded below (the same as mstrace analyze --json)." })]
      .forEach(function (s) { if (s) root.appendChild(s); });
    document.body.appendChild(root);
  }

  function main() {
    installTips();
    try {
      D = JSON.parse(document.getElementById("mst-data").textContent);
      render();
      document.body.setAttribute("data-rendered", "1");
    } catch (e) {
      document.body.appendChild(el("pre", { cls: "banner lossy", text: "The report could not be drawn: " + e }));
      throw e;
    }
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", main);
  else main();
})();
