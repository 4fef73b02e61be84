// SPDX-License-Identifier: BSD-2-Clause
// Allocation through the whole allocator (core/alloc.cc): every size class, zero and impossible
// sizes, calloc's zeroes, and aligned allocation.
//
// This program links the library's objects, so ductile is also the allocator of the
// test process itself.
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <vector>

#include <gtest/gtest.h>

#include "core/runtime.h"
#include "ductile/ductile.h"
#include "small/size_classes.h"
#include "support/patterns.h"
#include "support/sizes.h"

namespace ductile {
namespace {

using small::class_of;
using small::class_size;
using test::check;
using test::fill;

size_t natural_alignment(size_t size) {
  size_t low = size & (~size + 1);  // lowest set bit
  return low < alignof(max_align_t) ? low : alignof(max_align_t);
}

TEST(Malloc, EverySizeClassRoundTrips) {
  std::vector<std::pair<void*, size_t>> live;
  for (size_t c = 0; c < small::kNumClasses; c++) {
    size_t hi = class_size(c);
    size_t lo = c == 0 ? 1 : class_size(c - 1) + 1;
    if (hi >= core::rt().huge.options().threshold) break;
    for (size_t size : {lo, hi}) {
      void* p = ductile_malloc(size);
      ASSERT_NE(p, nullptr) << size;
      // A hardened build: the request is the usable size, and the block's
      // class the one of the request with its seal (small/seal.h).
      const size_t block = class_size(test::class_of_request(size));
      EXPECT_EQ(ductile_malloc_usable_size(p), kHardened ? size : hi) << size;
      EXPECT_TRUE(is_aligned(addr(p), natural_alignment(block))) << size;
      fill(p, ductile_malloc_usable_size(p), static_cast<unsigned>(size));
      live.push_back({p, size});
    }
  }
  for (auto [p, size] : live) {
    EXPECT_TRUE(check(p, ductile_malloc_usable_size(p), static_cast<unsigned>(size))) << size;
    ductile_free(p);
  }
}

TEST(Malloc, ZeroSizeGivesAUniqueBlock) {
  void* a = ductile_malloc(0);
  void* b = ductile_malloc(0);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_NE(a, b);
  ductile_free(a);
  ductile_free(b);
}

TEST(Malloc, ImpossibleSizesFailWithEnomem) {
  for (size_t size : {SIZE_MAX, SIZE_MAX - kPage, static_cast<size_t>(PTRDIFF_MAX) + 1}) {
    errno = 0;
    EXPECT_EQ(ductile_malloc(size), nullptr);
    EXPECT_EQ(errno, ENOMEM);
  }
  errno = 0;
  EXPECT_EQ(ductile_calloc(SIZE_MAX / 2, 3), nullptr);
  EXPECT_EQ(errno, ENOMEM);
  void* p = ductile_malloc(16);
  errno = 0;
  EXPECT_EQ(ductile_reallocarray(p, SIZE_MAX / 4, 8), nullptr);
  EXPECT_EQ(errno, ENOMEM);
  ductile_free(p);
}

TEST(Calloc, ZeroesRecycledMemory) {
  for (size_t size : {24ul, 200ul, 5000ul, 100000ul, 3ul << 20}) {
    void* p = ductile_malloc(size);
    std::memset(p, 0xff, size);
    ductile_free(p);
    auto* q = static_cast<unsigned char*>(ductile_calloc(1, size));
    ASSERT_NE(q, nullptr);
    for (size_t i = 0; i < size; i++) ASSERT_EQ(q[i], 0) << size << " at " << i;
    ductile_free(q);
  }
}

TEST(Aligned, EveryPowerOfTwoUpTo64MiB) {
  for (size_t align = 1; align <= (size_t{64} << 20); align <<= 1) {
    for (size_t size : {1ul, 8ul, 100ul, 4096ul, 70000ul, 3ul << 20}) {
      void* p = ductile_aligned_alloc(align, size);
      ASSERT_NE(p, nullptr) << align << " " << size;
      EXPECT_TRUE(is_aligned(addr(p), align)) << align << " " << size;
      EXPECT_GE(ductile_malloc_usable_size(p), size);
      fill(p, size, 3);
      EXPECT_TRUE(check(p, size, 3));
      ductile_free(p);
      if (align >= sizeof(void*)) {
        void* q = nullptr;
        ASSERT_EQ(ductile_posix_memalign(&q, align, size), 0);
        EXPECT_TRUE(is_aligned(addr(q), align));
        ductile_free(q);
      }
    }
  }
}

TEST(Aligned, BadAlignmentsAreRefused) {
  void* q = reinterpret_cast<void*>(1);
  EXPECT_EQ(ductile_posix_memalign(&q, 24, 8), EINVAL);
  EXPECT_EQ(ductile_posix_memalign(&q, 4, 8), EINVAL);  // not a multiple of sizeof(void*)
  EXPECT_EQ(ductile_posix_memalign(&q, 0, 8), EINVAL);
  EXPECT_EQ(q, reinterpret_cast<void*>(1));  // untouched on error
  errno = 0;
  EXPECT_EQ(ductile_aligned_alloc(24, 48), nullptr);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(ductile_posix_memalign(&q, 64, SIZE_MAX - 10), ENOMEM);
  // memalign rounds a non-power-of-two alignment up, as glibc does.
  void* m = ductile_memalign(24, 10);
  ASSERT_NE(m, nullptr);
  EXPECT_TRUE(is_aligned(addr(m), 32));
  ductile_free(m);
}

TEST(Aligned, VallocAndPvalloc) {
  void* v = ductile_valloc(10);
  EXPECT_TRUE(is_aligned(addr(v), kPage));
  void* pv = ductile_pvalloc(kPage + 1);
  EXPECT_TRUE(is_aligned(addr(pv), kPage));
  EXPECT_GE(ductile_malloc_usable_size(pv), 2 * kPage);
  void* pz = ductile_pvalloc(0);
  EXPECT_GE(ductile_malloc_usable_size(pz), kPage);
  ductile_free(v);
  ductile_free(pv);
  ductile_free(pz);
}

}  // namespace
}  // namespace ductile
