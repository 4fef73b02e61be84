/* SPDX-License-Identifier: BSD-2-Clause */
// The core: one process-wide Runtime holding every layer, created on the
// first call (before constructors run, when preloaded), and the dispatch by
// size that the API layer forwards to. The common malloc and free are inline
// here: a thread-cache pop or push, no lock.
//
// Size ranges: small (<= small::kMaxSmall) objects from slabs through the
// thread cache; medium (up to the huge threshold) page runs, also cached per
// thread; huge (>= the threshold) blocks of the huge layer.
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

// The kernel under the runtime's OS layer, asked once while the runtime is
// made: os::linux_kernel(). A weak definition, so that a test program can
// define its own and put a fault-injecting kernel under the whole allocator
// (test/unit/fault_test.cc); the shared library binds it internally.
os::Kernel& runtime_kernel() noexcept;

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

// Slow paths and everything but the cache hits. All set errno on failure.
void* alloc_slow(size_t size) noexcept;
// A thread's countdown of cached frees ran out: a decay step if one is due.
void decay_event(small::ThreadCache* tc) noexcept;
void dealloc_slow(void* p) noexcept;
// Hardened mode, before a free that says the size (and alignment, 0 for
// none) the block was allocated with (sdallocx, free_sized, sized operator
// delete): a size it cannot have been allocated with ends the program.
// Without hardened mode the size is neither needed nor trusted.
void check_sized_free(void* p, size_t size, size_t align) noexcept;
DUCTILE_ALWAYS_INLINE void check_size(void* p, size_t size, size_t align = 0) noexcept {
  if (DUCTILE_UNLIKELY(g_hardened)) check_sized_free(p, size, align);
}
// check_sized_free, then dealloc_slow: the one call that a hardened
// build's inline sized free leaves by, so that it needs no stack frame.
void dealloc_sized_slow(void* p, size_t size, size_t align) noexcept;
// `align`: a power of two; `zero`: the block reads as zeroes.
void* alloc_aligned(size_t size, size_t align, bool zero) noexcept;
// MALLOCX_TCACHE_NONE: as alloc_aligned and free, but the block neither comes
// from nor goes to the thread cache (straight from and back to its bin or
// the chunk layer).
void* alloc_aligned_uncached(size_t size, size_t align, bool zero) noexcept;
void dealloc_uncached(void* p) noexcept;
// realloc semantics, except that size 0 is served as a minimal block (the API
// layer decides what realloc(p, 0) means).
void* reallocate(void* p, size_t size) noexcept;
// rallocx semantics: may move; the result is `align`-aligned (0: no
// requirement) and its usable size is exactly usable_size_for(size, align),
// shrinking included; with `zero`, bytes past the old usable size read as
// zero; `cached` false bypasses the thread cache (MALLOCX_TCACHE_NONE).
void* reallocate_aligned(void* p, size_t size, size_t align, bool zero, bool cached = true) noexcept;
// The calling thread's cache, made now if it has none yet; nullptr where it
// cannot have one (tcache:false, or while it exits). Allocates nothing.
small::ThreadCache* thread_cache() noexcept;
// The active extent of ours that holds p (a block's extent), or nullptr.
chunk::Extent* owner_of(const void* p) noexcept;
// The usable size of the block whose extent is e.
size_t usable_of(const chunk::Extent* e) noexcept;
// The usable size of a block of ours; 0 for anything else.
size_t usable_size(const void* p) noexcept;
// The usable size malloc(size) would give (nallocx); 0 if it would fail.
size_t usable_size_for(size_t size, size_t align) noexcept;
// Grows or shrinks in place only (xallocx): returns the usable size after.
size_t resize_in_place(void* p, size_t size, bool zero) noexcept;
// Gives the calling thread's cached blocks back to their bins (tcache.flush).
void flush_thread_cache() noexcept;
// thread.tcache.enabled: whether the calling thread uses a cache; setting
// it false flushes the thread's cache and gives it back.
bool thread_cache_enabled() noexcept;
void set_thread_cache_enabled(bool on) noexcept;
// Flushes the calling thread's cache, releases every empty slab and purges
// every retained extent. Returns the bytes purged.
size_t trim() noexcept;
// Makes the runtime ready; false while it is being made by this very thread.
bool ensure_ready() noexcept;
// Whether the calling thread is inside the allocator now (one of its calls
// under way, one of its locks held, a fork's handlers running): what a
// signal handler may do depends on it.
bool inside_allocator_now() noexcept;
// Serialises changes of run-time options (mallctl writes, mallopt); taken
// around fork, so a child never inherits it held.
Mutex& options_lock() noexcept;
// Changes the huge threshold at run time (mallopt's M_MMAP_THRESHOLD) to
// `bytes`, which must be a value the huge_threshold option accepts; false,
// with nothing changed, for any other or while the runtime is not ready.
// Blocks keep the range they were made in -- free and realloc go by the
// extent's kind -- so only later requests are served differently.
bool set_huge_threshold(size_t bytes) noexcept;

