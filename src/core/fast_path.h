/* SPDX-License-Identifier: BSD-2-Clause */
// The inline malloc and free that the API layer calls: a thread-cache pop or
// push, no lock; everything else leaves for core/alloc.cc or core/free.cc.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/alloc.h"
#include "core/cache.h"
#include "core/free.h"
#include "core/state.h"
#include "small/seal.h"

namespace ductile::core {

// A medium block's extent, found through the page map's entry for its
// first page (`entry`, tagged: the block is ours and starts there).
DUCTILE_ALWAYS_INLINE chunk::Extent* medium_extent(uintptr_t entry) noexcept {
  return chunk::PageMap::entry_extent(entry);
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
  uintptr_t mark = 0;
  void* p = cache_slot_out<medium>(b, cls, &mark);
  if (kHardened) small::seal_fresh(p, small::class_size(cls), size, small::seal_key_of(mark));
  return p;
}

// Every size below the huge threshold has a cache bin, and the threshold is
// above small::kMaxSmall, so small sizes skip the threshold test. Hardened
// builds: the block has room for the request and its seal (`need`), which
// cache_pop writes.
DUCTILE_ALWAYS_INLINE void* alloc(size_t size) noexcept {
  small::ThreadCache* tc = t_cache;
  const size_t need = kHardened ? small::sealed_size(size) : size;
  if (DUCTILE_LIKELY(need <= small::kMaxTableSize)) {
    const size_t cls = small::class_of_table(need);
    small::CacheBin& b = tc->bins[cls];
    if (DUCTILE_LIKELY(!b.empty())) return cache_pop<false>(tc, b, cls, size);
  } else if (need <= small::kMaxSmall) {
    const size_t cls = small::class_of(need);
    small::CacheBin& b = tc->bins[cls];
    if (DUCTILE_LIKELY(!b.empty())) return cache_pop<false>(tc, b, cls, size);
  } else if (need < __atomic_load_n(&g_huge_threshold, __ATOMIC_RELAXED)) {
    const size_t cls = small::class_of(need);
    small::CacheBin& b = tc->bins[cls];
    if (DUCTILE_LIKELY(!b.empty())) return cache_pop<true>(tc, b, cls, size);
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

// Pushes p, of class cls, onto the thread cache's bin b, which has room; e:
// a medium block's extent. Hardened builds check the block's seal (a write
// past its request: or a filled block freed again) and mark it freed.
DUCTILE_ALWAYS_INLINE void cache_push_inline(small::ThreadCache* tc, small::CacheBin& b, void* p, size_t cls,
                                             chunk::Extent* e = nullptr) noexcept {
  if (kHardened) {
    const size_t block = small::class_size(cls);
    const uintptr_t mark = small::freed_mark(p);
    if (DUCTILE_UNLIKELY(small::sealed_request(p, block, small::seal_key_of(mark)) == SIZE_MAX)) seal_broken(p);
    small::free_marked(p, mark, fill_due(tc), block);
  }
  if (kStats) tc->deallocated += small::class_size(cls);
  cache_slot_in(b, p, cls, e);
  if (DUCTILE_UNLIKELY(--tc->decay_countdown == 0)) decay_event(tc);
}

// The page-map entry's tag (small::free_tag) gives the class of a slab's
// objects and of a medium block freed by its first page, so the common free
// loads no extent: TLS, the page map's root and leaf, the cache bin.
// Hardened builds check the block inline too (hardened_block_start), so a
// valid free stays here as well, check that it does not carry its freed
// mark already (a second free) and store it (small::free_marked).
// `sized` (hardened builds): the caller was told the block's size, at most
// small::kMaxTableSize with its seal, and no alignment; the block's class
// must be that size's.
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
    if (DUCTILE_LIKELY(hardened_block_start(p, entry, cls) &&
                       (!sized || small::class_of_table(small::sealed_size(size)) == cls))) {
      small::CacheBin& b = tc->bins[cls];
      // (A medium block cached already: see below.)
      if (small::is_small_class(cls)) {
        if (DUCTILE_LIKELY(b.has_room())) return cache_push_inline(tc, b, p, cls);
      } else if (DUCTILE_LIKELY(b.has_room()) && medium_put(medium_extent(entry))) {
        return cache_push_inline(tc, b, p, cls, medium_extent(entry));
      }
    }
    if (sized) return dealloc_sized_slow(p, size, 0);  // reports a wrong size
  } else if (DUCTILE_LIKELY(cls < small::kNumSmall)) {
    small::CacheBin& b = tc->bins[cls];
    if (DUCTILE_LIKELY((addr(p) & 7) == 0 && b.has_room())) return cache_push_inline(tc, b, p, cls);
  } else if (cls < small::kNumClasses && (addr(p) & (kPage - 1)) == 0) {
    small::CacheBin& b = tc->bins[cls];
    // A medium block in a cache already (this thread's or another's) goes
    // to the slow path, which reports the double free.
    if (DUCTILE_LIKELY(b.has_room()) && medium_put(medium_extent(entry)))
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
    if (align == 0 && small::sealed_size(size) <= small::kMaxTableSize) return dealloc_as<true>(p, size);
    return dealloc_sized_slow(p, size, align);
  }
  check_size(p, size, align);
  dealloc(p);
}

}  // namespace ductile::core
