// SPDX-License-Identifier: BSD-2-Clause
// The extended API's contract, checked against jemalloc itself: this file is
// compiled twice, into differential_jemalloc (linked with Debian's
// libjemalloc, -DDUCTILE_DIFF_JEMALLOC) and differential_ductile (linked with
// the shipped libductile.so). Both link the allocator as a shared library
// that replaces malloc for the whole process, and both call jemalloc's
// unprefixed names. A case passes in both builds, or it is not a behaviour
// ductile shares with jemalloc; where ductile differs on purpose, kDuctile
// says so next to the check.
#ifdef DUCTILE_DIFF_JEMALLOC
#include <jemalloc/jemalloc.h>
constexpr bool kDuctile = false;
#else
#include <ductile/ductile.h>
constexpr bool kDuctile = true;
#endif

#include <errno.h>
#include <stdlib.h>
#include <sys/types.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "integration/json_check.h"
#include "support/patterns.h"

namespace {

using ductile::test::all_zero;
using ductile::test::check;
using ductile::test::fill;

constexpr size_t kMiB = size_t{1} << 20;
constexpr size_t kMaxSize = static_cast<size_t>(PTRDIFF_MAX);

// Hides a constant from the compiler's allocation-size warnings.
size_t opaque(size_t v) {
  volatile size_t x = v;
  return x;
}
bool aligned(const void* p, size_t a) { return (reinterpret_cast<uintptr_t>(p) & (a - 1)) == 0; }

const std::vector<size_t>& sizes() {
  static const std::vector<size_t> v = {1,     8,     9,      16,      17,      100,     1000,
                                        4096,  4097,  14336,  16385,   20000,   100000,  1 * kMiB + 1,
                                        2 * kMiB - 1, 2 * kMiB, 2 * kMiB + 1, 3 * kMiB + 5, 9 * kMiB};
  return v;
}

template <typename T>
int ctl_read(const char* name, T* v) {
  size_t len = sizeof *v;
  int r = mallctl(name, v, &len, nullptr, 0);
  if (r == 0 && len != sizeof *v) return -1;
  return r;
}

TEST(Build, IsTheAllocatorItSaysItIs) {
  const char* v = nullptr;
  ASSERT_EQ(ctl_read("version", &v), 0);
  ASSERT_NE(v, nullptr);
  // jemalloc's versions start with its major number; ductile's are 0.x.
  EXPECT_EQ(v[0] == '0', kDuctile) << v;
  // And it is the process's malloc.
  void* p = malloc(100);
  EXPECT_GE(sallocx(p, 0), 100u);
  free(p);
}

TEST(Flags, SameEncoding) {
  EXPECT_EQ(MALLOCX_LG_ALIGN(12), 12);
  EXPECT_EQ(MALLOCX_ALIGN(4096), 12);
  EXPECT_EQ(MALLOCX_ALIGN(size_t{1} << 40), 40);
  EXPECT_EQ(MALLOCX_ALIGN(24), 3);
  EXPECT_EQ(MALLOCX_ZERO, 0x40);
  EXPECT_EQ(MALLOCX_TCACHE_NONE, 0x100);
  EXPECT_EQ(MALLOCX_ARENA(0), 1 << 20);
  EXPECT_EQ(MALLOCX_ARENA(2), 3 << 20);
}

TEST(Mallocx, AlignmentAndUsableSize) {
  for (size_t size : sizes()) {
    for (int lg : {0, 4, 6, 12, 16, 21, 22}) {
      for (int extra : {0, static_cast<int>(MALLOCX_TCACHE_NONE), MALLOCX_ARENA(0)}) {
        int flags = MALLOCX_LG_ALIGN(lg) | extra;
        void* p = mallocx(size, flags);
        ASSERT_NE(p, nullptr) << size << " lg " << lg;
        EXPECT_TRUE(aligned(p, size_t{1} << lg)) << size << " lg " << lg;
        size_t usable = sallocx(p, 0);
        EXPECT_GE(usable, size);
        // nallocx is the size mallocx gives.
        EXPECT_EQ(usable, nallocx(size, flags)) << size << " lg " << lg;
        static_cast<volatile char*>(p)[usable - 1] = 1;
        dallocx(p, flags);
      }
    }
  }
}

TEST(Mallocx, AlignmentLargerThanTheSize) {
  for (size_t align = 16; align <= 16 * kMiB; align <<= 1) {
    void* p = mallocx(1, MALLOCX_ALIGN(align));
    ASSERT_NE(p, nullptr);
    EXPECT_TRUE(aligned(p, align)) << align;
    EXPECT_GE(sallocx(p, 0), 1u);
    dallocx(p, MALLOCX_ALIGN(align));
  }
}

TEST(Mallocx, AlignmentNotAPowerOfTwoUsesItsLowestBit) {
  void* p = mallocx(40, MALLOCX_ALIGN(96));
  ASSERT_NE(p, nullptr);
  EXPECT_TRUE(aligned(p, 32));
  dallocx(p, 0);
}

TEST(Mallocx, ZeroFlag) {
  for (size_t size : sizes()) {
    void* d = malloc(size);
    std::memset(d, 0x77, size);
    free(d);
    void* p = mallocx(size, MALLOCX_ZERO);
    ASSERT_NE(p, nullptr);
    EXPECT_TRUE(all_zero(p, 0, size)) << size;
    dallocx(p, 0);
  }
}

TEST(Mallocx, ImpossibleSizesFailAndNallocxIsZero) {
  for (size_t size : {SIZE_MAX, SIZE_MAX - 4096, kMaxSize + 1, kMaxSize}) {
    EXPECT_EQ(mallocx(size, 0), nullptr) << size;
    EXPECT_EQ(mallocx(size, MALLOCX_ZERO | MALLOCX_LG_ALIGN(6)), nullptr) << size;
    EXPECT_EQ(nallocx(size, 0), 0u) << size;
  }
  EXPECT_EQ(mallocx(1, MALLOCX_LG_ALIGN(63)), nullptr);
  EXPECT_EQ(nallocx(1, MALLOCX_LG_ALIGN(63)), 0u);
}

TEST(Rallocx, KeepsContentsAndZeroesTheGrowth) {
  const size_t steps[] = {10, 100, 3000, 50000, 200000, 3 * kMiB, 12 * kMiB, 5000, 20};
  void* p = mallocx(steps[0], 0);
  size_t valid = steps[0];
  fill(p, valid, 9);
  for (size_t n : steps) {
    size_t old = sallocx(p, 0);
    fill(p, old, 9);
    void* q = rallocx(p, n, MALLOCX_ZERO);
    ASSERT_NE(q, nullptr) << n;
    EXPECT_GE(sallocx(q, 0), n);
    EXPECT_TRUE(check(q, old < n ? old : n, 9)) << n;
    if (n > old) {
      EXPECT_TRUE(all_zero(q, old, n)) << old << " -> " << n;
    }
    p = q;
    valid = n;
  }
  dallocx(p, 0);
}

TEST(Rallocx, ToAnAlignment) {
  for (size_t align : {64ul, 4096ul, 65536ul, 4 * kMiB}) {
    void* p = mallocx(3000, 0);
    fill(p, 3000, 2);
    void* q = rallocx(p, 7000, MALLOCX_ALIGN(align));
    ASSERT_NE(q, nullptr);
    EXPECT_TRUE(aligned(q, align)) << align;
    EXPECT_TRUE(check(q, 3000, 2));
    dallocx(q, 0);
  }
}

TEST(Rallocx, FailureLeavesTheBlockIntact) {
  for (size_t size : {40ul, 50000ul, 5 * kMiB}) {
    void* p = mallocx(size, 0);
    fill(p, size, 3);
    EXPECT_EQ(rallocx(p, opaque(SIZE_MAX), 0), nullptr);
    EXPECT_EQ(rallocx(p, opaque(kMaxSize + 1), 0), nullptr);
    EXPECT_TRUE(check(p, size, 3));
    dallocx(p, 0);
  }
}

// jemalloc(3): rallocx leaves the block with the usable size nallocx(size,
// flags) answers -- when it shrinks too, and with an alignment.
TEST(Rallocx, UsableSizeIsNallocxShrinkingAndAligned) {
  const size_t froms[] = {1, 100, 4096, 20000, 65536, 1 * kMiB, 3 * kMiB};
  for (size_t size : sizes()) {
    for (int lg = 0; lg <= 21; lg++) {
      const int flags = MALLOCX_LG_ALIGN(lg);
      for (size_t from : froms) {
        void* p = mallocx(from, 0);
        ASSERT_NE(p, nullptr);
        fill(p, from, 5);
        void* q = rallocx(p, size, flags);
        ASSERT_NE(q, nullptr) << from << " -> " << size << " lg " << lg;
        EXPECT_TRUE(aligned(q, size_t{1} << lg));
        EXPECT_EQ(sallocx(q, 0), nallocx(size, flags)) << from << " -> " << size << " lg " << lg;
        EXPECT_TRUE(check(q, from < size ? from : size, 5));
        dallocx(q, 0);
      }
    }
  }
  void* p = mallocx(65536, 0);
  p = rallocx(p, 57344, 0);
  EXPECT_EQ(sallocx(p, 0), 57344u);
  dallocx(p, 0);
}

TEST(Xallocx, NeverMovesAndAnswersTheRealSize) {
  for (size_t size : sizes()) {
    void* p = mallocx(size, 0);
    fill(p, size, 4);
    size_t old = sallocx(p, 0);
    for (size_t want : {size, old, old + 1, old * 2 + 100}) {
      size_t got = xallocx(p, want, 0, 0);
      EXPECT_EQ(got, sallocx(p, 0)) << size << " -> " << want;
      EXPECT_TRUE(got >= want || got == old) << size << " -> " << want << ": " << got;
      EXPECT_TRUE(check(p, size, 4));
      old = got;
    }
    dallocx(p, 0);
  }
}

TEST(Xallocx, SmallBlocksStayInTheirClass) {
  void* p = mallocx(16, 0);
  EXPECT_EQ(xallocx(p, 17, 0, 0), 16u);
  EXPECT_EQ(xallocx(p, 16, 1000, 0), 16u);
  EXPECT_EQ(xallocx(p, 1, 0, 0), 16u);
  dallocx(p, 0);
}

TEST(Xallocx, ExtraIsBestEffort) {
  void* p = mallocx(40000, 0);
  size_t got = xallocx(p, 30000, SIZE_MAX - 30000, 0);
  EXPECT_GE(got, 30000u);
  EXPECT_EQ(got, sallocx(p, 0));
  dallocx(p, 0);
}

TEST(Xallocx, LargeBlocksShrinkInPlace) {
  // 1 MiB: large for jemalloc, medium for ductile; both give the tail back.
  void* p = mallocx(kMiB, 0);
  fill(p, 100000, 5);
  size_t got = xallocx(p, 100000, 0, 0);
  EXPECT_GE(got, 100000u);
  EXPECT_LT(got, kMiB);
  EXPECT_EQ(got, nallocx(100000, 0));
  EXPECT_TRUE(check(p, 100000, 5));
  dallocx(p, 0);
}

TEST(Xallocx, AnAlignmentTheBlockLacksIsRefused) {
  void* p = mallocx(5000, 0);
  size_t old = sallocx(p, 0);
  size_t align = 4096;
  while (aligned(p, align)) align <<= 1;
  EXPECT_EQ(xallocx(p, 9000, 0, MALLOCX_ALIGN(align)), old);
  dallocx(p, 0);
}

TEST(Xallocx, HugeBlocksGrowInPlaceOnlyInDuctile) {
  void* p = mallocx(8 * kMiB, 0);
  ASSERT_NE(p, nullptr);
  fill(p, 8 * kMiB, 6);
  size_t got = xallocx(p, 16 * kMiB, 0, MALLOCX_ZERO);
  EXPECT_EQ(got, sallocx(p, 0));
  EXPECT_TRUE(check(p, 8 * kMiB, 6));
  if (kDuctile) {
    // Where ductile differs on purpose: a huge block's span has headroom as
    // large as the block, so doubling in place always succeeds.
    EXPECT_EQ(got, 16 * kMiB);
    EXPECT_TRUE(all_zero(p, 8 * kMiB, 16 * kMiB));
  } else {
    // jemalloc grows a large extent in place only into a free neighbour
    // (usually there is none: it answers the old size).
    EXPECT_TRUE(got == 8 * kMiB || got >= 16 * kMiB) << got;
  }
  dallocx(p, 0);
}

TEST(Sdallocx, EverySizeBetweenTheRequestAndTheUsableSize) {
  for (size_t size : sizes()) {
    size_t usable = nallocx(size, 0);
    size_t step = usable - size <= 4096 ? 1 : (usable - size) / 64 + 1;
    for (size_t s = size;; s += step) {
      if (s > usable) s = usable;
      void* p = mallocx(size, 0);
      ASSERT_NE(p, nullptr);
      sdallocx(p, s, 0);
      if (s == usable) break;
    }
  }
  for (size_t align : {64ul, 8192ul, 4 * kMiB}) {
    void* p = mallocx(1000, MALLOCX_ALIGN(align));
    sdallocx(p, 1000, MALLOCX_ALIGN(align));
  }
}

TEST(Mallctl, ReadRules) {
  size_t v = 0;
  size_t len = 4;
  EXPECT_EQ(mallctl("stats.allocated", &v, &len, nullptr, 0), EINVAL);
  EXPECT_EQ(len, 4u);
  char big[16];
  len = sizeof big;
  EXPECT_EQ(mallctl("stats.allocated", big, &len, nullptr, 0), EINVAL);
  EXPECT_EQ(len, sizeof(size_t));
  len = 5;
  EXPECT_EQ(mallctl("stats.allocated", nullptr, &len, nullptr, 0), 0);
  EXPECT_EQ(len, 5u);
}

TEST(Mallctl, WriteRules) {
  size_t v = 1;
  EXPECT_EQ(mallctl("stats.allocated", nullptr, nullptr, &v, sizeof v), EPERM);
  EXPECT_EQ(mallctl("version", nullptr, nullptr, &v, sizeof v), EPERM);
  bool b = false;
  EXPECT_EQ(mallctl("opt.tcache", nullptr, nullptr, &b, sizeof b), EPERM);
  uint64_t e = 0;
  EXPECT_EQ(mallctl("epoch", nullptr, nullptr, &e, 4), EINVAL);
  size_t len = sizeof v;
  EXPECT_EQ(mallctl("arena.0.purge", &v, &len, nullptr, 0), EPERM);
}

TEST(Mallctl, UnknownNames) {
  size_t v;
  for (const char* name : {"", "no.such.name", "stats", "stats.", "stats.nosuch", "version.x", "arena.100.purge",
                           "arena.x.purge", "opt.nosuch"}) {
    size_t len = sizeof v;
    EXPECT_EQ(mallctl(name, &v, &len, nullptr, 0), ENOENT) << '"' << name << '"';
  }
}

TEST(Mallctl, Epoch) {
  uint64_t e0 = 0, e1 = 0;
  ASSERT_EQ(ctl_read("epoch", &e0), 0);
  size_t len = sizeof e1;
  ASSERT_EQ(mallctl("epoch", &e1, &len, &e0, sizeof e0), 0);
  EXPECT_EQ(e1, e0 + 1);
}

size_t refreshed(const char* name) {
  uint64_t e = 1;
  mallctl("epoch", nullptr, nullptr, &e, sizeof e);
  size_t v = 0;
  EXPECT_EQ(ctl_read(name, &v), 0) << name;
  return v;
}

TEST(Mallctl, StatsFollowAllocations) {
  size_t allocated = refreshed("stats.allocated");
  size_t active = refreshed("stats.active");
  EXPECT_LE(allocated, active);
  EXPECT_LE(active, refreshed("stats.resident"));
  EXPECT_LE(active, refreshed("stats.mapped"));
  (void)refreshed("stats.retained");
  (void)refreshed("stats.metadata");
  void* p = mallocx(64 * kMiB, 0);
  std::memset(p, 1, kMiB);
  size_t grown = refreshed("stats.allocated");
  EXPECT_GE(grown, allocated + 64 * kMiB);
  dallocx(p, 0);
  EXPECT_LE(refreshed("stats.allocated"), grown - 64 * kMiB);
}

TEST(Mallctl, ThreadCounters) {
  bool stats = false;
  ASSERT_EQ(ctl_read("config.stats", &stats), 0);
  if (!stats) GTEST_SKIP() << "built without statistics";
  for (size_t size : {100ul, 50000ul, 6 * kMiB}) {
    uint64_t a0, a1, d0, d1;
    ASSERT_EQ(ctl_read("thread.allocated", &a0), 0);
    ASSERT_EQ(ctl_read("thread.deallocated", &d0), 0);
    void* p = mallocx(size, 0);
    ASSERT_EQ(ctl_read("thread.allocated", &a1), 0);
    EXPECT_GE(a1 - a0, size) << size;
    dallocx(p, 0);
    ASSERT_EQ(ctl_read("thread.deallocated", &d1), 0);
    EXPECT_GE(d1 - d0, size) << size;
  }
  uint64_t* ap = nullptr;
  ASSERT_EQ(ctl_read("thread.allocatedp", &ap), 0);
  ASSERT_NE(ap, nullptr);
  uint64_t before = *ap;
  void* p = mallocx(4000, 0);
  EXPECT_GE(*ap - before, 4000u);
  dallocx(p, 0);
}

TEST(Mallctl, ThreadCounterPointersStartAtTheCounters) {
  bool stats = false;
  ASSERT_EQ(ctl_read("config.stats", &stats), 0);
  if (!stats) GTEST_SKIP() << "built without statistics";
  std::thread([] {
    uint64_t a0 = 0, d0 = 0, a1 = 0, d1 = 0;
    ASSERT_EQ(ctl_read("thread.allocated", &a0), 0);
    ASSERT_EQ(ctl_read("thread.deallocated", &d0), 0);
    uint64_t* ap = nullptr;
    uint64_t* dp = nullptr;
    ASSERT_EQ(ctl_read("thread.allocatedp", &ap), 0);
    ASSERT_EQ(ctl_read("thread.deallocatedp", &dp), 0);
    EXPECT_EQ(*ap, a0);
    EXPECT_EQ(*dp, d0);
    ASSERT_EQ(ctl_read("thread.allocated", &a1), 0);
    ASSERT_EQ(ctl_read("thread.deallocated", &d1), 0);
    EXPECT_EQ(*ap, a1);
    EXPECT_EQ(*dp, d1);
  }).join();
}

// An arena of the program's own, and explicit thread caches, as programs
// written for jemalloc use them.
TEST(Mallctl, ArenasCreateAndMallocxArena) {
  unsigned n0 = 0, a = 0, n1 = 0;
  ASSERT_EQ(ctl_read("arenas.narenas", &n0), 0);
  ASSERT_EQ(ctl_read("arenas.create", &a), 0);
  EXPECT_EQ(a, n0);
  ASSERT_EQ(ctl_read("arenas.narenas", &n1), 0);
  EXPECT_EQ(n1, n0 + 1);
  for (size_t size : sizes()) {
    for (int flags : {MALLOCX_ARENA(a) | MALLOCX_TCACHE_NONE, MALLOCX_ARENA(a) | MALLOCX_TCACHE_NONE | MALLOCX_ZERO}) {
      void* p = mallocx(size, flags);
      ASSERT_NE(p, nullptr) << size;
      EXPECT_EQ(sallocx(p, 0), nallocx(size, flags)) << size;
      fill(p, size, 7);
      void* q = rallocx(p, size + size / 2, flags);
      ASSERT_NE(q, nullptr) << size;
      EXPECT_TRUE(check(q, size, 7)) << size;
      dallocx(q, flags);
    }
  }
  const std::string purge = "arena." + std::to_string(a) + ".purge";
  EXPECT_EQ(mallctl(purge.c_str(), nullptr, nullptr, nullptr, 0), 0);
  std::thread([a, n1] {
    unsigned v = a, old = 0, now = 0;
    size_t len = sizeof old;
    EXPECT_EQ(mallctl("thread.arena", &old, &len, &v, sizeof v), 0);
    ASSERT_EQ(ctl_read("thread.arena", &now), 0);
    EXPECT_EQ(now, a);
    v = n1 + 100;
    EXPECT_EQ(mallctl("thread.arena", nullptr, nullptr, &v, sizeof v), EFAULT);
    void* p = malloc(100);
    free(p);
  }).join();
}

TEST(Mallctl, ExplicitThreadCaches) {
  unsigned t = 0;
  ASSERT_EQ(ctl_read("tcache.create", &t), 0);
  for (size_t size : sizes()) {
    void* p = mallocx(size, MALLOCX_TCACHE(t));
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(sallocx(p, 0), nallocx(size, 0));
    dallocx(p, MALLOCX_TCACHE(t));
  }
  EXPECT_EQ(mallctl("tcache.flush", nullptr, nullptr, &t, sizeof t), 0);
  EXPECT_EQ(mallctl("tcache.flush", nullptr, nullptr, nullptr, 0), EINVAL);  // no index
  EXPECT_EQ(mallctl("tcache.destroy", nullptr, nullptr, &t, sizeof t), 0);
}

TEST(Mallctl, PurgeAndDecay) {
  std::vector<void*> v;
  for (int i = 0; i < 32; i++) v.push_back(mallocx(100000 + i * 8192, 0));
  for (void* p : v) dallocx(p, 0);
  EXPECT_EQ(mallctl("arena.0.purge", nullptr, nullptr, nullptr, 0), 0);
  EXPECT_EQ(mallctl("arena.4096.purge", nullptr, nullptr, nullptr, 0), 0);
  EXPECT_EQ(mallctl("arena.0.decay", nullptr, nullptr, nullptr, 0), 0);
  EXPECT_EQ(mallctl("arena.4096.decay", nullptr, nullptr, nullptr, 0), 0);
  EXPECT_EQ(mallctl("thread.tcache.flush", nullptr, nullptr, nullptr, 0), 0);
}

TEST(Mallctl, ArenasAndOptions) {
  unsigned n = 0;
  ASSERT_EQ(ctl_read("arenas.narenas", &n), 0);
  EXPECT_GE(n, 1u);
  ASSERT_EQ(ctl_read("opt.narenas", &n), 0);
  size_t page = 0;
  ASSERT_EQ(ctl_read("arenas.page", &page), 0);
  EXPECT_EQ(page, 4096u);
  bool b;
  ASSERT_EQ(ctl_read("opt.tcache", &b), 0);
  ASSERT_EQ(ctl_read("opt.stats_print", &b), 0);
  EXPECT_FALSE(b);
  const char* thp = nullptr;
  ASSERT_EQ(ctl_read("opt.thp", &thp), 0);
  EXPECT_NE(thp, nullptr);
  ssize_t decay = 0;
  ASSERT_EQ(ctl_read("opt.dirty_decay_ms", &decay), 0);
  EXPECT_EQ(decay, 10000);  // both default to 10 s
}

// Heap profiling's names with profiling off (the default in both): the
// options read their defaults, prof.active reads false and cannot be
// switched on, prof.reset and prof.dump do not exist, and prof.lg_sample
// reads 0 (jemalloc sets it when profiling starts).
TEST(Mallctl, ProfilingNamesWhileItIsOff) {
  bool b = true;
  ASSERT_EQ(ctl_read("config.prof", &b), 0);
  if (kDuctile && !b) {  // configure --disable-prof: the prof.* names do not exist
    size_t lg = 0;
    EXPECT_EQ(ctl_read("prof.lg_sample", &lg), ENOENT);
    EXPECT_EQ(ctl_read("prof.active", &b), ENOENT);
    return;
  }
  EXPECT_TRUE(b);  // built in (Debian's jemalloc is built --enable-prof)
  ASSERT_EQ(ctl_read("opt.prof", &b), 0);
  EXPECT_FALSE(b);
  ASSERT_EQ(ctl_read("opt.prof_active", &b), 0);
  EXPECT_TRUE(b);
  ASSERT_EQ(ctl_read("opt.prof_final", &b), 0);
  EXPECT_FALSE(b);
  ASSERT_EQ(ctl_read("opt.prof_leak", &b), 0);
  EXPECT_FALSE(b);
  size_t lg = 0;
  ASSERT_EQ(ctl_read("opt.lg_prof_sample", &lg), 0);
  EXPECT_EQ(lg, 19u);  // 512 KiB
  ASSERT_EQ(ctl_read("prof.lg_sample", &lg), 0);
  EXPECT_EQ(lg, 0u);
  const char* prefix = nullptr;
  ASSERT_EQ(ctl_read("opt.prof_prefix", &prefix), 0);
  EXPECT_STREQ(prefix, "jeprof");

  ASSERT_EQ(ctl_read("prof.active", &b), 0);
  EXPECT_FALSE(b);
  bool on = true;
  EXPECT_EQ(mallctl("prof.active", nullptr, nullptr, &on, sizeof on), ENOENT);
  EXPECT_EQ(mallctl("prof.reset", nullptr, nullptr, nullptr, 0), ENOENT);
  const char* name = "/nonexistent/never.heap";
  EXPECT_EQ(mallctl("prof.dump", nullptr, nullptr, &name, sizeof name), ENOENT);
  EXPECT_EQ(mallctl("prof.dump", nullptr, nullptr, nullptr, 0), ENOENT);
  EXPECT_EQ(mallctl("prof.lg_sample", nullptr, nullptr, &lg, sizeof lg), EPERM);
}

TEST(Mallctl, DirtyDecayIsWritable) {
  ssize_t old = 0, v = 5000, bad = -2, back = 0;
  size_t len = sizeof old;
  ASSERT_EQ(mallctl("arenas.dirty_decay_ms", &old, &len, &v, sizeof v), 0);
  ASSERT_EQ(ctl_read("arenas.dirty_decay_ms", &back), 0);
  EXPECT_EQ(back, 5000);
  EXPECT_EQ(mallctl("arenas.dirty_decay_ms", nullptr, nullptr, &bad, sizeof bad), EFAULT);
  EXPECT_EQ(mallctl("arenas.dirty_decay_ms", nullptr, nullptr, &v, 4), EINVAL);
  ASSERT_EQ(mallctl("arenas.dirty_decay_ms", nullptr, nullptr, &old, sizeof old), 0);
}

TEST(Mib, NameToMibAndBack) {
  size_t mib[8];
  size_t miblen = 8;
  ASSERT_EQ(mallctlnametomib("arenas.page", mib, &miblen), 0);
  EXPECT_EQ(miblen, 2u);
  size_t page = 0, len = sizeof page;
  ASSERT_EQ(mallctlbymib(mib, miblen, &page, &len, nullptr, 0), 0);
  EXPECT_EQ(page, 4096u);
  // A partial MIB, then completed by hand.
  miblen = 1;
  ASSERT_EQ(mallctlnametomib("stats.allocated", mib, &miblen), 0);
  EXPECT_EQ(miblen, 1u);
  EXPECT_EQ(mallctlbymib(mib, 1, nullptr, nullptr, nullptr, 0), ENOENT);
  miblen = 8;
  ASSERT_EQ(mallctlnametomib("arena.0.purge", mib, &miblen), 0);
  ASSERT_EQ(miblen, 3u);
  EXPECT_EQ(mib[1], 0u);
  mib[1] = MALLCTL_ARENAS_ALL;
  EXPECT_EQ(mallctlbymib(mib, 3, nullptr, nullptr, nullptr, 0), 0);
  miblen = 8;
  EXPECT_EQ(mallctlnametomib("no.such", mib, &miblen), ENOENT);
  miblen = 8;
  EXPECT_EQ(mallctlnametomib("version.x", mib, &miblen), ENOENT);
}

void append(void* out, const char* s) { static_cast<std::string*>(out)->append(s); }

TEST(StatsPrint, TextAndJson) {
  std::string text, json;
  malloc_stats_print(append, &text, nullptr);
  malloc_stats_print(append, &json, "J");
  EXPECT_GT(text.size(), 200u);
  EXPECT_TRUE(json_check::valid(json)) << json.substr(0, 2000);
  EXPECT_NE(json.find(kDuctile ? "\"ductile\"" : "\"jemalloc\""), std::string::npos);
}

TEST(MallocFamily, ReallocToZeroAndFreeNull) {
  // Both follow glibc: realloc(p, 0) frees and returns NULL (jemalloc 5.3's
  // default zero_realloc:free).
  void* p = malloc(10);
  EXPECT_EQ(realloc(p, 0), nullptr);
  free(nullptr);
  void* q = realloc(nullptr, 0);
  EXPECT_NE(q, nullptr);
  free(q);
}

}  // namespace