// A medium block's extent, found through the page map's entry for its
// first page (`entry`, tagged: the block is ours and starts there).
DUCTILE_ALWAYS_INLINE chunk::Extent* medium_extent(uintptr_t entry) noexcept {
  return chunk::PageMap::entry_extent(entry);
}

// Extent::cached for a medium block in a thread cache: kCachedFresh when a
// cache takes it, then one step older at each collection step of the idle
// caches (collect_cached_medium) that finds it still there; at
// kCachedPurgeAt its pages are purged where it lies, and it is kCachedPurged.
inline constexpr uint8_t kCachedFresh = 1;
inline constexpr uint8_t kCachedPurgeAt = 5;
inline constexpr uint8_t kCachedPurged = 6;

// A cache takes the medium block of extent e; false if a cache holds it
// already (a double free). Only the collector writes the mark meanwhile,
// and only a non-zero one.
DUCTILE_ALWAYS_INLINE bool medium_put(chunk::Extent* e) noexcept {
  if (__atomic_load_n(&e->cached, __ATOMIC_RELAXED) != 0) return false;
  __atomic_store_n(&e->cached, kCachedFresh, __ATOMIC_RELAXED);
  return true;
}

// The medium block leaves its cache: after waiting for a purge of its pages
// under way (the collector's side: see collect_cached_medium), or noting
// that its pages had been purged.
void medium_taken_slow(chunk::Extent* e, uint8_t was) noexcept;
// The block of extent e leaves its thread cache (handed out or given back).
// The handshake with the collector, which purges a cached block's pages
// while it lies there: this side clears the mark, then (a compiler barrier
// only: the collector's membarrier fences this thread) reads `purging`.
DUCTILE_ALWAYS_INLINE void medium_take(chunk::Extent* e) noexcept {
  const uint8_t was = __atomic_load_n(&e->cached, __ATOMIC_RELAXED);
  __atomic_store_n(&e->cached, 0, __ATOMIC_RELAXED);
  __atomic_signal_fence(__ATOMIC_SEQ_CST);
  if (DUCTILE_UNLIKELY(__atomic_load_n(&e->purging, __ATOMIC_RELAXED) != 0 || was == kCachedPurged))
    medium_taken_slow(e, was);
}

// Takes the newest block out of the thread cache's bin b (not empty), of a
// medium class or a small one: a medium block leaves the cache (its
// extent's `cached` mark goes); kHardened checks and clears the freed mark.
template <bool medium>
DUCTILE_ALWAYS_INLINE void* cache_slot_out(small::CacheBin& b) noexcept {
  const uint32_t i = --b.count;
  void* p;
  if (medium) {
    // A medium block's address and extent, side by side (thread_cache.h).
    p = small::medium_block(b, i);
    medium_take(static_cast<chunk::Extent*>(small::medium_block_extent(b, i)));
  } else {
    p = b.items[i];
  }
  if (kHardened) small::take_marked(p);
  return p;
}

// A block of class cls from the thread cache's bin b (not empty), counted
// on the sampling clock.
template <bool medium>
DUCTILE_ALWAYS_INLINE void* cache_pop(small::ThreadCache* tc, small::CacheBin& b, size_t cls, size_t size) noexcept {
  if (kStats || kProf) {
    const uint64_t now = tc->allocated + small::class_size(cls);
    // The sampling clock (core/prof.h): never taken without prof:true.
    if (kProf && DUCTILE_UNLIKELY(now >= tc->prof_at)) return alloc_slow(size);
    tc->allocated = now;
  }
  return cache_slot_out<medium>(b);
}

// Every size below the huge threshold has a cache bin, and the threshold is
// above small::kMaxSmall, so small sizes skip the threshold test.
DUCTILE_ALWAYS_INLINE void* alloc(size_t size) noexcept {
  small::ThreadCache* tc = t_cache;
  if (DUCTILE_LIKELY(size <= small::kMaxTableSize)) {
    const size_t cls = small::class_of_table(size);
    small::CacheBin& b = tc->bins[cls];
    if (DUCTILE_LIKELY(b.count != 0)) return cache_pop<false>(tc, b, cls, size);
  } else if (size <= small::kMaxSmall) {
    const size_t cls = small::class_of(size);
    small::CacheBin& b = tc->bins[cls];
    if (DUCTILE_LIKELY(b.count != 0)) return cache_pop<false>(tc, b, cls, size);
  } else if (size < __atomic_load_n(&g_huge_threshold, __ATOMIC_RELAXED)) {
    const size_t cls = small::class_of(size);
    small::CacheBin& b = tc->bins[cls];
    if (DUCTILE_LIKELY(b.count != 0)) return cache_pop<true>(tc, b, cls, size);
  }
  return alloc_slow(size);
}

