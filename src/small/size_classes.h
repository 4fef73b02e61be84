// Size classes: what a request is rounded up to. 8-byte steps up to 64 bytes,
// 16-byte steps up to 128, then four classes per doubling (the spacing is a
// quarter of the power of two below the size) up to kMaxClassSize. The table
// is computed at compile time.
//
// Classes up to kMaxSmall are *small*: objects carved from slabs, with no
// per-object header. Larger classes are *medium*: page runs (whole extents),
// all page multiples. Requests at or above the huge threshold (a run-time
// option, at most kMaxClassSize) go to the huge layer instead.
#pragma once

#include <cstddef>
#include <cstdint>

#include "base/common.h"

namespace ductile::small {

inline constexpr size_t kMinAlign = 8;
inline constexpr size_t kMaxSmall = 16 * 1024;
inline constexpr size_t kMaxClassSize = size_t{4} << 20;

namespace detail {
constexpr size_t count_classes() {
  size_t n = 0;
  for (size_t s = 8; s <= 64; s += 8) n++;
  for (size_t s = 80; s <= 128; s += 16) n++;
  for (size_t p = 128; p < kMaxClassSize; p *= 2) n += 4;
  return n;
}
}  // namespace detail

inline constexpr size_t kNumClasses = detail::count_classes();

struct ClassTable {
  uint32_t size[kNumClasses] = {};
  // Pages per slab (small classes); 0 for medium classes.
  uint16_t slab_pages[kNumClasses] = {};
  uint16_t objects_per_slab[kNumClasses] = {};
  // Class of each size in 8-byte steps up to 1 KiB: index (size + 7) / 8.
  uint8_t small_lookup[1024 / 8 + 1] = {};
  size_t num_small = 0;
};

namespace detail {
// Slab size: the fewest pages (at least 4, so a slab header is under 0.5 % of
// it; at most 32) that leave under 1/128 of the slab as tail waste, else the
// page count with the least waste. The goal is RSS within 2 % of the class
// size for a full heap.
constexpr uint16_t slab_pages_for(size_t size) {
  size_t best = 4;
  size_t best_waste = SIZE_MAX;
  for (size_t pages = 4; pages <= 32; pages++) {
    size_t bytes = pages * kPage;
    size_t waste = bytes % size;
    if (waste * 128 < bytes) return static_cast<uint16_t>(pages);
    if (waste * best < best_waste * pages) {  // compare waste / pages
      best = pages;
      best_waste = waste;
    }
  }
  return static_cast<uint16_t>(best);
}

constexpr ClassTable make_table() {
  ClassTable t;
  size_t i = 0;
  for (size_t s = 8; s <= 64; s += 8) t.size[i++] = static_cast<uint32_t>(s);
  for (size_t s = 80; s <= 128; s += 16) t.size[i++] = static_cast<uint32_t>(s);
  for (size_t p = 128; p < kMaxClassSize; p *= 2)
    for (size_t k = 1; k <= 4; k++) t.size[i++] = static_cast<uint32_t>(p + k * (p / 4));
  for (size_t c = 0; c < kNumClasses; c++) {
    if (t.size[c] <= kMaxSmall) {
      t.num_small = c + 1;
      t.slab_pages[c] = slab_pages_for(t.size[c]);
      t.objects_per_slab[c] = static_cast<uint16_t>(t.slab_pages[c] * kPage / t.size[c]);
    }
  }
  size_t c = 0;
  for (size_t k = 0; k <= 1024 / 8; k++) {
    size_t s = k * 8;
    while (t.size[c] < s) c++;
    t.small_lookup[k] = static_cast<uint8_t>(c);
  }
  return t;
}
}  // namespace detail

inline constexpr ClassTable kClasses = detail::make_table();
inline constexpr size_t kNumSmall = kClasses.num_small;

// The class for `size` (<= kMaxClassSize). Size 0 is class 0 (8 bytes).
DUCTILE_ALWAYS_INLINE size_t class_of(size_t size) {
  if (DUCTILE_LIKELY(size <= 1024)) return kClasses.small_lookup[(size + 7) >> 3];
  // Four classes per doubling: find the power of two below size-1, then the quarter.
  size_t lg = 63 - static_cast<size_t>(__builtin_clzll(size - 1));  // size-1 in [2^lg, 2^(lg+1))
  size_t quarter = ((size - 1) >> (lg - 2)) & 3;
  // Class of 1024 is the last of the 512..1024 doubling; 1024 = 2^10.
  constexpr size_t k1024 = 8 + 4 + 4 * 3 - 1;  // 8 by 8s, 4 by 16s, then 128-256, 256-512, 512-1024
  return k1024 + 1 + (lg - 10) * 4 + quarter;
}

DUCTILE_ALWAYS_INLINE size_t class_size(size_t cls) { return kClasses.size[cls]; }
DUCTILE_ALWAYS_INLINE bool is_small_class(size_t cls) { return cls < kNumSmall; }

}  // namespace ductile::small
