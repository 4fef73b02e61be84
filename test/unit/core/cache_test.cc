// SPDX-License-Identifier: BSD-2-Clause
// Thread caches (core/cache.cc): no chunk-layer call for a cached block, medium bins, a thread's
// first free, threads without a cache, a thread's exit, and the caches it parks.
//
// This program links the library's objects, so ductile is also the allocator of the
// test process itself.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "core/depot.h"
#include "core/runtime.h"
#include "core/stats.h"
#include "ductile/ductile.h"
#include "small/size_classes.h"
#include "support/maps.h"
#include "support/patterns.h"
#include "support/sizes.h"

namespace ductile {
namespace {

using small::class_of;

class Hysteresis : public ::testing::TestWithParam<size_t> {};

TEST_P(Hysteresis, OneBlockAllocFreeMakesNoChunkOrOsCalls) {
  const size_t size = GetParam();
  for (int i = 0; i < 10; i++) ductile_free(ductile_malloc(size));  // warm-up
  chunk::ChunkStats before = core::rt().chunks.stats();
  uint64_t calls = core::rt().os.counters().total();
  for (int i = 0; i < 100000; i++) {
    void* p = ductile_malloc(size);
    static_cast<volatile char*>(p)[0] = 1;
    ductile_free(p);
  }
  chunk::ChunkStats after = core::rt().chunks.stats();
  EXPECT_EQ(after.allocs, before.allocs);
  EXPECT_EQ(after.frees, before.frees);
  EXPECT_EQ(core::rt().os.counters().total(), calls);
}

INSTANTIATE_TEST_SUITE_P(Sizes, Hysteresis, ::testing::Values(16, 4096, 65536, 1 << 20));

// A medium class's cache bin holds two blocks of 64 KiB: a third freed
// gives back the oldest (to the class's depot, where it still counts as
// cached), and the two kept come back newest first, each with its own
// extent (a bin keeps a block's address and extent side by side); then the
// one given back.
TEST(ThreadCache, AFullMediumBinGivesBackItsOldestBlock) {
  constexpr size_t kSize = 64 * 1024;
  const size_t ask = test::request_of_class(class_of(kSize));  // 64 KiB blocks
  ASSERT_EQ(small::cache_cap(class_of(kSize)), 2u);
  core::flush_thread_cache();
  core::depot_enable();  // as once a second thread has had a cache
  (void)core::depot_step(true);
  void* a = ductile_malloc(ask);
  void* b = ductile_malloc(ask);
  void* c = ductile_malloc(ask);
  ASSERT_TRUE(a && b && c);
  ductile_free(a);
  ductile_free(b);
  ductile_free(c);  // the bin was full: a goes to the depot
  EXPECT_NE(core::rt().chunks.lookup(a)->cached, 0u);
  EXPECT_EQ(core::depot_bytes(), kSize);
  EXPECT_NE(core::rt().chunks.lookup(b)->cached, 0u);
  EXPECT_NE(core::rt().chunks.lookup(c)->cached, 0u);
  void* x = ductile_malloc(ask);
  void* y = ductile_malloc(ask);
  EXPECT_EQ(x, c);
  EXPECT_EQ(y, b);
  EXPECT_EQ(core::rt().chunks.lookup(b)->cached, 0u);
  EXPECT_EQ(core::rt().chunks.lookup(c)->cached, 0u);
  void* z = ductile_malloc(ask);
  EXPECT_EQ(z, a);
  EXPECT_EQ(core::rt().chunks.lookup(a)->cached, 0u);
  std::memset(x, 1, ask);
  std::memset(y, 2, ask);
  std::memset(z, 3, ask);
  ductile_free(x);
  ductile_free(y);
  ductile_free(z);
}

// A thread that keeps a handful of blocks of each medium size up to 32 KiB
// (buffers of a request, say) cycles them through its cache: after the
// first round no allocation or free reaches the chunk layer and its lock,
// which the program's other threads want too.
TEST(ThreadCache, AHandfulOfSmallMediumBlocksStaysInTheCache) {
  constexpr int kBlocks = 8;
  for (size_t size : {20 * 1024, 32 * 1024}) {
    ASSERT_GE(small::cache_cap(class_of(size)), kBlocks) << size;
    (void)core::retire_parked(true);  // a cache of its own, not one an earlier thread parked
    std::thread worker([size] {
      void* p[kBlocks];
      uint64_t allocs = 0, frees = 0;
      for (int round = 0; round < 3; round++) {
        if (round == 1) {
          allocs = core::rt().chunks.stats().allocs;
          frees = core::rt().chunks.stats().frees;
        }
        for (void*& q : p) {
          q = ductile_malloc(size);
          ASSERT_NE(q, nullptr);
          std::memset(q, round, size);
        }
        for (void* q : p) ductile_free(q);
      }
      EXPECT_EQ(core::rt().chunks.stats().allocs, allocs) << size;
      EXPECT_EQ(core::rt().chunks.stats().frees, frees) << size;
    });
    worker.join();
  }
}

TEST(Threads, FirstFreeOfANewThreadIsNotReusedByIt) {
  // Passive false sharing: this thread allocates neighbouring blocks and
  // hands one to a new thread, which frees it and then allocates the same
  // size. It must not get the handed block back (that block's cache line is
  // shared with this thread's). Its second free goes to its own cache.
  void* mine = ductile_malloc(8);
  void* handed = ductile_malloc(8);
  void* got = nullptr;
  void* second = nullptr;
  void* again = nullptr;
  std::thread([&] {
    ductile_free(handed);
    got = ductile_malloc(8);
    second = ductile_malloc(8);
    ductile_free(second);
    again = ductile_malloc(8);
    ductile_free(again);
    ductile_free(got);
  }).join();
  EXPECT_NE(got, handed);
  EXPECT_NE(got, nullptr);
  EXPECT_EQ(again, second);
  ductile_free(mine);
}

// A thread without a cache reads core::no_cache(), whose bins are empty and
// without room, so that the inline malloc and free need no null test; it
// must stay all zero whatever such threads do: free first, allocate, exit,
// and allocate and free again from a key destructor after the cache is gone.
namespace {
pthread_key_t g_late_key;
std::atomic<int> g_late_rounds{0};
void late_destructor(void* v) {
  if (core::own_cache() != nullptr) {  // ductile's destructor has not run yet
    pthread_setspecific(g_late_key, v);
    return;
  }
  ductile_free(v);
  void* p = ductile_malloc(24);
  void* q = ductile_malloc(40000);
  ductile_free(p);
  ductile_free(q);
  g_late_rounds++;
}
bool all_zero(const unsigned char* p, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (p[i] != 0) return false;
  return true;
}
}  // namespace

TEST(Threads, TheCacheOfThreadsWithoutOneStaysEmpty) {
  g_late_rounds = 0;  // (--gtest_repeat)
  ASSERT_EQ(pthread_key_create(&g_late_key, late_destructor), 0);
  void* handed = ductile_malloc(16);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; t++) {
    threads.emplace_back([&, t] {
      EXPECT_EQ(core::t_cache, core::no_cache());
      if (t == 0) ductile_free(handed);  // a first free, before any cache
      pthread_setspecific(g_late_key, ductile_malloc(100));
      for (size_t size : {8, 100, 5000, 70000, 3 << 20}) {
        void* p = ductile_malloc(size);
        ASSERT_NE(p, nullptr);
        ductile_free(p);
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(g_late_rounds.load(), 4);
  EXPECT_TRUE(all_zero(core::g_no_cache, sizeof(core::g_no_cache)));
  pthread_key_delete(g_late_key);
}

TEST(Threads, ExitLeavesItsMemoryToDecay) {
  // A thread's exit is no sign that the process will not need the memory
  // again soon (the next thread usually does): the slabs it emptied stay in
  // their bins and its cached medium blocks go to the depot or back to the
  // chunk layer, all dirty, for the next user or for decay -- the exit
  // itself purges nothing.
  ASSERT_TRUE(core::ensure_ready());  // the runtime is made by ductile's first call
  const uint64_t decay = core::rt().chunks.options().decay_ns;
  core::rt().chunks.set_decay_ns(uint64_t{3600} * 1000000000);  // nothing comes due meanwhile
  const os::Counters& os = core::rt().os.counters();
  const uint64_t purged_before = os.purged_bytes.load();
  const uint64_t ranges_before = os.purged_ranges.load();
  const size_t cls = test::class_of_request(256);
  const size_t empty_before = core::rt().class_stats(cls).empty_slabs;
  constexpr size_t kMedium = 24 * 1024;
  void* m[2] = {};
  std::thread worker([&m] {
    std::vector<void*> v;
    for (int i = 0; i < 40000; i++) v.push_back(ductile_malloc(256));  // 10 MB
    for (void* p : v) ductile_free(p);
    m[0] = ductile_malloc(kMedium);
    m[1] = ductile_malloc(kMedium);
    std::memset(m[0], 1, kMedium);
    std::memset(m[1], 1, kMedium);
    ductile_free(m[0]);
    ductile_free(m[1]);  // in the thread's cache as it exits
  });
  worker.join();
  EXPECT_EQ(os.purged_bytes.load(), purged_before);
  EXPECT_EQ(os.purged_ranges.load(), ranges_before);
  // Its empty slabs wait in the bin (more than the one kept for hysteresis),
  // and its cached blocks in the chunk layer, free and still resident.
  EXPECT_GT(core::rt().class_stats(cls).empty_slabs, empty_before + small::Bin::kRetainEmpty);
  for (void* p : m) {
    const chunk::Extent* e = core::rt().chunks.lookup(p);
    // Not a block's any more, or lying in the depot.
    EXPECT_TRUE(e == nullptr || e->state != chunk::ExtentState::kActive || e->cached != 0);
    EXPECT_EQ(test::resident_pages(p, kMedium), kMedium / kPage);
  }
  // Trim purges all of it.
  const size_t slab = small::kClasses.slab_pages[cls] * kPage;
  ductile_trim();
  EXPECT_GE(os.purged_bytes.load() - purged_before, 40000u * 256 - slab + 2 * kMedium);
  EXPECT_LE(core::rt().class_stats(cls).empty_slabs, small::Bin::kRetainEmpty * core::rt().nbinsets);
  core::rt().chunks.set_decay_ns(decay);
}

// A thread that exits parks its cache, blocks and all, and the next thread
// that makes a cache adopts it: its first malloc is one of the blocks the
// exited thread freed, with no fill from the bins (short-threads: each new
// thread took every block from the bins, and the exit gave them back).
TEST(Threads, AnExitingThreadsCacheIsParkedForTheNextThread) {
  ASSERT_TRUE(core::ensure_ready());
  (void)core::retire_parked(true);
  const size_t cls = class_of(64);
  std::vector<void*> freed;
  std::thread a([&freed] {
    for (int i = 0; i < 16; i++) freed.push_back(ductile_malloc(64));
    for (void* p : freed) ductile_free(p);
  });
  a.join();
  EXPECT_EQ(core::parked_caches(), 1u);
  const size_t in_bins = core::rt().class_stats(cls).free_objects;
  void* got = nullptr;
  std::thread b([&got] {
    got = ductile_malloc(64);
    std::memset(got, 1, 64);
    ductile_free(got);
  });
  b.join();
  EXPECT_NE(std::find(freed.begin(), freed.end(), got), freed.end());
  EXPECT_EQ(core::rt().class_stats(cls).free_objects, in_bins);  // no fill, no flush
  EXPECT_EQ(core::parked_caches(), 1u);  // b's, the same record, parked again
  (void)core::retire_parked(true);
}

// What exiting threads leave parked is bounded: kMaxParked caches; the
// other exits give their blocks back as before. A parked cache that two
// background steps find parked goes back whole, as trim's does at once.
TEST(Threads, AtMostTwoCachesAreParkedAndStepsOrTrimRetireThem) {
  ASSERT_TRUE(core::ensure_ready());
  (void)core::retire_parked(true);
  constexpr int kThreads = 4;
  std::atomic<int> ready{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; t++) {
    threads.emplace_back([&ready] {
      std::vector<void*> v;
      for (int i = 0; i < 16; i++) v.push_back(ductile_malloc(96));
      for (void* p : v) ductile_free(p);
      ready++;
      while (ready.load() < kThreads) std::this_thread::yield();  // all alive at once
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(core::parked_caches(), core::kMaxParked);
  // Steps: the first sees them parked, the second retires them.
  const size_t cls = test::class_of_request(96);
  const size_t in_bins = core::rt().class_stats(cls).free_objects;
  EXPECT_TRUE(core::retire_parked(false));
  EXPECT_EQ(core::parked_caches(), core::kMaxParked);
  EXPECT_FALSE(core::retire_parked(false));
  EXPECT_EQ(core::parked_caches(), 0u);
  EXPECT_GE(core::rt().class_stats(cls).free_objects, in_bins + core::kMaxParked * 16);  // and their fills' rest
  // Trim: at once.
  std::thread c([] { ductile_free(ductile_malloc(96)); });
  c.join();
  EXPECT_EQ(core::parked_caches(), 1u);
  ductile_trim();
  EXPECT_EQ(core::parked_caches(), 0u);
}

// A forked child parks nothing of its parent's: those caches were other
// threads', whose state the child cannot trust. (The child starts no
// thread: ThreadSanitizer does not support that after a threaded fork.)
TEST(Threads, AForkedChildHasNoParkedCache) {
  ASSERT_TRUE(core::ensure_ready());
  (void)core::retire_parked(true);
  std::thread a([] { ductile_free(ductile_malloc(64)); });
  a.join();
  ASSERT_EQ(core::parked_caches(), 1u);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) _exit(core::parked_caches() == 0 ? 0 : 1);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  (void)core::retire_parked(true);
}

}  // namespace
}  // namespace ductile
