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
