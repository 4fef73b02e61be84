// SPDX-License-Identifier: BSD-2-Clause
// The thread cache's layout (small/thread_cache.h): each bin's slots in the one array,
// and a bin's ends (top, end) as its count and depth move.
#include <memory>

#include <gtest/gtest.h>

#include "small/size_classes.h"
#include "small/thread_cache.h"

namespace ductile {
namespace {

using namespace small;

// Each bin has its own slots, a medium block two (its address and extent).
TEST(ThreadCacheLayout, SlotsPartitionTheArray) {
  auto tc = std::make_unique<ThreadCache>();
  tc->init();
  size_t total = 0;
  for (size_t c = 0; c < kNumClasses; c++) {
    EXPECT_EQ(tc->bins[c].items, &tc->slots[total]);
    EXPECT_GE(small::cache_cap(c), 1u);
    EXPECT_LE(small::cache_cap(c), small::cache_slots(c));
    EXPECT_EQ(tc->bins[c].limit, small::cache_cap(c));
    total += small::cache_slots(c) * (is_small_class(c) ? 1 : 2);
    if (!is_small_class(c)) {
      const size_t last = small::cache_slots(c) - 1u;
      EXPECT_EQ(&small::medium_block(tc->bins[c], last), &tc->slots[total - 2]);
      EXPECT_EQ(&small::medium_block_extent(tc->bins[c], last), &tc->slots[total - 1]);
    }
  }
  EXPECT_EQ(total, kCacheSlots);
}

// A cache made once the process has had two threads with caches holds 16
// blocks of each medium class up to 32 KiB, where the first thread's holds
// 8; every other bin keeps its depth.
TEST(ThreadCacheLayout, ThreadedMediumBinsHoldTwiceAsMany) {
  auto tc = std::make_unique<ThreadCache>();
  tc->init();
  tc->deepen_medium();
  for (size_t c = 0; c < kNumClasses; c++) {
    const size_t size = kClasses.size[c];
    const bool deeper = size > kMaxSmall && size <= 32 * 1024;
    EXPECT_EQ(tc->bins[c].limit, deeper ? 2u * small::cache_cap(c) : small::cache_cap(c)) << size;
    if (deeper) {
      EXPECT_EQ(small::cache_cap(c), 8u) << size;
    }
    EXPECT_LE(tc->bins[c].limit, small::cache_slots(c)) << size;
    // The end follows: a free finds room up to the new depth.
    EXPECT_EQ(tc->bins[c].end, tc->bins[c].items + tc->bins[c].limit * (is_small_class(c) ? 1 : 2)) << size;
  }
}

// A bin's count is where its top is, in blocks; it has room until top
// reaches the end its depth sets; a medium block takes two slots.
TEST(CacheBinEnds, CountAndRoomFollowTheTop) {
  auto tc = std::make_unique<ThreadCache>();
  tc->init();
  for (size_t c : {size_t{0}, kNumSmall}) {
    CacheBin& b = tc->bins[c];
    const size_t width = is_small_class(c) ? 1 : 2;
    EXPECT_TRUE(b.empty());
    EXPECT_EQ(b.count(), 0u);
    EXPECT_EQ(b.top, b.items);
    for (uint32_t i = 0; i < b.limit; i++) {
      EXPECT_TRUE(b.has_room()) << c << " " << i;
      b.top += width;
      EXPECT_EQ(b.count(), i + 1) << c;
    }
    EXPECT_FALSE(b.has_room()) << c;
    EXPECT_FALSE(b.empty());
    b.set_count(1);
    EXPECT_EQ(b.top, b.items + width);
    EXPECT_TRUE(b.has_room());
    b.set_limit(1);
    EXPECT_FALSE(b.has_room()) << c;
    b.set_count(0);
    EXPECT_TRUE(b.empty());
  }
}

// A bin whose slots move (a grown bin's, core/cache.cc) keeps its count and
// its depth, now counted from the new slots.
TEST(CacheBinEnds, MovedSlotsKeepCountAndDepth) {
  auto tc = std::make_unique<ThreadCache>();
  tc->init();
  CacheBin& b = tc->bins[0];
  void* more[4 * 128];
  b.set_count(5);
  b.move_to(more);
  EXPECT_EQ(b.items, more);
  EXPECT_EQ(b.count(), 5u);
  EXPECT_EQ(b.top, more + 5);
  EXPECT_EQ(b.end, more + b.limit);
  b.set_limit(2 * b.limit);
  EXPECT_EQ(b.end, more + b.limit);
}

}  // namespace
}  // namespace ductile
