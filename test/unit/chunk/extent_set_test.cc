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

// A set with buckets of its own, as the chunk layer gives each of its sets.
struct OwnSet {
  Extent* heads[ExtentSet::kBuckets];
  ExtentSet set{heads};
};

TEST(ExtentSet, FindsBestBucketThenNewest) {
  OwnSet own;
  ExtentSet& set = own.set;
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
  OwnSet own;
  ExtentSet& set = own.set;
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
  OwnSet own;
  ExtentSet& set = own.set;
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
  OwnSet empty;
  EXPECT_EQ(empty.set.largest(out, 4), 0u);
}

// The buckets' heads are cleared by the set, unless they hold zeroes already
// (the runtime's static storage): then it writes none of them, so that they
// are not faulted in at start-up. (Marked here with a pattern, which a set
// would never read: each bucket is read only once it holds an extent.)
TEST(ExtentSet, HeadsThatHoldZeroesAlreadyAreNotWritten) {
  Extent* marked = reinterpret_cast<Extent*>(uintptr_t{0xa5a5a5a5a5a5a5a5});
  Extent* heads[ExtentSet::kBuckets];
  for (Extent*& h : heads) h = marked;
  {
    ExtentSet set(heads, /*heads_zeroed=*/true);
    Extent* out[1];
    EXPECT_EQ(set.find(kPage, kPage), nullptr);
    EXPECT_EQ(set.largest(out, 1), 0u);
    EXPECT_TRUE(set.empty());
  }
  for (Extent* h : heads) ASSERT_EQ(h, marked);
  ExtentSet cleared(heads);
  for (Extent* h : heads) ASSERT_EQ(h, nullptr);
  Extent e;
  e.base = 0x100000;
  e.size = 3 * kPage;
  cleared.insert(&e);
  EXPECT_EQ(cleared.find(kPage, kPage), &e);
}

}  // namespace
}  // namespace ductile
