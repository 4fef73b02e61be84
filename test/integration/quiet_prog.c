/* SPDX-License-Identifier: BSD-2-Clause */
/* Frees a heap and goes quiet (run by decay_test.sh).
 *
 *   quiet_prog SIZE MIB WAIT_MS
 *
 * Allocates MIB MiB in blocks of SIZE bytes, writes them, frees them all,
 * then makes no allocator call for WAIT_MS milliseconds. Prints the resident
 * set, in KiB, right after the frees and after the wait:
 * "freed KIB after KIB". */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static long rss_kib(void) {
  char buf[128];
  FILE* f = fopen("/proc/self/statm", "r");
  long size = 0, resident = 0;
  if (f == NULL || fgets(buf, sizeof buf, f) == NULL || sscanf(buf, "%ld %ld", &size, &resident) != 2) exit(2);
  fclose(f);
  return resident * 4;
}

int main(int argc, char** argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: %s SIZE MIB WAIT_MS\n", argv[0]);
    return 2;
  }
  size_t size = strtoul(argv[1], NULL, 0);
  size_t n = (strtoul(argv[2], NULL, 0) << 20) / size;
  long wait_ms = strtol(argv[3], NULL, 0);
  char** blocks = malloc(n * sizeof(char*));
  if (blocks == NULL) return 2;
  for (size_t i = 0; i < n; i++) {
    blocks[i] = malloc(size);
    if (blocks[i] == NULL) return 2;
    memset(blocks[i], 1, size);
  }
  for (size_t i = 0; i < n; i++) free(blocks[i]);
  free(blocks);
  /* The statm reads above and below use stdio's buffer: allocate it now. */
  long freed = rss_kib();
  struct timespec ts = {wait_ms / 1000, wait_ms % 1000 * 1000000L};
  while (nanosleep(&ts, &ts) != 0) {
  }
  printf("freed %ld after %ld\n", freed, rss_kib());
  return 0;
}
