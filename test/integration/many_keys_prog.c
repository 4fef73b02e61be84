/* SPDX-License-Identifier: BSD-2-Clause */
/* A process that has 40 pthread keys before its first allocation: ductile's
 * own key (the one whose destructor gives a thread's cache back) then lies
 * past the first 32, and glibc's pthread_setspecific for such a key callocs
 * a second-level table the first time a thread sets one -- a calloc that
 * comes back into ductile while it is making that thread's cache. Each
 * thread, the main one and new ones, must allocate, set its own keys (more
 * callocs of libc's), and exit normally; a cache made under that nested
 * calloc must not be made again and again (the recursion ran until the
 * stack overflowed).
 *
 * Nothing is allocated before the keys are made: the program only calls
 * pthread_key_create until then. Exits 0 when every check holds. */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "prog_check.h"

enum { kKeys = 40, kThreads = 8 };
static pthread_key_t keys[kKeys];

static void drop(void* p) { free(p); }

static void* work(void* arg) {
  uintptr_t seed = (uintptr_t)arg;
  for (int round = 0; round < 200; round++) {
    size_t size = 8 + (seed * 131 + (size_t)round * 977) % 70000;
    unsigned char* p = malloc(size);
    CHECK(p != NULL);
    memset(p, (int)(round & 0xff), size);
    CHECK(p[size - 1] == (unsigned char)(round & 0xff));
    free(p);
  }
  /* Values in keys past the first 32 too, each a block of ours freed by the
   * key's destructor at thread exit. */
  for (int k = 0; k < kKeys; k++) {
    void* v = malloc(24);
    CHECK(v != NULL);
    CHECK(pthread_setspecific(keys[k], v) == 0);
  }
  return arg;
}

int main(void) {
  for (int k = 0; k < kKeys; k++) CHECK(pthread_key_create(&keys[k], drop) == 0);
  /* The main thread's first allocation, after the keys. */
  void* p = malloc(100);
  CHECK(p != NULL);
  free(p);
  (void)work((void*)1);
  for (int round = 0; round < 4; round++) {
    pthread_t t[kThreads];
    for (uintptr_t i = 0; i < kThreads; i++) CHECK(pthread_create(&t[i], NULL, work, (void*)(i + 2)) == 0);
    for (uintptr_t i = 0; i < kThreads; i++) {
      void* r;
      CHECK(pthread_join(t[i], &r) == 0);
      CHECK(r == (void*)(i + 2));
    }
  }
  return 0;
}
