// SPDX-License-Identifier: BSD-2-Clause
// Growth and shrink of huge blocks (huge/resize.cc): each growth path where it is called for,
// in-place resizing that never moves, shrink and regrow, and zeroing.
#include <sys/mman.h>

#include <cerrno>
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
using test::holds;
using test::kMiB;

// ---- the growth paths -------------------------------------------------------

TEST_F(HugeTest, HeadroomServesGrowthWithoutSyscallsOrMoves) {
  void* p = alloc(2 * kMiB);
  Extent* e = extent(p);
  ASSERT_EQ(e->size, 4 * kMiB);
  fill(p, 2 * kMiB, 'h');
  uint64_t before = syscalls();
  EXPECT_EQ(huge_->resize(e, 4 * kMiB, kPage, false), p);
  EXPECT_EQ(syscalls(), before);
  EXPECT_EQ(e->usable, 4 * kMiB);
  EXPECT_EQ(e->size, 4 * kMiB);
  EXPECT_EQ(growth(GrowthPath::kHeadroom), 1u);
  EXPECT_TRUE(holds(p, 2 * kMiB, 'h'));
  fill(static_cast<char*>(p) + 2 * kMiB, 2 * kMiB, 'i');
  free(p);
  expect_empty();
}

TEST_F(HugeTest, NeighbourServesOnceTheHeadroomIsExhausted) {
  void* p = alloc(2 * kMiB);
  Extent* e = extent(p);
  fill(p, 2 * kMiB, 'n');
  uint64_t before = syscalls();
  ASSERT_EQ(huge_->resize(e, 8 * kMiB, kPage, false), p);
  EXPECT_EQ(syscalls() - before, 0u);  // plain space: no advice to extend
  EXPECT_EQ(growth(GrowthPath::kNeighbour), 1u);
  EXPECT_EQ(growth(GrowthPath::kHeadroom), 0u);
  EXPECT_EQ(e->usable, 8 * kMiB);
  EXPECT_EQ(e->size, huge_->span_for(8 * kMiB, true));  // took a growing block's headroom along
  EXPECT_TRUE(holds(p, 2 * kMiB, 'n'));
  fill(p, 8 * kMiB, 'o');
  expect_consistent();
  free(p);
  expect_empty();
}

// Many blocks growing together, each boxed in by the next: a block moved by
// growth takes room for three more doublings, so it moves once, not at
// every other doubling (64 buffers doubling round-robin from 4 KiB to 16
// MiB moved at 45 % of their huge growth steps).
TEST_F(HugeTest, BlocksGrowingTogetherMoveOnceEach) {
  constexpr int kBlocks = 8;
  void* b[kBlocks];
  for (int i = 0; i < kBlocks; i++) {
    b[i] = alloc(2 * kMiB);
    fill(b[i], 2 * kMiB, static_cast<char>('a' + i));
  }
  int steps = 0;
  for (size_t size = 4 * kMiB; size <= 64 * kMiB; size *= 2) {
    for (int i = 0; i < kBlocks; i++) {
      b[i] = huge_->resize(extent(b[i]), size, kPage, false);
      ASSERT_NE(b[i], nullptr);
      steps++;
    }
  }
  const uint64_t moves = growth(GrowthPath::kMremap) + growth(GrowthPath::kCopy);
  EXPECT_LE(moves, static_cast<uint64_t>(kBlocks)) << moves << " moves in " << steps << " growth steps";
  for (int i = 0; i < kBlocks; i++) {
    EXPECT_TRUE(holds(b[i], 2 * kMiB, static_cast<char>('a' + i)));
    free(b[i]);
  }
  expect_empty();
}

TEST_F(HugeTest, NeighbourTooShortForHeadroomStillServesTheBlock) {
  void* p = alloc(2 * kMiB);  // span 4 MiB
  void* q = alloc(2 * kMiB);  // span 4 MiB, right after
  ASSERT_EQ(addr(q), addr(p) + 4 * kMiB);
  void* guard = alloc(2 * kMiB);
  free(q);                    // a 4 MiB hole: room for a 6 MiB block, not its headroom
  Extent* e = extent(p);
  ASSERT_EQ(huge_->resize(e, 6 * kMiB, kPage, false), p);
  EXPECT_EQ(growth(GrowthPath::kNeighbour), 1u);
  EXPECT_EQ(e->size, 6 * kMiB);
  EXPECT_EQ(chunks_->lookup(ptr(e->end()))->base, e->end());  // the hole's rest stays free
  EXPECT_TRUE(chunks_->lookup(ptr(e->end()))->is_free());
  free(p);
  free(guard);
  expect_empty();
}

