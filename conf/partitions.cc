#include "conf/partitions.h"

#include <arpa/inet.h>

#include <fmt/format.h>

#include "conf/text_file.h"

namespace ibsm::conf {
namespace {

constexpr size_t kMaxFileBytes = 16u << 20;
constexpr size_t kMaxDiagnostics = 100;

// Text with the line each character came from; comments ('#' to end of line) removed.
struct Text {
  std::string chars;
  std::vector<int> line;
};

// A trimmed slice of a Text: its characters and the line of its first one.
struct Piece {
  std::string text;
  int line = 0;
};

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

Piece Slice(const Text& t, size_t b, size_t e, int fallback_line) {
  while (b < e && IsSpace(t.chars[b])) ++b;
  while (e > b && IsSpace(t.chars[e - 1])) --e;
  Piece p;
  p.text = t.chars.substr(b, e - b);
  p.line = b < e ? t.line[b] : fallback_line;
  return p;
}

// Splits [b, e) of `t` at `sep`.
std::vector<Piece> Split(const Text& t, size_t b, size_t e, char sep, int fallback_line) {
  std::vector<Piece> out;
  size_t start = b;
  for (size_t i = b; i <= e; ++i) {
    if (i == e || t.chars[i] == sep) {
      out.push_back(Slice(t, start, i, start < e ? t.line[start] : fallback_line));
      start = i + 1;
    }
  }
  return out;
}

std::string Trimmed(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && IsSpace(s[b])) ++b;
  while (e > b && IsSpace(s[e - 1])) --e;
  return std::string(s.substr(b, e - b));
}

// "name=value" -> name, value (value empty and has_value false without '=').
struct NameValue {
  std::string name;
  std::string value;
  bool has_value = false;
};
NameValue SplitNameValue(std::string_view s) {
  NameValue nv;
  size_t eq = s.find('=');
  if (eq == std::string_view::npos) {
    nv.name = Trimmed(s);
  } else {
    nv.name = Trimmed(s.substr(0, eq));
    nv.value = Trimmed(s.substr(eq + 1));
    nv.has_value = true;
  }
  return nv;
}

// strtoul(s, &end, 0) that must consume all of `s`: 0x hex, leading 0 octal, else decimal.
bool ParseNumber(std::string_view s, uint64_t max, uint64_t* out) {
  if (s.empty()) return false;
  unsigned base = 10;
  if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
    base = 16;
    s.remove_prefix(2);
  } else if (s.size() > 1 && s[0] == '0') {
    base = 8;
    s.remove_prefix(1);
  }
  uint64_t v = 0;
  for (char ch : s) {
    unsigned d;
    if (ch >= '0' && ch <= '9') d = static_cast<unsigned>(ch - '0');
    else if (ch >= 'a' && ch <= 'f') d = static_cast<unsigned>(ch - 'a' + 10);
    else if (ch >= 'A' && ch <= 'F') d = static_cast<unsigned>(ch - 'A' + 10);
    else return false;
    if (d >= base) return false;
    if (d > max || v > (max - d) / base) return false;  // would pass max
    v = v * base + d;
  }
  *out = v;
  return true;
}

bool ParseMembership(std::string_view s, Membership* m) {
  if (s == "full") *m = Membership::kFull;
  else if (s == "limited") *m = Membership::kLimited;
  else if (s == "both") *m = Membership::kBoth;
  else return false;
  return true;
}

class Parser {
 public:
  explicit Parser(std::string_view file) : file_(file) {}

  PartitionsParse Run(std::string_view text) {
    Text t = StripComments(text);
    size_t start = 0;
    for (size_t i = 0; i <= t.chars.size(); ++i) {
      bool end = i == t.chars.size();
      if (!end && t.chars[i] != ';') continue;
      Piece whole = Slice(t, start, i, 0);
      if (!whole.text.empty()) {
        if (end) {
          Warn(kPartUnterminated, whole.line,
               "the last definition has no ';' (taken as if it had one)");
        }
        Statement(t, start, i);
      }
      start = i + 1;
    }
    if (out_.errors.size() >= kMaxDiagnostics) {
      out_.errors.push_back({kPartFileRejected, std::string(file_), 0,
                             "too many errors; the rest were not reported"});
    }
    return std::move(out_);
  }

 private:
  static Text StripComments(std::string_view text) {
    Text t;
    t.chars.reserve(text.size());
    t.line.reserve(text.size());
    int line = 1;
    bool comment = false;
    for (char c : text) {
      if (c == '#') comment = true;
      if (!comment) {
        t.chars.push_back(c);
        t.line.push_back(line);
      }
      if (c == '\n') {
        comment = false;
        ++line;
      }
    }
    return t;
  }

