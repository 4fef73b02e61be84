/* SPDX-License-Identifier: BSD-2-Clause */
// Per-thread caches: for each size class a bounded stack of free objects (or,
// for medium classes, free page runs), so that the common malloc and free
// touch no lock and no shared cache line. A miss fills half a stack from the
// class's bin in one locked batch; a full stack flushes its older half. A
// small class's stack that empties and fills again in quick turns grows
// deeper for a while (kDepthGrowth).
//
// Medium blocks are cached too, a few per class (fewer for bigger classes),
// so alloc/free churn of one block costs no chunk-layer call. A medium
// class's bin holds each block in two slots, its address and its extent
// (medium_block, medium_block_extent): the hand-out needs the extent (its
// cached mark), and reads the address beside it rather than in the extent,
// which would put one more dependent load between a free and the next
// malloc's return.
#pragma once

#include <cstddef>
#include <cstdint>

#include "base/counter.h"
#include "small/size_classes.h"

namespace ductile::small {

namespace detail {
// The medium classes whose bins hold more in threads made once the process
// has had two threads with caches (ThreadCache::deepen_medium).
constexpr bool threaded_medium(size_t size) { return size > kMaxSmall && size <= 32 * 1024; }
// A bin's slots, in blocks.
constexpr uint16_t cache_slots_for(size_t size) {
  if (size <= 128) return 128;
  if (size <= 1024) return 64;
  if (size <= 4096) return 32;
  if (size <= kMaxSmall) return 16;
  if (size <= 32 * 1024) return 16;
  if (size <= 64 * 1024) return 2;
  if (size <= 256 * 1024) return 1;
  return 1;
}
// A bin's base depth, in blocks: its slots, but half of them for the
// threaded medium classes.
constexpr uint16_t cache_cap_for(size_t size) {
  return threaded_medium(size) ? cache_slots_for(size) / 2 : cache_slots_for(size);
}
// Slots one cached block of class cls takes: a medium block's two.
constexpr size_t slots_per_block(size_t cls) { return cls < kNumSmall ? 1 : 2; }
constexpr size_t total_slots() {
  size_t n = 0;
  for (size_t c = 0; c < kNumClasses; c++) n += cache_slots_for(kClasses.size[c]) * slots_per_block(c);
  return n;
}
}  // namespace detail

inline constexpr size_t kCacheSlots = detail::total_slots();

// Blocks the cache bin of class cls holds (its base depth: a small class's
// bin may hold more for a while, see kDepthGrowth, and a medium class's up
// to 32 KiB twice as many in threads made once the process has had two
// threads with caches: ThreadCache::deepen_medium).
DUCTILE_ALWAYS_INLINE uint16_t cache_cap(size_t cls) { return detail::cache_cap_for(kClasses.size[cls]); }
// The blocks its slots hold.
DUCTILE_ALWAYS_INLINE uint16_t cache_slots(size_t cls) { return detail::cache_slots_for(kClasses.size[cls]); }

// A small class's bin that bounces -- filled empty, then full again within
// one and a half bins' worth of the thread's calls, or the other way
// round -- doubles its depth (`limit`), up to kDepthGrowth times cache_cap,
// while the thread's bins together hold at most kDepthBudget bytes past
// their base depths; one whose fills and flushes come at a slower pace
// goes back to cache_cap (core/cache.cc: adapt_depth). A grown bin's slots
// are in the record's second array (`deep`), kDeepSlots, made at the
// thread's first growth.
inline constexpr uint32_t kDepthGrowth = 4;
inline constexpr size_t kDepthBudget = size_t{1} << 20;
namespace detail {
// Where class cls's slots begin in the second array.
constexpr size_t deep_offset(size_t cls) {
  size_t n = 0;
  for (size_t c = 0; c < cls; c++) n += cache_slots_for(kClasses.size[c]) * kDepthGrowth;
  return n;
}
}  // namespace detail
inline constexpr size_t kDeepSlots = detail::deep_offset(kNumSmall);

// A cache bin: a stack of blocks in slots [items, top), the newest last,
// pushed while top is below end. Its ends are pointers, not a count. A
// free finds its bin through the page map (two dependent loads from the
// block's address), and a malloc of the same class right after pops what
// it pushed. On the Intel Xeon measured, with a count and an array that
// pop waited for the free's lookup (7.8 ns a malloc+free pair), and with a
// top pointer it does not (3.0 ns); the same two stacks outside the
// allocator, behind the same kind of lookup, take 6.6 and 2.0 ns, so it is
// the stack's shape (docs/measurements/small-objects.md; an AMD EPYC showed
// no difference). 32 bytes, so that a bin is found with one shift. (Counts
// and depths are in blocks; a medium block takes two slots: `shift`.)
struct CacheBin {
  void** top;
  void** end;      // items + limit blocks' slots
  void** items;
  uint32_t limit;  // the bin's depth: cache_cap, or more
  uint32_t shift;  // log2 of the slots a block takes (slots_per_block)

