/* SPDX-License-Identifier: BSD-2-Clause */
/* bench/workloads/wl.h -- shared helpers for the workload suite.
 *
 * Every workload calls only the standard malloc/free/realloc (or C++
 * new/delete), so whatever allocator LD_PRELOAD puts under it is measured.
 * Each program takes a scale (a positive number multiplying its amount of
 * work) as its first argument and prints one line of key=value pairs:
 *   workload=NAME seconds=ELAPSED peak_rss_mib=SELF_PEAK [extra=...]
 * bench/compare-workloads.sh reads `seconds` and measures peak RSS outside
 * the process (/usr/bin/time), so the figure includes everything. */
#ifndef DUCTILE_BENCH_WL_H
#define DUCTILE_BENCH_WL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

static inline double wl_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* xorshift64*: small, fast, deterministic per seed. */
typedef struct {
  uint64_t s;
} wl_rng;

static inline void wl_seed(wl_rng *r, uint64_t seed) {
  r->s = seed * 0x9E3779B97F4A7C15ull + 0x2545F4914F6CDD1Dull;
  if (r->s == 0) r->s = 1;
}

static inline uint64_t wl_next(wl_rng *r) {
  uint64_t x = r->s;
  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  r->s = x;
  return x * 0x2545F4914F6CDD1Dull;
}

/* Uniform in [0, n). */
static inline uint64_t wl_below(wl_rng *r, uint64_t n) {
  return n ? wl_next(r) % n : 0;
}

/* Uniform in [lo, hi]. */
static inline size_t wl_range(wl_rng *r, size_t lo, size_t hi) {
  return lo + (size_t)wl_below(r, (uint64_t)(hi - lo) + 1);
}

/* Log-uniform in [lo, hi]: as many blocks per doubling of size. */
static inline size_t wl_logrange(wl_rng *r, size_t lo, size_t hi) {
  unsigned bits_lo = 63u - (unsigned)__builtin_clzll(lo);
  unsigned bits_hi = 63u - (unsigned)__builtin_clzll(hi);
  unsigned b = bits_lo + (unsigned)wl_below(r, bits_hi - bits_lo + 1);
  size_t base = (size_t)1 << b;
  size_t v = base + (size_t)wl_below(r, base);
  if (v < lo) v = lo;
  if (v > hi) v = hi;
  return v;
}

static inline double wl_scale(int argc, char **argv) {
  double s = argc > 1 ? atof(argv[1]) : 1.0;
  if (!(s > 0)) {
    fprintf(stderr, "%s: the scale (first argument) must be a positive number\n", argv[0]);
    exit(2);
  }
  return s;
}

static inline long wl_arg(int argc, char **argv, int i, long dflt) {
  return argc > i ? atol(argv[i]) : dflt;
}

/* Current resident set (MiB) from /proc/self/statm. */
static inline double wl_rss_mib(void) {
  long pages = 0, resident = 0;
  FILE *f = fopen("/proc/self/statm", "r");
  if (f) {
    if (fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
    fclose(f);
  }
  return (double)resident * 4096.0 / 1048576.0;
}

static inline double wl_peak_rss_mib(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (double)ru.ru_maxrss / 1024.0;
}

/* Touch one byte per page so the memory is really used (and faulted). */
static inline void wl_touch(void *p, size_t n, unsigned char v) {
  unsigned char *c = (unsigned char *)p;
  for (size_t i = 0; i < n; i += 4096) c[i] = v;
  if (n) c[n - 1] = v;
}

static inline void wl_report(const char *name, double seconds, const char *extra) {
  printf("workload=%s seconds=%.4f peak_rss_mib=%.1f%s%s\n", name, seconds,
         wl_peak_rss_mib(), extra && *extra ? " " : "", extra ? extra : "");
  fflush(stdout);
}

#endif
