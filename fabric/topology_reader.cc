#include "fabric/topology_reader.h"

#include <charconv>
#include <fstream>
#include <optional>
#include <sstream>
#include <vector>

#include <fmt/format.h>

namespace ibsm {

namespace {

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f'; }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsAlpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

std::string_view TrimLeft(std::string_view s) {
  while (!s.empty() && IsSpace(s.front())) s.remove_prefix(1);
  return s;
}
std::string_view Trim(std::string_view s) {
  s = TrimLeft(s);
  while (!s.empty() && IsSpace(s.back())) s.remove_suffix(1);
  return s;
}

// The first whitespace-delimited token of s, shortened for error messages.
std::string Token(std::string_view s) {
  s = TrimLeft(s);
  size_t n = 0;
  while (n < s.size() && !IsSpace(s[n])) ++n;
  std::string t(s.substr(0, std::min<size_t>(n, 40)));
  for (char& c : t)
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) c = '?';
  if (n > 40) t += "...";
  return t;
}

// Parses an unsigned number at the front of s in the given base; advances s.
template <typename T>
std::optional<T> TakeNumber(std::string_view& s, int base = 10) {
  T v{};
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v, base);
  if (ec != std::errc() || p == s.data()) return std::nullopt;
  s.remove_prefix(static_cast<size_t>(p - s.data()));
  return v;
}

// strtoull(s, nullptr, 0) semantics (0x hex, leading 0 octal, else decimal), but a number
// must be present and must fit.
std::optional<uint64_t> TakeCNumber(std::string_view& s) {
  s = TrimLeft(s);
  if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
    std::string_view rest = s.substr(2);
    auto v = TakeNumber<uint64_t>(rest, 16);
    if (v) s = rest;
    return v;
  }
  if (s.size() > 1 && s[0] == '0' && IsDigit(s[1])) return TakeNumber<uint64_t>(s, 8);
  return TakeNumber<uint64_t>(s, 10);
}

// Extracts "quoted" at the front of s (after whitespace); advances s past the closing quote.
std::optional<std::string_view> TakeQuoted(std::string_view& s) {
  std::string_view t = TrimLeft(s);
  if (t.empty() || t[0] != '"') return std::nullopt;
  size_t e = t.find('"', 1);
  if (e == std::string_view::npos) return std::nullopt;
  s = t.substr(e + 1);
  return t.substr(1, e - 1);
}

// Finds `key ` followed by a number in s, e.g. "lid 12". nullopt if the key is absent;
// an error text if the key is there without a number.
struct KeyNumber {
  bool present = false;
  uint64_t value = 0;
  std::string_view after;  // text following the number
};
std::optional<KeyNumber> FindKeyNumber(std::string_view s, std::string_view key) {
  size_t at = s.find(key);
  while (at != std::string_view::npos && at > 0 && !IsSpace(s[at - 1])) {
    at = s.find(key, at + 1);
  }
  if (at == std::string_view::npos) return KeyNumber{};
  std::string_view rest = TrimLeft(s.substr(at + key.size()));
  auto v = TakeNumber<uint64_t>(rest);
  if (!v) return std::nullopt;
  return KeyNumber{true, *v, rest};
}

std::optional<LinkWidth> WidthFromLanes(uint64_t lanes) {
  switch (lanes) {
    case 1: return LinkWidth::k1x;
    case 2: return LinkWidth::k2x;
    case 4: return LinkWidth::k4x;
    case 8: return LinkWidth::k8x;
    case 12: return LinkWidth::k12x;
    default: return std::nullopt;
  }
}

