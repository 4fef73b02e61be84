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

void warn(const char* msg) noexcept { write_line("ductile: warning: ", msg); }

}  // namespace ductile
