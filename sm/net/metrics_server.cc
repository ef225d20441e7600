#include "sm/net/metrics_server.h"

#include <boost/asio/read_until.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/streambuf.hpp>
#include <boost/asio/write.hpp>
#include <fmt/format.h>

#include "base/log.h"
#include "base/log_limit.h"

namespace ibsm::sm {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

class MetricsServer::Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(MetricsServer* server, tcp::socket socket)
      : server_(server),
        alive_(server->alive_),
        socket_(std::move(socket)),
        buf_(server->options_.max_request_bytes),
        timer_(server->io_) {
    ++server_->open_connections_;
  }
  ~Connection() {
    if (*alive_) --server_->open_connections_;
  }

  void Start() {
    timer_.expires_after(server_->options_.request_timeout);
    timer_.async_wait([self = shared_from_this()](boost::system::error_code ec) {
      if (ec || !*self->alive_ || !self->socket_.is_open()) return;
      ++self->server_->counters_.timed_out;
      boost::system::error_code ignored;
      self->socket_.close(ignored);
    });
    asio::async_read_until(socket_, buf_, "\r\n\r\n",
                           [self = shared_from_this()](boost::system::error_code ec, size_t n) {
                             if (!*self->alive_) return;
                             self->OnHead(ec, n);
                           });
  }

 private:
  void OnHead(boost::system::error_code ec, size_t n) {
    if (ec == asio::error::not_found) return Reply(431, "Request Header Fields Too Large", "");
    if (ec) return Close();
    std::string head(asio::buffers_begin(buf_.data()), asio::buffers_begin(buf_.data()) + n);
    std::string line = head.substr(0, head.find("\r\n"));
    // "GET /metrics HTTP/1.1"
    size_t sp1 = line.find(' ');
    size_t sp2 = sp1 == std::string::npos ? std::string::npos : line.find(' ', sp1 + 1);
    if (sp2 == std::string::npos) return Reply(400, "Bad Request", "");
    std::string method = line.substr(0, sp1);
    std::string target = line.substr(sp1 + 1, sp2 - sp1 - 1);
    if (target.find('?') != std::string::npos) target.resize(target.find('?'));
    if (method != "GET" && method != "HEAD") return Reply(405, "Method Not Allowed", "");
    if (target != "/metrics") return Reply(404, "Not Found", "ibsmd serves /metrics only\n");
    ++server_->counters_.scrapes;
    std::string body = server_->render_();
    Reply(200, "OK", method == "HEAD" ? "" : body, body.size());
  }

  void Reply(int code, const char* reason, std::string body, size_t length = SIZE_MAX) {
    if (code != 200) ++server_->counters_.bad_requests;
    auto out = std::make_shared<std::string>(fmt::format(
        "HTTP/1.0 {} {}\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\n"
        "Content-Length: {}\r\nConnection: close\r\n\r\n",
        code, reason, length == SIZE_MAX ? body.size() : length));
    *out += body;
    asio::async_write(socket_, asio::buffer(*out),
                      [self = shared_from_this(), out](boost::system::error_code, size_t) {
                        if (*self->alive_) self->Close();
                      });
  }

  void Close() {
    boost::system::error_code ignored;
    timer_.cancel();
    socket_.shutdown(tcp::socket::shutdown_both, ignored);
    socket_.close(ignored);
  }

  MetricsServer* server_;  // valid while *alive_
  std::shared_ptr<bool> alive_;
  tcp::socket socket_;
  asio::streambuf buf_;
  asio::steady_timer timer_;
};

MetricsServer::MetricsServer(asio::io_context& io, Options options, Render render)
    : io_(io), options_(std::move(options)), render_(std::move(render)), acceptor_(io) {}

Result<std::unique_ptr<MetricsServer>> MetricsServer::Start(asio::io_context& io, Options options,
                                                            Render render) {
  boost::system::error_code ec;
  auto address = asio::ip::make_address(options.address, ec);
  if (ec)
    return InvalidArgument(fmt::format("metrics_address '{}' is not an IP address", options.address));
  std::unique_ptr<MetricsServer> s(new MetricsServer(io, options, std::move(render)));
  tcp::endpoint ep(address, options.port);
  s->acceptor_.open(ep.protocol(), ec);
  if (!ec) s->acceptor_.set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec) s->acceptor_.bind(ep, ec);
  if (!ec) s->acceptor_.listen(16, ec);
  if (ec)
    return IoError(fmt::format("metrics on {}:{}: {}", options.address, options.port, ec.message()));
  s->port_ = s->acceptor_.local_endpoint().port();
  s->Accept();
  return s;
}

MetricsServer::~MetricsServer() {
  *alive_ = false;
  boost::system::error_code ignored;
  acceptor_.close(ignored);
}

void MetricsServer::Accept() {
  acceptor_.async_accept([this, alive = alive_](boost::system::error_code ec, tcp::socket socket) {
    if (!*alive) return;
    if (ec) {
      if (ec == asio::error::operation_aborted) return;
      accept_retry_.Failed(ec, acceptor_.native_handle(), [this, alive] {
        if (*alive) Accept();
      });
      return;
    }
    accept_retry_.Succeeded();
    if (open_connections_ >= options_.max_connections) {
      const uint64_t n = ++counters_.refused;
      if (ShouldLogOccurrence(n))
        Log(LogName::kSm).warn("SM-MET-003 metrics connection refused: {} are open ({} so far)",
                               open_connections_, n);
      static constexpr char kBusy[] =
          "HTTP/1.0 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
      boost::system::error_code ignored;
      socket.non_blocking(true, ignored);
      socket.write_some(asio::buffer(kBusy, sizeof kBusy - 1), ignored);  // never waits
      socket.close(ignored);
    } else {
      std::make_shared<Connection>(this, std::move(socket))->Start();
    }
    Accept();
  });
}

void MetricsText::Family(const std::string& name, const std::string& type,
                         const std::string& help) {
  family_ = name;
  out_ += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
}

void MetricsText::Sample(double value, const std::string& labels) {
  out_ += fmt::format("{}{} {}\n", family_, labels, value);
}

void MetricsText::Sample(uint64_t value, const std::string& labels) {
  out_ += fmt::format("{}{} {}\n", family_, labels, value);
}

std::string MetricsText::Labels(std::initializer_list<std::pair<std::string, std::string>> kv) {
  std::string out = "{";
  for (const auto& [k, v] : kv) {
    if (out.size() > 1) out += ',';
    out += k + "=\"";
    for (char c : v) {
      if (c == '\\' || c == '"') out += '\\';
      if (c == '\n') {
        out += "\\n";
        continue;
      }
      out += c;
    }
    out += '"';
  }
  return out + "}";
}

}  // namespace ibsm::sm