// The widest width in an ibsim LinkWidthEnabled mask (1=1x 2=4x 4=8x 8=12x 16=2x).
std::optional<LinkWidth> WidthFromMask(uint64_t m) {
  if (m & 8) return LinkWidth::k12x;
  if (m & 4) return LinkWidth::k8x;
  if (m & 2) return LinkWidth::k4x;
  if (m & 16) return LinkWidth::k2x;
  if (m & 1) return LinkWidth::k1x;
  return std::nullopt;
}
// The fastest speed in an ibsim LinkSpeedEnabled mask (1=SDR 2=DDR 4=QDR).
std::optional<LinkSpeed> SpeedFromMask(uint64_t m) {
  if (m & 4) return LinkSpeed::kQdr;
  if (m & 2) return LinkSpeed::kDdr;
  if (m & 1) return LinkSpeed::kSdr;
  return std::nullopt;
}
// The fastest speed in a LinkSpeedExtEnabled mask (1=FDR 2=EDR 4=HDR 8=NDR); 0 = none.
std::optional<LinkSpeed> ExtSpeedFromMask(uint64_t m) {
  if (m & 8) return LinkSpeed::kNdr;
  if (m & 4) return LinkSpeed::kHdr;
  if (m & 2) return LinkSpeed::kEdr;
  if (m & 1) return LinkSpeed::kFdr;
  return std::nullopt;
}

struct Rate {
  LinkWidth width = LinkWidth::k4x;
  LinkSpeed speed = LinkSpeed::kEdr;
  bool operator==(const Rate&) const = default;
};

std::string RateName(Rate r) {
  return std::string(LinkWidthName(r.width)) + std::string(LinkSpeedName(r.speed));
}

// One port line's claim, resolved once every node is known.
struct PendingLink {
  std::string_view remote;  // points into the input text
  uint32_t line = 0;
  NodeId node = kNoNode;
  uint8_t local_port = 0;
  uint8_t remote_port = 0;
  bool has_rate = false;
  Rate rate;
};

int KindIndex(NodeKind k) {
  switch (k) {
    case NodeKind::kCa: return 0;
    case NodeKind::kSwitch: return 1;
    case NodeKind::kRouter: return 2;
  }
  return 0;
}

class Parser {
 public:
  Parser(std::string_view text, std::string_view file) : text_(text), file_(file) {}

  Result<Fabric> Run() {
    size_t pos = 0;
    while (pos <= text_.size()) {
      size_t nl = text_.find('\n', pos);
      if (nl == std::string_view::npos) nl = text_.size();
      std::string_view line = text_.substr(pos, nl - pos);
      ++line_no_;
      Status s = ParseLine(line);
      if (!s.ok()) return s;
      if (nl == text_.size()) break;
      pos = nl + 1;
    }
    IBSM_RETURN_IF_ERROR(EndRecord());
    IBSM_RETURN_IF_ERROR(ResolveLinks());
    return std::move(fabric_);
  }

 private:
  template <typename... Args>
  Status Error(uint32_t line, fmt::format_string<Args...> f, Args&&... args) const {
    return Corrupt(fmt::format("{}:{}: ", file_, line) +
                   fmt::format(f, std::forward<Args>(args)...));
  }
  template <typename... Args>
  Status Error(fmt::format_string<Args...> f, Args&&... args) const {
    return Error(line_no_, f, std::forward<Args>(args)...);
  }

  Status ParseLine(std::string_view line) {
    std::string_view t = Trim(line);
    if (in_record_) {
      if (t.empty()) return EndRecord();
      if (t[0] == '#') return Status::Ok();
      if (t[0] == '[') return ParsePortLine(t);
      if (t[0] == '@') {
        return Unsupported(fmt::format("{}:{}: ibsim port aliases ('@') are not supported",
                                       file_, line_no_));
      }
      return Error("expected '[port]' at the start of a port line, got '{}'", Token(t));
    }
    if (t.empty() || t[0] == '#') return Status::Ok();
    size_t n = 0;
    while (n < t.size() && IsAlpha(t[n])) ++n;
    std::string_view word = t.substr(0, n);
    std::string_view rest = t.substr(n);
    if (word == "Switch") return ParseHeader(NodeKind::kSwitch, rest);
    if (word == "Ca" || word == "Hca") return ParseHeader(NodeKind::kCa, rest);
    if (word == "Rt") return ParseHeader(NodeKind::kRouter, rest);
    if (word == "include" || word == "do" || word == "module") {
      return Unsupported(fmt::format("{}:{}: the ibsim '{}' directive is not supported",
                                     file_, line_no_, word));
    }
    if (word == "pdebug") return Status::Ok();
    if (word == "switchguid") return ParseGuidBase(NodeKind::kSwitch, rest);
    if (word == "caguid" || word == "hcaguids") return ParseGuidBase(NodeKind::kCa, rest);
    if (word == "rtguid") return ParseGuidBase(NodeKind::kRouter, rest);
    if (word == "vendid" || word == "devid" || word == "sysimgguid" || word == "width" ||
        word == "speed" || word == "extspeed") {
      return ParseAssignment(word, rest);
    }
    return Error(
        "expected a node header ('Switch', 'Ca', 'Hca' or 'Rt'), a 'key=value' line, a "
        "comment or a blank line, got '{}'",
        Token(t));
  }

