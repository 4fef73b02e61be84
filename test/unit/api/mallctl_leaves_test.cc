// SPDX-License-Identifier: BSD-2-Clause
// mallctl's leaves (api/mallctl_leaves.cc): each name's answer, jemalloc's read and write rules,
// arenas and thread caches, the options, decay, and the counters.
//
// This program links the library's objects, so ductile is also the allocator of the
// test process itself.
#include <errno.h>
#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "core/options.h"
#include "core/runtime.h"
#include "core/stats.h"
#include "ductile/ductile.h"
#include "small/size_classes.h"
#include "support/patterns.h"
#include "unit/api/api_helpers.h"

namespace ductile {
namespace {

using test::check;
using test::edge_sizes;
using test::fill;
using test::kMiB;
using test::read_ctl;
using test::threshold;

// The version the library reports is configure.ac's (AC_INIT, PACKAGE_VERSION
// in config.h), through ductile_version() and mallctl("version") alike.
TEST(Mallctl, VersionIsConfigures) {
  EXPECT_STREQ(ductile_version(), PACKAGE_VERSION);
  EXPECT_STREQ(read_ctl<const char*>("version"), PACKAGE_VERSION);
}

TEST(Mallctl, VersionAndEpoch) {
  EXPECT_STREQ(read_ctl<const char*>("version"), ductile_version());
  uint64_t e0 = read_ctl<uint64_t>("epoch");
  uint64_t e1 = 0;
  size_t len = sizeof e1;
  ASSERT_EQ(ductile_mallctl("epoch", &e1, &len, &e0, sizeof e0), 0);
  EXPECT_EQ(e1, e0 + 1);
  EXPECT_EQ(ductile_mallctl("epoch", nullptr, nullptr, &e0, 4), EINVAL);
}

TEST(Mallctl, StatsAreOrderedAndFollowAllocations) {
  size_t allocated = read_ctl<size_t>("stats.allocated");
  size_t active = read_ctl<size_t>("stats.active");
  EXPECT_LE(allocated, active);
  EXPECT_LE(active, read_ctl<size_t>("stats.resident"));
  EXPECT_LE(active, read_ctl<size_t>("stats.mapped"));
  EXPECT_GT(read_ctl<size_t>("stats.metadata"), 0u);
  (void)read_ctl<size_t>("stats.retained");

  void* p = ductile_malloc(32 * kMiB);
  size_t grown = read_ctl<size_t>("stats.allocated");
  EXPECT_GE(grown, allocated + 32 * kMiB);
  EXPECT_GE(read_ctl<size_t>("ductile.huge.allocated"), 32 * kMiB);
  ductile_free(p);
  EXPECT_LE(read_ctl<size_t>("stats.allocated"), grown - 32 * kMiB);
}

// The mapping budget's figures (os/map_budget.h): the kernel's limit as
// read at start-up, the threshold past which ductile stops splitting
// mappings, and the last count of the process's mappings.
TEST(Mallctl, MapsReportTheMappingBudget) {
  size_t limit = os::kDefaultMaxMapCount;
  if (FILE* f = std::fopen("/proc/sys/vm/max_map_count", "r")) {
    unsigned long v = 0;
    if (std::fscanf(f, "%lu", &v) == 1 && v != 0) limit = v;
    std::fclose(f);
  }
  EXPECT_EQ(read_ctl<size_t>("ductile.maps.limit"), limit);
  EXPECT_EQ(read_ctl<size_t>("ductile.maps.threshold"), limit / 2);
  EXPECT_FALSE(read_ctl<bool>("ductile.maps.tight"));
  const os::MapBudget& b = core::rt().os.map_budget();
  EXPECT_EQ(read_ctl<uint64_t>("ductile.maps.counts"), b.counts());
  EXPECT_EQ(read_ctl<size_t>("ductile.maps.count"), b.last_count());
  EXPECT_LE(read_ctl<size_t>("ductile.maps.count"), limit);
  EXPECT_EQ(read_ctl<uint64_t>("ductile.maps.splits_avoided"),
            core::rt().os.counters().splits_avoided.load(std::memory_order_relaxed));
  // Read-only.
  size_t v = 1;
  EXPECT_EQ(ductile_mallctl("ductile.maps.limit", nullptr, nullptr, &v, sizeof v), EPERM);
}

TEST(Mallctl, StatsMatchTheSnapshot) {
  core::StatsSnapshot s;
  core::take_snapshot(s);
  EXPECT_EQ(read_ctl<size_t>("ductile.chunk.reserved"), s.chunk.reserved);
  EXPECT_EQ(read_ctl<uint64_t>("ductile.os.mmap"), core::rt().os.counters().get(os::Call::kMmap));
  EXPECT_EQ(s.allocated, s.small.allocated + s.medium.allocated + s.huge.allocated);
  EXPECT_EQ(s.active, s.small.active + s.medium.active + s.huge.active);
  // Slab regions: the dense ones are counted among the advised ones.
  EXPECT_EQ(read_ctl<size_t>("ductile.small.regions"), s.arena.regions);
  EXPECT_EQ(read_ctl<size_t>("ductile.small.advised_regions"), s.arena.advised);
  EXPECT_EQ(read_ctl<size_t>("ductile.small.dense_regions"), s.arena.dense);
  EXPECT_LE(s.arena.dense, s.arena.advised);
}

TEST(Mallctl, ThreadCounters) {
  if (!kStats) GTEST_SKIP() << "--disable-stats";
  for (size_t size : {100ul, 50000ul, 6 * kMiB}) {
    uint64_t a0 = read_ctl<uint64_t>("thread.allocated");
    uint64_t d0 = read_ctl<uint64_t>("thread.deallocated");
    void* p = ductile_malloc(size);
    uint64_t a1 = read_ctl<uint64_t>("thread.allocated");
    EXPECT_GE(a1 - a0, size) << size;
    ductile_free(p);
    EXPECT_GE(read_ctl<uint64_t>("thread.deallocated") - d0, size) << size;
  }
  uint64_t* ap = read_ctl<uint64_t*>("thread.allocatedp");
  uint64_t* dp = read_ctl<uint64_t*>("thread.deallocatedp");
  ASSERT_NE(ap, nullptr);
  ASSERT_NE(dp, nullptr);
  uint64_t before = *ap;
  void* p = ductile_malloc(1000);
  EXPECT_GE(*ap - before, 1000u);
  EXPECT_EQ(*ap, read_ctl<uint64_t>("thread.allocated"));
  ductile_free(p);
  EXPECT_EQ(*dp, read_ctl<uint64_t>("thread.deallocated"));
}

TEST(Mallctl, ThreadCounterPointersStartAtTheCounters) {
  // A new thread's first read of *thread.allocatedp is thread.allocated:
  // asking for the pointer allocates nothing that would be counted.
  if (!kStats) GTEST_SKIP() << "--disable-stats";
  std::thread([] {
    uint64_t a0 = read_ctl<uint64_t>("thread.allocated");
    uint64_t d0 = read_ctl<uint64_t>("thread.deallocated");
    uint64_t* ap = read_ctl<uint64_t*>("thread.allocatedp");
    uint64_t* dp = read_ctl<uint64_t*>("thread.deallocatedp");
    ASSERT_NE(ap, nullptr);
    ASSERT_NE(dp, nullptr);
    EXPECT_EQ(*ap, a0);
    EXPECT_EQ(*dp, d0);
    EXPECT_EQ(*ap, read_ctl<uint64_t>("thread.allocated"));
    EXPECT_EQ(*dp, read_ctl<uint64_t>("thread.deallocated"));
    void* p = ductile_malloc(1000);
    EXPECT_GE(*ap - a0, 1000u);
    EXPECT_EQ(*ap, read_ctl<uint64_t>("thread.allocated"));
    ductile_free(p);
    EXPECT_GE(*dp - d0, 1000u);
    EXPECT_EQ(*dp, read_ctl<uint64_t>("thread.deallocated"));
  }).join();
}

TEST(Mallctl, ReadRulesFollowJemalloc) {
  size_t v = 0;
  // Too short: as much as fits, the length says how much, EINVAL.
  size_t len = 4;
  EXPECT_EQ(ductile_mallctl("arenas.page", &v, &len, nullptr, 0), EINVAL);
  EXPECT_EQ(len, 4u);
  EXPECT_EQ(v, kPage);  // the low 4 bytes, little-endian
  len = 16;
  char big[16] = {};
  EXPECT_EQ(ductile_mallctl("arenas.page", big, &len, nullptr, 0), EINVAL);
  EXPECT_EQ(len, sizeof(size_t));
  // No buffer: nothing read, nothing reported.
  len = 5;
  EXPECT_EQ(ductile_mallctl("arenas.page", nullptr, &len, nullptr, 0), 0);
  EXPECT_EQ(len, 5u);
  EXPECT_EQ(ductile_mallctl("arenas.page", &v, nullptr, nullptr, 0), 0);
}

TEST(Mallctl, WriteRulesFollowJemalloc) {
  size_t v = 1;
  EXPECT_EQ(ductile_mallctl("stats.allocated", nullptr, nullptr, &v, sizeof v), EPERM);
  EXPECT_EQ(ductile_mallctl("version", nullptr, nullptr, &v, sizeof v), EPERM);
  EXPECT_EQ(ductile_mallctl("stats.allocated", nullptr, nullptr, nullptr, 8), EPERM);
  bool b = false;
  EXPECT_EQ(ductile_mallctl("opt.tcache", nullptr, nullptr, &b, sizeof b), EPERM);
  EXPECT_EQ(ductile_mallctl("opt.huge_threshold", nullptr, nullptr, &v, sizeof v), EPERM);
  // A void value: neither read nor written.
  size_t len = sizeof v;
  EXPECT_EQ(ductile_mallctl("arena.0.purge", &v, &len, nullptr, 0), EPERM);
  EXPECT_EQ(ductile_mallctl("arena.0.purge", nullptr, nullptr, &v, sizeof v), EPERM);
}

TEST(Mallctl, PurgeAndDecayGiveBackWhatIsRetained) {
  std::vector<void*> v;
  for (int i = 0; i < 64; i++) v.push_back(ductile_malloc(100000 + i * 4096));
  for (void* p : v) ductile_free(p);
  void* h = ductile_malloc(20 * kMiB);
  ductile_free(h);
  EXPECT_EQ(ductile_mallctl("arena.0.purge", nullptr, nullptr, nullptr, 0), 0);
  EXPECT_EQ(read_ctl<size_t>("ductile.chunk.dirty"), 0u);
  EXPECT_EQ(ductile_mallctl("arena.4096.purge", nullptr, nullptr, nullptr, 0), 0);
  EXPECT_EQ(ductile_mallctl("arena.0.decay", nullptr, nullptr, nullptr, 0), 0);
  EXPECT_EQ(ductile_mallctl("arena.4096.decay", nullptr, nullptr, nullptr, 0), 0);
  EXPECT_EQ(ductile_mallctl("thread.tcache.flush", nullptr, nullptr, nullptr, 0), 0);
  (void)read_ctl<size_t>("ductile.trim");
}

TEST(Mallctl, ArenasAndConfig) {
  EXPECT_GE(read_ctl<unsigned>("arenas.narenas"), 1u);  // and one more for each arenas.create
  EXPECT_EQ(read_ctl<unsigned>("opt.narenas"), 1u);
  EXPECT_EQ(read_ctl<size_t>("arenas.page"), kPage);
  EXPECT_EQ(read_ctl<bool>("config.stats"), kStats);
  EXPECT_EQ(read_ctl<bool>("config.debug"), kDebug);
}

// Programs written for jemalloc make arenas of their own and pass
// MALLOCX_ARENA(a), often with MALLOCX_TCACHE_NONE, or make explicit thread
// caches: all of it keeps working, served by the one arena.
TEST(Mallctl, ArenasCreateGivesIndicesThatMallocxArenaTakes) {
  const unsigned n0 = read_ctl<unsigned>("arenas.narenas");
  unsigned a = read_ctl<unsigned>("arenas.create");
  EXPECT_EQ(a, n0);
  EXPECT_EQ(read_ctl<unsigned>("arenas.narenas"), a + 1);
  EXPECT_EQ(read_ctl<unsigned>("opt.narenas"), 1u);
  for (size_t size : edge_sizes()) {
    for (int flags : {MALLOCX_ARENA(a), MALLOCX_ARENA(a) | MALLOCX_TCACHE_NONE,
                      MALLOCX_ARENA(a) | MALLOCX_TCACHE_NONE | MALLOCX_ZERO | MALLOCX_LG_ALIGN(6)}) {
      void* p = ductile_mallocx(size, flags);
      ASSERT_NE(p, nullptr) << size;
      EXPECT_EQ(ductile_sallocx(p, flags), ductile_nallocx(size, flags));
      fill(p, size, 1);
      void* q = ductile_rallocx(p, size * 2, flags);
      ASSERT_NE(q, nullptr) << size;
      EXPECT_TRUE(check(q, size, 1));
      ductile_sdallocx(q, size * 2, flags);
    }
  }
  // Its purge and decay, and binding a thread to it.
  const std::string purge = "arena." + std::to_string(a) + ".purge";
  EXPECT_EQ(ductile_mallctl(purge.c_str(), nullptr, nullptr, nullptr, 0), 0);
  const std::string beyond = "arena." + std::to_string(a + 1) + ".purge";
  EXPECT_EQ(ductile_mallctl(beyond.c_str(), nullptr, nullptr, nullptr, 0), ENOENT);
  std::thread([a] {
    EXPECT_EQ(read_ctl<unsigned>("thread.arena"), 0u);
    unsigned old = 99;
    size_t len = sizeof old;
    unsigned v = a;
    EXPECT_EQ(ductile_mallctl("thread.arena", &old, &len, &v, sizeof v), 0);
    EXPECT_EQ(old, 0u);
    EXPECT_EQ(read_ctl<unsigned>("thread.arena"), a);
    v = a + 1;
    EXPECT_EQ(ductile_mallctl("thread.arena", nullptr, nullptr, &v, sizeof v), EFAULT);
    EXPECT_EQ(read_ctl<unsigned>("thread.arena"), a);
  }).join();
  // Default extent hooks (null) are taken; hooks of the program's own are not.
  void* hooks = nullptr;
  unsigned b = 0;
  size_t len = sizeof b;
  EXPECT_EQ(ductile_mallctl("arenas.create", &b, &len, &hooks, sizeof hooks), 0);
  EXPECT_EQ(b, a + 1);
  hooks = &b;
  EXPECT_EQ(ductile_mallctl("arenas.create", &b, &len, &hooks, sizeof hooks), EPERM);
  EXPECT_EQ(read_ctl<unsigned>("arenas.narenas"), a + 2);
}

TEST(Mallctl, ArenasCreateStopsAtTheLastIndexMallocxArenaHolds) {
  // In a child: the indices it takes are gone for good.
  EXPECT_EXIT(
      {
        unsigned a = 0;
        size_t len = sizeof a;
        int r;
        while ((r = ductile_mallctl("arenas.create", &a, &len, nullptr, 0)) == 0) {
        }
        unsigned n = 0;
        len = sizeof n;
        ductile_mallctl("arenas.narenas", &n, &len, nullptr, 0);
        void* p = ductile_mallocx(100, MALLOCX_ARENA(a) | MALLOCX_TCACHE_NONE);
        // MALLOCX_ARENA(a) holds a + 1 in 12 bits; 4096 is MALLCTL_ARENAS_ALL.
        _exit(r == EAGAIN && a == 4094 && n == 4095 && p != nullptr ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

TEST(Mallctl, ExplicitThreadCaches) {
  unsigned t = 0;
  size_t len = sizeof t;
  ASSERT_EQ(ductile_mallctl("tcache.create", &t, &len, nullptr, 0), 0);
  unsigned t2 = read_ctl<unsigned>("tcache.create");
  EXPECT_NE(t, t2);
  for (size_t size : edge_sizes()) {
    void* p = ductile_mallocx(size, MALLOCX_TCACHE(t));
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(ductile_sallocx(p, 0), ductile_nallocx(size, MALLOCX_TCACHE(t)));
    ductile_dallocx(p, MALLOCX_TCACHE(t));
  }
  EXPECT_EQ(ductile_mallctl("tcache.flush", nullptr, nullptr, &t, sizeof t), 0);
  EXPECT_EQ(ductile_mallctl("tcache.flush", nullptr, nullptr, nullptr, 0), EINVAL);  // no index
  EXPECT_EQ(ductile_mallctl("tcache.flush", &t, &len, &t, sizeof t), EPERM);       // write-only
  unsigned never = 5000;
  EXPECT_EQ(ductile_mallctl("tcache.flush", nullptr, nullptr, &never, sizeof never), EFAULT);
  EXPECT_EQ(ductile_mallctl("tcache.destroy", nullptr, nullptr, &t, sizeof t), 0);
  EXPECT_EQ(ductile_mallctl("tcache.destroy", nullptr, nullptr, &t2, sizeof t2), 0);
  // A destroyed index is handed out again.
  EXPECT_EQ(read_ctl<unsigned>("tcache.create"), t < t2 ? t : t2);
}

TEST(Mallctl, EveryOptionOfTheTableHasAnOptNode) {
  ASSERT_GT(core::option_count(), 0u);
  for (size_t i = 0; i < core::option_count(); i++) {
    std::string name = std::string("opt.") + core::option_name(i);
    EXPECT_EQ(ductile_mallctl(name.c_str(), nullptr, nullptr, nullptr, 0), 0) << name;
  }
  EXPECT_EQ(core::option_name(core::option_count()), nullptr);
  const core::Options& o = core::rt().opts;
  EXPECT_EQ(read_ctl<uint64_t>("opt.decay_ms"), o.decay_ms);
  EXPECT_EQ(read_ctl<size_t>("opt.huge_threshold"), o.huge_threshold);
  EXPECT_EQ(read_ctl<bool>("opt.tcache"), o.tcache);
  EXPECT_EQ(read_ctl<bool>("opt.stats_print"), o.stats_print);
  char text[32];
  ASSERT_TRUE(core::option_to_string(o, "thp", text, sizeof text));
  EXPECT_STREQ(read_ctl<const char*>("opt.thp"), text);
  EXPECT_EQ(read_ctl<ssize_t>("opt.dirty_decay_ms"), static_cast<ssize_t>(o.decay_ms));
}

// The names tools and programs written for jemalloc read, with jemalloc's
// types: each answers ductile's own figure.
TEST(Mallctl, SizeClassesAsJemallocNamesThem) {
  EXPECT_EQ(read_ctl<size_t>("arenas.quantum"), size_t{16});
  const unsigned nbins = read_ctl<unsigned>("arenas.nbins");
  EXPECT_EQ(nbins, small::kNumSmall);
  size_t prev = 0;
  for (unsigned i = 0; i < nbins; i++) {
    const std::string name = "arenas.bin." + std::to_string(i) + ".size";
    const size_t size = read_ctl<size_t>(name.c_str());
    EXPECT_GT(size, prev) << name;
    EXPECT_EQ(ductile_nallocx(size, 0), size) << name;  // a class: nallocx keeps it
    prev = size;
  }
  EXPECT_EQ(prev, small::kMaxSmall);
  const std::string past = "arenas.bin." + std::to_string(nbins) + ".size";
  size_t v, len = sizeof v;
  EXPECT_EQ(ductile_mallctl(past.c_str(), &v, &len, nullptr, 0), ENOENT);

  const unsigned nlextents = read_ctl<unsigned>("arenas.nlextents");
  ASSERT_GT(nlextents, 0u);
  for (unsigned i = 0; i < nlextents; i++) {
    const std::string name = "arenas.lextent." + std::to_string(i) + ".size";
    const size_t size = read_ctl<size_t>(name.c_str());
    EXPECT_GT(size, prev) << name;
    EXPECT_EQ(size % kPage, 0u) << name;
    EXPECT_EQ(ductile_nallocx(size, 0), size) << name;
    prev = size;
  }
  // The last class below the huge threshold; past it, blocks are huge.
  EXPECT_GE(prev, threshold() - 1);
  EXPECT_LT(prev - prev / 8, threshold());
  const std::string last = "arenas.lextent." + std::to_string(nlextents) + ".size";
  len = sizeof v;
  EXPECT_EQ(ductile_mallctl(last.c_str(), &v, &len, nullptr, 0), ENOENT);
  // What the thread cache keeps: up to the largest of them.
  EXPECT_EQ(read_ctl<size_t>("opt.tcache_max"), prev);
  size_t q = 16;
  EXPECT_EQ(ductile_mallctl("arenas.quantum", nullptr, nullptr, &q, sizeof q), EPERM);
  unsigned u;
  len = sizeof(size_t);
  EXPECT_EQ(ductile_mallctl("arenas.nbins", &u, &len, nullptr, 0), EINVAL);  // unsigned, not size_t
}

TEST(Mallctl, ArenaPagesAreTheStatsInPages) {
  std::vector<void*> blocks;
  for (int i = 0; i < 64; i++) blocks.push_back(ductile_malloc(64 * 1024));
  uint64_t epoch = 1;
  ASSERT_EQ(ductile_mallctl("epoch", nullptr, nullptr, &epoch, sizeof epoch), 0);
  const size_t active = read_ctl<size_t>("stats.active");
  const size_t pactive = read_ctl<size_t>("stats.arenas.0.pactive");
  const std::string all = "stats.arenas." + std::to_string(MALLCTL_ARENAS_ALL) + ".pactive";
  const size_t pactive_all = read_ctl<size_t>(all.c_str());
  // Read one after another: other threads of the test may move them a little.
  EXPECT_NEAR(static_cast<double>(pactive), static_cast<double>(active / kPage), 64.0);
  EXPECT_NEAR(static_cast<double>(pactive_all), static_cast<double>(pactive), 64.0);
  EXPECT_GE(pactive * kPage, size_t{64} * 64 * 1024 / 2);
  for (void* p : blocks) ductile_free(p);
  (void)read_ctl<size_t>("stats.arenas.0.pdirty");
  (void)core::trim();
  core::StatsSnapshot s;
  core::take_snapshot(s);
  EXPECT_EQ(read_ctl<size_t>("stats.arenas.0.pdirty"), s.chunk.dirty / kPage + s.arena.dirty_pages);
  size_t v, len = sizeof v;
  EXPECT_EQ(ductile_mallctl("stats.arenas.4000.pactive", &v, &len, nullptr, 0), ENOENT);  // never created
  EXPECT_EQ(ductile_mallctl("stats.arenas.0.pactive", nullptr, nullptr, &v, sizeof v), EPERM);
}

TEST(Mallctl, ThreadCacheCanBeSwitchedOffPerThread) {
  if (!core::rt().opts.tcache || (core::g_hardened && !kHardened))
    GTEST_SKIP() << "no thread caches in this configuration";
  std::thread t([] {
    void* warm = ductile_malloc(48);
    ductile_free(warm);
    EXPECT_TRUE(read_ctl<bool>("thread.tcache.enabled"));
    ASSERT_NE(core::own_cache(), nullptr);
    bool off = false, old = false;
    size_t len = sizeof old;
    ASSERT_EQ(ductile_mallctl("thread.tcache.enabled", &old, &len, &off, sizeof off), 0);
    EXPECT_TRUE(old);
    EXPECT_FALSE(read_ctl<bool>("thread.tcache.enabled"));
    EXPECT_EQ(core::own_cache(), nullptr);  // flushed and given back
    void* p = ductile_malloc(48);
    ductile_free(p);
    EXPECT_EQ(core::own_cache(), nullptr);  // and none made again
    bool on = true;
    EXPECT_EQ(ductile_mallctl("thread.tcache.enabled", nullptr, nullptr, &on, 1), 0);
    EXPECT_EQ(ductile_mallctl("thread.tcache.enabled", nullptr, nullptr, &on, 4), EINVAL);
    p = ductile_malloc(48);
    ductile_free(p);
    EXPECT_NE(core::own_cache(), nullptr);
    EXPECT_TRUE(read_ctl<bool>("thread.tcache.enabled"));
  });
  t.join();
  EXPECT_TRUE(read_ctl<bool>("thread.tcache.enabled"));  // this thread's is its own
}

TEST(Mallctl, DecayBackgroundAndProfilingNamesOfJemalloc) {
  EXPECT_EQ(read_ctl<ssize_t>("opt.muzzy_decay_ms"), 0);  // no muzzy stage
  EXPECT_EQ(read_ctl<size_t>("max_background_threads"), 1u);
  size_t one = 1, two = 2;
  EXPECT_EQ(ductile_mallctl("max_background_threads", nullptr, nullptr, &one, sizeof one), 0);
  EXPECT_EQ(ductile_mallctl("max_background_threads", nullptr, nullptr, &two, sizeof two), EINVAL);
  EXPECT_EQ(read_ctl<ssize_t>("opt.lg_prof_interval"), core::rt().opts.lg_prof_interval);
  EXPECT_EQ(read_ctl<ssize_t>("opt.lg_prof_interval"), -1);
  EXPECT_FALSE(read_ctl<bool>("opt.prof_gdump"));
  EXPECT_EQ(read_ctl<int>("opt.prof_signal"), 0);
  EXPECT_STREQ(read_ctl<const char*>("opt.stats_print_opts"), "");
  if (kProf) {
    EXPECT_EQ(read_ctl<uint64_t>("prof.interval"), 0u);  // no interval dumps here
    EXPECT_FALSE(read_ctl<bool>("prof.gdump"));
    bool on = true;
    EXPECT_EQ(ductile_mallctl("prof.gdump", nullptr, nullptr, &on, sizeof on), ENOENT);  // needs opt.prof
    uint64_t v = 1;
    EXPECT_EQ(ductile_mallctl("prof.interval", nullptr, nullptr, &v, sizeof v), EPERM);
  }
}

TEST(Mallctl, DecayTimeIsWritableThroughTheOptionParser) {
  uint64_t saved = read_ctl<uint64_t>("opt.decay_ms");
  uint64_t v = 2500, old = 0;
  size_t len = sizeof old;
  ASSERT_EQ(ductile_mallctl("opt.decay_ms", &old, &len, &v, sizeof v), 0);
  EXPECT_EQ(old, saved);
  EXPECT_EQ(read_ctl<uint64_t>("opt.decay_ms"), 2500u);
  EXPECT_EQ(core::rt().chunks.options().decay_ns, 2500u * 1000000u);
  EXPECT_EQ(read_ctl<ssize_t>("arenas.dirty_decay_ms"), 2500);
  // Values the option table refuses.
  v = UINT64_MAX;
  EXPECT_EQ(ductile_mallctl("opt.decay_ms", nullptr, nullptr, &v, sizeof v), EINVAL);
  EXPECT_EQ(ductile_mallctl("opt.decay_ms", nullptr, nullptr, &v, 4), EINVAL);
  EXPECT_EQ(read_ctl<uint64_t>("opt.decay_ms"), 2500u);
  // jemalloc's name: -1 is "never", below that is EFAULT.
  ssize_t never = -1, bad = -2, ms = 700;
  ASSERT_EQ(ductile_mallctl("arenas.dirty_decay_ms", nullptr, nullptr, &never, sizeof never), 0);
  EXPECT_EQ(read_ctl<ssize_t>("arenas.dirty_decay_ms"), -1);
  EXPECT_EQ(ductile_mallctl("arenas.dirty_decay_ms", nullptr, nullptr, &bad, sizeof bad), EFAULT);
  ASSERT_EQ(ductile_mallctl("arenas.dirty_decay_ms", nullptr, nullptr, &ms, sizeof ms), 0);
  EXPECT_EQ(read_ctl<uint64_t>("opt.decay_ms"), 700u);
  ASSERT_EQ(ductile_mallctl("opt.decay_ms", nullptr, nullptr, &saved, sizeof saved), 0);
  EXPECT_EQ(core::rt().chunks.options().decay_ns, saved * 1000000u);
}

TEST(Mallctl, GrowthAndSyscallCountersHaveTheirNames) {
  for (size_t i = 0; i < os::kCallKinds; i++) {
    std::string name = std::string("ductile.os.") + os::call_name(static_cast<os::Call>(i));
    uint64_t v = read_ctl<uint64_t>(name.c_str());
    EXPECT_EQ(v, core::rt().os.counters().get(static_cast<os::Call>(i))) << name;
  }
  (void)read_ctl<uint64_t>("ductile.os.purged_bytes");
  (void)read_ctl<uint64_t>("ductile.os.purged_ranges");
  uint64_t before = 0;
  for (size_t i = 0; i < huge::kGrowthPaths; i++)
    before += read_ctl<uint64_t>((std::string("ductile.huge.growth.") + core::growth_name(i)).c_str());
  // Doubling a huge block takes some growth path every time.
  void* p = ductile_malloc(4 * kMiB);
  for (size_t size = 8 * kMiB; size <= 128 * kMiB; size *= 2) {
    p = ductile_realloc(p, size);
    ASSERT_NE(p, nullptr);
  }
  ductile_free(p);
  uint64_t after = 0;
  huge::HugeStats hs = core::rt().huge.stats();
  for (size_t i = 0; i < huge::kGrowthPaths; i++) {
    uint64_t v = read_ctl<uint64_t>((std::string("ductile.huge.growth.") + core::growth_name(i)).c_str());
    EXPECT_EQ(v, hs.growth[i]);
    after += v;
  }
  EXPECT_GE(after - before, 5u);
  EXPECT_EQ(read_ctl<uint64_t>("ductile.huge.allocs"), hs.allocs);
}

}  // namespace
}  // namespace ductile
