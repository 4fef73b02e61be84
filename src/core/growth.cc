// SPDX-License-Identifier: BSD-2-Clause
// How blocks grow (core/growth.h): the counters and their totals, the growth
// profile's sampling clock, its table of stacks, its dumps and the summary
// at exit.
#include "core/growth.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>

#include "base/fork_gate.h"
#include "core/prof.h"
#include "core/prof_table.h"

// The markers: the outermost frame of each stack in a growth profile names
// the way its growth took. Exported (a stripped library keeps their names
// in its dynamic symbol table), never called; each returns a different
// value so that no linker folds two into one address.
extern "C" {
DUCTILE_EXPORT __attribute__((noinline, used)) int ductile_grew_in_place(void) { return 0; }
DUCTILE_EXPORT __attribute__((noinline, used)) int ductile_grew_by_headroom(void) { return 1; }
DUCTILE_EXPORT __attribute__((noinline, used)) int ductile_grew_by_neighbour(void) { return 2; }
DUCTILE_EXPORT __attribute__((noinline, used)) int ductile_grew_by_fixed_map(void) { return 3; }
DUCTILE_EXPORT __attribute__((noinline, used)) int ductile_grew_by_mremap(void) { return 4; }
DUCTILE_EXPORT __attribute__((noinline, used)) int ductile_grew_by_copy(void) { return 5; }
}

