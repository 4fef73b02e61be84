/* SPDX-License-Identifier: BSD-2-Clause */
// A small XML well-formedness checker for the tests (malloc_info's output):
// an optional <?xml ...?> declaration, then one root element; elements with
// attributes in single or double quotes (each name once per element),
// character data and references (&lt; &gt; &amp; &quot; &apos; &#N; &#xN;),
// comments. Not checked: DOCTYPE (rejected), CDATA sections (rejected),
// names beyond ASCII.
#pragma once

#include <cctype>
#include <cstring>
#include <set>
#include <string>

namespace xml_check {

class Parser {
 public:
  explicit Parser(const std::string& s) : s_(s) {}

  bool document() {
    if (starts("<?xml")) {
      size_t end = s_.find("?>", i_);
      if (end == std::string::npos) return false;
      i_ = end + 2;
    }
    misc();
    if (!element()) return false;
    misc();
    return i_ == s_.size();
  }

 private:
  bool starts(const char* t) const { return s_.compare(i_, std::strlen(t), t) == 0; }
  void space() {
    while (i_ < s_.size() && std::strchr(" \t\r\n", s_[i_]) != nullptr) i_++;
  }
  // Whitespace and comments around the root.
  void misc() {
    for (;;) {
      space();
      if (!starts("<!--") || !comment()) return;
    }
  }
  bool comment() {
    size_t end = s_.find("--", i_ + 4);
    if (end == std::string::npos || s_.compare(end, 3, "-->") != 0) return false;
    i_ = end + 3;
    return true;
  }
  static bool name_start(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':';
  }
  static bool name_char(char c) { return name_start(c) || (c >= '0' && c <= '9') || c == '-' || c == '.'; }
  bool name(std::string* out) {
    if (i_ >= s_.size() || !name_start(s_[i_])) return false;
    size_t b = i_;
    while (i_ < s_.size() && name_char(s_[i_])) i_++;
    *out = s_.substr(b, i_ - b);
    return true;
  }
  // At '&': one of the predefined entities or a character reference.
  bool reference() {
    size_t semi = s_.find(';', i_);
    if (semi == std::string::npos) return false;
    std::string r = s_.substr(i_ + 1, semi - i_ - 1);
    bool ok = r == "lt" || r == "gt" || r == "amp" || r == "quot" || r == "apos";
    if (!ok && r.size() > 1 && r[0] == '#') {
      bool hex = r[1] == 'x';
      size_t k = hex ? 2 : 1;
      ok = k < r.size();
      for (; k < r.size(); k++)
        ok = ok && (std::isdigit(static_cast<unsigned char>(r[k])) ||
                    (hex && std::isxdigit(static_cast<unsigned char>(r[k]))));
    }
    i_ = semi + 1;
    return ok;
  }
  bool attribute_value() {
    if (i_ >= s_.size() || (s_[i_] != '"' && s_[i_] != '\'')) return false;
    char q = s_[i_++];
    while (i_ < s_.size() && s_[i_] != q) {
      if (s_[i_] == '<') return false;
      if (s_[i_] == '&') {
        if (!reference()) return false;
      } else {
        i_++;
      }
    }
    if (i_ >= s_.size()) return false;
    i_++;
    return true;
  }
  bool element() {
    if (i_ >= s_.size() || s_[i_] != '<') return false;
    i_++;
    std::string tag;
    if (!name(&tag)) return false;
    std::set<std::string> seen;
    for (;;) {
      size_t before = i_;
      space();
      if (starts("/>")) {
        i_ += 2;
        return true;
      }
      if (starts(">")) {
        i_++;
        break;
      }
      if (i_ == before) return false;  // attributes are separated by whitespace
      std::string attr;
      if (!name(&attr) || !seen.insert(attr).second) return false;
      space();
      if (!starts("=")) return false;
      i_++;
      space();
      if (!attribute_value()) return false;
    }
    // Content: character data, references, comments, child elements.
    for (;;) {
      if (i_ >= s_.size()) return false;
      if (starts("</")) {
        i_ += 2;
        std::string end;
        if (!name(&end) || end != tag) return false;
        space();
        if (!starts(">")) return false;
        i_++;
        return true;
      }
      if (starts("<!--")) {
        if (!comment()) return false;
      } else if (s_[i_] == '<') {
        if (!element()) return false;
      } else if (s_[i_] == '&') {
        if (!reference()) return false;
      } else if (starts("]]>")) {
        return false;
      } else {
        i_++;
      }
    }
  }

  const std::string& s_;
  size_t i_ = 0;
};

inline bool valid(const std::string& s) { return Parser(s).document(); }

}  // namespace xml_check
