/* SPDX-License-Identifier: BSD-2-Clause */
/* Resident memory after growing medium blocks into the huge range, for any
 * malloc.
 *
 *   realloc_rss [--written] [COUNT [SIZE]]
 *
 * Allocates COUNT (default 500) blocks of SIZE bytes (default 1 MiB) with
 * malloc, writes all of each with --written (else none of it), grows each
 * with realloc to twice SIZE, and prints the resident-set growth over the
 * whole run. Nothing is freed before the last reading: the old blocks are
 * what realloc gave back. Uses only malloc/realloc/free, so LD_PRELOAD picks
 * the allocator (bench/compare-realloc-rss.sh runs it under several).
 *
 * RSS is read from /proc/self/smaps_rollup (the kernel walks the page
 * tables: exact), /proc/self/status's VmRSS where that is missing, with
 * open/read into a stack buffer, so reading it does not allocate. The
 * pointer array comes from mmap and is faulted in before the first reading.
 *
 * Output: one line of key=value pairs, e.g.
 *   blocks=500 size=1048576 written=0 rss_before_kib=... rss_after_kib=...
 *   grown_mib=...  (the growth in MiB)
 */
#define _GNU_SOURCE
#include <fcntl.h>
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
  int written = 0;
  int arg = 1;
  if (arg < argc && strcmp(argv[arg], "--written") == 0) {
    written = 1;
    arg++;
  }
  unsigned long count = 500, size = 1ul << 20;
  char* end;
  if (arg < argc) {
    count = strtoul(argv[arg++], &end, 0);
    if (*end != '\0' || count == 0) {
      fprintf(stderr, "usage: %s [--written] [COUNT [SIZE]]\n", argv[0]);
      return 2;
    }
  }
  if (arg < argc) {
    size = strtoul(argv[arg++], &end, 0);
    if (*end != '\0' || size == 0) {
      fprintf(stderr, "usage: %s [--written] [COUNT [SIZE]]\n", argv[0]);
      return 2;
    }
  }
  if (arg != argc) {
    fprintf(stderr, "usage: %s [--written] [COUNT [SIZE]]\n", argv[0]);
    return 2;
  }

  size_t array_bytes = count * sizeof(char*);
  char** blocks = mmap(NULL, array_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (blocks == MAP_FAILED) {
    perror("mmap");
    return 1;
  }
  memset(blocks, 0, array_bytes);
  /* The allocator's start-up and stdio's buffer before the first reading. */
  free(malloc(1));
  printf("blocks=%lu size=%lu written=%d ", count, size, written);
  fflush(stdout);

  long before = rss_kib();
  for (unsigned long i = 0; i < count; ++i) {
    char* p = malloc(size);
    if (p == NULL) {
      fprintf(stderr, "malloc(%lu) failed after %lu blocks\n", size, i);
      return 1;
    }
    if (written) memset(p, (int)(i | 1), size);
    char* q = realloc(p, 2 * size);
    if (q == NULL) {
      fprintf(stderr, "realloc(%lu) failed after %lu blocks\n", 2 * size, i);
      return 1;
    }
    if (written && (q[0] != (char)(i | 1) || q[size - 1] != (char)(i | 1))) {
      fprintf(stderr, "block %lu lost its contents\n", i);
      return 1;
    }
    blocks[i] = q;
  }
  long after = rss_kib();
  if (before < 0 || after < 0) {
    fprintf(stderr, "cannot read RSS from /proc/self\n");
    return 1;
  }
  printf("rss_before_kib=%ld rss_after_kib=%ld grown_mib=%.0f\n", before, after,
         (double)(after - before) / 1024.0);
  fflush(stdout);
  for (unsigned long i = 0; i < count; ++i) free(blocks[i]);
  munmap(blocks, array_bytes);
  return 0;
}
