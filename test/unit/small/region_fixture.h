// SPDX-License-Identifier: BSD-2-Clause
// Slab regions (huge pages for small objects) and the prefault helper,
// against a chunk layer on the fake kernel.
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <memory>
#include <vector>

#include <gtest/gtest.h>

#include "chunk/chunk.h"
#include "small/bin.h"
#include "small/decay.h"
#include "small/prefaulter.h"
#include "small/region.h"
#include "support/fake_clock.h"
#include "support/fake_kernel.h"
#include "support/maps.h"
#include "support/layers.h"

namespace ductile {
namespace {

using namespace small;

constexpr int kMadvPopulateWrite = 23;

class RegionTest : public test::ChunkLayerTest {
 protected:
  void SetUp() override {
    make_chunks(64 << 20, chunk::Options().decay_ns);
    arena_.init(chunks_.get(), nullptr, ArenaOptions());
    kernel_.reset_calls();
  }

  // madvise calls with `advice` that cover [a, a + len) exactly.
  size_t advised(int advice, uintptr_t a, size_t len) const {
    size_t n = 0;
    for (const auto& c : kernel_.calls())
      if (c.sys == test::Sys::kMadvise && c.arg == advice && addr(c.addr) == a && c.len == len) n++;
    return n;
  }
  size_t madvises(int advice) const {
    size_t n = 0;
    for (const auto& c : kernel_.calls())
      if (c.sys == test::Sys::kMadvise && c.arg == advice) n++;
    return n;
  }
  // Purge calls of any kind (batched or one range each).
  size_t purges() const {
    return kernel_.count(test::Sys::kProcessMadvise) + madvises(MADV_DONTNEED);
  }
  // Lends slabs of `pages` until `bytes` are carved.
  std::vector<Lent> carve(size_t bytes, size_t pages = 16) {
    std::vector<Lent> v;
    for (size_t done = 0; done < bytes; done += pages * kPage) {
      Lent l = arena_.alloc(pages);
      EXPECT_NE(l.extent, nullptr);
      // Slabs are written: the pages become resident.
      std::memset(ptr(l.extent->base), 0xab, l.extent->size);
      v.push_back(l);
    }
    return v;
  }

