/* SPDX-License-Identifier: BSD-2-Clause */
// A slab region's record (its page bitmaps), the bitmap helpers and the
// purge job: what region.cc and region_purge.cc share.
#pragma once

#include <cstddef>
#include <cstdint>

#include "small/region.h"

namespace ductile::small {

struct Region {
  chunk::Extent* extent = nullptr;  // the chunk layer's 2 MiB extent
  uintptr_t base = 0;
  uint64_t used[kRegionWords] = {};   // lent to a slab, or reserved for a purge in flight
  uint64_t dirty[kRegionWords] = {};  // free, and maybe resident (written or prefaulted)
  // Strict overcommit: free pages purged by decommitting (PROT_NONE), to be
  // committed again before they are lent.
  uint64_t decommitted[kRegionWords] = {};
  uint32_t ndecommitted = 0;  // set bits of `decommitted`
  uint32_t live = 0;     // pages lent to slabs
  uint32_t high = 0;     // the carve point: no page at or above it was ever lent
  uint32_t ahead = 0;    // pages below this were queued for the prefault helper
  uint32_t purging = 0;  // ranges of it in purge jobs now
  uint32_t free_dirty = 0;  // pages free and dirty (dirty & ~used), as the arena's dirty_pages counts them
  uint64_t sparse_since = 0;  // when an advised region fell under 1/8 in use (valid while `sparse`)
  // The longest run of free (not used) pages: the region's place in the
  // arena's fit lists (SlabArena::fit_), kept exact at every change of `used`.
  uint32_t longest = 0;
  bool filed = false;    // on the fit list of `longest`
  bool sparse = false;   // on the arena's list of almost-empty advised regions
  bool busy = false;     // carved past the prefix
  bool advised = false;  // advised as huge pages
  Region* prev = nullptr;  // every region held (no order)
  Region* next = nullptr;
  Region* fit_prev = nullptr;  // the fit list of `longest`
  Region* fit_next = nullptr;
  Region* sparse_prev = nullptr;
  Region* sparse_next = nullptr;
};

inline constexpr uint32_t kAlmostEmpty = kRegionPages / 8;

inline void set_bits(uint64_t* w, size_t first, size_t n) {
  for (size_t i = first; i < first + n; i++) w[i / 64] |= uint64_t{1} << (i % 64);
}
inline void clear_bits(uint64_t* w, size_t first, size_t n) {
  for (size_t i = first; i < first + n; i++) w[i / 64] &= ~(uint64_t{1} << (i % 64));
}
inline size_t count_bits(const uint64_t* w, size_t first, size_t n) {
  size_t c = 0;
  for (size_t i = first; i < first + n; i++) c += (w[i / 64] >> (i % 64)) & 1;
  return c;
}

// The index of the first set bit at or after i in the bitmap `w` (each word
// xor-ed with `flip`: ~0 finds clear bits), or kRegionPages.
inline size_t next_bit(const uint64_t* w, size_t i, uint64_t flip) {
  if (i >= kRegionPages) return kRegionPages;
  size_t k = i / 64;
  uint64_t word = (w[k] ^ flip) & (~uint64_t{0} << (i % 64));
  while (word == 0) {
    if (++k == kRegionWords) return kRegionPages;
    word = w[k] ^ flip;
  }
  return k * 64 + static_cast<size_t>(__builtin_ctzll(word));
}

struct SlabArena::Job {
  static constexpr size_t kMax = 64;
  struct Piece {
    Region* region;
    uint32_t first;
    uint32_t n;
  };
  Piece piece[kMax];
  size_t n = 0;
  // Regions already unlinked, to be purged whole and given back.
  Region* release[kMax];
  size_t nrelease = 0;
  bool trim = false;  // give back whole-free regions regardless of retention
  uint64_t idle_since = chunk::ChunkLayer::kNow;  // when the released regions' pages were last used

  bool full() const { return n == kMax; }
};

}  // namespace ductile::small
