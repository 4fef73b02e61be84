/* SPDX-License-Identifier: BSD-2-Clause */
/* thread-churn: threads exit and are replaced; objects are realloc'ed and
 * handed across thread generations (written for ductile).
 *
 * G generations of T threads each. A thread takes the H objects its
 * predecessor handed on, reallocs each to a new random size (moving it
 * between size classes), then churns: allocates a burst of small objects
 * (16-512 B, about 20 MiB), frees them, and finally hands H objects of its
 * own to the next generation and exits. The live set stays small and
 * constant, so peak RSS shows whether memory piles up as threads come and
 * go; final_rss_mib is the resident size after the last generation.
 *
 * Usage: thread_churn [scale [threads [handed]]]   (defaults 1, 2, 10000)
 * Work: 25 * scale generations. */
#include <pthread.h>

#include "wl.h"

#define BURST 80000

typedef struct {
  long id, gen;
  void **hand; /* in: from the predecessor; out: to the successor */
  long nhand;
} job;

static void *worker(void *arg) {
  job *j = (job *)arg;
  wl_rng r;
  wl_seed(&r, (uint64_t)(j->gen * 131 + j->id));
  /* Migrate: realloc what we were handed to new sizes. */
  for (long i = 0; i < j->nhand; i++) {
    size_t n = wl_logrange(&r, 16, 2048);
    char *p = (char *)realloc(j->hand[i], n);
    if (!p) abort();
    p[0] = (char)i;
    p[n - 1] = (char)n;
    j->hand[i] = p;
  }
  /* Churn a burst of short-lived objects. */
  void **burst = (void **)malloc(sizeof(void *) * BURST);
  if (!burst) abort();
  for (long i = 0; i < BURST; i++) {
    size_t n = wl_range(&r, 16, 512);
    char *p = (char *)malloc(n);
    if (!p) abort();
    p[0] = (char)i;
    burst[i] = p;
  }
  for (long i = BURST - 1; i >= 0; i -= 2) free(burst[i]);
  for (long i = 0; i < BURST; i += 2) free(burst[i]);
  free(burst);
  /* Replace half of the handed objects by fresh ones of our own. */
  for (long i = 0; i < j->nhand; i += 2) {
    free(j->hand[i]);
    size_t n = wl_logrange(&r, 16, 2048);
    j->hand[i] = malloc(n);
    if (!j->hand[i]) abort();
    memset(j->hand[i], 3, n);
  }
  return NULL;
}

int main(int argc, char **argv) {
  double scale = wl_scale(argc, argv);
  long nthreads = wl_arg(argc, argv, 2, 2);
  long nhand = wl_arg(argc, argv, 3, 10000);
  if (nthreads < 1 || nhand < 0) return 2;
  long gens = (long)(25 * scale);
  if (gens < 1) gens = 1;

  job *jobs = (job *)calloc((size_t)nthreads, sizeof(job));
  pthread_t *tid = (pthread_t *)malloc(sizeof(pthread_t) * (size_t)nthreads);
  wl_rng r;
  wl_seed(&r, 5);
  for (long t = 0; t < nthreads; t++) {
    jobs[t].id = t;
    jobs[t].nhand = nhand;
    jobs[t].hand = (void **)malloc(sizeof(void *) * (size_t)(nhand ? nhand : 1));
    for (long i = 0; i < nhand; i++) jobs[t].hand[i] = malloc(wl_logrange(&r, 16, 2048));
  }
  double t0 = wl_now();
  for (long g = 0; g < gens; g++) {
    /* Rotate the hand-offs so objects cross threads as well as generations. */
    if (nthreads > 1) {
      void **first = jobs[0].hand;
      for (long t = 0; t + 1 < nthreads; t++) jobs[t].hand = jobs[t + 1].hand;
      jobs[nthreads - 1].hand = first;
    }
    for (long t = 0; t < nthreads; t++) {
      jobs[t].gen = g;
      if (pthread_create(&tid[t], NULL, worker, &jobs[t])) abort();
    }
    for (long t = 0; t < nthreads; t++) pthread_join(tid[t], NULL);
  }
  double secs = wl_now() - t0;
  double final_rss = wl_rss_mib();
  for (long t = 0; t < nthreads; t++) {
    for (long i = 0; i < nhand; i++) free(jobs[t].hand[i]);
    free(jobs[t].hand);
  }
  free(jobs);
  free(tid);
  char extra[128];
  snprintf(extra, sizeof extra, "threads=%ld generations=%ld final_rss_mib=%.1f", nthreads,
           gens, final_rss);
  wl_report("thread-churn", secs, extra);
  return 0;
}
