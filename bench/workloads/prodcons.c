/* SPDX-License-Identifier: BSD-2-Clause */
/* prodcons: one thread allocates, another frees, block by block (written for
 * ductile).
 *
 * The producer allocates blocks of 8-512 B (uniform), writes their first and
 * last byte and passes each pointer through a single-producer,
 * single-consumer ring of 4096 slots; the consumer reads each block and
 * frees it. Every free is a remote free and nothing is batched by the
 * program (xmalloc passes batches of 256 under a mutex), so the allocator's
 * cross-thread free path and the producer's refills are what is timed.
 * Spins (with a pause) when the ring is full or empty: run it on at least
 * two cores.
 *
 * Usage: prodcons [scale]   (default 1)
 * Work: 20M * scale blocks. */
#include <pthread.h>
#include <stdatomic.h>

#include "wl.h"

#define RING 4096

static void *ring[RING];
static _Atomic unsigned long head, tail;  /* head: next to fill; tail: next to take */
static long total;
static volatile unsigned long sink;

static inline void relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

static void *producer(void *arg) {
  wl_rng r;
  wl_seed(&r, 11);
  unsigned long h = 0;
  for (long i = 0; i < total; i++) {
    size_t n = wl_range(&r, 8, 512);
    unsigned char *p = (unsigned char *)malloc(n);
    if (!p) abort();
    p[0] = (unsigned char)n;
    p[n - 1] = (unsigned char)i;
    while (h - atomic_load_explicit(&tail, memory_order_acquire) == RING) relax();
    ring[h % RING] = p;
    atomic_store_explicit(&head, ++h, memory_order_release);
  }
  return arg;
}

static void *consumer(void *arg) {
  unsigned long t = 0, acc = 0;
  for (long i = 0; i < total; i++) {
    while (atomic_load_explicit(&head, memory_order_acquire) == t) relax();
    unsigned char *p = (unsigned char *)ring[t % RING];
    atomic_store_explicit(&tail, ++t, memory_order_release);
    acc += p[0];
    free(p);
  }
  sink = acc;
  return arg;
}

int main(int argc, char **argv) {
  double scale = wl_scale(argc, argv);
  total = (long)(20000000 * scale);
  if (total < RING) total = RING;
  pthread_t pt, ct;
  double t0 = wl_now();
  if (pthread_create(&ct, NULL, consumer, NULL) != 0) abort();
  if (pthread_create(&pt, NULL, producer, NULL) != 0) abort();
  if (pthread_join(pt, NULL) != 0 || pthread_join(ct, NULL) != 0) abort();
  double secs = wl_now() - t0;
  char extra[64];
  snprintf(extra, sizeof extra, "blocks=%ld", total);
  wl_report("prodcons", secs, extra);
  return 0;
}
