#include "sim/report_html.h"

#include <fmt/format.h>

#include <cmath>

namespace myriad::sim {

namespace {

using nlohmann::ordered_json;

// NaN (no sample in the window) becomes null, which the charts draw as a gap.
ordered_json Value(double v) { return std::isfinite(v) ? ordered_json(v) : ordered_json(); }

template <typename Field>
ordered_json Column(const TimeSeries& s, Field f) {
  ordered_json a = ordered_json::array();
  for (const SeriesPoint& p : s.points) a.push_back(Value(static_cast<double>(f(p))));
  return a;
}

template <typename Field>
ordered_json PoolColumns(const TimeSeries& s, Field f) {
  ordered_json per_pool = ordered_json::array();
  for (size_t i = 0; i < s.pools.size(); ++i) {
    ordered_json a = ordered_json::array();
    for (const SeriesPoint& p : s.points) a.push_back(Value(static_cast<double>(i < f(p).size() ? f(p)[i] : 0)));
    per_pool.push_back(std::move(a));
  }
  return per_pool;
}

ordered_json Get(const ordered_json& j, std::initializer_list<const char*> path) {
  const ordered_json* at = &j;
  for (const char* k : path) {
    if (!at->is_object() || !at->contains(k)) return nullptr;
    at = &(*at)[k];
  }
  return *at;
}

ordered_json RunData(const ReportRun& run) {
  const TimeSeries& s = *run.series;
  const ordered_json& r = *run.report;
  ordered_json series = ordered_json::object();
#define MYRIAD_COLUMN(name) series[#name] = Column(s, [](const SeriesPoint& p) { return p.name; })
  MYRIAD_COLUMN(arrived);
  MYRIAD_COLUMN(completed);
  MYRIAD_COLUMN(rejected);
  MYRIAD_COLUMN(ttft_p50_s);
  MYRIAD_COLUMN(ttft_p99_s);
  MYRIAD_COLUMN(tpot_p50_s);
  MYRIAD_COLUMN(tpot_p99_s);
  MYRIAD_COLUMN(slo_attainment);
  MYRIAD_COLUMN(goodput_tokens_per_s);
  MYRIAD_COLUMN(cost_per_million_tokens_within_slo);
  MYRIAD_COLUMN(in_flight);
  MYRIAD_COLUMN(units_down);
  MYRIAD_COLUMN(kv_handoff_gbps);
  MYRIAD_COLUMN(kv_fetch_gbps);
  MYRIAD_COLUMN(store_offload_gbps);
  MYRIAD_COLUMN(store_load_gbps);
  MYRIAD_COLUMN(store_repair_gbps);
  MYRIAD_COLUMN(limiter_shed);
  MYRIAD_COLUMN(rebalances);
#undef MYRIAD_COLUMN
  ordered_json markers = ordered_json::array();
  for (size_t i = 0; i < s.markers.size() && i < kMaxHtmlMarkers; ++i) {
    const Marker& m = s.markers[i];
    markers.push_back({{"t_s", m.t_s}, {"kind", MarkerKindName(m.kind)}, {"label", m.label}});
  }
  const size_t left_out = s.markers.size() > kMaxHtmlMarkers ? s.markers.size() - kMaxHtmlMarkers : 0;
  return {{"variant", s.variant},
          {"interval_s", s.interval_s},
          {"slo_ttft_s", s.slo_ttft_s},
          {"slo_tpot_s", s.slo_tpot_s},
          {"pools", s.pools},
          {"t_s", Column(s, [](const SeriesPoint& p) { return p.t_s; })},
          {"series", series},
          {"pool_busy", PoolColumns(s, [](const SeriesPoint& p) -> const auto& { return p.pool_busy; })},
          {"pool_waiting", PoolColumns(s, [](const SeriesPoint& p) -> const auto& { return p.pool_waiting; })},
          {"pool_running", PoolColumns(s, [](const SeriesPoint& p) -> const auto& { return p.pool_running; })},
          {"markers", markers},
          {"markers_left_out", left_out},
          {"scenario", Get(r, {"scenario"})},
          {"summary",
           {{"arrived", Get(r, {"requests", "arrived"})},
            {"completed", Get(r, {"requests", "completed"})},
            {"rejected", Get(r, {"requests", "rejected"})},
            {"slo_attainment", Get(r, {"requests", "slo_attainment"})},
            {"ttft_p50_s", Get(r, {"latency_s", "ttft", "p50"})},
            {"ttft_p99_s", Get(r, {"latency_s", "ttft", "p99"})},
            {"tpot_p99_s", Get(r, {"latency_s", "tpot", "p99"})},
            {"prefix_hit_rate", Get(r, {"tokens", "prefix_hit_rate"})},
            {"store_hit_rate", Get(r, {"store", "load_back", "hit_rate"})},
            {"goodput_tokens_per_s", Get(r, {"throughput", "goodput_tokens_per_s"})},
            {"cost_per_million_tokens_within_slo", Get(r, {"cost", "per_million_tokens_within_slo"})}}},
          {"radar", Get(r, {"failures", "slow_node_radar"})}};
}

std::string HtmlEscape(std::string_view s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

constexpr const char* kStyle = R"css(
body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#222;max-width:1000px}
h1{font-size:22px;margin:0 0 4px}h2{font-size:16px;margin:28px 0 4px}
.meta{color:#666;margin:0 0 12px}
table{border-collapse:collapse;margin:8px 0}td,th{padding:3px 8px;border-bottom:1px solid #ddd;text-align:right}
td:first-child,th:first-child{text-align:left}
svg.chart{display:block;background:#fcfcfc;border:1px solid #e4e4e4}
svg text{font:11px system-ui,sans-serif;fill:#444}
.legend{display:flex;flex-wrap:wrap;gap:4px 14px;margin:4px 0 0;font-size:12px}
.legend span::before{content:"";display:inline-block;width:18px;height:0;margin:0 5px 3px 0;border-top:3px solid var(--c)}
.legend span.dashed::before{border-top-style:dashed}
.note{color:#666;font-size:12px}
)css";

// Draws every chart from the data block. Numbers go into the DOM as data attributes (raw
// values, unscaled) so a test can hold the page against the CSV.
constexpr const char* kScript = R"js(
(function () {
  'use strict';
  var NS = 'http://www.w3.org/2000/svg';
  var PALETTE = ['#1f77b4', '#d62728', '#2ca02c', '#ff7f0e', '#9467bd', '#8c564b', '#e377c2', '#17becf', '#7f7f7f', '#bcbd22'];
  var DASHES = ['', '6 4', '2 3', '10 3 2 3'];
  var MARKER_COLORS = {fault: '#d62728', ejection: '#ff7f0e', readmission: '#2ca02c',
                       store_node_loss: '#9467bd', store_node_declared_dead: '#8c564b'};
  var W = 960, H = 240, L = 64, R = 16, T = 12, B = 30;

  function el(name, attrs, parent, ns) {
    var e = ns ? document.createElementNS(NS, name) : document.createElement(name);
    for (var k in attrs) e.setAttribute(k, String(attrs[k]));
    if (parent) parent.appendChild(e);
    return e;
  }
  function text(parent, s) { parent.appendChild(document.createTextNode(s)); return parent; }
  function fmt(v, unit) {
    if (v === null || v === undefined) return '-';
    if (unit === '%') return (100 * v).toFixed(1) + '%';
    if (v === 0) return '0';
    if (unit === 's') {
      if (v >= 7200) return (v / 3600).toPrecision(3) + ' h';
      if (v >= 600) return (v / 60).toPrecision(3) + ' min';
      return v < 1 ? (1000 * v).toPrecision(3) + ' ms' : v.toPrecision(3) + ' s';
    }
    if (unit === '$') return '$' + v.toPrecision(4);
    var a = Math.abs(v);
    if (a >= 1e9) return (v / 1e9).toPrecision(3) + 'G';
    if (a >= 1e6) return (v / 1e6).toPrecision(3) + 'M';
    if (a >= 1e4) return (v / 1e3).toPrecision(3) + 'k';
    return String(Math.round(v * 1000) / 1000);
  }
  function niceMax(v) {
    if (!(v > 0)) return 1;
    var p = Math.pow(10, Math.floor(Math.log10(v)));
    var steps = [1, 2, 2.5, 5, 10];
    for (var i = 0; i < steps.length; ++i) if (steps[i] * p >= v) return steps[i] * p;
    return 10 * p;
  }

  var data = JSON.parse(document.getElementById('myriad-data').textContent);
  var runs = data.runs;
  var tmax = 0;
  runs.forEach(function (r) { r.t_s.forEach(function (t) { if (t > tmax) tmax = t; }); });
  if (!(tmax > 0)) tmax = 1;

  // One line per (run, key); colour by key for one run, by run when comparing.
  function lines(spec) {
    var out = [];
    runs.forEach(function (run, ri) {
      var keys = [];
      if (spec.pool) {
        run.pools.forEach(function (p, pi) { keys.push({key: spec.pool + ':' + p, label: p, ys: run[spec.pool][pi]}); });
      } else {
        spec.keys.forEach(function (k) { keys.push({key: k[0], label: k[1], ys: run.series[k[0]]}); });
      }
      keys.forEach(function (k, ki) {
        var one = runs.length === 1;
        out.push({run: run, key: k.key, ys: k.ys,
                  label: (one ? '' : run.variant + ': ') + k.label,
                  color: PALETTE[(one ? ki : ri) % PALETTE.length],
                  dash: one ? '' : DASHES[ki % DASHES.length]});
      });
    });
    return out;
  }

  function chart(parent, spec) {
    var ls = lines(spec);
    var ymax = 0;
    ls.forEach(function (l) { l.ys.forEach(function (y) { if (y !== null && y > ymax) ymax = y; }); });
    if (spec.slo) runs.forEach(function (r) { if (r[spec.slo] > ymax) ymax = r[spec.slo]; });
    ymax = spec.unit === '%' ? 1 : niceMax(ymax);
    var pw = W - L - R, ph = H - T - B;
    function x(t) { return L + pw * t / tmax; }
    function y(v) { return T + ph * (1 - v / ymax); }
    el('h2', {}, parent).textContent = spec.title;
    var svg = el('svg', {'class': 'chart', width: W, height: H, viewBox: '0 0 ' + W + ' ' + H,
                         'data-chart': spec.id}, parent, true);
    for (var i = 0; i <= 4; ++i) {
      var v = ymax * i / 4;
      el('line', {x1: L, x2: W - R, y1: y(v), y2: y(v), stroke: '#e6e6e6'}, svg, true);
      text(el('text', {x: L - 6, y: y(v) + 4, 'text-anchor': 'end'}, svg, true), fmt(v, spec.unit));
      var t = tmax * i / 4;
      text(el('text', {x: x(t), y: H - 10, 'text-anchor': 'middle'}, svg, true), fmt(t, 's'));
    }
    if (spec.slo) {
      runs.slice(0, 1).forEach(function (r) {
        var s = el('line', {x1: L, x2: W - R, y1: y(r[spec.slo]), y2: y(r[spec.slo]), stroke: '#999',
                            'stroke-dasharray': '3 3', 'class': 'slo'}, svg, true);
        text(el('title', {}, s, true), 'SLO ' + fmt(r[spec.slo], 's'));
      });
    }
    runs.forEach(function (run) {
      run.markers.forEach(function (m) {
        var ml = el('line', {x1: x(m.t_s), x2: x(m.t_s), y1: T, y2: H - B, stroke: MARKER_COLORS[m.kind] || '#000',
                             'stroke-opacity': 0.55, 'class': 'marker', 'data-kind': m.kind,
                             'data-variant': run.variant}, svg, true);
        text(el('title', {}, ml, true), run.variant + ' t=' + fmt(m.t_s, 's') + ': ' + m.label);
      });
    });
    ls.forEach(function (l) {
      var d = '', pen = 'M', defined = 0, max = null;
      l.ys.forEach(function (v, i) {
        if (v === null) { pen = 'M'; return; }
        ++defined;
        if (max === null || v > max) max = v;
        d += pen + x(l.run.t_s[i]).toFixed(1) + ' ' + y(v).toFixed(1) + ' ';
        pen = 'L';
      });
      var p = el('path', {d: d.trim() || 'M0 0', fill: 'none', stroke: l.color, 'stroke-width': 1.6,
                          'stroke-dasharray': l.dash, 'class': 'series', 'data-key': l.key,
                          'data-variant': l.run.variant, 'data-points': l.ys.length, 'data-defined': defined,
                          'data-max': max === null ? '' : String(max)}, svg, true);
      text(el('title', {}, p, true), l.label);
    });
    var readout = el('text', {x: W - R - 4, y: T + 12, 'text-anchor': 'end', 'class': 'readout'}, svg, true);
    svg.addEventListener('mousemove', function (ev) {
      var box = svg.getBoundingClientRect();
      var t = (ev.clientX - box.left - L) / pw * tmax;
      var parts = [];
      ls.forEach(function (l) {
        var best = 0;
        l.run.t_s.forEach(function (ts, i) { if (Math.abs(ts - t) < Math.abs(l.run.t_s[best] - t)) best = i; });
        if (l.ys.length) parts.push(l.label + ' ' + fmt(l.ys[best], spec.unit));
      });
      readout.textContent = 't=' + fmt(Math.max(0, t), 's') + '  ' + parts.join('  ');
    });
    var legend = el('div', {'class': 'legend'}, parent);
    ls.forEach(function (l) {
      text(el('span', {style: '--c:' + l.color, 'class': l.dash ? 'dashed' : ''}, legend), l.label);
    });
  }

  function summary(parent) {
    var cols = [['arrived', 'arrived', ''], ['completed', 'completed', ''], ['rejected', 'rejected', ''],
                ['slo_attainment', 'within SLO', '%'], ['ttft_p50_s', 'TTFT p50', 's'], ['ttft_p99_s', 'TTFT p99', 's'],
                ['tpot_p99_s', 'TPOT p99', 's'], ['prefix_hit_rate', 'prefix hits', '%'],
                ['store_hit_rate', 'store hits', '%'], ['goodput_tokens_per_s', 'goodput tok/s', ''],
                ['cost_per_million_tokens_within_slo', '$ / M tokens within SLO', '$']];
    var table = el('table', {id: 'summary'}, parent);
    var head = el('tr', {}, table);
    text(el('th', {}, head), 'policy');
    cols.forEach(function (c) { text(el('th', {}, head), c[1]); });
    runs.forEach(function (r) {
      var row = el('tr', {'data-variant': r.variant}, table);
      text(el('td', {}, row), r.variant);
      cols.forEach(function (c) {
        text(el('td', {'data-key': c[0], 'data-value': r.summary[c[0]] === null ? '' : String(r.summary[c[0]])}, row),
             fmt(r.summary[c[0]], c[2]));
      });
    });
  }

  function radar(parent) {
    el('h2', {}, parent).textContent = 'Slow-node radar: ranks by smoothed step-time excess over their unit\'s median (end of run)';
    runs.forEach(function (run, ri) {
      if (!run.radar) {
        text(el('p', {'class': 'note'}, parent), run.variant + ': no straggler telemetry (the scenario has no faults section).');
        return;
      }
      var rows = run.radar, bh = 18, h = 14 + rows.length * bh, lw = 260;
      var max = 0;
      rows.forEach(function (e) { if (e.step_time_excess > max) max = e.step_time_excess; });
      max = niceMax(max);
      var svg = el('svg', {'class': 'chart', width: W, height: h, viewBox: '0 0 ' + W + ' ' + h, 'data-chart': 'radar',
                           'data-variant': run.variant, 'data-points': rows.length}, parent, true);
      rows.forEach(function (e, i) {
        var yy = 8 + i * bh;
        text(el('text', {x: lw - 6, y: yy + 12, 'text-anchor': 'end'}, svg, true),
             (runs.length > 1 ? run.variant + ': ' : '') + 'unit ' + e.unit + ' (' + e.pool + ') rank ' + e.rank +
             ', node ' + e.node);
        var wv = Math.max(0, e.step_time_excess) / max * (W - lw - 80);
        el('rect', {x: lw, y: yy, width: wv, height: bh - 5, fill: PALETTE[ri % PALETTE.length], 'class': 'bar',
                    'data-excess': String(e.step_time_excess)}, svg, true);
        text(el('text', {x: lw + wv + 6, y: yy + 12}, svg, true), (100 * e.step_time_excess).toFixed(1) + '%');
      });
    });
  }

  var root = document.getElementById('report');
  try {
    var first = runs[0] || {scenario: {}};
    var sc = first.scenario || {};
    el('h1', {}, root).textContent = 'myriad sim: ' + sc.name;
    text(el('p', {'class': 'meta'}, root), 'seed ' + sc.seed + ', ' + sc.gpus + ' x ' + sc.gpu + ', ' + sc.model +
         ', ' + fmt(sc.duration_s, 's') + ' of arrivals, ended at ' + fmt(sc.end_s, 's') + '; one point per ' +
         fmt(first.interval_s, 's') + ' of virtual time');
    summary(root);
    var specs = [
      {id: 'ttft', title: 'TTFT of requests completed in the window (p50, p99; dotted: SLO)', unit: 's',
       keys: [['ttft_p99_s', 'TTFT p99'], ['ttft_p50_s', 'TTFT p50']], slo: 'slo_ttft_s'},
      {id: 'tpot', title: 'TPOT of requests completed in the window (p50, p99; dotted: SLO)', unit: 's',
       keys: [['tpot_p99_s', 'TPOT p99'], ['tpot_p50_s', 'TPOT p50']], slo: 'slo_tpot_s'},
      {id: 'slo', title: 'SLO attainment of requests ended in the window (rejections count against it)', unit: '%',
       keys: [['slo_attainment', 'within SLO']]},
      {id: 'goodput', title: 'Goodput: tokens of requests within SLO, per second', unit: '',
       keys: [['goodput_tokens_per_s', 'goodput tok/s']]},
      {id: 'cost', title: 'Cost per million tokens within SLO, per window', unit: '$',
       keys: [['cost_per_million_tokens_within_slo', '$ / M tokens']]},
      {id: 'requests', title: 'Requests per window, and in flight at its end', unit: '',
       keys: [['arrived', 'arrived'], ['completed', 'completed'], ['rejected', 'rejected'], ['in_flight', 'in flight']]},
      {id: 'busy', title: 'Pool utilisation: share of unit-time spent stepping', unit: '%', pool: 'pool_busy'},
      {id: 'waiting', title: 'Queued sequences per pool (waiting for admission to a batch)', unit: '', pool: 'pool_waiting'},
      {id: 'running', title: 'Running sequences per pool', unit: '', pool: 'pool_running'},
      {id: 'kv', title: 'KV transfer: prefill-to-decode hand-offs and peer prefix copies (GB/s)', unit: '',
       keys: [['kv_handoff_gbps', 'P/D hand-off'], ['kv_fetch_gbps', 'peer copies']]},
      {id: 'store', title: 'Store tier traffic (GB/s)', unit: '',
       keys: [['store_offload_gbps', 'offload'], ['store_load_gbps', 'load-back'], ['store_repair_gbps', 'repair']]},
      {id: 'actions', title: 'Controller: units out of rotation, limiter sheds and EPLB rebalances per window',
       unit: '', keys: [['units_down', 'units down'], ['limiter_shed', 'limiter shed'], ['rebalances', 'rebalances']]}
    ];
    var mk = el('div', {'class': 'legend'}, root);
    text(el('span', {'class': 'note'}, mk), 'markers:');
    Object.keys(MARKER_COLORS).forEach(function (k) { text(el('span', {style: '--c:' + MARKER_COLORS[k]}, mk), k); });
    runs.forEach(function (r) {
      if (r.markers_left_out > 0) {
        text(el('p', {'class': 'note'}, root), r.variant + ': ' + r.markers_left_out + ' more markers not drawn.');
      }
    });
    specs.forEach(function (s) { chart(root, s); });
    radar(root);
    document.body.setAttribute('data-rendered', 'ok');
    document.body.setAttribute('data-charts', String(specs.length));
  } catch (e) {
    document.body.setAttribute('data-render-error', String(e && e.stack || e));
    throw e;
  }
})();
)js";

}  // namespace

std::string FormatHtmlReport(std::span<const ReportRun> runs) {
  ordered_json all = ordered_json::array();
  for (const ReportRun& r : runs) all.push_back(RunData(r));
  std::string data = ordered_json{{"runs", std::move(all)}}.dump(-1, ' ', false, ordered_json::error_handler_t::replace);
  // '<' only occurs inside strings there: escaped, no name can close the script element.
  std::string safe;
  safe.reserve(data.size());
  for (char c : data) {
    if (c == '<') safe += "\\u003c";
    else safe += c;
  }
  std::string title = "myriad sim";
  if (!runs.empty()) {
    if (const ordered_json name = Get(*runs.front().report, {"scenario", "name"}); name.is_string()) {
      title += ": " + name.get<std::string>();
    }
  }
  return fmt::format(
      "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>{}</title>\n<style>{}</style>\n"
      "</head>\n<body>\n<div id=\"report\"></div>\n<noscript>This report draws its charts with JavaScript.</noscript>\n"
      "<script type=\"application/json\" id=\"myriad-data\">{}</script>\n<script>{}</script>\n</body>\n</html>\n",
      HtmlEscape(title), kStyle, safe, kScript);
}

}  // namespace myriad::sim
