#include "sm/net/metrics_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <optional>
#include <thread>

#include <gtest/gtest.h>

#include "sm/testing/test_util.h"

namespace ibsm::sm {
namespace {

using namespace std::chrono_literals;

class MetricsServerTest : public ::testing::Test {
 protected:
  void Start(MetricsServer::Options o = {}) {
    o.port = 0;
    auto s = MetricsServer::Start(io_, o, [this] {
      ++renders_;
      return std::string("# TYPE x gauge\nx 1\n");
    });
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    server_ = std::move(*s);
    work_.emplace(io_.get_executor());
    thread_ = std::thread([this] { io_.run(); });
  }
  void TearDown() override {
    if (thread_.joinable()) {
      work_.reset();
      io_.stop();
      thread_.join();
    }
  }
  // Connects `fd` (a TCP socket) to the server, with a 10 s receive timeout.
  void ConnectTo(int fd) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(server_->port());
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    timeval tv{10, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  }
  int Connect() {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    ConnectTo(fd);
    return fd;
  }
  // All the server sends on `fd` until it closes; "<timeout>" if it is still open after 10 s.
  static std::string ReadAll(int fd) {
    std::string out;
    char buf[4096];
    ssize_t n;
    while ((n = ::recv(fd, buf, sizeof buf, 0)) > 0) out.append(buf, static_cast<size_t>(n));
    return n < 0 ? "<timeout>" : out;
  }
  // Sends `request` (maybe nothing) and returns all the server sent before closing.
  std::string Exchange(const std::string& request) {
    int fd = Connect();
    if (!request.empty()) ::send(fd, request.data(), request.size(), MSG_NOSIGNAL);
    std::string out = ReadAll(fd);
    ::close(fd);
    return out;
  }
  void StopIo() {
    work_.reset();
    io_.stop();
    thread_.join();
  }

