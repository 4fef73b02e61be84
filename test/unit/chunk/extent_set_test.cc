// SPDX-License-Identifier: BSD-2-Clause
// The chunk layer's free sets (chunk/extent_set.cc): buckets, the best fit and then the newest,
// alignment, and the largest buckets first.
#include <gtest/gtest.h>

#include "chunk/extent_set.h"

namespace ductile {
namespace {

using chunk::Extent;
using chunk::ExtentSet;

TEST(ExtentSet, BucketsAreMonotoneAndFloorsConsistent) {
  size_t prev = 0;
  for (size_t pages = 1; pages < (size_t{1} << 20); pages += 1 + pages / 64) {
    size_t b = ExtentSet::bucket_of(pages);
    EXPECT_GE(b, prev);
    EXPECT_LE(ExtentSet::bucket_floor(b), pages);
    EXPECT_GT(ExtentSet::bucket_floor(b + 1), pages);
    prev = b;
  }
  EXPECT_LT(ExtentSet::bucket_of(size_t{1} << 36), ExtentSet::kBuckets);
}

TEST(ExtentSet, FindsBestBucketThenNewest) {
  ExtentSet set;
  Extent small, big1, big2;
  small.base = 0x100000;
  small.size = 2 * kPage;
  big1.base = 0x200000;
  big1.size = 40 * kPage;
  big2.base = 0x400000;
  big2.size = 40 * kPage;
  set.insert(&small);
  set.insert(&big1);
  set.insert(&big2);
  EXPECT_EQ(set.find(kPage, kPage), &small);
  EXPECT_EQ(set.find(3 * kPage, kPage), &big2);  // newest first within a bucket
  EXPECT_EQ(set.find(41 * kPage, kPage), nullptr);
  EXPECT_EQ(set.oldest(), &small);
  EXPECT_EQ(set.bytes(), 82 * kPage);
  set.remove(&big2);
  EXPECT_EQ(set.find(3 * kPage, kPage), &big1);
  EXPECT_EQ(set.count(), 2u);
}

TEST(ExtentSet, AlignmentIsPartOfTheFit) {
  ExtentSet set;
  Extent e;
  e.base = 0x201000;  // one page past a 2 MiB boundary
  e.size = 512 * kPage;
  set.insert(&e);
  EXPECT_EQ(set.find(511 * kPage, kHugePage), nullptr);
  Extent f;
  f.base = 0x401000;
  f.size = 1024 * kPage;
  set.insert(&f);
  EXPECT_EQ(set.find(511 * kPage, kHugePage), &f);
}

TEST(ExtentSet, LargestListsTheBiggestBucketsFirst) {
  ExtentSet set;
  Extent e[4];
  const size_t pages[4] = {3, 200, 40, 41};
  for (int i = 0; i < 4; i++) {
    e[i].base = 0x1000000 * (i + 1);
    e[i].size = pages[i] * kPage;
    set.insert(&e[i]);
  }
  Extent* out[4] = {};
  ASSERT_EQ(set.largest(out, 4), 4u);
  EXPECT_EQ(out[0], &e[1]);
  EXPECT_EQ(out[1], &e[3]);  // 40 and 41 pages share a bucket: newest first
  EXPECT_EQ(out[2], &e[2]);
  EXPECT_EQ(out[3], &e[0]);
  EXPECT_EQ(set.largest(out, 2), 2u);
  EXPECT_EQ(out[0], &e[1]);
  ExtentSet empty;
  EXPECT_EQ(empty.largest(out, 4), 0u);
}

}  // namespace
}  // namespace ductile
