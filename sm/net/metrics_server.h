// Prometheus text metrics over HTTP, for the fabric's monitoring: GET /metrics on a local
// TCP port (config metrics_port, 0 = off; metrics_address, default 127.0.0.1).
//
// A deliberately small HTTP/1.0 server: one request per connection, the request head at most
// 8 KiB and complete within 5 s, then the answer and close. Anything else (another path,
// another method, an oversized or slow request) gets its status code or a close, and a
// counter; the daemon never waits on a client. At most max_connections are open at once; one
// more gets 503 and is closed (counted, SM-MET-003 rate-limited). A failing accept backs off
// and sheds a waiting connection when descriptors run out (sm/net/accept_retry.h, SM-MET-001).
// Runs on the io_context's thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

#include "base/status.h"
#include "sm/net/accept_retry.h"

namespace ibsm::sm {

struct MetricsServerCounters {
  uint64_t scrapes = 0;        // 200 answers to GET /metrics
  uint64_t bad_requests = 0;   // 400/404/405/431 answers
  uint64_t timed_out = 0;      // connections closed for not sending a request in time
  uint64_t refused = 0;        // 503: max_connections were open
  AcceptCounters accept;
};

// Every MetricsServerCounters value once (as kControlCounterRows in sm/net/control_server.h).
struct MetricsServerCounterRow {
  std::string_view key;
  std::string_view family;  // ibsm_metrics_requests_total or ibsm_metrics_connections_total
  std::string_view outcome;
  uint64_t (*get)(const MetricsServerCounters&);
};
inline constexpr MetricsServerCounterRow kMetricsServerCounterRows[] = {
    {"scrapes", "ibsm_metrics_requests_total", "scrape",
     [](const MetricsServerCounters& c) { return c.scrapes; }},
    {"bad_requests", "ibsm_metrics_requests_total", "bad_request",
     [](const MetricsServerCounters& c) { return c.bad_requests; }},
    {"timed_out", "ibsm_metrics_requests_total", "timed_out",
     [](const MetricsServerCounters& c) { return c.timed_out; }},
    {"refused", "ibsm_metrics_connections_total", "busy",
     [](const MetricsServerCounters& c) { return c.refused; }},
    {"accept_failures", "ibsm_metrics_connections_total", "accept_failed",
     [](const MetricsServerCounters& c) { return c.accept.failures; }},
    {"accept_shed", "ibsm_metrics_connections_total", "shed",
     [](const MetricsServerCounters& c) { return c.accept.shed; }},
};
static_assert(std::size(kMetricsServerCounterRows) ==
              sizeof(MetricsServerCounters) / sizeof(uint64_t));

class MetricsServer {
 public:
  struct Options {
    std::string address = "127.0.0.1";
    uint16_t port = 0;  // 0: pick a free one (tests); the daemon never starts with 0
    std::chrono::milliseconds request_timeout{5000};
    size_t max_request_bytes = 8192;
    // Each holds a descriptor for up to request_timeout; a scraper needs one.
    size_t max_connections = 64;
  };
  // Renders the exposition text; called on the io thread for each scrape.
  using Render = std::function<std::string()>;

  static Result<std::unique_ptr<MetricsServer>> Start(boost::asio::io_context& io,
                                                      Options options, Render render);
  ~MetricsServer();

  uint16_t port() const { return port_; }
  const MetricsServerCounters& counters() const { return counters_; }

 private:
  class Connection;
  MetricsServer(boost::asio::io_context& io, Options options, Render render);
  void Accept();

  boost::asio::io_context& io_;
  Options options_;
  Render render_;
  boost::asio::ip::tcp::acceptor acceptor_;
  MetricsServerCounters counters_;
  AcceptRetry accept_retry_{io_, "SM-MET-001 metrics accept", counters_.accept};
  uint16_t port_ = 0;
  size_t open_connections_ = 0;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

// Prometheus text exposition helpers: `# HELP`/`# TYPE` once per family, then samples.
class MetricsText {
 public:
  // Starts a family; `type` is "counter" or "gauge".
  void Family(const std::string& name, const std::string& type, const std::string& help);
  // One sample of the current family; `labels` already formatted: {kind="switch"} or "".
  void Sample(double value, const std::string& labels = "");
  void Sample(uint64_t value, const std::string& labels = "");
  // A label set from pairs, values escaped: Labels({{"kind", "switch"}}) -> {kind="switch"}.
  static std::string Labels(std::initializer_list<std::pair<std::string, std::string>> kv);
  const std::string& text() const { return out_; }

 private:
  std::string out_;
  std::string family_;
};

}  // namespace ibsm::sm
