// SPDX-License-Identifier: BSD-2-Clause
// <ductile/ductile.h> as C++98: built with -std=c++98 -pedantic-errors
// (test/local.mk), so a construct later than C++98 in the public header --
// noexcept, say -- fails the build. Run, it checks a few answers.
#include <ductile/ductile.h>

#include <cstdio>

int main() {
  size_t len = sizeof(size_t);
  size_t page = 0;
  void* p = ductile_mallocx(100, MALLOCX_ALIGN(4096) | MALLOCX_ZERO);
  bool ok = p != NULL && (reinterpret_cast<size_t>(p) & 4095) == 0 && MALLOCX_ALIGN(4096) == 12;
  ductile_dallocx(p, 0);
  ok = ok && ductile_mallctl("arenas.page", &page, &len, NULL, 0) == 0 && page == 4096;
  if (!ok) {
    std::fprintf(stderr, "header_cxx98: a call through <ductile/ductile.h> failed\n");
    return 1;
  }
  return 0;
}
