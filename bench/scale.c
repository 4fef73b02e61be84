/* SPDX-License-Identifier: BSD-2-Clause */
/* The scale cases, one per run, for any allocator: plain C that
 * calls only the C library's malloc family, so LD_PRELOAD picks the
 * allocator measured (bench/compare-scale.sh runs it under each).
 *
 *   scale --case N [options]
 *
 *   1  churn of moved blocks: {a = malloc(2 MiB); b = malloc(2 MiB);
 *      a = realloc(a, 6 MiB); free(b); free(a)} --rounds times (one byte of
 *      a and b written).
 *   2  live huge blocks: --blocks blocks of --huge bytes (and --medium blocks
 *      of --medium-size bytes), none written unless --touch; then whether
 *      a plain mmap and pthread_create still work. With --fill N the
 *      program first makes mappings of its own (plain mmap, split by
 *      mprotect) up to N below vm.max_map_count, and after the allocation
 *      every other block is freed, malloc_trim(0) called and the freed
 *      blocks allocated again (refill=ok/total) before the checks.
 *   4  a growing heap: 16 KiB blocks up to --gib GiB, 64 KiB blocks up to
 *      --gib GiB and 256 B objects up to --small-gib GiB, never freed; the
 *      first --write bytes of each block are written (default 0: the cost
 *      of the allocator alone, not of the page faults, which on a virtual
 *      machine cost about 20 us each and drown it). ns per malloc at each
 *      of 8 checkpoints, and the worst eighth over the first (`flat`).
 *   5  an idle class: 512 MiB (--idle-mib) of 64 B objects freed, then other
 *      sizes allocated and freed for 2 x --decay-ms (resident set then:
 *      rss_active), then nothing for 2 x --decay-ms (rss_quiet).
 *   6  latency while a heap decays: --heap-mib of mixed sizes (64 B to
 *      256 KiB) freed, then malloc+free pairs of mixed sizes for
 *      2.5 x --decay-ms, each call timed: p99.9 and max.
 *   7  calloc of recycled memory: a 1 GiB block (--calloc-mib) with 2 bytes
 *      written is freed, then calloc(1, 1 GiB): its time and the RSS after.
 *   8  cycles of untouched huge blocks: per round
 *      --blocks blocks of 2-4 MiB, each reallocated to 2-8 MiB, all freed
 *      (sizes from a fixed pseudo-random sequence, nothing written);
 *      --rounds rounds, a line with the resident set and mappings after
 *      rounds 1, 10, 50, 100, ... and the last.
 *
 * Output: one line of key=value pairs per case (time_s, peak_rss_mib from
 * VmHWM, rss_mib, maps = lines of /proc/self/maps, metadata_mib where the
 * allocator answers mallctl("stats.metadata"), and the case's own keys).
 * The decay time is the caller's to set for the allocator (DUCTILE_CONF,
 * MALLOC_CONF); --decay-ms only says how long to wait.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

static int opt_case = 0;
static long opt_rounds = 20000;
static long opt_blocks = 100000;
static long opt_medium = 0;
static size_t opt_huge = 2u << 20;
static size_t opt_medium_size = 1u << 20;
static int opt_touch = 0;
static double opt_gib = 1;
static double opt_small_gib = 0.5;
static long opt_idle_mib = 512;
static long opt_decay_ms = 1000;
static long opt_heap_mib = 1024;
static long opt_calloc_mib = 1024;
static size_t opt_write = 0;
static long opt_fill = 0;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}
static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Reads a small /proc file with read(2): no stdio, so no malloc. */
static size_t read_proc(const char* path, char* buf, size_t n) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  size_t got = 0;
  ssize_t r;
  while (got + 1 < n && (r = read(fd, buf + got, n - 1 - got)) > 0) got += (size_t)r;
  close(fd);
  buf[got] = 0;
  return got;
}

static double status_mib(const char* key) {
  static char buf[8192];
  read_proc("/proc/self/status", buf, sizeof buf);
  const char* p = strstr(buf, key);
  return p ? (double)strtol(p + strlen(key), NULL, 10) / 1024.0 : -1;
}

