/* SPDX-License-Identifier: BSD-2-Clause */
/* How long the statistics take to read, for any malloc: the program calls
 * only the malloc family and finds the statistics functions at run time, so
 * LD_PRELOAD picks the allocator (bench/stats-latency.sh runs the peers).
 *
 *   stats_latency [LIVE [REPS [EVICT_MIB]]]
 *
 * With LIVE small blocks live (default 100000, 16 to 512 bytes; as many
 * again allocated among them and freed, every other block, so that slabs and
 * runs are half used, as after a while of churn), each read is timed REPS times (default 2000; malloc_stats a tenth
 * of that) and its median and fastest time printed in microseconds:
 *
 *   allocated     mallctl("epoch") then mallctl("stats.allocated") (ductile,
 *                 jemalloc); MallocExtension_GetNumericProperty(
 *                 "generic.current_allocated_bytes") (tcmalloc)
 *   mallinfo2     (ductile, glibc); mallinfo where there is no mallinfo2
 *   malloc_stats  written to /dev/null (ductile, glibc, tcmalloc);
 *                 malloc_stats_print (jemalloc) and mi_stats_print_out
 *                 (mimalloc) with a callback that drops the text
 *
 * With EVICT_MIB (default 0), a buffer that large (larger than the
 * processor's last-level cache) is written before each read, so that the
 * read starts with its data out of the caches, as a read now and then in a
 * busy program does; the writing is not timed.
 *
 * A read that the allocator does not define itself (found in another library
 * than malloc: the C library's, answering about a heap it does not use) is
 * left out. One line per read: the read, the function, median and fastest.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

static uint64_t rng_state = 0x9e3779b97f4a7c15u;
static uint32_t next_random(void) {
  rng_state ^= rng_state >> 12;
  rng_state ^= rng_state << 25;
  rng_state ^= rng_state >> 27;
  return (uint32_t)((rng_state * 0x2545f4914f6cdd1du) >> 32);
}

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The function `name` if the library that defines malloc defines it too. */
static void* own(const char* name) {
  void* f = dlsym(RTLD_DEFAULT, name);
  Dl_info fi, mi;
  if (f == NULL || !dladdr(f, &fi) || !dladdr((void*)&malloc, &mi)) return NULL;
  return fi.dli_fname != NULL && mi.dli_fname != NULL && strcmp(fi.dli_fname, mi.dli_fname) == 0 ? f : NULL;
}

static int cmp_u64(const void* a, const void* b) {
  uint64_t x = *(const uint64_t*)a, y = *(const uint64_t*)b;
  return x < y ? -1 : x > y;
}

typedef void (*read_fn)(void);
static uint64_t* times;
static unsigned char* evict;  /* mapped apart from the allocator's heap */
static size_t evict_bytes;

/* Times `reps` calls of `f` (after a few untimed ones) and prints a line. */
static void measure(const char* what, const char* how, read_fn f, int reps) {
  for (int i = 0; i < 3; i++) f();
  for (int i = 0; i < reps; i++) {
    if (evict_bytes != 0) memset(evict, i, evict_bytes);
    uint64_t t0 = now_ns();
    f();
    times[i] = now_ns() - t0;
  }
  qsort(times, (size_t)reps, sizeof *times, cmp_u64);
  printf("%-13s %-34s %10.3f %10.3f\n", what, how, times[reps / 2] / 1000.0, times[0] / 1000.0);
}

typedef int (*mallctl_fn)(const char*, void*, size_t*, void*, size_t);
typedef int (*tc_property_fn)(const char*, size_t*);
typedef void (*print_fn)(void (*)(void*, const char*), void*, const char*);
typedef void (*mi_print_fn)(void (*)(const char*, void*), void*);
typedef struct mallinfo2 (*mallinfo2_fn)(void);
typedef struct mallinfo (*mallinfo_fn)(void);
typedef void (*void_fn)(void);

static mallctl_fn mallctl_p;
static tc_property_fn tc_property_p;
static print_fn stats_print_p;
static mi_print_fn mi_print_p;
static mallinfo2_fn mallinfo2_p;
static mallinfo_fn mallinfo_p;
static void_fn malloc_stats_p;
static volatile size_t sink;

