// Small helpers the sm/ unit tests share (tools/ tests too): where the SM attaches, the CA
// ports, GIDs with the default subnet prefix, partitions.conf text parsed, log lines
// counted, descriptors used up.
#pragma once

#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdint>
#include <fstream>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <gtest/gtest.h>

#include "base/log.h"
#include "conf/partitions.h"
#include "fabric/fabric.h"

namespace ibsm::sm::testutil {

inline constexpr uint64_t kDefaultPrefix = 0xfe80000000000000ull;

// The first CA's port 1: where tests attach the SM, as ibsim attaches its first client.
inline PortId FirstCaPort(const Fabric& f) {
  for (NodeId n = 0; n < f.node_count(); ++n)
    if (f.node(n).kind == NodeKind::kCa) return f.port_id(n, PortNum{1});
  return kNoPort;
}

// The lowest port cabled switch to switch (on a fat tree, a leaf's first cable up), or
// kNoPort.
inline PortId FirstSwitchCable(const Fabric& f) {
  for (PortId p = 0; p < f.port_count(); ++p) {
    const Port& port = f.port(p);
    if (port.connected() && f.node(port.node).is_switch() &&
        f.node(f.port(port.peer).node).is_switch())
      return p;
  }
  return kNoPort;
}

// The switch of lowest GUID whose name contains `part` ("-spine-": a fat tree's aggregation
// switch), or kNoNode. Taking it out renumbers every switch of higher GUID.
inline NodeId LowestGuidSwitchNamed(const Fabric& f, std::string_view part) {
  NodeId found = kNoNode;
  for (NodeId n = 0; n < f.node_count(); ++n)
    if (f.node(n).is_switch() && f.node(n).name.find(part) != std::string::npos &&
        (found == kNoNode || f.node(n).guid < f.node(found).guid))
      found = n;
  return found;
}

// Port 1 of every CA, in NodeId order.
inline std::vector<PortId> CaPorts(const Fabric& f) {
  std::vector<PortId> out;
  for (NodeId n = 0; n < f.node_count(); ++n)
    if (f.node(n).kind == NodeKind::kCa) out.push_back(f.port_id(n, PortNum{1}));
  return out;
}

// The port GID of `g` under the default subnet prefix, as wire bytes.
inline std::array<uint8_t, 16> GidOf(Guid g) {
  std::array<uint8_t, 16> gid{};
  for (size_t i = 0; i < 8; ++i) {
    gid[i] = static_cast<uint8_t>(kDefaultPrefix >> (56 - 8 * i));
    gid[8 + i] = static_cast<uint8_t>(g.value() >> (56 - 8 * i));
  }
  return gid;
}

// The non-zero entries of a P_Key table, in index order.
inline std::vector<uint16_t> UsedPKeys(const std::vector<uint16_t>& t) {
  std::vector<uint16_t> out;
  for (uint16_t k : t)
    if (k) out.push_back(k);
  return out;
}

// partitions.conf text, parsed (the test fails if it does not parse).
inline std::shared_ptr<const conf::PartitionConfig> ParsePartitionsText(const std::string& text) {
  conf::PartitionsParse r = conf::ParsePartitions(text, "partitions.conf");
  EXPECT_TRUE(r.ok());
  return std::make_shared<const conf::PartitionConfig>(r.config);
}

// Log lines of one test in a file of its own, for tests that count what was logged; the
// process logs to stderr again afterwards.
class LogCapture {
 public:
  explicit LogCapture(std::string path) : path_(std::move(path)) {
    EXPECT_TRUE(ConfigureLogging(path_, spdlog::level::info));
  }
  ~LogCapture() { ConfigureLogging("", spdlog::level::info); }
  LogCapture(const LogCapture&) = delete;
  LogCapture& operator=(const LogCapture&) = delete;
  // Lines containing `what`.
  size_t Count(const std::string& what) const {
    std::ifstream in(path_);
    size_t n = 0;
    for (std::string line; std::getline(in, line);) n += line.find(what) != std::string::npos;
    return n;
  }

 private:
  std::string path_;
};

// Uses up every file descriptor the process may open (the soft RLIMIT_NOFILE lowered to 1024
// first, so the fill is small) until destroyed, as a daemon does under a descriptor flood.
// Whatever the test needs (client sockets, log file) must be open before.
class FdExhaustion {
 public:
  FdExhaustion() {
    getrlimit(RLIMIT_NOFILE, &saved_);
    rlimit low = saved_;
    low.rlim_cur = std::min<rlim_t>(saved_.rlim_cur, 1024);
    setrlimit(RLIMIT_NOFILE, &low);
    for (int fd; (fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0;) fds_.push_back(fd);
    EXPECT_EQ(errno, EMFILE);
  }
  ~FdExhaustion() {
    for (int fd : fds_) ::close(fd);
    setrlimit(RLIMIT_NOFILE, &saved_);
  }
  FdExhaustion(const FdExhaustion&) = delete;
  FdExhaustion& operator=(const FdExhaustion&) = delete;

 private:
  rlimit saved_{};
  std::vector<int> fds_;
};

}  // namespace ibsm::sm::testutil
