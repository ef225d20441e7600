#include "conf/qos_policy.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

#include "conf/text_file.h"

namespace ibsm::conf {
// Named, not anonymous: the unity build puts this file beside partitions.cc.
namespace qos_policy_detail {

constexpr size_t kMaxPolicyBytes = 4u << 20;
constexpr size_t kMaxErrors = 100;  // a file of garbage must not flood the log

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// A decimal or 0x hex number, the whole of `s`; nullopt otherwise (or past 64 bits).
std::optional<uint64_t> Number(std::string_view s) {
  int base = 10;
  if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
    base = 16;
    s.remove_prefix(2);
  }
  if (s.empty()) return std::nullopt;
  uint64_t v = 0;
  for (char c : s) {
    int d;
    if (c >= '0' && c <= '9') d = c - '0';
    else if (base == 16 && c >= 'a' && c <= 'f') d = c - 'a' + 10;
    else if (base == 16 && c >= 'A' && c <= 'F') d = c - 'A' + 10;
    else return std::nullopt;
    if (v > (UINT64_MAX - static_cast<uint64_t>(d)) / static_cast<uint64_t>(base)) return std::nullopt;
    v = v * static_cast<uint64_t>(base) + static_cast<uint64_t>(d);
  }
  return v;
}

bool InRanges(const std::vector<QosRange>& rs, uint64_t v) {
  return std::any_of(rs.begin(), rs.end(),
                     [v](const QosRange& r) { return v >= r.first && v <= r.second; });
}

class Parser {
 public:
  explicit Parser(std::string_view file) : file_(file) {}

  QosPolicyParse Run(std::string_view text) {
    int line_no = 0;
    size_t pos = 0;
    while (pos <= text.size()) {
      size_t nl = text.find('\n', pos);
      std::string_view raw = text.substr(pos, nl == std::string_view::npos ? text.npos : nl - pos);
      pos = nl == std::string_view::npos ? text.size() + 1 : nl + 1;
      ++line_no;
      std::string_view line = raw.substr(0, raw.find('#'));
      line = TrimSpace(line);
      if (line.empty()) continue;
      Line(line, line_no);
    }
    if (in_ulps_) Error(kQosPolOutside, line_no, "qos-ulps has no end-qos-ulps");
    if (!in_other_.empty())
      Error(kQosPolOutside, line_no, fmt::format("{} has no end-{}", in_other_, in_other_));
    if (!have_default_)
      Error(kQosPolNoDefault, ulps_line_,
            "no \"default : sl\" in qos-ulps (the SL when no rule matches)");
    if (!out_.errors.empty()) {
      size_t n = out_.errors.size();
      out_.errors.push_back({kQosPolRejected, std::string(file_), 0,
                             fmt::format("{} error(s): QoS policy file refused", n)});
    }
    return std::move(out_);
  }

 private:
  void Error(const char* id, int line, std::string msg) {
    if (out_.errors.size() == kMaxErrors)
      out_.errors.push_back({id, std::string(file_), line, "more errors not shown"});
    if (out_.errors.size() >= kMaxErrors) return;
    out_.errors.push_back({id, std::string(file_), line, std::move(msg)});
  }

  void Line(std::string_view line, int n) {
    const std::string word = Lower(line);
    static constexpr std::string_view kOther[] = {"port-groups", "qos-setup", "qos-levels",
                                                  "qos-match-rules"};
    if (!in_other_.empty()) {  // inside a refused section: only its end matters
      if (word == "end-" + in_other_) in_other_.clear();
      return;
    }
    if (word == "qos-ulps") {
      if (in_ulps_) Error(kQosPolOutside, n, "qos-ulps inside qos-ulps");
      in_ulps_ = true;
      ulps_line_ = n;
      return;
    }
    if (word == "end-qos-ulps") {
      if (!in_ulps_) Error(kQosPolOutside, n, "end-qos-ulps without qos-ulps");
      in_ulps_ = false;
      return;
    }
    for (std::string_view s : kOther) {
      if (word == s) {
        Error(kQosPolUnsupported, n,
              fmt::format("section {} is not supported by ibsm (only qos-ulps is; "
                          "docs/qos.md)",
                          s));
        if (in_ulps_) Error(kQosPolOutside, n, "qos-ulps has no end-qos-ulps");
        in_ulps_ = false;
        in_other_ = std::string(s);
        return;
      }
    }
    if (!in_ulps_) {
      Error(kQosPolOutside, n,
            fmt::format("'{}' outside a section (expected qos-ulps)", Printable(line)));
      return;
    }
    Rule(line, n);
  }

