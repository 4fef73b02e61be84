// SPDX-License-Identifier: BSD-2-Clause
// Stress through the whole allocator (a cross-cutting suite, kept by its concern under core/):
// many threads on few cores, and forks while other threads are inside the allocator.
//
// This program links the library's objects, so ductile is also the allocator of the
// test process itself.
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "core/runtime.h"
#include "ductile/ductile.h"
#include "small/size_classes.h"
#include "support/maps.h"
#include "support/patterns.h"

namespace ductile {
namespace {

using test::check;
using test::fill;

size_t read_size(const char* name);

// ---- stress, bounded in time -------------------------------------------

// 32 threads on two cores (pinned, where the machine has them): every block
// is handed through shared slots to whichever thread takes it next, which
// checks its bytes and frees it, so nearly every free is cross-thread and
// threads are preempted in the middle of allocator calls. A block carries a
// seed in its first word and the seed's pattern over up to 4 KiB: a block
// handed to two owners, reused while live, or written by the allocator
// shows up as a wrong pattern.
TEST(Stress, ThirtyTwoThreadsOnTwoCoresFreeEachOthersBlocks) {
  constexpr int kThreads = 32;
  constexpr int kSlots = 1024;
  constexpr int kOps = 12000;
  cpu_set_t two;
  CPU_ZERO(&two);
  cpu_set_t mine;
  ASSERT_EQ(sched_getaffinity(0, sizeof mine, &mine), 0);
  for (int c = 0, n = 0; c < CPU_SETSIZE && n < 2; c++)
    if (CPU_ISSET(c, &mine)) CPU_SET(c, &two), n++;
  std::vector<std::atomic<void*>> slots(kSlots);
  std::atomic<long> bad{0}, frees{0};
  auto pattern_len = [](size_t size) { return (size < 4096 ? size : 4096) - sizeof(uint64_t); };
  std::vector<std::thread> ts;
  for (int t = 0; t < kThreads; t++) {
    ts.emplace_back([&, t] {
      (void)pthread_setaffinity_np(pthread_self(), sizeof two, &two);
      uint64_t x = 0x9e3779b97f4a7c15ull * (t + 1);
      auto next = [&] { return x ^= x << 13, x ^= x >> 7, x ^= x << 17; };
      for (int i = 0; i < kOps; i++) {
        const int k = static_cast<int>(next() % kSlots);
        if (void* old = slots[k].exchange(nullptr, std::memory_order_acq_rel)) {
          uint64_t seed;
          std::memcpy(&seed, old, sizeof seed);
          const size_t size = seed >> 32;
          if (!check(static_cast<char*>(old) + 8, pattern_len(size), static_cast<unsigned>(seed))) bad++;
          ductile_free(old);
          frees++;
        }
        const uint64_t r = next() % 1000;
        const size_t size = r < 800 ? 8 + next() % 256 : r < 995 ? 257 + next() % 60000 : 60000 + next() % 3000000;
        void* p = ductile_malloc(size);
        if (p == nullptr) {
          bad++;
          continue;
        }
        const uint64_t seed = (uint64_t{size} << 32) | static_cast<uint32_t>(next());
        std::memcpy(p, &seed, sizeof seed);
        fill(static_cast<char*>(p) + 8, pattern_len(size), static_cast<unsigned>(seed));
        void* empty = nullptr;
        if (!slots[next() % kSlots].compare_exchange_strong(empty, p, std::memory_order_acq_rel)) ductile_free(p);
      }
    });
  }
  for (auto& th : ts) th.join();
  for (auto& slot : slots) ductile_free(slot.load());
  EXPECT_EQ(bad.load(), 0);
  EXPECT_GT(frees.load(), kThreads * kOps / 4);  // most blocks went through another thread
}

// 10 000 threads that live for a few allocations each, eight at a time:
// their caches and the slabs they filled must come back, so the resident
// set after 10 000 is what it was after the first 1 000 (give or take the
// noise of a busy heap), and so are ductile's active bytes.
TEST(Stress, TenThousandShortLivedThreadsKeepTheHeapBounded) {
  constexpr int kThreads = 10000;
  constexpr int kAtOnce = 8;
  auto generation = [] {
    std::vector<void*> v;
    for (int i = 0; i < 64; i++) {
      void* p = ductile_malloc(16 + i * 61);
      std::memset(p, i, 16 + i * 61);
      v.push_back(p);
    }
    ductile_free(ductile_malloc(100000));  // a medium block in the cache too
    for (size_t i = 0; i < v.size(); i += 2) ductile_free(v[i]);
    for (size_t i = 1; i < v.size(); i += 2) ductile_free(v[i]);
  };
  long rss_at_1000 = 0;
  size_t active_at_1000 = 0;
  for (int done = 0; done < kThreads; done += kAtOnce) {
    std::thread ts[kAtOnce];
    for (auto& t : ts) t = std::thread(generation);
    for (auto& t : ts) t.join();
    if (done + kAtOnce == 1000) {
      // What decay would give back later is not what this counts: retained
      // pages go first, here and at the end.
      (void)ductile_trim();
      rss_at_1000 = test::resident_pages();
      active_at_1000 = read_size("stats.active");
    }
  }
  (void)ductile_trim();
  const long rss = test::resident_pages();
  const size_t active = read_size("stats.active");
  ASSERT_GT(rss_at_1000, 0);
  EXPECT_LT(rss, rss_at_1000 + 2048) << "resident pages grew with the thread count";  // 8 MiB of slack
  EXPECT_LT(active, active_at_1000 + (8 << 20)) << "active bytes grew with the thread count";
}

// 500 forks while four threads allocate and free: no fork may deadlock
// (a watchdog alarm in each child, and one in this process, turn a hang
// into a failure), and every child can allocate.
TEST(Stress, FiveHundredForksWhileFourThreadsAllocate) {
  struct sigaction sa = {};
  sa.sa_handler = [](int) {
    static const char msg[] = "FiveHundredForks: deadlocked (watchdog)\n";
    (void)!write(2, msg, sizeof msg - 1);
    _exit(1);
  };
  struct sigaction old;
  ASSERT_EQ(sigaction(SIGALRM, &sa, &old), 0);
  alarm(120);
  std::atomic<bool> stop{false};
  std::vector<std::thread> ts;
  for (int t = 0; t < 4; t++) {
    ts.emplace_back([&, t] {
      // At the lowest priority: the children (at this thread's) then run
      // at once, and the test stays short on a busy machine.
      (void)setpriority(PRIO_PROCESS, static_cast<id_t>(gettid()), 19);
      std::vector<void*> v(256, nullptr);
      for (unsigned i = 0; !stop.load(std::memory_order_relaxed); i++) {
        void*& slot = v[(i * 7 + t) % v.size()];
        ductile_free(slot);
        const unsigned r = i * 2654435761u >> 22;
        slot = ductile_malloc(r < 900 ? 16 + r : r < 1020 ? 20000 + r * 100 : (2 << 20) + r);
      }
      for (void* p : v) ductile_free(p);
    });
  }
  int failed = 0;
  for (int round = 0; round < 500 && failed < 3; round++) {
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      alarm(20);
      void* a = ductile_malloc(24);
      void* b = ductile_malloc(50000);
      void* c = ductile_malloc(3 << 20);
      const bool ok = a && b && c;
      ductile_free(a);
      ductile_free(b);
      ductile_free(c);
      _exit(ok ? 0 : 1);
    }
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    if (!(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
      failed++;
      ADD_FAILURE() << "child " << round << (WIFSIGNALED(status) ? " killed by signal " : " exited ")
                    << (WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
    }
  }
  stop = true;
  for (auto& th : ts) th.join();
  alarm(0);
  sigaction(SIGALRM, &old, nullptr);
}

// What a quiescent heap must satisfy: every byte the chunk layer reserved
// is in an extent it knows (nothing is in a purge batch), the slab arena has
// no purge job running, and every slab it lent is held by a bin. Empty when
// it holds, else what does not.
std::string heap_inconsistency() {
  std::string why;
  chunk::ChunkStats c = core::rt().chunks.stats();
  if (c.purging != 0) why += "chunk extents left in a purge batch; ";
  if (c.reserved != c.active + c.dirty + c.clean)
    why += "chunk reserved " + std::to_string(c.reserved) + " != active+dirty+clean " +
           std::to_string(c.active + c.dirty + c.clean) + "; ";
  small::ArenaStats a = core::rt().arena.stats();
  if (a.purging != 0) why += "slab arena purge job left running; ";
  size_t slabs = 0;
  for (size_t cls = 0; cls < small::kNumSmall; cls++) slabs += core::rt().class_stats(cls).slabs;
  if (a.lends - a.returns != slabs)
    why += "slabs lent " + std::to_string(a.lends - a.returns) + " != held by bins " + std::to_string(slabs) + "; ";
  return why;
}

size_t read_size(const char* name) {
  size_t v = 0, len = sizeof v;
  EXPECT_EQ(ductile_mallctl(name, &v, &len, nullptr, 0), 0) << name;
  return v;
}

int write_decay(uint64_t ms) { return ductile_mallctl("opt.decay_ms", nullptr, nullptr, &ms, sizeof ms); }

// Other threads keep the allocator's slow paths busy -- purges of every
// layer (arena.<i>.purge), option writes under the options lock, huge
// blocks moved by mremap, slabs emptied and released -- while this thread
// forks. Each child must find the heap consistent (nothing left in flight
// by a thread it does not have) and must allocate, free, purge and write an
// option without deadlock: a watchdog alarm kills a child that hangs.
TEST(Fork, NothingInFlightIsLostInTheChild) {
  const uint64_t decay_before = read_size("opt.decay_ms");
  std::atomic<bool> stop{false};
  std::vector<std::thread> ts;
  ts.emplace_back([&] {
    while (!stop.load(std::memory_order_relaxed)) (void)ductile_mallctl("arena.0.purge", nullptr, nullptr, nullptr, 0);
  });
  ts.emplace_back([&] {
    for (uint64_t i = 0; !stop.load(std::memory_order_relaxed); i++) (void)write_decay(i % 2 ? 0 : 10000);
  });
  ts.emplace_back([&] {
    void* a = nullptr;
    void* b = nullptr;
    while (!stop.load(std::memory_order_relaxed)) {
      // Two huge blocks growing in turn: each is in the other's way, so they move.
      for (size_t size = 2 << 20; size <= (32 << 20) && !stop.load(std::memory_order_relaxed); size *= 2) {
        a = ductile_realloc(a, size);
        b = ductile_realloc(b, size);
        ASSERT_TRUE(a && b);
        static_cast<char*>(a)[size - 1] = 1;
        static_cast<char*>(b)[size - 1] = 1;
      }
      ductile_free(a);
      ductile_free(b);
      a = b = nullptr;
    }
  });
  ts.emplace_back([&] {
    std::vector<void*> v(4096);
    for (unsigned round = 0; !stop.load(std::memory_order_relaxed); round++) {
      // Fill slabs and empty them again: empty slabs go back to the arena.
      const size_t size = 16 + (round % 32) * 48;
      for (void*& p : v) p = ductile_malloc(size);
      for (void* p : v) ductile_free(p);
      ductile_mallctl("thread.tcache.flush", nullptr, nullptr, nullptr, 0);
    }
  });
  int bad = 0;
  for (int round = 0; round < 25 && bad < 3; round++) {
    usleep(2000);
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      alarm(20);  // a deadlock fails the test instead of hanging it
      std::string why = heap_inconsistency();
      for (size_t size : {8ul, 1000ul, 50000ul, 3ul << 20}) {
        void* p = ductile_malloc(size);
        if (p == nullptr) why += "malloc failed; ";
        else std::memset(p, 1, size);
        ductile_free(p);
      }
      if (write_decay(5000) != 0) why += "opt.decay_ms write failed; ";
      (void)ductile_mallctl("arena.0.purge", nullptr, nullptr, nullptr, 0);
      std::thread t([] { ductile_free(ductile_malloc(100)); });
      t.join();
      if (!why.empty()) {
        fprintf(stderr, "child: %s\n", why.c_str());
        _exit(1);
      }
      _exit(0);
    }
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    const bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    EXPECT_TRUE(ok) << "round " << round << (WIFSIGNALED(status) ? ": killed by signal " + std::to_string(WTERMSIG(status)) : "");
    bad += !ok;
  }
  stop = true;
  for (auto& t : ts) t.join();
  EXPECT_EQ(write_decay(decay_before), 0);
  EXPECT_EQ(heap_inconsistency(), "");
}

}  // namespace
}  // namespace ductile
