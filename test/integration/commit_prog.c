/* SPDX-License-Identifier: BSD-2-Clause */
/* The commit charge of freed memory under strict overcommit (run by
 * commit_test.sh).
 *
 *   commit_prog SIZE MIB
 *
 * Allocates MIB MiB in blocks of SIZE bytes, writes them, frees them all and
 * trims (malloc_trim). Prints Committed_AS from /proc/meminfo, in KiB, with
 * the blocks written and after the trim: "charged KIB after KIB". */
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static long committed_kib(void) {
  char line[256];
  long kib = -1;
  FILE* f = fopen("/proc/meminfo", "r");
  if (f == NULL) exit(2);
  while (fgets(line, sizeof line, f) != NULL)
    if (sscanf(line, "Committed_AS: %ld kB", &kib) == 1) break;
  fclose(f);
  if (kib < 0) exit(2);
  return kib;
}

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s SIZE MIB\n", argv[0]);
    return 2;
  }
  size_t size = strtoul(argv[1], NULL, 0);
  size_t n = (strtoul(argv[2], NULL, 0) << 20) / size;
  void** v = malloc(n * sizeof *v);
  if (v == NULL) return 1;
  for (size_t i = 0; i < n; i++) {
    v[i] = malloc(size);
    if (v[i] == NULL) return 1;
    memset(v[i], 1, size);
  }
  long charged = committed_kib();
  for (size_t i = 0; i < n; i++) free(v[i]);
  free(v);
  malloc_trim(0);
  printf("charged %ld after %ld\n", charged, committed_kib());
  return 0;
}