  void Error(const char* id, int line, std::string msg) {
    if (out_.errors.size() < kMaxDiagnostics)
      out_.errors.push_back({id, std::string(file_), line, std::move(msg)});
    else
      out_.errors.resize(kMaxDiagnostics);
  }
  void Warn(const char* id, int line, std::string msg) {
    if (out_.warnings.size() < kMaxDiagnostics)
      out_.warnings.push_back({id, std::string(file_), line, std::move(msg)});
  }

  // One definition: header ':' members. [b, e) excludes the ';'.
  void Statement(const Text& t, size_t b, size_t e) {
    size_t colon = t.chars.find(':', b);
    if (colon == std::string::npos || colon >= e) {
      Piece p = Slice(t, b, e, 0);
      Error(kPartNoHeader, p.line,
            fmt::format("no partition definition found (expected 'Name=PKey : members'): '{}'",
                        Printable(p.text)));
      return;
    }
    // mgid values hold ':' too, but they only come after the header's colon.
    Piece head = Slice(t, b, colon, t.line[colon]);
    std::vector<Piece> head_parts = Split(t, b, colon, ',', head.line);
    Partition* p = Header(head_parts, head.line);
    if (!p) return;
    Members(t, colon + 1, e, p, head.line);
  }

  Partition* Header(const std::vector<Piece>& parts, int line) {
    NameValue nv = SplitNameValue(parts[0].text);
    std::string name = nv.name;
    std::string id = nv.value;
    bool has_id = nv.has_value;
    if (!has_id && !name.empty() && name[0] >= '0' && name[0] <= '9') {
      id = name;  // "0x8001 : ..." names the partition by its P_Key
      name.clear();
      has_id = true;
    }
    uint16_t pkey = 0;
    if (has_id) {
      uint64_t v = 0;
      if (!ParseNumber(id, 0xFFFF, &v)) {
        Error(kPartBadPKey, parts[0].line,
              fmt::format("partition '{}': P_Key '{}' is not a number in 0..0xffff",
                          Printable(name), Printable(id)));
        return nullptr;
      }
      pkey = static_cast<uint16_t>(v & 0x7FFF);
    }
    if (name.empty() && !has_id) {
      Error(kPartNoHeader, line, "partition definition has neither a name nor a P_Key");
      return nullptr;
    }
    bool bad = false;
    Partition fresh;
    fresh.name = name;
    fresh.line = parts[0].line;
    defmember_ = Membership::kLimited;
    for (size_t i = 1; i < parts.size(); ++i) {
      NameValue f = SplitNameValue(parts[i].text);
      if (f.name.empty()) {
        Error(kPartBadFlag, parts[i].line, "bad partition flags (an empty flag)");
        bad = true;
        continue;
      }
      if (f.name == "ipoib") {
        fresh.ipoib = true;
      } else if (f.name == "indx0") {
        fresh.indx0 = true;
      } else if (f.name == "defmember") {
        if (!ParseMembership(f.value, &defmember_)) {
          Error(kPartBadFlag, parts[i].line,
                fmt::format("flag 'defmember' needs full, limited or both, not '{}'",
                            Printable(f.value)));
          bad = true;
        }
      } else {
        int r = GroupFlag(f, parts[i].line, &fresh.flags);
        if (r < 0) bad = true;
        if (r == 0) {
          Warn(kPartUnknownFlag, parts[i].line,
               fmt::format("unrecognized partition flag '{}' ignored", Printable(f.name)));
        }
      }
    }
    if (bad) return nullptr;
    auto& parts_out = out_.config.partitions;
    Partition* existing = nullptr;
    if (pkey == 0) {
      // A name alone refers to a partition defined earlier, or gets the next free P_Key.
      for (auto& q : parts_out)
        if (!name.empty() && q.name == name) existing = &q;
      if (!existing) {
        while (++next_generated_ < kDefaultPartitionKey) {
          if (!out_.config.Find(static_cast<uint16_t>(next_generated_))) break;
        }
        if (next_generated_ >= kDefaultPartitionKey) {
          Error(kPartBadPKey, line, "no free P_Key left to give partition '" +
                                        Printable(name) + "'");
          return nullptr;
        }
        pkey = static_cast<uint16_t>(next_generated_);
      }
    } else {
      for (auto& q : parts_out)
        if (q.pkey == pkey) existing = &q;
    }
    if (existing) {
      if (pkey != 0) {
        Warn(kPartDuplicate, parts[0].line,
             fmt::format("partition '{}' (0x{:04x}) defined again (first '{}' at line {}): "
                         "members and flags merged into it",
                         Printable(name), pkey, Printable(existing->name), existing->line));
      }
      existing->ipoib = existing->ipoib || fresh.ipoib;
      existing->indx0 = existing->indx0 || fresh.indx0;
      if (fresh.flags != GroupFlags{}) existing->flags = fresh.flags;
      return existing;
    }
    fresh.pkey = pkey;
    if (fresh.name.empty()) fresh.name = fmt::format("{:04x}", pkey);
    parts_out.push_back(std::move(fresh));
    return &parts_out.back();
  }