  uint32_t count() const noexcept { return count_to(top); }
  // The count if the top were at `t` (another thread's read of it).
  uint32_t count_to(void* const* t) const noexcept { return static_cast<uint32_t>((t - items) >> shift); }
  bool empty() const noexcept { return top == items; }
  bool has_room() const noexcept { return top < end; }
  void set_count(size_t n) noexcept { top = items + (n << shift); }
  void set_limit(uint32_t n) noexcept {
    limit = n;
    end = items + (size_t{n} << shift);
  }
  // The slots move to `slots` (a grown bin's), blocks and all.
  void move_to(void** slots) noexcept {
    top = slots + (top - items);
    items = slots;
    set_limit(limit);
  }
};
static_assert(sizeof(CacheBin) == 32);

// Half a bin's depth, in blocks (at least one): what a miss fills and a
// full bin flushes.
DUCTILE_ALWAYS_INLINE size_t half_bin(const CacheBin& b) { return b.limit > 1 ? b.limit / 2 : 1; }

// A medium class's bin: the address and the extent (chunk::Extent, opaque
// here) of its block number i (i < count()).
DUCTILE_ALWAYS_INLINE void*& medium_block(const CacheBin& b, size_t i) { return b.items[2 * i]; }
DUCTILE_ALWAYS_INLINE void*& medium_block_extent(const CacheBin& b, size_t i) { return b.items[2 * i + 1]; }

// The page-map tag (chunk::PageMap) of slab pages and of a medium block's
// first page: the size class + 1, so that free() finds the cache bin without
// loading the extent. 0 (no tag) sends free() to the slow path.
DUCTILE_ALWAYS_INLINE constexpr uint16_t free_tag(size_t cls) { return static_cast<uint16_t>(cls + 1); }
// Hardened builds (kHardened) also number a slab's pages in the tag's high
// byte (the class + 1 in the low one): free() then finds an object's offset
// from its slab's base -- the page's number and the address's offset in the
// page -- without loading the extent, and checks that it is a multiple of
// the class size (is_object_offset). Other builds' tags are the class + 1
// alone, which free() uses as it is. The page map adds the step per page
// (ChunkLayer::map_interior).
inline constexpr uint16_t kSlabPageTagStep = kHardened ? 0x100 : 0;
// The class named by a tag; no tag (0) wraps past every class.
DUCTILE_ALWAYS_INLINE constexpr size_t tag_class(uint16_t tag) {
  return (kHardened ? size_t{static_cast<uint8_t>(tag)} : size_t{tag}) - 1;
}
// Hardened builds: the offset of address a from the base of the slab whose
// page's tag is `tag`.
DUCTILE_ALWAYS_INLINE constexpr uint32_t tag_slab_offset(uint16_t tag, uintptr_t a) {
  return static_cast<uint32_t>((size_t{tag} >> 8) << kPageShift | (a & (kPage - 1)));
}
namespace detail {
constexpr bool slabs_numbered_in_a_byte() {
  for (size_t c = 0; c < kNumSmall; c++)
    if (kClasses.slab_pages[c] > 256) return false;
  return kNumClasses < 255;
}
}  // namespace detail
static_assert(detail::slabs_numbered_in_a_byte(), "a tag's high byte numbers a slab's pages, its low byte the class");

// Counters of the growth of blocks by realloc, rallocx and xallocx that a
// thread cache keeps for the core (core/growth.h names them).
inline constexpr size_t kGrowthCounters = 7;

struct ThreadCache {
  CacheBin bins[kNumClasses];
  uint64_t allocated = 0;    // bytes handed out by this thread (class sizes)
  // Sampled heap profiling (core/prof.h): the thread takes its next sample
  // when `allocated` reaches prof_at (UINT64_MAX without prof:true).
  uint64_t prof_at = UINT64_MAX;
  uint64_t deallocated = 0;  // bytes freed by this thread
  // Frees into the cache left before this thread looks whether a decay step
  // is due (core: decay_event). Frees that only ever hit the cache reach no
  // slow path, and an idle class's empty slabs waited for good without a
  // background thread; every kDecayEvent frees a look costs a coarse-clock
  // read -- and the countdown one decrement per free.
  uint32_t decay_countdown = kDecayEvent;
  static constexpr uint32_t kDecayEvent = 4096;  // the first look (small::Decay::kEvent)
  uint64_t prof_rng = 0;     // the sampling intervals' random state
  // --enable-hardened: frees left before the next one that fills its block
  // (core: fill_due), and the intervals' random state (0: not seeded).
  uint32_t fill_countdown = 1;
  uint32_t fill_rng = 0;
  ThreadCache* next = nullptr;  // live list, or the free pool
  ThreadCache* prev = nullptr;
  uint32_t bin_set = 0;  // which set of bins (Runtime::bins) this thread fills from
  // Growth counters (core/growth.h): written by the thread that holds this
  // record -- their one writer -- and read by statistics from any thread.
  // They add up across the threads that hold the record in turn, and init()
  // leaves them alone: the process's totals are the sum over every record
  // ever made (all_next links them, never unlinked).
  LockedCounter<uint64_t> growth[kGrowthCounters];
  ThreadCache* all_next = nullptr;
  // Parked (core/cache.cc): its thread exited and left its blocks in it for
  // the next thread; still on the live list. park_next links the parked.
  ThreadCache* park_next = nullptr;
  bool park_seen = false;  // a background step has seen it parked
  // The bins' depths (kDepthGrowth): the second array of slots (kDeepSlots,
  // nullptr until the first growth; it stays with the record), the bytes
  // the grown bins may hold past their base depths, and for each small
  // class the thread's traffic (allocated + deallocated) at its bin's last
  // fill or flush, and whether that was a fill (bit cls of depth_filled).
  void** deep = nullptr;
  size_t deep_bytes = 0;
  uint64_t depth_filled = 0;
  uint64_t depth_at[kNumSmall];
  void* slots[kCacheSlots];

