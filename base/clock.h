// Time as a dependency: code that needs "now" takes a Clock&.
#pragma once

#include <chrono>
#include <cstdint>

namespace ibsm {

class Clock {
 public:
  virtual ~Clock() = default;
  virtual std::chrono::steady_clock::time_point Now() const = 0;
  // Wall-clock seconds since the epoch, for rows written to disk.
  virtual int64_t UnixMicros() const = 0;
};

class SystemClock final : public Clock {
 public:
  std::chrono::steady_clock::time_point Now() const override {
    return std::chrono::steady_clock::now();
  }
  int64_t UnixMicros() const override {
    return std::chrono::duration_cast<std::chrono::microseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  }
};

// A clock that moves only when told to; for tests.
class ManualClock final : public Clock {
 public:
  std::chrono::steady_clock::time_point Now() const override { return now_; }
  int64_t UnixMicros() const override {
    return std::chrono::duration_cast<std::chrono::microseconds>(now_.time_since_epoch()).count();
  }
  void Advance(std::chrono::nanoseconds d) { now_ += d; }

 private:
  std::chrono::steady_clock::time_point now_{};
};

}  // namespace ibsm