  SlabArena arena_;
};

TEST_F(RegionTest, SlabsPackIntoOneAlignedRegionFromItsStart) {
  std::vector<Lent> v = carve(64 * kPage);
  const uintptr_t base = v[0].extent->base;
  EXPECT_TRUE(is_aligned(base, kRegionSize));
  for (size_t i = 0; i < v.size(); i++) {
    EXPECT_EQ(v[i].region, v[0].region);
    EXPECT_EQ(v[i].extent->base, base + i * 16 * kPage);
    // Every page of a slab finds the slab, as a free must.
    for (uintptr_t p = v[i].extent->base; p < v[i].extent->end(); p += kPage)
      ASSERT_EQ(chunks_->lookup(ptr(p)), v[i].extent);
  }
  EXPECT_EQ(arena_.stats().regions, 1u);
  // A returned slab's pages are the first ones reused (first fit).
  arena_.free(&v[1], 1);
  Lent again = arena_.alloc(16);
  EXPECT_EQ(again.extent->base, base + 16 * kPage);
  v[1] = again;
  arena_.free(v.data(), v.size());
}

TEST_F(RegionTest, FirstFitFindsHolesAndSkipsRegionsTooFragmented) {
  std::vector<Lent> v = carve(kRegionSize, 4);  // 128 slabs of 4 pages: one region
  const uintptr_t base = v[0].extent->base;
  std::vector<Lent> holes;
  for (size_t i = 1; i < v.size(); i += 2) holes.push_back(v[i]);
  arena_.free(holes.data(), holes.size());  // every other slab: 64 holes of 4 pages
  // 8 pages fit in no hole: a second region; 4 pages take the first hole.
  Lent big = arena_.alloc(8);
  EXPECT_NE(big.region, v[0].region);
  Lent big2 = arena_.alloc(8);  // the first region is known too fragmented now
  EXPECT_EQ(big2.region, big.region);
  Lent small = arena_.alloc(4);
  EXPECT_EQ(small.extent->base, base + 4 * kPage);
  // Two neighbouring holes merge into a run that fits 8 pages... after the
  // slab between them goes.
  Lent mid = v[2];
  arena_.free(&mid, 1);  // pages 8..11 join holes 12..15 (4..7 is taken again)
  Lent fits = arena_.alloc(8);
  EXPECT_EQ(fits.extent->base, base + 8 * kPage);
  std::vector<Lent> rest = {big, big2, small, fits};
  for (size_t i = 0; i < v.size(); i += 2)
    if (i != 2) rest.push_back(v[i]);
  arena_.free(rest.data(), rest.size());
  arena_.trim();
  EXPECT_EQ(chunks_->stats().active, 0u);
}

TEST_F(RegionTest, ARegionIsAdvisedAsHugePagesOnlyAfterItsPrefix) {
  // Up to the 1 MiB prefix: small pages, no advice.
  std::vector<Lent> v = carve(ArenaOptions().busy_prefix);
  const uintptr_t base = v[0].extent->base;
  EXPECT_EQ(madvises(MADV_HUGEPAGE), 0u);
  EXPECT_EQ(arena_.stats().advised, 0u);
  // One slab past it: the whole region is advised, once.
  std::vector<Lent> more = carve(2 * 16 * kPage);
  EXPECT_EQ(advised(MADV_HUGEPAGE, base, kRegionSize), 1u);
  EXPECT_EQ(madvises(MADV_HUGEPAGE), 1u);
  EXPECT_EQ(arena_.stats().advised, 1u);
  arena_.free(v.data(), v.size());
  arena_.free(more.data(), more.size());
}

// An arena that holds dense_after regions (8 MiB) is large: with a dense
// space its next regions come from there, advised as huge pages before
// their first touch (one fault each, not up to 512), with no advice call of
// their own. Up to that size every region is plain, resident only as far
// as it is used.
TEST_F(RegionTest, ALargeArenasNextRegionsComeFromTheDenseSpace) {
  ArenaOptions o;
  o.busy_space = chunk::Space::kDense;
  arena_.init(chunks_.get(), nullptr, o);
  std::vector<Lent> plain = carve(o.dense_after * kRegionSize);
  for (const Lent& l : plain) ASSERT_EQ(l.extent->space, chunk::Space::kPlain);
  EXPECT_EQ(madvises(MADV_HUGEPAGE), o.dense_after);  // each, once busy
  kernel_.reset_calls();
  std::vector<Lent> next = carve(3 * kRegionSize);
  ArenaStats s = arena_.stats();
  EXPECT_EQ(s.regions, o.dense_after + 3);
  EXPECT_EQ(s.advised, o.dense_after + 3);
  EXPECT_EQ(s.dense, 3u);
  for (const Lent& l : next) EXPECT_EQ(l.extent->space, chunk::Space::kDense);
  // The dense space's reservation was advised whole, once; no region was.
  EXPECT_EQ(madvises(MADV_HUGEPAGE), 1u);
  EXPECT_EQ(advised(MADV_HUGEPAGE, next[0].extent->base & ~(kRegionSize - 1), kRegionSize), 0u);
  // Back under the size (every region given back): plain regions again.
  arena_.free(next.data(), next.size());
  arena_.free(plain.data(), plain.size());
  arena_.trim();
  ASSERT_EQ(arena_.stats().regions, 0u);
  std::vector<Lent> again = carve(o.dense_after * kRegionSize);
  for (const Lent& l : again) EXPECT_EQ(l.extent->space, chunk::Space::kPlain);
  arena_.free(again.data(), again.size());
  arena_.trim();
  EXPECT_EQ(chunks_->stats().active, 0u);
}

// Without THP (or without a dense space) a large arena's regions are plain,
// each advised on its own once busy, as before.
TEST_F(RegionTest, ALargeArenaWithoutADenseSpaceTakesPlainRegions) {
  for (bool thp : {true, false}) {
    ArenaOptions o;
    o.thp = thp;
    o.busy_space = thp ? chunk::Space::kPlain : chunk::Space::kDense;
    arena_.init(chunks_.get(), nullptr, o);
    std::vector<Lent> v = carve((o.dense_after + 2) * kRegionSize);
    EXPECT_EQ(arena_.stats().dense, 0u);
    EXPECT_EQ(arena_.stats().advised, thp ? o.dense_after + 2 : 0u);
    for (const Lent& l : v) EXPECT_EQ(l.extent->space, chunk::Space::kPlain);
    arena_.free(v.data(), v.size());
    arena_.trim();
  }
}

TEST_F(RegionTest, ASmallProgramNeverAdvises) {
  std::vector<Lent> v = carve(256 * 1024);
  arena_.free(v.data(), v.size());
  v = carve(256 * 1024);
  EXPECT_EQ(madvises(MADV_HUGEPAGE), 0u);
  arena_.free(v.data(), v.size());
}

TEST_F(RegionTest, NoAdviceWhenHugePagesAreOff) {
  ArenaOptions o;
  o.thp = false;
  arena_.init(chunks_.get(), nullptr, o);
  std::vector<Lent> v = carve(kRegionSize);
  EXPECT_EQ(madvises(MADV_HUGEPAGE), 0u);
  arena_.free(v.data(), v.size());
}

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

TEST_F(RegionTest, PlacingASlabLooksAtFewRegionsHoweverManyAreHeld) {
  // A heap of small objects that only grows: every region it holds is full.
  // Placing the next slab used to walk every region from the lowest address
  // (and filing a new region walked them again): allocating 16 KiB blocks up
  // to 8 GiB took 27 s, 121 us per malloc at the end.
  constexpr size_t kRegions = 48;
  std::vector<Lent> v;
  for (size_t i = 0; i < kRegions * kRegionPages / 4; i++) {
    v.push_back(arena_.alloc(4));
    ASSERT_NE(v.back().extent, nullptr);
  }
  ASSERT_EQ(arena_.stats().regions, kRegions);
  // A hole in the lowest region, then the next slabs: each costs a bounded
  // number of regions looked at, not one per region held.
  arena_.free(&v[0], 1);
  const uint64_t before = arena_.stats().search_steps;
  constexpr size_t kMore = 2 * kRegionPages / 4;  // two more regions' worth
  for (size_t i = 0; i < kMore; i++) {
    v.push_back(arena_.alloc(4));
    ASSERT_NE(v.back().extent, nullptr);
  }
  EXPECT_EQ(v[kRegions * kRegionPages / 4].extent->base, v[0].extent->base);  // the hole is found
  EXPECT_LE(arena_.stats().search_steps - before, 2 * kMore);
  v.erase(v.begin());
  arena_.free(v.data(), v.size());
  arena_.trim();
  EXPECT_EQ(chunks_->stats().active, 0u);
}

// Under strict overcommit the pages a region purges are decommitted (their
// charge goes) and committed again before they are lent.
TEST_F(RegionTest, StrictOvercommitPurgedPagesGiveTheirChargeBack) {
  kernel_.overcommit = "2\n";
  make_chunks(64 << 20, chunk::Options().decay_ns);
  arena_.init(chunks_.get(), nullptr, ArenaOptions());
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
  arena_.init(chunks_.get(), nullptr, ArenaOptions());
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

// Huge-page advice on a busy region splits its mapping where its
// neighbours are not advised: past half the mapping limit it is skipped.
TEST_F(RegionTest, AdviceStopsPastHalfTheMappingLimit) {
  kernel_.map_limit = 200;
  kernel_.other_mappings = 50;
  make_chunks(256 << 20, chunk::Options().decay_ns);
  arena_.init(chunks_.get(), nullptr, ArenaOptions());
  std::vector<Lent> v;
  std::vector<chunk::Extent*> between;
  for (size_t i = 0; i < 100; i++) {
    std::vector<Lent> r = carve(kRegionSize);  // one whole region: busy, advised
    v.insert(v.end(), r.begin(), r.end());
    between.push_back(chunks_->alloc(kRegionSize, kRegionSize).extent);  // plain space after it
    ASSERT_NE(between.back(), nullptr);
  }
  EXPECT_GT(madvises(MADV_HUGEPAGE), 0u);
  EXPECT_EQ(kernel_.map_refusals(), 0u);
  EXPECT_LE(kernel_.peak_mappings(), 200u * 5 / 8);
  arena_.free(v.data(), v.size());
  for (chunk::Extent* e : between) chunks_->free(e);
  arena_.trim();
}

TEST_F(RegionTest, OutOfMemoryIsNull) {
  kernel_.fail(test::Sys::kMmap, ENOMEM, 100);
  Lent l = arena_.alloc(16);
  EXPECT_EQ(l.extent, nullptr);
  kernel_.clear_failures();
  l = arena_.alloc(16);
  ASSERT_NE(l.extent, nullptr);
  arena_.free(&l, 1);
  EXPECT_EQ(arena_.alloc(0).extent, nullptr);
  EXPECT_EQ(arena_.alloc(kRegionPages + 1).extent, nullptr);
}

TEST_F(RegionTest, BinsTakeTheirSlabsFromRegions) {
  Bin bin;
  size_t c = class_of(64);
  bin.init(c, &arena_);
  std::vector<void*> v(20000);  // about 1.3 MiB of 64-byte objects
  ASSERT_EQ(bin.fill(v.data(), v.size()), v.size());
  ArenaStats s = arena_.stats();
  EXPECT_EQ(s.regions, 1u);
  EXPECT_EQ(s.advised, 1u);
  bin.flush(v.data(), v.size());
  bin.trim();
  arena_.trim();
  EXPECT_EQ(chunks_->stats().active, 0u);
}

// The statistics are counters kept where the state changes, read without
// the lock: after every step of a random run -- fills and flushes of three
// classes (a free-list class and two bitmap ones), decay steps as time
// passes, trims, slabs lent and returned by the arena itself -- they equal
// the figures counted slab by slab and region by region.
TEST_F(RegionTest, CountersEqualTheFiguresCountedOneByOne) {
  constexpr size_t kBins = 3;
  Bin bins[kBins];
  const size_t classes[kBins] = {class_of(16), class_of(64), class_of(3000)};
  for (size_t b = 0; b < kBins; b++) bins[b].init(classes[b], &arena_);
  std::vector<void*> held[kBins];
  std::vector<Lent> lent;
  uint64_t seed = 0x9e3779b97f4a7c15u;
  auto rnd = [&](uint64_t n) {
    seed = seed * 6364136223846793005u + 1442695040888963407u;
    return static_cast<size_t>((seed >> 33) % n);
  };
  auto check = [&](int step) {
    const ArenaStats a = arena_.stats(), w = arena_.walk_stats();
    ASSERT_EQ(a.regions, w.regions) << step;
    ASSERT_EQ(a.advised, w.advised) << step;
    ASSERT_EQ(a.dense, w.dense) << step;
    ASSERT_EQ(a.slab_pages, w.slab_pages) << step;
    ASSERT_EQ(a.dirty_pages, w.dirty_pages) << step;
    ASSERT_EQ(a.purging, w.purging) << step;
    for (size_t b = 0; b < kBins; b++) {
      const BinStats s = bins[b].stats(), ws = bins[b].walk_stats();
      ASSERT_EQ(s.free_objects, ws.free_objects) << step << " class " << classes[b];
      ASSERT_EQ(s.empty_slabs, ws.empty_slabs) << step << " class " << classes[b];
      ASSERT_EQ(s.free_objects, s.slabs * kClasses.objects_per_slab[classes[b]] - held[b].size()) << step;
    }
  };
  for (int step = 0; step < 2000; step++) {
    const size_t b = rnd(kBins);
    std::vector<void*>& h = held[b];
    switch (rnd(8)) {
      case 0:
      case 1:
      case 2: {  // a fill
        std::vector<void*> v(1 + rnd(400));
        v.resize(bins[b].fill(v.data(), v.size()));
        for (void* p : v) std::memset(p, 1, 8);
        h.insert(h.end(), v.begin(), v.end());
        break;
      }
      case 3:
      case 4: {  // a flush of objects from anywhere in the class
        std::vector<void*> v;
        for (size_t n = rnd(h.size() + 1); n > 0; n--) {
          std::swap(h[rnd(h.size())], h.back());
          v.push_back(h.back());
          h.pop_back();
        }
        bins[b].flush(v.data(), v.size());
        break;
      }
      case 5:  // time passes; decay steps
        clock_.advance_ms(rnd(3) * 600);
        (void)bins[b].decay();
        (void)arena_.decay(rnd(2) ? SIZE_MAX : arena_.step_pages());
        break;
      case 6:  // slabs of the arena's own
        if (!lent.empty() && rnd(2)) {
          const size_t n = 1 + rnd(lent.size());
          arena_.free(lent.data() + lent.size() - n, n);
          lent.resize(lent.size() - n);
        } else {
          Lent l = arena_.alloc(1 + rnd(64));
          ASSERT_NE(l.extent, nullptr);
          lent.push_back(l);
        }
        break;
      default:  // trims
        if (rnd(2)) bins[b].trim();
        else if (rnd(2)) bins[b].release_surplus();
        else (void)arena_.trim();
        break;
    }
    check(step);
    if (HasFatalFailure()) return;
  }
  for (size_t b = 0; b < kBins; b++) {
    bins[b].flush(held[b].data(), held[b].size());
    held[b].clear();
    bins[b].trim();
  }
  if (!lent.empty()) arena_.free(lent.data(), lent.size());
  (void)arena_.trim();
  check(-1);
  const ArenaStats a = arena_.stats();
  EXPECT_EQ(a.regions, 0u);
  EXPECT_EQ(a.slab_pages, 0u);
  EXPECT_EQ(a.dirty_pages, 0u);
}

// ---- idle classes: decay steps from other classes' calls, or the background thread

class IdleClassTest : public RegionTest {
 protected:
  static constexpr uint64_t kDecayMs = 1000;
  void SetUp() override {
    make_chunks(64 << 20, kDecayMs * 1000000);
    arena_.init(chunks_.get(), nullptr, ArenaOptions());
    bins_[0].init(class_of(64), &arena_);
    bins_[1].init(class_of(1000), &arena_);
    decay_.init(bins_, 2, &arena_);
    // 8 MiB of 64-byte objects, all freed: the class then goes idle.
    idle_.resize((8 << 20) / 64);
    EXPECT_EQ(bins_[0].fill(idle_.data(), idle_.size()), idle_.size());
    for (void* p : idle_) std::memset(p, 1, 64);
    bins_[0].flush(idle_.data(), idle_.size());
  }
  void TearDown() override {
    for (Bin& b : bins_) b.trim();
    arena_.trim();
  }
  // Bytes that may still be resident: empty slabs of the idle class, dirty
  // pages of regions and dirty extents.
  size_t retained() {
    return bins_[0].stats().empty_slabs * kClasses.slab_pages[class_of(64)] * kPage +
           arena_.stats().dirty_pages * kPage + chunks_->stats().dirty;
  }
  Bin bins_[2];
  Decay decay_;
  std::vector<void*> idle_;
};

// The program goes on allocating and freeing another size; no background
// thread. Before, the idle class kept its 8 MiB of empty slabs for good.
TEST_F(IdleClassTest, OtherClassesCallsReturnItsEmptySlabsWithinTwiceTheDecayTime) {
  ASSERT_GE(retained(), size_t{8} << 20);
  std::vector<void*> v(64);
  for (uint64_t t = 0; t < 2 * kDecayMs; t += 10) {
    clock_.advance_ms(10);
    ASSERT_EQ(bins_[1].fill(v.data(), v.size()), v.size());
    decay_.tick();  // what the runtime's slow paths do after a fill
    bins_[1].flush(v.data(), v.size());
    decay_.tick();  // and after a flush
  }
  EXPECT_LE(bins_[0].stats().empty_slabs, Bin::kRetainEmpty);
  // What stays: the slab kept per class, and one whole region kept for the
  // next slab (both hysteresis), with the other class's slab in it.
  EXPECT_LE(retained(), kRegionSize + 2 * 16 * kPage);
}

// A thread whose frees all hit its cache, 64 per millisecond, as in the
// scale benchmark's idle-class case: it looks at every Decay::look()-th
// free. The budget is cut to 16 KiB a step, so that the 8 MiB here take the
// 512 steps that 512 MiB take at the default 2 MiB. Looking at every 256th
// free while a backlog remained, half of it was still there at twice the
// decay time.
TEST_F(IdleClassTest, AThreadThatOnlyFreesIntoItsCacheWorksOffABacklogInTime) {
  // The same 8 MiB again, in chunks whose steps are 16 KiB.
  for (Bin& b : bins_) b.trim();
  arena_.trim();
  make_chunks(64 << 20, kDecayMs * 1000000, 1024, 16 << 10);
  arena_.init(chunks_.get(), nullptr, ArenaOptions());
  bins_[0].init(class_of(64), &arena_);
  bins_[1].init(class_of(1000), &arena_);
  decay_.init(bins_, 2, &arena_);
  ASSERT_EQ(bins_[0].fill(idle_.data(), idle_.size()), idle_.size());
  for (void* p : idle_) std::memset(p, 1, 64);
  bins_[0].flush(idle_.data(), idle_.size());
  ASSERT_GE(retained(), size_t{8} << 20);

  uint32_t countdown = Decay::kEvent;
  for (uint64_t ms = 0; ms < 2 * kDecayMs; ms++) {
    clock_.advance_ms(1);
    for (int f = 0; f < 64; f++)
      if (--countdown == 0) countdown = decay_.look();
  }
  EXPECT_LE(bins_[0].stats().empty_slabs, Bin::kRetainEmpty);
  EXPECT_LE(retained(), kRegionSize + 2 * 16 * kPage);
}

// The program goes quiet: the background thread's steps (four per decay
// time) do it alone.
TEST_F(IdleClassTest, TheBackgroundThreadsStepsReturnThemWhenTheProgramIsQuiet) {
  for (uint64_t t = 0; t < 2 * kDecayMs; t += kDecayMs / 4) {
    clock_.advance_ms(kDecayMs / 4);
    (void)decay_.step();
  }
  EXPECT_LE(bins_[0].stats().empty_slabs, Bin::kRetainEmpty);
  EXPECT_LE(retained(), kRegionSize + 16 * kPage);
}

// A step from a call purges at most its budget (one huge page) in each
// layer it steps -- the arena, for the slabs the bins release, and the chunk
// layer -- and the next calls take the rest.
TEST_F(IdleClassTest, AStepFromACallStaysWithinItsBudget) {
  clock_.advance_ms(2 * kDecayMs);
  const size_t budget = chunks_->options().decay_step_bytes;
  size_t calls = 0;
  while (retained() > kRegionSize + 16 * kPage && calls < 2000) {
    const uint64_t before = os_->counters().purged_bytes.load();
    decay_.tick();
    EXPECT_LE(os_->counters().purged_bytes.load() - before, 2 * budget);
    clock_.advance_ms(1);
    calls++;
  }
  EXPECT_LE(retained(), kRegionSize + 16 * kPage);
  EXPECT_GE(calls, (size_t{8} << 20) / (2 * budget));
}

// ---- the prefault helper -------------------------------------------------

class PrefaultTest : public RegionTest {
 protected:
  void SetUp() override {
    RegionTest::SetUp();
    pf_.init(os_.get(), true);
    arena_.init(chunks_.get(), &pf_, ArenaOptions());
  }
  void TearDown() override { pf_.stop(); }
  Prefaulter pf_;
};

TEST_F(PrefaultTest, StartsOnlyOnceARegionIsBusy) {
  std::vector<Lent> v = carve(ArenaOptions().busy_prefix);
  EXPECT_FALSE(pf_.start_pending());
  EXPECT_TRUE(pf_.start());  // nothing asked for: nothing started
  EXPECT_EQ(pf_.stats().starts, 0u);
  EXPECT_FALSE(pf_.stats().running);
  std::vector<Lent> more = carve(16 * kPage);
  EXPECT_TRUE(pf_.start_pending());
  ASSERT_TRUE(pf_.start());
  EXPECT_FALSE(pf_.start_pending());
  pf_.drain();
  PrefaultStats s = pf_.stats();
  EXPECT_EQ(s.starts, 1u);
  EXPECT_TRUE(s.running);
  EXPECT_GE(s.populated, 1u);
  // It faulted in the stretch after the carve point, ahead of the owner.
  const uintptr_t carve_point = more.back().extent->end();
  EXPECT_EQ(advised(kMadvPopulateWrite, carve_point, ArenaOptions().prefault_ahead), 1u);
  arena_.free(v.data(), v.size());
  arena_.free(more.data(), more.size());
}

TEST_F(PrefaultTest, StopsCleanlyAndDropsLaterRequests) {
  std::vector<Lent> v = carve(kRegionSize / 2 + 16 * kPage);
  ASSERT_TRUE(pf_.start());
  pf_.drain();
  pf_.stop();
  EXPECT_FALSE(pf_.stats().running);
  pf_.stop();  // idempotent
  const uint64_t dropped = pf_.stats().dropped;
  std::vector<Lent> more = carve(32 * kPage);
  EXPECT_FALSE(pf_.start_pending());
  EXPECT_GT(pf_.stats().dropped, dropped);
  arena_.free(v.data(), v.size());
  arena_.free(more.data(), more.size());
}

TEST_F(PrefaultTest, DisabledNeverStarts) {
  Prefaulter off;
  off.init(os_.get(), false);
  arena_.init(chunks_.get(), &off, ArenaOptions());
  std::vector<Lent> v = carve(kRegionSize);
  EXPECT_FALSE(off.start_pending());
  EXPECT_EQ(madvises(kMadvPopulateWrite), 0u);
  arena_.free(v.data(), v.size());
}

TEST_F(PrefaultTest, AForkedChildHasNoHelperAndStartsItsOwn) {
  std::vector<Lent> v = carve(ArenaOptions().busy_prefix + 16 * kPage);
  ASSERT_TRUE(pf_.start());
  pf_.drain();
  ASSERT_TRUE(pf_.stats().running);
  arena_.prefork();
  pf_.prefork();
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    pf_.postfork_child();
    arena_.postfork_child();
    int bad = 0;
    if (pf_.stats().running) bad |= 1;
    std::vector<Lent> more;
    for (int i = 0; i < 4; i++) more.push_back(arena_.alloc(16));
    if (!pf_.start_pending()) bad |= 2;
    if (!pf_.start()) bad |= 4;
    pf_.drain();
    if (!pf_.stats().running || pf_.stats().starts != 2) bad |= 8;
    pf_.stop();
    if (pf_.stats().running) bad |= 16;
    _exit(bad);
  }
  pf_.postfork_parent();
  arena_.postfork_parent();
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_TRUE(pf_.stats().running);  // the parent's helper is untouched
  arena_.free(v.data(), v.size());
}

}  // namespace
}  // namespace ductile
