/* SPDX-License-Identifier: BSD-2-Clause */
// The heap profiler's shared state: the table of stacks and its lock, the
// options, the dumps asked for (sampling: prof.cc; start-up and dumps:
// prof_dump.cc).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "base/lock.h"
#include "core/prof.h"

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
inline constexpr size_t kTableSize = 4096;

// The options read at start-up (init), and the descriptor the leak summary
// goes to.
extern bool g_enabled;
extern bool g_final;
extern bool g_leak;
extern char g_prefix[kMaxPrefix];
extern int g_exit_fd;

// g_lock: the table, the samples' records and the counters kept with them,
// the dumps' sequence numbers.
extern Mutex g_lock;
extern Bucket* g_table[kTableSize];
// prof.active, and lg_prof_sample (prof.lg_sample).
extern std::atomic<bool> g_active;
extern std::atomic<size_t> g_lg;
// lg_prof_interval: -1 for none.
extern int g_lg_interval;
// prof.gdump.
extern std::atomic<bool> g_gdump;

// Dumps asked for and not yet written: a bit per kind. Set by the interval
// count, a new high of the live bytes and the signal handler (an atomic
// or, which is async-signal-safe); written by the next allocation that
// reaches the slow path (poll), never inside the handler.
inline constexpr unsigned kWantInterval = 1, kWantGdump = 2, kWantSignal = 4;
// prof_signal is one that stops the program by default (SIGTERM, SIGINT,
// SIGHUP, SIGQUIT) and had no handler: after its dump it stops the program
// as it would have.
inline constexpr unsigned kWantStop = 8;
extern int g_stop_signal;
extern std::atomic<unsigned> g_want;

// This thread is inside the profiler: what it allocates is not sampled.
extern __thread bool t_busy __attribute__((tls_model("initial-exec")));

template <typename F>
void for_each_bucket(F f) {
  for (Bucket* head : g_table)
    for (Bucket* b = head; b != nullptr; b = b->next) f(*b);
}

// The sampling rate: a sample per 2^lg_sample bytes, on average.
uint64_t rate();


}  // namespace ductile::core::prof
