// An extent: a page-multiple range of address space that ductile owns, with
// the state the chunk layer tracks for it. Upper layers own the extents they
// are handed (state kActive) and may hang their own metadata off `owner`.
#pragma once

#include <cstddef>
#include <cstdint>

#include "base/common.h"

namespace ductile::chunk {

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
  uint64_t freed_ns = 0;  // when it became dirty (decay age)
  // Links in the free set's bucket list, and (dirty extents) in the age list.
  Extent* prev = nullptr;
  Extent* next = nullptr;
  Extent* age_prev = nullptr;
  Extent* age_next = nullptr;
  // Upper layer's metadata for an active extent (slab, huge span).
  void* owner = nullptr;

  uintptr_t end() const { return base + size; }
  bool is_free() const { return state != ExtentState::kActive; }
};

}  // namespace ductile::chunk
