// SPDX-License-Identifier: BSD-2-Clause
// Messages: fatal errors and warnings, one line each with write(2), and the
// number formatting they use; nothing here allocates.
#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "base/common.h"

namespace ductile {
namespace {
void write_all(const char* s, size_t n) noexcept {
  while (n > 0) {
    ssize_t w = ::write(2, s, n);
    if (w <= 0) return;
    s += w;
    n -= static_cast<size_t>(w);
  }
}
void write_line(const char* prefix, const char* msg) noexcept {
  write_all(prefix, std::strlen(prefix));
  write_all(msg, std::strlen(msg));
  write_all("\n", 1);
}
}  // namespace

void fatal(const char* msg) noexcept {
  write_line("ductile: fatal: ", msg);
  std::abort();
}

void fatal_pointer(const char* what, const void* p) noexcept {
  // One write, so that the line is not interleaved with another thread's.
  char line[160];
  size_t n = 0;
  auto put = [&](const char* s) {
    while (*s && n < sizeof line - 1) line[n++] = *s++;
  };
  put("ductile: ");
  put(what);
  put(" 0x");
  auto v = reinterpret_cast<uintptr_t>(p);
  int shift = 60;
  while (shift > 0 && ((v >> shift) & 0xf) == 0) shift -= 4;
  for (; shift >= 0 && n < sizeof line - 1; shift -= 4) line[n++] = "0123456789abcdef"[(v >> shift) & 0xf];
  line[n++] = '\n';
  write_all(line, n);
  std::abort();
}

void warn(const char* msg) noexcept { write_line("ductile: warning: ", msg); }

size_t format_u64(uint64_t v, char* buf, size_t n) noexcept {
  if (n == 0) return 0;
  char tmp[20];
  size_t len = 0;
  do {
    tmp[len++] = static_cast<char>('0' + v % 10);
    v /= 10;
  } while (v);
  size_t i = 0;
  for (; i < len && i + 1 < n; i++) buf[i] = tmp[len - 1 - i];
  buf[i] = '\0';
  return i;
}

}  // namespace ductile
