/* SPDX-License-Identifier: BSD-2-Clause */
// The heap profiler's shared state: the table of stacks and its lock, the
// options, the dumps asked for (sampling: prof.cc; start-up and dumps:
// prof_dump.cc); and what the growth profile (growth.cc) shares with it:
// stacks, buckets, the writer and the dumps' names.
#pragma once

#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>

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
extern int g_exit_fd;  // stderr, or a copy of it for the summaries at exit

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
void for_each_bucket(Bucket* const* table, F f) {
  for (size_t i = 0; i < kTableSize; i++)
    for (Bucket* b = table[i]; b != nullptr; b = b->next) f(*b);
}
template <typename F>
void for_each_bucket(F f) {
  for_each_bucket(g_table, f);
}

// The sampling rate: a sample per 2^lg_sample bytes, on average.
uint64_t rate();

// The calling thread's stack, ductile's own frames left off its top; at
// most kMaxFrames. The caller sets t_busy (the unwinder may allocate).
size_t capture(void** out);
// The bucket of this stack in `table` (kTableSize chains), made if new
// (g_lock held); nullptr without memory.
Bucket* bucket_for(Bucket** table, void* const* frames, size_t depth);

// A profile's or a summary's text goes out through a stack buffer with
// write(2): nothing allocates.
class Out {
 public:
  explicit Out(int fd) : fd_(fd) {}
  ~Out() { flush(); }
  Out& str(const char* s) { return bytes(s, std::strlen(s)); }
  Out& bytes(const char* s, size_t n) {
    while (n > 0) {
      if (len_ == sizeof buf_) flush();
      size_t k = sizeof buf_ - len_ < n ? sizeof buf_ - len_ : n;
      std::memcpy(buf_ + len_, s, k);
      len_ += k;
      s += k;
      n -= k;
    }
    return *this;
  }
  Out& u64(uint64_t v) {
    char t[24];
    return bytes(t, format_u64(v, t, sizeof t));
  }
  Out& hex(uintptr_t v) {
    char t[2 + 16];
    size_t n = 0;
    char d[16];
    do {
      d[n++] = "0123456789abcdef"[v & 15];
      v >>= 4;
    } while (v != 0);
    t[0] = '0';
    t[1] = 'x';
    for (size_t i = 0; i < n; i++) t[2 + i] = d[n - 1 - i];
    return bytes(t, 2 + n);
  }
  bool ok() {
    flush();
    return ok_;
  }

 private:
  void flush() {
    size_t off = 0;
    while (off < len_ && ok_) {
      ssize_t w = ::write(fd_, buf_ + off, len_ - off);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0)
        ok_ = false;
      else
        off += static_cast<size_t>(w);
    }
    len_ = 0;
  }
  int fd_;
  char buf_[4096];
  size_t len_ = 0;
  bool ok_ = true;
};

// Writes the buckets of `table` to the file `path` in google-pprof's heap
// profile format, the header's counts their sums and `type` what follows
// its "@" ("heap_v2/<rate>"), then the mappings. 0, or EFAULT when the file
// cannot be written.
int write_table(const char* path, Bucket* const* table, const char* type);
// <prefix>.<pid>.<seq>.<kind>[<n>].<suffix>: a dump's name (jemalloc's for
// heap profiles, suffix "heap"), numbered by kind where `numbered`.
void dump_name(char* out, size_t n, char kind, bool numbered, const char* suffix);


}  // namespace ductile::core::prof