  Status ParseGuidBase(NodeKind kind, std::string_view rest) {
    rest = TrimLeft(rest);
    if (rest.empty() || (rest[0] != '=' && rest[0] != '+')) {
      return Error("expected '=' or '+' after the GUID keyword, got '{}'", Token(rest));
    }
    bool relative = rest[0] == '+';
    rest.remove_prefix(1);
    auto v = TakeCNumber(rest);
    if (!v) return Error("expected a GUID number, got '{}'", Token(rest));
    int k = KindIndex(kind);
    if (relative) {
      next_guid_[k] = abs_guid_[k] + *v;
    } else {
      abs_guid_[k] = *v;
      next_guid_[k] = *v;
    }
    return Status::Ok();
  }

  Status ParseAssignment(std::string_view key, std::string_view rest) {
    rest = TrimLeft(rest);
    if (rest.empty() || rest[0] != '=') {
      return Error("expected '=' after '{}', got '{}'", key, Token(rest));
    }
    rest.remove_prefix(1);
    auto v = TakeCNumber(rest);
    if (!v) return Error("expected a number after '{}=', got '{}'", key, Token(rest));
    if (key == "vendid") {
      if (*v > 0xffffff) return Error("vendid {:#x} does not fit in 24 bits", *v);
      vendor_id_ = static_cast<uint32_t>(*v);
    } else if (key == "devid") {
      if (*v > 0xffff) return Error("devid {:#x} does not fit in 16 bits", *v);
      device_id_ = static_cast<uint16_t>(*v);
    } else if (key == "sysimgguid") {
      sys_image_guid_ = *v;
    } else if (key == "width") {
      auto w = WidthFromMask(*v);
      if (!w || *v > 31) return Error("expected a link width mask in 1..31, got {}", *v);
      default_rate_.width = *w;
    } else if (key == "speed") {
      auto s = SpeedFromMask(*v);
      if (!s || *v > 7) return Error("expected a link speed mask in 1..7, got {}", *v);
      if (!ext_speed_set_) default_rate_.speed = *s;
      base_speed_ = *s;
    } else {  // extspeed
      if (*v > 15) return Error("expected an extended speed mask in 0..15, got {}", *v);
      auto s = ExtSpeedFromMask(*v);
      ext_speed_set_ = s.has_value();
      default_rate_.speed = s ? *s : base_speed_;
    }
    return Status::Ok();
  }