TEST_F(HugeTest, FixedMapServesWhenTheAddressPastTheSpanIsNotOurs) {
  make(4 * kMiB);  // reservations of 4 MiB: the first span fills one
  void* p = alloc(2 * kMiB);
  Extent* e = extent(p);
  ASSERT_EQ(e->size, 4 * kMiB);
  ASSERT_EQ(chunks_->lookup(ptr(e->end())), nullptr);
  if (!unmapped(e->end(), 16 * kMiB)) GTEST_SKIP() << "the address past the reservation is taken";
  fill(p, 2 * kMiB, 'f');
  kernel_.reset_calls();
  ASSERT_EQ(huge_->resize(e, 16 * kMiB, kPage, false), p);
  EXPECT_EQ(growth(GrowthPath::kFixedMap), 1u);
  EXPECT_EQ(kernel_.count(Sys::kMremap), 0u);
  // One mapping, exactly at the old end of the span (MAP_FIXED_NOREPLACE).
  bool mapped_there = false;
  for (const auto& c : kernel_.calls())
    if (c.sys == Sys::kMmap && c.addr == ptr(addr(p) + 4 * kMiB)) mapped_there = true;
  EXPECT_TRUE(mapped_there);
  EXPECT_EQ(e->usable, 16 * kMiB);
  EXPECT_TRUE(holds(p, 2 * kMiB, 'f'));
  fill(p, 16 * kMiB, 'g');
  expect_consistent();
  free(p);
  expect_empty();
}

