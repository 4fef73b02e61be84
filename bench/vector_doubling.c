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
 * Usage: vector_doubling [--bare-thp | --bare-faulted] [-v] [rounds [top]]
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

enum mode { MODE_REALLOC, MODE_BARE_THP, MODE_BARE_FAULTED };

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
  fprintf(stderr, "usage: %s [--bare-thp | --bare-faulted] [-v] [rounds [top]]\n", argv0);
  exit(2);
}

static long peak_rss_kib(void) {
  struct rusage ru;
  if (getrusage(RUSAGE_SELF, &ru) != 0) return -1;
  return ru.ru_maxrss;
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
    if (verbose) fprintf(stderr, "round %d: %.4f s\n", i + 1, now() - r0);
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
  int pos = 0;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--bare-thp") == 0) {
      mode = MODE_BARE_THP;
    } else if (strcmp(argv[i], "--bare-faulted") == 0) {
      mode = MODE_BARE_FAULTED;
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
