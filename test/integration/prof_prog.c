/* SPDX-License-Identifier: BSD-2-Clause */
/* A program with known allocation sites, for prof_test.sh: what each
 * function holds at exit is what google-pprof must read from the heap
 * profile.  Plain C calling only malloc/free/realloc, so LD_PRELOAD picks
 * the allocator; mallctl is looked up at run time.
 *
 *   prof_prog [DUMPFILE | --free-all]
 *
 * With DUMPFILE, mallctl("prof.dump") writes a profile there once
 * everything is allocated (the final dump, prof_final, comes at exit);
 * --free-all frees every block before exit. PROF_PROG_RAISE=SIGNUM: the
 * program sends itself that signal once hold_pages has allocated.
 *
 * Held at exit:  hold_pages  64 MiB in 4 KiB blocks
 *                hold_small  16 MiB in 1 KiB blocks
 *                hold_huge   32 MiB in 4 MiB blocks
 *                grow_vector  8 MiB, one block grown by realloc from 1 KiB
 * Freed before:  churn      128 MiB in 8 KiB blocks, each freed at once
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MiB (1024 * 1024)

static void *keep[64 * 1024];
static size_t nkeep;

static void hold(size_t total, size_t each) {
  for (size_t done = 0; done < total; done += each) {
    char *p = malloc(each);
    if (p == NULL) exit(1);
    p[0] = 1;
    keep[nkeep++] = p;
  }
}

__attribute__((noinline)) void hold_pages(void) { hold(64 * MiB, 4096); }
__attribute__((noinline)) void hold_small(void) { hold(16 * MiB, 1024); }
__attribute__((noinline)) void hold_huge(void) { hold(32 * MiB, 4 * MiB); }

__attribute__((noinline)) void grow_vector(void) {
  char *v = NULL;
  for (size_t n = 1024; n <= 8 * MiB; n *= 2) {
    v = realloc(v, n);
    if (v == NULL) exit(1);
    memset(v + n / 2, 2, n / 2);
  }
  keep[nkeep++] = v;
}

__attribute__((noinline)) void churn(void) {
  for (size_t done = 0; done < 128 * MiB; done += 8192) {
    char *volatile p = malloc(8192);
    if (p == NULL) exit(1);
    p[0] = 3;
    free(p);
  }
}

int main(int argc, char **argv) {
  hold_pages();
  const char *sig = getenv("PROF_PROG_RAISE");
  if (sig != NULL) raise(atoi(sig));
  churn();
  hold_small();
  hold_huge();
  grow_vector();
  if (argc > 1 && strcmp(argv[1], "--free-all") == 0) {
    for (size_t i = 0; i < nkeep; i++) free(keep[i]);
    return 0;
  }
  if (argc > 1) {
    int (*ctl)(const char *, void *, size_t *, void *, size_t) =
        (int (*)(const char *, void *, size_t *, void *, size_t))dlsym(RTLD_DEFAULT, "mallctl");
    const char *name = argv[1];
    int err = ctl ? ctl("prof.dump", NULL, NULL, &name, sizeof name) : -1;
    if (err != 0) {
      fprintf(stderr, "prof_prog: prof.dump: %d\n", err);
      return 2;
    }
  }
  return 0;
}
