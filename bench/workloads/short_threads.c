/* SPDX-License-Identifier: BSD-2-Clause */
/* short-threads: many threads, each short-lived, started one after another
 * (written for ductile).
 *
 * N threads in all, at most two alive at a time: thread i is started once
 * thread i-2 has been joined. Each allocates a few hundred blocks of 16 B to
 * 32 KiB (log-uniform, so small and medium classes alike), writes them,
 * frees them in a shuffled order, does that a few rounds, and exits. What
 * it measures is a thread's life cycle: the first allocation of a new
 * thread, and what a thread's exit gives back and the next one faults in
 * again. Prints minor_faults (the process's minor page faults) too.
 *
 * Usage: short_threads [scale [blocks [rounds]]]   (defaults 1, 300, 4)
 * Work: 1000 * scale threads. */
#include <pthread.h>
#include <sys/resource.h>

#include "wl.h"

typedef struct {
  long id, blocks, rounds;
} job;

static void *worker(void *arg) {
  const job *j = (const job *)arg;
  wl_rng r;
  wl_seed(&r, (uint64_t)j->id * 7919u + 1);
  void **p = (void **)malloc(sizeof(void *) * (size_t)j->blocks);
  size_t *n = (size_t *)malloc(sizeof(size_t) * (size_t)j->blocks);
  if (!p || !n) abort();
  for (long round = 0; round < j->rounds; round++) {
    for (long i = 0; i < j->blocks; i++) {
      n[i] = wl_logrange(&r, 16, 32768);
      p[i] = malloc(n[i]);
      if (!p[i]) abort();
      memset(p[i], (int)(i & 0x7f), n[i]);
    }
    for (long i = j->blocks - 1; i > 0; i--) {  /* shuffle, then free */
      long k = (long)wl_below(&r, (uint64_t)i + 1);
      void *t = p[i];
      p[i] = p[k];
      p[k] = t;
      size_t u = n[i];
      n[i] = n[k];
      n[k] = u;
    }
    for (long i = 0; i < j->blocks; i++) {
      unsigned char *c = (unsigned char *)p[i];
      if (c[n[i] - 1] != c[0]) abort();
      free(p[i]);
    }
  }
  free(n);
  free(p);
  return NULL;
}

int main(int argc, char **argv) {
  double scale = wl_scale(argc, argv);
  long blocks = wl_arg(argc, argv, 2, 300);
  long rounds = wl_arg(argc, argv, 3, 4);
  if (blocks < 1 || rounds < 1) return 2;
  long nthreads = (long)(1000 * scale);
  if (nthreads < 2) nthreads = 2;

  job *jobs = (job *)calloc((size_t)nthreads, sizeof(job));
  pthread_t *tid = (pthread_t *)calloc((size_t)nthreads, sizeof(pthread_t));
  if (!jobs || !tid) abort();
  struct rusage ru0, ru1;
  getrusage(RUSAGE_SELF, &ru0);
  double t0 = wl_now();
  for (long t = 0; t < nthreads; t++) {
    if (t >= 2 && pthread_join(tid[t - 2], NULL) != 0) abort();
    jobs[t].id = t;
    jobs[t].blocks = blocks;
    jobs[t].rounds = rounds;
    if (pthread_create(&tid[t], NULL, worker, &jobs[t]) != 0) abort();
  }
  for (long t = nthreads - 2; t < nthreads; t++)
    if (pthread_join(tid[t], NULL) != 0) abort();
  double secs = wl_now() - t0;
  getrusage(RUSAGE_SELF, &ru1);
  char extra[96];
  snprintf(extra, sizeof extra, "threads=%ld minor_faults=%ld", nthreads, ru1.ru_minflt - ru0.ru_minflt);
  wl_report("short-threads", secs, extra);
  free(tid);
  free(jobs);
  return 0;
}
