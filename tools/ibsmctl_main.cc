// ibsmctl: the operator's view of an ibsm fabric. Daemon commands (status, nodes, links,
// route, lft, check, events, ha, resweep, log-level) ask ibsmd over its control socket; see
// tools/ctl_commands.h. `ibsmctl sa TABLE` reads a whole SA table
// from the master SM through the local port (libibumad; under ibsim through its preload
// library), with RMPP done in user space, so it works where saquery only sees the first
// MAD of an answer.
//
//   ibsmctl [port options] sa nodes|ports|links|switches|lfts|sminfo|guids|paths|services
//           [--lid L] [--guid G] [--slid L] [--dlid L] [--count]
//
// Exit status: 0 with records, 1 on a usage error, 2 when the SA could not be asked or
// answered with an error status (NO_RECORDS included, named on stderr).
#include <cerrno>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "mad/attr/path_record.h"
#include "mad/attr/sa_records.h"
#include "mad/umad_transport.h"
#include "tools/ctl_commands.h"
#include "tools/sa_client.h"

namespace ibsm::tools {
namespace {

struct Args {
  mad::UmadOptions port;
  std::optional<uint16_t> sa_lid;
  mad::SendOptions send{std::chrono::milliseconds(1000), 3};
  uint64_t sa_key = 0;
  std::string table;
  std::optional<uint16_t> lid, slid, dlid;
  std::optional<uint64_t> guid;
  bool count = false;
  bool json = false;  // --json: the records as JSON (README: --json on every command)
  uint64_t repeat = 0;  // ask this many times, one at a time; print rate and latencies
  std::optional<uint64_t> service_id;
  std::optional<std::string> name;
  uint32_t lease = mad::kServiceLeaseInfinite;
  uint16_t pkey = 0xffff;
  uint64_t gid_prefix = 0xfe80000000000000ull;
  uint64_t port_guid = 0;  // filled from the port for register/delete
};

Result<uint64_t> Number(const std::string& flag, const std::string& v, uint64_t max) {
  char* end = nullptr;
  errno = 0;
  unsigned long long n = std::strtoull(v.c_str(), &end, 0);
  if (v.empty() || *end != 0 || errno != 0 || n > max)
    return InvalidArgument(fmt::format("{} wants a number up to {}, got '{}'", flag, max, v));
  return n;
}

Result<Args> Parse(const std::vector<std::string>& argv) {
  Args a;
  bool in_sa = false;
  for (size_t i = 0; i < argv.size(); ++i) {
    const std::string& f = argv[i];
    auto value = [&]() -> Result<std::string> {
      if (i + 1 >= argv.size()) return InvalidArgument(f + " needs a value");
      return argv[++i];
    };
    if (f == "--json") {
      a.json = true;
    } else if (f == "--count") {
      a.count = true;
    } else if (f == "--service-id") {
      IBSM_ASSIGN_OR_RETURN(std::string v, value());
      IBSM_ASSIGN_OR_RETURN(uint64_t n, Number(f, v, UINT64_MAX));
      a.service_id = n;
    } else if (f == "--name") {
      IBSM_ASSIGN_OR_RETURN(std::string v, value());
      if (v.size() >= 64) return InvalidArgument("--name takes at most 63 bytes");
      a.name = v;
    } else if (f == "--lease") {
      IBSM_ASSIGN_OR_RETURN(std::string v, value());
      IBSM_ASSIGN_OR_RETURN(uint64_t n, Number(f, v, UINT32_MAX));
      a.lease = static_cast<uint32_t>(n);
    } else if (f == "--pkey") {
      IBSM_ASSIGN_OR_RETURN(std::string v, value());
      IBSM_ASSIGN_OR_RETURN(uint64_t n, Number(f, v, 0xffff));
      a.pkey = static_cast<uint16_t>(n);
    } else if (f == "--gid-prefix") {
      IBSM_ASSIGN_OR_RETURN(std::string v, value());
      IBSM_ASSIGN_OR_RETURN(a.gid_prefix, Number(f, v, UINT64_MAX));
    } else if (f == "--repeat") {
      IBSM_ASSIGN_OR_RETURN(std::string v, value());
      IBSM_ASSIGN_OR_RETURN(a.repeat, Number(f, v, 100000000));
    } else if (f == "--ca") {
      IBSM_ASSIGN_OR_RETURN(a.port.ca_name, value());
    } else if (f == "--port") {
      IBSM_ASSIGN_OR_RETURN(std::string v, value());
      IBSM_ASSIGN_OR_RETURN(uint64_t n, Number(f, v, 254));
      a.port.port_num = static_cast<int>(n);
    } else if (f == "--port-guid") {
      IBSM_ASSIGN_OR_RETURN(std::string v, value());
      IBSM_ASSIGN_OR_RETURN(uint64_t n, Number(f, v, UINT64_MAX));
      a.port.port_guid = Guid{n};
    } else if (f == "--sa-lid" || f == "--lid" || f == "--slid" || f == "--dlid") {
      IBSM_ASSIGN_OR_RETURN(std::string v, value());
      IBSM_ASSIGN_OR_RETURN(uint64_t n, Number(f, v, 0xffff));
      auto lid = static_cast<uint16_t>(n);
      (f == "--sa-lid" ? a.sa_lid : f == "--lid" ? a.lid : f == "--slid" ? a.slid : a.dlid) = lid;
    } else if (f == "--guid") {
      IBSM_ASSIGN_OR_RETURN(std::string v, value());
      IBSM_ASSIGN_OR_RETURN(uint64_t n, Number(f, v, UINT64_MAX));
      a.guid = n;
    } else if (f == "--timeout") {
      IBSM_ASSIGN_OR_RETURN(std::string v, value());
      IBSM_ASSIGN_OR_RETURN(uint64_t n, Number(f, v, 600000));
      a.send.timeout = std::chrono::milliseconds(n);
    } else if (f == "--retries") {
      IBSM_ASSIGN_OR_RETURN(std::string v, value());
      IBSM_ASSIGN_OR_RETURN(uint64_t n, Number(f, v, 100));
      a.send.retries = static_cast<int>(n);
    } else if (f == "--sa-key") {
      IBSM_ASSIGN_OR_RETURN(std::string v, value());
      IBSM_ASSIGN_OR_RETURN(a.sa_key, Number(f, v, UINT64_MAX));
    } else if (f == "sa" && !in_sa) {
      in_sa = true;
    } else if (in_sa && a.table.empty() && !f.starts_with("-")) {
      a.table = f;
    } else {
      return InvalidArgument("unexpected argument '" + f + "'");
    }
  }
  if (!in_sa) return InvalidArgument("no command (only `sa` exists)");
  if (a.table.empty()) return InvalidArgument("sa: which table?");
  return a;
}

std::string NodeType(mad::NodeType t) {
  switch (t) {
    case mad::NodeType::kCa: return "CA";
    case mad::NodeType::kSwitch: return "Switch";
    case mad::NodeType::kRouter: return "Router";
    default: return "?";
  }
}

std::string PortState(uint8_t s) {
  static const char* names[] = {"NOCHANGE", "DOWN", "INIT", "ARMED", "ACTIVE"};
  return s < 5 ? names[s] : fmt::format("state{}", s);
}

std::string SmStateName(mad::SmState s) {
  switch (s) {
    case mad::SmState::kNotActive: return "NOTACTIVE";
    case mad::SmState::kDiscovering: return "DISCOVERING";
    case mad::SmState::kStandby: return "STANDBY";
    case mad::SmState::kMaster: return "MASTER";
  }
  return "?";
}

std::string Text(std::span<const uint8_t> s) {
  std::string out;
  for (uint8_t c : s) {
    if (c == 0) break;
    out.push_back(c >= 0x20 && c < 0x7f ? static_cast<char>(c) : '?');
  }
  return out;
}

// Builds the request for `a.table`, or says why not.
Result<SaRequest> MakeRequest(const Args& a) {
  SaRequest req;
  const std::string& t = a.table;
  uint16_t lid = a.lid.value_or(0);
  uint64_t lid_bit = a.lid ? 1 : 0;  // component 0 of every fabric record is its LID
  if (t == "nodes") {
    mad::NodeRecord r;
    r.lid = lid;
    uint64_t mask = lid_bit;
    if (a.guid) {
      r.node_info.node_guid = *a.guid;
      mask |= 1ull << 7;  // NodeInfo.NodeGUID
    }
    req = TableRequest(r, mask);
  } else if (t == "ports") {
    mad::PortInfoRecord r;
    r.lid = lid;
    req = TableRequest(r, lid_bit);
  } else if (t == "links") {
    mad::LinkRecord r;
    r.from_lid = lid;
    req = TableRequest(r, lid_bit);
  } else if (t == "switches") {
    mad::SwitchInfoRecord r;
    r.lid = lid;
    req = TableRequest(r, lid_bit);
  } else if (t == "lfts") {
    mad::LftRecord r;
    r.lid = lid;
    req = TableRequest(r, lid_bit);
  } else if (t == "sminfo") {
    req = TableRequest(mad::SmInfoRecord{});
  } else if (t == "guids") {
    mad::GuidInfoRecord r;
    r.lid = lid;
    req = TableRequest(r, lid_bit);
  } else if (t == "services" || t == "register-service" || t == "delete-service") {
    mad::ServiceRecord r;
    uint64_t mask = 0;
    if (a.service_id) {
      r.service_id = *a.service_id;
      mask |= mad::sr_comp::kServiceId;
    }
    if (a.name) {
      std::copy(a.name->begin(), a.name->end(), r.service_name.begin());
      mask |= uint64_t{1} << 6;  // ServiceName
    }
    if (t == "services") {
      req = TableRequest(r, mask);
    } else {
      if (!a.service_id) return InvalidArgument(t + " needs --service-id");
      if (t == "register-service" && !a.name) return InvalidArgument(t + " needs --name");
      // The service lives on this port: GID = subnet prefix + port GUID.
      for (int i = 0; i < 8; ++i) {
        r.service_gid[i] = static_cast<uint8_t>(a.gid_prefix >> (56 - 8 * i));
        r.service_gid[8 + i] = static_cast<uint8_t>(a.port_guid >> (56 - 8 * i));
      }
      r.service_p_key = a.pkey;
      r.service_lease = a.lease;
      mask |= mad::sr_comp::kServiceId | mad::sr_comp::kServiceGid | mad::sr_comp::kServicePKey;
      if (t == "register-service") mask |= uint64_t{1} << 4;  // ServiceLease
      req = TableRequest(r, mask, t == "register-service" ? mad::method::kSet
                                                          : mad::method::kDelete);
    }
  } else if (t == "paths") {
    mad::PathRecord r;
    uint64_t mask = 0;
    if (a.slid) {
      r.slid = *a.slid;
      mask |= mad::path_comp::kSlid;
    }
    if (a.dlid) {
      r.dlid = *a.dlid;
      mask |= mad::path_comp::kDlid;
    }
    req.method = mad::method::kGetTable;
    req.attr_id = mad::sa_attr::kPathRecord;
    req.comp_mask = mask;
    req.record.resize(mad::Layout<mad::PathRecord>::kSize);
    mad::EncodeTo(r, req.record);
  } else {
    return InvalidArgument("unknown table '" + t + "'");
  }
  req.sm_key = a.sa_key;
  return req;
}

template <typename R>
Result<std::vector<R>> As(const SaReply& reply) {
  return DecodeRecords<R>(reply);
}

std::string Hex64(uint64_t v) { return fmt::format("{:#018x}", v); }

// One line per record on stdout, or with `json` one JSON object per record (the same fields,
// GUIDs as "0x%016x" strings as the daemon commands give them) collected into `json_out`.
// Returns how many records there were.
Result<size_t> Print(const std::string& t, const SaReply& reply, bool print,
                     nlohmann::json* json_out = nullptr) {
  auto out = [&](const std::string& line, nlohmann::json record) {
    if (json_out) {
      json_out->push_back(std::move(record));
    } else if (print) {
      std::fputs((line + "\n").c_str(), stdout);
    }
  };
  if (t == "nodes") {
    IBSM_ASSIGN_OR_RETURN(auto rs, As<mad::NodeRecord>(reply));
    for (const auto& r : rs)
      out(fmt::format("lid {} {} node_guid {:#018x} port_guid {:#018x} ports {} \"{}\"", r.lid,
                      NodeType(r.node_info.node_type), r.node_info.node_guid,
                      r.node_info.port_guid, r.node_info.num_ports,
                      Text(r.node_description.text)),
          {{"lid", r.lid}, {"type", NodeType(r.node_info.node_type)},
           {"node_guid", Hex64(r.node_info.node_guid)}, {"port_guid", Hex64(r.node_info.port_guid)},
           {"ports", r.node_info.num_ports}, {"description", Text(r.node_description.text)}});
    return rs.size();
  }
  if (t == "ports") {
    IBSM_ASSIGN_OR_RETURN(auto rs, As<mad::PortInfoRecord>(reply));
    for (const auto& r : rs)
      out(fmt::format("lid {} port {} {} port_lid {} sm_lid {} width {} speed {} mtu {}", r.lid,
                      r.port_num, PortState(r.port_info.port_state), r.port_info.lid,
                      r.port_info.master_sm_base_lid, r.port_info.link_width_active,
                      r.port_info.link_speed_active, r.port_info.neighbor_mtu),
          {{"lid", r.lid}, {"port", r.port_num}, {"state", PortState(r.port_info.port_state)},
           {"port_lid", r.port_info.lid}, {"sm_lid", r.port_info.master_sm_base_lid},
           {"width", r.port_info.link_width_active}, {"speed", r.port_info.link_speed_active},
           {"mtu", r.port_info.neighbor_mtu}});
    return rs.size();
  }
  if (t == "links") {
    IBSM_ASSIGN_OR_RETURN(auto rs, As<mad::LinkRecord>(reply));
    for (const auto& r : rs)
      out(fmt::format("{}:{} -> {}:{}", r.from_lid, r.from_port_num, r.to_lid, r.to_port_num),
          {{"from_lid", r.from_lid}, {"from_port", r.from_port_num}, {"to_lid", r.to_lid},
           {"to_port", r.to_port_num}});
    return rs.size();
  }
  if (t == "switches") {
    IBSM_ASSIGN_OR_RETURN(auto rs, As<mad::SwitchInfoRecord>(reply));
    for (const auto& r : rs)
      out(fmt::format("lid {} lft_cap {} lft_top {} mft_cap {}", r.lid,
                      r.switch_info.linear_fdb_cap, r.switch_info.linear_fdb_top,
                      r.switch_info.multicast_fdb_cap),
          {{"lid", r.lid}, {"lft_cap", r.switch_info.linear_fdb_cap},
           {"lft_top", r.switch_info.linear_fdb_top}, {"mft_cap", r.switch_info.multicast_fdb_cap}});
    return rs.size();
  }
  if (t == "lfts") {
    IBSM_ASSIGN_OR_RETURN(auto rs, As<mad::LftRecord>(reply));
    for (const auto& r : rs) {
      std::string ports;
      nlohmann::json list = nlohmann::json::array();
      for (uint8_t p : r.lft.port) {
        ports += fmt::format(" {}", p);
        list.push_back(p);
      }
      out(fmt::format("lid {} block {}:{}", r.lid, r.block_num, ports),
          {{"lid", r.lid}, {"block", r.block_num}, {"ports", list}});
    }
    return rs.size();
  }
  if (t == "sminfo") {
    IBSM_ASSIGN_OR_RETURN(auto rs, As<mad::SmInfoRecord>(reply));
    for (const auto& r : rs)
      out(fmt::format("lid {} guid {:#018x} priority {} state {} act_count {}", r.lid,
                      r.sm_info.guid, r.sm_info.priority, SmStateName(r.sm_info.sm_state),
                      r.sm_info.act_count),
          {{"lid", r.lid}, {"guid", Hex64(r.sm_info.guid)}, {"priority", r.sm_info.priority},
           {"state", SmStateName(r.sm_info.sm_state)}, {"act_count", r.sm_info.act_count}});
    return rs.size();
  }
  if (t == "guids") {
    IBSM_ASSIGN_OR_RETURN(auto rs, As<mad::GuidInfoRecord>(reply));
    for (const auto& r : rs) {
      std::string guids;
      nlohmann::json list = nlohmann::json::array();
      for (uint64_t g : r.guid_info.guid)
        if (g) {
          guids += fmt::format(" {:#018x}", g);
          list.push_back(Hex64(g));
        }
      out(fmt::format("lid {} block {}:{}", r.lid, r.block_num, guids),
          {{"lid", r.lid}, {"block", r.block_num}, {"guids", list}});
    }
    return rs.size();
  }
  if (t == "services" || t == "register-service" || t == "delete-service") {
    IBSM_ASSIGN_OR_RETURN(auto rs, As<mad::ServiceRecord>(reply));
    for (const auto& r : rs)
      out(fmt::format("id {:#018x} gid {:#018x}:{:#018x} pkey {:#06x} lease {} \"{}\"",
                      r.service_id, r.GidPrefix(), r.GidGuid(), r.service_p_key,
                      r.service_lease, Text(r.service_name)),
          {{"id", Hex64(r.service_id)},
           {"gid", Hex64(r.GidPrefix()) + ":" + Hex64(r.GidGuid())},
           {"pkey", fmt::format("{:#06x}", r.service_p_key)}, {"lease", r.service_lease},
           {"name", Text(r.service_name)}});
    return rs.size();
  }
  if (t == "paths") {
    size_t n = 0;
    for (const auto& rec : reply.records) {
      mad::PathRecord r;
      if (Status s = mad::DecodeFrom(rec, &r); !s.ok()) return s;
      out(fmt::format("slid {} dlid {} sl {} mtu {} rate {} life {} pkey {:#06x} reversible {}",
                      r.slid, r.dlid, r.sl, r.mtu, r.rate, r.packet_life_time, r.pkey,
                      r.reversible),
          {{"slid", r.slid}, {"dlid", r.dlid}, {"sl", r.sl}, {"mtu", r.mtu}, {"rate", r.rate},
           {"life", r.packet_life_time}, {"pkey", fmt::format("{:#06x}", r.pkey)},
           {"reversible", r.reversible}});
      ++n;
    }
    return n;
  }
  return InvalidArgument("unknown table '" + t + "'");
}

// --repeat: the same query N times in a row; rate and latency percentiles on stdout.
int Repeat(boost::asio::io_context& io, SaClient& client, const SaRequest& req, uint64_t n,
           uint16_t sa_lid) {
  std::vector<double> us;
  us.reserve(n);
  uint64_t errors = 0;
  auto start = std::chrono::steady_clock::now();
  for (uint64_t i = 0; i < n; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    auto reply = client.QueryAndWait(io, req);
    us.push_back(
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
    if (!reply.ok() || reply->status != 0) ++errors;
    if (!reply.ok() && reply.status().code() != StatusCode::kTimeout) {
      std::fprintf(stderr, "ibsmctl: SA at LID %u: %s\n", sa_lid,
                   reply.status().message().c_str());
      return 2;
    }
  }
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::sort(us.begin(), us.end());
  auto pct = [&](double p) {
    return us[std::min(us.size() - 1, static_cast<size_t>(p * static_cast<double>(us.size())))];
  };
  std::printf("queries %llu errors %llu seconds %.3f qps %.0f p50_us %.0f p99_us %.0f max_us %.0f\n",
              static_cast<unsigned long long>(n), static_cast<unsigned long long>(errors), s,
              static_cast<double>(n) / s, pct(0.5), pct(0.99), us.back());
  return errors == 0 ? 0 : 2;
}

// The first word that is not a global flag (or a flag's value) names the command.
bool IsSaCommand(const std::vector<std::string>& args) {
  static const std::vector<std::string> kWithValue = {
      "--socket", "--timeout", "--ca", "--port", "--port-guid", "--sa-lid", "--retries",
      "--sa-key"};
  for (size_t i = 0; i < args.size(); ++i) {
    if (std::find(kWithValue.begin(), kWithValue.end(), args[i]) != kWithValue.end()) {
      ++i;
    } else if (!args[i].starts_with("-")) {
      return args[i] == "sa";
    }
  }
  return false;
}

int Run(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (!IsSaCommand(args)) return RunCtl(args);
  if (std::find(args.begin(), args.end(), "--help") != args.end()) {
    std::fputs(CtlSaUsage(), stdout);
    return 0;
  }
  auto a = Parse(args);
  if (!a.ok()) {
    std::fprintf(stderr, "ibsmctl: %s\n%s", a.status().message().c_str(), CtlSaUsage());
    return 1;
  }
  if (auto check = MakeRequest(*a); !check.ok()) {
    std::fprintf(stderr, "ibsmctl: %s\n%s", check.status().message().c_str(), CtlSaUsage());
    return 1;
  }
  boost::asio::io_context io;
  mad::UmadOptions po = a->port;
  po.sa_server = false;
  auto transport = mad::UmadTransport::Open(io, po);
  if (!transport.ok()) {
    std::fprintf(stderr, "ibsmctl: cannot open the port: %s\n",
                 transport.status().message().c_str());
    return 2;
  }
  auto port = (*transport)->QueryLocalPort();
  if (port.ok()) a->port_guid = port->port_guid.value();
  auto req = MakeRequest(*a);  // validated above; now with the port's GUID
  if (!req.ok()) return 1;
  uint16_t sa_lid = a->sa_lid.value_or(0);
  if (!a->sa_lid) {
    auto local = (*transport)->QueryLocalPort();
    if (!local.ok() || local->sm_lid.value() == 0) {
      std::fprintf(stderr, "ibsmctl: the port knows no SM LID (no master SM?); use --sa-lid\n");
      return 2;
    }
    sa_lid = local->sm_lid.value();
  }
  SaClient client(**transport, Lid{sa_lid}, a->send);
  if (a->repeat > 0) return Repeat(io, client, *req, a->repeat, sa_lid);
  auto reply = client.QueryAndWait(io, *req);
  (*transport)->Close();
  if (!reply.ok()) {
    std::fprintf(stderr, "ibsmctl: SA at LID %u: %s\n", sa_lid, reply.status().message().c_str());
    return 2;
  }
  if (reply->status != 0) {
    std::fprintf(stderr, "ibsmctl: SA at LID %u answered %s\n", sa_lid,
                 SaStatusName(reply->status).c_str());
    return 2;
  }
  nlohmann::json records = nlohmann::json::array();
  auto n = Print(a->table, *reply, !a->count, a->json ? &records : nullptr);
  if (!n.ok()) {
    std::fprintf(stderr, "ibsmctl: bad answer: %s\n", n.status().message().c_str());
    return 2;
  }
  if (a->json) {
    nlohmann::json j{{"table", a->table}, {"sa_lid", sa_lid}, {"count", *n}};
    if (!a->count) j["records"] = std::move(records);
    std::printf("%s\n", j.dump(2).c_str());
  } else if (a->count) {
    std::printf("%zu\n", *n);
  }
  return 0;
}

}  // namespace
}  // namespace ibsm::tools

int main(int argc, char** argv) { return ibsm::tools::Run(argc, argv); }
