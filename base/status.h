// Errors as values: Status (code + message) and Result<T> (a value or a Status).
// No exceptions cross module boundaries; every untrusted input is rejected with one of these.
#pragma once

#include <cassert>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace ibsm {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,    // caller or input broke a documented contract
  kCorrupt,            // bytes on the wire or on disk do not parse
  kNotFound,
  kAlreadyExists,
  kTimeout,            // no answer after every retry
  kUnavailable,        // peer or device not reachable now
  kFailedPrecondition, // legal request in a state that forbids it
  kPermissionDenied,   // key mismatch (M_Key, SM_Key, SA_Key) or privilege
  kUnsupported,
  kResourceExhausted,
  kIoError,
  kInternal,
};

std::string_view StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "Corrupt: PortInfo needs 64 bytes, got 12"
  std::string ToString() const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status InvalidArgument(std::string m) { return {StatusCode::kInvalidArgument, std::move(m)}; }
inline Status Corrupt(std::string m) { return {StatusCode::kCorrupt, std::move(m)}; }
inline Status NotFound(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
inline Status AlreadyExists(std::string m) { return {StatusCode::kAlreadyExists, std::move(m)}; }
inline Status Timeout(std::string m) { return {StatusCode::kTimeout, std::move(m)}; }
inline Status Unavailable(std::string m) { return {StatusCode::kUnavailable, std::move(m)}; }
inline Status FailedPrecondition(std::string m) {
  return {StatusCode::kFailedPrecondition, std::move(m)};
}
inline Status PermissionDenied(std::string m) {
  return {StatusCode::kPermissionDenied, std::move(m)};
}
inline Status Unsupported(std::string m) { return {StatusCode::kUnsupported, std::move(m)}; }
inline Status ResourceExhausted(std::string m) {
  return {StatusCode::kResourceExhausted, std::move(m)};
}
inline Status IoError(std::string m) { return {StatusCode::kIoError, std::move(m)}; }
inline Status Internal(std::string m) { return {StatusCode::kInternal, std::move(m)}; }

// A value of T or a non-OK Status. REQUIRES: constructing from a Status passes a non-OK one.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Status status) : v_(std::move(status)) {  // NOLINT
    assert(!std::get<Status>(v_).ok());
  }

  bool ok() const { return std::holds_alternative<T>(v_); }
  explicit operator bool() const { return ok(); }

  // REQUIRES: ok().
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  // OK when a value is held.
  Status status() const { return ok() ? Status() : std::get<Status>(v_); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace ibsm

// Early return of a non-OK Status from a function returning Status or Result<T>.
#define IBSM_RETURN_IF_ERROR(expr)            \
  do {                                        \
    ::ibsm::Status ibsm_status_ = (expr);     \
    if (!ibsm_status_.ok()) return ibsm_status_; \
  } while (0)

#define IBSM_CONCAT_INNER(a, b) a##b
#define IBSM_CONCAT(a, b) IBSM_CONCAT_INNER(a, b)
// Declares `lhs` from a Result<T> expression, or returns its Status.
#define IBSM_ASSIGN_OR_RETURN(lhs, expr)                               \
  auto IBSM_CONCAT(ibsm_result_, __LINE__) = (expr);                   \
  if (!IBSM_CONCAT(ibsm_result_, __LINE__).ok())                       \
    return IBSM_CONCAT(ibsm_result_, __LINE__).status();               \
  lhs = std::move(IBSM_CONCAT(ibsm_result_, __LINE__)).value()
