/* SPDX-License-Identifier: BSD-2-Clause */
// The core's bottom: the one process-wide Runtime holding every layer, and
// the state of the process and of the calling thread that every core file reads.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "base/lock.h"
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
  huge::HugeLayer huge;
  small::Prefaulter prefault;
  BackgroundThread background;  // finishes decay once the program goes quiet
  small::SlabArena arena;  // the slab regions every bin takes its slabs from
  // Decay steps over every bin, the slab arena and the chunk layer: the
  // background thread's, and the bounded ones the allocator's calls take.
  small::Decay decay;
  // Where a medium block that replaces a smaller one (realloc growth) goes
  // (dense_space). The dense space is advised as huge pages only once the
  // process holds kDenseAdviceAt bytes (the chunk layer's active extents):
  // before, its first touch made 2 MiB resident, and a program with 2 MB
  // live that grows a hash table by realloc in each pass (about 4.3 MiB
  // held) peaked at 6.6 MB instead of 4.6. With the advice waiting, the
  // first growth goes there too: it used to be made in plain space up to a
  // MiB, so that a program growing a buffer or two paid no huge page, and
  // the tables that program grew there before the switch stayed dirty in
  // plain space, where nothing of their size was allocated again (384 KiB
  // of its 5.0 MB peak). (Keeping all growth in plain space instead put
  // growing medium blocks beside recycled huge blocks, which then could not
  // grow in place.) Asked at each growth: the kernel's THP mode is read at
  // the first (os::Os::thp_mode), not at start-up.
  chunk::Space growing_medium() noexcept { return dense_space(opts.thp, os.thp_mode()); }
  static constexpr size_t kDenseAdviceAt = size_t{8} << 20;
  // A dense buffer that reaches half the huge threshold becomes a huge
  // block (core/realloc.cc: grows_huge) only once the process has made
  // kHugeGrowthAfter bytes of growing medium blocks (growth_made, counted
  // up to there): the huge block's huge page is up to 1 MiB more resident
  // than the block, which a program growing a buffer or two should not pay.
  static constexpr size_t kHugeGrowthAfter = size_t{1} << 20;
  std::atomic<size_t> growth_made{0};
  // Sets of bins: a thread fills its cache from one set, assigned round
  // robin when its cache is made, so threads on different cores need not
  // share bin locks and slabs. A free returns an object to the bin that
  // holds its slab, whichever set that is. One set by default (bin_sets).
  static constexpr size_t kMaxBinSets = kMaxBinSetsOption;
  size_t nbinsets = 1;  // Options::bin_sets (0 there: one per CPU)
  // Room for every set; only the first nbinsets are made (the Runtime's
  // constructor), so the others' pages are never touched: constructing all
  // eight wrote 44 KiB of zeroes and locks, 11 page faults at start-up.
  union BinSets {
    BinSets() noexcept {}
    ~BinSets() {}
    small::Bin* operator[](size_t set) noexcept { return sets[set]; }
    const small::Bin* operator[](size_t set) const noexcept { return sets[set]; }
    small::Bin sets[kMaxBinSets][small::kNumSmall];
  } bins;
  // Last: its page map's 2 MiB root ends it (chunk/chunk.h), so the
  // members above and its own first ones, which start-up writes, lie on a
  // few pages side by side, and the bin sets not in use between them.
  chunk::ChunkLayer chunks;

  // Every bin of every set, for the operations that visit them all.
  template <typename F>
  void for_each_bin(F f) noexcept {
    for (size_t a = 0; a < nbinsets; a++)
      for (small::Bin& b : bins.sets[a]) f(b);
  }
  // A class's bins' statistics, summed over the sets.
  small::BinStats class_stats(size_t cls) const noexcept;
};

// Storage for the one Runtime; valid once `g_ready` is set. Its page map is
// all zeroes before that, so a lookup then finds nothing. Hidden (see
// DUCTILE_LARGE_STATIC): through the GOT, every free loaded its address
// before the page map's root, and the pair took 2-4 % longer.
alignas(kPage) extern unsigned char g_runtime[sizeof(Runtime)] DUCTILE_HIDDEN;
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
// its freed mark (small::free_marked, which finds a second free), checked
// when it is handed out again (small::take_marked).
inline Runtime& rt() { return *reinterpret_cast<Runtime*>(g_runtime); }