  // "N" or "N-M", comma-separated. False (with an error) on the first bad item.
  bool Ranges(std::string_view list, int n, std::vector<QosRange>* out) {
    if (TrimSpace(list).empty()) {
      Error(kQosPolBadLine, n, "empty list");
      return false;
    }
    size_t pos = 0;
    while (pos <= list.size()) {
      size_t comma = list.find(',', pos);
      std::string_view item =
          TrimSpace(list.substr(pos, comma == std::string_view::npos ? list.npos : comma - pos));
      pos = comma == std::string_view::npos ? list.size() + 1 : comma + 1;
      size_t dash = item.find('-');
      auto a = Number(TrimSpace(item.substr(0, dash)));
      auto b = dash == std::string_view::npos ? a : Number(TrimSpace(item.substr(dash + 1)));
      if (!a || !b) {
        Error(kQosPolBadNumber, n, fmt::format("'{}' is not a number or range", Printable(item)));
        return false;
      }
      out->push_back({std::min(*a, *b), std::max(*a, *b)});
    }
    return true;
  }

  void Rule(std::string_view line, int n) {
    size_t colon = line.rfind(':');
    if (colon == std::string_view::npos) {
      Error(kQosPolBadLine, n, fmt::format("'{}' is not \"ulp[, criterion list] : sl\"",
                                           Printable(line)));
      return;
    }
    std::string_view head = TrimSpace(line.substr(0, colon));
    std::string_view sl_text = TrimSpace(line.substr(colon + 1));
    auto sl = Number(sl_text);
    if (!sl) {
      Error(kQosPolBadNumber, n, fmt::format("SL '{}' is not a number", Printable(sl_text)));
      return;
    }
    if (*sl > 15) {
      Error(kQosPolBadSl, n, fmt::format("SL {} is above 15", *sl));
      return;
    }
    size_t comma = head.find(',');
    const std::string ulp = Lower(TrimSpace(head.substr(0, comma)));
    std::string crit;
    std::string_view list;
    if (comma != std::string_view::npos) {
      std::string_view rest = TrimSpace(head.substr(comma + 1));
      size_t sp = rest.find_first_of(kConfSpace);
      crit = Lower(rest.substr(0, sp));
      list = sp == std::string_view::npos ? std::string_view() : rest.substr(sp + 1);
    }
    QosUlpRule r;
    r.sl = static_cast<uint8_t>(*sl);
    r.line = n;
    auto bad = [&] {
      Error(kQosPolBadLine, n,
            fmt::format("'{}' is not a qos-ulps rule (default, sdp, rds, iser, ipoib, srp, "
                        "any; docs/qos.md)",
                        Printable(head)));
    };
    // Service IDs from port numbers (sdp, rds, iser with port-num): 16-bit ports.
    auto ports = [&](uint64_t base) {
      std::vector<QosRange> p;
      if (!Ranges(list, n, &p)) return false;
      for (const auto& [a, b] : p) {
        if (b > 0xFFFF) {
          Error(kQosPolBadNumber, n, fmt::format("port number {} is above 65535", b));
          return false;
        }
        r.service_ids.push_back({base + a, base + b});
      }
      return true;
    };
    // P_Keys: the membership bit is not part of the key.
    auto pkeys = [&] {
      std::vector<QosRange> p;
      if (!Ranges(list, n, &p)) return false;
      for (const auto& [a, b] : p) {
        if (b > 0xFFFF) {
          Error(kQosPolBadNumber, n, fmt::format("P_Key 0x{:x} is above 0xffff", b));
          return false;
        }
        uint64_t x = a & 0x7FFF, y = b & 0x7FFF;
        r.pkeys.push_back({std::min(x, y), std::max(x, y)});
      }
      return true;
    };
    bool ok = true;
    if (ulp == "default" && crit.empty()) {
      if (have_default_) {
        Error(kQosPolBadLine, n, "a second \"default\"");
        return;
      }
      have_default_ = true;
      out_.policy.default_sl = r.sl;
      return;
    } else if ((ulp == "sdp" || ulp == "rds" || ulp == "iser") && crit.empty()) {
      if (ulp == "sdp") r.service_ids.push_back({kQosSdpServiceId, kQosSdpServiceId + 0xFFFF});
      if (ulp == "rds") r.service_ids.push_back({kQosRdsServiceId + kQosRdsPort, kQosRdsServiceId + kQosRdsPort});
      if (ulp == "iser")
        r.service_ids.push_back({kQosIserServiceId + kQosIserPort, kQosIserServiceId + kQosIserPort});
    } else if ((ulp == "sdp" || ulp == "rds" || ulp == "iser") && crit == "port-num") {
      ok = ports(ulp == "sdp" ? kQosSdpServiceId : ulp == "rds" ? kQosRdsServiceId : kQosIserServiceId);
    } else if (ulp == "ipoib" && crit.empty()) {
      r.pkeys.push_back({0x7FFF, 0x7FFF});
    } else if (ulp == "ipoib" && crit == "pkey") {
      ok = pkeys();
    } else if (ulp == "srp" && crit == "target-port-guid") {
      ok = Ranges(list, n, &r.targets);
    } else if (ulp == "any" && crit == "service-id") {
      ok = Ranges(list, n, &r.service_ids);
    } else if (ulp == "any" && crit == "pkey") {
      ok = pkeys();
    } else if (ulp == "any" && crit == "target-port-guid") {
      ok = Ranges(list, n, &r.targets);
    } else if (ulp == "any" && crit == "source-port-guid") {
      ok = Ranges(list, n, &r.sources);
    } else if (ulp == "any" && crit == "source-target-port-guid") {
      ok = Ranges(list, n, &r.sources);
      r.targets = r.sources;
    } else {
      bad();
      return;
    }
    if (ok) out_.policy.rules.push_back(std::move(r));
  }