namespace ductile::core::growth {

bool g_on = false;

namespace {

using small::ThreadCache;

// What threads without a cache count.
std::atomic<uint64_t> g_uncached[small::kGrowthCounters];
// Every cache record ever made (records are never freed).
std::atomic<ThreadCache*> g_records{nullptr};

size_t g_lg = 16;  // lg_growth_sample
// The growth profile's stacks (prof::g_lock).
DUCTILE_LARGE_STATIC prof::Bucket* g_table[prof::kTableSize];

// The sampling clock: the bytes this thread's blocks grew, the count at
// which it takes its next sample (0: not started), its random state.
__thread uint64_t t_grown __attribute__((tls_model("initial-exec"))) = 0;
__thread uint64_t t_at __attribute__((tls_model("initial-exec"))) = 0;
__thread uint64_t t_rng __attribute__((tls_model("initial-exec"))) = 0;

using Marker = int (*)();
constexpr Marker kMarkers[kWays] = {ductile_grew_in_place,     ductile_grew_by_headroom, ductile_grew_by_neighbour,
                                    ductile_grew_by_fixed_map, ductile_grew_by_mremap,   ductile_grew_by_copy};

// x rounded down or up at random, up with the probability of its fraction:
// the counts of many samples of weight 1.05 add up to 1.05 per sample, not 1.
uint64_t round_at_random(double x) {
  uint64_t v = t_rng;  // xorshift64 (the clock has seeded t_rng)
  v ^= v << 13;
  v ^= v >> 7;
  v ^= v << 17;
  t_rng = v;
  const double u = static_cast<double>(v >> 11) * (1.0 / 9007199254740992.0);  // [0, 1)
  const auto whole = static_cast<uint64_t>(x);
  return whole + (u < x - static_cast<double>(whole) ? 1 : 0);
}

// A sample of `grown` bytes, weighed by the inverse of the probability of
// its being sampled, so that the table holds estimates of the whole.
void record(Way way, size_t grown, size_t copied) {
  const double r = static_cast<double>(uint64_t{1} << g_lg);
  const double w = 1 / (1 - prof::exp_neg(static_cast<double>(grown) / r));
  const uint64_t n = round_at_random(w);
  prof::t_busy = true;
  void* frames[prof::kMaxFrames + 1];
  size_t depth;
  {
    InFlight in_flight;  // the unwinder's locks (see prof::record)
    depth = prof::capture(frames);
  }
  // A return address, as the other outer frames are: google-pprof looks
  // one byte before it, at the marker's first instruction.
  frames[depth++] = reinterpret_cast<void*>(reinterpret_cast<uintptr_t>(kMarkers[static_cast<size_t>(way)]) + 1);
  {
    LockGuard g(prof::g_lock);
    if (prof::Bucket* b = prof::bucket_for(g_table, frames, depth)) {
      b->total_n += n;
      b->total_bytes += static_cast<uint64_t>(static_cast<double>(grown) * w + 0.5);
      if (way == Way::kCopy) {
        b->live_n += n;
        b->live_bytes += static_cast<uint64_t>(static_cast<double>(copied) * w + 0.5);
      }
    }
  }
  prof::t_busy = false;
}

// "heapprofile": estimates already, which google-pprof takes as they are.
int write_to(const char* path) { return prof::write_table(path, g_table, "heapprofile"); }

}  // namespace

// ---- counters -------------------------------------------------------------
void note_uncached(Way way, size_t copied) noexcept {
  g_uncached[static_cast<size_t>(way)].fetch_add(1, std::memory_order_relaxed);
  if (copied != 0) g_uncached[kCopied].fetch_add(copied, std::memory_order_relaxed);
}

void add_record(ThreadCache* tc) noexcept {
  ThreadCache* head = g_records.load(std::memory_order_relaxed);
  do {
    tc->all_next = head;
  } while (!g_records.compare_exchange_weak(head, tc, std::memory_order_release, std::memory_order_relaxed));
}

Totals totals() noexcept {
  uint64_t sum[small::kGrowthCounters];
  for (size_t i = 0; i < small::kGrowthCounters; i++) sum[i] = g_uncached[i].load(std::memory_order_relaxed);
  for (ThreadCache* tc = g_records.load(std::memory_order_acquire); tc != nullptr; tc = tc->all_next)
    for (size_t i = 0; i < small::kGrowthCounters; i++) sum[i] += tc->growth[i].load();
  Totals t;
  for (size_t i = 0; i < kWays; i++) t.events[i] = sum[i];
  t.copied = sum[kCopied];
  return t;
}

// ---- the profile ----------------------------------------------------------
void init(const Options& o) noexcept {
  g_on = kProf && o.growth_prof;
  g_lg = o.lg_growth_sample;
}

void sample(Way way, size_t grown, size_t copied) noexcept {
  if (prof::t_busy) return;  // the unwinder's own reallocs
  const uint64_t from = t_grown;
  t_grown += grown;
  // The clock starts at this thread's first growth event; an event is
  // sampled where the next arrival falls within its bytes.
  if (t_at == 0) t_at = from + prof::draw_interval(&t_rng, g_lg);
  if (t_grown < t_at) return;
  t_at = t_grown + prof::draw_interval(&t_rng, g_lg);
  record(way, grown, copied);
}

int dump(const char* filename) noexcept {
  if (!g_on) return EFAULT;
  char name[prof::kMaxPath];
  if (filename == nullptr) {
    if (prof::g_prefix[0] == '\0') return EFAULT;
    prof::dump_name(name, sizeof name, 'm', true, "growth");
    filename = name;
  }
  return write_to(filename);
}

void at_exit() noexcept {
  if (!g_on) return;
  char name[prof::kMaxPath];
  bool written = false;
  if (prof::g_prefix[0] != '\0') {
    prof::dump_name(name, sizeof name, 'f', false, "growth");
    written = write_to(name) == 0;
  }
  const Totals t = totals();
  uint64_t events = 0;
  for (uint64_t n : t.events) events += n;
  prof::Out o(prof::g_exit_fd);
  o.str("<ductile>: growth: ").u64(events).str(" reallocs grew blocks:");
  for (size_t i = 0; i < kWays; i++) o.str(i == 0 ? " " : ", ").str(kWayNames[i]).str(" ").u64(t.events[i]);
  o.str(" (").u64(t.copied).str(" bytes copied)\n");
  if (written) o.str("<ductile>: Run google-pprof on \"").str(name).str("\" for the call sites\n");
}

}  // namespace ductile::core::growth
