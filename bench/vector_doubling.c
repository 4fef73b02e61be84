/* SPDX-License-Identifier: BSD-2-Clause */
/* The vector-doubling loop that motivated ductile's huge layer (the 2014
 * jemalloc change that grew huge allocations in place):
 *
 *     for each round:
 *         ptr = NULL; old = 0;
 *         for (size = 4; size < top; size *= 2) {
 *             ptr = realloc(ptr, size);
 *             memset(ptr + old, 0xff, size - old);
 *             old = size;
 *         }
 *         free(ptr);
 *
 * Plain C using only realloc, free and memset, so it measures whatever
 * allocator LD_PRELOAD puts under it. Two bare-memory limits run the same
 * memsets without an allocator:
 *   --bare-thp      a fresh mmap of the final size with MADV_HUGEPAGE every
 *                   round (unmapped after): every round pays its page faults;
 *   --bare-faulted  one mapping, faulted in before the clock starts and
 *                   reused by every round: the memsets alone.
 *
 * Many blocks growing together (--blocks N, --threads T): N buffers grown
 * round-robin, each doubling from 4 KiB to top/2 and writing its new half,
 * every round (then all freed); T threads each own every T-th buffer. Its
 * limits write the same bytes in the same order into one mapping for all the
 * buffers at their final size (with huge-page advice):
 *   --bare-faulted  faulted in before the clock starts: the writes alone;
 *   --bare-kept     faulted by the first round's writes and kept: memory
 *                   that stays faulted, where every round after the first
 *                   finds its pages (what an allocator that never gives
 *                   the buffers' memory back and never copies could reach). Its line adds blocks, threads,
 * huge_steps (reallocs from a block of at least 2 MiB), moves among them,
 * and live_mib (the buffers' final bytes, against peak_rss_mib).
 *
 * Usage: vector_doubling [--bare-thp | --bare-faulted | --bare-kept] [--blocks N]
 *                        [--threads T] [-v] [rounds [top]]
 *   -v      the time of each round on stderr (the loop under an allocator)
 *   rounds  default 10; top  default 1 GiB (exclusive: the last block is top/2
 *   when top is a power of two). Sizes accept a K, M or G suffix.
 *
 * Prints one line of key=value pairs:
 *   mode, rounds, top, final (the last block size), seconds,
 *   peak_rss_mib (getrusage ru_maxrss), moves (reallocs of a block of at
 *   least 2 MiB that returned a new address), and -- only under ductile,
 *   read through its mallctl -- growth counts by path (copies, mremaps, ...).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>

/* ductile's mallctl, when ductile is the allocator (LD_PRELOAD or linked):
 * a weak reference stays NULL under any other allocator. */
extern int ductile_mallctl(const char *name, void *oldp, size_t *oldlenp, void *newp, size_t newlen)
    __attribute__((weak));

/* The block size from which a changed address counts as a move: the huge
 * threshold of ductile and about where every allocator stops using size
 * classes. */
#define MOVE_FROM ((size_t)2 << 20)

enum mode { MODE_REALLOC, MODE_BARE_THP, MODE_BARE_FAULTED, MODE_BARE_KEPT };

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Keeps the compiler from dropping stores into memory that is freed next. */
static void touch(void *p) { __asm__ volatile("" : : "r"(p) : "memory"); }

static int parse_size(const char *s, size_t *out) {
  char *end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 0);
  if (errno != 0 || end == s) return -1;
  switch (*end) {
    case 'k': case 'K': v <<= 10; end++; break;
    case 'm': case 'M': v <<= 20; end++; break;
    case 'g': case 'G': v <<= 30; end++; break;
    default: break;
  }
  if (*end != '\0') return -1;
  *out = (size_t)v;
  return 0;
}

static void usage(const char *argv0) {
  fprintf(stderr, "usage: %s [--bare-thp | --bare-faulted | --bare-kept] [--blocks N] [--threads T] [-v] [rounds [top]]\n", argv0);
  exit(2);
}

static long peak_rss_kib(void) {
  struct rusage ru;
  if (getrusage(RUSAGE_SELF, &ru) != 0) return -1;
  return ru.ru_maxrss;
}

/* Minor page faults of the whole process so far (for -v's rounds). */
static long minor_faults(void) {
  struct rusage ru;
  if (getrusage(RUSAGE_SELF, &ru) != 0) return -1;
  return ru.ru_minflt;
}

static size_t final_size(size_t top) {
  size_t last = 0;
  for (size_t size = 4; size < top; size *= 2) last = size;
  return last;
}

/* The loop itself, under whatever allocator is loaded. */
static int verbose;

