/* SPDX-License-Identifier: BSD-2-Clause */
/* Instructions of the common malloc and free, for any malloc, counted
 * under callgrind (bench/count-instructions.sh).
 *
 *   free_path STEPS
 *
 * Each step is a 16-byte malloc+free pair and one step of a churn of 1000
 * live blocks of 16 to 128 bytes (a random one freed, a block of a random
 * size allocated in its place and its first byte written): the pair is the
 * thread cache's best case, the churn mixes classes and slabs. Uses only
 * malloc and free, so LD_PRELOAD picks the allocator. The program's
 * start-up (the dynamic linker, the allocator's first call, the 1000
 * blocks) is the same for every STEPS, so the instructions of a run of 0
 * steps, subtracted from a run of N, leave N steps.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

enum { kLive = 1000 };

static uint64_t rng_state = 0x9e3779b97f4a7c15u;
static uint32_t next_random(void) {
  /* xorshift64*: no libc call in the loop. */
  rng_state ^= rng_state >> 12;
  rng_state ^= rng_state << 25;
  rng_state ^= rng_state >> 27;
  return (uint32_t)((rng_state * 0x2545f4914f6cdd1du) >> 32);
}

static size_t random_size(void) { return 16 + next_random() % 113; }

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: free_path STEPS\n");
    return 2;
  }
  long steps = strtol(argv[1], NULL, 10);
  static char* live[kLive];
  for (int i = 0; i < kLive; i++) {
    live[i] = malloc(random_size());
    if (live[i] == NULL) return 1;
    live[i][0] = 1;
  }
  for (long s = 0; s < steps; s++) {
    char* volatile p = malloc(16);
    if (p == NULL) return 1;
    p[0] = 1;
    free(p);
    uint32_t i = next_random() % kLive;
    free(live[i]);
    live[i] = malloc(random_size());
    if (live[i] == NULL) return 1;
    live[i][0] = 1;
  }
  for (int i = 0; i < kLive; i++) free(live[i]);
  return 0;
}
