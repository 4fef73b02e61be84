// SPDX-License-Identifier: BSD-2-Clause
// The size classes (small/size_classes.h): the smallest class for each size, four per doubling,
// slab waste, and object offsets by multiply.
#include <gtest/gtest.h>

#include "small/size_classes.h"

namespace ductile {
namespace {

using namespace small;

TEST(SizeClasses, EverySizeMapsToTheSmallestClassThatHoldsIt) {
  // Every size the two tables cover, then the formula's range in odd steps.
  for (size_t s = 0; s <= kMaxClassSize; s += (s <= kMaxCoarseSize + 1 ? 1 : 61)) {
    size_t c = class_of(s);
    ASSERT_LT(c, kNumClasses);
    ASSERT_GE(class_size(c), s) << s;
    if (c > 0) {
      ASSERT_LT(class_size(c - 1), s == 0 ? 1 : s) << s;
    }
  }
  EXPECT_EQ(class_size(class_of(0)), 8u);
  EXPECT_EQ(class_size(class_of(8)), 8u);  // the 8-byte class costs 8 bytes
  EXPECT_EQ(class_size(class_of(9)), 16u);
  EXPECT_EQ(class_size(class_of(24)), 32u);
  EXPECT_EQ(class_size(class_of(72)), 80u);    // 16-byte steps up to 256 bytes
  EXPECT_EQ(class_size(class_of(200)), 208u);
  EXPECT_EQ(class_size(class_of(256)), 256u);
  EXPECT_EQ(class_size(class_of(257)), 320u);  // then four per doubling
  EXPECT_EQ(class_size(kNumClasses - 1), kMaxClassSize);
  EXPECT_EQ(kNumClasses, 1 + 16 + 4 * 14u);  // 8; 16..256; 14 doublings to 4 MiB
}

TEST(SizeClasses, AboutFourPerDoubling) {
  for (size_t c = class_of(kMaxFine); c + 4 < kNumClasses; c++)
    EXPECT_EQ(class_size(c + 4), 2 * class_size(c)) << c;
}

TEST(SizeClasses, SlabsWasteUnderTwoPercent) {
  for (size_t c = 0; c < kNumSmall; c++) {
    size_t bytes = kClasses.slab_pages[c] * kPage;
    size_t used = size_t{kClasses.objects_per_slab[c]} * class_size(c);
    EXPECT_LE(used, bytes);
    EXPECT_LT((bytes - used) * 50, bytes) << class_size(c);
  }
  for (size_t c = kNumSmall; c < kNumClasses; c++) EXPECT_TRUE(is_aligned(class_size(c), kPage));
}

// Hardened mode's inline free tells an object's start from an interior
// pointer by a multiply (is_object_offset): every offset of every slab,
// against the division.
TEST(SizeClasses, ObjectOffsetsByMultiplyAgreeWithTheDivision) {
  for (size_t c = 0; c < kNumSmall; c++) {
    const uint32_t bytes = static_cast<uint32_t>(kClasses.slab_pages[c] * kPage);
    for (uint32_t n = 0; n < bytes; n++)
      ASSERT_EQ(is_object_offset(n, c), n % class_size(c) == 0) << "class " << class_size(c) << " offset " << n;
  }
  // A medium block's tagged first page: its start alone.
  for (size_t c = kNumSmall; c < kNumClasses; c++)
    for (uint32_t n = 0; n < kPage; n++) ASSERT_EQ(is_object_offset(n, c), n == 0) << "class " << class_size(c);
}

}  // namespace
}  // namespace ductile
