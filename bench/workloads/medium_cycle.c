/* SPDX-License-Identifier: BSD-2-Clause */
/* medium-cycle: many medium blocks cycled (written for ductile).
 *
 * Keeps L blocks live, of sizes log-uniform in [MIN, MAX]; each operation
 * frees a random one and allocates a new one in its place, writing one byte
 * in every page of it. An allocator that hands freed pages back to the
 * kernel and faults them in again pays for it here.
 *
 * Usage: medium_cycle [scale [live [min_kib [max_kib]]]]
 *   defaults 1, 64, 16, 1024: 64 blocks of 16 KiB - 1 MiB live
 *   (the "many medium blocks, 5-25 MiB" variant is: 1 12 5120 25600)
 * Work: 6M pages written * scale (about 100000 ops at the defaults). */
#include "wl.h"

int main(int argc, char **argv) {
  double scale = wl_scale(argc, argv);
  long live = wl_arg(argc, argv, 2, 64);
  size_t lo = (size_t)wl_arg(argc, argv, 3, 16) << 10;
  size_t hi = (size_t)wl_arg(argc, argv, 4, 1024) << 10;
  if (live < 1 || lo < 1 || hi < lo) return 2;
  /* The mean of a log-uniform block, roughly: (hi - lo) / ln(hi / lo). */
  double mean = hi > lo ? (double)(hi - lo) / __builtin_log((double)hi / (double)lo)
                        : (double)lo;
  long ops = (long)(6e6 * 4096.0 / mean * scale);
  if (ops < 1) ops = 1;

  wl_rng r;
  wl_seed(&r, 42);
  char **slot = (char **)calloc((size_t)live, sizeof(char *));
  size_t *len = (size_t *)calloc((size_t)live, sizeof(size_t));
  for (long i = 0; i < live; i++) {
    len[i] = wl_logrange(&r, lo, hi);
    slot[i] = (char *)malloc(len[i]);
    if (!slot[i]) abort();
    wl_touch(slot[i], len[i], 1);
  }
  unsigned long sum = 0;
  double t0 = wl_now();
  for (long op = 0; op < ops; op++) {
    long k = (long)wl_below(&r, (uint64_t)live);
    sum += (unsigned char)slot[k][len[k] - 1];
    free(slot[k]);
    len[k] = wl_logrange(&r, lo, hi);
    slot[k] = (char *)malloc(len[k]);
    if (!slot[k]) abort();
    wl_touch(slot[k], len[k], (unsigned char)op);
  }
  double secs = wl_now() - t0;
  for (long i = 0; i < live; i++) free(slot[i]);
  free(slot);
  free(len);
  char extra[128];
  snprintf(extra, sizeof extra, "live=%ld min=%zu max=%zu ops=%ld check=%lu", live, lo,
           hi, ops, sum & 0xff);
  wl_report(hi > (8u << 20) ? "large-cycle" : "medium-cycle", secs, extra);
  return 0;
}
