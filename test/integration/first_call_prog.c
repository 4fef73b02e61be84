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

/* Runs w in a child, its stderr into out (NUL-terminated); returns the
 * child's wait status. */
static int run(enum what w, char* out, size_t n) {
  int fd[2];
  CHECK(pipe(fd) == 0);
  pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) {
    close(fd[0]);
    dup2(fd[1], 2);
    first_call(w);
    _exit(0);
  }
  close(fd[1]);
  size_t got = 0;
  ssize_t r;
  while (got + 1 < n && (r = read(fd[0], out + got, n - 1 - got)) > 0) got += (size_t)r;
  out[got] = '\0';
  close(fd[0]);
  int status = 0;
  CHECK(waitpid(pid, &status, 0) == pid);
  return status;
}

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
