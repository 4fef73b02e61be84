// SPDX-License-Identifier: BSD-2-Clause
// The Runtime made from the options (core/startup.cc): the dense space by the kernel's THP mode
// and the policy, the plain space of an arena of tens of MiB, and the bin sets it does not make.
//
// This program links the library's objects, so ductile is also the allocator of the
// test process itself.
#include <vector>

#include <gtest/gtest.h>

#include "core/runtime.h"
#include "core/stats.h"
#include "ductile/ductile.h"
#include "support/maps.h"

namespace ductile {
namespace {

// Only the sets of bins in use are made: the others' storage (static, in
// the library's zero pages) is never written, so never resident. Making
// all eight wrote 44 KiB, 11 page faults of every program's start.
TEST(Startup, BinSetsNotInUseAreNeverTouched) {
  ASSERT_TRUE(core::ensure_ready());
  core::Runtime& rt = core::rt();
  if (rt.nbinsets >= core::Runtime::kMaxBinSets) GTEST_SKIP() << "every set is in use";
  const uintptr_t from = align_up(addr(&rt.bins[rt.nbinsets][0]), kPage);
  const uintptr_t to = align_down(addr(&rt.bins[core::Runtime::kMaxBinSets - 1][small::kNumSmall - 1]), kPage);
  ASSERT_GT(to, from);
  EXPECT_EQ(test::resident_pages(ptr(from), to - from), 0u);
  EXPECT_GT(test::resident_pages(&rt.bins[0][0], sizeof(small::Bin)), 0u);
}

TEST(Realloc, GrowingMediumSpaceFollowsTheKernelsModeAndThePolicy) {
  using huge::ThpPolicy;
  using os::ThpMode;
  EXPECT_EQ(core::dense_space(ThpPolicy::kAuto, ThpMode::kMadvise), chunk::Space::kDense);
  EXPECT_EQ(core::dense_space(ThpPolicy::kAlways, ThpMode::kMadvise), chunk::Space::kDense);
  EXPECT_EQ(core::dense_space(ThpPolicy::kNever, ThpMode::kMadvise), chunk::Space::kPlain);
  for (ThpMode m : {ThpMode::kAlways, ThpMode::kNever, ThpMode::kUnknown})
    for (ThpPolicy p : {ThpPolicy::kAuto, ThpPolicy::kAlways, ThpPolicy::kNever})
      EXPECT_EQ(core::dense_space(p, m), chunk::Space::kPlain);
  ASSERT_TRUE(core::ensure_ready());  // the runtime is made by ductile's first call
  EXPECT_EQ(core::rt().growing_medium(), core::dense_space(core::rt().opts.thp, core::rt().os.thp_mode()));
}

// A touched huge page is resident whole: an arena with tens of MiB of small
// objects keeps its slab regions in plain space, so that its last region,
// partly used, is resident only as far as it is used (with regions from the
// dense space after the first 16, a million 72-byte objects cost 82.2 bytes
// each instead of 80.5, over the goal of their class + 2 %). An arena of
// 64 regions (128 MiB) takes its next ones from the dense space.
TEST(SmallObjects, AnArenaOfTensOfMiBKeepsItsRegionsInPlainSpace) {
  ASSERT_TRUE(core::ensure_ready());
  core::StatsSnapshot s;
  core::take_snapshot(s);
  const size_t dense_before = s.arena.dense;
  std::vector<void*> v(1000000);
  for (void*& p : v) {
    p = ductile_malloc(72);
    ASSERT_NE(p, nullptr);
    static_cast<char*>(p)[0] = 1;
  }
  core::take_snapshot(s);
  EXPECT_EQ(s.arena.dense, dense_before);
  EXPECT_GE(s.arena.regions, 35u);  // 72 MB of 80-byte objects
  if (core::rt().growing_medium() == chunk::Space::kDense) {
    // Past 128 MiB the arena's next regions are dense.
    std::vector<void*> more(1000000);
    for (void*& p : more) {
      p = ductile_malloc(72);
      ASSERT_NE(p, nullptr);
    }
    core::take_snapshot(s);
    EXPECT_GT(s.arena.dense, dense_before);
    for (void* p : more) ductile_free(p);
  }
  for (void* p : v) ductile_free(p);
  // Leave no region half full for later tests to fill (their threads'
  // slabs would land in these regions' holes, which never fall whole-free).
  ductile_trim();
}

}  // namespace
}  // namespace ductile
