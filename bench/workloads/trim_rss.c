/* SPDX-License-Identifier: BSD-2-Clause */
/* trim-rss: is the memory back after a trim? (written for ductile)
 *
 * A long-lived set (LIVE MiB of mixed small and medium blocks, allocated
 * first) stays while a transient phase allocates TRANSIENT MiB more -- small
 * objects, medium blocks and a few huge ones, in two threads -- and frees all
 * of it. Then the allocator is asked to give back what it can: malloc_trim(0)
 * (glibc, ductile), mallctl("arena.<all>.purge") (jemalloc), mi_collect(true)
 * (mimalloc), MallocExtension_ReleaseFreeMemory() (tcmalloc), found with
 * dlsym so the program runs under any of them.
 *
 * Prints the resident set above the start-up baseline against the live
 * bytes: rss_after_trim / live should be close to 1.
 *
 * Usage: trim_rss [scale [live_mib [transient_mib]]]   defaults 1, 32, 256 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <malloc.h>
#include <pthread.h>

#include "wl.h"

typedef struct {
  size_t bytes;
  uint64_t seed;
  void **v;
  size_t n;
} phase;

/* 80 % of the bytes in small objects (16 B - 1 KiB), the rest medium
 * (16 KiB - 1 MiB), plus one 8 MiB huge block per 64 MiB. */
static void *fill(void *arg) {
  phase *ph = (phase *)arg;
  wl_rng r;
  wl_seed(&r, ph->seed);
  size_t cap = ph->bytes / 64 + 16, done = 0;
  ph->v = (void **)malloc(cap * sizeof(void *));
  ph->n = 0;
  size_t huge_every = (size_t)64 << 20, next_huge = huge_every;
  while (done < ph->bytes && ph->n < cap) {
    size_t sz;
    if (done >= next_huge) {
      sz = (size_t)8 << 20;
      next_huge += huge_every;
    } else if (wl_below(&r, 100) < 97) {
      sz = wl_logrange(&r, 16, 1024);
    } else {
      sz = wl_logrange(&r, 16 << 10, 1 << 20);
    }
    void *p = malloc(sz);
    if (!p) break;
    memset(p, 0x5a, sz);
    ph->v[ph->n++] = p;
    done += sz;
  }
  return NULL;
}

static void drop(phase *ph) {
  for (size_t i = 0; i < ph->n; i++) free(ph->v[i]);
  free(ph->v);
  ph->v = NULL;
  ph->n = 0;
}

static const char *give_back(void) {
  int (*trim)(size_t) = (int (*)(size_t))dlsym(RTLD_DEFAULT, "malloc_trim");
  int (*ctl)(const char *, void *, size_t *, void *, size_t) =
      (int (*)(const char *, void *, size_t *, void *, size_t))dlsym(RTLD_DEFAULT, "mallctl");
  void (*mi_collect)(int) = (void (*)(int))dlsym(RTLD_DEFAULT, "mi_collect");
  void (*tc_release)(void) = (void (*)(void))dlsym(RTLD_DEFAULT, "MallocExtension_ReleaseFreeMemory");
  if (mi_collect) {
    mi_collect(1);
    return "mi_collect";
  }
  if (tc_release) {
    tc_release();
    return "ReleaseFreeMemory";
  }
  /* ductile has both mallctl and malloc_trim: trim is its own word for it. */
  if (ctl && !dlsym(RTLD_DEFAULT, "ductile_trim")) {
    /* jemalloc: MALLCTL_ARENAS_ALL is 4096. */
    if (ctl("arena.4096.purge", NULL, NULL, NULL, 0) == 0) return "arena.purge";
  }
  if (trim) {
    trim(0);
    return "malloc_trim";
  }
  return "none";
}

int main(int argc, char **argv) {
  double scale = wl_scale(argc, argv);
  size_t live = (size_t)(wl_arg(argc, argv, 2, 32) * scale) << 20;
  size_t transient = (size_t)(wl_arg(argc, argv, 3, 256) * scale) << 20;

  double base = wl_rss_mib();
  double t0 = wl_now();
  phase keep = {live, 1, NULL, 0};
  fill(&keep);
  /* The transient phase, split over two threads that then exit. */
  phase a = {transient / 2, 2, NULL, 0}, b = {transient / 2, 3, NULL, 0};
  pthread_t ta, tb;
  pthread_create(&ta, NULL, fill, &a);
  pthread_create(&tb, NULL, fill, &b);
  pthread_join(ta, NULL);
  pthread_join(tb, NULL);
  double full = wl_rss_mib() - base;
  drop(&a);
  drop(&b);
  double before = wl_rss_mib() - base;
  const char *how = give_back();
  double after = wl_rss_mib() - base;
  double seconds = wl_now() - t0;

  size_t live_bytes = 0;
  for (size_t i = 0; i < keep.n; i++) live_bytes += malloc_usable_size(keep.v[i]);
  double live_mib = (double)live_bytes / 1048576.0;
  char extra[256];
  snprintf(extra, sizeof extra,
           "live_mib=%.1f full_mib=%.1f freed_rss_mib=%.1f trimmed_rss_mib=%.1f trim_ratio=%.3f how=%s",
           live_mib, full, before, after, after / live_mib, how);
  wl_report("trim-rss", seconds, extra);
  drop(&keep);
  return 0;
}
