/* SPDX-License-Identifier: BSD-2-Clause */
// Placement by size -- which range, class and usable size a request gets --
// and the per-thread byte accounting of the paths that bypass the cache.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ductile::core {

// The huge threshold: every smaller size has a class (its range's).
size_t huge_threshold();
// The smallest class >= size whose objects are `align`-aligned (align <= a
// page).
size_t class_for(size_t size, size_t align);
// thread.allocated / thread.deallocated for the paths that bypass the
// thread cache's own counting: huge blocks, page-aligned medium blocks and
// in-place resizes (counted as jemalloc does: the new size allocated, the
// old one deallocated).
void count_bytes(size_t allocated, size_t deallocated);

// Where a request of `size` bytes aligned to `align` (a power of two, or 0/1
// for none) is served, and the usable size it gets: alloc_impl serves it
// there, nallocx answers `usable`, and rallocx leaves a block exactly so.
struct Placement {
  enum Kind : uint8_t { kClass, kAlignedMedium, kHuge } kind;
  size_t cls;     // kClass and kAlignedMedium
  size_t usable;
};
Placement place(size_t size, size_t align);
// Where a request of `size` bytes goes, with hardened mode's seal
// (small/seal.h): place(sealed_size(size)), but a huge block -- which has no
// seal: its guard page finds a write past its end -- gets `size` alone.
// `usable` is the block's size, not the request's that hardened mode reports.
Placement place_request(size_t size, size_t align);

}  // namespace ductile::core
