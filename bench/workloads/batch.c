/* SPDX-License-Identifier: BSD-2-Clause */
/* batch: allocate a batch of blocks of one size, then free it (written for
 * ductile).
 *
 * For each batch length n (25, 100, 400, 1600) and each size (16 B to 4 KiB,
 * ten sizes), one thread allocates n blocks of that size, writes each (its
 * first 64 bytes and its last byte), frees the first half in the order they
 * were allocated and the second half in reverse, and repeats. The whole
 * sweep runs twice: once before the process has a second thread and once
 * after one has been started and joined (some allocators take cheaper paths
 * while a process is single-threaded). A thread cache that holds fewer
 * blocks than a batch overflows and refills on every batch, so this
 * measures that path against a free list kept in the page.
 *
 * Usage: batch [scale]   (default 1)
 * Work: 2 sweeps x 40 (n, size) pairs x 500 000 * scale blocks each. */
#include <pthread.h>

#include "wl.h"

static const size_t sizes[] = {16, 32, 48, 64, 96, 128, 256, 512, 1024, 4096};
static const long lengths[] = {25, 100, 400, 1600};
static volatile unsigned long sink;

static void *second_thread(void *arg) {
  void *p = malloc(64);  /* a thread that allocates, so every allocator sees it */
  free(p);
  return arg;
}

static unsigned long sweep(long per_pair) {
  static void *p[1600];
  unsigned long acc = 0;
  for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
    size_t n = sizes[s];
    size_t head = n < 64 ? n : 64;
    for (size_t l = 0; l < sizeof lengths / sizeof lengths[0]; l++) {
      long len = lengths[l];
      for (long done = 0; done < per_pair; done += len) {
        for (long i = 0; i < len; i++) {
          unsigned char *b = (unsigned char *)malloc(n);
          if (!b) abort();
          memset(b, (int)(i & 0x7f), head);
          b[n - 1] = (unsigned char)i;
          p[i] = b;
        }
        long half = len / 2;
        for (long i = 0; i < half; i++) {
          acc += ((unsigned char *)p[i])[n - 1];
          free(p[i]);
        }
        for (long i = len - 1; i >= half; i--) {
          acc += ((unsigned char *)p[i])[0];
          free(p[i]);
        }
      }
    }
  }
  return acc;
}

int main(int argc, char **argv) {
  double scale = wl_scale(argc, argv);
  long per_pair = (long)(500000 * scale);
  if (per_pair < 1600) per_pair = 1600;

  double t0 = wl_now();
  unsigned long acc = sweep(per_pair);
  pthread_t t;
  if (pthread_create(&t, NULL, second_thread, NULL) != 0 || pthread_join(t, NULL) != 0) abort();
  double t1 = wl_now();
  acc += sweep(per_pair);
  double t2 = wl_now();
  sink = acc;
  char extra[96];
  snprintf(extra, sizeof extra, "single_thread_s=%.4f threaded_s=%.4f", t1 - t0, t2 - t1);
  wl_report("batch", t2 - t0, extra);
  return 0;
}
