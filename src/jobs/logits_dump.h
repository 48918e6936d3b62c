// `fovea run --dump-logits PATH`: the first generated token's full float logits of every successful request,
// for comparing against a reference implementation. Two files:
//   PATH.f32   rows of `vocab` little-endian float32, appended in the order requests finish
//   PATH.json  {"vocab": V, "rows": {"<id>": row, ...}}  (string ids as they are, others as their JSON text)
// Durable like the results: rows are appended and fsync'd, then the index is replaced atomically (temporary
// file, fsync, rename), and only then are the results lines written. On start, rows past the index (a kill
// between the two) are cut off, so a resumed job appends after the last indexed row.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace fovea {

// The index key of a task id: a JSON string id as its text, any other id as its JSON dump.
std::string logits_row_key(const nlohmann::json& id);

class LogitsDump {
 public:
  explicit LogitsDump(const std::string& path);  // reads PATH.json if present and trims PATH.f32 to it
  LogitsDump(const LogitsDump&) = delete;
  LogitsDump& operator=(const LogitsDump&) = delete;

  struct Row {
    std::string key;
    const std::vector<float>* logits;
  };
  // Appends the rows (all of one vocab size, the same as earlier rows) and makes them durable with the index.
  // A key seen before points at its new row afterwards. Throws fovea::Error on I/O failure or a vocab mismatch.
  void append(const std::vector<Row>& rows);
  int64_t rows() const { return rows_; }

 private:
  void write_index() const;

  std::string data_path_, index_path_;
  int64_t vocab_ = 0;
  int64_t rows_ = 0;
  std::map<std::string, int64_t> row_of_;
};

}  // namespace fovea
