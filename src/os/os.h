/* SPDX-License-Identifier: BSD-2-Clause */
// Layer 1, the OS layer: every memory system call ductile makes goes through
// an Os. It owns the policy around the raw calls (kernel.h): what to do when a
// feature is missing, how to batch purges, and it counts every call by kind.
//
// Vocabulary: to *reserve* is to take address space without memory; to
// *commit* is to make reserved space usable; to *purge* is to hand the
// physical pages of a range back while keeping the address space.
//
// Reservations come in two modes, chosen once from /proc/sys/vm/overcommit_memory:
//  * normal (0 or 1): reserved space is mapped read/write with MAP_NORESERVE,
//    so commit costs no system call at all and purge is madvise.
//  * strict (2): reserved space is PROT_NONE (not charged), commit is
//    mprotect(READ|WRITE) and decommit maps PROT_NONE back over the range, so
//    the kernel's commit charge follows what is really in use.
//
// Every method is noexcept, never allocates, leaves errno as it found it
// (a refused hint or a probe is no error of the caller's), and on failure
// leaves the address space as it was, except where stated.
#pragma once

#include <sched.h>

#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdint>

#include "base/common.h"
#include "os/kernel.h"
#include "os/map_budget.h"

namespace ductile::os {

// Kinds of system call, for the counters.
enum class Call : uint8_t {
  kMmap,            // reserve, reserve_at, decommit in strict mode
  kMunmap,
  kMprotect,        // commit in strict mode; guard and unguard without guard markers
  kMremap,
  kMadvise,         // per-range purge, huge-page advice, populate, guard markers
  kProcessMadvise,  // batched purge
  kPidfdOpen,
  kCount
};
inline constexpr size_t kCallKinds = static_cast<size_t>(Call::kCount);
const char* call_name(Call c) noexcept;

struct Counters {
  std::atomic<uint64_t> calls[kCallKinds] = {};
  std::atomic<uint64_t> purged_bytes{0};
  std::atomic<uint64_t> purged_ranges{0};
  // Splits not made near vm.max_map_count (map_budget.h), and counts of
  // /proc/self/maps taken to know it.
  std::atomic<uint64_t> splits_avoided{0};

  uint64_t get(Call c) const noexcept {
    return calls[static_cast<size_t>(c)].load(std::memory_order_relaxed);
  }
  uint64_t total() const noexcept;
  void reset() noexcept;
};

enum class ThpMode : uint8_t { kAlways, kMadvise, kNever, kUnknown };

// What the kernel answered. The overcommit mode and the address-space
// limit are read at start-up; the THP mode at its first use (Os::thp_mode),
// and the mapping limit at the mapping budget's first count (map_budget.h).
// MAP_FIXED_NOREPLACE is assumed until a
// mapping shows the kernel took the address as a hint. The madvise features
// and the batched purge are probed on a scratch mapping at their first use
// (Os::probed_features): a program that never purges makes none of those
// calls. A fallback that is found later (a call that turns out to be
// refused) is sticky: the field is cleared and never retried.
struct Features {
  bool map_fixed_noreplace = true;   // Linux 4.17: occupied address -> EEXIST
  bool batch_purge = false;          // process_madvise(self, MADV_DONTNEED), Linux 6.13
  int self_pidfd = -1;               // PIDFD_SELF (6.15) or a cached pidfd_open(getpid())
  bool madv_free = false;            // Linux 4.5
  bool populate_write = false;       // MADV_POPULATE_WRITE, Linux 5.14
  bool strict_overcommit = false;    // vm.overcommit_memory == 2
  // RLIMIT_AS (ulimit -v) at start-up, SIZE_MAX when unlimited: every
  // reservation counts against it, touched or not.
  size_t address_space_limit = SIZE_MAX;
};

enum class Advice : uint8_t { kDontNeed, kFree };

struct Range {
  void* addr;
  size_t size;
};

enum class MapStatus : uint8_t {
  kMapped,    // the range is ours now
  kOccupied,  // something is mapped there; nothing was changed
  kFailed,    // the kernel refused (ENOMEM, map count...); nothing was changed
};

// What became of a range given back by Os::decommit.
enum class Decommit : uint8_t {
  kDecommitted,  // pages and (strict mode) commit charge gone: commit before use
  kPurged,       // pages gone, still committed: usable as it is
  kFailed,       // nothing changed
};

enum class RemapMode : uint8_t {
  kInPlace,  // grow or shrink without moving; fails if the pages after are taken
  kMayMove,  // the kernel may move the pages anywhere
  kFixed,    // move to `target`, which must be address space the caller owns
};

// The largest batch handed to one process_madvise call. The kernel accepts up
// to UIO_MAXIOV (1024) ranges; the gain flattens after a handful of ranges
// (batches of 2-8 cut time per release by 25-58% in the background study), and
// a batch keeps its ranges unavailable until it completes, so keep it small.
inline constexpr size_t kPurgeBatch = 16;

class Os {
 public:
  // Probes the kernel's features through `kernel` (a few calls on a scratch page).
  explicit Os(Kernel& kernel) noexcept;
  Os(const Os&) = delete;
  Os& operator=(const Os&) = delete;
  ~Os();