// Hardened builds: whether p, whose page's entry in the page map is
// `entry` with class `cls` (small::tag_class), is the start of a block that
// the thread cache may take. A slab object by its offset from the slab's
// base, which the tag's page number gives (a multiply, no division, no
// extent); a medium block only by its first page, the one page it tags,
// whose number in the tag is 0 (the same multiply, by 1: offset 0 alone).
// Anything else -- no tag (not ours, freed, sampled, huge), an interior
// pointer -- goes to the slow path, which reports it.
DUCTILE_ALWAYS_INLINE bool hardened_block_start(const void* p, uintptr_t entry, size_t cls) noexcept {
  return cls < small::kNumClasses &&
         small::is_object_offset(small::tag_slab_offset(chunk::PageMap::entry_tag(entry), addr(p)), cls);
}

// Puts p, of class cls, into the thread cache's bin b, which has room: a
// medium block (extent e) with its extent beside it.
DUCTILE_ALWAYS_INLINE void cache_slot_in(small::CacheBin& b, void* p, size_t cls, chunk::Extent* e) noexcept {
  if (small::is_small_class(cls)) {
    b.items[b.count++] = p;
  } else {
    small::medium_block(b, b.count) = p;
    small::medium_block_extent(b, b.count) = e;
    b.count++;
  }
}

// Pushes p, of class cls, onto the thread cache's bin b, which has room; e:
// a medium block's extent.
DUCTILE_ALWAYS_INLINE void cache_push_inline(small::ThreadCache* tc, small::CacheBin& b, void* p, size_t cls,
                                             chunk::Extent* e = nullptr) noexcept {
  if (kHardened) small::mark_freed(p);
  if (kStats) tc->deallocated += small::class_size(cls);
  cache_slot_in(b, p, cls, e);
  if (DUCTILE_UNLIKELY(--tc->decay_countdown == 0)) decay_event(tc);
}

// The page-map entry's tag (small::free_tag) gives the class of a slab's
// objects and of a medium block freed by its first page, so the common free
// loads no extent: TLS, the page map's root and leaf, the cache bin.
// Hardened builds check the block inline too (hardened_block_start), so a
// valid free stays here as well, and store its freed mark (a second free is
// found when the block is handed out: small::take_marked).
// `sized` (hardened builds): the caller was told the block's size, at most
// small::kMaxTableSize, and no alignment; the block's class must be that
// size's.
template <bool sized = false>
DUCTILE_ALWAYS_INLINE void dealloc_as(void* p, size_t size = 0) noexcept {
  small::ThreadCache* tc = t_cache;
  const uintptr_t entry = rt().chunks.lookup_entry(p);
  // No tag (0, also for nullptr and foreign pointers) wraps to a huge class.
  size_t cls = small::tag_class(chunk::PageMap::entry_tag(entry));
  // A small object only at an 8-byte boundary (the slow path reports the
  // others), a medium block only by its start: page aligned on its (tagged)
  // first page.
  if (kHardened) {
    if (DUCTILE_LIKELY(hardened_block_start(p, entry, cls) && (!sized || small::class_of_table(size) == cls))) {
      small::CacheBin& b = tc->bins[cls];
      // (A medium block cached already: see below.)
      if (small::is_small_class(cls)) {
        if (DUCTILE_LIKELY(b.count < b.limit)) return cache_push_inline(tc, b, p, cls);
      } else if (DUCTILE_LIKELY(b.count < b.limit) && medium_put(medium_extent(entry))) {
        return cache_push_inline(tc, b, p, cls, medium_extent(entry));
      }
    }
    if (sized) return dealloc_sized_slow(p, size, 0);  // reports a wrong size
  } else if (DUCTILE_LIKELY(cls < small::kNumSmall)) {
    small::CacheBin& b = tc->bins[cls];
    if (DUCTILE_LIKELY((addr(p) & 7) == 0 && b.count < b.limit)) return cache_push_inline(tc, b, p, cls);
  } else if (cls < small::kNumClasses && (addr(p) & (kPage - 1)) == 0) {
    small::CacheBin& b = tc->bins[cls];
    // A medium block in a cache already (this thread's or another's) goes
    // to the slow path, which reports the double free.
    if (DUCTILE_LIKELY(b.count < b.limit) && medium_put(medium_extent(entry)))
      return cache_push_inline(tc, b, p, cls, medium_extent(entry));
  }
  dealloc_slow(p);
}

DUCTILE_ALWAYS_INLINE void dealloc(void* p) noexcept { dealloc_as(p); }

// A free that says the size (and alignment, 0 for none) the block was
// allocated with (sdallocx, free_sized, sized operator delete). Hardened
// builds check the common case, a size the fine table classes and no
// alignment, on the inline path, and send the others to the slow path;
// hardened:true checks out of line (check_size).
DUCTILE_ALWAYS_INLINE void dealloc_sized(void* p, size_t size, size_t align = 0) noexcept {
  if (kHardened) {
    if (align == 0 && size <= small::kMaxTableSize) return dealloc_as<true>(p, size);
    return dealloc_sized_slow(p, size, align);
  }
  check_size(p, size, align);
  dealloc(p);
}

}  // namespace ductile::core
