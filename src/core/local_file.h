// Reading a file that a user named (an image path in a task, an OpenAI batch body, a server request, a Python
// Request): one reader for every door, so a hostile path fails its own request with a clear message instead of
// hanging or exhausting memory. It never opens what is not a regular file (a FIFO blocks `open` and `read`
// forever, /dev/zero never ends, a directory "reads" as garbage sizes): the path is stat'ed first, opened with
// O_NONBLOCK and checked again on the open descriptor (a file swapped in between is caught); the size is checked
// against the limit before a byte is read, and reading has a deadline. Symbolic links are followed: a link to an
// image is a user's ordinary way to name it; a link to a FIFO or device is refused like the FIFO itself.
#pragma once
#include <cstdint>
#include <string>

#include "core/error.h"

namespace fovea {

// Why a local file could not be read. The message names the path (cut to a bounded excerpt) and the reason.
class LocalFileError : public Error {
 public:
  enum class Reason { BadPath, NotFound, Directory, NotRegular, TooLarge, Empty, ReadFailed, TimedOut };
  LocalFileError(Reason reason, const std::string& message) : Error(message), reason_(reason) {}
  Reason reason() const { return reason_; }

 private:
  Reason reason_;
};

struct LocalFileLimits {
  int64_t max_bytes = 64ll * 1024 * 1024;
  int timeout_ms = 10000;  // to read the whole file (a slow network mount must not hold a request forever)
  bool allow_empty = false;
};

// An open, regular, readable file, checked as above. `what` names it in messages ("image file").
class LocalFile {
 public:
  // Throws LocalFileError: BadPath (empty, or a NUL byte inside), NotFound (also: no permission), Directory,
  // NotRegular (FIFO, socket, device), TooLarge.
  // `shown` is how messages name the file (default: path), e.g. the client's own spelling of a resolved path.
  LocalFile(const std::string& path, const LocalFileLimits& limits, const std::string& what = "file",
            const std::string& shown = "");
  ~LocalFile();
  LocalFile(const LocalFile&) = delete;
  LocalFile& operator=(const LocalFile&) = delete;

  int fd() const { return fd_; }
  int64_t size() const { return size_; }
  // The whole file; throws LocalFileError (ReadFailed, TimedOut, TooLarge when it grew, Empty).
  std::string read_all();

 private:
  [[noreturn]] void fail(LocalFileError::Reason reason, const std::string& why) const;
  int fd_ = -1;
  int64_t size_ = 0;
  std::string shown_;
  std::string what_;
  LocalFileLimits limits_;
};

// Throws LocalFileError(BadPath) for an empty path or one with a NUL byte, before anything resolves it.
void check_local_path(const std::string& path, const std::string& what = "file");

// LocalFile(path, limits, what).read_all().
std::string read_local_file(const std::string& path, const LocalFileLimits& limits, const std::string& what = "file");

}  // namespace fovea
