/* SPDX-License-Identifier: BSD-2-Clause */
/* A program with two known growth sites, for growth_test.sh: what the
 * growth profile and the totals at exit must say of each.  Plain C calling
 * only malloc/realloc/free, so LD_PRELOAD picks the allocator; mallctl is
 * looked up at run time.
 *
 *   growth_prog [DUMPFILE]
 *
 * copy_site      100 times: a 16-byte block grown to 3 000 bytes, which
 *                leaves its size class: copied, 16 bytes each (1 600 in all)
 * in_place_site   10 times: a 4 MiB block grown to 6 MiB, which its span's
 *                headroom (or its free neighbour) takes: nothing copied
 *
 * With DUMPFILE, mallctl("prof.growth.dump") writes the growth profile
 * there; the program prints "dump: <mallctl's return value>".
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MiB (1024 * 1024)

/* Each call site is followed by a use of what it returned, so that it is
 * no tail call and its function stays on the stack. */
__attribute__((noinline)) static void copy_site(void) {
  for (int i = 0; i < 100; i++) {
    char *p = malloc(16);
    if (p == NULL) exit(1);
    memset(p, 'a', 16);
    char *q = realloc(p, 3000);
    if (q == NULL || q[15] != 'a') exit(1);
    free(q);
  }
}

__attribute__((noinline)) static void in_place_site(void) {
  for (int i = 0; i < 10; i++) {
    char *p = malloc(4 * MiB);
    if (p == NULL) exit(1);
    p[0] = 'b';
    char *q = realloc(p, 6 * MiB);
    if (q == NULL || q[0] != 'b') exit(1);
    free(q);
  }
}

int main(int argc, char **argv) {
  copy_site();
  in_place_site();
  if (argc > 1) {
    int (*ctl)(const char *, void *, size_t *, void *, size_t) =
        (int (*)(const char *, void *, size_t *, void *, size_t))dlsym(RTLD_DEFAULT, "mallctl");
    const char *name = argv[1];
    printf("dump: %d\n", ctl ? ctl("prof.growth.dump", NULL, NULL, &name, sizeof name) : -1);
  }
  return 0;
}
