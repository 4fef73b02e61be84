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
  // Huge-page address space: its reservation was advised MADV_HUGEPAGE as a
  // whole. Kept apart from plain space (never merged with it, never grown
  // into it), so advice never splits a mapping (ChunkLayer::alloc's `thp`).
  bool thp = false;
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
  uint16_t size_class = 0;
  void* owner = nullptr;
  size_t usable = 0;
  // A sampled block's sample (core/prof.h); nullptr for every other.
  void* sample = nullptr;

  uintptr_t end() const { return base + size; }
  bool is_free() const { return state != ExtentState::kActive; }
};

}  // namespace ductile::chunk