static double run_realloc(int rounds, size_t top, unsigned long *moves) {
  double t0 = now();
  for (int i = 0; i < rounds; i++) {
    double r0 = now();
    long f0 = minor_faults();
    char *ptr = NULL;
    size_t old = 0;
    for (size_t size = 4; size < top; size *= 2) {
      char *q = realloc(ptr, size);
      if (q == NULL) {
        fprintf(stderr, "realloc(%zu) failed\n", size);
        exit(1);
      }
      if (ptr != NULL && q != ptr && old >= MOVE_FROM) (*moves)++;
      ptr = q;
      memset(ptr + old, 0xff, size - old);
      touch(ptr);
      old = size;
    }
    free(ptr);
    if (verbose) fprintf(stderr, "round %d: %.4f s, %ld minor faults\n", i + 1, now() - r0, minor_faults() - f0);
  }
  return now() - t0;
}

static void fill_like_the_loop(char *p, size_t top) {
  size_t old = 0;
  for (size_t size = 4; size < top; size *= 2) {
    memset(p + old, 0xff, size - old);
    touch(p);
    old = size;
  }
}

static char *map_huge(size_t len) {
  void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    perror("mmap");
    exit(1);
  }
  (void)madvise(p, len, MADV_HUGEPAGE); /* where THP is off, the limit is 4 KiB pages */
  return p;
}

static double run_bare(enum mode mode, int rounds, size_t top) {
  size_t len = final_size(top);
  if (len == 0) return 0;
  len = (len + 4095) & ~(size_t)4095;
  double t0;
  if (mode == MODE_BARE_THP) {
    t0 = now();
    for (int i = 0; i < rounds; i++) {
      char *p = map_huge(len);
      fill_like_the_loop(p, top);
      munmap(p, len);
    }
  } else {
    char *p = map_huge(len);
    memset(p, 0, len); /* faulted in before the clock starts */
    t0 = now();
    for (int i = 0; i < rounds; i++) fill_like_the_loop(p, top);
    double t = now() - t0;
    munmap(p, len);
    return t;
  }
  return now() - t0;
}

/* ---- many blocks growing together ---------------------------------------- */
struct many {
  int rounds, blocks, threads, index, bare;
  size_t top;
  char *base;              /* bare: the faulted mapping, one final size per block */
  unsigned long steps, moves;
  pthread_barrier_t *round_start;
};

#define MANY_FROM ((size_t)4 << 10)

static void *many_thread(void *arg) {
  struct many *m = arg;
  const size_t last = final_size(m->top);
  int mine = 0;
  for (int b = m->index; b < m->blocks; b += m->threads) mine++;
  char **buf = calloc((size_t)mine, sizeof *buf);
  if (buf == NULL) {
    perror("calloc");
    exit(1);
  }
  for (int r = 0; r < m->rounds; r++) {
    pthread_barrier_wait(m->round_start);
    size_t old = 0;
    for (size_t size = MANY_FROM; size < m->top; size *= 2) {
      for (int k = 0; k < mine; k++) {
        char *q;
        if (m->bare) {
          q = m->base + (size_t)(m->index + k * m->threads) * last;
        } else {
          q = realloc(buf[k], size);
          if (q == NULL) {
            fprintf(stderr, "realloc(%zu) failed\n", size);
            exit(1);
          }
          if (old >= MOVE_FROM) {
            m->steps++;
            if (q != buf[k]) m->moves++;
          }
        }
        buf[k] = q;
        memset(q + old, 0xff, size - old);
        touch(q);
      }
      old = size;
    }
    for (int k = 0; k < mine; k++) {
      if (!m->bare) free(buf[k]);
      buf[k] = NULL;
    }
  }
  free(buf);
  return NULL;
}

static double run_many(enum mode mode, int rounds, size_t top, int blocks, int threads, unsigned long *steps,
                       unsigned long *moves) {
  const size_t last = final_size(top);
  const int bare = mode != MODE_REALLOC;
  char *base = NULL;
  if (bare) {
    base = map_huge(last * (size_t)blocks);
    if (mode == MODE_BARE_FAULTED) memset(base, 0, last * (size_t)blocks); /* before the clock starts */
  }
  pthread_barrier_t start;
  pthread_barrier_init(&start, NULL, (unsigned)threads + 1);
  struct many *m = calloc((size_t)threads, sizeof *m);
  pthread_t *t = calloc((size_t)threads, sizeof *t);
  if (m == NULL || t == NULL) {
    perror("calloc");
    exit(1);
  }
  for (int i = 0; i < threads; i++) {
    m[i] = (struct many){rounds, blocks, threads, i, bare, top, base, 0, 0, &start};
    if (pthread_create(&t[i], NULL, many_thread, &m[i]) != 0) {
      fprintf(stderr, "pthread_create failed\n");
      exit(1);
    }
  }
  /* Every round starts together; the clock runs from the first. */
  double t0 = 0, r0 = 0;
  long f0 = 0;
  for (int r = 0; r < rounds; r++) {
    pthread_barrier_wait(&start);
    const double t = now();
    const long f = minor_faults();
    if (r == 0) t0 = t;
    else if (verbose) fprintf(stderr, "round %d: %.4f s, %ld minor faults\n", r, t - r0, f - f0);
    r0 = t;
    f0 = f;
  }
  for (int i = 0; i < threads; i++) pthread_join(t[i], NULL);
  double secs = now() - t0;
  if (verbose) fprintf(stderr, "round %d: %.4f s, %ld minor faults\n", rounds, now() - r0, minor_faults() - f0);
  for (int i = 0; i < threads; i++) {
    *steps += m[i].steps;
    *moves += m[i].moves;
  }
  free(m);
  free(t);
  pthread_barrier_destroy(&start);
  if (bare) munmap(base, last * (size_t)blocks);
  return secs;
}

