/* SPDX-License-Identifier: BSD-2-Clause */
/* A bad free as the process's first call into ductile: before any block of
 * ductile's exists (the runtime is not made yet), free and realloc of a
 * pointer ductile never returned must end the program as they do later
 * ("free(): invalid pointer"), not return as if nothing happened. Each case
 * runs in a child forked before this program allocates anything (the
 * parent only forks, reads a pipe and waits: no allocation), so the child's
 * call is ductile's first.
 *
 * Exits 0 when every check holds; prints the first failed check otherwise. */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define PROG_CHECK_RUN_IN_CHILD
#include "prog_check.h"

enum what { FREE_FOREIGN, REALLOC_FOREIGN, FREE_NULL };

static void first_call(enum what w) {
  long on_stack[2] = {5, 6};
  void* volatile p = on_stack;
  switch (w) {
    case FREE_FOREIGN: free(p); break;
    case REALLOC_FOREIGN: {
      void* volatile q = realloc(p, 64);  /* never returns: the child ends */
      (void)q;
      break;
    }
    case FREE_NULL: free(NULL); break;
  }
}

/* Runs w in a child, its stderr into out; returns its wait status. */
static void call_it(void* w) { first_call(*(enum what*)w); }
static int run(enum what w, char* out, size_t n) { return run_in_child(call_it, &w, out, n); }

int main(void) {
  char err[512];
  int st = run(FREE_FOREIGN, err, sizeof err);
  CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT);
  CHECK(strncmp(err, "ductile: free(): invalid pointer 0x", 35) == 0);

  st = run(REALLOC_FOREIGN, err, sizeof err);
  CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT);
  CHECK(strncmp(err, "ductile: realloc(): invalid pointer 0x", 38) == 0);

  st = run(FREE_NULL, err, sizeof err);
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  CHECK(err[0] == '\0');
  return 0;
}
