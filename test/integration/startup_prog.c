/* SPDX-License-Identifier: BSD-2-Clause */
/* Calls that reach ductile while it starts: the program defines getenv, which
 * ductile calls while it makes its runtime, and allocates from there (as an
 * interposed getenv, or a libc function that allocates on first use, may).
 * Those calls are served from a start-up buffer: they must fail cleanly for
 * sizes that cannot fit (size + header wrapped around before), honour the
 * alignment asked for, and the blocks must work as any other afterwards
 * (free, realloc, malloc_usable_size).
 *
 * Exits 0 when every check holds; prints the first failed check otherwise. */
#include <errno.h>
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "prog_check.h"

extern char** environ;

static int during_startup;
static void* huge_minus_7;
static int huge_minus_7_errno;
static void* huge_max;
static void* aligned[6];
static int posix_rc;
static void* plain;

static void allocate_while_starting(void) {
  volatile size_t big = SIZE_MAX - 7;  /* volatile: the compiler knows it cannot fit */
  during_startup = 1;
  errno = 0;
  huge_minus_7 = malloc(big);
  huge_minus_7_errno = errno;
  huge_max = malloc(big - 8);
  aligned[0] = memalign(4096, 100);
  posix_rc = posix_memalign(&aligned[1], 256, 10);
  aligned[2] = aligned_alloc(64, 64);
  aligned[3] = valloc(10);
  aligned[4] = memalign(1024, 3000);
  plain = malloc(100);
  aligned[5] = memalign(8192, 50);
}

/* getenv without allocating, as the C library's. */
char* getenv(const char* name) {
  static int first = 1;
  if (first) {
    first = 0;
    allocate_while_starting();
  }
  size_t n = strlen(name);
  for (char** e = environ; *e; e++)
    if (strncmp(*e, name, n) == 0 && (*e)[n] == '=') return *e + n + 1;
  return NULL;
}

int main(void) {
  void* p = malloc(16);  /* makes the runtime: ductile reads DUCTILE_CONF */
  CHECK(p != NULL);
  CHECK(during_startup);
  CHECK(huge_minus_7 == NULL);
  CHECK(huge_minus_7_errno == ENOMEM);
  CHECK(huge_max == NULL);
  CHECK(aligned[0] != NULL && (uintptr_t)aligned[0] % 4096 == 0);
  CHECK(posix_rc == 0 && aligned[1] != NULL && (uintptr_t)aligned[1] % 256 == 0);
  CHECK(aligned[2] != NULL && (uintptr_t)aligned[2] % 64 == 0);
  CHECK(aligned[3] != NULL && (uintptr_t)aligned[3] % 4096 == 0);
  CHECK(aligned[4] != NULL && (uintptr_t)aligned[4] % 1024 == 0);
  CHECK(aligned[5] != NULL && (uintptr_t)aligned[5] % 8192 == 0);
  CHECK(plain != NULL && (uintptr_t)plain % 16 == 0);
  CHECK(malloc_usable_size(aligned[4]) >= 3000);
  /* The blocks do not overlap: fill each, then check each. */
  memset(aligned[0], 0xa0, 100);
  memset(aligned[1], 0xa1, 10);
  memset(aligned[2], 0xa2, 64);
  memset(aligned[3], 0xa3, 10);
  memset(aligned[4], 0xa4, 3000);
  memset(plain, 0xa5, 100);
  static const size_t lens[] = {100, 10, 64, 10, 3000};
  for (int i = 0; i < 5; i++)
    for (size_t j = 0; j < lens[i]; j++) CHECK(((unsigned char*)aligned[i])[j] == 0xa0 + i);
  /* realloc moves a start-up block into ordinary memory with its bytes. */
  char* r = realloc(plain, 100000);
  CHECK(r != NULL);
  for (int j = 0; j < 100; j++) CHECK((unsigned char)r[j] == 0xa5);
  free(r);
  for (int i = 0; i < 6; i++) free(aligned[i]);
  free(p);
  return 0;
}