static void print_ductile_growth(void) {
  static const char *const paths[] = {"headroom", "neighbour", "fixed_map", "mremap", "copy"};
  if (ductile_mallctl == NULL) return;
  for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
    char name[64];
    uint64_t v = 0;
    size_t len = sizeof v;
    snprintf(name, sizeof name, "ductile.huge.growth.%s", paths[i]);
    if (ductile_mallctl(name, &v, &len, NULL, 0) == 0 && len == sizeof v)
      printf(" %s=%llu", paths[i], (unsigned long long)v);
  }
}

int main(int argc, char **argv) {
  enum mode mode = MODE_REALLOC;
  int rounds = 10;
  size_t top = (size_t)1 << 30;
  int blocks = 0, threads = 1;
  int pos = 0;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--bare-thp") == 0) {
      mode = MODE_BARE_THP;
    } else if (strcmp(argv[i], "--bare-faulted") == 0) {
      mode = MODE_BARE_FAULTED;
    } else if (strcmp(argv[i], "--bare-kept") == 0) {
      mode = MODE_BARE_KEPT;
    } else if (strcmp(argv[i], "--blocks") == 0 && i + 1 < argc) {
      blocks = atoi(argv[++i]);
      if (blocks < 1 || blocks > 100000) usage(argv[0]);
    } else if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc) {
      threads = atoi(argv[++i]);
      if (threads < 1 || threads > 1024) usage(argv[0]);
    } else if (strcmp(argv[i], "-v") == 0) {
      verbose = 1;
    } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      usage(argv[0]);
    } else if (pos == 0) {
      char *end;
      long r = strtol(argv[i], &end, 10);
      if (*end != '\0' || r < 1 || r > 1000000) usage(argv[0]);
      rounds = (int)r;
      pos++;
    } else if (pos == 1) {
      if (parse_size(argv[i], &top) != 0 || top < 8) usage(argv[0]);
      pos++;
    } else {
      usage(argv[0]);
    }
  }

  if (blocks > 0) {
    if (mode == MODE_BARE_THP || top <= MANY_FROM) usage(argv[0]);
    const int bare = mode != MODE_REALLOC;
    unsigned long steps = 0, moves = 0;
    double secs = run_many(mode, rounds, top, blocks, threads, &steps, &moves);
    printf("mode=%s rounds=%d top=%zu final=%zu blocks=%d threads=%d seconds=%.4f peak_rss_mib=%.1f live_mib=%.1f",
           !bare ? "realloc" : mode == MODE_BARE_KEPT ? "bare-kept" : "bare-faulted", rounds, top,
           final_size(top), blocks, threads, secs,
           (double)peak_rss_kib() / 1024.0, (double)final_size(top) * blocks / 1048576.0);
    if (!bare) {
      printf(" huge_steps=%lu moves=%lu", steps, moves);
      print_ductile_growth();
    }
    printf("\n");
    return 0;
  }

  if (mode == MODE_BARE_KEPT) usage(argv[0]); /* a limit of the many-blocks case only */
  unsigned long moves = 0;
  double secs = mode == MODE_REALLOC ? run_realloc(rounds, top, &moves) : run_bare(mode, rounds, top);
  const char *name = mode == MODE_REALLOC ? "realloc" : mode == MODE_BARE_THP ? "bare-thp" : "bare-faulted";
  printf("mode=%s rounds=%d top=%zu final=%zu seconds=%.4f peak_rss_mib=%.1f", name, rounds, top,
         final_size(top), secs, (double)peak_rss_kib() / 1024.0);
  if (mode == MODE_REALLOC) {
    printf(" moves=%lu", moves);
    print_ductile_growth();
  }
  printf("\n");
  return 0;
}