  Status ParseHeader(NodeKind kind, std::string_view rest) {
    const std::string_view kind_name = kind == NodeKind::kSwitch ? "Switch"
                                       : kind == NodeKind::kCa   ? "Ca"
                                                                 : "Rt";
    if (rest.empty() || !IsSpace(rest[0])) {
      return Error("expected a port count after '{}', got '{}'", kind_name, Token(rest));
    }
    rest = TrimLeft(rest);
    auto ports = TakeNumber<uint32_t>(rest);
    if (!ports) return Error("expected a port count after '{}', got '{}'", kind_name, Token(rest));
    if (*ports < 1 || *ports > 255) {
      return Error("port count {} is out of range (1..255)", *ports);
    }
    auto name = TakeQuoted(rest);
    if (!name) {
      return Error("expected a quoted node name after the port count, got '{}'", Token(rest));
    }
    if (name->empty()) return Error("the node name is empty");
    if (auto prev = fabric_.FindNodeByName(*name)) {
      return Error("node \"{}\" is already defined at line {}", *name, header_line_[*prev]);
    }
    rest = TrimLeft(rest);
    std::string_view desc;
    std::string_view after_desc;
    if (!rest.empty()) {
      if (rest[0] != '#') {
        return Error("expected '#' and a description after the node name, got '{}'",
                     Token(rest));
      }
      rest = TrimLeft(rest.substr(1));
      if (!rest.empty() && rest[0] == '"') {
        auto d = TakeQuoted(rest);
        if (!d) return Error("the quoted description has no closing '\"'");
        desc = *d;
        after_desc = rest;
      } else {
        // ibsim: an unquoted description runs up to " enhanced port ", " base port ",
        // " lid " or " lmc ".
        size_t end = rest.size();
        for (std::string_view stop : {" enhanced port ", " base port ", " lid ", " lmc "}) {
          end = std::min(end, rest.find(stop));
        }
        desc = Trim(rest.substr(0, end));
        after_desc = end < rest.size() ? rest.substr(end) : std::string_view();
      }
    }
    int k = KindIndex(kind);
    Guid guid{next_guid_[k]};
    auto added = fabric_.AddNode(kind, guid, static_cast<uint8_t>(*ports), std::string(*name),
                                 std::string(desc.empty() ? *name : desc));
    if (!added.ok()) return Error("{}", added.status().message());
    NodeId id = *added;
    next_guid_[k] += kind == NodeKind::kSwitch ? 1 : *ports + 1;
    header_line_.push_back(line_no_);
    stated_line_.resize(fabric_.port_count(), 0);
    rate_set_.resize(fabric_.port_count(), 0);
    Node& n = fabric_.mutable_node(id);
    n.vendor_id = vendor_id_;
    n.device_id = device_id_;
    if (sys_image_guid_ != 0) n.system_image_guid = Guid{sys_image_guid_};
    vendor_id_ = 0;
    sys_image_guid_ = 0;

    if (kind == NodeKind::kSwitch) {
      for (uint32_t p = 0; p <= *ports; ++p) {
        fabric_.mutable_port(n.first_port + p).guid = guid;
      }
      Status s = fabric_.SetPortGuid(n.first_port, guid);
      if (!s.ok()) return Error("{}", s.message());
      auto lid = FindKeyNumber(after_desc, "lid ");
      if (!lid) return Error("expected a number after 'lid' in the switch header");
      auto lmc = FindKeyNumber(after_desc, "lmc ");
      if (!lmc) return Error("expected a number after 'lmc' in the switch header");
      if (lid->value > 0xffff) return Error("lid {} is out of range", lid->value);
      if (lmc->value > 7) return Error("lmc {} is out of range (0..7)", lmc->value);
      Port& p0 = fabric_.mutable_port(n.first_port);
      p0.lid = Lid{static_cast<uint16_t>(lid->value)};
      p0.lmc = static_cast<uint8_t>(lmc->value);
    }
    in_record_ = true;
    current_ = id;
    explicit_guid_.assign(*ports + 1u, 0);
    explicit_line_.assign(*ports + 1u, 0);
    return Status::Ok();
  }

