#include "sm/net/control_server.h"

#include <grp.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>

#include <boost/asio/post.hpp>
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "sm/testing/test_util.h"
#include "tools/control_client.h"

namespace ibsm::sm {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

// A server on its own io thread, in a fresh directory; commands are registered before the
// thread starts so the test never touches the server concurrently.
class ControlServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/ibsm-ctl-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    path_ = dir_ + "/sub/ibsmd.sock";
  }
  void TearDown() override {
    StopIo();
    server_.reset();
    std::filesystem::remove_all(dir_);
  }

  void StartServer(ControlServer::Options o = {}) {
    o.path = path_;
    if (!o.peer_uid) {
      // Connections made through ConnectAs come from the uid it was given, the rest from us.
      o.peer_uid = [this](int) {
        std::lock_guard<std::mutex> lock(uids_mu_);
        if (next_uids_.empty()) return geteuid();
        uid_t u = next_uids_.front();
        next_uids_.pop_front();
        return u;
      };
    }
    auto s = ControlServer::Start(io_, std::move(o));
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    server_ = std::move(*s);
    server_->Register("echo", ControlAccess::kRead, "returns its args",
                      [](const json& args) -> Result<json> { return args; });
    server_->Register("fail", ControlAccess::kRead, "always fails",
                      [](const json&) -> Result<json> { return Unavailable("no fabric yet"); });
    server_->Register("resweep", ControlAccess::kChange, "asks for a sweep",
                      [this](const json&) -> Result<json> {
                        ++changes_;
                        return json{{"queued", true}};
                      });
    server_->RegisterAsync("slow", ControlAccess::kRead, "answers from a worker thread",
                           [this](const json& args, ControlServer::Reply reply) {
                             workers_.emplace_back([this, args, reply] {
                               std::this_thread::sleep_for(50ms);
                               boost::asio::post(io_, [args, reply] {
                                 reply(json{{"n", args.value("n", 0) * 2}});
                               });
                             });
                           });
  }
  void RunIo() {
    work_.emplace(io_.get_executor());
    io_thread_ = std::thread([this] { io_.run(); });
  }
  void StopIo() {
    for (auto& w : workers_) w.join();
    workers_.clear();
    if (io_thread_.joinable()) {
      work_.reset();
      io_.stop();
      io_thread_.join();
    }
  }

  // A raw connection for what ControlExchange cannot do (several lines, partial lines).
  int Connect() {
    int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::snprintf(a.sun_path, sizeof a.sun_path, "%s", path_.c_str());
    EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    timeval tv{10, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    return fd;
  }
  // A connection the server takes as coming from `uid` (peer_uid above).
  int ConnectAs(uid_t uid) {
    {
      std::lock_guard<std::mutex> lock(uids_mu_);
      next_uids_.push_back(uid);
    }
    return Connect();
  }
  // One request line on `fd` and its reply (or "<closed>").
  static std::string Exchange(int fd, const std::string& line) {
    std::string out = line + "\n";
    ::send(fd, out.data(), out.size(), MSG_NOSIGNAL);
    return ReadLine(fd);
  }
  // A reply line as JSON; null for "<closed>" or anything else that is not JSON.
  static json Parsed(const std::string& line) {
    json j = json::parse(line, nullptr, /*allow_exceptions=*/false);
    return j.is_discarded() ? json() : j;
  }
  static std::string ReadLine(int fd) {
    std::string s;
    char c;
    while (::recv(fd, &c, 1, 0) == 1) {
      if (c == '\n') return s;
      s.push_back(c);
    }
    return s.empty() ? "<closed>" : s;
  }

  boost::asio::io_context io_;
  std::optional<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> work_;
  std::thread io_thread_;
  std::vector<std::thread> workers_;
  std::unique_ptr<ControlServer> server_;
  std::string dir_, path_;
  std::atomic<int> changes_{0};
  std::mutex uids_mu_;
  std::deque<uid_t> next_uids_;
};


