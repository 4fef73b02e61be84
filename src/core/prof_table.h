
#include <atomic>

#include "base/lock.h"

namespace ductile::core::prof {

struct Bucket {
  Bucket* next;
  uint64_t hash;
  uint64_t live_n, live_bytes;    // samples alive now
  uint64_t total_n, total_bytes;  // samples taken since the last reset
  size_t depth;
  void* frames[1];  // `depth` of them: the allocation holds as many
};

// 4096 chains: a program with many more allocation stacks than that walks
// short chains still (the table is static storage, 32 KiB, touched as used).



// Dumps asked for and not yet written: a bit per kind. Set by the interval
// count, a new high of the live bytes and the signal handler (an atomic
// or, which is async-signal-safe); written by the next allocation that
// reaches the slow path (poll), never inside the handler.
// prof_signal is one that stops the program by default (SIGTERM, SIGINT,
// SIGHUP, SIGQUIT) and had no handler: after its dump it stops the program
// as it would have.

// This thread is inside the profiler: what it allocates is not sampled.

template <typename F>
void for_each_bucket(F f) {
  for (Bucket* head : g_table)
    for (Bucket* b = head; b != nullptr; b = b->next) f(*b);
}


void write_wanted();

}  // namespace ductile::core::prof
