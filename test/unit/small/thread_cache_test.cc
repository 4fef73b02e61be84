// SPDX-License-Identifier: BSD-2-Clause
// The thread cache's layout (small/thread_cache.h): each bin's slots in the one array.
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
    if (deeper) EXPECT_EQ(small::cache_cap(c), 8u) << size;
    EXPECT_LE(tc->bins[c].limit, small::cache_slots(c)) << size;
  }
}

}  // namespace
}  // namespace ductile