  std::string_view file_;
  QosPolicyParse out_;
  bool in_ulps_ = false;
  bool have_default_ = false;
  int ulps_line_ = 0;
  std::string in_other_;  // the refused section we are in
};

}  // namespace qos_policy_detail

using qos_policy_detail::InRanges;

uint8_t QosPolicy::SlFor(const QosPathQuery& q) const {
  for (const auto& r : rules) {
    if (!r.sources.empty() && !InRanges(r.sources, q.source.value())) continue;
    if (!r.targets.empty() && !InRanges(r.targets, q.target.value())) continue;
    if (!r.service_ids.empty() && (!q.service_id || !InRanges(r.service_ids, *q.service_id)))
      continue;
    if (!r.pkeys.empty() && (!q.pkey || !InRanges(r.pkeys, *q.pkey & 0x7FFFu))) continue;
    return r.sl;
  }
  return default_sl;
}

QosPolicyParse ParseQosPolicy(std::string_view text, std::string_view file_name) {
  return qos_policy_detail::Parser(file_name).Run(text);
}

Result<QosPolicyParse> LoadQosPolicyFile(const std::string& path) {
  IBSM_ASSIGN_OR_RETURN(std::string text, ReadTextFile(path, qos_policy_detail::kMaxPolicyBytes));
  return ParseQosPolicy(text, path);
}

}  // namespace ibsm::conf
