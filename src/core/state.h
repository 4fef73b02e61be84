/* SPDX-License-Identifier: BSD-2-Clause */
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "chunk/chunk.h"
#include "core/background.h"
#include "core/options.h"
#include "huge/huge.h"
#include "os/os.h"
#include "small/bin.h"
#include "small/decay.h"
#include "small/prefaulter.h"
#include "small/region.h"
#include "small/thread_cache.h"

namespace ductile::core {

// The space for what is packed onto huge pages -- a medium block that
// replaces a smaller one (realloc growth), and the slab regions of a large
// arena (small::ArenaOptions::busy_space): the dense huge-page space where
// the system's THP mode is madvise and the thp option allows. Both are
// written page after page, and each 4 KiB page faulted in one by one cost
// 10-20 us on a virtual machine, where one huge page cost 0.5 us per 4 KiB
// of it (64 buffers doubling to 16 MiB: 18 700 faults in the first round,
// 1 000 with growing medium blocks dense). Plain space where the kernel
// gives huge pages to every mapping anyway (always) or to none (never).
constexpr chunk::Space dense_space(huge::ThpPolicy policy, os::ThpMode mode) {
  return policy != huge::ThpPolicy::kNever && mode == os::ThpMode::kMadvise ? chunk::Space::kDense
                                                                              : chunk::Space::kPlain;
}

class Runtime {
 public:
  explicit Runtime(const Options& opts) noexcept;
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  Options opts;
  os::Os os;
  chunk::MonotonicClock clock;
  chunk::ChunkLayer chunks;
  huge::HugeLayer huge;
  small::Prefaulter prefault;
  BackgroundThread background;  // finishes decay once the program goes quiet
  small::SlabArena arena;  // the slab regions every bin takes its slabs from
  // Sets of bins: a thread fills its cache from one set, assigned round
  // robin when its cache is made, so threads on different cores need not
  // share bin locks and slabs. A free returns an object to the bin that
  // holds its slab, whichever set that is. One set by default (bin_sets).
  static constexpr size_t kMaxBinSets = kMaxBinSetsOption;
  size_t nbinsets = 1;  // Options::bin_sets (0 there: one per CPU)
  small::Bin bins[kMaxBinSets][small::kNumSmall];
  // Decay steps over every bin, the slab arena and the chunk layer: the
  // background thread's, and the bounded ones the allocator's calls take.
  small::Decay decay;
  // Where a medium block that replaces a smaller one (realloc growth) goes
  // (dense_space), once the process has made kPlainGrowth bytes of
  // them in plain space: a program that grows a buffer or two past 16 KiB
  // does not pay a huge page for them (the dense space's first touch makes
  // 2 MiB resident; churn's peak RSS went 75.9 -> 77.9 MiB without this).
  chunk::Space growing_medium = chunk::Space::kPlain;
  static constexpr size_t kPlainGrowth = size_t{1} << 20;
  std::atomic<size_t> plain_growth{0};  // bytes of such blocks made in plain space so far

  // Every bin of every set, for the operations that visit them all.
  template <typename F>
  void for_each_bin(F f) noexcept {
    for (size_t a = 0; a < nbinsets; a++)
      for (auto& b : bins[a]) f(b);
  }
  // A class's bins' statistics, summed over the sets.
  small::BinStats class_stats(size_t cls) const noexcept;
};

// Storage for the one Runtime; valid once `g_ready` is set. Its page map is
// all zeroes before that, so a lookup then finds nothing.
alignas(Runtime) extern unsigned char g_runtime[sizeof(Runtime)];
extern std::atomic<bool> g_ready;
// The huge threshold, copied out of the runtime for the inline fast path:
// every smaller size has a thread-cache bin. Set at start-up, and by
// set_huge_threshold (read and written with relaxed atomic accesses).
extern size_t g_huge_threshold;
// Hardened mode (--enable-hardened, or hardened:true): every free is
// validated. Set at start-up. Under hardened:true alone threads get no cache,
// so every call takes the slow paths, where the checks are, and the inline
// paths below are the same instructions as without it.
extern bool g_hardened;
// --enable-hardened keeps the thread caches: a block freed into one holds
// its freed mark (small::mark_freed), checked when it is handed out again
// (small::take_marked).
inline Runtime& rt() { return *reinterpret_cast<Runtime*>(g_runtime); }

// The cache of every thread that has none (not yet, no longer, or none at
// all under tcache:false): zero bytes, so each bin is empty and without
// room, and the inline malloc and free miss on it and need no null test.
// Never written; raw storage, like g_runtime, so that no constructor runs.
alignas(small::ThreadCache) extern unsigned char g_no_cache[sizeof(small::ThreadCache)];
inline small::ThreadCache* no_cache() { return reinterpret_cast<small::ThreadCache*>(g_no_cache); }

// The calling thread's cache once the runtime is ready and the thread has
// one, else no_cache(); never null. initial-exec TLS: reading it never
// calls into the dynamic linker (which could allocate).
extern __thread small::ThreadCache* t_cache __attribute__((tls_model("initial-exec")));

// The calling thread's own cache, or nullptr while it has none.
inline small::ThreadCache* own_cache() {
  small::ThreadCache* tc = t_cache;
  return tc == no_cache() ? nullptr : tc;
}

// Whether the calling thread is inside the allocator now (one of its calls
// under way, one of its locks held, a fork's handlers running): what a
// signal handler may do depends on it.
bool inside_allocator_now() noexcept;

}

}

}


}  // namespace ductile::core