// The cache of every thread that has none (not yet, no longer, or none at
// all under tcache:false): zero bytes, so each bin is empty and without
// room, and the inline malloc and free miss on it and need no null test.
// Never written; raw storage, like g_runtime, so that no constructor runs.
// Read-only data: the first malloc of every thread reads it, and a page of
// the library's file is mapped at that read (with its neighbours, which hold
// the size-class table that malloc reads too), where a page of zero-filled
// data would be one page fault more at every program's start; and a write
// to it would fault at once instead of corrupting every thread's misses.
alignas(small::ThreadCache) extern const unsigned char g_no_cache[sizeof(small::ThreadCache)] DUCTILE_HIDDEN;
inline small::ThreadCache* no_cache() {
  return reinterpret_cast<small::ThreadCache*>(const_cast<unsigned char*>(g_no_cache));
}

// The calling thread's cache once the runtime is ready and the thread has
// one, else no_cache(); never null. initial-exec TLS: reading it never
// calls into the dynamic linker (which could allocate).
extern __thread small::ThreadCache* t_cache __attribute__((tls_model("initial-exec")));

// The calling thread's own cache, or nullptr while it has none.
inline small::ThreadCache* own_cache() {
  small::ThreadCache* tc = t_cache;
  return tc == no_cache() ? nullptr : tc;
}

// Serialises the runtime's creation (ensure_ready) and changes of run-time
// options (options_lock); taken around fork.
extern Mutex g_init_lock;

// ---- thread state ------------------------------------------------------
// kMakingCache: create_cache is under way on this thread. What it calls may
// allocate and free (the C library's pthread_setspecific callocs a
// second-level table for a key past the first 32): those calls go uncached
// instead of making a cache again.
enum ThreadState : uint8_t { kNoCache, kMakingCache, kHasCache, kExiting };
extern __thread uint8_t t_state __attribute__((tls_model("initial-exec")));
// This thread is making the runtime (ensure_ready): its calls meanwhile are
// served from the start-up buffer.
extern __thread bool t_initialising __attribute__((tls_model("initial-exec")));
// This thread has made a free without a cache (see cache_for_free).
extern __thread bool t_freed_uncached __attribute__((tls_model("initial-exec")));
// thread.tcache.enabled was set false: this thread makes no cache.
extern __thread bool t_cache_off __attribute__((tls_model("initial-exec")));

// Calls into the allocator under way on this thread (InCall): a fork from
// a signal handler that interrupted one of them must not trust the heap in
// the child (see prefork), even where the call held no lock at that moment
// (a cache bin half flushed, its count not yet lowered).
extern __thread unsigned t_calls __attribute__((tls_model("initial-exec")));
class InCall {
 public:
  InCall() noexcept {
    t_calls++;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
  }
  ~InCall() {
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    t_calls--;
  }
  InCall(const InCall&) = delete;
  InCall& operator=(const InCall&) = delete;
};

// This thread runs the fork handlers (core/fork.cc).
extern __thread bool t_forking __attribute__((tls_model("initial-exec")));

// Inside the allocator: in one of its calls (InCall), holding one of its
// locks, inside the fork gate, or in the fork handlers.
bool inside_allocator() noexcept;
// Whether the calling thread is inside the allocator now (one of its calls
// under way, one of its locks held, a fork's handlers running): what a
// signal handler may do depends on it.
bool inside_allocator_now() noexcept;

// Enough memory awaits decay and the background thread sleeps (or was never
// started): wake it here, where this thread holds no lock.
DUCTILE_ALWAYS_INLINE void wake_background_if_rung() {
  if (DUCTILE_UNLIKELY(rt().chunks.take_signal())) rt().background.wake();
}

// The background thread is made by the call that first rings the doorbell,
// and making a thread allocates (pthread_create callocs the new thread's TLS
// vector). Made by a free, after the block went back, those allocations
// could take the block's own memory (a huge block's span became a slab
// region), and a second free of the block was then taken for the free of a
// slab object. So a free that hands `bytes` of a block straight to the chunk
// or huge layer makes the thread first, where they would ring the doorbell.
// Costs one relaxed load once the thread exists.
inline void make_background_before(size_t bytes) {
  if (DUCTILE_UNLIKELY(rt().background.unstarted()) && rt().chunks.would_ring(bytes)) rt().background.wake();
}

// A slab region proved busy and asked for the prefault helper: start it here,
// where this thread holds no lock (creating a thread allocates).
DUCTILE_ALWAYS_INLINE void start_helper_if_asked() {
  if (DUCTILE_UNLIKELY(rt().prefault.start_pending())) (void)rt().prefault.start();
}

// A bounded decay step when one is due, from the slow paths of any class
// (where this thread holds no lock): idle classes' empty slabs go too, also
// without a background thread.
DUCTILE_ALWAYS_INLINE void decay_from_calls() { rt().decay.tick(); }

}  // namespace ductile::core
