/* SPDX-License-Identifier: BSD-2-Clause */
// How close the process is to vm.max_map_count, the kernel's limit on its
// mappings (65 530 by default). Past the limit every call that would add a
// mapping fails with ENOMEM -- ductile's, and the program's: pthread_create,
// mmap, dlopen. ductile needs few mappings of its own, but some of its
// choices split one (huge-page advice on part of a mapping; under strict
// overcommit, decommitting part of a read/write mapping). Past a threshold,
// half the limit, the OS layer reports *tight* and its callers stop making
// those choices; the other half is the program's.
//
// The count is the lines of /proc/self/maps (Kernel::count_mappings), which
// costs about 0.5 us a mapping, so it is taken rarely: the OS layer notes
// the mappings each of its calls may add (a worst case), and counts again
// once that sum passes a gap that shrinks as the last count nears the
// threshold and grows with it (so a count costs at most a few microseconds
// per noted call); while tight, also after as many avoided splits; and at
// once when a call is refused with ENOMEM. Mappings the program makes
// between two counts are seen at the next one: before it, a split of ours
// may be refused, and the caller falls back (Os::decommit purges instead).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "os/kernel.h"

namespace ductile::os {

// What the kernel allows when /proc/sys/vm/max_map_count cannot be read:
// its default (DEFAULT_MAX_MAP_COUNT, include/linux/mm.h).
inline constexpr size_t kDefaultMaxMapCount = 65530;

class MapBudget {
 public:
  // Sets the limit (0: the kernel's default). Without a call, the limit is
  // read from /proc/sys/vm/max_map_count at the first count, or when asked
  // for (limit(k)), not at start-up: a program that never makes more than
  // a few dozen mappings of ours never opens the file.
  void init(size_t limit) noexcept;
  size_t limit(Kernel& k) noexcept {
    ensure_limit(k);
    return limit_.load(std::memory_order_relaxed);
  }
  size_t threshold(Kernel& k) noexcept {
    ensure_limit(k);
    return threshold_.load(std::memory_order_relaxed);
  }
  // The mappings at the last count (0 before the first).
  size_t last_count() const noexcept { return last_.load(std::memory_order_relaxed); }
  uint64_t counts() const noexcept { return counts_.load(std::memory_order_relaxed); }

  // A call that may add up to `n` mappings is about to be made.
  void note(Kernel& k, size_t n) noexcept {
    if (since_.fetch_add(n, std::memory_order_relaxed) + n >= gap_.load(std::memory_order_relaxed)) recount(k, false);
  }
  // Whether a call that splits a mapping (adding up to two) may be made
  // now. Avoided ones are noted too, so that a count comes while tight and
  // sees the program let mappings go.
  bool allow_split(Kernel& k) noexcept {
    note(k, 2);
    return !tight();
  }
  bool tight() const noexcept { return tight_.load(std::memory_order_relaxed); }
  // After fork(): a count that another thread of the parent had under way
  // never ends in the child.
  void after_fork_in_child() noexcept { counting_.store(false, std::memory_order_relaxed); }
  // A call failed with ENOMEM: perhaps the limit. Counts again, unless the
  // last count was made for a refusal too, a few calls ago.
  void refused(Kernel& k) noexcept {
    if (!refusal_counted_.load(std::memory_order_relaxed) || since_.load(std::memory_order_relaxed) >= kRefusedGap)
      recount(k, true);
  }

 private:
  // Calls noted since the last count below which a refusal does not count
  // again: a run of refusals (strict overcommit out of commit charge, which
  // is ENOMEM too) costs one count per this many.
  static constexpr size_t kRefusedGap = 64;
  // Noted mappings before the first count (see gap_after).
  static constexpr size_t kFirstGap = 64;
  void recount(Kernel& k, bool for_refusal) noexcept;
  size_t gap_after(size_t count) const noexcept;
  // Reads the limit unless it is known. Threads that race both read it
  // and store the same answer.
  void ensure_limit(Kernel& k) noexcept {
    if (!limit_known_.load(std::memory_order_acquire)) read_limit(k);
  }
  void read_limit(Kernel& k) noexcept;

  std::atomic<size_t> limit_{kDefaultMaxMapCount};
  std::atomic<size_t> threshold_{kDefaultMaxMapCount / 2};
  std::atomic<bool> limit_known_{false};
  std::atomic<size_t> since_{0};
  std::atomic<size_t> gap_{kFirstGap};
  std::atomic<size_t> last_{0};
  std::atomic<bool> tight_{false};
  std::atomic<bool> counting_{false};
  std::atomic<bool> refusal_counted_{false};
  std::atomic<uint64_t> counts_{0};
};

}  // namespace ductile::os