  // Reserves `size` bytes (page multiple) anywhere. nullptr on failure.
  [[nodiscard]] void* reserve(size_t size) noexcept;
  // Reserves exactly [addr, addr+size) without clobbering any mapping.
  // With MAP_FIXED_NOREPLACE this is one call; without it, the address is a
  // hint, and a mapping placed elsewhere is unmapped again (kOccupied).
  [[nodiscard]] MapStatus reserve_at(void* addr, size_t size) noexcept;
  [[nodiscard]] bool unmap(void* addr, size_t size) noexcept;

  // Makes reserved space usable; no system call in normal mode.
  [[nodiscard]] bool commit(void* addr, size_t size) noexcept;
  // Returns the pages and (strict mode) the commit charge; the range stays
  // reserved. Under strict overcommit that maps PROT_NONE over the range,
  // which splits its mapping unless it is a whole one; near the mapping
  // limit (maps_tight()), or when the kernel refuses the split, the pages
  // are purged instead and the range stays committed (kPurged): charged,
  // but the program keeps its mappings. `huge` is the range's huge-page
  // advice, which a fresh mapping must carry again to merge back.
  [[nodiscard]] Decommit decommit(void* addr, size_t size, bool huge = false) noexcept;
  // Guard pages (hardened mode's huge blocks). guard() makes the range fault
  // on any access. In normal mode: guard markers (MADV_GUARD_INSTALL, Linux
  // 6.13; the range's pages go, its mapping stays whole), else
  // mprotect(PROT_NONE), pages kept, which splits the mapping; under strict
  // overcommit PROT_NONE mapped over it (the pages and the charge go too),
  // near the mapping limit or not. unguard() makes a guarded range
  // read/write again, leaving its other pages as they are: the markers
  // removed (MADV_GUARD_REMOVE), and mprotect where any guard was made by
  // it; under strict overcommit a commit.
  [[nodiscard]] bool guard(void* addr, size_t size) noexcept;
  [[nodiscard]] bool unguard(void* addr, size_t size) noexcept;
  // Maps fresh reserved space over [addr, addr+size), which the caller owns
  // (MAP_FIXED): its pages and commit charge go, and the new mapping merges
  // with neighbours that have the same flags. (Pages moved in by mremap keep
  // a mapping of their own: anonymous memory keeps the page offset of where
  // it was first mapped, so it never merges with its new neighbours.)
  [[nodiscard]] bool map_fresh(void* addr, size_t size) noexcept;

  // mremap. Returns the new address, or nullptr with the block untouched.
  // kFixed moves onto `target` (which the caller owns; whatever was mapped
  // there is replaced) and leaves [old, old+old_size) unmapped.
  [[nodiscard]] void* remap(void* old_addr, size_t old_size, size_t new_size, RemapMode mode,
                            void* target = nullptr) noexcept;

  // Purges n discontiguous ranges. A single range is one madvise; more go to
  // process_madvise in batches of kPurgeBatch (short returns resumed), or to
  // one madvise per range where batching is missing or refused. Returns the
  // number of leading ranges fully purged (n on success).
  size_t purge(const Range* ranges, size_t n, Advice advice = Advice::kDontNeed) noexcept;

  // MADV_HUGEPAGE: only where the THP mode is madvise (in always mode it is
  // the default, in never mode it is ignored) -- callers need not check.
  bool advise_huge(void* addr, size_t size) noexcept;
  // The same on part of a mapping, which splits it in up to three: not
  // done (false) near the mapping limit.
  bool advise_huge_part(void* addr, size_t size) noexcept;