static long maps_lines(void) {
  int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  static char buf[1 << 16];
  long lines = 0;
  ssize_t r;
  while ((r = read(fd, buf, sizeof buf)) > 0)
    for (ssize_t i = 0; i < r; i++) lines += buf[i] == '\n';
  close(fd);
  return lines;
}

/* stats.metadata through mallctl, where the allocator has one (ductile,
 * jemalloc); -1 elsewhere. */
static double metadata_mib(void) {
  typedef int (*mallctl_fn)(const char*, void*, size_t*, void*, size_t);
  mallctl_fn ctl = (mallctl_fn)dlsym(RTLD_DEFAULT, "mallctl");
  if (ctl == NULL) return -1;
  uint64_t epoch = 1;
  size_t esz = sizeof epoch;
  (void)ctl("epoch", &epoch, &esz, &epoch, esz);
  size_t v = 0, sz = sizeof v;
  if (ctl("stats.metadata", &v, &sz, NULL, 0) != 0) return -1;
  return (double)v / 1048576.0;
}

static void report_common(double t) {
  printf("time_s=%.3f peak_rss_mib=%.1f rss_mib=%.1f maps=%ld", t, status_mib("VmHWM:"),
         status_mib("VmRSS:"), maps_lines());
  double m = metadata_mib();
  if (m >= 0) printf(" metadata_mib=%.1f", m);
  else printf(" metadata_mib=-");
}

static void* must(void* p, const char* what) {
  if (p == NULL) {
    fprintf(stderr, "scale: %s failed: %s\n", what, strerror(errno));
    exit(1);
  }
  return p;
}

/* ---- 1 ---------------------------------------------------------------- */
static void case_churn(void) {
  const size_t mib = 1u << 20;
  double t0 = now_s();
  for (long i = 0; i < opt_rounds; i++) {
    char* a = must(malloc(2 * mib), "malloc");
    char* b = must(malloc(2 * mib), "malloc");
    a[0] = 1;
    b[0] = 1;
    a = must(realloc(a, 6 * mib), "realloc");
    free(b);
    free(a);
  }
  double t = now_s() - t0;
  printf("case=1 rounds=%ld ", opt_rounds);
  report_common(t);
  printf("\n");
}

/* ---- 2 ---------------------------------------------------------------- */
static void* idle_thread(void* arg) { return arg; }

/* Mappings of the program's own up to `below` under vm.max_map_count: one
 * read-only mapping with every other page made PROT_NONE. */