static void read_mallctl(void) {
  uint64_t epoch = 1;
  size_t len = sizeof epoch, v = 0;
  mallctl_p("epoch", &epoch, &len, &epoch, sizeof epoch);
  len = sizeof v;
  mallctl_p("stats.allocated", &v, &len, NULL, 0);
  sink = v;
}
static void read_tc_property(void) {
  size_t v = 0;
  tc_property_p("generic.current_allocated_bytes", &v);
  sink = v;
}
static void read_mallinfo2(void) { sink = mallinfo2_p().uordblks; }
static void read_mallinfo(void) { sink = (size_t)mallinfo_p().uordblks; }
static void drop(void* opaque, const char* text) {
  (void)opaque;
  sink += strlen(text);
}
static void mi_drop(const char* text, void* opaque) { drop(opaque, text); }
static void read_stats_print(void) { stats_print_p(drop, NULL, NULL); }
static void read_mi_print(void) { mi_print_p(mi_drop, NULL); }
static void read_malloc_stats(void) { malloc_stats_p(); }

int main(int argc, char** argv) {
  long live = argc > 1 ? strtol(argv[1], NULL, 10) : 100000;
  int reps = argc > 2 ? atoi(argv[2]) : 2000;
  long evict_mib = argc > 3 ? strtol(argv[3], NULL, 10) : 0;
  if (live <= 0 || reps <= 10 || evict_mib < 0) {
    fprintf(stderr, "usage: stats_latency [LIVE [REPS [EVICT_MIB]]]\n");
    return 2;
  }
  if (evict_mib > 0) {
    evict_bytes = (size_t)evict_mib << 20;
    evict = mmap(NULL, evict_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (evict == MAP_FAILED) return 1;
  }
  times = malloc((size_t)reps * sizeof *times);
  char** blocks = malloc((size_t)live * sizeof *blocks);
  char** extra = malloc((size_t)live * sizeof *extra);
  if (times == NULL || blocks == NULL || extra == NULL) return 1;
  for (long i = 0; i < live; i++) {
    extra[i] = malloc(16 + next_random() % 497);
    blocks[i] = malloc(16 + next_random() % 497);
    if (blocks[i] == NULL || extra[i] == NULL) return 1;
    blocks[i][0] = extra[i][0] = 1;
  }
  for (long i = 0; i < live; i++) free(extra[i]);

  mallctl_p = (mallctl_fn)own("mallctl");
  tc_property_p = (tc_property_fn)own("MallocExtension_GetNumericProperty");
  stats_print_p = (print_fn)own("malloc_stats_print");
  mi_print_p = (mi_print_fn)own("mi_stats_print_out");
  mallinfo2_p = (mallinfo2_fn)own("mallinfo2");
  mallinfo_p = (mallinfo_fn)own("mallinfo");
  malloc_stats_p = (void_fn)own("malloc_stats");

  printf("%-13s %-34s %10s %10s\n", "read", "function", "median us", "fastest us");
  if (mallctl_p) measure("allocated", "mallctl epoch, stats.allocated", read_mallctl, reps);
  else if (tc_property_p)
    measure("allocated", "MallocExtension_GetNumericProperty", read_tc_property, reps);
  if (mallinfo2_p) measure("mallinfo2", "mallinfo2", read_mallinfo2, reps);
  else if (mallinfo_p) measure("mallinfo2", "mallinfo", read_mallinfo, reps);
  if (malloc_stats_p) {
    /* Its text goes to standard error: /dev/null meanwhile. */
    fflush(stderr);
    int saved = dup(2), null = open("/dev/null", O_WRONLY);
    if (saved < 0 || null < 0 || dup2(null, 2) != 2) return 1;
    measure("malloc_stats", "malloc_stats", read_malloc_stats, reps / 10);
    dup2(saved, 2);
    close(saved);
    close(null);
  } else if (stats_print_p) {
    measure("malloc_stats", "malloc_stats_print", read_stats_print, reps / 10);
  } else if (mi_print_p) {
    measure("malloc_stats", "mi_stats_print_out", read_mi_print, reps / 10);
  }
  for (long i = 0; i < live; i++) free(blocks[i]);
  free(blocks);
  free(extra);
  free(times);
  return 0;
}
