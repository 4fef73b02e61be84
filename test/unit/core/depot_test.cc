// SPDX-License-Identifier: BSD-2-Clause
// The medium depot (core/depot.cc): a batch of medium blocks beyond a thread cache's room
// passes through it, not the chunk layer; it is bounded; a second free of a block lying
// there is caught; what lies there untouched for a step goes back, and trim takes all.
//
// This program links the library's objects, so ductile is also the allocator of the
// test process itself.
#include <algorithm>
#include <cstring>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "core/depot.h"
#include "core/runtime.h"
#include "ductile/ductile.h"
#include "small/size_classes.h"
#include "support/sizes.h"

namespace ductile {
namespace {

using small::class_of;

constexpr size_t kSize = 24 * 1024;  // a medium class with a depot, 8 or 16 per cache
// The request for a block of kSize (a hardened build's, less its seal:
// small/seal.h), and for a 64 KiB one.
constexpr size_t kAsk = test::request_for_block(kSize);
constexpr size_t kAsk64 = test::request_for_block(64 * 1024);

// Runs f in a thread of its own, with the decay time long enough that no
// background step comes due meanwhile (it would empty the depot).
template <typename F>
void quietly(F f) {
  const uint64_t decay = core::rt().chunks.options().decay_ns;
  core::rt().chunks.set_decay_ns(uint64_t{3600} * 1000000000);
  (void)core::depot_step(true);  // start empty
  ductile_free(ductile_malloc(64));  // this thread's cache: f's thread is a second one
  std::thread t(f);
  t.join();
  core::rt().chunks.set_decay_ns(decay);
}

std::vector<void*> take(size_t n, size_t size = kAsk) {
  std::vector<void*> v;
  for (size_t i = 0; i < n; i++) {
    v.push_back(ductile_malloc(size));
    EXPECT_NE(v.back(), nullptr);
    std::memset(v.back(), static_cast<int>(i), size);
  }
  return v;
}

// The blocks of kSize that the calling thread's cache holds (made now if
// it has none): 16 in a thread made once the process has had two threads
// with caches, 8 before.
size_t kept() {
  ductile_free(ductile_malloc(kAsk));
  return core::own_cache()->bins[class_of(kSize)].limit;
}

// Batches of n blocks taken and freed again, until the depot holds what
// the class is seen to need.
void in_demand(size_t n, size_t size = kAsk) {
  for (int round = 0; round < 20; round++)
    for (void* p : take(n, size)) ductile_free(p);
}

// Freeing 16 blocks of 24 KiB past a full cache at once (a batch, or a
// thread's exit) and taking them again made 16 chunk-layer frees and 16
// allocations, about 1 900 instructions each; through the depot it makes
// none. (The process has two threads with caches: this one's and the main
// thread's; this one's, made after both, holds 16 of them, not 8.)
TEST(Depot, ABatchBeyondTheCachePassesThroughTheDepot) {
  ASSERT_TRUE(core::ensure_ready());
  ASSERT_EQ(small::cache_cap(class_of(kSize)), 8u);
  quietly([] {
    EXPECT_EQ(kept(), 16u);  // this thread's cache is made: a second one
    ASSERT_TRUE(core::depot_holds(class_of(kSize)));
    in_demand(kept() + 16);
    std::vector<void*> v = take(kept() + 16);
    const chunk::ChunkStats before = core::rt().chunks.stats();
    for (void* p : v) ductile_free(p);
    EXPECT_EQ(core::depot_bytes(), 16 * kSize);
    for (void* p : v) EXPECT_NE(core::rt().chunks.lookup(p)->cached, 0u);  // still "in a cache"
    std::vector<void*> again = take(v.size());
    EXPECT_EQ(core::depot_bytes(), 0u);
    std::sort(v.begin(), v.end());
    std::sort(again.begin(), again.end());
    EXPECT_EQ(again, v);  // the same blocks
    const chunk::ChunkStats after = core::rt().chunks.stats();
    EXPECT_EQ(after.frees, before.frees);
    EXPECT_EQ(after.allocs, before.allocs);
    for (void* p : again) ductile_free(p);
  });
}

// A class's depot holds at most core::kDepotBytes (from 4 to kDepotSlots
// blocks), however much in demand; the rest goes back to the chunk layer as
// before.
TEST(Depot, HoldsABoundedNumberOfBlocksPerClass) {
  ASSERT_TRUE(core::ensure_ready());
  quietly([] {
    in_demand(200);
    ASSERT_GT(core::depot_bytes(), 0u);
    (void)core::depot_step(true);  // a period starts empty
    std::vector<void*> v = take(200);
    const uint64_t frees = core::rt().chunks.stats().frees;
    for (void* p : v) ductile_free(p);
    const size_t held = core::depot_bytes() / kSize;
    EXPECT_EQ(held, std::min(core::kDepotBytes / kSize, core::kDepotSlots));
    EXPECT_EQ(core::rt().chunks.stats().frees - frees, 200 - kept() - held);
    in_demand(30, kAsk64);  // the largest class with a depot: 16 blocks at most
    EXPECT_GT(core::depot_bytes(), held * kSize);
    EXPECT_LE(core::depot_bytes(), held * kSize + 16 * 64 * 1024);
    EXPECT_FALSE(core::depot_holds(class_of(80 * 1024)));
  });
  (void)core::depot_step(true);
}

// Blocks that lay at the bottom of a depot through a whole period (16 puts
// and takes) were not wanted: they go back to the chunk layer, so a class
// whose blocks are freed but not allocated again keeps them only briefly.
TEST(Depot, BlocksUntouchedThroughAPeriodGoBack) {
  ASSERT_TRUE(core::ensure_ready());
  quietly([] {
    in_demand(kept() + 8);
    (void)core::depot_step(true);  // a period starts empty
    std::vector<void*> v = take(kept() + 8);
    for (void* p : v) ductile_free(p);  // v[0..7] to the depot, the rest kept in the cache
    ASSERT_EQ(core::depot_bytes(), 8 * kSize);
    for (size_t i = 0; i < 8; i++) ASSERT_NE(core::rt().chunks.lookup(v[i])->cached, 0u);
    // Blocks made past the caches (a class's sink) and freed: 40 puts of
    // half a cache bin, and the depot never below its 8 first blocks
    // meanwhile. The first period had begun empty; the second began with
    // them.
    std::vector<void*> sink;
    for (size_t i = 0; i < 40 * (kept() / 2); i++) sink.push_back(ductile_mallocx(kAsk, MALLOCX_TCACHE_NONE));
    for (void* p : sink) ductile_free(p);
    for (size_t i = 0; i < 8; i++) {
      const chunk::Extent* e = core::rt().chunks.lookup(v[i]);
      EXPECT_TRUE(e == nullptr || e->state != chunk::ExtentState::kActive || e->cached == 0) << i;
    }
    EXPECT_LE(core::depot_bytes(), std::min(core::kDepotBytes / kSize, core::kDepotSlots) * kSize);
  });
}

// A process whose only thread has a cache keeps no depot: its freed blocks
// go back to the chunk layer, which reuses them for any size and grows
// their neighbours into them (a single-threaded compiler-like program
// peaked 4 % higher with a depot). The gate is the depot's switch, which a
// second thread's cache throws; here it is set back, as in a process that
// never had one, once this thread's cache is made.
TEST(Depot, NoneWhileOneThreadHasACache) {
  ASSERT_TRUE(core::ensure_ready());
  quietly([] {
    ductile_free(ductile_malloc(kAsk));  // this thread's cache first
    core::depot_enable(false);
    std::vector<void*> v = take(24);
    const uint64_t frees = core::rt().chunks.stats().frees;
    for (void* p : v) ductile_free(p);
    EXPECT_EQ(core::depot_bytes(), 0u);
    EXPECT_EQ(core::rt().chunks.stats().frees - frees, 24 - kept());
    core::depot_enable(true);
  });
}

// What lay in a depot untouched through a whole step goes back to the
// chunk layer (dirty: the step purges nothing); trim takes all at once.
TEST(Depot, AnIdleDepotGoesBackAtTheNextStepAndTrimEmptiesIt) {
  ASSERT_TRUE(core::ensure_ready());
  quietly([] {
    in_demand(kept() + 8);
    ASSERT_EQ(core::depot_bytes(), 8 * kSize);
    const uint64_t frees = core::rt().chunks.stats().frees;
    const uint64_t purged = core::rt().os.counters().purged_bytes.load();
    EXPECT_TRUE(core::depot_step(false));  // used since the last step: kept
    EXPECT_EQ(core::depot_bytes(), 8 * kSize);
    EXPECT_FALSE(core::depot_step(false));  // untouched for a step: given back
    EXPECT_EQ(core::depot_bytes(), 0u);
    EXPECT_EQ(core::rt().chunks.stats().frees - frees, 8u);
    EXPECT_EQ(core::rt().os.counters().purged_bytes.load(), purged);
    // Trim: at once, used or not.
    in_demand(kept() + 8);
    ASSERT_EQ(core::depot_bytes(), 8 * kSize);
    ductile_trim();
    EXPECT_EQ(core::depot_bytes(), 0u);
  });
}

// A block in the depot is still marked as lying in a cache: freeing it
// again is a double free, reported as such, in every build.
// (In the death test's child, on its one thread: ThreadSanitizer does not
// support starting threads after a threaded fork.)
void free_from_the_depot() {
  core::depot_enable();
  (void)core::depot_step(true);
  in_demand(40);
  std::vector<void*> v = take(40);
  for (void* p : v) ductile_free(p);
  if (core::depot_bytes() == 0) _exit(3);
  ductile_free(v[0]);  // the oldest: flushed, in the depot
  _exit(0);
}

TEST(Depot, ASecondFreeOfABlockLyingThereIsCaught) {
  ASSERT_TRUE(core::ensure_ready());
  EXPECT_DEATH(free_from_the_depot(), "double free detected");
}

}  // namespace
}  // namespace ductile
