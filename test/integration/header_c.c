/* SPDX-License-Identifier: BSD-2-Clause */
/* <ductile/ductile.h> as C: built as C89 and as C99 with -pedantic-errors
 * (test/local.mk), so a construct later than C89 in the public header
 * fails the build. Run, it checks a few answers through the header. */
#include <ductile/ductile.h>

#include <stdio.h>

int main(void) {
  size_t len = sizeof(size_t);
  size_t page = 0;
  void *p = ductile_mallocx(100, MALLOCX_ALIGN(4096) | MALLOCX_ZERO);
  int ok = p != NULL && ((size_t)p & 4095) == 0 && MALLOCX_ALIGN(4096) == 12 && MALLOCX_LG_ALIGN(3) == 3;
  ductile_dallocx(p, 0);
  ok = ok && ductile_mallctl("arenas.page", &page, &len, NULL, 0) == 0 && page == 4096;
  ok = ok && ductile_version()[0] != '\0';
  if (!ok) {
    fprintf(stderr, "header_c: a call through <ductile/ductile.h> failed\n");
    return 1;
  }
  return 0;
}
