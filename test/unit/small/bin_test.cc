// SPDX-License-Identifier: BSD-2-Clause
// The central bins (small/bin.cc) against a chunk layer on the fake kernel: fills and bitmaps,
// flushes, empty slabs, and out of memory.
#include <algorithm>
#include <cstring>
#include <set>
#include <vector>

#include <gtest/gtest.h>

#include "chunk/chunk.h"
#include "small/bin.h"
#include "small/size_classes.h"
#include "support/fake_clock.h"
#include "support/fake_kernel.h"
#include "support/layers.h"

namespace ductile {
namespace {

using namespace small;

class BinTest : public test::ChunkLayerTest {
 protected:
  void SetUp() override {
    make_chunks(64 << 20);
    arena_.init(chunks_.get(), nullptr, ArenaOptions());
  }
  SlabArena arena_;
};

TEST_F(BinTest, FillHandsOutDistinctAlignedObjectsThatTheFreeFinds) {
  for (size_t c : {class_of(8), class_of(24), class_of(200), class_of(4096), class_of(kMaxSmall)}) {
    Bin bin;
    bin.init(c, &arena_);
    std::vector<void*> v(3000);
    ASSERT_EQ(bin.fill(v.data(), v.size()), v.size());
    std::set<void*> seen(v.begin(), v.end());
    EXPECT_EQ(seen.size(), v.size());
    size_t sz = class_size(c);
    for (void* p : v) {
      chunk::Extent* e = chunks_->lookup(p);
      ASSERT_NE(e, nullptr);
      EXPECT_EQ(e->kind, chunk::ExtentKind::kSlab);
      EXPECT_EQ(e->size_class, c);
      EXPECT_EQ((addr(p) - e->base) % sz, 0u);
      std::memset(p, static_cast<int>(c), sz);
    }
    for (void* p : v) EXPECT_EQ(*static_cast<unsigned char*>(p), static_cast<unsigned char>(c));
    bin.flush(v.data(), v.size());
    EXPECT_EQ(bin.stats().free_objects, bin.stats().slabs * kClasses.objects_per_slab[c]);
  }
}

// Bitmap classes: a flush writes nothing into the objects and a fill reads
// none -- poison over every freed object must not change what fill returns,
// which is exactly the freed objects, in address order, before any
// never-used one.
TEST_F(BinTest, BitmapFillReadsNoObjectAndHandsOutInAddressOrder) {
  for (size_t c : {class_of(32), class_of(80), class_of(208), class_of(4096), class_of(kMaxSmall)}) {
    ASSERT_NE(kClasses.bitmap_words[c], 0u) << class_size(c);
    Bin bin;
    bin.init(c, &arena_);
    const size_t n = std::min<size_t>(3 * kClasses.objects_per_slab[c] / 2, 6000);
    std::vector<void*> v(n);
    ASSERT_EQ(bin.fill(v.data(), n), n);
    // Free every third object, in an order unrelated to addresses.
    std::vector<void*> freed;
    for (size_t i = 0; i < n; i += 3) freed.push_back(v[i]);
    std::vector<void*> order = freed;
    std::reverse(order.begin(), order.end());
    for (size_t i = 0; i + 7 < order.size(); i += 7) std::swap(order[i], order[i + 5]);
    for (size_t i = 0; i < order.size(); i += 64) bin.flush(order.data() + i, std::min<size_t>(64, order.size() - i));
    for (void* p : freed) *static_cast<uintptr_t*>(p) = 0xdeadbeefdeadbeefull;
    // Per slab, the freed objects come back in address order; slabs come in
    // whatever order the bin keeps them.
    std::vector<void*> got(freed.size());
    size_t k = 0;
    while (k < got.size()) {
      size_t m = bin.fill(got.data() + k, std::min<size_t>(37, got.size() - k));
      ASSERT_GT(m, 0u);
      for (size_t i = k + 1; i < k + m; i++)
        if (chunks_->lookup(got[i]) == chunks_->lookup(got[i - 1])) {
          EXPECT_LT(got[i - 1], got[i]);
        }
      k += m;
    }
    std::vector<void*> a = got, b = freed;
    std::sort(a.begin(), a.end());
    std::sort(b.begin(), b.end());
    EXPECT_EQ(a, b);
    // (--enable-hardened: a fill writes the freed mark into never-used
    // objects, among them those of a slab that emptied and is carved anew.)
    for (void* p : got) {
      const uintptr_t word = *static_cast<uintptr_t*>(p);
      if (!kHardened || word != freed_mark(p)) {
        EXPECT_EQ(word, 0xdeadbeefdeadbeefull);
      }
    }
    // Then never-used objects, above everything handed out before.
    void* next = nullptr;
    ASSERT_EQ(bin.fill(&next, 1), 1u);
    EXPECT_EQ(std::count(v.begin(), v.end(), next), 0);
    bin.flush(&next, 1);
    bin.flush(v.data(), n);
    EXPECT_EQ(bin.stats().free_objects, bin.stats().slabs * kClasses.objects_per_slab[c]);
    EXPECT_EQ(bin.stats().empty_slabs, bin.stats().slabs);
  }
}

TEST_F(BinTest, BitmapsOnlyWhereTheyCostLittle) {
  EXPECT_EQ(kClasses.bitmap_words[class_of(8)], 0u);  // 1/64 of an 8-byte object
  EXPECT_EQ(kClasses.bitmap_words[class_of(16)], 0u);
  EXPECT_NE(kClasses.bitmap_words[class_of(32)], 0u);
  for (size_t c = 0; c < kNumSmall; c++) {
    if (kClasses.bitmap_words[c] != 0) {
      EXPECT_GE(kClasses.bitmap_words[c] * 64u, kClasses.objects_per_slab[c]);
    }
  }
}

// --enable-hardened: every never-used object a fill hands out carries its
// freed mark (the cache's pop checks it), also from a fill over many slabs
// (more runs of never-used objects than Bin::fill notes to mark after its
// lock).
TEST_F(BinTest, HardenedFillMarksEveryNeverUsedObject) {
  if (!kHardened) GTEST_SKIP() << "--enable-hardened only";
  for (size_t c : {class_of(32), class_of(4096), class_of(kMaxSmall)}) {
    Bin bin;
    bin.init(c, &arena_, true);
    std::vector<void*> v(std::min<size_t>(20 * kClasses.objects_per_slab[c], 3000));
    ASSERT_EQ(bin.fill(v.data(), v.size()), v.size());
    for (void* p : v) EXPECT_EQ(*static_cast<uintptr_t*>(p), freed_mark(p)) << class_size(c);
    bin.flush(v.data(), v.size());
  }
}

TEST_F(BinTest, ObjectsNeverHandedOutStayUntouched) {
  Bin bin;
  size_t c = class_of(64);
  bin.init(c, &arena_);
  void* p = nullptr;
  ASSERT_EQ(bin.fill(&p, 1), 1u);
  // The slab's other pages were never written: the chunk layer gave us clean
  // memory and nothing but the first object was handed out.
  chunk::Extent* e = chunks_->lookup(p);
  EXPECT_EQ(p, ptr(e->base));
  bin.flush(&p, 1);
}

TEST_F(BinTest, DrainAndRefillKeepsTheSlab) {
  Bin bin;
  size_t c = class_of(16);
  bin.init(c, &arena_);
  void* p;
  ASSERT_EQ(bin.fill(&p, 1), 1u);
  bin.flush(&p, 1);
  chunk::ChunkStats before = chunks_->stats();
  size_t calls = os_->counters().total();
  for (int i = 0; i < 100000; i++) {
    ASSERT_EQ(bin.fill(&p, 1), 1u);
    bin.flush(&p, 1);
    if (i % 100 == 0) clock_.advance_ms(1);
  }
  chunk::ChunkStats after = chunks_->stats();
  EXPECT_EQ(after.allocs, before.allocs);
  EXPECT_EQ(after.frees, before.frees);
  EXPECT_EQ(os_->counters().total(), calls);
  EXPECT_EQ(bin.stats().slab_allocs, 1u);
}

TEST_F(BinTest, SurplusEmptySlabsGoAfterTheDecayTimeAndOneStays) {
  Bin bin;
  size_t c = class_of(4096);
  bin.init(c, &arena_);
  std::vector<void*> v(40);  // 10 slabs of 4
  ASSERT_EQ(bin.fill(v.data(), v.size()), v.size());
  bin.flush(v.data(), v.size());
  EXPECT_EQ(bin.stats().empty_slabs, 10u);  // freshly empty: all kept
  clock_.advance_ms(1500);
  // Emptying another slab now lets the oldest surplus one go (one per flush).
  ASSERT_EQ(bin.fill(v.data(), 4), 4u);
  bin.flush(v.data(), 4);
  EXPECT_EQ(bin.stats().slab_returns, 1u);
  bin.release_surplus();
  EXPECT_EQ(bin.stats().empty_slabs, Bin::kRetainEmpty);
  // A region this small is not busy (no huge page): its slabs' pages are purged.
  EXPECT_GE(arena_.stats().purged_pages, (10 - Bin::kRetainEmpty) * kClasses.slab_pages[c]);
  bin.trim();
  EXPECT_EQ(bin.stats().empty_slabs, 0u);
  EXPECT_EQ(bin.stats().slabs, 0u);
  EXPECT_EQ(arena_.stats().slab_pages, 0u);
  arena_.trim();
  EXPECT_EQ(chunks_->stats().active, 0u);
}

TEST_F(BinTest, AFlushReturnsEachObjectToTheBinThatHoldsItsSlab) {
  // Two sets of bins share the slab arena: objects one bin handed out come
  // back to it, whichever bin the flush is given to.
  Bin a, b;
  size_t c = class_of(200);
  a.init(c, &arena_);
  b.init(c, &arena_);
  std::vector<void*> from_a(300), from_b(100), mixed;
  ASSERT_EQ(a.fill(from_a.data(), from_a.size()), from_a.size());
  ASSERT_EQ(b.fill(from_b.data(), from_b.size()), from_b.size());
  for (size_t i = 0; i < 300; i++) {
    mixed.push_back(from_a[i]);
    if (i % 3 == 0) mixed.push_back(from_b[i / 3]);
  }
  // b takes its own and leaves a's, moved to the front.
  std::vector<void*> v = mixed;
  EXPECT_EQ(b.flush(v.data(), v.size()), from_a.size());
  EXPECT_EQ(b.stats().free_objects, b.stats().slabs * kClasses.objects_per_slab[c]);
  EXPECT_EQ(std::set<void*>(v.begin(), v.begin() + 300), std::set<void*>(from_a.begin(), from_a.end()));
  // flush_to_owners routes everything, starting from any bin.
  Bin::flush_to_owners(*chunks_, v.data(), 300);
  EXPECT_EQ(a.stats().free_objects, a.stats().slabs * kClasses.objects_per_slab[c]);
  EXPECT_EQ(a.stats().slab_allocs + b.stats().slab_allocs, a.stats().slabs + b.stats().slabs);
  a.trim();
  b.trim();
}

// A flush works run by run (one lookup and one header update per run of
// objects from one slab): runs of every length, broken by other slabs and
// by bitmap-word changes, must give back every object exactly once -- the
// next fill hands out exactly the objects flushed.
TEST_F(BinTest, FlushesOfInterleavedSlabsLoseAndRepeatNoObject) {
  for (size_t c : {class_of(16), class_of(64), class_of(1024)}) {
    Bin bin;
    bin.init(c, &arena_);
    const size_t n = 3 * kClasses.objects_per_slab[c];  // three full slabs
    std::vector<void*> v(n);
    ASSERT_EQ(bin.fill(v.data(), n), n);
    ASSERT_EQ(std::set<void*>(v.begin(), v.end()).size(), n);
    // Runs of 1, 2, ... 9 objects taken in turn from the two halves.
    std::vector<void*> order;
    size_t lo = 0, hi = n / 2, len = 1;
    while (lo < n / 2 || hi < n) {
      for (size_t i = 0; i < len && lo < n / 2; i++) order.push_back(v[lo++]);
      for (size_t i = 0; i < len && hi < n; i++) order.push_back(v[hi++]);
      len = len % 9 + 1;
    }
    ASSERT_EQ(order.size(), n);
    // Half of them back: every slab keeps objects out, so none is reset and
    // no never-used object is left to hide a lost one.
    const size_t half = n / 2;
    for (size_t i = 0; i < half; i += 100) EXPECT_EQ(bin.flush(order.data() + i, std::min<size_t>(100, half - i)), 0u);
    EXPECT_EQ(bin.stats().empty_slabs, 0u);
    EXPECT_EQ(bin.stats().free_objects, half) << class_size(c);
    std::vector<void*> w(half);
    ASSERT_EQ(bin.fill(w.data(), half), half);
    EXPECT_EQ(std::set<void*>(w.begin(), w.end()), std::set<void*>(order.begin(), order.begin() + half))
        << class_size(c);
    EXPECT_EQ(bin.stats().slabs, 3u);
    // Everything back, in reverse, in one flush.
    for (size_t i = 0; i < half; i++) order[i] = w[i];
    std::reverse(order.begin(), order.end());
    EXPECT_EQ(bin.flush(order.data(), n), 0u);
    EXPECT_EQ(bin.stats().empty_slabs, 3u);
    bin.trim();
  }
}

TEST_F(BinTest, OutOfMemoryIsAShortFill) {
  Bin bin;
  size_t c = class_of(1024);
  bin.init(c, &arena_);
  kernel_.fail(test::Sys::kMmap, ENOMEM, 100);
  void* v[4];
  EXPECT_EQ(bin.fill(v, 4), 0u);
  kernel_.clear_failures();
  EXPECT_EQ(bin.fill(v, 4), 4u);
  bin.flush(v, 4);
}

}  // namespace
}  // namespace ductile
