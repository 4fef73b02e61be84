/* SPDX-License-Identifier: BSD-2-Clause */
/* churn: single-threaded mixed-size churn, like a compiler or interpreter
 * (written for ductile).
 *
 * Processes "functions" one after another. Each makes a few thousand
 * objects (mostly 16-64 B nodes, some 64-256 B, a few up to 16 KiB), some of
 * which grow by realloc like strings and arrays (by half their size or by a
 * few bytes at a time); about half die while the function is processed, the
 * rest when it ends (newest first), except ~3 % that join long-lived tables
 * which live to the end of the run.
 *
 * Usage: churn [scale]
 * Work: 2000 * scale functions. */
#include "wl.h"

typedef struct {
  char *p;
  size_t n;
} obj;

static size_t pick_size(wl_rng *r) {
  uint64_t k = wl_below(r, 100);
  if (k < 70) return wl_range(r, 16, 64);
  if (k < 92) return wl_range(r, 65, 256);
  if (k < 99) return wl_range(r, 257, 2048);
  return wl_range(r, 2049, 16384);
}

int main(int argc, char **argv) {
  double scale = wl_scale(argc, argv);
  long functions = (long)(2000 * scale);
  if (functions < 1) functions = 1;
  wl_rng r;
  wl_seed(&r, 99);

  size_t cap_keep = 1024, nkeep = 0;
  obj *keep = (obj *)malloc(cap_keep * sizeof(obj));
  size_t cap = 16384;
  obj *live = (obj *)malloc(cap * sizeof(obj));
  unsigned long grows = 0;

  double t0 = wl_now();
  for (long f = 0; f < functions; f++) {
    size_t n = 0;
    size_t count = wl_range(&r, 500, 6000);
    for (size_t i = 0; i < count; i++) {
      obj o;
      o.n = pick_size(&r);
      o.p = (char *)malloc(o.n);
      if (!o.p) abort();
      memset(o.p, (int)i, o.n < 32 ? o.n : 32);
      /* 15 %: a string or array that grows. */
      if (wl_below(&r, 100) < 15) {
        int steps = (int)wl_range(&r, 1, 8);
        for (int s = 0; s < steps; s++) {
          size_t nn = wl_below(&r, 2) ? o.n + o.n / 2 : o.n + wl_range(&r, 1, 24);
          char *q = (char *)realloc(o.p, nn);
          if (!q) abort();
          q[nn - 1] = (char)s;
          o.p = q;
          o.n = nn;
          grows++;
        }
      }
      if (wl_below(&r, 100) < 3) {
        if (nkeep == cap_keep) {
          cap_keep *= 2;
          keep = (obj *)realloc(keep, cap_keep * sizeof(obj));
          if (!keep) abort();
        }
        keep[nkeep++] = o;
        continue;
      }
      if (n == cap) {
        cap *= 2;
        live = (obj *)realloc(live, cap * sizeof(obj));
        if (!live) abort();
      }
      live[n++] = o;
      /* Half of the temporaries die early, at random. */
      if (n > 8 && wl_below(&r, 2)) {
        size_t k = (size_t)wl_below(&r, n);
        free(live[k].p);
        live[k] = live[--n];
      }
    }
    while (n > 0) free(live[--n].p);
  }
  double secs = wl_now() - t0;
  for (size_t i = 0; i < nkeep; i++) free(keep[i].p);
  free(keep);
  free(live);
  char extra[128];
  snprintf(extra, sizeof extra, "functions=%ld kept=%zu reallocs=%lu", functions, nkeep,
           grows);
  wl_report("churn", secs, extra);
  return 0;
}