  Status ParsePortLine(std::string_view t) {
    const Node& n = fabric_.node(current_);
    std::string_view s = t.substr(1);
    auto p = TakeNumber<uint32_t>(s);
    if (!p || s.empty() || s[0] != ']') {
      return Error("expected '[port]' at the start of a port line, got '{}'", Token(t));
    }
    s.remove_prefix(1);
    if (*p == 0 || *p > n.num_ports) {
      return Error("port {} is out of range for \"{}\" (ports 1..{})", *p, n.name, n.num_ports);
    }
    PortId local = n.first_port + *p;
    if (stated_line_[local] != 0) {
      return Error("port {} of \"{}\" is already described at line {}", *p, n.name,
                   stated_line_[local]);
    }
    stated_line_[local] = line_no_;
    if (!s.empty() && s[0] == '(') {
      s.remove_prefix(1);
      auto g = TakeNumber<uint64_t>(s, 16);
      if (!g || s.empty() || s[0] != ')') {
        return Error("expected a hex port GUID in '(...)' after '[{}]'", *p);
      }
      s.remove_prefix(1);
      if (n.kind != NodeKind::kSwitch) {
        explicit_guid_[*p] = *g;
        explicit_line_[*p] = line_no_;
      }
    }
    if (TrimLeft(s).starts_with("[ext")) {  // ibnetdiscover's external port number: skip it
      s = TrimLeft(s);
      size_t e = s.find(']');
      if (e == std::string_view::npos) return Error("expected ']' after '[ext'");
      s.remove_prefix(e + 1);
    }
    auto remote = TakeQuoted(s);
    if (!remote) {
      return Error("expected a quoted remote node name after '[{}]', got '{}'", *p, Token(s));
    }
    if (remote->empty()) return Error("the remote node name is empty");
    PendingLink link;
    link.remote = *remote;
    link.line = line_no_;
    link.node = current_;
    link.local_port = static_cast<uint8_t>(*p);
    link.remote_port = 1;  // ibsim's default when "[port]" is omitted
    link.rate = default_rate_;
    if (!s.empty() && s[0] == '[') {
      s.remove_prefix(1);
      auto rp = TakeNumber<uint32_t>(s);
      if (!rp || s.empty() || s[0] != ']') {
        return Error("expected '[port]' after the remote node name \"{}\"", *remote);
      }
      s.remove_prefix(1);
      if (*rp < 1 || *rp > 255) return Error("remote port {} is out of range (1..255)", *rp);
      link.remote_port = static_cast<uint8_t>(*rp);
    }
    if (!s.empty() && s[0] == '(') {  // the remote port's GUID: informational
      s.remove_prefix(1);
      auto g = TakeNumber<uint64_t>(s, 16);
      if (!g || s.empty() || s[0] != ')') {
        return Error("expected a hex port GUID in '(...)' after the remote port");
      }
      s.remove_prefix(1);
    }
    size_t hash = s.find('#');
    std::string_view opts = s.substr(0, hash);
    std::string_view comment = hash == std::string_view::npos ? std::string_view()
                                                              : s.substr(hash + 1);
    IBSM_RETURN_IF_ERROR(ParsePortOptions(opts, link));
    IBSM_RETURN_IF_ERROR(ParsePortComment(comment, n.kind, local, link));
    pending_.push_back(link);
    return Status::Ok();
  }

  // ibsim port options: "w=12", "s=4", "e=2" (enabled masks).
  Status ParsePortOptions(std::string_view s, PendingLink& link) {
    for (;;) {
      s = TrimLeft(s);
      if (s.empty()) return Status::Ok();
      std::string tok = Token(s);
      size_t eq = s.find('=');
      if (eq == std::string_view::npos || eq != 1) {
        return Error("expected '# comment' or a port option like 'w=4' after the remote port, "
                     "got '{}'",
                     tok);
      }
      char opt = s[0];
      std::string_view v = s.substr(2);
      auto num = TakeCNumber(v);
      if (!num) return Error("expected a number in port option '{}'", tok);
      s = v;
      if (opt == 'w') {
        auto w = WidthFromMask(*num);
        if (!w || *num > 31) return Error("bad link width mask in '{}' (1..31)", tok);
        link.rate.width = *w;
      } else if (opt == 's') {
        if (*num > 7) return Error("bad link speed mask in '{}' (0..7)", tok);
        link.rate.speed = *num ? *SpeedFromMask(*num) : LinkSpeed::kQdr;
      } else if (opt == 'e') {
        if (*num > 15) return Error("bad extended speed mask in '{}' (0..15)", tok);
        if (auto e = ExtSpeedFromMask(*num)) link.rate.speed = *e;
      } else {
        return Error("unknown port option '{}' (expected w=, s= or e=)", tok);
      }
      link.has_rate = true;
    }
  }

