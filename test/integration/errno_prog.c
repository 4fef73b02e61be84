/* SPDX-License-Identifier: BSD-2-Clause */
/* No successful call changes errno (C11 7.5: a library function may set it
 * only to report an error; programs such as coreutils read it after calls
 * that succeeded), and a failed one sets it. Linked with libductile, so the
 * first malloc below is the process's first allocation and makes the
 * runtime; then every entry point's success paths: thread-cache creation in
 * a new thread, the background thread's start, each way a block grows, the
 * extended API and mallctl; last, failed calls.
 *
 * Exits 0 when every check holds; prints the first failed check otherwise. */
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ductile/ductile.h"
#include "prog_check.h"

static int failures;

/* Runs `call` with errno set to a value no allocator would set, and checks
 * that it is still there afterwards. */
#define KEEPS_ERRNO(what, call)                                              \
  do {                                                                       \
    errno = 4242;                                                            \
    call;                                                                    \
    if (errno != 4242) {                                                     \
      fprintf(stderr, "%s:%d: %s changed errno to %d (%s)\n", __FILE__,      \
              __LINE__, what, errno, strerror(errno));                       \
      failures++;                                                            \
    }                                                                        \
  } while (0)

static void* thread_main(void* arg) {
  (void)arg;
  void* p;
  /* The thread's first calls make its cache. */
  KEEPS_ERRNO("a thread's first free", free(malloc(1)));
  KEEPS_ERRNO("a thread's first malloc", p = malloc(24));
  CHECK(p != NULL);
  KEEPS_ERRNO("free in a thread", free(p));
  KEEPS_ERRNO("tcache.flush", mallctl("thread.tcache.flush", NULL, NULL, NULL, 0));
  return NULL;
}

