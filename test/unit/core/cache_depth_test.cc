// SPDX-License-Identifier: BSD-2-Clause
// A small class's cache bin grows while it bounces and goes back to its base
// depth at a slower pace (small::kDepthGrowth, core/cache.cc: adapt_depth):
// a batch of a few hundred blocks stays in the cache whole, a random mix of
// allocations and frees keeps the base depth, the growth stays within the
// thread's budget, and a record made again starts at its base depth.
//
// Each test runs in a thread of its own, with a cache made for it (no parked
// one adopted), and reads that cache's bins. A --disable-stats build keeps
// every bin at its base depth (no count of the thread's calls to pace the
// growth by): the first test checks that, the others are about the growth. The requests fill their
// classes' blocks (less the seal in a hardened build: test/support/sizes.h).
#include <cstdint>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "core/cache.h"
#include "core/runtime.h"
#include "ductile/ductile.h"
#include "small/size_classes.h"
#include "small/thread_cache.h"
#include "support/sizes.h"

namespace ductile {
namespace {

using small::cache_cap;
using small::class_of;

// Runs f in a new thread with a new cache.
template <typename F>
void in_new_thread(F f) {
  (void)core::retire_parked(true);
  std::thread(f).join();
}

// Allocates n blocks of size, writes them, checks that none was handed out
// twice (each keeps what was written), frees them in reverse.
void batch(size_t size, size_t n) {
  std::vector<void*> p(n);
  for (size_t i = 0; i < n; i++) {
    p[i] = ductile_malloc(size);
    ASSERT_NE(p[i], nullptr);
    std::memset(p[i], static_cast<int>(i), size);
  }
  for (size_t i = 0; i < n; i++) {
    const unsigned char* q = static_cast<unsigned char*>(p[i]);
    ASSERT_TRUE(q[0] == static_cast<unsigned char>(i) && q[size - 1] == static_cast<unsigned char>(i)) << i;
  }
  for (size_t i = n; i-- > 0;) ductile_free(p[i]);
}

size_t free_in_bin(const small::ThreadCache* tc, size_t cls) {
  return core::rt().bins[tc->bin_set][cls].stats().free_objects;
}

// The bytes past their base depths that the thread's small bins may hold.
size_t grown_bytes(const small::ThreadCache* tc) {
  size_t n = 0;
  for (size_t c = 0; c < small::kNumSmall; c++) n += (tc->bins[c].limit - cache_cap(c)) * small::class_size(c);
  return n;
}

// 300 blocks of 64 B, where a bin holds 128: after a few batches the bin
// holds the whole batch, and a batch takes nothing from the bin's slabs and
// gives nothing back.
TEST(CacheDepth, ABatchThatEmptiesAndRefillsTheBinGrowsIt) {
  constexpr size_t kBatch = 300;
  const size_t cls = class_of(64);
  const size_t size = test::request_of_class(cls);
  ASSERT_LT(cache_cap(cls), kBatch);
  ASSERT_GE(cache_cap(cls) * small::kDepthGrowth, kBatch);
  in_new_thread([&] {
    for (int round = 0; round < 8; round++) batch(size, kBatch);
    small::ThreadCache* tc = core::own_cache();
    ASSERT_NE(tc, nullptr);
    const small::CacheBin& b = tc->bins[cls];
    if (!kStats) {
      EXPECT_EQ(b.limit, cache_cap(cls));
      EXPECT_EQ(tc->deep_bytes, 0u);
      return;
    }
    EXPECT_GT(b.limit, kBatch);
    EXPECT_LE(b.limit, cache_cap(cls) * small::kDepthGrowth);
    EXPECT_EQ(tc->deep_bytes, grown_bytes(tc));
    const size_t before = free_in_bin(tc, cls);
    std::vector<void*> p(kBatch);
    for (void*& q : p) q = ductile_malloc(size);
    EXPECT_EQ(free_in_bin(tc, cls), before) << "the allocations filled the bin from its slabs";
    for (size_t i = kBatch; i-- > 0;) ductile_free(p[i]);
    EXPECT_EQ(free_in_bin(tc, cls), before) << "the frees flushed blocks back to the slabs";
  });
}

// Random allocations and frees of one size around a few hundred live blocks
// fill and flush the bin too, but at a random walk's pace: it keeps its base
// depth.
TEST(CacheDepth, ARandomMixKeepsTheBaseDepth) {
  const size_t cls = class_of(64);
  const size_t size = test::request_of_class(cls);
  in_new_thread([&] {
    std::mt19937 rng(7);
    std::vector<void*> live;
    uint32_t deepest = 0;
    for (int step = 0; step < 2000000; step++) {
      if (live.size() < 50 || (live.size() < 2000 && (rng() & 1) != 0)) {
        live.push_back(ductile_malloc(size));
      } else {
        std::swap(live[rng() % live.size()], live.back());
        ductile_free(live.back());
        live.pop_back();
      }
      deepest = std::max(deepest, core::own_cache()->bins[cls].limit);
    }
    for (void* q : live) ductile_free(q);
    EXPECT_EQ(deepest, cache_cap(cls));
  });
}

// Classes bounced in turn: each grows while it bounces; the thread's growth
// stays within kDepthBudget, the others' going back to make room for the
// latest; no bin grows past kDepthGrowth times its base depth; blocks of a
// bin that went back are still handed out right.
TEST(CacheDepth, GrowthStaysWithinTheThreadsBudget) {
  if (!kStats) GTEST_SKIP() << "--disable-stats: the bins keep their base depth";
  in_new_thread([&] {
    for (size_t size : {size_t{16}, size_t{1024}, size_t{4096}, size_t{16384}, size_t{64}}) {
      const size_t cls = class_of(size);
      const size_t n = cache_cap(cls) * small::kDepthGrowth - 1;
      for (int round = 0; round < 8; round++) batch(test::request_of_class(cls), n);
      small::ThreadCache* tc = core::own_cache();
      EXPECT_GT(tc->bins[cls].limit, cache_cap(cls)) << size;
      for (size_t c = 0; c < small::kNumSmall; c++) {
        EXPECT_GE(tc->bins[c].limit, cache_cap(c));
        EXPECT_LE(tc->bins[c].limit, cache_cap(c) * small::kDepthGrowth);
      }
      EXPECT_LE(grown_bytes(tc), small::kDepthBudget) << size;
      EXPECT_EQ(tc->deep_bytes, grown_bytes(tc)) << size;
    }
    // The 16 KiB class's growth (48 blocks: 768 KiB) left no room for the
    // 4 KiB class's (384 KiB).
    EXPECT_EQ(core::own_cache()->bins[class_of(4096)].limit, cache_cap(class_of(4096)));
    batch(test::request_of_class(class_of(4096)), 100);
  });
}

// A grown bin whose next fill comes after many bins' worth of other calls
// goes back to its base depth, giving back what it holds past half of it.
TEST(CacheDepth, ABinFilledAtASlowerPaceGoesBackToItsBaseDepth) {
  if (!kStats) GTEST_SKIP() << "--disable-stats: the bins keep their base depth";
  const size_t cls = class_of(64);
  const size_t size = test::request_of_class(cls);
  in_new_thread([&] {
    for (int round = 0; round < 8; round++) batch(size, 400);
    small::ThreadCache* tc = core::own_cache();
    ASSERT_GT(tc->bins[cls].limit, cache_cap(cls));
    for (int i = 0; i < 100000; i++) ductile_free(ductile_malloc(1024));  // other calls
    std::vector<void*> p(600);
    for (void*& q : p) q = ductile_malloc(size);  // empties the bin: a fill, at a slow pace
    EXPECT_EQ(tc->bins[cls].limit, cache_cap(cls));
    EXPECT_LE(tc->bins[cls].count(), cache_cap(cls));
    EXPECT_EQ(tc->deep_bytes, grown_bytes(tc));
    for (void* q : p) ductile_free(q);
  });
}

// A cache record that a thread grew, retired at trim and made again for
// another thread, starts at its base depth in its own slots.
TEST(CacheDepth, ARecordMadeAgainStartsAtItsBaseDepth) {
  if (!kStats) GTEST_SKIP() << "--disable-stats: the bins keep their base depth";
  const size_t cls = class_of(64);
  const size_t size = test::request_of_class(cls);
  small::ThreadCache* grown = nullptr;
  in_new_thread([&] {
    for (int round = 0; round < 8; round++) batch(size, 400);
    grown = core::own_cache();
    ASSERT_GT(grown->bins[cls].limit, cache_cap(cls));
  });
  in_new_thread([&] {
    ductile_free(ductile_malloc(size));
    small::ThreadCache* tc = core::own_cache();
    EXPECT_EQ(tc, grown) << "not the record made again";
    for (size_t c = 0; c < small::kNumSmall; c++) EXPECT_EQ(tc->bins[c].limit, cache_cap(c));
    EXPECT_EQ(tc->deep_bytes, 0u);
    EXPECT_GE(tc->bins[cls].items, &tc->slots[0]);
    EXPECT_LT(tc->bins[cls].items, &tc->slots[small::kCacheSlots]);
    batch(size, 400);
  });
}

}  // namespace
}  // namespace ductile
