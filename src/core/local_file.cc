#include "core/local_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>

namespace fovea {
namespace {

const char* kind_of(mode_t mode) {
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  return "not a plain file";
}

}  // namespace

void LocalFile::fail(LocalFileError::Reason reason, const std::string& why) const {
  throw LocalFileError(reason, str(what_, " ", excerpt(shown_, 256), " ", why));
}

void check_local_path(const std::string& path, const std::string& what) {
  using R = LocalFileError::Reason;
  if (path.empty()) throw LocalFileError(R::BadPath, what + " path is empty");
  // A C path stops at the first NUL: "a.png\0/etc/x" would silently name "a.png".
  if (path.find('\0') != std::string::npos)
    throw LocalFileError(R::BadPath,
                         str(what, " path contains a NUL byte: ", excerpt(path.substr(0, path.find('\0')), 256)));
}

LocalFile::LocalFile(const std::string& path, const LocalFileLimits& limits, const std::string& what,
                     const std::string& shown)
    : shown_(shown.empty() ? path : shown), what_(what), limits_(limits) {
  using R = LocalFileError::Reason;
  check_local_path(path, what);
  // stat before open: opening a device can itself have effects (a tape rewinds, a tty becomes ours).
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) fail(R::NotFound, errno == EACCES ? "cannot be read (permission denied)" : "not found");
  if (S_ISDIR(st.st_mode)) fail(R::Directory, "is a directory");
  if (!S_ISREG(st.st_mode)) fail(R::NotRegular, str("is not a regular file (", kind_of(st.st_mode), ")"));
  fd_ = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd_ < 0) fail(R::NotFound, errno == EACCES ? "cannot be read (permission denied)" : "cannot be opened");
  // The path may have been swapped for a FIFO between stat and open: O_NONBLOCK kept open from blocking, and
  // the descriptor says what was opened.
  if (::fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd_);
    fd_ = -1;
    fail(R::NotRegular, "is not a regular file");
  }
  size_ = int64_t(st.st_size);
  if (size_ > limits.max_bytes) {
    ::close(fd_);
    fd_ = -1;
    fail(R::TooLarge, str("is ", size_, " bytes, larger than the limit of ", limits.max_bytes, " bytes"));
  }
}

LocalFile::~LocalFile() {
  if (fd_ >= 0) ::close(fd_);
}

std::string LocalFile::read_all() {
  using R = LocalFileError::Reason;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(limits_.timeout_ms);
  std::string bytes;
  bytes.reserve(size_t(size_));
  char chunk[256 * 1024];
  for (;;) {
    if (std::chrono::steady_clock::now() > deadline)
      fail(R::TimedOut, str("could not be read within ", limits_.timeout_ms, " ms"));
    const ssize_t n = ::read(fd_, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail(R::ReadFailed, "cannot be read");
    if (n == 0) break;
    bytes.append(chunk, size_t(n));
    if (int64_t(bytes.size()) > limits_.max_bytes)  // it grew after fstat
      fail(R::TooLarge, str("is larger than the limit of ", limits_.max_bytes, " bytes"));
  }
  if (bytes.empty() && !limits_.allow_empty) fail(R::Empty, "is empty");
  return bytes;
}

std::string read_local_file(const std::string& path, const LocalFileLimits& limits, const std::string& what) {
  return LocalFile(path, limits, what).read_all();
}

}  // namespace fovea
