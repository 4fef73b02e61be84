// SPDX-License-Identifier: BSD-2-Clause
// Placement by size and the byte accounting of uncached paths (core/place.h).
#include "core/place.h"

#include "core/state.h"
#include "small/seal.h"

namespace ductile::core {

using small::ThreadCache;

size_t huge_threshold() { return __atomic_load_n(&rt().huge.options().threshold, __ATOMIC_RELAXED); }

// The smallest class >= size whose objects are `align`-aligned (align <= a
// page): small objects sit at multiples of the class size from a page-aligned
// slab base; medium blocks are page aligned.
size_t class_for(size_t size, size_t align) {
  size_t cls = small::class_of(size);
  if (align > small::kMinAlign)
    while (small::is_small_class(cls) && small::class_size(cls) % align != 0) cls++;
  return cls;
}

void count_bytes(size_t allocated, size_t deallocated) {
  if (!kStats && !kProf) return;  // the sampling clock runs on `allocated`
  if (ThreadCache* tc = own_cache()) {
    tc->allocated += allocated;
    tc->deallocated += deallocated;
  }
}

Placement place(size_t size, size_t align) {
  if (size >= huge_threshold() || (align > kPage && size + align >= huge_threshold()))
    return {Placement::kHuge, 0, huge::HugeLayer::size_for(size)};
  if (align > kPage) {
    // Slab objects are aligned to at most a page: a medium block, aligned by the chunk layer.
    size_t cls = class_for(size > small::kMaxSmall ? size : small::kMaxSmall + 1, kPage);
    return {Placement::kAlignedMedium, cls, small::class_size(cls)};
  }
  size_t cls = class_for(size, align);
  return {Placement::kClass, cls, small::class_size(cls)};
}

Placement place_request(size_t size, size_t align) {
  if (!g_hardened) return place(size, align);
  Placement at = place(small::sealed_size(size), align);
  if (at.kind == Placement::kHuge) at.usable = huge::HugeLayer::size_for(size);
  return at;
}

}  // namespace ductile::core