  // The comment of a port line. Switch: `"remote desc" lid L 4xEDR`. CA/router:
  // `lid L lmc M "remote desc" lid L 4xEDR` where the first lid/lmc are this port's.
  Status ParsePortComment(std::string_view c, NodeKind kind, PortId local, PendingLink& link) {
    size_t first_quote = c.find('"');
    size_t last_quote = c.rfind('"');
    if (first_quote != std::string_view::npos && first_quote == last_quote) {
      return Error("the quoted remote description has no closing '\"'");
    }
    if (kind != NodeKind::kSwitch && first_quote != std::string_view::npos) {
      std::string_view own = c.substr(0, first_quote);
      auto lid = FindKeyNumber(own, "lid ");
      auto lmc = FindKeyNumber(own, "lmc ");
      if (!lid) return Error("expected a number after 'lid' for this port");
      if (!lmc) return Error("expected a number after 'lmc' for this port");
      if (lid->value > 0xffff) return Error("lid {} is out of range", lid->value);
      if (lmc->value > 7) return Error("lmc {} is out of range (0..7)", lmc->value);
      Port& port = fabric_.mutable_port(local);
      port.lid = Lid{static_cast<uint16_t>(lid->value)};
      port.lmc = static_cast<uint8_t>(lmc->value);
    }
    std::string_view tail =
        last_quote == std::string_view::npos ? c : c.substr(last_quote + 1);
    auto lid = FindKeyNumber(tail, "lid ");
    if (!lid) return Error("expected a number after 'lid' in the link data");
    if (!lid->present) return Status::Ok();
    std::string_view r = TrimLeft(lid->after);
    if (r.empty()) return Status::Ok();
    std::string tok = Token(r);
    auto lanes = TakeNumber<uint32_t>(r);
    std::optional<LinkWidth> w;
    if (lanes) w = WidthFromLanes(*lanes);
    if (!w || r.empty() || (r[0] != 'x' && r[0] != 'X')) {
      return Error("expected a link rate like '4xEDR' after 'lid {}', got '{}'", lid->value,
                   tok);
    }
    r.remove_prefix(1);
    size_t e = 0;
    while (e < r.size() && !IsSpace(r[e])) ++e;
    auto sp = ParseLinkSpeed(r.substr(0, e));
    if (!sp) {
      return Error("expected a link speed (SDR, DDR, QDR, FDR10, FDR, EDR, HDR, NDR, XDR) in "
                   "'{}'",
                   tok);
    }
    link.rate = Rate{*w, *sp};
    link.has_rate = true;
    return Status::Ok();
  }

  Status EndRecord() {
    if (!in_record_) return Status::Ok();
    in_record_ = false;
    const Node& n = fabric_.node(current_);
    if (n.kind == NodeKind::kSwitch) return Status::Ok();
    for (uint32_t p = 1; p <= n.num_ports; ++p) {
      uint64_t g = explicit_guid_[p] ? explicit_guid_[p] : n.guid.value() + p;
      Status s = fabric_.SetPortGuid(n.first_port + p, Guid{g});
      if (!s.ok()) {
        return Error(explicit_line_[p] ? explicit_line_[p] : header_line_[current_], "{}",
                     s.message());
      }
    }
    return Status::Ok();
  }

