/* SPDX-License-Identifier: BSD-2-Clause */
// Size classes: what a request is rounded up to. An 8-byte class for sizes 1
// to 8, 16-byte steps up to 256 bytes, then four classes per doubling (the
// spacing is a quarter of the power of two below the size) up to
// kMaxClassSize. The table is computed at compile time.
//
// Every class of 16 bytes or more is a multiple of 16, so that every block of
// 16 bytes or more is 16-aligned: the x86-64 ABI gives malloc'd memory
// alignof(max_align_t) = 16, and compilers store to it with aligned 16-byte
// SSE moves. (8-byte steps, which this table had before, cost 72- and
// 200-byte objects what they ask for plus about 1 % instead of 80 and 208,
// but handed 8-aligned blocks to 120 sizes in [16, 4096]; glibc's
// tst-mallocalign1 failed at 23 bytes.) The fine steps still go to 256
// bytes, where jemalloc's and mimalloc's stop at 128: 200 bytes cost 208, as
// with glibc and tcmalloc, not 224.
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

// Every class is a multiple of this; every class from kAbiAlign bytes on a
// multiple of kAbiAlign (alignof(max_align_t)).
inline constexpr size_t kMinAlign = 8;
inline constexpr size_t kAbiAlign = 16;
inline constexpr size_t kMaxSmall = 16 * 1024;
inline constexpr size_t kMaxClassSize = size_t{4} << 20;
// The largest class of the 16-byte steps.
inline constexpr size_t kMaxFine = 256;
// Slabs of classes from this size keep their freed objects in a bitmap after
// the slab header (one bit per object); the 8- and 16-byte classes in an
// intrusive free list, where the bitmap would cost 1/64 and 1/128 of the
// object (16 bytes measured 16.20 bytes per live object with it, 16.07
// without; tcmalloc 16.09).
inline constexpr size_t kMinBitmapSize = 32;

namespace detail {
constexpr size_t count_classes() {
  size_t n = 0;
  n++;  // 8
  for (size_t s = kAbiAlign; s <= kMaxFine; s += kAbiAlign) n++;
  for (size_t p = kMaxFine; p < kMaxClassSize; p *= 2) n += 4;
  return n;
}
}  // namespace detail

inline constexpr size_t kNumClasses = detail::count_classes();

struct ClassTable {
  uint32_t size[kNumClasses] = {};
  // Pages per slab (small classes); 0 for medium classes.
  uint16_t slab_pages[kNumClasses] = {};
  uint16_t objects_per_slab[kNumClasses] = {};
  // Class of each size in 8-byte steps up to 1 KiB: index (size + 7) / 8
  // (8-byte steps, so that sizes 1..8 and 9..16 fall in different classes).
  uint8_t small_lookup[1024 / 8 + 1] = {};
  // Class of each size in 128-byte steps up to 256 KiB: index (size + 127)
  // / 128. Exact past 1 KiB, where every class size is a multiple of 256.
  uint8_t coarse_lookup[256 * 1024 / 128 + 1] = {};
  size_t num_small = 0;
  // 64-bit words of the slab's bitmap of freed objects (small classes from
  // kMinBitmapSize); 0 where freed objects are linked through their first
  // word. (Last: the malloc fast path's lookup table keeps its offset.)
  uint8_t bitmap_words[kNumClasses] = {};
};

