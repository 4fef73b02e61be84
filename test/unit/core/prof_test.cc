// SPDX-License-Identifier: BSD-2-Clause
// Sampled heap profiling (core/prof.cc) with profiling on: each block sampled and released,
// resizing, threads, the switches, reset, fork, and the sampling's arithmetic.
//
// The program runs itself again with DUCTILE_CONF set (the options are read once,
// at the first allocation, before main), sampling every allocation (lg_prof_sample:0)
// so that each check is exact. It links the library's objects, so ductile is the
// allocator of the whole test process.
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "core/prof.h"
#include "core/runtime.h"
#include "ductile/ductile.h"
#include "support/patterns.h"
#include "support/run_again.h"
#include "unit/core/prof_helpers.h"

namespace ductile {

std::string g_dir;  // where the dumps go (the prefix is g_dir + "/t")

namespace {

using test::check;
using test::ctl;
using test::fill;
using test::kMiB;
using test::totals;

// Every sample taken since `before` was released again, but for what the
// C library keeps of `threads` threads once they are gone (thread control
// blocks' TLS vectors, cached with the threads' stacks: at most two blocks
// of at most 2 KiB each).
void expect_released_since(const core::prof::Totals& before, size_t threads = 0) {
  const auto now = totals();
  EXPECT_GE(now.samples, before.samples);
  EXPECT_LE(now.samples, before.samples + 2 * threads);
  EXPECT_LE(now.sampled_bytes, before.sampled_bytes + 4096 * threads);
}

bool set_active(bool on) {
  bool old = false;
  size_t len = sizeof old;
  EXPECT_EQ(ductile_mallctl("prof.active", &old, &len, &on, sizeof on), 0);
  return old;
}

TEST(Prof, OptionsAreJemallocs) {
  EXPECT_TRUE(ctl<bool>("config.prof"));
  EXPECT_TRUE(ctl<bool>("opt.prof"));
  EXPECT_TRUE(ctl<bool>("opt.prof_active"));
  EXPECT_EQ(ctl<size_t>("opt.lg_prof_sample"), 0u);
  EXPECT_EQ(ctl<size_t>("prof.lg_sample"), 0u);
  EXPECT_EQ(std::string(ctl<const char*>("opt.prof_prefix")), g_dir + "/t");
  EXPECT_FALSE(ctl<bool>("opt.prof_final"));
  EXPECT_FALSE(ctl<bool>("opt.prof_leak"));
  EXPECT_TRUE(ctl<bool>("prof.active"));
  size_t lg = 3;
  EXPECT_EQ(ductile_mallctl("prof.lg_sample", nullptr, nullptr, &lg, sizeof lg), EPERM);
}

// At rate one every block is a sample of its usable size, released by free.
TEST(Prof, EachBlockIsSampledAndReleased) {
  const auto before = totals();
  void* p = ductile_malloc(100);
  ASSERT_NE(p, nullptr);
  auto now = totals();
  EXPECT_EQ(now.samples, before.samples + 1);
  EXPECT_EQ(now.sampled_bytes, before.sampled_bytes + 112);
  // As an unsampled block's (a hardened build's: the request, which the
  // block's seal keeps).
  const size_t usable = kHardened ? 100u : 112u;
  EXPECT_EQ(ductile_malloc_usable_size(p), usable);
  fill(p, usable, 7);
  ductile_free(p);
  now = totals();
  EXPECT_EQ(now.samples, before.samples);
  EXPECT_EQ(now.sampled_bytes, before.sampled_bytes);
}

// Sampled blocks are blocks of their own: every entry point still gives
// what it promises, and every way of freeing releases the sample.
TEST(Prof, SampledBlocksKeepEveryPromise) {
  const auto before = totals();
  const size_t sizes[] = {1, 16, 100, 1000, 4096, 14336, 16385, 20000, 100000, kMiB + 1, 2 * kMiB, 3 * kMiB + 5};
  for (size_t size : sizes) {
    void* p = ductile_malloc(size);
    ASSERT_NE(p, nullptr) << size;
    const size_t usable = ductile_malloc_usable_size(p);
    EXPECT_EQ(usable, ductile_nallocx(size, 0)) << size;
    fill(p, size, static_cast<unsigned>(size));
    void* q = ductile_realloc(p, size * 2 + 1);
    ASSERT_NE(q, nullptr) << size;
    EXPECT_TRUE(check(q, size, static_cast<unsigned>(size))) << size;
    q = ductile_realloc(q, size / 2 + 1);
    ASSERT_NE(q, nullptr) << size;
    EXPECT_TRUE(check(q, size / 2 + 1, static_cast<unsigned>(size))) << size;
    ductile_free(q);

    auto* z = static_cast<unsigned char*>(ductile_calloc(1, size));
    ASSERT_NE(z, nullptr);
    for (size_t i = 0; i < size; i += 511) ASSERT_EQ(z[i], 0) << size;
    ductile_dallocx(z, 0);
    void* a = ductile_aligned_alloc(64, size);
    EXPECT_TRUE(is_aligned(addr(a), 64)) << size;
    ductile_sdallocx(a, size, MALLOCX_ALIGN(64) | MALLOCX_TCACHE_NONE);  // as allocated
    void* b = nullptr;
    ASSERT_EQ(ductile_posix_memalign(&b, 8192, size), 0);
    EXPECT_TRUE(is_aligned(addr(b), 8192)) << size;
    void* m = ductile_mallocx(size, MALLOCX_ZERO | MALLOCX_TCACHE_NONE);
    EXPECT_EQ(ductile_sallocx(m, 0), ductile_nallocx(size, 0));
    m = ductile_rallocx(m, size + 4096, 0);
    ASSERT_NE(m, nullptr);
    EXPECT_EQ(ductile_sallocx(m, 0), ductile_nallocx(size + 4096, 0));
    ductile_free(m);
    ductile_free(b);
  }
  expect_released_since(before);
}

// Growth in place (and a huge block's move by growth) keeps the sample and
// updates its size; the free releases it.
TEST(Prof, ResizingUpdatesTheSampledSize) {
  const auto before = totals();
  void* p = ductile_malloc(4 * kMiB);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(totals().sampled_bytes, before.sampled_bytes + 4 * kMiB);
  ASSERT_EQ(ductile_xallocx(p, 6 * kMiB, 0, 0), 6 * kMiB);  // headroom: in place
  EXPECT_EQ(totals().samples, before.samples + 1);
  EXPECT_EQ(totals().sampled_bytes, before.sampled_bytes + 6 * kMiB);
  fill(p, 6 * kMiB, 3);
  void* q = ductile_realloc(p, 64 * kMiB);  // past the headroom: it may move
  ASSERT_NE(q, nullptr);
  EXPECT_TRUE(check(q, 6 * kMiB, 3));
  EXPECT_EQ(totals().samples, before.samples + 1);
  EXPECT_EQ(totals().sampled_bytes, before.sampled_bytes + 64 * kMiB);
  q = ductile_realloc(q, 3 * kMiB);  // shrinks in place
  EXPECT_EQ(totals().sampled_bytes, before.sampled_bytes + 3 * kMiB);
  ductile_free(q);
  EXPECT_EQ(totals().samples, before.samples);
  EXPECT_EQ(totals().sampled_bytes, before.sampled_bytes);

  // A medium block grown in place through its chunk neighbour.
  void* m = ductile_malloc(20000);
  const size_t was = ductile_malloc_usable_size(m);
  const size_t got = ductile_xallocx(m, 40000, 0, 0);
  EXPECT_EQ(totals().sampled_bytes, before.sampled_bytes + test::sampled_size(m)) << was << " -> " << got;
  ductile_free(m);
  EXPECT_EQ(totals().sampled_bytes, before.sampled_bytes);
}

TEST(Prof, FreedByAnotherThread) {
  const auto before = totals();
  {
    std::vector<void*> blocks;
    for (size_t i = 0; i < 1000; i++) blocks.push_back(ductile_malloc(16 + i * 40));
    std::thread t([&] {
      for (void* p : blocks) ductile_free(p);
    });
    t.join();
  }
  expect_released_since(before, 1);
}

TEST(Prof, ManyThreadsAtOnce) {
  const auto before = totals();
  {
    std::vector<std::thread> ts;
    for (int t = 0; t < 4; t++)
      ts.emplace_back([t] {
        std::vector<void*> live;
        for (size_t i = 0; i < 4000; i++) {
          live.push_back(ductile_malloc((i * 97 + static_cast<size_t>(t) * 13) % 70000 + 1));
          if (i % 3 == 0) {
            ductile_free(live[i / 2]);
            live[i / 2] = nullptr;
          }
        }
        for (void* p : live) ductile_free(p);
      });
    for (auto& t : ts) t.join();
  }
  expect_released_since(before, 4);
}

// prof.active stops and restarts sampling, in every thread: one that
// allocated while it was off included.
TEST(Prof, ActiveSwitchesSamplingInEveryThread) {
  ASSERT_TRUE(set_active(false));
  EXPECT_FALSE(ctl<bool>("prof.active"));
  const auto before = totals();
  {
    std::vector<void*> off;
    for (int i = 0; i < 100; i++) off.push_back(ductile_malloc(64));
    std::atomic<int> step{0};
    std::vector<void*> theirs;
    std::thread t([&] {
      for (int i = 0; i < 100; i++) theirs.push_back(ductile_malloc(64));
      step = 1;
      while (step != 2) std::this_thread::yield();
      for (int i = 0; i < 100; i++) theirs.push_back(ductile_malloc(64));
    });
    while (step != 1) std::this_thread::yield();
    EXPECT_EQ(totals().samples, before.samples);  // neither thread sampled

    EXPECT_FALSE(set_active(true));
    step = 2;
    t.join();
    std::vector<void*> on;
    for (int i = 0; i < 100; i++) on.push_back(ductile_malloc(64));
    // Each clock restarts at its next allocation, then samples every block.
    EXPECT_GE(totals().samples, before.samples + 2 * 99);
    for (void* p : off) ductile_free(p);
    for (void* p : theirs) ductile_free(p);
    for (void* p : on) ductile_free(p);
  }
  expect_released_since(before, 1);
}

// prof.reset forgets every sample: blocks sampled before it are no longer
// counted, and freeing them later takes nothing away.
TEST(Prof, ResetForgetsAndSetsTheRate) {
  void* old_block = ductile_malloc(300);
  ASSERT_EQ(ductile_mallctl("prof.reset", nullptr, nullptr, nullptr, 0), 0);
  EXPECT_EQ(totals().samples, 0u);
  ductile_free(old_block);
  EXPECT_EQ(totals().samples, 0u);
  EXPECT_EQ(totals().sampled_bytes, 0u);

  size_t lg = 100;
  ASSERT_EQ(ductile_mallctl("prof.reset", nullptr, nullptr, &lg, sizeof lg), 0);
  EXPECT_EQ(ctl<size_t>("prof.lg_sample"), 63u);  // jemalloc's bound
  lg = 0;
  size_t old = 0, len = sizeof old;
  EXPECT_EQ(ductile_mallctl("prof.reset", &old, &len, &lg, sizeof lg), EPERM);
  EXPECT_EQ(ductile_mallctl("prof.reset", nullptr, nullptr, &lg, 4), EINVAL);
  ASSERT_EQ(ductile_mallctl("prof.reset", nullptr, nullptr, &lg, sizeof lg), 0);
  EXPECT_EQ(ctl<size_t>("prof.lg_sample"), 0u);
  EXPECT_EQ(ctl<size_t>("opt.lg_prof_sample"), 0u);
}

TEST(Prof, ForkWhileAnotherThreadSamples) {
  std::atomic<bool> stop{false};
  std::thread t([&] {
    while (!stop) ductile_free(ductile_malloc(200));
  });
  for (int i = 0; i < 20; i++) {
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      void* p = ductile_malloc(1000);
      const char* none = nullptr;
      int err = ductile_mallctl("prof.dump", nullptr, nullptr, &none, sizeof none);
      ductile_free(p);
      _exit(p != nullptr && err == 0 ? 0 : 1);
    }
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  stop = true;
  t.join();
}

// A stack capture in flight when another thread forks: the unwinders hold
// locks of their own while they walk (libunwind's caches, the loader's
// list of objects), which the child would find held forever, so fork waits
// until the capture is done. The hook holds one capture open for 300 ms;
// a child forked during it sees it unfinished unless fork waited.
std::atomic<int> g_capture_state{0};  // 0 idle, 1 in a capture, 2 done

TEST(Prof, ForkWaitsForAStackCaptureInFlight) {
  g_capture_state = 0;
  std::atomic<int> step{0};
  std::vector<void*> theirs;
  std::thread t([&] {
    ductile_free(ductile_malloc(100));  // the thread's cache and clock, started
    step = 1;
    while (step != 2) std::this_thread::yield();
    // Sampled at once, or at the next one when the clock has just started.
    while (g_capture_state == 0 && theirs.size() < 100) theirs.push_back(ductile_malloc(100));
  });
  while (step != 1) std::this_thread::yield();
  core::prof::set_capture_hook([] {
    int idle = 0;
    if (!g_capture_state.compare_exchange_strong(idle, 1)) return;
    usleep(300000);
    g_capture_state = 2;
  });
  step = 2;
  while (g_capture_state == 0) std::this_thread::yield();
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) _exit(g_capture_state == 2 ? 0 : 1);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "the child was forked in the middle of a capture";
  t.join();
  core::prof::set_capture_hook(nullptr);
  for (void* p : theirs) ductile_free(p);
}

// The arithmetic behind the intervals, against libm.
TEST(ProfMath, LogAndExpAgreeWithLibm) {
  for (double x : {1e-15, 1e-6, 0.001, 0.1, 0.5, 0.75, 0.999999, 1.0, 2.0, 1e6}) {
    EXPECT_NEAR(core::prof::ln(x), std::log(x), 1e-6 * std::fabs(std::log(x)) + 1e-9) << x;
  }
  for (double x : {0.0, 1e-4, 0.01, 0.5, 1.0, 3.0, 20.0, 100.0}) {
    EXPECT_NEAR(core::prof::exp_neg(x), std::exp(-x), 1e-7 * std::exp(-x) + 1e-300) << x;
  }
}

// Exponential intervals of mean 2^lg: mean and spread within a few per cent.
TEST(ProfMath, IntervalsAreExponentialOfTheMean) {
  uint64_t rng = 0;
  const size_t n = 200000;
  double sum = 0, sum2 = 0;
  size_t below_mean = 0;
  for (size_t i = 0; i < n; i++) {
    const double v = static_cast<double>(core::prof::draw_interval(&rng, 19));
    sum += v;
    sum2 += v * v;
    below_mean += v < 524288;
  }
  const double mean = sum / n, sd = std::sqrt(sum2 / n - mean * mean);
  EXPECT_NEAR(mean / 524288, 1.0, 0.02);
  EXPECT_NEAR(sd / 524288, 1.0, 0.03);  // an exponential's deviation is its mean
  EXPECT_NEAR(static_cast<double>(below_mean) / n, 1 - std::exp(-1.0), 0.01);
}

}  // namespace
}  // namespace ductile

int main(int argc, char** argv) {
  if (!ductile::kProf) {
    std::puts("built with --disable-prof: no sampled profiling to test");
    return 77;  // skipped
  }
  // No background thread: its creation would be a sample that stays.
  // lg_prof_interval:40: an interval too long for a dump to come (the
  // named dumps' numbers are checked).
  const int status = ductile::test::run_again_with_conf(
      argv, "DUCTILE_PROF_TEST_DIR", "ductile-prof-test",
      "prof:true,lg_prof_sample:0,background_thread:false,lg_prof_interval:40,prof_signal:SIGUSR2,prof_prefix:",
      "/t");
  if (status >= 0) return status;
  ductile::g_dir = getenv("DUCTILE_PROF_TEST_DIR");
  testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