int main(void) {
  void* p;
  void* q;
  /* C11 7.5: errno is zero at program start-up; nothing ran before main
   * that may set it. */
  CHECK(errno == 0);
  KEEPS_ERRNO("the first malloc", p = malloc(16));
  CHECK(p != NULL);
  KEEPS_ERRNO("free", free(p));

  /* Small, medium and huge, through every allocation function. */
  static const size_t sizes[] = {1, 100, 5000, 40000, 300000, 3u << 20, 40u << 20};
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    size_t s = sizes[i];
    KEEPS_ERRNO("malloc", p = malloc(s));
    CHECK(p != NULL);
    memset(p, 1, s);
    KEEPS_ERRNO("malloc_usable_size", CHECK(malloc_usable_size(p) >= s));
    KEEPS_ERRNO("free", free(p));
    KEEPS_ERRNO("calloc", p = calloc(1, s));
    CHECK(p != NULL);
    KEEPS_ERRNO("free", free(p));
    KEEPS_ERRNO("memalign", p = memalign(4096, s));
    CHECK(p != NULL);
    KEEPS_ERRNO("free", free(p));
    int rc;
    KEEPS_ERRNO("posix_memalign", rc = posix_memalign(&p, 1u << 16, s));
    CHECK(rc == 0);
    KEEPS_ERRNO("free", free(p));
    KEEPS_ERRNO("aligned_alloc", p = aligned_alloc(64, s));
    CHECK(p != NULL);
    KEEPS_ERRNO("free", free(p));
    KEEPS_ERRNO("valloc", p = valloc(s));
    CHECK(p != NULL);
    KEEPS_ERRNO("free", free(p));
    KEEPS_ERRNO("pvalloc", p = pvalloc(s));
    CHECK(p != NULL);
    KEEPS_ERRNO("free", free(p));
    KEEPS_ERRNO("mallocx", p = mallocx(s, MALLOCX_ZERO | MALLOCX_ALIGN(256)));
    CHECK(p != NULL);
    KEEPS_ERRNO("sallocx", CHECK(sallocx(p, 0) >= s));
    KEEPS_ERRNO("xallocx", (void)xallocx(p, s, s, 0));
    KEEPS_ERRNO("rallocx", p = rallocx(p, 2 * s, 0));
    CHECK(p != NULL);
    KEEPS_ERRNO("sdallocx", sdallocx(p, 2 * s, 0));
    KEEPS_ERRNO("mallocx uncached", p = mallocx(s, MALLOCX_TCACHE_NONE));
    CHECK(p != NULL);
    KEEPS_ERRNO("dallocx uncached", dallocx(p, MALLOCX_TCACHE_NONE));
    KEEPS_ERRNO("nallocx", CHECK(nallocx(s, 0) >= s));
  }

  /* realloc's growth paths: within a class, small to medium to huge, a huge
   * block through its headroom, into its neighbour, by mremap (a block in
   * the way), and realloc(p, 0). */
  KEEPS_ERRNO("malloc", p = malloc(8));
  for (size_t s = 8; s <= (256u << 20); s *= 2) {
    KEEPS_ERRNO("realloc growth", p = realloc(p, s));
    CHECK(p != NULL);
    memset((char*)p + s / 2, 2, s / 2);
    /* A block right behind, so that the next growth must move or map. */
    if (s >= (4u << 20)) {
      KEEPS_ERRNO("malloc", q = malloc(s));
      CHECK(q != NULL);
      KEEPS_ERRNO("realloc growth past a neighbour", p = realloc(p, s + s / 2));
      CHECK(p != NULL);
      KEEPS_ERRNO("free", free(q));
    }
  }
  KEEPS_ERRNO("realloc shrink", p = realloc(p, 100));
  CHECK(p != NULL);
  KEEPS_ERRNO("reallocarray", p = reallocarray(p, 10, 1000));
  CHECK(p != NULL);
  KEEPS_ERRNO("realloc(p, 0)", CHECK(realloc(p, 0) == NULL));

  /* Enough freed to start the background thread (4 MiB awaiting decay). */
  void* blocks[256];
  for (int i = 0; i < 256; i++) KEEPS_ERRNO("malloc", blocks[i] = malloc(64 * 1024));
  for (int i = 0; i < 256; i++) KEEPS_ERRNO("free (starts the background thread)", free(blocks[i]));
  for (int i = 0; i < 64; i++) KEEPS_ERRNO("malloc after the background start", free(malloc(1u << 20)));

  /* Threads: cache creation, thread exit. */
  for (int i = 0; i < 4; i++) {
    pthread_t t;
    CHECK(pthread_create(&t, NULL, thread_main, NULL) == 0);
    CHECK(pthread_join(t, NULL) == 0);
  }

  /* fork runs ductile's handlers (its fork gate, its locks, a re-probe in
   * the child) while another thread allocates. */
  for (int i = 0; i < 20; i++) {
    pthread_t t;
    CHECK(pthread_create(&t, NULL, thread_main, NULL) == 0);
    pid_t pid;
    KEEPS_ERRNO("fork", pid = fork());
    CHECK(pid >= 0);
    if (pid == 0) _exit(failures != 0);
    int status;
    CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    CHECK(pthread_join(t, NULL) == 0);
  }

  /* mallctl reads and writes, trim, the statistics. */
  size_t v;
  size_t len = sizeof v;
  KEEPS_ERRNO("mallctl stats.allocated", CHECK(mallctl("stats.allocated", &v, &len, NULL, 0) == 0));
  uint64_t epoch = 1;
  KEEPS_ERRNO("mallctl epoch", CHECK(mallctl("epoch", NULL, NULL, &epoch, sizeof epoch) == 0));
  KEEPS_ERRNO("mallctl arena purge", CHECK(mallctl("arena.0.purge", NULL, NULL, NULL, 0) == 0));
  KEEPS_ERRNO("malloc_trim", (void)malloc_trim(0));
  KEEPS_ERRNO("mallinfo2", (void)mallinfo2());

  /* A failed allocation sets errno, posix_memalign's included: it returns
   * the error and, as glibc's does, leaves ENOMEM in errno as well
   * (programs test errno after it). A bad alignment is only returned.
   * Called through a pointer the compiler cannot see through: GCC takes
   * posix_memalign, by its name, to leave errno alone, and would read back
   * the value stored before the call. */
  int (*volatile memalign_fn)(void**, size_t, size_t) = posix_memalign;
  p = &v;
  errno = 4242;
  CHECK(memalign_fn(&p, 64, SIZE_MAX / 2) == ENOMEM);
  if (errno != ENOMEM) {
    fprintf(stderr, "%s:%d: a failed posix_memalign left errno %d (%s), not ENOMEM\n", __FILE__, __LINE__,
            errno, strerror(errno));
    failures++;
  }
  CHECK(p == &v);
  KEEPS_ERRNO("posix_memalign with a bad alignment", CHECK(posix_memalign(&p, 24, 8) == EINVAL));
  errno = 4242;
  CHECK(malloc(SIZE_MAX / 2) == NULL && errno == ENOMEM);

  if (failures) fprintf(stderr, "%d calls changed errno\n", failures);
  return failures ? 1 : 0;
}