  void init() noexcept {
    size_t off = 0;
    for (size_t c = 0; c < kNumClasses; c++) {
      bins[c].items = bins[c].top = &slots[off];
      bins[c].shift = detail::slots_per_block(c) == 2 ? 1 : 0;
      bins[c].set_limit(cache_cap(c));
      off += cache_slots(c) * detail::slots_per_block(c);
    }
    deep_bytes = 0;
    reset_counters();
  }
  // The medium classes up to 32 KiB hold 16 blocks, not 8, in the threads
  // made once the process has had two threads with caches, as the depot
  // starts then (core/depot.h): two threads alive at once, each with a few
  // dozen such blocks live and then freed, sent most of them past 8 to the
  // chunk layer's lock and back (short-threads). A single thread's are
  // better free in the chunk layer (medium-cycle peaked 5 % higher with 16).
  void deepen_medium() noexcept {
    for (size_t c = kNumSmall; c < kNumClasses; c++)
      if (detail::threaded_medium(kClasses.size[c])) bins[c].set_limit(cache_slots(c));
  }
  // A new thread's counters, for a record made or adopted parked (whose
  // bins keep their blocks).
  void reset_counters() noexcept {
    allocated = deallocated = 0;
    decay_countdown = kDecayEvent;
    prof_at = UINT64_MAX;
    fill_countdown = 1;
    fill_rng = 0;
    depth_filled = 0;
    for (uint64_t& t : depth_at) t = 0;
  }
};
static_assert(kNumSmall <= 64, "depth_filled has a bit per small class");

}  // namespace ductile::small