  boost::asio::io_context io_;
  std::optional<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> work_;
  std::thread thread_;
  std::unique_ptr<MetricsServer> server_;
  int renders_ = 0;
};

TEST_F(MetricsServerTest, ServesTheRenderedTextAtSlashMetrics) {
  Start();
  std::string r = Exchange("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(r.rfind("HTTP/1.0 200 OK\r\n", 0), 0u) << r;
  EXPECT_NE(r.find("Content-Type: text/plain; version=0.0.4"), std::string::npos);
  EXPECT_NE(r.find("\r\n\r\n# TYPE x gauge\nx 1\n"), std::string::npos) << r;
  EXPECT_NE(r.find("Content-Length: 19\r\n"), std::string::npos) << r;
}

TEST_F(MetricsServerTest, EverythingElseGetsItsStatusAndACounter) {
  MetricsServer::Options o;
  o.max_request_bytes = 512;
  o.request_timeout = 300ms;
  Start(o);
  EXPECT_EQ(Exchange("GET / HTTP/1.1\r\n\r\n").rfind("HTTP/1.0 404", 0), 0u);
  EXPECT_EQ(Exchange("POST /metrics HTTP/1.1\r\n\r\n").rfind("HTTP/1.0 405", 0), 0u);
  EXPECT_EQ(Exchange("garbage\r\n\r\n").rfind("HTTP/1.0 400", 0), 0u);
  EXPECT_EQ(Exchange("GET /metrics HTTP/1.1\r\nX: " + std::string(2000, 'a') + "\r\n\r\n")
                .rfind("HTTP/1.0 431", 0),
            0u);
  EXPECT_EQ(Exchange(""), "") << "a client that says nothing is hung up on";
  EXPECT_EQ(Exchange("GET /metrics HTTP/1.0\r\n\r\n").rfind("HTTP/1.0 200", 0), 0u)
      << "and the server still serves";
  work_.reset();
  io_.stop();
  thread_.join();
  EXPECT_EQ(server_->counters().bad_requests, 4u);
  EXPECT_EQ(server_->counters().timed_out, 1u);
  EXPECT_EQ(server_->counters().scrapes, 1u);
  EXPECT_EQ(renders_, 1);
}

// Each connection holds a descriptor for up to request_timeout: past max_connections a client
// gets 503 at once, and a slot given back serves again.
TEST_F(MetricsServerTest, ConnectionsOverTheCapGet503AndAFreedSlotServesAgain) {
  MetricsServer::Options o;
  o.max_connections = 3;
  o.request_timeout = 20s;
  Start(o);
  std::vector<int> silent;
  for (int i = 0; i < 3; ++i) silent.push_back(Connect());
  // The three are accepted before the fourth (one listen queue, accepted in order). The 503
  // comes without a request (one sent would be unread at the close, which resets the
  // connection and may lose the answer).
  EXPECT_EQ(Exchange("").rfind("HTTP/1.0 503", 0), 0u);
  ::close(silent.back());
  silent.pop_back();
  std::string r;
  for (int i = 0; i < 100 && r.rfind("HTTP/1.0 200", 0) != 0; ++i) {
    if (i) std::this_thread::sleep_for(20ms);  // until the server has seen the close
    r = Exchange("GET /metrics HTTP/1.0\r\n\r\n");
  }
  EXPECT_EQ(r.rfind("HTTP/1.0 200", 0), 0u) << r;
  for (int fd : silent) ::close(fd);
  StopIo();
  EXPECT_GE(server_->counters().refused, 1u);
}

// Out of descriptors, accept(2) fails and the connection stays queued: the server closes it
// (with its spare descriptor) instead of retrying at once for ever, logs a few lines, not a
// flood, and serves again once descriptors are back.
TEST_F(MetricsServerTest, OutOfDescriptorsAWaitingClientIsClosedAndTheServerDoesNotSpin) {
  char tmpl[] = "/tmp/ibsm-metrics-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  {
    testutil::LogCapture log(dir + "/log");
    Start();
    int waiting = ::socket(AF_INET, SOCK_STREAM, 0);  // before the descriptors run out
    std::string seen;
    {
      testutil::FdExhaustion exhausted;
      ConnectTo(waiting);
      seen = ReadAll(waiting);
      std::this_thread::sleep_for(500ms);  // a spinning server logs thousands of lines by now
    }
    ::close(waiting);
    EXPECT_EQ(seen, "") << "the waiting client is closed, not left hanging";
    EXPECT_EQ(Exchange("GET /metrics HTTP/1.0\r\n\r\n").rfind("HTTP/1.0 200", 0), 0u)
        << "and the server serves again";
    StopIo();
    EXPECT_LE(log.Count("SM-MET-001"), 10u);
    EXPECT_GE(log.Count("SM-MET-001"), 1u);
    EXPECT_GE(server_->counters().accept.shed, 1u);
  }
  std::filesystem::remove_all(dir);
}

TEST(MetricsTextTest, LabelsAreEscapedAndFamiliesDeclaredOnce) {
  MetricsText m;
  m.Family("ibsm_x_total", "counter", "things");
  m.Sample(uint64_t{3}, MetricsText::Labels({{"name", "a\"b\\c\nd"}, {"k", "v"}}));
  m.Sample(0.5);
  EXPECT_EQ(m.text(),
            "# HELP ibsm_x_total things\n# TYPE ibsm_x_total counter\n"
            "ibsm_x_total{name=\"a\\\"b\\\\c\\nd\",k=\"v\"} 3\nibsm_x_total 0.5\n");
}

TEST(MetricsServerStartTest, ABadAddressIsAClearError) {
  boost::asio::io_context io;
  MetricsServer::Options o;
  o.address = "not-an-ip";
  auto s = MetricsServer::Start(io, o, [] { return std::string(); });
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("not-an-ip"), std::string::npos);
}

}  // namespace
}  // namespace ibsm::sm
