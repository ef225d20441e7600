// Fuzz target: every renderer of text a host controls. The input becomes the
// NodeDescriptions of a small fabric (up to 64 bytes each, any bytes, no NUL needed), and
// each place that shows them must stay what its reader expects: JSON answers parse, the SVG
// (both views) and the HTML page keep their markup balanced and XML-legal, DOT and log text
// carry no control byte, and the dump file prints OpenSM's printable form.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "base/text.h"
#include "fabric/generators.h"
#include "sm/record/control_answers.h"
#include "sm/record/dumps.h"
#include "tools/ctl_commands.h"
#include "tools/topology_html.h"
#include "tools/topology_view.h"

namespace {

void Check(bool ok, const char* what) {
  if (ok) return;
  std::fprintf(stderr, "render_fuzz: %s\n", what);
  std::abort();
}

bool NoControl(std::string_view s, bool newlines_ok) {
  for (unsigned char c : s)
    if ((c < 0x20 && !(newlines_ok && c == '\n') && c != '\t') || c == 0x7f) return false;
  return true;
}

nlohmann::json Collect(const std::function<void(const ibsm::sm::AnswerSink&)>& produce) {
  std::string text;
  produce([&](std::string_view piece) { text.append(piece); });
  auto j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  Check(!j.is_discarded(), "a JSON answer does not parse");
  return j;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const ibsm::Fabric base = *ibsm::FatTree2(4);
  ibsm::Fabric f = base;
  std::string_view in(reinterpret_cast<const char*>(data), size);
  // Descriptions for the first nodes, 64 bytes (a NodeDescription's size) each.
  for (ibsm::NodeId n = 0; n < f.node_count() && !in.empty(); ++n) {
    const size_t take = std::min<size_t>(64, in.size());
    f.mutable_node(n).description = std::string(in.substr(0, take));
    in.remove_prefix(take);
  }
  for (ibsm::NodeId n = 0; n < f.node_count(); ++n) {
    const std::string& d = f.node(n).description;
    Check(NoControl(ibsm::EscapeControls(d), false), "EscapeControls left a control byte");
    Check(ibsm::ValidUtf8(ibsm::EscapeControls(d)) == ibsm::EscapeControls(d),
          "EscapeControls is not UTF-8");
    Check(ibsm::IsPrintableAscii(ibsm::OpenSmPrintable(d)), "OpenSmPrintable not printable");
  }
  nlohmann::json nodes =
      Collect([&](const ibsm::sm::AnswerSink& s) { ibsm::sm::StreamNodesAnswer(f, s); });
  nlohmann::json links = Collect([&](const ibsm::sm::AnswerSink& s) {
    ibsm::sm::StreamLinksAnswer(f, nullptr, nullptr, true, s);
  });
  auto topo = ibsm::tools::BuildTopology(nodes["nodes"], links["links"]);
  Check(topo.ok(), "the topology of the answers does not build");
  for (auto view : {ibsm::tools::TopoView::kFull, ibsm::tools::TopoView::kAggregate}) {
    ibsm::tools::SvgOptions o;
    o.view = view;
    const std::string svg = ibsm::tools::TopologySvg(*topo, o);
    Check(ibsm::ValidUtf8(svg) == svg, "the SVG is not UTF-8");
    Check(NoControl(svg, true), "the SVG carries a control byte XML does not allow");
    size_t open = 0, close = 0;
    for (char c : svg) open += c == '<', close += c == '>';
    Check(open == close, "a name broke the SVG's markup");
  }
  // The page: the names (in the picture and in the tables) never open an element of their
  // own; its two scripts are the only ones.
  nlohmann::json health{{"cables", nlohmann::json::array()}};
  const std::string html = ibsm::tools::TopologyHtml(
      *topo, ibsm::tools::HealthTable(health), ibsm::tools::LinksTable(links));
  Check(ibsm::ValidUtf8(html) == html, "the HTML page is not UTF-8");
  Check(NoControl(html, true), "the HTML page carries a control byte");
  size_t scripts = 0;
  for (size_t at = html.find("<script"); at != std::string::npos; at = html.find("<script", at + 1))
    ++scripts;
  Check(scripts == 2, "a name became a script on the HTML page");
  const std::string body = html.substr(0, html.rfind("<script>"));
  size_t lt = 0, gt = 0;
  for (char c : body.substr(body.find("</script>"))) lt += c == '<', gt += c == '>';
  Check(lt == gt, "a name broke the HTML page's markup");
  const std::string dot = ibsm::tools::TopologyDot(*topo);
  Check(NoControl(dot, true), "the DOT text carries a control byte");
  char* buf = nullptr;
  size_t len = 0;
  std::FILE* mem = open_memstream(&buf, &len);
  ibsm::sm::WriteSubnetLst(f, ibsm::Lid{1}, mem);
  std::fclose(mem);
  std::string lst(buf, len);
  std::free(buf);
  Check(NoControl(lst, true) && ibsm::ValidUtf8(lst) == lst,
        "opensm-subnet.lst is not printable text");
  return 0;
}
