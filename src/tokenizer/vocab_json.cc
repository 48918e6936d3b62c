#include "tokenizer/vocab_json.h"

#include "core/error.h"
#include "tokenizer/utf8.h"

namespace fovea {
namespace {

class VocabParser {
 public:
  VocabParser(std::string_view text, const std::string& where) : text_(text), where_(where) {}

  std::unordered_map<std::string, int32_t> parse() {
    std::unordered_map<std::string, int32_t> vocab;
    vocab.reserve(text_.size() / 12);
    expect('{');
    if (peek() == '}') {
      ++pos_;
    } else {
      for (;;) {
        std::string key = string();
        expect(':');
        const int32_t id = integer();
        FOVEA_CHECK(vocab.emplace(std::move(key), id).second, where_, ": a piece appears twice");
        const char next = peek();
        ++pos_;
        if (next == '}') break;
        FOVEA_CHECK(next == ',', where_, ": expected ',' or '}' at byte ", pos_ - 1);
      }
    }
    FOVEA_CHECK(peek() == '\0', where_, ": trailing data after the object");
    return vocab;
  }

 private:
  char peek() {
    while (pos_ < text_.size() &&
           (text_[pos_] == ' ' || text_[pos_] == '\n' || text_[pos_] == '\r' || text_[pos_] == '\t'))
      ++pos_;
    return pos_ < text_.size() ? text_[pos_] : '\0';
  }
  void expect(char c) {
    FOVEA_CHECK(peek() == c, where_, ": expected '", c, "' at byte ", pos_);
    ++pos_;
  }
  uint32_t hex4() {
    FOVEA_CHECK(text_.size() - pos_ >= 4, where_, ": truncated \\u escape");
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) {
      const char c = text_[pos_++];
      v <<= 4;
      if (c >= '0' && c <= '9')
        v |= uint32_t(c - '0');
      else if (c >= 'a' && c <= 'f')
        v |= uint32_t(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F')
        v |= uint32_t(c - 'A' + 10);
      else
        FOVEA_FAIL(where_, ": bad \\u escape at byte ", pos_ - 1);
    }
    return v;
  }
  void escape(std::string& out) {
    FOVEA_CHECK(pos_ < text_.size(), where_, ": truncated escape");
    const char c = text_[pos_++];
    switch (c) {
      case '"':
      case '\\':
      case '/':
        out += c;
        return;
      case 'b':
        out += '\b';
        return;
      case 'f':
        out += '\f';
        return;
      case 'n':
        out += '\n';
        return;
      case 'r':
        out += '\r';
        return;
      case 't':
        out += '\t';
        return;
      case 'u':
        break;
      default:
        FOVEA_FAIL(where_, ": bad escape \\", c);
    }
    uint32_t cp = hex4();
    if (cp >= 0xD800 && cp <= 0xDBFF && text_.substr(pos_, 2) == "\\u") {  // a surrogate pair
      pos_ += 2;
      const uint32_t low = hex4();
      FOVEA_CHECK(low >= 0xDC00 && low <= 0xDFFF, where_, ": unpaired surrogate");
      cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
    }
    FOVEA_CHECK(cp < 0xD800 || cp > 0xDFFF, where_, ": unpaired surrogate");
    utf8::append(out, cp);
  }
  std::string string() {
    expect('"');
    std::string out;
    for (;;) {
      FOVEA_CHECK(pos_ < text_.size(), where_, ": unterminated string");
      const char c = text_[pos_++];
      if (c == '"') return out;
      if (c == '\\')
        escape(out);
      else
        out += c;
    }
  }
  int32_t integer() {
    peek();
    const size_t start = pos_;
    if (pos_ < text_.size() && text_[pos_] == '-') ++pos_;
    int64_t value = 0;
    while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9' && value < (int64_t(1) << 40))
      value = value * 10 + (text_[pos_++] - '0');
    FOVEA_CHECK(pos_ > start && text_[start] != '-' && value <= INT32_MAX, where_, ": bad id at byte ", start);
    return int32_t(value);
  }

  std::string_view text_;
  const std::string& where_;
  size_t pos_ = 0;
};

}  // namespace

std::unordered_map<std::string, int32_t> parse_vocab_json(std::string_view text, const std::string& where) {
  return VocabParser(text, where).parse();
}

}  // namespace fovea
