#include "tools/topology_html.h"

#include <algorithm>
#include <ctime>

#include <fmt/format.h>

#include "base/text.h"

namespace ibsm::tools {

using nlohmann::json;

namespace {

constexpr char kPageStyle[] = R"css(
html, body { margin: 0; height: 100%; font-family: sans-serif; font-size: 13px; }
body { display: flex; }
#picture { flex: 3 1 0; min-width: 0; position: relative; overflow: hidden;
           border-right: 1px solid #bbb; cursor: grab; touch-action: none; }
#picture svg { display: block; width: 100%; height: 100%; }
#controls { position: absolute; top: 6px; left: 6px; }
#controls button { font-size: 14px; min-width: 2.2em; }
#tables { flex: 2 1 0; min-width: 0; overflow: auto; padding: 0 12px 12px; }
h1 { font-size: 16px; } h2 { font-size: 14px; margin-bottom: 4px; }
table { border-collapse: collapse; font-size: 11px; }
th, td { border: 1px solid #ccc; padding: 2px 4px; text-align: left; vertical-align: top; }
th { background: #eee; position: sticky; top: 0; }
tr.unhealthy td { background: #fde3d6; }
)css";

// Pan and zoom move the SVG's viewBox. `#selftest` in the address runs each once and marks
// the page, for the browser test (tests/e2e/topo_browser_test.cc).
constexpr char kPageScript[] = R"js(
(function () {
  'use strict';
  var pic = document.getElementById('picture');
  var svg = pic.querySelector('svg');
  var vb = svg.viewBox.baseVal;
  var home = { x: vb.x, y: vb.y, w: vb.width, h: vb.height };
  var box = { x: home.x, y: home.y, w: home.w, h: home.h };
  function apply() {
    svg.setAttribute('viewBox', [box.x, box.y, box.w, box.h].join(' '));
  }
  // f > 1 zooms in; the user point (cx, cy) stays where it is.
  function zoom(f, cx, cy) {
    if (cx === undefined) { cx = box.x + box.w / 2; cy = box.y + box.h / 2; }
    var w = Math.min(home.w * 4, Math.max(home.w / 400, box.w / f));
    var k = w / box.w;
    box.x = cx - (cx - box.x) * k;
    box.y = cy - (cy - box.y) * k;
    box.w = w;
    box.h *= k;
    apply();
  }
  function pan(dx, dy) { box.x += dx; box.y += dy; apply(); }
  function fit() { box = { x: home.x, y: home.y, w: home.w, h: home.h }; apply(); }
  // Screen pixels to user units (preserveAspectRatio xMidYMid meet).
  function scale() {
    var r = svg.getBoundingClientRect();
    return Math.max(box.w / Math.max(r.width, 1), box.h / Math.max(r.height, 1));
  }
  function toUser(ev) {
    var r = svg.getBoundingClientRect(), s = scale();
    var ox = r.left + (r.width - box.w / s) / 2, oy = r.top + (r.height - box.h / s) / 2;
    return { x: box.x + (ev.clientX - ox) * s, y: box.y + (ev.clientY - oy) * s };
  }
  svg.addEventListener('wheel', function (ev) {
    ev.preventDefault();
    var p = toUser(ev);
    zoom(ev.deltaY < 0 ? 1.25 : 0.8, p.x, p.y);
  }, { passive: false });
  var drag = null;
  svg.addEventListener('pointerdown', function (ev) {
    drag = { x: ev.clientX, y: ev.clientY, s: scale() };
    pic.style.cursor = 'grabbing';
    svg.setPointerCapture(ev.pointerId);
  });
  svg.addEventListener('pointermove', function (ev) {
    if (!drag) return;
    pan(-(ev.clientX - drag.x) * drag.s, -(ev.clientY - drag.y) * drag.s);
    drag.x = ev.clientX;
    drag.y = ev.clientY;
  });
  function release() { drag = null; pic.style.cursor = ''; }
  svg.addEventListener('pointerup', release);
  svg.addEventListener('pointercancel', release);
  document.getElementById('zoom-in').addEventListener('click', function () { zoom(1.5); });
  document.getElementById('zoom-out').addEventListener('click', function () { zoom(1 / 1.5); });
  document.getElementById('zoom-fit').addEventListener('click', fit);
  window.ibsmTopo = { zoom: zoom, pan: pan, fit: fit };
  if (location.hash === '#selftest') {
    var w0 = box.w;
    zoom(2);
    var zoomed = Math.abs(svg.viewBox.baseVal.width - w0 / 2) < 1e-6 * w0;
    var x0 = svg.viewBox.baseVal.x;
    pan(10, 0);
    var panned = Math.abs(svg.viewBox.baseVal.x - x0 - 10) < 1e-6;
    fit();
    var fitted = svg.viewBox.baseVal.width === home.w;
    document.body.setAttribute('data-selftest', zoomed && panned && fitted ? 'ok' : 'failed');
  }
  document.body.setAttribute('data-ready', 'yes');
})();
)js";

std::string HtmlText(const std::string& s) { return XmlText(s); }

// `t` as an HTML table with the id `id`; a row whose cell `mark` is not empty is marked
// "unhealthy" (-1: none). Marked rows first when `marked_first`.
std::string HtmlTable(const char* id, const CtlTable& t, int mark, bool marked_first) {
  std::string out = fmt::format("<p class=\"note\">{}</p>\n", HtmlText(t.note));
  out += fmt::format("<table id=\"{}\"><thead><tr>", id);
  for (const auto& h : t.header) out += "<th>" + HtmlText(h) + "</th>";
  out += "</tr></thead><tbody>\n";
  if (t.rows.empty())
    out += fmt::format("<tr><td colspan=\"{}\">{}</td></tr>\n",
                       std::max<size_t>(1, t.header.size()), HtmlText(t.note));
  auto marked = [&](const std::vector<std::string>& r) {
    const auto at = static_cast<size_t>(mark);
    return mark >= 0 && at < r.size() && !r[at].empty();
  };
  for (int pass = marked_first ? 0 : 1; pass < 2; ++pass) {
    for (const auto& r : t.rows) {
      if (marked_first && (pass == 0) != marked(r)) continue;
      out += marked(r) ? "<tr class=\"unhealthy\">" : "<tr>";
      for (const auto& c : r) out += "<td>" + HtmlText(c) + "</td>";
      out += "</tr>\n";
    }
  }
  return out + "</tbody></table>\n";
}

std::string AsOf(const json& topo) {
  if (!topo.contains("source")) return "";
  const auto us = topo.value("as_of_us", int64_t{0});
  const std::time_t t = static_cast<std::time_t>(us / 1000000);
  std::tm tm{};
  char buf[32] = "?";
  if (gmtime_r(&t, &tm)) std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &tm);
  return fmt::format("<p class=\"source\">from {} as of {} UTC (no daemon asked; what it last "
                     "recorded)</p>\n",
                     HtmlText(topo.value("source", "")), buf);
}

}  // namespace

std::string TopologyHtml(const json& topo, const CtlTable& health, const CtlTable& links,
                         const SvgOptions& o) {
  size_t switches = 0, hosts = 0;
  for (const auto& n : topo["nodes"]) (n["kind"] == "SW" ? switches : hosts)++;
  const std::string heading = fmt::format("ibsm fabric: {} switches, {} hosts, {} cables",
                                          switches, hosts, topo["links"].size());
  std::string out = "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
  out += "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n";
  out += "<title>" + HtmlText(heading) + "</title>\n";
  // First, so an error in the page's script below is on the page for the browser test.
  out += "<script>window.addEventListener('error', function (e) { document.documentElement."
         "setAttribute('data-script-error', String(e.message)); });</script>\n";
  out += std::string("<style>") + kPageStyle + "</style>\n</head>\n<body>\n";
  out += "<div id=\"picture\"><div id=\"controls\"><button id=\"zoom-in\" title=\"zoom in\">+"
         "</button><button id=\"zoom-out\" title=\"zoom out\">&#8722;</button><button "
         "id=\"zoom-fit\" title=\"the whole fabric\">fit</button></div>\n";
  out += TopologySvg(topo, o);
  out += "</div>\n<div id=\"tables\">\n<h1>" + HtmlText(heading) + "</h1>\n" + AsOf(topo);
  out += "<p>Drag to pan, the wheel or the buttons to zoom; each box names its node in full "
         "in its tooltip.</p>\n";
  out += "<h2 id=\"health\">Health (ibsmctl health)</h2>\n" +
         HtmlTable("health-table", health, -1, false);
  out += "<h2 id=\"links\">Links (ibsmctl links), unhealthy first</h2>\n" +
         HtmlTable("links-table", links, 5, true);
  out += std::string("</div>\n<script>") + kPageScript + "</script>\n</body>\n</html>\n";
  return out;
}

}  // namespace ibsm::tools
