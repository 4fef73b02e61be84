/* SPDX-License-Identifier: BSD-2-Clause */
// Thread caches: making one, flushing it, giving it back at thread exit;
// the layout of a cache bin's slots and the mark of a cached medium block.
#pragma once

#include <pthread.h>

#include <cstddef>
#include <cstdint>

#include "core/state.h"

namespace ductile::core {

extern Mutex g_caches_lock;
extern pthread_key_t g_cache_key;
extern small::ThreadCache* g_live_caches;  // g_caches_lock

// Makes the calling thread's cache; nullptr where it cannot have one (see
// ThreadState, tcache:false, hardened:true alone, a forked child's own heap).
small::ThreadCache* create_cache();
// The calling thread's cache, made now if it has none yet.
DUCTILE_ALWAYS_INLINE small::ThreadCache* cache() {
  small::ThreadCache* tc = t_cache;
  return DUCTILE_LIKELY(tc != no_cache()) ? tc : create_cache();
}

// Returns the first n blocks of a cache bin (its slots: items) to where
// they came from.
void flush_objects(size_t cls, void** items, size_t n);
// A medium block that leaves the caches (a flush, the depot) goes back to
// the chunk layer, dirty; its caller made the background thread first
// (make_background_before) where the bytes would ring its doorbell.
void medium_to_chunks(chunk::Extent* e) noexcept;
// A full cache bin gives back its older half.
void flush_half(small::ThreadCache* tc, size_t cls);
// A small class's bin is about to fill (empty) or flush (full): it may
// double its depth, or go back to its base one, by the pace of its fills
// and flushes (small::kDepthGrowth).
void adapt_depth(small::ThreadCache* tc, size_t cls, bool fill) noexcept;
void flush_all(small::ThreadCache* tc);
void retire_cache(small::ThreadCache* tc);
// Parked caches (thread_exit): at most kMaxParked, each adopted whole by the
// next thread that makes a cache. parked_caches: how many now.
inline constexpr size_t kMaxParked = 2;
size_t parked_caches() noexcept;
// Retires the parked caches that a step before this one saw parked (every
// one with `all`: trim); true while one stays parked.
bool retire_parked(bool all) noexcept;
// A forked child: no cache is parked (they are the parent's threads').
void forget_parked() noexcept;
// Moves a cache from the live list to the free pool (g_caches_lock held).
void unlink_cache(small::ThreadCache* tc);
void thread_exit(void* arg) noexcept;
// A thread's countdown of cached frees ran out: a decay step if one is due.
void decay_event(small::ThreadCache* tc) noexcept;
// kHardened: the thread's countdown to its next filled free ran out; sets
// the next one (at random, Options::freed_fill frees apart on average).
// Whether this free fills its block: not the first count's end, which only
// seeds the intervals, nor any with freed_fill:0.
bool next_fill(small::ThreadCache* tc) noexcept;
// kHardened: whether the free that tc's thread makes now fills its block
// (small::free_marked): a sample of the frees.
DUCTILE_ALWAYS_INLINE bool fill_due(small::ThreadCache* tc) noexcept {
  return DUCTILE_UNLIKELY(--tc->fill_countdown == 0) && next_fill(tc);
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
// extent's `cached` mark goes); kHardened checks and clears the freed mark
// (and a filled block's fill: cls is the bin's class), and returns the mark
// in *mark where asked.
template <bool medium>
DUCTILE_ALWAYS_INLINE void* cache_slot_out(small::CacheBin& b, size_t cls, uintptr_t* mark = nullptr) noexcept {
  void* p;
  if (medium) {
    // A medium block's address and extent, side by side (thread_cache.h).
    b.top -= 2;
    p = b.top[0];
    medium_take(static_cast<chunk::Extent*>(b.top[1]));
  } else {
    p = *--b.top;
  }
  if (kHardened) {
    const uintptr_t m = small::take_marked(p, small::class_size(cls));
    if (mark != nullptr) *mark = m;
  }
  return p;
}

// Puts p, of class cls, into the thread cache's bin b, which has room: a
// medium block (extent e) with its extent beside it.
DUCTILE_ALWAYS_INLINE void cache_slot_in(small::CacheBin& b, void* p, size_t cls, chunk::Extent* e) noexcept {
  if (small::is_small_class(cls)) {
    *b.top++ = p;
  } else {
    b.top[0] = p;
    b.top[1] = e;
    b.top += 2;
  }
}

}  // namespace ductile::core
