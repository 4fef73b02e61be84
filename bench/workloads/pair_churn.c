/* SPDX-License-Identifier: BSD-2-Clause */
/* pair-churn: threads that each allocate and free small blocks on their own
 * (written for ductile).
 *
 * T threads (default 2), each with its own window of 1 000 live blocks:
 * every step frees a random one and allocates a block of a random size,
 * 8-512 B (uniform), in its place, writing its first and last byte. No
 * block crosses threads, so what is timed is each thread's fast path and
 * how its cache, refills and flushes behave under a steady random mix of
 * sizes while another thread does the same.
 *
 * Usage: pair_churn [scale [threads]]   (defaults 1, 2)
 * Work: 200M * scale steps per thread. */
#include <pthread.h>

#include "wl.h"

#define WINDOW 1000

static long steps;
static volatile unsigned long sink;

static void *worker(void *arg) {
  wl_rng r;
  wl_seed(&r, (uint64_t)(intptr_t)arg + 3);
  unsigned char *p[WINDOW];
  size_t n[WINDOW];
  unsigned long acc = 0;
  for (int i = 0; i < WINDOW; i++) {
    n[i] = wl_range(&r, 8, 512);
    p[i] = (unsigned char *)malloc(n[i]);
    if (!p[i]) abort();
    p[i][0] = p[i][n[i] - 1] = (unsigned char)i;
  }
  for (long s = 0; s < steps; s++) {
    uint64_t x = wl_next(&r);
    int i = (int)(x % WINDOW);
    size_t m = 8 + (size_t)((x >> 32) % 505);
    acc += p[i][n[i] - 1];
    free(p[i]);
    p[i] = (unsigned char *)malloc(m);
    if (!p[i]) abort();
    p[i][0] = p[i][m - 1] = (unsigned char)s;
    n[i] = m;
  }
  for (int i = 0; i < WINDOW; i++) free(p[i]);
  sink += acc;
  return NULL;
}

int main(int argc, char **argv) {
  double scale = wl_scale(argc, argv);
  long threads = wl_arg(argc, argv, 2, 2);
  if (threads < 1 || threads > 256) return 2;
  steps = (long)(200000000 * scale);
  pthread_t tid[256];
  double t0 = wl_now();
  for (long t = 0; t < threads; t++)
    if (pthread_create(&tid[t], NULL, worker, (void *)(intptr_t)t) != 0) abort();
  for (long t = 0; t < threads; t++)
    if (pthread_join(tid[t], NULL) != 0) abort();
  double secs = wl_now() - t0;
  char extra[64];
  snprintf(extra, sizeof extra, "threads=%ld steps=%ld", threads, steps);
  wl_report("pair-churn", secs, extra);
  return 0;
}
