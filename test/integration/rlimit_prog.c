/* SPDX-License-Identifier: BSD-2-Clause */
/* Out of address space under RLIMIT_AS (run by rlimit_test.sh under
 * `ulimit -v`): allocation fails cleanly with ENOMEM, blocks stay intact, and
 * work resumes after frees.
 *
 *   rlimit_prog grow     a realloc-growth loop up to the limit, twice
 *   rlimit_prog threads  threads that allocate until refused, in rounds
 *
 * Exits 0 when every check holds; prints the first failed check otherwise. */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "prog_check.h"

enum { kStride = 4096 };

static unsigned char mark(size_t i) { return (unsigned char)(i / kStride * 7 + 1); }

/* Doubles a block until realloc refuses; returns the largest size reached.
 * Every page holds a byte that identifies it, checked after each step and
 * after the refusal. */
static size_t grow_to_the_limit(void) {
  size_t size = 64 * 1024;
  unsigned char* p = malloc(size);
  CHECK(p != NULL);
  for (size_t i = 0; i < size; i += kStride) p[i] = mark(i);
  for (;;) {
    errno = 0;
    unsigned char* q = realloc(p, size * 2);
    if (q == NULL) {
      CHECK(errno == ENOMEM);
      break;
    }
    p = q;
    for (size_t i = size; i < size * 2; i += kStride) p[i] = mark(i);
    size *= 2;
    CHECK(size <= (size_t)1 << 40); /* the limit must stop it */
  }
  for (size_t i = 0; i < size; i += kStride) CHECK(p[i] == mark(i)); /* intact */
  /* Still usable: small blocks, and a shrink. */
  void* small = malloc(100);
  CHECK(small != NULL);
  free(small);
  unsigned char* s = realloc(p, size / 2);
  CHECK(s != NULL);
  for (size_t i = 0; i < size / 2; i += kStride) CHECK(s[i] == mark(i));
  free(s);
  return size;
}

static int grow(void) {
  size_t first = grow_to_the_limit();
  size_t second = grow_to_the_limit();
  printf("grow: reached %zu MiB, then %zu MiB after freeing\n", first >> 20, second >> 20);
  CHECK(first >= (size_t)64 << 20);
  CHECK(second >= first); /* the address space came back */
  /* A large calloc that cannot fit is refused; one that can is zeroed. */
  errno = 0;
  CHECK(calloc(1, (size_t)1 << 40) == NULL && errno == ENOMEM);
  unsigned char* z = calloc(1, first / 4);
  CHECK(z != NULL);
  for (size_t i = 0; i < first / 4; i += kStride) CHECK(z[i] == 0);
  free(z);
  return 0;
}

enum { kThreads = 4, kRounds = 5, kMaxBlocks = 4096 };

static void* allocate_until_refused(void* arg) {
  unsigned seed = (unsigned)(uintptr_t)arg;
  errno = 0;
  void** blocks = malloc(kMaxBlocks * sizeof(void*));
  if (blocks == NULL) { /* the other threads took it all already */
    CHECK(errno == ENOMEM);
    return (void*)1;
  }
  size_t refusals = 0;
  for (int round = 0; round < kRounds; round++) {
    size_t n = 0;
    while (n < kMaxBlocks) {
      /* Heavy-tailed sizes: mostly small, some medium, a few huge. */
      unsigned r = rand_r(&seed);
      size_t size = r % 8 == 0 ? (size_t)(r % 16 + 1) << 20 : r % 4 == 0 ? (size_t)(r % 200) << 10 : r % 2000 + 1;
      errno = 0;
      unsigned char* p = malloc(size);
      if (p == NULL) {
        CHECK(errno == ENOMEM);
        refusals++;
        break;
      }
      p[0] = (unsigned char)n;
      p[size - 1] = (unsigned char)n;
      blocks[n++] = p;
    }
    for (size_t i = 0; i < n; i++) free(blocks[i]);
  }
  free(blocks);
  return (void*)refusals;
}

static int threads(void) {
  pthread_t t[kThreads];
  int started = 0;
  for (int i = 0; i < kThreads; i++)
    if (pthread_create(&t[started], NULL, allocate_until_refused, (void*)(uintptr_t)(i + 1)) == 0) started++;
  CHECK(started > 0);
  size_t refusals = 0;
  for (int i = 0; i < started; i++) {
    void* r;
    CHECK(pthread_join(t[i], &r) == 0);
    refusals += (size_t)r;
  }
  printf("threads: %d threads, %zu refusals\n", started, refusals);
  CHECK(refusals > 0); /* the limit was reached */
  void* p = malloc(1 << 20); /* and work goes on */
  CHECK(p != NULL);
  free(p);
  return 0;
}

int main(int argc, char** argv) {
  if (argc == 2 && strcmp(argv[1], "grow") == 0) return grow();
  if (argc == 2 && strcmp(argv[1], "threads") == 0) return threads();
  fprintf(stderr, "usage: %s grow|threads\n", argv[0]);
  return 2;
}
