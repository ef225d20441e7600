// Link flap damping: a cable that changes state `threshold` times within `window` is damped,
// kept out of the SM's model (not routed over, not armed) until it has stayed quiet, with no
// new down seen, for `hold`. So a port flapping at 10 Hz costs a few re-routes, not one per
// flap, and the fabric is not re-routed back onto a link that is about to fail again.
// OpenSM has no equivalent (its every trap is a heavy sweep); ARCHITECTURE.md "Repair sweep".
//
// A cable is named by its ends, each (node GUID, port number); both ends are noted, and a
// cable is damped when either end is. Threading: the io thread only.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "fabric/fabric.h"

namespace ibsm::sm {

struct LinkDampingOptions {
  uint32_t threshold = 5;  // changes within `window` that damp a cable; 0: damping off
  std::chrono::seconds window{10};
  std::chrono::seconds hold{60};  // quiet time before a damped cable is used again
};

class LinkDamper {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;
  using End = std::pair<Guid, uint8_t>;  // (node GUID, port number)

  explicit LinkDamper(LinkDampingOptions o = {}) : options_(o) {}
  void set_options(LinkDampingOptions o) { options_ = o; }
  const LinkDampingOptions& options() const { return options_; }

  // The cable between `a` and `b` went down at `now`, or, while out of the SM's model after a
  // recent down, its switch reported another change (it came up, or flaps on): each counts.
  // True when this damps the cable (it was not).
  bool NoteDown(End a, End b, TimePoint now);
  // The cables of node `g` with a change inside the window and not damped: (its end, the
  // other end).
  std::vector<std::pair<End, End>> RecentCables(Guid g) const;
  // A damped end read `up` (or down) at `now`: a change from what it was last read as means
  // it is still flapping, and its hold starts again. No effect on an end not damped.
  void NoteState(End e, bool up, TimePoint now);
  // Node `g` reported a port change that was not read (a trap ignored as a repeat): its
  // damped ends may still be flapping, so their holds start again.
  void Touch(Guid g, TimePoint now);
  // True while either end is damped.
  bool Damped(End a, End b) const { return damped_.count(a) || damped_.count(b); }
  bool Damped(End e) const { return damped_.count(e) != 0; }
  // Ends whose hold ran out by `now`: no longer damped. Returned so the caller can bring
  // their cables back (a heavy sweep).
  std::vector<End> Release(TimePoint now);
  // When the next damped end's hold runs out; nullopt when none is damped.
  std::optional<TimePoint> NextRelease() const;
  size_t damped() const { return damped_.size(); }
  uint64_t damped_total() const { return damped_total_; }

 private:
  LinkDampingOptions options_;
  std::map<End, std::deque<TimePoint>> downs_;  // recent changes per end, within `window`
  std::map<End, End> peer_;                     // the other end of each end in downs_
  struct DampedEnd {
    TimePoint last;           // its cable's last down or change of state
    std::optional<bool> up;   // as last read while damped
    End peer;                 // the cable's other end (damped with it, held as long)
  };
  void Restart(End e, TimePoint now);  // e's and its peer's hold start again
  std::map<End, DampedEnd> damped_;
  uint64_t damped_total_ = 0;                   // cables damped since start
};

}  // namespace ibsm::sm