  // 1 = a group flag, parsed; 0 = not a group flag; -1 = a group flag with a bad value.
  int GroupFlag(const NameValue& f, int line, GroupFlags* g) {
    struct Spec {
      std::string_view name;
      uint64_t min, max;
    };
    static constexpr Spec kSpecs[] = {
        {"mtu", 1, 5},      {"rate", 2, 23},       {"sl", 0, 15},
        {"scope", 1, 15},   {"Q_Key", 0, 0xFFFFFFFF}, {"TClass", 0, 0xFF},
        {"FlowLabel", 0, 0xFFFFF},
    };
    for (const Spec& s : kSpecs) {
      if (f.name != s.name) continue;
      uint64_t v = 0;
      if (!ParseNumber(f.value, s.max, &v) || v < s.min) {
        Error(kPartBadFlag, line,
              fmt::format("flag '{}' needs a value in {}..{}, not '{}'", s.name, s.min, s.max,
                          Printable(f.value)));
        return -1;
      }
      if (s.name == "mtu") g->mtu = static_cast<uint8_t>(v);
      else if (s.name == "rate") g->rate = static_cast<uint8_t>(v);
      else if (s.name == "sl") g->sl = static_cast<uint8_t>(v);
      else if (s.name == "scope") g->scope_mask |= static_cast<uint16_t>(1u << v);
      else if (s.name == "Q_Key") g->q_key = static_cast<uint32_t>(v);
      else if (s.name == "TClass") g->tclass = static_cast<uint8_t>(v);
      else g->flow_label = static_cast<uint32_t>(v);
      return 1;
    }
    return 0;
  }

  void Members(const Text& t, size_t b, size_t e, Partition* p, int line) {
    std::vector<Piece> items = Split(t, b, e, ',', line);
    MulticastGroupSpec* group = nullptr;  // flags after mgid= on its line belong to it
    for (const Piece& item : items) {
      if (item.text.empty()) continue;  // "a, , b" and a trailing comma, as OpenSM
      NameValue nv = SplitNameValue(item.text);
      if (group && group->line == item.line) {
        int r = GroupFlag(nv, item.line, &group->flags);
        if (r != 0) continue;
      }
      group = nullptr;
      if (nv.name == "mgid") {
        MulticastGroupSpec g;
        g.line = item.line;
        g.flags = p->flags;
        if (inet_pton(AF_INET6, nv.value.c_str(), g.mgid.data()) != 1 || g.mgid[0] != 0xFF) {
          Error(kPartBadMgid, item.line,
                fmt::format("mgid '{}' is not a multicast GID", Printable(nv.value)));
          continue;
        }
        p->groups.push_back(g);
        group = &p->groups.back();
        continue;
      }
      PartitionMember m;
      m.line = item.line;
      m.membership = defmember_;
      if (nv.has_value && !ParseMembership(nv.value, &m.membership)) {
        m.membership = Membership::kLimited;
        Warn(kPartUnknownMembership, item.line,
             fmt::format("unrecognized membership '{}' for '{}': taken as limited",
                         Printable(nv.value), Printable(nv.name)));
      }
      if (nv.name == "NONE") continue;
      if (nv.name == "ALL") m.kind = MemberKind::kAll;
      else if (nv.name == "ALL_CAS") m.kind = MemberKind::kAllCas;
      else if (nv.name == "ALL_SWITCHES") m.kind = MemberKind::kAllSwitches;
      else if (nv.name == "ALL_ROUTERS") m.kind = MemberKind::kAllRouters;
      else if (nv.name == "SELF") m.kind = MemberKind::kSelf;
      else {
        uint64_t g = 0;
        if (!ParseNumber(nv.name, UINT64_MAX, &g) || g == 0) {
          Error(kPartBadMember, item.line,
                fmt::format("bad PortGUID '{}' in partition '{}' (a GUID, ALL, ALL_CAS, "
                            "ALL_SWITCHES, ALL_ROUTERS, SELF or NONE)",
                            Printable(nv.name), Printable(p->name)));
          continue;
        }
        m.kind = MemberKind::kGuid;
        m.guid = Guid{g};
      }
      p->members.push_back(m);
    }
  }

  std::string_view file_;
  PartitionsParse out_;
  Membership defmember_ = Membership::kLimited;
  unsigned next_generated_ = 0;
};

}  // namespace

const Partition* PartitionConfig::Find(uint16_t pkey_base) const {
  for (const auto& p : partitions)
    if (p.pkey == (pkey_base & 0x7FFF)) return &p;
  return nullptr;
}

PartitionsParse ParsePartitions(std::string_view text, std::string_view file_name) {
  return Parser(file_name).Run(text);
}

Result<PartitionsParse> LoadPartitionsFile(const std::string& path) {
  IBSM_ASSIGN_OR_RETURN(std::string text, ReadTextFile(path, kMaxFileBytes));
  return ParsePartitions(text, path);
}

}  // namespace ibsm::conf