namespace detail {
// Slab size: the fewest pages (at least min_slab_pages; at most 32) that
// leave under 1/128 of the slab as tail waste, else the page count with the
// least waste. The goal is RSS within 2 % of the class size for a full heap.
// A slab costs about 200 bytes of metadata (its extent record and header):
// 1.2 % of a 4-page slab, which measured 8.09 bytes per live 8-byte object
// (tcmalloc: 8.04). Slabs of classes up to 256 bytes therefore take at least
// 16 pages (0.3 %); pages a slab has not reached are never touched, so a
// class with a handful of objects still costs one resident page.
constexpr size_t min_slab_pages(size_t size) { return size <= kMaxFine ? 16 : 4; }

constexpr uint16_t slab_pages_for(size_t size) {
  const size_t lo = min_slab_pages(size);
  size_t best = lo;
  size_t best_waste = SIZE_MAX;
  for (size_t pages = lo; pages <= 32; pages++) {
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
  t.size[i++] = 8;
  for (size_t s = kAbiAlign; s <= kMaxFine; s += kAbiAlign) t.size[i++] = static_cast<uint32_t>(s);
  for (size_t p = kMaxFine; p < kMaxClassSize; p *= 2)
    for (size_t k = 1; k <= 4; k++) t.size[i++] = static_cast<uint32_t>(p + k * (p / 4));
  for (size_t c = 0; c < kNumClasses; c++) {
    if (t.size[c] <= kMaxSmall) {
      t.num_small = c + 1;
      t.slab_pages[c] = slab_pages_for(t.size[c]);
      t.objects_per_slab[c] = static_cast<uint16_t>(t.slab_pages[c] * kPage / t.size[c]);
      if (t.size[c] >= kMinBitmapSize)
        t.bitmap_words[c] = static_cast<uint8_t>((t.objects_per_slab[c] + 63) / 64);
    }
  }
  size_t c = 0;
  for (size_t k = 0; k <= 1024 / 8; k++) {
    size_t s = k * 8;
    while (t.size[c] < s) c++;
    t.small_lookup[k] = static_cast<uint8_t>(c);
  }
  c = 0;
  for (size_t k = 0; k <= 256 * 1024 / 128; k++) {
    size_t s = k * 128;
    while (t.size[c] < s) c++;
    t.coarse_lookup[k] = static_cast<uint8_t>(c);
  }
  return t;
}
}  // namespace detail

inline constexpr ClassTable kClasses = detail::make_table();

namespace detail {
constexpr bool abi_aligned() {
  for (size_t c = 0; c < kNumClasses; c++)
    if (kClasses.size[c] >= kAbiAlign && kClasses.size[c] % kAbiAlign != 0) return false;
  return kClasses.size[0] == 8 && kClasses.size[1] == kAbiAlign;
}
}  // namespace detail
static_assert(detail::abi_aligned(), "every class of 16 bytes or more is a multiple of 16");

namespace detail {
constexpr size_t index_of(size_t size) {
  size_t c = 0;
  while (kClasses.size[c] != size) c++;
  return c;
}
}  // namespace detail
// The class of 1024 bytes, where class_of switches from the table to the formula.
inline constexpr size_t kClass1024 = detail::index_of(1024);
inline constexpr size_t kNumSmall = kClasses.num_small;

namespace detail {
// Every small class, as hardened mode keeps them all in bitmaps (Bin::init).
constexpr size_t max_bitmap_words() {
  size_t m = 0;
  for (size_t c = 0; c < kClasses.num_small; c++) {
    const size_t w = (kClasses.objects_per_slab[c] + 63u) / 64u;
    m = w > m ? w : m;
  }
  return m;
}
}  // namespace detail
inline constexpr size_t kMaxBitmapWords = detail::max_bitmap_words();

// Sizes up to this one are classed by the fine table.
inline constexpr size_t kMaxTableSize = 1024;
// Sizes up to this one are classed by the coarse table.
inline constexpr size_t kMaxCoarseSize = 256 * 1024;
static_assert(sizeof(ClassTable::coarse_lookup) == kMaxCoarseSize / 128 + 1);
// The class for a size <= kMaxTableSize: one table load.
DUCTILE_ALWAYS_INLINE size_t class_of_table(size_t size) { return kClasses.small_lookup[(size + 7) >> 3]; }
// The class for a size <= kMaxCoarseSize, exact only above kMaxTableSize:
// one table load, off the path of the formula's bit scan and variable
// shift (a 4 KiB malloc+free pair 12.6 -> 11.4 ns, 64 KiB 13.6 -> 13.1).
DUCTILE_ALWAYS_INLINE size_t class_of_coarse(size_t size) { return kClasses.coarse_lookup[(size + 127) >> 7]; }
// The class for a size in (kMaxTableSize, kMaxClassSize].
DUCTILE_ALWAYS_INLINE size_t class_of_formula(size_t size) {
  // Four classes per doubling: find the power of two below size-1, then the quarter.
  size_t lg = 63 - static_cast<size_t>(__builtin_clzll(size - 1));  // size-1 in [2^lg, 2^(lg+1))
  size_t quarter = ((size - 1) >> (lg - 2)) & 3;
  return kClass1024 + 1 + (lg - 10) * 4 + quarter;
}
// The class for `size` (<= kMaxClassSize). Size 0 is class 0 (8 bytes).
DUCTILE_ALWAYS_INLINE size_t class_of(size_t size) {
  if (DUCTILE_LIKELY(size <= kMaxTableSize)) return class_of_table(size);
  if (size <= kMaxCoarseSize) return class_of_coarse(size);
  return class_of_formula(size);
}

DUCTILE_ALWAYS_INLINE size_t class_size(size_t cls) { return kClasses.size[cls]; }

// Whether an offset from a slab's base is a multiple of the class size,
// without a division (hardened mode's inline free, where a 64-bit division
// costs tens of cycles): for n and d below 2^32, n % d == 0 exactly when
// n * M < M modulo 2^64, where M = floor((2^64 - 1) / d) + 1 (Lemire,
// Kaser and Kurz, "Faster remainder by direct computation", 2019). A slab
// is at most 32 pages, so its offsets are far below 2^32 (small_test checks
// every offset of every class against the division). A medium class's M is
// 1, which passes offset 0 alone: a medium block is tagged on its first page
// only, where its start is the page's start, so one test serves every class.
namespace detail {
struct OffsetMagic {
  uint64_t m[kNumClasses] = {};
};
constexpr OffsetMagic make_offset_magic() {
  OffsetMagic t;
  for (size_t c = 0; c < kNumSmall; c++) t.m[c] = UINT64_MAX / kClasses.size[c] + 1;
  for (size_t c = kNumSmall; c < kNumClasses; c++) t.m[c] = 1;
  return t;
}
}  // namespace detail
inline constexpr detail::OffsetMagic kOffsetMagic = detail::make_offset_magic();
DUCTILE_ALWAYS_INLINE bool is_object_offset(uint32_t offset, size_t cls) {
  const uint64_t m = kOffsetMagic.m[cls];
  return uint64_t{offset} * m < m;
}
DUCTILE_ALWAYS_INLINE bool is_small_class(size_t cls) { return cls < kNumSmall; }

}  // namespace ductile::small