TEST_F(HugeTest, ForeignMappingPastTheSpanIsNeverClobberedAndMremapServes) {
  make(4 * kMiB);
  void* p = alloc(2 * kMiB);
  Extent* e = extent(p);
  void* foreign = ::mmap(ptr(e->end()), kPage, PROT_READ | PROT_WRITE,
                         MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
  ASSERT_EQ(foreign, ptr(e->end()));
  static_cast<char*>(foreign)[0] = 'F';
  fill(p, 2 * kMiB, 'm');
  // In place cannot: the headroom is short, the neighbour is not ours.
  EXPECT_EQ(huge_->resize_in_place(e, 8 * kMiB, false), 2 * kMiB);
  EXPECT_EQ(kernel_.count(Sys::kMremap), 0u);
  void* q = huge_->resize(e, 8 * kMiB, kPage, false);
  ASSERT_NE(q, nullptr);
  EXPECT_NE(q, p);
  EXPECT_EQ(growth(GrowthPath::kMremap), 1u);
  EXPECT_EQ(growth(GrowthPath::kCopy), 0u);
  EXPECT_EQ(growth(GrowthPath::kFixedMap), 0u);
  EXPECT_EQ(static_cast<char*>(foreign)[0], 'F');
  EXPECT_TRUE(holds(q, 2 * kMiB, 'm'));
  Extent* t = extent(q);
  EXPECT_EQ(t->usable, 8 * kMiB);
  EXPECT_TRUE(is_aligned(addr(q), kHugePage));
  fill(q, 8 * kMiB, 'n');
  // The old range went with the pages, and is mapped again as free space.
  Extent* old = chunks_->lookup(p);
  ASSERT_NE(old, nullptr);
  EXPECT_EQ(old->state, chunk::ExtentState::kClean);
  unsigned char vec;
  EXPECT_EQ(::mincore(p, kPage, &vec), 0);
  ::munmap(foreign, kPage);
  expect_consistent();
  huge_->free(t);
  expect_empty();
}

TEST_F(HugeTest, BusyNeighbourLeadsToMremapWithoutTryingToMapOverIt) {
  void* p = alloc(2 * kMiB);
  void* busy = alloc(2 * kMiB);
  ASSERT_EQ(addr(busy), addr(p) + 4 * kMiB);
  fill(p, 4 * kMiB, 'b');  // the block and (after growth) its headroom
  Extent* e = extent(p);
  ASSERT_EQ(huge_->resize(e, 4 * kMiB, kPage, false), p);  // headroom first
  fill(busy, 2 * kMiB, 'B');
  kernel_.reset_calls();
  void* q = huge_->resize(e, 8 * kMiB, kPage, false);
  ASSERT_NE(q, nullptr);
  EXPECT_NE(q, p);
  EXPECT_EQ(growth(GrowthPath::kMremap), 1u);
  for (const auto& c : kernel_.calls()) EXPECT_FALSE(c.sys == Sys::kMmap && c.addr == busy);
  EXPECT_EQ(kernel_.count(Sys::kMremap), 1u);
  EXPECT_TRUE(holds(q, 4 * kMiB, 'b'));
  EXPECT_TRUE(holds(busy, 2 * kMiB, 'B'));
  free(q);
  free(busy);
  expect_empty();
}

TEST_F(HugeTest, FailingMremapFallsBackToCopy) {
  void* p = alloc(2 * kMiB);
  void* busy = alloc(2 * kMiB);
  fill(p, 2 * kMiB, 'c');
  Extent* e = extent(p);
  kernel_.fail(Sys::kMremap, ENOMEM);
  void* q = huge_->resize(e, 8 * kMiB, kPage, false);
  ASSERT_NE(q, nullptr);
  EXPECT_NE(q, p);
  EXPECT_EQ(growth(GrowthPath::kCopy), 1u);
  EXPECT_EQ(growth(GrowthPath::kMremap), 0u);
  EXPECT_TRUE(holds(q, 2 * kMiB, 'c'));
  // The old span went back to the chunk layer as a free extent (copied, not moved).
  Extent* old = chunks_->lookup(p);
  ASSERT_NE(old, nullptr);
  EXPECT_TRUE(old->is_free());
  expect_consistent();
  free(q);
  free(busy);
  expect_empty();
}

TEST_F(HugeTest, GrowthAcrossDirtyAndCleanNeighboursStaysInPlace) {
  // Round one leaves [p, p+64 MiB) faulted in and dirty; round two starts a
  // little later (something small took the start) and grows past it.
  void* p = alloc(32 * kMiB);  // span 64 MiB
  fill(p, 32 * kMiB, 1);
  free(p);
  chunk::Allocation small = chunks_->alloc(2 * kMiB, kHugePage);
  ASSERT_EQ(small.extent->base, addr(p));
  void* q = alloc(2 * kMiB);
  ASSERT_EQ(addr(q), addr(p) + 2 * kMiB);
  Extent* e = extent(q);
  uint64_t before = syscalls();
  for (size_t size = 4 * kMiB; size <= 64 * kMiB; size *= 2) {
    ASSERT_EQ(huge_->resize(e, size, kPage, false), q) << size;
    fill(static_cast<char*>(q) + size / 2, size / 2, 2);
  }
  EXPECT_EQ(syscalls() - before, 0u);
  EXPECT_EQ(growth(GrowthPath::kMremap) + growth(GrowthPath::kCopy) + growth(GrowthPath::kFixedMap), 0u);
  free(q);
  chunks_->free(small.extent);
  expect_empty();
}

// ---- in place only, shrink, zero -----------------------------------------------

TEST_F(HugeTest, ResizeInPlaceNeverMoves) {
  void* p = alloc(2 * kMiB);
  void* busy = alloc(2 * kMiB);
  Extent* e = extent(p);
  fill(p, 2 * kMiB, 'x');
  kernel_.reset_calls();
  EXPECT_EQ(huge_->resize_in_place(e, 4 * kMiB, false), 4 * kMiB);   // headroom
  EXPECT_EQ(huge_->resize_in_place(e, 16 * kMiB, false), 4 * kMiB);  // neither neighbour nor map
  EXPECT_EQ(e->base, addr(p));
  EXPECT_EQ(e->usable, 4 * kMiB);
  EXPECT_EQ(kernel_.count(Sys::kMremap), 0u);
  EXPECT_EQ(growth(GrowthPath::kMremap) + growth(GrowthPath::kCopy), 0u);
  EXPECT_TRUE(holds(p, 2 * kMiB, 'x'));
  free(busy);  // now the neighbour is free: in place works
  EXPECT_EQ(huge_->resize_in_place(e, 16 * kMiB, false), 16 * kMiB);
  EXPECT_EQ(e->base, addr(p));
  EXPECT_EQ(huge_->resize_in_place(e, 16 * kMiB, false), 16 * kMiB);  // same size: nothing to do
  free(p);
  expect_empty();
}

TEST_F(HugeTest, ShrinkGivesTheTailBackThenRegrow) {
  void* p = alloc(64 * kMiB);
  Extent* e = extent(p);
  ASSERT_EQ(e->size, 128 * kMiB);
  fill(p, 64 * kMiB, 's');
  EXPECT_EQ(huge_->resize_in_place(e, 8 * kMiB - 100, false), 8 * kMiB);
  EXPECT_EQ(e->usable, 8 * kMiB);
  EXPECT_EQ(e->size, huge_->span_for(8 * kMiB));
  Extent* tail = chunks_->lookup(ptr(e->end()));
  ASSERT_NE(tail, nullptr);
  EXPECT_TRUE(tail->is_free());
  EXPECT_EQ(huge_->stats().shrinks, 1u);
  EXPECT_EQ(huge_->stats().active_bytes, 8 * kMiB);
  expect_consistent();
  // resize() shrinks in place too.
  EXPECT_EQ(huge_->resize(e, 4 * kMiB, kPage, false), p);
  EXPECT_EQ(huge_->stats().shrinks, 2u);
  // And regrows from what it gave back, in place.
  EXPECT_EQ(huge_->resize(e, 64 * kMiB, kPage, false), p);
  EXPECT_TRUE(holds(p, 4 * kMiB, 's'));
  EXPECT_EQ(growth(GrowthPath::kMremap) + growth(GrowthPath::kCopy), 0u);
  free(p);
  expect_empty();
}

// A zeroed block on recycled pages costs what its touched pages cost: the
// old pages are dropped (they read as zero when next touched), not written
// over with zeros one by one (calloc of a recycled 1 GiB block with two bytes
// written took 0.66 s and made all of it resident).
TEST_F(HugeTest, ZeroedBlockOnRecycledPagesIsNotWrittenOver) {
  test::NoHugePages no_thp;  // the pages counted below are the clearing's alone
  ASSERT_TRUE(no_thp.ok());
  void* d = alloc(64 * kMiB);
  static_cast<char*>(d)[0] = 1;
  static_cast<char*>(d)[40 * kMiB] = 1;
  free(d);
  void* p = alloc(64 * kMiB, kPage, true);
  ASSERT_EQ(p, d);  // recycled, dirty
  EXPECT_TRUE(all_zero(p, 64 * kMiB));
  free(p);
  void* q = alloc(64 * kMiB, kPage, true);
  ASSERT_EQ(q, d);
  test::collapse_as_khugepaged_may(q, 64 * kMiB);
  EXPECT_LE(test::resident_pages(q, 64 * kMiB), 2u);
  // A zeroed growth over dirty pages is cleared the same way.
  Extent* e = extent(q);
  fill(q, 64 * kMiB, 'g');
  ASSERT_EQ(huge_->resize(e, 16 * kMiB, kPage, false), q);
  ASSERT_EQ(huge_->resize(e, 64 * kMiB, kPage, true), q);
  EXPECT_TRUE(holds(q, 16 * kMiB, 'g'));
  EXPECT_TRUE(all_zero(static_cast<char*>(q) + 16 * kMiB, 48 * kMiB));
  free(q);
  expect_empty();
}

// Never-written headroom goes back clean when a block shrinks or moves: a
// 64 MiB block with one page written, shrunk to 2 MiB, left 124 MiB "dirty".
TEST_F(HugeTest, ShrinkAndMoveGiveUnwrittenHeadroomBackClean) {
  void* p = alloc(64 * kMiB);
  Extent* e = extent(p);
  ASSERT_EQ(e->size, 128 * kMiB);
  static_cast<char*>(p)[0] = 1;
  ASSERT_EQ(huge_->resize(e, 2 * kMiB, kPage, false), p);
  // What the block held may be written; its headroom never was.
  EXPECT_EQ(chunks_->stats().dirty, 64 * kMiB - e->size);
  free(p);
  ASSERT_GT(chunks_->trim(), 0u);

  void* a = alloc(8 * kMiB);
  void* busy = alloc(2 * kMiB);  // right behind a's span: a must move
  fill(a, 8 * kMiB, 'm');
  const uint64_t dirty = chunks_->stats().dirty;
  void* b = huge_->resize(extent(a), 128 * kMiB, kPage, false);
  ASSERT_NE(b, a);
  EXPECT_EQ(growth(GrowthPath::kMremap), 1u);
  EXPECT_TRUE(holds(b, 8 * kMiB, 'm'));
  EXPECT_EQ(chunks_->stats().dirty, dirty);  // a's headroom: clean
  free(b);
  free(busy);
  expect_empty();
}

TEST_F(HugeTest, GrownBytesAreZeroedWhenAskedInPlace) {
  // Dirty everything first so a missing memset shows.
  void* d = alloc(64 * kMiB);
  Extent* de = extent(d);
  ASSERT_EQ(huge_->resize(de, 128 * kMiB, kPage, false), d);
  fill(d, 128 * kMiB, 0xee);
  free(d);

  void* p = alloc(2 * kMiB);
  ASSERT_EQ(p, d);  // recycled: dirty neighbours (and no headroom over them)
  Extent* e = extent(p);
  EXPECT_EQ(e->size, 2 * kMiB);
  fill(p, 2 * kMiB, 'z');
  const uint64_t neighbour = growth(GrowthPath::kNeighbour);
  ASSERT_EQ(huge_->resize(e, 4 * kMiB, kPage, true), p);
  EXPECT_EQ(growth(GrowthPath::kNeighbour), neighbour + 1);
  EXPECT_TRUE(all_zero(static_cast<char*>(p) + 2 * kMiB, 2 * kMiB));
  ASSERT_EQ(huge_->resize_in_place(e, 8 * kMiB, true), 8 * kMiB);
  EXPECT_LE(growth(GrowthPath::kNeighbour) + growth(GrowthPath::kHeadroom), neighbour + 3);
  EXPECT_TRUE(all_zero(static_cast<char*>(p) + 4 * kMiB, 4 * kMiB));
  EXPECT_TRUE(holds(p, 2 * kMiB, 'z'));
  // Without asking, growth leaves the old bytes: the checks above can fail.
  ASSERT_EQ(huge_->resize(e, 16 * kMiB, kPage, false), p);
  EXPECT_TRUE(holds(static_cast<char*>(p) + 8 * kMiB, 8 * kMiB, 0xee));
  free(p);
  expect_empty();
}

TEST_F(HugeTest, MovedGrowthZeroesADirtyTarget) {
  void* p = alloc(2 * kMiB);
  void* busy = alloc(2 * kMiB);
  ASSERT_EQ(addr(busy), addr(p) + 4 * kMiB);
  // A growing block's span in huge-page space, dirtied and freed: where the
  // growth below moves to.
  void* d = huge_->alloc(32 * kMiB, kPage, false, true);
  ASSERT_NE(d, nullptr);
  ASSERT_EQ(huge_->resize(extent(d), 64 * kMiB, kPage, false), d);
  fill(d, 64 * kMiB, 0xee);
  free(d);
  fill(p, 2 * kMiB, 'y');
  Extent* e = extent(p);
  ASSERT_EQ(huge_->resize(e, 4 * kMiB, kPage, true), p);
  void* q = huge_->resize(e, 8 * kMiB, kPage, true);
  ASSERT_EQ(q, d);
  EXPECT_EQ(growth(GrowthPath::kMremap), 1u);
  EXPECT_TRUE(holds(q, 2 * kMiB, 'y'));
  EXPECT_TRUE(all_zero(static_cast<char*>(q) + 2 * kMiB, 6 * kMiB));
  // Without asking: the target's old bytes are left.
  Extent* t = extent(q);
  Blocker b = block_after(t);
  void* r = huge_->resize(t, 2 * t->size, kPage, false);
  ASSERT_NE(r, nullptr);
  unblock(b);
  free(r);
  free(busy);
  expect_empty();
}

// A move by mremap takes the block's whole huge pages: their page-table
// entries move, not 512 entries at a time, and both spans keep ending on
// huge-page boundaries, whose page-map records need no page of slots.
// Before, the old span was cut to the block's exact size first, which
// wrote records inside a 2 MiB chunk. Bytes the old span held past the
// block move along and are zeroed where the caller asks for zeroes.
TEST_F(HugeTest, AMoveTakesTheBlocksWholeHugePagesAndWhatTheyHold) {
  const size_t small = 3 * kMiB + 5 * kPage;
  void* p = alloc(small);
  Extent* e = extent(p);
  ASSERT_EQ(huge_->resize(e, 3 * kMiB + 200 * kPage, kPage, false), p);  // in its headroom
  fill(p, 3 * kMiB + 200 * kPage, 'z');
  ASSERT_EQ(huge_->resize(e, small, kPage, false), p);  // 'z' stays past the block
  fill(p, small, 'a');
  Blocker b = block_after(e);
  const size_t pages_before = chunks_->stats().map_pages;
  kernel_.reset_calls();
  void* q = huge_->resize(e, 16 * kMiB, kPage, true);
  ASSERT_NE(q, nullptr);
  ASSERT_NE(q, p);
  ASSERT_EQ(growth(GrowthPath::kMremap), 1u);
  size_t remaps = 0;
  for (const auto& c : kernel_.calls()) {
    if (c.sys != Sys::kMremap) continue;
    remaps++;
    EXPECT_EQ(c.len, 4 * kMiB) << "the block's two huge pages, whole";
  }
  EXPECT_EQ(remaps, 1u);
  EXPECT_TRUE(holds(q, small, 'a'));
  EXPECT_TRUE(all_zero(static_cast<char*>(q) + small, 16 * kMiB - small)) << "the old span's 'z' moved along";
  EXPECT_EQ(chunks_->stats().map_pages, pages_before) << "no record inside a 2 MiB chunk";
  Extent* old = chunks_->lookup(p);
  ASSERT_NE(old, nullptr);
  EXPECT_TRUE(old->is_free());
  EXPECT_TRUE(is_aligned(old->end(), kHugePage));
  unblock(b);
  expect_consistent();
  free(q);
  expect_empty();
}

// Growth in place that cannot take its new headroom takes the least that
// ends on a huge page before the least: free space that starts mid-way in a
// huge page has its page-map record in a page of slots.
TEST_F(HugeTest, GrowthShortOfItsHeadroomEndsOnAHugePage) {
  void* p = alloc(2 * kMiB);
  void* x = alloc(2 * kMiB);
  void* busy = alloc(2 * kMiB);
  ASSERT_EQ(addr(x), addr(p) + 4 * kMiB);
  ASSERT_EQ(addr(busy), addr(p) + 8 * kMiB);
  free(x);  // 4 MiB free after p's span, then a busy span
  Extent* e = extent(p);
  const size_t pages_before = chunks_->stats().map_pages;
  ASSERT_EQ(huge_->resize(e, 5 * kMiB + kPage, kPage, false), p);
  EXPECT_EQ(e->size, 6 * kMiB) << "not 5 MiB and a page";
  EXPECT_EQ(growth(GrowthPath::kNeighbour), 1u);
  EXPECT_EQ(chunks_->stats().map_pages, pages_before);
  // And again, up to the busy span.
  ASSERT_EQ(huge_->resize(e, 7 * kMiB + kPage, kPage, false), p);
  EXPECT_EQ(e->size, 8 * kMiB);
  expect_consistent();
  free(p);
  free(busy);
  expect_empty();
}

TEST_F(HugeTest, CopiedGrowthZeroesToo) {
  void* d = alloc(32 * kMiB);
  fill(d, 32 * kMiB, 0x77);
  free(d);
  void* p = alloc(2 * kMiB);  // at d's start
  void* busy = alloc(2 * kMiB);
  fill(p, 2 * kMiB, 'k');
  kernel_.fail(Sys::kMremap, ENOMEM);
  void* q = huge_->resize(extent(p), 8 * kMiB, kPage, true);
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(growth(GrowthPath::kCopy), 1u);
  EXPECT_TRUE(holds(q, 2 * kMiB, 'k'));
  EXPECT_TRUE(all_zero(static_cast<char*>(q) + 2 * kMiB, 6 * kMiB));
  free(q);
  free(busy);
  expect_empty();
}

TEST_F(HugeTest, ResizeToAStricterAlignmentMoves) {
  void* p = nullptr;
  // Find a block that is 2 MiB but not 64 MiB aligned.
  std::vector<void*> keep;
  for (int i = 0; i < 64; i++) {
    p = alloc(4 * kMiB);
    if (!is_aligned(addr(p), 64 * kMiB)) break;
    keep.push_back(p);
  }
  ASSERT_FALSE(is_aligned(addr(p), 64 * kMiB));
  fill(p, 4 * kMiB, 'A');
  void* q = huge_->resize(extent(p), 4 * kMiB, 64 * kMiB, false);
  ASSERT_NE(q, nullptr);
  EXPECT_TRUE(is_aligned(addr(q), 64 * kMiB));
  EXPECT_TRUE(holds(q, 4 * kMiB, 'A'));
  void* r = huge_->resize(extent(q), 2 * kMiB, 128 * kMiB, false);  // shrinking and aligning
  ASSERT_NE(r, nullptr);
  EXPECT_TRUE(is_aligned(addr(r), 128 * kMiB));
  EXPECT_TRUE(holds(r, 2 * kMiB, 'A'));
  EXPECT_EQ(extent(r)->usable, 2 * kMiB);
  free(r);
  for (void* k : keep) free(k);
  expect_empty();
}

}  // namespace
}  // namespace ductile
