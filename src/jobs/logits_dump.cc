#include "jobs/logits_dump.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include "core/error.h"

namespace fovea {
namespace {

void write_all_and_sync(int fd, const char* data, size_t size, const std::string& path) {
  while (size > 0) {
    const ssize_t n = ::write(fd, data, size);
    if (n < 0 && errno == EINTR) continue;
    FOVEA_CHECK(n > 0, "cannot write ", path, ": ", std::strerror(errno));
    data += n;
    size -= size_t(n);
  }
  FOVEA_CHECK(::fsync(fd) == 0, "cannot fsync ", path, ": ", std::strerror(errno));
}

}  // namespace

std::string logits_row_key(const nlohmann::json& id) { return id.is_string() ? id.get<std::string>() : id.dump(); }

LogitsDump::LogitsDump(const std::string& path) : data_path_(path + ".f32"), index_path_(path + ".json") {
  std::ifstream in(index_path_);
  if (in) {
    nlohmann::json index;
    try {
      index = nlohmann::json::parse(in);
      vocab_ = index.at("vocab").get<int64_t>();
      for (const auto& [key, row] : index.at("rows").items()) {
        row_of_[key] = row.get<int64_t>();
        rows_ = std::max(rows_, row.get<int64_t>() + 1);
      }
    } catch (const std::exception& e) {
      FOVEA_FAIL("cannot read the logits index ", index_path_, ": ", e.what());
    }
  }
  struct stat st {};
  const bool have_data = ::stat(data_path_.c_str(), &st) == 0;
  const int64_t indexed_bytes = rows_ * vocab_ * int64_t(sizeof(float));
  FOVEA_CHECK(!have_data || st.st_size >= indexed_bytes, data_path_, " holds ", int64_t(have_data ? st.st_size : 0),
              " bytes, fewer than the ", indexed_bytes, " its index ", index_path_, " promises");
  FOVEA_CHECK(have_data || rows_ == 0, "the logits index ", index_path_, " exists but ", data_path_, " does not");
  // Rows appended after the last index update belong to requests whose results were never written: drop them.
  if (have_data && st.st_size > indexed_bytes)
    FOVEA_CHECK(::truncate(data_path_.c_str(), off_t(indexed_bytes)) == 0, "cannot truncate ", data_path_, ": ",
                std::strerror(errno));
}

void LogitsDump::append(const std::vector<Row>& rows) {
  if (rows.empty()) return;
  std::string bytes;
  for (const Row& row : rows) {
    const int64_t vocab = int64_t(row.logits->size());
    FOVEA_CHECK(vocab > 0, "no logits for ", row.key);
    if (vocab_ == 0) vocab_ = vocab;
    FOVEA_CHECK(vocab == vocab_, "logits of ", row.key, " have ", vocab, " entries, earlier rows ", vocab_);
    bytes.append(reinterpret_cast<const char*>(row.logits->data()), row.logits->size() * sizeof(float));
  }
  const int fd = ::open(data_path_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  FOVEA_CHECK(fd >= 0, "cannot open ", data_path_, ": ", std::strerror(errno));
  try {
    write_all_and_sync(fd, bytes.data(), bytes.size(), data_path_);
  } catch (...) {
    ::close(fd);
    throw;
  }
  ::close(fd);
  for (const Row& row : rows) row_of_[row.key] = rows_++;
  write_index();
}

void LogitsDump::write_index() const {
  nlohmann::json index;
  index["vocab"] = vocab_;
  index["rows"] = nlohmann::json::object();
  for (const auto& [key, row] : row_of_) index["rows"][key] = row;
  const std::string text = index.dump() + "\n";
  const std::string temp = index_path_ + ".tmp";
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  FOVEA_CHECK(fd >= 0, "cannot open ", temp, ": ", std::strerror(errno));
  try {
    write_all_and_sync(fd, text.data(), text.size(), temp);
  } catch (...) {
    ::close(fd);
    throw;
  }
  ::close(fd);
  FOVEA_CHECK(::rename(temp.c_str(), index_path_.c_str()) == 0, "cannot rename ", temp, " to ", index_path_, ": ",
              std::strerror(errno));
}

}  // namespace fovea
