/* SPDX-License-Identifier: BSD-2-Clause */
// A strict JSON syntax check (RFC 8259), enough to tell that
// malloc_stats_print's "J" output can be read by a tool. Header-only, for
// the unit and the integration tests.
#pragma once

#include <cctype>
#include <string>

namespace json_check {

class Parser {
 public:
  explicit Parser(const std::string& s) : s_(s) {}

  // True if the whole text is one JSON value (surrounding white space allowed).
  bool document() {
    ws();
    if (!value(0)) return false;
    ws();
    return i_ == s_.size();
  }
  size_t where() const { return i_; }

 private:
  void ws() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\n' || s_[i_] == '\t' || s_[i_] == '\r')) i_++;
  }
  bool eat(char c) {
    ws();
    if (i_ < s_.size() && s_[i_] == c) {
      i_++;
      return true;
    }
    return false;
  }
  bool literal(const char* w) {
    size_t n = std::char_traits<char>::length(w);
    if (s_.compare(i_, n, w) != 0) return false;
    i_ += n;
    return true;
  }
  bool string() {
    if (!eat('"')) return false;
    while (i_ < s_.size()) {
      char c = s_[i_++];
      if (c == '"') return true;
      if (static_cast<unsigned char>(c) < 0x20) return false;
      if (c == '\\') {
        if (i_ >= s_.size()) return false;
        char e = s_[i_++];
        if (e == 'u') {
          for (int k = 0; k < 4; k++)
            if (i_ >= s_.size() || !std::isxdigit(static_cast<unsigned char>(s_[i_++]))) return false;
        } else if (std::string("\"\\/bfnrt").find(e) == std::string::npos) {
          return false;
        }
      }
    }
    return false;
  }
  bool digits() {
    size_t start = i_;
    while (i_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[i_]))) i_++;
    return i_ > start;
  }
  bool number() {
    if (i_ < s_.size() && s_[i_] == '-') i_++;
    if (i_ < s_.size() && s_[i_] == '0') {
      i_++;
    } else if (!digits()) {
      return false;
    }
    if (i_ < s_.size() && s_[i_] == '.') {
      i_++;
      if (!digits()) return false;
    }
    if (i_ < s_.size() && (s_[i_] == 'e' || s_[i_] == 'E')) {
      i_++;
      if (i_ < s_.size() && (s_[i_] == '+' || s_[i_] == '-')) i_++;
      if (!digits()) return false;
    }
    return true;
  }
  bool value(int depth) {
    if (depth > 64) return false;
    ws();
    if (i_ >= s_.size()) return false;
    char c = s_[i_];
    if (c == '{') {
      i_++;
      if (eat('}')) return true;
      do {
        ws();
        if (!string() || !eat(':') || !value(depth + 1)) return false;
      } while (eat(','));
      return eat('}');
    }
    if (c == '[') {
      i_++;
      if (eat(']')) return true;
      do {
        if (!value(depth + 1)) return false;
      } while (eat(','));
      return eat(']');
    }
    if (c == '"') return string();
    if (c == 't') return literal("true");
    if (c == 'f') return literal("false");
    if (c == 'n') return literal("null");
    return number();
  }

  const std::string& s_;
  size_t i_ = 0;
};

inline bool valid(const std::string& s) { return Parser(s).document(); }

}  // namespace json_check