  Status ResolveLinks() {
    for (const PendingLink& l : pending_) {
      auto remote = fabric_.FindNodeByName(l.remote);
      if (!remote) return Error(l.line, "unknown node \"{}\"", l.remote);
      const Node& a = fabric_.node(l.node);
      const Node& b = fabric_.node(*remote);
      if (l.remote_port > b.num_ports) {
        return Error(l.line, "remote port {} is out of range for \"{}\" (ports 1..{})",
                     l.remote_port, b.name, b.num_ports);
      }
      PortId pa = a.first_port + l.local_port;
      PortId pb = b.first_port + l.remote_port;
      if (pa == pb) return Error(l.line, "a port cannot be cabled to itself");
      const Port& x = fabric_.port(pa);
      const Port& y = fabric_.port(pb);
      if (x.peer != pb && x.peer != kNoPort) {
        const Port& other = fabric_.port(x.peer);
        return Error(l.line, "\"{}\"[{}] is cabled to \"{}\"[{}] here, but to \"{}\"[{}] at line {}",
                     a.name, l.local_port, b.name, l.remote_port,
                     fabric_.node(other.node).name, other.num.value(), stated_line_[x.peer]);
      }
      if (y.peer != pa && y.peer != kNoPort) {
        const Port& other = fabric_.port(y.peer);
        uint32_t at = stated_line_[pb] ? stated_line_[pb] : stated_line_[y.peer];
        return Error(l.line, "\"{}\"[{}] is cabled to \"{}\"[{}] here, but to \"{}\"[{}] at line {}",
                     a.name, l.local_port, b.name, l.remote_port,
                     fabric_.node(other.node).name, other.num.value(), at);
      }
      if (x.peer == kNoPort) {
        Status s = fabric_.Connect(l.node, PortNum{l.local_port}, *remote, PortNum{l.remote_port});
        if (!s.ok()) return Error(l.line, "{}", s.message());
      }
      if (!l.has_rate) continue;
      if (rate_set_[pa]) {
        Rate have{fabric_.port(pa).width, fabric_.port(pa).speed};
        if (!(have == l.rate)) {
          return Error(l.line, "link rate {} contradicts {} given at line {}", RateName(l.rate),
                       RateName(have), rate_line(pa, pb));
        }
        continue;
      }
      for (PortId p : {pa, pb}) {
        Port& port = fabric_.mutable_port(p);
        port.width = l.rate.width;
        port.speed = l.rate.speed;
        rate_set_[p] = 1;
      }
    }
    return Status::Ok();
  }

  // The line that stated the other end of the cable pa-pb (used for rate conflicts).
  uint32_t rate_line(PortId pa, PortId pb) const {
    return stated_line_[pb] ? stated_line_[pb] : stated_line_[pa];
  }

  std::string_view text_;
  std::string_view file_;
  Fabric fabric_;
  uint32_t line_no_ = 0;
  bool in_record_ = false;
  NodeId current_ = kNoNode;
  // ibsim's GUID counters, indexed by KindIndex: CA, switch, router.
  uint64_t abs_guid_[3] = {0x100000, 0x200000, 0};
  uint64_t next_guid_[3] = {0x100000, 0x200000, 0};
  uint32_t vendor_id_ = 0;
  uint16_t device_id_ = 0;
  uint64_t sys_image_guid_ = 0;
  Rate default_rate_;
  LinkSpeed base_speed_ = LinkSpeed::kEdr;
  bool ext_speed_set_ = false;
  std::vector<uint64_t> explicit_guid_;  // current record: port -> GUID from "[p](guid)"
  std::vector<uint32_t> explicit_line_;
  std::vector<uint32_t> header_line_;    // node id -> line of its header
  std::vector<uint32_t> stated_line_;    // port id -> line of its own port line, 0 if none
  std::vector<uint8_t> rate_set_;        // port id -> rate given explicitly
  std::vector<PendingLink> pending_;
};

}  // namespace

Result<Fabric> ReadTopology(std::string_view text, std::string_view file_name) {
  Parser parser(text, file_name);
  return parser.Run();
}

Result<Fabric> ReadTopologyFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return IoError("cannot open topology file " + path);
  std::ostringstream buf;
  buf << in.rdbuf();
  if (in.bad()) return IoError("cannot read topology file " + path);
  std::string text = std::move(buf).str();
  if (text.size() >= 2 && static_cast<unsigned char>(text[0]) == 0x1f &&
      static_cast<unsigned char>(text[1]) == 0x8b) {
    return Unsupported(path + " is gzip-compressed; decompress it first (zcat " + path +
                       " > net)");
  }
  return ReadTopology(text, path);
}

}  // namespace ibsm