static long fill_maps(long below) {
  char buf[64];
  long limit = read_proc("/proc/sys/vm/max_map_count", buf, sizeof buf) ? atol(buf) : 65530;
  long splits = (limit - below - maps_lines()) / 2;
  if (splits <= 0) return 0;
  size_t page = 4096, size = (size_t)(2 * splits + 1) * page;
  char* p = mmap(NULL, size, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return 0;
  for (long i = 0; i < splits; i++)
    if (mprotect(p + (size_t)(2 * i + 1) * page, page, PROT_NONE) != 0) break;
  return limit;
}

static void case_live_blocks(void) {
  long limit = opt_fill > 0 ? fill_maps(opt_fill) : 0;
  long maps0 = maps_lines();
  long total = opt_blocks + opt_medium;
  /* The pointer array is mapped directly, outside the allocator measured. */
  void** v = mmap(NULL, (size_t)total * sizeof(void*), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  size_t* sizes = mmap(NULL, (size_t)total * sizeof(size_t), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (v == MAP_FAILED || sizes == MAP_FAILED) exit(1);
  double t0 = now_s();
  long ok_huge = 0, ok_medium = 0;
  for (long i = 0; i < total; i++) {
    /* Huge and medium blocks alternate while both remain. */
    int huge = ok_huge < opt_blocks && (ok_medium >= opt_medium || ok_huge <= ok_medium);
    size_t size = huge ? opt_huge : opt_medium_size;
    sizes[i] = size;
    v[i] = malloc(size);
    if (v[i] == NULL) break;
    if (opt_touch) ((char*)v[i])[0] = 1;
    if (huge) ok_huge++;
    else ok_medium++;
  }
  long n = ok_huge + ok_medium, refill = 0, refilled = 0;
  if (opt_fill > 0) {
    for (long i = 0; i < n; i += 2) free(v[i]);
    malloc_trim(0);
    for (long i = 0; i < n; i += 2, refill++) {
      v[i] = malloc(sizes[i]);
      if (v[i] != NULL) refilled++;
      else v[i] = malloc(1);  /* keep the array's entries freeable */
    }
  }
  double t = now_s() - t0;
  long maps1 = maps_lines();
  void* m = mmap(NULL, 1u << 16, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  int mmap_ok = m != MAP_FAILED;
  if (mmap_ok) munmap(m, 1u << 16);
  pthread_t th;
  int thread_ok = pthread_create(&th, NULL, idle_thread, NULL) == 0;
  if (thread_ok) pthread_join(th, NULL);
  printf("case=2 huge=%ld/%ld medium=%ld/%ld maps_per_block=%.3f mmap_after=%s thread_after=%s ", ok_huge,
         opt_blocks, ok_medium, opt_medium, (double)(maps1 - maps0) / (double)(ok_huge + ok_medium),
         mmap_ok ? "ok" : "FAIL", thread_ok ? "ok" : "FAIL");
  if (opt_fill > 0) printf("limit=%ld maps_before=%ld refill=%ld/%ld ", limit, maps0, refilled, refill);
  report_common(t);
  printf("\n");
  for (long i = 0; i < total && v[i] != NULL; i++) free(v[i]);
}

/* ---- 4 ---------------------------------------------------------------- */
/* Allocates `size`-byte blocks up to `gib` GiB, never freed; prints the ns
 * per malloc of each eighth. */
static double grow_series(const char* name, size_t size, double gib) {
  const uint64_t total = (uint64_t)(gib * (double)(1u << 30)) / size;
  const uint64_t step = total / 8 ? total / 8 : 1;
  printf("%s_ns=", name);
  double first = 0, worst = 0, t_all = 0;
  uint64_t done = 0;
  for (int k = 0; k < 8 && done < total; k++) {
    uint64_t n = k == 7 ? total - done : step;
    uint64_t t0 = now_ns();
    for (uint64_t i = 0; i < n; i++) {
      char* p = must(malloc(size), "malloc");
      if (opt_write) memset(p, 1, opt_write);
    }
    uint64_t dt = now_ns() - t0;
    done += n;
    double per = (double)dt / (double)n;
    if (k == 0) first = per;
    if (per > worst) worst = per;
    t_all += (double)dt * 1e-9;
    printf("%s%.0f", k ? "," : "", per);
  }
  printf(" %s_time_s=%.3f %s_flat=%.2f ", name, t_all, name, first > 0 ? worst / first : 0);
  return t_all;
}

static void case_grow(void) {
  if (opt_write > 256) opt_write = 256;
  printf("case=4 gib=%g small_gib=%g write=%zu ", opt_gib, opt_small_gib, opt_write);
  double t = grow_series("b16k", 16384, opt_gib);
  t += grow_series("b64k", 65536, opt_gib);
  if (opt_small_gib > 0) t += grow_series("b256", 256, opt_small_gib);
  report_common(t);
  printf("\n");
}

/* ---- 5 ---------------------------------------------------------------- */
static void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

static void case_idle_class(void) {
  /* Linked through their first word: no array beside them. */
  const long n = opt_idle_mib * (1 << 20) / 64;
  void* head = NULL;
  double t0 = now_s();
  for (long i = 0; i < n; i++) {
    void** p = must(malloc(64), "malloc");
    *p = head;
    head = p;
  }
  double rss_full = status_mib("VmRSS:");
  while (head) {
    void* next = *(void**)head;
    free(head);
    head = next;
  }
  double rss_freed = status_mib("VmRSS:");
  /* Other sizes, allocated and freed, for twice the decay time. */
  static const size_t sizes[] = {24, 100, 200, 500, 1000, 3000, 8000};
  void* keep[64] = {0};
  const double until = now_s() + 2.0 * (double)opt_decay_ms / 1000.0;
  unsigned k = 0;
  while (now_s() < until) {
    for (int j = 0; j < 64; j++, k++) {
      free(keep[j]);
      keep[j] = must(malloc(sizes[k % 7]), "malloc");
      ((char*)keep[j])[0] = 1;
    }
    sleep_ms(1);
  }
  double rss_active = status_mib("VmRSS:");
  sleep_ms(2 * opt_decay_ms);
  double rss_quiet = status_mib("VmRSS:");
  double t = now_s() - t0;
  printf("case=5 idle_mib=%ld decay_ms=%ld rss_full=%.1f rss_freed=%.1f rss_active=%.1f rss_quiet=%.1f ",
         opt_idle_mib, opt_decay_ms, rss_full, rss_freed, rss_active, rss_quiet);
  report_common(t);
  printf("\n");
  for (int j = 0; j < 64; j++) free(keep[j]);
}

/* ---- 6 ---------------------------------------------------------------- */
static int cmp_u32(const void* a, const void* b) {
  uint32_t x = *(const uint32_t*)a, y = *(const uint32_t*)b;
  return x < y ? -1 : x > y;
}

static void case_latency(void) {
  /* A heap of mixed sizes, linked through the blocks, freed at once. */
  static const size_t sizes[] = {64, 200, 1000, 4096, 20000, 70000, 262144};
  const size_t heap = (size_t)opt_heap_mib << 20;
  void* head = NULL;
  size_t bytes = 0;
  for (unsigned k = 0; bytes < heap; k++) {
    size_t s = sizes[k % 7];
    void** p = must(malloc(s), "malloc");
    memset(p, 1, s);
    *p = head;
    head = p;
    bytes += s;
  }
  while (head) {
    void* next = *(void**)head;
    free(head);
    head = next;
  }
  /* Every call timed, for 2.5 x the decay time; samples in a mapping of their own. */
  const size_t max_samples = 1u << 25;
  uint32_t* lat = mmap(NULL, max_samples * sizeof(uint32_t), PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (lat == MAP_FAILED) exit(1);
  size_t n = 0;
  void* keep[256] = {0};
  const uint64_t t0 = now_ns();
  const uint64_t until = t0 + (uint64_t)opt_decay_ms * 2500000u;
  unsigned k = 0;
  while (now_ns() < until && n + 2 <= max_samples) {
    unsigned j = k % 256;
    uint64_t a = now_ns();
    free(keep[j]);
    uint64_t b = now_ns();
    keep[j] = malloc(sizes[(k * 7 + k / 256) % 6]);
    uint64_t c = now_ns();
    lat[n++] = (uint32_t)(b - a > UINT32_MAX ? UINT32_MAX : b - a);
    lat[n++] = (uint32_t)(c - b > UINT32_MAX ? UINT32_MAX : c - b);
    if (keep[j]) ((char*)keep[j])[0] = 1;
    k++;
    if (k % 4096 == 0) sleep_ms(1); /* a program that also does other work */
  }
  double t = (double)(now_ns() - t0) * 1e-9;
  qsort(lat, n, sizeof *lat, cmp_u32);
  printf("case=6 heap_mib=%ld calls=%zu p50_ns=%u p99_9_ns=%u max_us=%.1f ", opt_heap_mib, n, lat[n / 2],
         lat[n - n / 1000 - 1], (double)lat[n - 1] / 1000.0);
  report_common(t);
  printf("\n");
  for (int j = 0; j < 256; j++) free(keep[j]);
}

/* ---- 7 ---------------------------------------------------------------- */
static void case_calloc(void) {
  const size_t size = (size_t)opt_calloc_mib << 20;
  char* p = must(malloc(size), "malloc");
  p[0] = 1;
  p[size - 1] = 1;
  free(p);
  double rss0 = status_mib("VmRSS:");
  double t0 = now_s();
  char* q = must(calloc(1, size), "calloc");
  double t = now_s() - t0;
  double rss1 = status_mib("VmRSS:");
  printf("case=7 calloc_mib=%ld zero=%s rss_before=%.1f rss_after=%.1f ", opt_calloc_mib,
         q[0] == 0 && q[size - 1] == 0 ? "ok" : "FAIL", rss0, rss1);
  report_common(t);
  printf("\n");
  free(q);
}

/* ---- 8 ---------------------------------------------------------------- */
static uint64_t rng_next(uint64_t* s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}
/* A page-multiple size in [lo, hi) MiB. */
static size_t mib_between(uint64_t* s, size_t lo, size_t hi) {
  const size_t pages = (hi - lo) << 8;
  return (lo << 20) + (size_t)(rng_next(s) % pages) * 4096;
}
static void case_cycles(void) {
  char** b = must(calloc((size_t)opt_blocks, sizeof *b), "calloc");
  uint64_t seed = 88172645463325252ull;
  double t0 = now_s();
  for (long r = 1; r <= opt_rounds; r++) {
    for (long i = 0; i < opt_blocks; i++) b[i] = must(malloc(mib_between(&seed, 2, 4)), "malloc");
    for (long i = 0; i < opt_blocks; i++) b[i] = must(realloc(b[i], mib_between(&seed, 2, 8)), "realloc");
    for (long i = 0; i < opt_blocks; i++) free(b[i]);
    if (r == 1 || r == 10 || r % 50 == 0 || r == opt_rounds) {
      printf("case=8 blocks=%ld round=%ld ", opt_blocks, r);
      report_common(now_s() - t0);
      printf("\n");
    }
  }
  free(b);
}

static void usage(void) {
  fprintf(stderr,
          "usage: scale --case N [--rounds N] [--blocks N] [--medium N] [--huge BYTES]\n"
          "             [--medium-size BYTES] [--touch] [--gib X] [--small-gib X]\n"
          "             [--idle-mib N] [--decay-ms N] [--heap-mib N] [--calloc-mib N]\n"
          "             [--write BYTES] [--fill N]\n");
  exit(2);
}

int main(int argc, char** argv) {
  for (int i = 1; i < argc; i++) {
    const char* a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--touch")) { opt_touch = 1; continue; }
    if (v == NULL) usage();
    i++;
    if (!strcmp(a, "--case")) opt_case = atoi(v);
    else if (!strcmp(a, "--rounds")) opt_rounds = atol(v);
    else if (!strcmp(a, "--blocks")) opt_blocks = atol(v);
    else if (!strcmp(a, "--medium")) opt_medium = atol(v);
    else if (!strcmp(a, "--huge")) opt_huge = strtoul(v, NULL, 0);
    else if (!strcmp(a, "--medium-size")) opt_medium_size = strtoul(v, NULL, 0);
    else if (!strcmp(a, "--gib")) opt_gib = atof(v);
    else if (!strcmp(a, "--small-gib")) opt_small_gib = atof(v);
    else if (!strcmp(a, "--idle-mib")) opt_idle_mib = atol(v);
    else if (!strcmp(a, "--decay-ms")) opt_decay_ms = atol(v);
    else if (!strcmp(a, "--heap-mib")) opt_heap_mib = atol(v);
    else if (!strcmp(a, "--calloc-mib")) opt_calloc_mib = atol(v);
    else if (!strcmp(a, "--write")) opt_write = strtoul(v, NULL, 0);
    else if (!strcmp(a, "--fill")) opt_fill = atol(v);
    else usage();
  }
  setvbuf(stdout, NULL, _IONBF, 0);
  switch (opt_case) {
    case 1: case_churn(); break;
    case 2: case_live_blocks(); break;
    case 4: case_grow(); break;
    case 5: case_idle_class(); break;
    case 6: case_latency(); break;
    case 7: case_calloc(); break;
    case 8: case_cycles(); break;
    default: usage();
  }
  return 0;
}
