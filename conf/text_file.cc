#include "conf/text_file.h"

#include <cerrno>
#include <cstring>

#include <fcntl.h>
#include <sys/random.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>

#include <fmt/format.h>

namespace ibsm::conf {
namespace {

std::string ErrnoText(int err) { return std::strerror(err); }

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  // Closes now and reports close(2)'s error (NFS reports write errors here).
  int Close() {
    int rc = ::close(fd_);
    fd_ = -1;
    return rc;
  }

 private:
  int fd_;
};

}  // namespace

Result<std::string> ReadTextFile(const std::string& path, size_t max_bytes) {
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) {
    int err = errno;
    std::string msg = fmt::format("{}: cannot open: {}", path, ErrnoText(err));
    return err == ENOENT ? NotFound(msg) : IoError(msg);
  }
  std::string out;
  char buf[65536];
  for (;;) {
    ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      return IoError(fmt::format("{}: read failed: {}", path, ErrnoText(errno)));
    }
    if (n == 0) break;
    if (out.size() + static_cast<size_t>(n) > max_bytes) {
      return IoError(fmt::format("{}: larger than {} bytes", path, max_bytes));
    }
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

Result<TempFile> CreateTempFileBeside(const std::string& path, mode_t mode) {
  // A name nobody can guess, so nobody can plant it in advance; O_EXCL makes a planted one
  // harmless anyway (EEXIST: try another), and O_NOFOLLOW says so twice.
  constexpr int kTries = 16;
  int err = EEXIST;
  for (int i = 0; i < kTries && err == EEXIST; ++i) {
    uint32_t r = 0;
    if (::getrandom(&r, sizeof r, 0) != static_cast<ssize_t>(sizeof r)) {
      // No entropy yet (early boot): unique within this process is still unique enough,
      // since O_EXCL keeps a collision from doing harm.
      static std::atomic<uint32_t> counter{0};
      r = static_cast<uint32_t>(::getpid()) * 2654435761u + counter.fetch_add(1);
    }
    TempFile t{-1, fmt::format("{}.tmp.{:08x}", path, r)};
    t.fd = ::open(t.path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
    if (t.fd >= 0) return t;
    err = errno;
  }
  return IoError(fmt::format("{}: cannot create a temporary file beside it: {}", path,
                             ErrnoText(err)));
}

Status WriteFileAtomically(const std::string& path, std::string_view contents) {
  IBSM_ASSIGN_OR_RETURN(TempFile created, CreateTempFileBeside(path, 0644));
  const std::string& tmp = created.path;
  Fd fd(created.fd);
  size_t done = 0;
  while (done < contents.size()) {
    ssize_t n = ::write(fd.get(), contents.data() + done, contents.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      ::unlink(tmp.c_str());
      return IoError(fmt::format("{}: write failed: {}", tmp, ErrnoText(err)));
    }
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd.get()) != 0 || fd.Close() != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    return IoError(fmt::format("{}: fsync/close failed: {}", tmp, ErrnoText(err)));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    return IoError(fmt::format("{}: rename to {} failed: {}", tmp, path, ErrnoText(err)));
  }
  // The rename is durable only once the directory entry is on disk.
  std::string dir = ".";
  if (auto slash = path.rfind('/'); slash != std::string::npos) {
    dir = slash == 0 ? "/" : path.substr(0, slash);
  }
  Fd dfd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dfd.get() >= 0) ::fsync(dfd.get());
  return Status::Ok();
}

}  // namespace ibsm::conf
