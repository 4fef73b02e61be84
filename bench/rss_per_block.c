/* SPDX-License-Identifier: BSD-2-Clause */
/* Bytes of resident memory per live block, for any malloc.
 *
 *   rss_per_block SIZE [COUNT]
 *
 * Allocates COUNT (default 1,000,000) blocks of SIZE bytes with malloc,
 * writes one byte in each, and prints the resident-set growth divided by
 * COUNT. Uses only malloc/free/malloc_usable_size, so LD_PRELOAD picks the
 * allocator (bench/compare-small.sh runs it under several).
 *
 * RSS is read from /proc/self/smaps_rollup, which the kernel computes by
 * walking the page tables (exact). VmRSS in /proc/self/status is the fallback;
 * since Linux 6.2 it is a per-CPU counter read without summing, off by up to
 * a few hundred KiB, which is a few tenths of a byte per block here. Reading
 * uses open/read into a stack buffer, never stdio, so it does not allocate.
 *
 * The pointer array comes from mmap (not the allocator under test) and is
 * faulted in before the first reading; one warm-up block is allocated, and
 * kept, before the first reading too, so the allocator's one-time
 * initialisation is not charged to the blocks.
 *
 * Output: one line of key=value pairs, e.g.
 *   size=24 blocks=1000000 usable=24 rss_before_kib=... rss_after_kib=...
 *   bytes_per_block=24.58 overhead_pct=2.4
 * where overhead_pct is relative to the usable size (the size class).
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* Value in KiB of the line starting with `key` in `path`, or -1. */
static long read_kib(const char* path, const char* key) {
  char buf[8192];
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  size_t len = 0;
  for (;;) {
    ssize_t n = read(fd, buf + len, sizeof buf - 1 - len);
    if (n <= 0) break;
    len += (size_t)n;
    if (len == sizeof buf - 1) break;
  }
  close(fd);
  buf[len] = '\0';
  size_t klen = strlen(key);
  for (char* line = buf; line != NULL && *line != '\0';) {
    if (strncmp(line, key, klen) == 0) return strtol(line + klen, NULL, 10);
    line = strchr(line, '\n');
    if (line != NULL) ++line;
  }
  return -1;
}

static long rss_kib(void) {
  long kib = read_kib("/proc/self/smaps_rollup", "Rss:");
  if (kib < 0) kib = read_kib("/proc/self/status", "VmRSS:");
  return kib;
}

int main(int argc, char** argv) {
  if (argc < 2 || argc > 3) {
    fprintf(stderr, "usage: %s SIZE [COUNT]\n", argv[0]);
    return 2;
  }
  char* end;
  unsigned long size = strtoul(argv[1], &end, 0);
  if (*end != '\0' || size == 0) {
    fprintf(stderr, "%s: bad size '%s'\n", argv[0], argv[1]);
    return 2;
  }
  unsigned long count = 1000000;
  if (argc == 3) {
    count = strtoul(argv[2], &end, 0);
    if (*end != '\0' || count == 0) {
      fprintf(stderr, "%s: bad count '%s'\n", argv[0], argv[2]);
      return 2;
    }
  }

  size_t array_bytes = count * sizeof(char*);
  char** blocks = mmap(NULL, array_bytes, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (blocks == MAP_FAILED) {
    perror("mmap");
    return 1;
  }
  memset(blocks, 0, array_bytes);

  /* Warm-up: initialise the allocator and this size's class. */
  char* warm = malloc(size);
  if (warm == NULL) {
    perror("malloc");
    return 1;
  }
  warm[0] = 1;
  size_t usable = malloc_usable_size(warm);

  /* Print something now so that stdio's buffer is allocated before the
   * first reading. */
  printf("size=%lu ", size);
  fflush(stdout);

  long before = rss_kib();
  for (unsigned long i = 0; i < count; ++i) {
    char* p = malloc(size);
    if (p == NULL) {
      fprintf(stderr, "malloc(%lu) failed after %lu blocks\n", size, i);
      return 1;
    }
    p[0] = (char)i;
    blocks[i] = p;
  }
  long after = rss_kib();
  if (before < 0 || after < 0) {
    fprintf(stderr, "cannot read RSS from /proc/self\n");
    return 1;
  }

  double per_block = (double)(after - before) * 1024.0 / (double)count;
  printf("blocks=%lu usable=%zu rss_before_kib=%ld rss_after_kib=%ld "
         "bytes_per_block=%.3f overhead_pct=%.2f\n",
         count, usable, before, after, per_block,
         100.0 * (per_block - (double)usable) / (double)usable);
  fflush(stdout);

  for (unsigned long i = 0; i < count; ++i) free(blocks[i]);
  free(warm);
  munmap(blocks, array_bytes);
  return 0;
}
