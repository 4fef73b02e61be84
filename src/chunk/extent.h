/* SPDX-License-Identifier: BSD-2-Clause */
// An extent: a page-multiple range of address space that ductile owns, with
// the state the chunk layer tracks for it. Upper layers own the extents they
// are handed (state kActive) and may hang their own metadata off `owner`.
#pragma once

#include <cstddef>
#include <cstdint>

#include "base/common.h"

namespace ductile::chunk {

// Which upper layer an active extent belongs to (set by that layer).
enum class ExtentKind : uint8_t {
  kNone,    // free, or an owner that does not need telling apart
  kSlab,    // small objects of one size class; owner is the slab header
  kMedium,  // one medium block: a page run of a medium size class
  kHuge,    // one huge block at the start of its span
};

// Which address space an extent lies in. Each space has reservations of its
// own, and its free extents are kept apart from the other spaces' (never
// merged with them, never grown into them), so that advice given to a whole
// reservation never splits a mapping.
enum class Space : uint8_t {
  kPlain,  // no advice: the kernel's default page size
  kHuge,   // huge blocks that grow: advised MADV_HUGEPAGE, a block per span
  kDense,  // medium blocks that grow: advised MADV_HUGEPAGE, packed together
};
inline constexpr size_t kSpaces = 3;
// Whether a space's reservations are advised MADV_HUGEPAGE.
constexpr bool advised(Space s) { return s != Space::kPlain; }
inline constexpr size_t space_index(Space s) { return static_cast<size_t>(s); }

enum class ExtentState : uint8_t {
  kActive,   // handed to an upper layer
  kDirty,    // free, retained: its pages may still be resident
  kClean,    // free, purged or never touched: reads as zeroes
  kPurging,  // free, in a purge batch that has not completed: unavailable
};

struct Extent {
  uintptr_t base = 0;
  size_t size = 0;
  ExtentState state = ExtentState::kClean;
  // Strict overcommit mode only: false while the range is PROT_NONE. In
  // normal mode every extent is committed.
  bool committed = true;
  uint8_t bucket = 0;  // free-set bucket while free
  // Every page (not just the first and last) maps to this extent in the page
  // map: set by upper layers for slabs, whose interior pointers are freed.
  bool interior_mapped = false;
  // The address space it lies in (ChunkLayer::alloc's `space`).
  Space space = Space::kPlain;
  // Pages that mremap moved here lie in (part of) this range: they keep a
  // mapping of their own, which never merges with its neighbours, until the
  // range is mapped afresh (ChunkLayer::mark_remapped). Such an extent never
  // coalesces with its neighbours either.
  bool remapped = false;
  uint64_t freed_ns = 0;  // when it became dirty (decay age)
  // Links in the free set's bucket list, and (dirty extents) in the age list.
  Extent* prev = nullptr;
  Extent* next = nullptr;
  Extent* age_prev = nullptr;
  Extent* age_next = nullptr;
  // Upper layer's data for an active extent: which layer, its own metadata,
  // and the bytes the block may use (a medium block's class size; a huge
  // block's size, the rest of the span being headroom).
  ExtentKind kind = ExtentKind::kNone;
  // A medium block in a thread cache: 0 while it is not (live, or not a
  // medium block), kCachedFresh when a cache takes it, aged step by step
  // by the collector up to kCachedPurged (core: the idle caches'
  // collection). A free that finds it non-zero is a double free; the
  // hand-out clears it. `purging`: the collector is purging its pages (the
  // hand-out waits). Both accessed with atomic builtins.
  uint8_t cached = 0;
  uint8_t purging = 0;
  // Hardened mode: a medium or huge block allocated with an alignment past
  // a page holds its log2 here (0: none), which a sized free must name
  // again (core: check_sized_free). Set where such a block is made.
  uint8_t lg_align = 0;
  uint16_t size_class = 0;
  void* owner = nullptr;
  size_t usable = 0;
  // A sampled block's sample (core/prof.h); nullptr for every other.
  void* sample = nullptr;

  uintptr_t end() const { return base + size; }
  bool is_free() const { return state != ExtentState::kActive; }
};

}  // namespace ductile::chunk
