// SPDX-License-Identifier: BSD-2-Clause
// The slab arena's regions (small/region.cc): slabs carved first fit, huge-page advice, the
// dense space, the cost of placing a slab, bins' slabs, and the statistics.
#include <sys/mman.h>

#include <cstring>
#include <vector>

#include <gtest/gtest.h>

#include "chunk/chunk.h"
#include "small/bin.h"
#include "small/region.h"
#include "support/fake_clock.h"
#include "support/fake_kernel.h"
#include "support/layers.h"
#include "unit/small/region_fixture.h"

namespace ductile {
namespace {

using namespace small;
using test::RegionTest;

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

// A busy region of a small arena is not advised: khugepaged would make the
// whole region resident, free pages and all (a program with 2 MB of small
// objects peaked at 6.6 MB instead of 4.6). Once the arena holds
// advise_after regions, every busy region is advised, the earlier ones too,
// each once.
TEST_F(RegionTest, ASmallArenasBusyRegionsAreAdvisedOnlyOnceItHoldsSeveral) {
  const ArenaOptions o;  // the defaults
  ASSERT_GE(o.advise_after, 2u);
  arena_.init(chunks_.get(), nullptr, o);
  std::vector<Lent> v = carve((o.advise_after - 1) * kRegionSize);  // full, busy regions
  ASSERT_EQ(arena_.stats().regions, o.advise_after - 1);
  EXPECT_EQ(madvises(MADV_HUGEPAGE), 0u);
  EXPECT_EQ(arena_.stats().advised, 0u);
  // The next region makes the arena large; once it is busy too, all are advised.
  std::vector<Lent> more = carve(o.busy_prefix + 16 * kPage);
  ASSERT_EQ(arena_.stats().regions, o.advise_after);
  EXPECT_EQ(madvises(MADV_HUGEPAGE), o.advise_after);
  EXPECT_EQ(arena_.stats().advised, o.advise_after);
  for (size_t i = 0; i < v.size(); i += kRegionSize / (16 * kPage))
    EXPECT_EQ(advised(MADV_HUGEPAGE, v[i].extent->base, kRegionSize), 1u);
  std::vector<Lent> rest = carve(kRegionSize - o.busy_prefix - 16 * kPage);
  EXPECT_EQ(madvises(MADV_HUGEPAGE), o.advise_after);  // not again
  arena_.free(v.data(), v.size());
  arena_.free(more.data(), more.size());
  arena_.free(rest.data(), rest.size());
  arena_.trim();
  EXPECT_EQ(chunks_->stats().active, 0u);
}

// An arena that holds dense_after regions (8 MiB) is large: with a dense
// space its next regions come from there, advised as huge pages before
// their first touch (one fault each, not up to 512), with no advice call of
// their own. Up to that size every region is plain, resident only as far
// as it is used.
TEST_F(RegionTest, ALargeArenasNextRegionsComeFromTheDenseSpace) {
  ArenaOptions o = options();
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
    ArenaOptions o = options();
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
  ArenaOptions o = options();
  o.thp = false;
  arena_.init(chunks_.get(), nullptr, o);
  std::vector<Lent> v = carve(kRegionSize);
  EXPECT_EQ(madvises(MADV_HUGEPAGE), 0u);
  arena_.free(v.data(), v.size());
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

// Huge-page advice on a busy region splits its mapping where its
// neighbours are not advised: past half the mapping limit it is skipped.
TEST_F(RegionTest, AdviceStopsPastHalfTheMappingLimit) {
  kernel_.map_limit = 200;
  kernel_.other_mappings = 50;
  make_chunks(256 << 20, chunk::Options().decay_ns);
  arena_.init(chunks_.get(), nullptr, options());
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

}  // namespace
}  // namespace ductile
