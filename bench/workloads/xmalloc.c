/* SPDX-License-Identifier: BSD-2-Clause */
/* xmalloc: producer/consumer (an xmalloc-style pattern, written for ductile).
 *
 * P producer threads only allocate: blocks of 8-512 B, written, gathered in
 * batches of 256 pointers (the batch itself is malloc'ed too) and pushed on a
 * bounded queue. C consumer threads only free: they pop a batch, read and
 * free every block and the batch. Every free is a remote free.
 *
 * Usage: xmalloc [scale [producers [consumers]]]   (defaults 1, 1, 1)
 * Work: 2M * scale blocks in all. */
#include <pthread.h>

#include "wl.h"

#define BATCH 256
#define QCAP 64

typedef struct {
  void *p[BATCH];
} batch;

static batch *queue[QCAP];
static int qhead, qlen, producers_left;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t not_empty = PTHREAD_COND_INITIALIZER;
static pthread_cond_t not_full = PTHREAD_COND_INITIALIZER;
static long per_producer;
static volatile unsigned long sink;

static void *producer(void *arg) {
  wl_rng r;
  wl_seed(&r, (uint64_t)(intptr_t)arg + 7);
  for (long done = 0; done < per_producer; done += BATCH) {
    batch *b = (batch *)malloc(sizeof *b);
    if (!b) abort();
    for (int i = 0; i < BATCH; i++) {
      size_t n = wl_range(&r, 8, 512);
      char *p = (char *)malloc(n);
      if (!p) abort();
      p[0] = (char)i;
      p[n - 1] = (char)n;
      b->p[i] = p;
    }
    pthread_mutex_lock(&mu);
    while (qlen == QCAP) pthread_cond_wait(&not_full, &mu);
    queue[(qhead + qlen) % QCAP] = b;
    qlen++;
    pthread_cond_signal(&not_empty);
    pthread_mutex_unlock(&mu);
  }
  pthread_mutex_lock(&mu);
  producers_left--;
  pthread_cond_broadcast(&not_empty);
  pthread_mutex_unlock(&mu);
  return NULL;
}

static void *consumer(void *arg) {
  (void)arg;
  unsigned long acc = 0;
  for (;;) {
    pthread_mutex_lock(&mu);
    while (qlen == 0 && producers_left > 0) pthread_cond_wait(&not_empty, &mu);
    if (qlen == 0) {
      pthread_mutex_unlock(&mu);
      break;
    }
    batch *b = queue[qhead];
    qhead = (qhead + 1) % QCAP;
    qlen--;
    pthread_cond_signal(&not_full);
    pthread_mutex_unlock(&mu);
    for (int i = 0; i < BATCH; i++) {
      acc += (unsigned char)((char *)b->p[i])[0];
      free(b->p[i]);
    }
    free(b);
  }
  sink += acc;
  return NULL;
}

int main(int argc, char **argv) {
  double scale = wl_scale(argc, argv);
  long np = wl_arg(argc, argv, 2, 1), nc = wl_arg(argc, argv, 3, 1);
  if (np < 1 || nc < 1) return 2;
  per_producer = (long)(2e6 * scale / (double)np);
  if (per_producer < BATCH) per_producer = BATCH;
  producers_left = (int)np;

  pthread_t *tid = (pthread_t *)malloc(sizeof(pthread_t) * (size_t)(np + nc));
  double t0 = wl_now();
  for (long i = 0; i < nc; i++)
    if (pthread_create(&tid[i], NULL, consumer, NULL)) abort();
  for (long i = 0; i < np; i++)
    if (pthread_create(&tid[nc + i], NULL, producer, (void *)(intptr_t)i)) abort();
  for (long i = 0; i < np + nc; i++) pthread_join(tid[i], NULL);
  double secs = wl_now() - t0;
  free(tid);
  char extra[128];
  snprintf(extra, sizeof extra, "producers=%ld consumers=%ld blocks=%ld", np, nc,
           (per_producer + BATCH - 1) / BATCH * BATCH * np);
  wl_report("xmalloc", secs, extra);
  return 0;
}
