// The one fake Transport of the tests (ARCHITECTURE.md section 9): every Send is kept with
// its handler until the test answers it (Answer), or goes to a responder the test set
// (set_on_send); every Post is kept (or only counted); unsolicited MADs reach the handler the
// code under test set through Deliver. Nothing is sent anywhere and nothing times out by
// itself. Tests that need a fabric use the simulator's SimTransport instead.
#pragma once

#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

#include "base/status.h"
#include "mad/transport.h"

namespace ibsm::mad {

class FakeTransport : public Transport {
 public:
  struct Sent {
    MadMessage msg;
    SendOptions options;
    ResponseHandler done;
  };
  using OnSend = std::function<void(MadMessage, const SendOptions&, ResponseHandler)>;

  // Each Send from now on goes to `f` instead of `sent`.
  void set_on_send(OnSend f) { on_send_ = std::move(f); }
  // Posts are counted (`posts`) but not kept: for long runs (fuzzing).
  void set_keep_posts(bool keep) { keep_posts_ = keep; }
  void set_local_port(LocalPort p) { local_ = p; }

  void Send(MadMessage request, const SendOptions& options, ResponseHandler done) override {
    ++counters_.sent;
    if (on_send_) {
      on_send_(std::move(request), options, std::move(done));
      return;
    }
    sent.push_back({std::move(request), options, std::move(done)});
  }
  Status Post(MadMessage message) override {
    ++posts;
    if (keep_posts_) posted.push_back(std::move(message));
    return Status::Ok();
  }
  void SetUnsolicitedHandler(UnsolicitedHandler handler) override {
    unsolicited_ = std::move(handler);
  }
  Result<LocalPort> QueryLocalPort() override { return local_; }
  const TransportCounters& counters() const override { return counters_; }
  void Close() override { closed = true; }

  // Ends Send `i` with `r` (an answer or an error), as the fabric would.
  void Answer(size_t i, Result<MadMessage> r) {
    ResponseHandler done = std::move(sent.at(i).done);
    done(std::move(r));
  }
  // `m` arrives from the fabric unasked. False when no handler is set.
  bool Deliver(MadMessage m) {
    if (!unsolicited_) return false;
    unsolicited_(std::move(m));
    return true;
  }

  std::vector<Sent> sent;
  std::vector<MadMessage> posted;
  uint64_t posts = 0;
  bool closed = false;

 private:
  OnSend on_send_;
  bool keep_posts_ = true;
  UnsolicitedHandler unsolicited_;
  LocalPort local_;
  TransportCounters counters_;
};

}  // namespace ibsm::mad
