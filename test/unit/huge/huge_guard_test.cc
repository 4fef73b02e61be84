// SPDX-License-Identifier: BSD-2-Clause
// Guard pages behind huge blocks (huge/huge.cc, hardened mode): made, moved with growth and
// shrink, and lifted; by guard markers, by mprotect, and under strict overcommit.
#include <sys/mman.h>

#include <cerrno>
#include <cstring>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "chunk/chunk.h"
#include "huge/huge.h"
#include "support/fake_kernel.h"
#include "support/maps.h"
#include "unit/huge/huge_fixture.h"

namespace ductile {
namespace {

using chunk::Extent;
using huge::GrowthPath;
using test::HugeTest;
using test::Sys;
using test::all_zero;
using test::fill;
using test::guarded;
using test::holds;
using test::kMiB;

// ---- guard pages (hardened mode) ---------------------------------------------
// With Options::guard, the page past a block's usable end is PROT_NONE, and
// the span always has that page; the headroom past it stays read/write
// (under strict overcommit everything past the block is uncommitted,
// PROT_NONE). Checked with the kernel's own view (/proc/self/maps).

// How guards are made: guard markers where the kernel has them (Linux
// 6.13; mprotect where it does not), mprotect because the kernel refuses
// markers (an older one), or under strict overcommit.
enum class GuardMode { kMarkers, kMprotect, kStrict };

class HugeGuardTest : public HugeTest, public ::testing::WithParamInterface<GuardMode> {
 protected:
  bool strict() const { return GetParam() == GuardMode::kStrict; }
  void make_guarded(size_t reservation = 256 * kMiB, unsigned growth_headroom_factor = 7) {
    kernel_.overcommit = strict() ? "2\n" : "0\n";
    if (GetParam() == GuardMode::kMprotect) kernel_.guard_markers_errno = EINVAL;
    huge::Options o = guarded();
    o.growth_headroom_factor = growth_headroom_factor;
    make(reservation, o);
    ASSERT_EQ(os_->features().strict_overcommit, strict());
  }
  // Normal mode: the kind of call that makes and lifts a guard (known once
  // a first guard was made).
  os::Call guard_call() const { return os_->guard_markers() ? os::Call::kMadvise : os::Call::kMprotect; }
  // The block writable and the page past it not.
  void expect_guarded_end(const Extent* e) {
    const uintptr_t end = e->base + e->usable;
    EXPECT_EQ(test::open_bytes(e->base, end), e->usable);
    EXPECT_EQ(test::open_bytes(end, end + kPage), 0u);
  }
  // That, and the headroom past the guard page: writable in normal mode
  // (its protection never changed), none of it under strict overcommit
  // (uncommitted).
  void expect_guarded(const Extent* e) {
    ASSERT_NE(e, nullptr);
    const uintptr_t end = e->base + e->usable;
    ASSERT_GE(e->end(), end + kPage) << "no guard page in the span";
    expect_guarded_end(e);
    EXPECT_EQ(test::open_bytes(end + kPage, e->end()), strict() ? 0 : e->end() - end - kPage);
  }
  // A span that went back: all of it usable again for whoever takes it next.
  // (Under strict overcommit free space is PROT_NONE anyway, until committed.)
  void expect_reusable(uintptr_t lo, uintptr_t hi) {
    if (!strict()) {
      EXPECT_EQ(test::open_bytes(lo, hi), hi - lo);
    }
  }
};

TEST_P(HugeGuardTest, EveryBlockEndsAtAGuard) {
  make_guarded();
  for (size_t size : {2 * kMiB, 3 * kMiB, 3 * kMiB + 1, 4 * kMiB, 10 * kMiB}) {
    void* p = alloc(size);
    Extent* e = extent(p);
    EXPECT_GE(e->usable, size);
    fill(p, e->usable, 'g');
    expect_guarded(e);
    const uintptr_t lo = e->base, hi = e->end();
    free(p);
    expect_reusable(lo, hi);
  }
  expect_empty();
}

TEST_P(HugeGuardTest, TheGuardFollowsGrowthInPlaceAndShrink) {
  make_guarded();
  void* p = alloc(3 * kMiB);
  Extent* e = extent(p);
  fill(p, 3 * kMiB, 'a');
  // Headroom (normal mode; under strict overcommit a new block has none):
  // two calls, the guard page moved and the added pages opened.
  if (GetParam() == GuardMode::kMprotect) {
    EXPECT_FALSE(os_->guard_markers());
  }
  const uint64_t before = syscalls(), guard_calls = strict() ? 0 : calls(guard_call());
  ASSERT_EQ(huge_->resize(e, 3 * kMiB + 512 * 1024, kPage, false), p);
  if (!strict()) {
    EXPECT_EQ(syscalls() - before, 2u);
    EXPECT_EQ(calls(guard_call()) - guard_calls, 2u);
    EXPECT_EQ(growth(GrowthPath::kHeadroom), 1u);
  }
  expect_guarded(e);
  // Exactly to the span's end would leave no guard: it takes the neighbour.
  const uint64_t neighbour = growth(GrowthPath::kNeighbour);
  ASSERT_EQ(huge_->resize(e, e->size, kPage, false), p);
  EXPECT_EQ(growth(GrowthPath::kNeighbour), neighbour + 1);
  expect_guarded(e);
  fill(p, e->usable, 'b');
  ASSERT_EQ(huge_->resize(e, 40 * kMiB, kPage, false), p);
  expect_guarded(e);
  fill(p, e->usable, 'c');
  // Shrink: the pages given up become guard (and the span's tail goes back).
  EXPECT_EQ(huge_->resize_in_place(e, 5 * kMiB, false), 5 * kMiB);
  expect_guarded(e);
  EXPECT_TRUE(holds(p, 5 * kMiB, 'c'));
  // Regrow over them: open again, and zeroed when asked.
  ASSERT_EQ(huge_->resize(e, 7 * kMiB, kPage, true), p);
  expect_guarded(e);
  EXPECT_TRUE(all_zero(static_cast<char*>(p) + 5 * kMiB, 2 * kMiB));
  fill(p, 7 * kMiB, 'd');
  expect_consistent();
  const uintptr_t lo = e->base, hi = e->end();
  free(p);
  expect_reusable(lo, hi);
  expect_empty();
}

TEST_P(HugeGuardTest, TheGuardFollowsFixedMapMremapAndCopy) {
  make_guarded(4 * kMiB, 1);  // spans of twice the block: each move doubles, not octuples, them
  void* p = alloc(2 * kMiB);
  Extent* e = extent(p);
  fill(p, 2 * kMiB, 'f');
  if (unmapped(e->end(), 16 * kMiB) && chunks_->lookup(ptr(e->end())) == nullptr) {
    ASSERT_EQ(huge_->resize(e, 12 * kMiB, kPage, false), p);
    EXPECT_EQ(growth(GrowthPath::kFixedMap), 1u);
    expect_guarded(e);
    fill(p, 12 * kMiB, 'f');
  }
  Blocker b = block_after(e);
  void* q = huge_->resize(e, 2 * e->size, kPage, false);
  ASSERT_NE(q, nullptr);
  unblock(b);
  EXPECT_EQ(growth(GrowthPath::kMremap), 1u);
  Extent* t = extent(q);
  expect_guarded(t);
  EXPECT_TRUE(holds(q, 2 * kMiB, 'f'));
  fill(q, t->usable, 'm');
  b = block_after(t);
  kernel_.fail(Sys::kMremap, ENOMEM);
  void* r = huge_->resize(t, 2 * t->size, kPage, true);
  kernel_.clear_failures();
  ASSERT_NE(r, nullptr);
  unblock(b);
  EXPECT_EQ(growth(GrowthPath::kCopy), 1u);
  Extent* c = extent(r);
  expect_guarded(c);
  EXPECT_TRUE(holds(r, 2 * kMiB, 'm'));
  fill(r, c->usable, 'c');
  free(r);
  expect_empty();
  // Everything that went back is usable again.
  void* big = alloc(64 * kMiB);
  fill(big, 64 * kMiB, 'x');
  expect_guarded(extent(big));
  free(big);
  expect_empty();
}

// Free spans are whole again: many blocks of mixed sizes, freed in a random
// order and reallocated bigger, always end at a guard and never fault.
TEST_P(HugeGuardTest, RandomCycleKeepsEveryGuard) {
  make_guarded(64 * kMiB, 1);
  std::mt19937 rng(12);
  std::vector<void*> live;
  for (int i = 0; i < 150; i++) {
    if (!live.empty() && rng() % 3 == 0) {
      size_t k = rng() % live.size();
      Extent* e = extent(live[k]);
      const size_t to = (2 + rng() % 12) * kMiB + (rng() % 4) * kPage;
      void* q = huge_->resize(e, to, kPage, rng() % 2 == 0);
      ASSERT_NE(q, nullptr);
      Extent* t = extent(q);
      expect_guarded(t);
      fill(q, t->usable, static_cast<unsigned char>(i));
      live[k] = q;
    } else if (!live.empty() && rng() % 2 == 0) {
      size_t k = rng() % live.size();
      free(live[k]);
      live.erase(live.begin() + static_cast<long>(k));
    } else {
      void* p = alloc((2 + rng() % 6) * kMiB + (rng() % 3) * kPage);
      Extent* e = extent(p);
      expect_guarded(e);
      fill(p, e->usable, static_cast<unsigned char>(i));
      live.push_back(p);
    }
    if (HasFatalFailure() || HasFailure()) break;
  }
  for (void* p : live) free(p);
  expect_empty();
}

// A guard splits its reservation's mapping (2 more mappings per live block);
// in normal overcommit mode, lifted, the pieces merge again: freed blocks leave no mappings behind,
// also when each block's pages were first written after the split.
TEST_P(HugeGuardTest, FreedBlocksLeaveNoMappingsBehind) {
  make_guarded();
  std::vector<void*> warm;  // the reservations, made before counting
  for (int i = 0; i < 60; i++) warm.push_back(alloc(2 * kMiB));
  for (void* p : warm) free(p);
  const size_t before = test::mapping_count();
  std::vector<void*> live;
  for (size_t i = 0; i < 60; i++) {
    void* p = alloc(2 * kMiB + (i % 3) * kPage);
    live.push_back(p);
  }
  const size_t during = test::mapping_count();
  for (size_t i = 0; i < live.size(); i++) static_cast<char*>(live[i])[kPage * (i % 4)] = 1;
  for (void* p : live) free(p);
  const size_t after = test::mapping_count();
  // (Under strict overcommit freed blocks stay committed, read/write
  // islands in PROT_NONE free space, until decay purges them.) Guard
  // markers split nothing: live blocks cost no mappings either, so that
  // the mapping limit does not cap how many a program holds.
  if (!strict()) {
    if (os_->guard_markers()) EXPECT_LE(during, before + 2);
    else EXPECT_GE(during, before + 2 * live.size() - 2);
    EXPECT_LE(after, before + 2) << "during " << during;
  }
  expect_empty();
}

// A shrink whose guard the kernel refuses does not happen: the block keeps
// its size, its bytes and its guard.
TEST_P(HugeGuardTest, ARefusedGuardLeavesTheShrinkUndone) {
  make_guarded();
  void* p = alloc(10 * kMiB);
  Extent* e = extent(p);
  fill(p, 10 * kMiB, 's');
  kernel_.fail(strict() ? Sys::kMmap : os_->guard_markers() ? Sys::kMadvise : Sys::kMprotect, ENOMEM, 1000);
  EXPECT_EQ(huge_->resize_in_place(e, 3 * kMiB, false), 10 * kMiB);
  EXPECT_EQ(huge_->resize(e, 3 * kMiB, kPage, false), p);
  kernel_.clear_failures();
  EXPECT_EQ(e->usable, 10 * kMiB);
  expect_guarded(e);
  EXPECT_TRUE(holds(p, 10 * kMiB, 's'));
  EXPECT_EQ(huge_->resize_in_place(e, 3 * kMiB, false), 3 * kMiB);
  expect_guarded(e);
  EXPECT_TRUE(holds(p, 3 * kMiB, 's'));
  free(p);
  expect_empty();
}

// Normal overcommit: every lift of a guard covers its one page, not the
// headroom behind it -- removing guard markers walks the page tables of
// the whole range given (the headroom of an 8 MiB block made its free take
// 8.4 us instead of 3.3).
TEST_P(HugeGuardTest, ALiftCoversTheGuardPageAlone) {
  if (strict()) GTEST_SKIP() << "under strict overcommit the guard is the uncommitted rest of the span";
  make_guarded();
  void* p = alloc(8 * kMiB);
  Extent* e = extent(p);
  ASSERT_GT(e->size, e->usable + 2 * kPage);  // headroom past the guard page
  fill(p, e->usable, 'l');
  std::memset(ptr(e->base + e->usable + kPage), 'h', 4 * kPage);  // resident headroom
  const os::Call kind = guard_call();
  auto lifts = [&] {
    std::vector<size_t> n;
    for (const auto& c : kernel_.calls())
      if ((kind == os::Call::kMadvise && c.sys == Sys::kMadvise && c.arg == 103) ||
          (kind == os::Call::kMprotect && c.sys == Sys::kMprotect && c.arg == (PROT_READ | PROT_WRITE)))
        n.push_back(c.len);
    return n;
  };
  kernel_.reset_calls();
  ASSERT_EQ(huge_->resize(e, 8 * kMiB + 3 * kPage, kPage, false), p);  // into the headroom
  EXPECT_EQ(lifts(), std::vector<size_t>{kPage});
  expect_guarded(e);
  kernel_.reset_calls();
  EXPECT_EQ(huge_->resize_in_place(e, 6 * kMiB, false), 6 * kMiB);  // shrink
  EXPECT_EQ(lifts(), std::vector<size_t>{kPage});
  expect_guarded(e);
  EXPECT_TRUE(holds(p, 6 * kMiB, 'l'));
  const uintptr_t lo = e->base, hi = e->end();
  kernel_.reset_calls();
  free(p);
  EXPECT_EQ(lifts(), std::vector<size_t>{kPage});
  expect_reusable(lo, hi);
  expect_empty();
}

// A growth whose old guard page the kernel will not lift, nor then the new
// one: the block stays as it was, and the guard page left in the headroom
// is lifted with the rest when the span goes back (Span::strays), so that
// free space holds no guard.
TEST_P(HugeGuardTest, AGuardLeftInTheHeadroomIsLiftedAtFree) {
  if (strict()) GTEST_SKIP() << "under strict overcommit the guard is the uncommitted rest of the span";
  make_guarded();
  void* p = alloc(4 * kMiB);
  Extent* e = extent(p);
  fill(p, e->usable, 's');
  const size_t usable = e->usable;
  // The growth's calls: place the new guard page (passes), lift the old one
  // (refused), lift the new one again (refused).
  kernel_.fail(os_->guard_markers() ? Sys::kMadvise : Sys::kMprotect, ENOMEM, 2, 1);
  EXPECT_EQ(huge_->resize_in_place(e, usable + 3 * kPage, false), usable);
  kernel_.clear_failures();
  EXPECT_EQ(e->usable, usable);
  EXPECT_TRUE(holds(p, usable, 's'));
  expect_guarded_end(e);
  EXPECT_EQ(test::open_bytes(e->base + usable + 3 * kPage, e->base + usable + 4 * kPage), 0u) << "the stray guard";
  const uintptr_t lo = e->base, hi = e->end();
  free(p);
  expect_reusable(lo, hi);
  // A shrink whose old guard page the kernel will not lift: the block
  // shrinks (its new guard placed), the old guard page stays behind.
  p = alloc(4 * kMiB);
  e = extent(p);
  kernel_.fail(os_->guard_markers() ? Sys::kMadvise : Sys::kMprotect, ENOMEM, 1, 1);
  EXPECT_EQ(huge_->resize_in_place(e, 3 * kMiB, false), 3 * kMiB);
  kernel_.clear_failures();
  expect_guarded_end(e);
  const uintptr_t lo2 = e->base, hi2 = e->end();
  free(p);
  expect_reusable(lo2, hi2);
  expect_empty();
}

INSTANTIATE_TEST_SUITE_P(Modes, HugeGuardTest,
                         ::testing::Values(GuardMode::kMarkers, GuardMode::kMprotect, GuardMode::kStrict),
                         [](const ::testing::TestParamInfo<GuardMode>& i) {
                           return std::string(i.param == GuardMode::kMarkers    ? "normal"
                                              : i.param == GuardMode::kMprotect ? "normal_mprotect"
                                                                                : "strict");
                         });

// Without the guard (the default), no mprotect anywhere in a block's life
// in normal overcommit mode, and headroom growth is free.
TEST_F(HugeTest, DefaultModeMakesNoMprotect) {
  const uint64_t before = calls(os::Call::kMprotect);
  void* p = alloc(3 * kMiB);
  const uint64_t all = syscalls();
  ASSERT_EQ(huge_->resize(extent(p), 3 * kMiB + 512 * 1024, kPage, false), p);
  EXPECT_EQ(syscalls(), all);  // headroom: no call at all
  ASSERT_EQ(huge_->resize(extent(p), 40 * kMiB, kPage, false), p);
  EXPECT_EQ(huge_->resize_in_place(extent(p), 5 * kMiB, false), 5 * kMiB);
  void* busy = alloc(2 * kMiB);
  Blocker b = block_after(extent(p));
  void* q = huge_->resize(extent(p), 200 * kMiB, kPage, true);
  ASSERT_NE(q, nullptr);
  unblock(b);
  free(q);
  free(busy);
  EXPECT_EQ(test::writable_bytes(addr(q), addr(q) + 200 * kMiB), 200 * kMiB);
  EXPECT_EQ(calls(os::Call::kMprotect), before);
  expect_empty();
}

}  // namespace
}  // namespace ductile