  // Whether ductile stops splitting mappings: past half of vm.max_map_count
  // at the last count of the process's mappings (map_budget.h).
  bool maps_tight() const noexcept { return maps_.tight(); }
  const MapBudget& map_budget() const noexcept { return maps_; }
  // vm.max_map_count (its default where it cannot be read) and the
  // threshold, half of it: read at the budget's first count, or here.
  size_t map_limit() noexcept { return maps_.limit(kernel_); }
  size_t map_threshold() noexcept { return maps_.threshold(kernel_); }
  // MADV_POPULATE_WRITE: faults the range in, writable and zeroed.
  bool populate(void* addr, size_t size) noexcept;
  // A full memory barrier on every running thread of the process
  // (membarrier's private expedited command, registered at the first call),
  // so that a thread whose side of a handshake has only a compiler barrier
  // needs no fence of its own. False where the kernel has none (before
  // 4.14): the caller does without what needs it. Not a memory call: not
  // counted.
  bool fence_all_threads() noexcept;

  // The features known without a probe: the files, the limits, and
  // MAP_FIXED_NOREPLACE. The scratch-probed fields (batch_purge,
  // self_pidfd, madv_free, populate_write) hold their defaults until the
  // first purge or populate; probed_features() probes them first.
  const Features& features() const noexcept { return features_; }
  // (Not for a thread that may race another's first purge: tests, stats.)
  const Features& probed_features() noexcept {
    while (!ensure_probed() && scratch_probe_.load(std::memory_order_acquire) == kProbing) sched_yield();
    return features_;
  }
  // The system's THP mode (/sys/kernel/mm/transparent_hugepage/enabled),
  // read at the first call: a program whose first call grows nothing and
  // advises nothing does not open the file. Threads that race both read
  // it and store the same answer.
  ThpMode thp_mode() noexcept {
    const uint8_t m = thp_.load(std::memory_order_relaxed);
    return DUCTILE_LIKELY(m != kThpUnread) ? static_cast<ThpMode>(m) : read_thp_mode();
  }
  // Whether guards are guard markers: one has been taken (normal mode).
  bool guard_markers() const noexcept { return guard_markers_.load(std::memory_order_relaxed) == kYes; }
  Counters& counters() noexcept { return counters_; }
  const Counters& counters() const noexcept { return counters_; }

  // After fork(): a cached pidfd names the parent: the child drops it, and
  // its first purge probes again.
  void after_fork_in_child() noexcept;

 private:
  void probe() noexcept;
  ThpMode read_thp_mode() noexcept;
  // The probes on a scratch mapping, once, at the first call that needs
  // them (scratch_probe_: kUnprobed, kProbing while one thread runs them,
  // then kProbed, or kUnprobed again where the scratch mapping was
  // refused). False while another thread (or the code a signal
  // interrupted) is probing, or where the probe could not be made: the
  // caller does without the probed features and reads none of them,
  // rather than wait.
  bool ensure_probed() noexcept {
    return DUCTILE_LIKELY(scratch_probe_.load(std::memory_order_acquire) == kProbed) || probe_scratch_once();
  }
  bool probe_scratch_once() noexcept;
  bool probe_scratch() noexcept;
  void probe_batch_purge(void* scratch) noexcept;
  // Always counted, even with --disable-stats: one relaxed add beside a
  // system call costs nothing measurable, and tests assert on the counts.
  void count(Call c) noexcept {
    counters_.calls[static_cast<size_t>(c)].fetch_add(1, std::memory_order_relaxed);
  }
  int prot_reserved() const noexcept;
  int flags_reserved() const noexcept;
  bool purge_one(const Range& r, int advice) noexcept;
  // Returns the number of leading ranges fully purged by process_madvise.
  size_t purge_batch(const Range* ranges, size_t n, int advice) noexcept;
  void disable_batch_purge() noexcept;
  bool madvise_huge(void* addr, size_t size) noexcept;
  // mprotect of [addr, addr+size), counted and noted (guard, unguard).
  bool protect(void* addr, size_t size, int prot) noexcept;
  // After a failed call: a refusal for the mapping limit has the count taken again.
  void failed() noexcept {
    if (errno == ENOMEM) maps_.refused(kernel_);
  }

  Kernel& kernel_;
  Features features_;
  // Whether guard markers work (tried at the first guard, not probed at
  // start-up: only hardened mode guards), and whether any guard was made
  // by mprotect, which unguard() must then undo too.
  enum : uint8_t { kUnknown, kYes, kNo };
  std::atomic<uint8_t> guard_markers_{kUnknown};
  static constexpr uint8_t kThpUnread = 0xff;
  std::atomic<uint8_t> thp_{kThpUnread};
  enum : uint8_t { kUnprobed, kProbing, kProbed };
  std::atomic<uint8_t> scratch_probe_{kUnprobed};
  // fence_all_threads: 0 not asked yet, 1 registered, 2 refused.
  std::atomic<int> membarrier_state_{0};
  std::atomic<bool> protected_guards_{false};
  Counters counters_;
  MapBudget maps_;
};

}  // namespace ductile::os
