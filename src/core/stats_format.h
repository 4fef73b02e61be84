/* SPDX-License-Identifier: BSD-2-Clause */
// What the statistics' entry points (stats.cc) and formats (stats_format.cc)
// share: the output buffer, the growth paths' names, the three formats.
#pragma once

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "core/stats.h"

namespace ductile::core {

// ---- output ------------------------------------------------------------
// Text is collected in a stack buffer and handed on in pieces: no allocation,
// no lock held while the callback runs.
class Out {
 public:
  // Without a callback the text goes to `fd`.
  Out(WriteFn write, void* opaque, int fd = 2) noexcept : write_(write), opaque_(opaque), fd_(fd) {}
  Out(const Out&) = delete;
  Out& operator=(const Out&) = delete;
  ~Out() { flush(); }

  Out& str(const char* s) noexcept {
    while (*s) ch(*s++);
    return *this;
  }
  Out& ch(char c) noexcept {
    if (len_ + 1 >= sizeof buf_) flush();
    buf_[len_++] = c;
    return *this;
  }
  Out& u64(uint64_t v) noexcept {
    char tmp[24];
    (void)format_u64(v, tmp, sizeof tmp);
    return str(tmp);
  }
  // Right-aligned in `width` columns.
  Out& u64w(uint64_t v, size_t width) noexcept {
    size_t digits = 1;
    for (uint64_t x = v; x >= 10; x /= 10) digits++;
    for (; digits < width; digits++) ch(' ');
    return u64(v);
  }
  // Left-aligned, padded to `width` columns.
  Out& pad(const char* s, size_t width) noexcept {
    size_t n = std::strlen(s);
    str(s);
    for (; n < width; n++) ch(' ');
    return *this;
  }
  // "12.3 MiB": bytes for a human, one decimal.
  Out& human(uint64_t v) noexcept {
    static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    size_t u = 0;
    uint64_t whole = v, tenths = 0;
    while (whole >= 1024 && u + 1 < sizeof kUnits / sizeof kUnits[0]) {
      tenths = (whole % 1024) * 10 / 1024;
      whole /= 1024;
      u++;
    }
    u64(whole);
    if (u) ch('.').u64(tenths);
    return ch(' ').str(kUnits[u]);
  }
  void flush() noexcept {
    if (len_ == 0) return;
    buf_[len_] = '\0';
    if (write_) {
      write_(opaque_, buf_);
    } else {
      size_t off = 0;
      while (off < len_) {
        ssize_t w = ::write(fd_, buf_ + off, len_ - off);
        if (w <= 0) break;
        off += static_cast<size_t>(w);
      }
    }
    len_ = 0;
  }

 private:
  WriteFn write_;
  void* opaque_;
  int fd_;
  char buf_[1024];
  size_t len_ = 0;
};

inline bool has(const char* opts, char c) { return opts != nullptr && std::strchr(opts, c) != nullptr; }

// The formats (stats_format.cc): readable text and JSON (print_stats's
// opts), and malloc_info's XML.
void print_text(Out& o, const StatsSnapshot& s, const char* opts);
void print_json(Out& o, const StatsSnapshot& s, const char* opts);
void print_xml_to(Out& o, const StatsSnapshot& s);

}  // namespace ductile::core
