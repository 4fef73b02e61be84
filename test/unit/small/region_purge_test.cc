// SPDX-License-Identifier: BSD-2-Clause
// What the slab arena gives back (small/region_purge.cc): empty and almost empty regions purged
// with decay and trim, and strict overcommit's charge.
#include <sys/mman.h>

#include <cstring>
#include <vector>

#include <gtest/gtest.h>

#include "chunk/chunk.h"
#include "small/region.h"
#include "support/fake_clock.h"
#include "support/fake_kernel.h"
#include "support/layers.h"
#include "support/maps.h"
#include "unit/small/region_fixture.h"

namespace ductile {
namespace {

using namespace small;
using test::RegionTest;

TEST_F(RegionTest, AnAdvisedRegionKeepsItsHugePageWhileInUse) {
  std::vector<Lent> v = carve(kRegionSize);  // a whole, busy region
  ASSERT_EQ(arena_.stats().advised, 1u);
  const uintptr_t base = v[0].extent->base;
  const size_t before = purges();
  // Half of its slabs go: no purge of a few small pages inside the huge page.
  std::vector<Lent> half(v.begin(), v.begin() + v.size() / 2);
  arena_.free(half.data(), half.size());
  EXPECT_EQ(purges(), before);
  EXPECT_EQ(arena_.stats().dirty_pages, kRegionPages / 2);
  // The rest go: the region is empty, kept whole for the next slab (one
  // region is retained), still without a purge.
  std::vector<Lent> rest(v.begin() + v.size() / 2, v.end());
  arena_.free(rest.data(), rest.size());
  EXPECT_EQ(purges(), before);
  EXPECT_EQ(arena_.stats().regions, 1u);
  // trim gives it back, purged whole: one range of exactly the huge page.
  kernel_.reset_calls();
  EXPECT_EQ(arena_.trim(), kRegionSize);
  EXPECT_EQ(arena_.stats().regions, 0u);
  EXPECT_EQ(chunks_->stats().active, 0u);
  bool whole = false;
  for (const auto& c : kernel_.calls())
    if ((c.sys == test::Sys::kMadvise && c.arg == MADV_DONTNEED && addr(c.addr) == base &&
         c.len == kRegionSize) ||
        c.sys == test::Sys::kProcessMadvise)
      whole = true;
  EXPECT_TRUE(whole);
  EXPECT_EQ(purges(), 1u);
}

TEST_F(RegionTest, ASecondEmptyRegionGoesBackWholeAndDecaysAsOneHugePage) {
  std::vector<Lent> a = carve(kRegionSize);
  std::vector<Lent> b = carve(kRegionSize);
  ASSERT_EQ(arena_.stats().regions, 2u);
  const uintptr_t b_base = b[0].extent->base;
  arena_.free(a.data(), a.size());  // retained
  const size_t before = purges();
  const uint64_t releases = arena_.stats().region_releases;
  arena_.free(b.data(), b.size());  // one too many: back to the chunk layer, whole
  EXPECT_EQ(arena_.stats().regions, 1u);
  EXPECT_EQ(arena_.stats().region_releases, releases + 1);
  EXPECT_EQ(purges(), before);  // not purged yet: the next user may take it as it is
  EXPECT_EQ(chunks_->stats().active, kRegionSize);
  EXPECT_EQ(chunks_->stats().dirty, kRegionSize);
  // The next region taken is that one, its pages still in place (no fault).
  std::vector<Lent> c = carve(kRegionSize + 16 * kPage);
  EXPECT_EQ(c.back().extent->base, b_base);
  EXPECT_EQ(chunks_->stats().dirty, 0u);
  arena_.free(c.data(), c.size());
  EXPECT_EQ(chunks_->stats().dirty, kRegionSize);
  // Left alone for the decay time, it is purged as one range: the huge page.
  kernel_.reset_calls();
  clock_.advance_ms(11000);
  (void)chunks_->decay();
  bool whole = false;
  for (const auto& call : kernel_.calls())
    if ((call.sys == test::Sys::kMadvise && call.arg == MADV_DONTNEED && call.len == kRegionSize) ||
        call.sys == test::Sys::kProcessMadvise)
      whole = true;
  EXPECT_TRUE(whole);
  EXPECT_EQ(chunks_->stats().dirty, 0u);
  arena_.trim();
}

TEST_F(RegionTest, AnAdvisedRegionLeftAlmostEmptyForTheDecayTimePurgesItsFreePages) {
  std::vector<Lent> v = carve(kRegionSize);
  // Keep 3 slabs (48 pages, under 1/8 of the region), return the rest.
  std::vector<Lent> keep(v.begin(), v.begin() + 3);
  std::vector<Lent> go(v.begin() + 3, v.end());
  arena_.free(go.data(), go.size());
  // Almost empty, but it may fill up again: its pages stay for now.
  EXPECT_EQ(arena_.stats().purged_pages, 0u);
  EXPECT_EQ(arena_.stats().dirty_pages, kRegionPages - 3 * 16);
  // Still so after the decay time: the next return purges its free pages.
  clock_.advance_ms(11000);
  Lent one = keep.back();
  keep.pop_back();
  arena_.free(&one, 1);
  EXPECT_EQ(arena_.stats().dirty_pages, 0u);
  EXPECT_EQ(arena_.stats().purged_pages, kRegionPages - 2 * 16);
  arena_.free(keep.data(), keep.size());
  arena_.trim();
}

TEST_F(RegionTest, ARegionThatFillsUpAgainWithinTheDecayTimeKeepsItsPages) {
  std::vector<Lent> v = carve(kRegionSize);
  std::vector<Lent> keep(v.begin(), v.begin() + 2);
  std::vector<Lent> go(v.begin() + 2, v.end());
  arena_.free(go.data(), go.size());  // almost empty
  clock_.advance_ms(5000);
  std::vector<Lent> again = carve(kRegionSize - 2 * 16 * kPage);  // full again
  clock_.advance_ms(6000);
  arena_.free(again.data(), again.size() - 1);  // a return after the decay time
  EXPECT_EQ(arena_.stats().purged_pages, 0u);
  arena_.free(&again.back(), 1);
  arena_.free(keep.data(), keep.size());
  arena_.trim();
}

TEST_F(RegionTest, AnUnadvisedRegionPurgesSlabBySlab) {
  std::vector<Lent> v = carve(8 * 16 * kPage);
  Lent a = v[0], b = v[1];
  std::vector<Lent> rest(v.begin() + 2, v.end());
  arena_.free(&a, 1);
  EXPECT_EQ(arena_.stats().purged_pages, 16u);
  arena_.free(&b, 1);
  EXPECT_EQ(arena_.stats().purged_pages, 32u);
  EXPECT_EQ(arena_.stats().dirty_pages, 0u);
  arena_.free(rest.data(), rest.size());
  arena_.trim();
}

TEST_F(RegionTest, TrimPurgesEveryFreePageAndKeepsLiveSlabs) {
  std::vector<Lent> v = carve(kRegionSize);
  std::vector<Lent> keep(v.begin(), v.begin() + v.size() / 2);
  std::vector<Lent> go(v.begin() + v.size() / 2, v.end());
  arena_.free(go.data(), go.size());
  ASSERT_EQ(arena_.stats().dirty_pages, kRegionPages / 2);
  EXPECT_EQ(arena_.trim(), kRegionSize / 2);
  EXPECT_EQ(arena_.stats().dirty_pages, 0u);
  EXPECT_EQ(arena_.stats().slab_pages, kRegionPages / 2);
  for (const Lent& l : keep) EXPECT_EQ(*static_cast<unsigned char*>(ptr(l.extent->base)), 0xab);
  // The purged pages are reused and read as zero where never written again.
  Lent again = arena_.alloc(16);
  EXPECT_EQ(again.region, keep[0].region);
  EXPECT_EQ(*static_cast<unsigned char*>(ptr(again.extent->base)), 0);
  arena_.free(&again, 1);
  arena_.free(keep.data(), keep.size());
  arena_.trim();
}

// Under strict overcommit the pages a region purges are decommitted (their
// charge goes) and committed again before they are lent.
TEST_F(RegionTest, StrictOvercommitPurgedPagesGiveTheirChargeBack) {
  kernel_.overcommit = "2\n";
  make_chunks(64 << 20, chunk::Options().decay_ns);
  arena_.init(chunks_.get(), nullptr, options());
  ASSERT_TRUE(os_->features().strict_overcommit);
  std::vector<Lent> v = carve(kRegionSize);
  const uintptr_t base = v[0].extent->base;
  EXPECT_EQ(test::writable_bytes(base, base + kRegionSize), kRegionSize);
  std::vector<Lent> keep(v.begin(), v.begin() + 3);
  std::vector<Lent> go(v.begin() + 3, v.end());
  arena_.free(go.data(), go.size());
  clock_.advance_ms(11000);
  Lent one = keep.back();
  keep.pop_back();
  arena_.free(&one, 1);  // almost empty for the decay time: its free pages are purged
  EXPECT_EQ(arena_.stats().purged_pages, kRegionPages - 2 * 16);
  EXPECT_EQ(test::writable_bytes(base, base + kRegionSize), 2 * 16 * kPage);
  // Lent again: committed first, and writable.
  std::vector<Lent> again = carve(kRegionSize - 2 * 16 * kPage);
  for (const Lent& l : again) EXPECT_EQ(l.region, keep[0].region);
  EXPECT_EQ(test::writable_bytes(base, base + kRegionSize), kRegionSize);
  arena_.free(again.data(), again.size());
  arena_.free(keep.data(), keep.size());
  arena_.trim();
  EXPECT_EQ(test::writable_bytes(base, base + kRegionSize), 0u);
  EXPECT_EQ(chunks_->stats().active, 0u);
}

// Near vm.max_map_count (the fake kernel's model): a region's decommitted
// runs are mappings of their own under strict overcommit. Past half the
// limit the arena purges them with madvise instead (they stay committed),
// and every purge still happens.
TEST_F(RegionTest, StrictOvercommitPurgeStopsSplittingPastHalfTheMappingLimit) {
  kernel_.overcommit = "2\n";
  kernel_.map_limit = 400;
  kernel_.other_mappings = 100;
  make_chunks(64 << 20, chunk::Options().decay_ns);
  arena_.init(chunks_.get(), nullptr, options());
  constexpr size_t kRegions = 8;
  std::vector<Lent> v = carve(kRegions * kRegionSize, 4);
  std::vector<Lent> keep, go;
  for (size_t i = 0; i < v.size(); i++) (i % 2 ? go : keep).push_back(v[i]);
  arena_.free(go.data(), go.size());
  arena_.trim();
  EXPECT_EQ(arena_.stats().purged_pages, go.size() * 4);
  EXPECT_EQ(kernel_.map_refusals(), 0u);
  EXPECT_LE(kernel_.peak_mappings(), 400u * 5 / 8);
  std::vector<Lent> again = carve(go.size() * 4 * kPage, 4);
  for (const Lent& l : again) std::memset(ptr(l.extent->base), 'r', 4 * kPage);
  EXPECT_EQ(kernel_.map_refusals(), 0u);
  arena_.free(again.data(), again.size());
  arena_.free(keep.data(), keep.size());
  arena_.trim();
}

}  // namespace
}  // namespace ductile