TEST_F(ControlServerTest, AnswersACommandWithItsResultAndHelpListsEveryCommand) {
  StartServer();
  RunIo();
  auto r = tools::CallControl(path_, "echo", json{{"lid", 12}});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ((*r)["lid"], 12);
  auto help = tools::CallControl(path_, "help");
  ASSERT_TRUE(help.ok());
  std::vector<std::string> names;
  for (const auto& c : (*help)["commands"]) names.push_back(c["cmd"]);
  EXPECT_EQ(names, (std::vector<std::string>{"echo", "fail", "help", "resweep", "slow"}));
  struct stat st {};
  ASSERT_EQ(stat(path_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0660u);
}

TEST_F(ControlServerTest, BadRequestsGetAnErrorReplyAndTheConnectionGoesOn) {
  StartServer();
  RunIo();
  int fd = Connect();
  const std::string lines =
      "this is not json\n[1,2]\n{\"args\":{}}\n{\"cmd\":\"echo\",\"args\":[1]}\n"
      "{\"cmd\":\"nope\",\"id\":7}\n{\"cmd\":\"fail\"}\n\n{\"cmd\":\"echo\",\"args\":{\"x\":1},\"id\":\"a\"}\n";
  ASSERT_EQ(::send(fd, lines.data(), lines.size(), 0), static_cast<ssize_t>(lines.size()));
  std::vector<json> replies;
  for (int i = 0; i < 7; ++i) replies.push_back(json::parse(ReadLine(fd)));
  ::close(fd);
  EXPECT_EQ(replies[0]["code"], "bad_request");
  EXPECT_EQ(replies[1]["code"], "bad_request");
  EXPECT_EQ(replies[2]["code"], "bad_request");
  EXPECT_EQ(replies[3]["code"], "bad_request");
  EXPECT_EQ(replies[4]["code"], "unknown_command");
  EXPECT_EQ(replies[4]["id"], 7);
  EXPECT_EQ(replies[5]["code"], "failed");
  EXPECT_EQ(replies[5]["error"], "no fabric yet");
  EXPECT_EQ(replies[6]["ok"], true);
  EXPECT_EQ(replies[6]["result"]["x"], 1);
  EXPECT_EQ(replies[6]["id"], "a");
  StopIo();
  EXPECT_EQ(server_->counters().bad_requests, 4u);
  EXPECT_EQ(server_->counters().unknown_commands, 1u);
  EXPECT_EQ(server_->counters().failed, 1u);
}

TEST_F(ControlServerTest, ARequestLongerThanTheLimitIsRefusedAndTheConnectionClosed) {
  ControlServer::Options o;
  o.max_request_bytes = 1024;
  StartServer(o);
  RunIo();
  int fd = Connect();
  std::string big = "{\"cmd\":\"echo\",\"args\":{\"x\":\"" + std::string(4096, 'a') + "\"}}\n";
  ::send(fd, big.data(), big.size(), MSG_NOSIGNAL);
  json reply = json::parse(ReadLine(fd));
  EXPECT_EQ(reply["code"], "too_large");
  EXPECT_EQ(ReadLine(fd), "<closed>");
  ::close(fd);
  // The daemon still serves everyone else.
  EXPECT_TRUE(tools::CallControl(path_, "echo").ok());
  StopIo();
  EXPECT_EQ(server_->counters().too_large, 1u);
}

// A request nested deeper than 32 levels is refused before it is copied or dumped (each of
// those recurses per level: 32,000 levels need megabytes of stack), and the connection goes on.
TEST_F(ControlServerTest, ARequestNestedDeeperThan32LevelsIsABadRequestAndTheConnectionGoesOn) {
  StartServer();
  RunIo();
  int fd = Connect();
  auto nested = [](size_t levels) {
    return std::string(levels, '[') + std::string(levels, ']');
  };
  // The request object is level 1, "args" 2, "x" 3..: 30 levels inside "x" is 32 in all.
  const std::string lines = "{\"cmd\":\"echo\",\"args\":{\"x\":" + nested(30) + "}}\n" +
                            "{\"cmd\":\"echo\",\"args\":{\"x\":" + nested(31) + "}}\n" +
                            "{\"cmd\":\"echo\",\"id\":" + nested(32000) + "}\n" +
                            "{\"cmd\":\"echo\",\"args\":{\"y\":2}}\n";
  ASSERT_EQ(::send(fd, lines.data(), lines.size(), 0), static_cast<ssize_t>(lines.size()));
  json at_limit = json::parse(ReadLine(fd));
  json over = json::parse(ReadLine(fd));
  json deep = json::parse(ReadLine(fd));
  json after = json::parse(ReadLine(fd));
  ::close(fd);
  EXPECT_EQ(at_limit["ok"], true) << at_limit.dump();
  EXPECT_EQ(over["code"], "bad_request") << over.dump();
  EXPECT_EQ(over["error"], "a request is nested at most 32 levels deep");
  EXPECT_EQ(deep["code"], "bad_request");
  EXPECT_FALSE(deep.contains("id")) << "the refused id is not echoed";
  EXPECT_EQ(after["result"]["y"], 2);
  StopIo();
  EXPECT_EQ(server_->counters().bad_requests, 2u);
}

TEST_F(ControlServerTest, ChangeCommandsRunOnlyForTheAllowedUsers) {
  ControlServer::Options o;
  o.change_uids = {static_cast<uid_t>(geteuid() + 4242)};  // not us
  StartServer(o);
  RunIo();
  auto denied = tools::CallControl(path_, "resweep");
  ASSERT_FALSE(denied.ok());
  EXPECT_EQ(denied.status().code(), StatusCode::kPermissionDenied);
  EXPECT_TRUE(tools::CallControl(path_, "echo").ok()) << "read-only commands stay open";
  StopIo();
  EXPECT_EQ(changes_.load(), 0);
  EXPECT_EQ(server_->counters().denied, 1u);
}

// Members of the socket group (uids 1000 and 1001 here) fill every slot they may take; root
// (a change uid) is still served, and one member cannot take another's share.
TEST_F(ControlServerTest, GroupMembersCannotLockRootOutNorCrowdEachOtherOut) {
  ControlServer::Options o;
  o.max_connections = 6;
  o.reserved_change_slots = 2;
  o.max_connections_per_uid = 3;
  o.change_uids = {0};
  StartServer(o);
  RunIo();
  const std::string echo = R"({"cmd":"echo","args":{"x":1}})";
  std::vector<int> held;
  for (uid_t uid : {1000u, 1000u, 1000u}) {
    held.push_back(ConnectAs(uid));
    EXPECT_EQ(Parsed(Exchange(held.back(), echo))["ok"], true);
  }
  int fourth = ConnectAs(1000);
  json busy = Parsed(ReadLine(fourth));
  EXPECT_EQ(busy["code"], "busy");
  EXPECT_EQ(busy["error"], "at most 3 control connections per user");
  EXPECT_EQ(ReadLine(fourth), "<closed>");
  ::close(fourth);

  held.push_back(ConnectAs(1001));
  EXPECT_EQ(Parsed(Exchange(held.back(), echo))["ok"], true) << "another member is served";
  int fifth = ConnectAs(1001);
  busy = Parsed(ReadLine(fifth));
  EXPECT_EQ(busy["code"], "busy");
  EXPECT_EQ(busy["error"], "the last 2 of 6 control connections are kept for root");
  ::close(fifth);

  for (int i = 0; i < 2; ++i) {
    held.push_back(ConnectAs(0));
    json r = Parsed(Exchange(held.back(), R"({"cmd":"resweep"})"));
    EXPECT_EQ(r["ok"], true) << "root is served in its reserved slot: " << r.dump();
  }
  int seventh = ConnectAs(0);
  EXPECT_EQ(Parsed(ReadLine(seventh))["error"], "at most 6 control connections");
  ::close(seventh);

  // A slot given back is free again.
  ::close(held.front());
  held.erase(held.begin());
  bool served = false;
  for (int attempt = 0; attempt < 100 && !served; ++attempt) {
    int again = ConnectAs(1000);
    std::string reply = Exchange(again, echo);
    served = Parsed(reply)["ok"] == true;
    ::close(again);
    if (!served) std::this_thread::sleep_for(20ms);  // the close may not be seen yet
  }
  EXPECT_TRUE(served);
  for (int fd : held) ::close(fd);
  StopIo();
  EXPECT_GE(server_->counters().connections_refused, 3u);
  EXPECT_EQ(changes_.load(), 2);
}

// Blank lines are tolerated but are no activity: a client that sends nothing else is hung up
// on after the idle timeout as if it were silent.
TEST_F(ControlServerTest, BlankLinesDoNotKeepAnIdleConnectionOpen) {
  ControlServer::Options o;
  o.idle_timeout = 300ms;
  StartServer(o);
  RunIo();
  int fd = Connect();
  timeval tv{0, 50000};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  bool closed = false;
  const auto give_up = std::chrono::steady_clock::now() + 20s;
  while (!closed && std::chrono::steady_clock::now() < give_up) {
    if (::send(fd, "\n", 1, MSG_NOSIGNAL) != 1) break;
    char c;
    closed = ::recv(fd, &c, 1, 0) == 0;  // times out after 50 ms while the server keeps it
  }
  EXPECT_TRUE(closed) << "still open after 20 s of blank lines";
  ::close(fd);
  StopIo();
  EXPECT_EQ(server_->counters().idle_closed, 1u);
  EXPECT_EQ(server_->counters().requests, 0u);
}

// Refusals are counted one by one but logged as the first ten and then every thousandth, so
// a group member looping on a change command cannot fill the log.
TEST_F(ControlServerTest, ManyRefusedChangeCommandsAreCountedButLoggedTenTimes) {
  testutil::LogCapture log(dir_ + "/ibsmd.log");
  ControlServer::Options o;
  o.change_uids = {0};
  StartServer(o);
  RunIo();
  int fd = ConnectAs(1000);
  for (int i = 0; i < 200; ++i)
    ASSERT_EQ(Parsed(Exchange(fd, R"({"cmd":"resweep"})"))["code"], "permission_denied");
  ::close(fd);
  StopIo();
  EXPECT_EQ(server_->counters().denied, 200u);
  EXPECT_EQ(log.Count("SM-CTL-002"), 10u);
  EXPECT_EQ(log.Count("(10 so far)"), 1u);
}

// Out of descriptors, accept(2) fails and the connection stays queued: the server closes it
// (with its spare descriptor) instead of retrying at once for ever, logs a few lines, not a
// flood, and serves again once descriptors are back.
TEST_F(ControlServerTest, OutOfDescriptorsAWaitingClientIsClosedAndTheServerDoesNotSpin) {
  testutil::LogCapture log(dir_ + "/ibsmd.log");
  StartServer();
  RunIo();
  int waiting = ::socket(AF_UNIX, SOCK_STREAM, 0);  // before the descriptors run out
  std::string seen;
  {
    testutil::FdExhaustion exhausted;
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::snprintf(a.sun_path, sizeof a.sun_path, "%s", path_.c_str());
    ASSERT_EQ(::connect(waiting, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    timeval tv{10, 0};
    setsockopt(waiting, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    char c;
    ssize_t n = ::recv(waiting, &c, 1, 0);
    seen = n == 0 ? "<closed>" : n < 0 ? "<timeout>" : "<data>";
    std::this_thread::sleep_for(500ms);  // a spinning server logs thousands of lines by now
  }
  ::close(waiting);
  EXPECT_EQ(seen, "<closed>") << "the waiting client is closed, not left hanging";
  EXPECT_TRUE(tools::CallControl(path_, "echo").ok()) << "and the server serves again";
  StopIo();
  EXPECT_LE(log.Count("SM-CTL-001"), 10u);
  EXPECT_GE(log.Count("SM-CTL-001"), 1u);
  EXPECT_GE(server_->counters().accept.shed, 1u);
}

TEST_F(ControlServerTest, TheDaemonsOwnUserMayChangeByDefault) {
  StartServer();
  RunIo();
  auto r = tools::CallControl(path_, "resweep");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ((*r)["queued"], true);
  EXPECT_EQ(changes_.load(), 1);
}

TEST_F(ControlServerTest, AnIdleOrSilentClientNeitherBlocksOthersNorStaysForever) {
  ControlServer::Options o;
  o.idle_timeout = 300ms;
  StartServer(o);
  RunIo();
  int silent = Connect();
  ::send(silent, "{\"cmd\":", 7, 0);  // half a request, then nothing
  auto r = tools::CallControl(path_, "slow", json{{"n", 21}});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ((*r)["n"], 42);
  EXPECT_EQ(ReadLine(silent), "<closed>") << "the daemon hangs up on a client that stalls";
  ::close(silent);
  StopIo();
  EXPECT_GE(server_->counters().idle_closed, 1u);
}

TEST_F(ControlServerTest, AStaleSocketFileIsReplacedButALiveOneIsNotTaken) {
  StartServer();
  boost::asio::io_context other;
  ControlServer::Options o;
  o.path = path_;
  auto second = ControlServer::Start(other, o);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), StatusCode::kAlreadyExists);
  EXPECT_TRUE(std::filesystem::exists(path_)) << "the live daemon's socket is left alone";

  // A socket file nobody listens on (a daemon killed with -9) is replaced.
  server_.reset();
  int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::snprintf(a.sun_path, sizeof a.sun_path, "%s", path_.c_str());
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ::close(fd);
  ASSERT_TRUE(std::filesystem::exists(path_));
  auto third = ControlServer::Start(other, o);
  EXPECT_TRUE(third.ok()) << third.status().ToString();
}

// Whoever can write to the socket's directory can swap the socket for a symlink (root then
// chgrps and chmods its target) or for their own socket: such a directory is refused, unless
// it is sticky like /tmp. The daemon's own group may write there.
TEST_F(ControlServerTest, ASocketDirectoryOthersCanWriteToIsRefusedUnlessSticky) {
  ControlServer::Options o;
  std::vector<mode_t> modes = {0777};
  if (geteuid() == 0) modes.push_back(0770);  // with another group (only root can give one)
  for (mode_t mode : modes) {
    const std::string dir = dir_ + fmt::format("/open{:o}", mode);
    ASSERT_EQ(::mkdir(dir.c_str(), 0700), 0);
    ASSERT_EQ(::chmod(dir.c_str(), mode), 0);
    if (mode == 0770) {
      ASSERT_EQ(::chown(dir.c_str(), static_cast<uid_t>(-1), 65534), 0);
    }
    o.path = dir + "/ibsmd.sock";
    auto s = ControlServer::Start(io_, o);
    ASSERT_FALSE(s.ok()) << "mode " << std::oct << mode;
    EXPECT_EQ(s.status().code(), StatusCode::kFailedPrecondition);
    EXPECT_NE(s.status().message().find("another user could replace the socket"),
              std::string::npos)
        << s.status().message();
    EXPECT_FALSE(std::filesystem::exists(o.path)) << "no socket was made there";
  }
  const std::string sticky = dir_ + "/sticky";
  ASSERT_EQ(::mkdir(sticky.c_str(), 0700), 0);
  ASSERT_EQ(::chmod(sticky.c_str(), 01777), 0);
  o.path = sticky + "/ibsmd.sock";
  auto s = ControlServer::Start(io_, o);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  const std::string own_group = dir_ + "/own-group";
  ASSERT_EQ(::mkdir(own_group.c_str(), 0700), 0);
  ASSERT_EQ(::chmod(own_group.c_str(), 0770), 0);  // the group is ours (mkdir gave it)
  o.path = own_group + "/ibsmd.sock";
  auto own = ControlServer::Start(io_, o);
  EXPECT_TRUE(own.ok()) << own.status().ToString();
  if (geteuid() == 0) {  // a directory of another user (only root can make one)
    const std::string theirs = dir_ + "/theirs";
    ASSERT_EQ(::mkdir(theirs.c_str(), 0755), 0);
    ASSERT_EQ(::chown(theirs.c_str(), 65534, 65534), 0);
    o.path = theirs + "/ibsmd.sock";
    auto t = ControlServer::Start(io_, o);
    ASSERT_FALSE(t.ok());
    EXPECT_NE(t.status().message().find("belongs to uid 65534"), std::string::npos);
  }
}

// The group gets the mode's bits even under a umask that takes them (the unit's UMask=0027
// takes the group's write, which connecting needs), and the file is the daemon's group's.
TEST_F(ControlServerTest, TheSocketHasItsModeAndGroupWhateverTheUmask) {
  const mode_t old_umask = ::umask(0077);
  ControlServer::Options o;
  o.mode = 0660;
  struct group* g = getgrgid(getegid());
  ASSERT_NE(g, nullptr);
  o.group = g->gr_name;
  StartServer(o);
  ::umask(old_umask);
  struct stat st {};
  ASSERT_EQ(::lstat(path_.c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(st.st_mode & 07777, 0660u);
  EXPECT_EQ(st.st_gid, getegid());
  RunIo();
  EXPECT_TRUE(tools::CallControl(path_, "echo").ok());
}

TEST_F(ControlServerTest, NoDaemonIsAClearError) {
  auto r = tools::CallControl(dir_ + "/none.sock", "status");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(r.status().message().find("is ibsmd running"), std::string::npos);
}

}  // namespace
}  // namespace ibsm::sm
