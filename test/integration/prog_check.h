/* SPDX-License-Identifier: BSD-2-Clause */
/* CHECK for the integration test programs: a failed condition prints where
 * and what, and the program exits 1 (the tests read the exit status). */
#pragma once

#include <stdio.h>
#include <stdlib.h>

#define CHECK(c)                                                              \
  do {                                                                        \
    if (!(c)) {                                                               \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #c);   \
      exit(1);                                                                \
    }                                                                         \
  } while (0)

#ifdef PROG_CHECK_RUN_IN_CHILD
#include <sys/wait.h>
#include <unistd.h>

/* Runs fn(arg) in a child forked now (the child exits 0 if fn returns),
 * its stderr into out (NUL-terminated, at most n - 1 bytes); returns the
 * child's wait status. The parent only forks, reads a pipe and waits: it
 * allocates nothing, so a child forked before the parent's first
 * allocation makes ductile's first call. */
static int run_in_child(void (*fn)(void*), void* arg, char* out, size_t n) {
  int fd[2];
  CHECK(pipe(fd) == 0);
  pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) {
    close(fd[0]);
    dup2(fd[1], 2);
    fn(arg);
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
#endif
