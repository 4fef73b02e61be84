// SPDX-License-Identifier: BSD-2-Clause
// Huge blocks that growth moves (huge/resize.cc): mremap into huge-page space, medium blocks grown
// into the huge range, mappings and page-map pages over cycles, and strict overcommit.
#include <cerrno>
#include <random>

#include <gtest/gtest.h>

#include "chunk/chunk.h"
#include "huge/huge.h"
#include "support/fake_clock.h"
#include "support/fake_kernel.h"
#include "support/maps.h"
#include "unit/huge/huge_fixture.h"

namespace ductile {
namespace {

using chunk::Extent;
using huge::GrowthPath;
using huge::HugeLayer;
using test::HugeTest;
using test::Sys;
using test::advice_calls;
using test::all_zero;
using test::fill;
using test::guarded;
using test::holds;
using test::kMiB;

// A block that growth moves with mremap into huge-page space: its pages are
// advised on arrival (they bring their plain mapping's flags), the range
// they left is mapped again as free space (it used to be a hole for good),
// and their own mapping -- which can never merge with its neighbours -- is
// replaced by a fresh one when the block is freed.
TEST_F(HugeTest, MovedBlockIsAdvisedAndBothRangesAreMappedAfresh) {
  void* a = alloc(2 * kMiB);  // [R, R+4M)
  void* p = alloc(2 * kMiB);  // [R+4M, R+8M)
  void* busy = alloc(2 * kMiB);
  ASSERT_EQ(addr(p), addr(a) + 4 * kMiB);
  ASSERT_EQ(addr(busy), addr(p) + 4 * kMiB);
  fill(p, 2 * kMiB, 'v');
  const size_t reserved = chunks_->stats().reserved;
  kernel_.reset_calls();
  void* q = huge_->resize(extent(p), 8 * kMiB, kPage, false);
  ASSERT_NE(q, p);
  ASSERT_EQ(growth(GrowthPath::kMremap), 1u);
  EXPECT_TRUE(holds(q, 2 * kMiB, 'v'));
  Extent* t = extent(q);
  EXPECT_EQ(t->space, chunk::Space::kHuge);
  EXPECT_TRUE(t->remapped);
  auto v = advice_calls(kernel_);
  ASSERT_EQ(v.size(), 2u);  // the new huge-page reservation, then the pages moved in
  EXPECT_EQ(v[1].addr, q);
  EXPECT_EQ(v[1].len, 2 * kMiB);
  // The old range is ours again, free and clean, in the same reservation.
  Extent* old = chunks_->lookup(p);
  ASSERT_NE(old, nullptr);
  EXPECT_EQ(old->state, chunk::ExtentState::kClean);
  EXPECT_EQ(chunks_->stats().reserved, reserved + 256 * kMiB);
  Extent* ea = extent(a);
  ASSERT_EQ(huge_->resize(ea, 6 * kMiB, kPage, false), a);  // grows over it in place
  EXPECT_EQ(growth(GrowthPath::kFixedMap), 0u);
  fill(a, 6 * kMiB, 'w');
  // Freed, it keeps its pages (and its mapping) for reuse until decay,
  // whose purge maps it afresh instead of advising it.
  const uintptr_t tbase = t->base;
  const size_t tsize = t->size;
  free(q);
  Extent* f = chunks_->lookup(ptr(tbase));
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->state, chunk::ExtentState::kDirty);
  EXPECT_TRUE(f->remapped);
  kernel_.reset_calls();
  clock_.advance_ms(1500);
  (void)chunks_->decay();
  bool fresh = false;
  for (const auto& c : kernel_.calls())
    if (c.sys == Sys::kMmap && c.addr == ptr(tbase) && c.len <= tsize && c.len >= 2 * kMiB) fresh = true;
  EXPECT_TRUE(fresh);
  f = chunks_->lookup(ptr(tbase));
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->state, chunk::ExtentState::kClean);
  EXPECT_FALSE(f->remapped);
  free(a);
  free(busy);
  expect_empty();
}

// A medium block of the core's (here an extent from plain space) that
// realloc grows into the huge range: its pages move into the new block's
// span with one mremap -- with the rest of the huge page they begin, one
// mapping advised as its space -- and its range is mapped afresh as clean
// free space. Nothing is copied: only the pages it had are resident in the
// new block (a copy wrote the untouched ones into the block's huge page).
TEST_F(HugeTest, AMediumBlocksPagesMoveIntoANewBlock) {
  test::NoHugePages no_thp;  // the pages counted below are the move's alone
  ASSERT_TRUE(no_thp.ok());
  Extent* m = chunks_->alloc(kMiB).extent;
  ASSERT_NE(m, nullptr);
  ASSERT_EQ(m->space, chunk::Space::kPlain);
  m->kind = chunk::ExtentKind::kMedium;
  m->usable = kMiB;
  auto* old = static_cast<unsigned char*>(ptr(m->base));
  fill(old, kPage, 'a');
  fill(old + kMiB / 2, kPage, 'b');
  kernel_.reset_calls();
  bool moved = false;
  auto* q = static_cast<unsigned char*>(huge_->alloc_from(m, 2 * kMiB, false, &moved));
  ASSERT_NE(q, nullptr);
  ASSERT_TRUE(moved);
  auto calls = kernel_.calls();
  ASSERT_EQ(kernel_.count(Sys::kMremap), 1u);
  for (const auto& c : calls) {
    if (c.sys == Sys::kMremap) {
      EXPECT_EQ(c.addr, old);
    }
  }
  Extent* t = extent(q);
  EXPECT_EQ(t->usable, 2 * kMiB);
  EXPECT_EQ(t->size, huge_->span_for(2 * kMiB, true));  // a growing block's headroom
  EXPECT_EQ(t->space, chunk::Space::kHuge);
  auto v = advice_calls(kernel_);
  ASSERT_FALSE(v.empty());
  EXPECT_EQ(v.back().addr, q);  // the pages moved in, and the rest of their huge page
  EXPECT_EQ(v.back().len, kHugePage);
  // The two written pages: not the 1 MiB a copy wrote (with THP, the
  // whole huge page it faulted in), even where khugepaged looks now.
  test::collapse_as_khugepaged_may(q, 2 * kMiB);
  EXPECT_EQ(test::resident_pages(q, 2 * kMiB), 2u);
  EXPECT_TRUE(holds(q, kPage, 'a'));
  EXPECT_TRUE(holds(q + kMiB / 2, kPage, 'b'));
  EXPECT_TRUE(all_zero(q + kPage, kMiB / 2 - kPage));
  EXPECT_TRUE(all_zero(q + kMiB / 2 + kPage, 2 * kMiB - kMiB / 2 - kPage));
  // The old range is free, clean and mapped again.
  Extent* o = chunks_->lookup(old);
  ASSERT_NE(o, nullptr);
  EXPECT_EQ(o->state, chunk::ExtentState::kClean);
  EXPECT_EQ(test::resident_pages(old, kMiB), 0u);
  expect_consistent();
  // The next doublings take the headroom in place.
  fill(q, 2 * kMiB, 'c');
  ASSERT_EQ(huge_->resize(t, 4 * kMiB, kPage, false), q);
  ASSERT_EQ(huge_->resize(t, 8 * kMiB, kPage, false), q);
  EXPECT_EQ(growth(GrowthPath::kHeadroom), 2u);
  EXPECT_TRUE(holds(q, 2 * kMiB, 'c'));
  // Freed, the moved-in pages are mapped afresh, and the span goes back as
  // any other: not kept apart, so that growth over it later keeps its pages.
  const uintptr_t tbase = t->base;
  kernel_.reset_calls();
  free(q);
  bool fresh = false;
  for (const auto& c : kernel_.calls())
    if (c.sys == Sys::kMmap && c.addr == q && c.len == kHugePage) fresh = true;
  EXPECT_TRUE(fresh);
  Extent* f = chunks_->lookup(ptr(tbase));
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->state, chunk::ExtentState::kDirty);
  EXPECT_FALSE(f->remapped);
  expect_empty();
}

// On recycled pages, still resident, the new block is for a copy: a move
// would drop them for fresh ones, and a block that grows the same way
// round after round would fault every round. So where the kernel refuses
// the mremap, and in hardened mode (a span of exact pages and its guard).
// The medium block is the caller's as it was, to copy and free.
TEST_F(HugeTest, AMediumBlockIsCopiedOntoRecycledPagesOrWhereItCannotMove) {
  Extent* m = chunks_->alloc(kMiB).extent;
  ASSERT_NE(m, nullptr);
  m->kind = chunk::ExtentKind::kMedium;
  m->usable = kMiB;
  fill(ptr(m->base), kMiB, 'm');
  auto expect_copy = [&](HugeLayer& layer, const char* why) {
    kernel_.reset_calls();
    bool moved = true;
    void* q = layer.alloc_from(m, 2 * kMiB, false, &moved);
    ASSERT_NE(q, nullptr) << why;
    EXPECT_FALSE(moved) << why;
    EXPECT_EQ(chunks_->lookup(ptr(m->base)), m) << why;
    EXPECT_EQ(m->state, chunk::ExtentState::kActive) << why;
    EXPECT_TRUE(holds(ptr(m->base), kMiB, 'm')) << why;
    Extent* t = chunks_->lookup(q);
    ASSERT_NE(t, nullptr);
    EXPECT_EQ(t->usable, 2 * kMiB) << why;
    EXPECT_FALSE(t->remapped) << why;
    fill(q, 2 * kMiB, 'q');
    layer.free(t);
  };
  // A freed block's pages: the next span starts on them.
  void* d = huge_->alloc(2 * kMiB, kPage, false, true);
  ASSERT_NE(d, nullptr);
  fill(d, 2 * kMiB, 'd');
  free(d);
  expect_copy(*huge_, "recycled");
  EXPECT_EQ(kernel_.count(Sys::kMremap), 0u);
  ASSERT_EQ(chunks_->trim(), 2 * kMiB);  // clean now
  kernel_.fail(Sys::kMremap, ENOMEM);
  expect_copy(*huge_, "mremap refused");
  EXPECT_EQ(kernel_.count(Sys::kMremap), 1u);
  huge::Options o;
  o.guard = true;
  ASSERT_GT(chunks_->trim(), 0u);
  HugeLayer guarded(*chunks_, o);
  expect_copy(guarded, "guarded");
  EXPECT_EQ(kernel_.count(Sys::kMremap), 0u);
  chunks_->free(m);
  expect_empty();
}

// Under strict overcommit a range mapped afresh is PROT_NONE again: the
// chunk layer must know it is uncommitted, or the next block there faults.
TEST_F(HugeTest, StrictOvercommitRangeMappedAfreshIsCommittedBeforeReuse) {
  kernel_.overcommit = "2\n";
  make();
  ASSERT_TRUE(os_->features().strict_overcommit);
  void* p = alloc(2 * kMiB);
  Extent* e = extent(p);
  Blocker b = block_after(e);
  fill(p, 2 * kMiB, 's');
  void* q = huge_->resize(e, 8 * kMiB, kPage, false);
  ASSERT_NE(q, nullptr);
  ASSERT_EQ(growth(GrowthPath::kMremap), 1u);
  unblock(b);
  EXPECT_TRUE(holds(q, 2 * kMiB, 's'));
  fill(q, 8 * kMiB, 't');
  free(q);
  clock_.advance_ms(1500);
  (void)chunks_->decay();  // maps the moved-in range afresh
  void* r = huge_->alloc(8 * kMiB, kPage, false, true);
  ASSERT_EQ(r, q);
  fill(r, 8 * kMiB, 'u');  // committed, whatever range it got
  EXPECT_TRUE(holds(r, 8 * kMiB, 'u'));
  free(r);
  expect_empty();
}

size_t mappings() {
  std::FILE* f = std::fopen("/proc/self/maps", "r");
  if (f == nullptr) return 0;
  size_t n = 0;
  for (int c; (c = std::fgetc(f)) != EOF;)
    if (c == '\n') n++;
  std::fclose(f);
  return n;
}

// Rounds of blocks that growth moves, all freed each round, leave the
// process's mappings where they were (before: a mapping more per move,
// 694 -> 2 761 in four rounds of 4 000 blocks): past the bound on ranges
// with moved-in pages, a freed one is mapped afresh at once.
TEST_F(HugeTest, CyclesOfMovedBlocksLeaveNoMappingsBehind) {
  // It counts the process's mappings, and a sanitizer's runtime maps memory
  // of its own between the counts.
  if (kSanitized) GTEST_SKIP() << "counts the process's mappings";
  make(1024 * kMiB, huge::Options(), 16);
  constexpr size_t kBlocks = 64;
  constexpr int kRounds = 6;
  std::mt19937 rng(7);
  auto mib = [&](size_t lo, size_t hi) { return (lo + rng() % (hi - lo + 1)) * kMiB; };
  size_t after_first = 0;
  for (int round = 0; round < kRounds; round++) {
    void* v[kBlocks];
    for (auto& p : v) p = alloc(mib(2, 4));
    for (auto& p : v) {
      Extent* e = extent(p);
      Blocker b = block_after(e);
      p = huge_->resize(e, e->size + mib(1, 6), kPage, false);
      ASSERT_NE(p, nullptr);
      unblock(b);
    }
    for (void* p : v) free(p);
    if (round == 0) after_first = mappings();
  }
  EXPECT_GE(growth(GrowthPath::kMremap), kRounds * kBlocks);
  EXPECT_LE(mappings(), after_first);
  expect_empty();
}

// Cycles of untouched blocks (2-4 MiB blocks, grown to 2-8 MiB, all freed,
// per round, a round every 100 ms) write page-map records at ever other
// places. Once the first rounds have set up their free space, the pages of
// slots holding records stay as many: those the records left are given back
// with decay, and moves and growth keep spans ending on huge pages (where
// records need no page of slots). Before, they grew round after round
// towards one page per 2 MiB of the address space the cycles went through.
TEST_F(HugeTest, CyclesOfUntouchedBlocksKeepThePagesOfThePageMapFlat) {
  make(1024 * kMiB);
  constexpr size_t kBlocks = 200;
  constexpr int kRounds = 100;
  std::mt19937_64 rng(88172645463325252ull);
  auto between = [&](size_t lo_mib, size_t hi_mib) {
    return lo_mib * kMiB + rng() % ((hi_mib - lo_mib) * kMiB);
  };
  size_t at_20 = 0, most = 0;
  for (int round = 1; round <= kRounds; round++) {
    void* v[kBlocks];
    for (auto& p : v) p = alloc(between(2, 4));
    for (auto& p : v) {
      p = huge_->resize(extent(p), between(2, 8), kPage, false);
      ASSERT_NE(p, nullptr);
    }
    for (void* p : v) free(p);
    clock_.advance_ms(100);
    const size_t pages = chunks_->stats().map_pages;
    if (round == 20) at_20 = pages;
    if (round >= 20 && pages > most) most = pages;
  }
  EXPECT_GT(chunks_->stats().map_released, 0u);
  EXPECT_LE(most, at_20 + at_20 / 10) << "pages of slots after round 20: " << at_20 << ", then up to " << most;
  expect_empty();
}

// A block that grows gets headroom, reserved PROT_NONE and committed as it
// is grown into.
TEST_F(HugeTest, StrictOvercommitCommitsTheBlockNotTheHeadroom) {
  kernel_.overcommit = "2\n";
  make();
  ASSERT_TRUE(os_->features().strict_overcommit);
  void* first = alloc(2 * kMiB);
  void* busy = alloc(2 * kMiB);
  fill(first, 2 * kMiB, 's');
  kernel_.reset_calls();
  void* p = huge_->resize(extent(first), 2 * kMiB + kPage, kPage, false);  // moves: busy behind it
  ASSERT_NE(p, first);
  Extent* e = extent(p);
  EXPECT_GT(e->size, e->usable);  // headroom reserved, PROT_NONE
  EXPECT_TRUE(is_aligned(e->base, kHugePage));
  size_t committed = 0;
  for (const auto& c : kernel_.calls())
    if (c.sys == Sys::kMprotect && addr(c.addr) >= e->base && addr(c.addr) < e->end()) committed += c.len;
  EXPECT_EQ(committed, 2 * kMiB + kPage);
  fill(p, 2 * kMiB + kPage, 's');
  // Headroom growth is one mprotect of exactly the added bytes.
  kernel_.reset_calls();
  ASSERT_EQ(huge_->resize(e, 3 * kMiB, kPage, false), p);
  auto calls = kernel_.calls();
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0].sys, Sys::kMprotect);
  EXPECT_EQ(calls[0].addr, ptr(addr(p) + 2 * kMiB + kPage));
  EXPECT_EQ(calls[0].len, kMiB - kPage);
  fill(p, 3 * kMiB, 't');
  EXPECT_EQ(growth(GrowthPath::kHeadroom), 1u);
  // Refused commit: the block stays as it was.
  kernel_.fail(Sys::kMprotect, ENOMEM);
  EXPECT_EQ(huge_->resize_in_place(e, 4 * kMiB, false), 3 * kMiB);
  EXPECT_TRUE(holds(p, 3 * kMiB, 't'));
  kernel_.clear_failures();
  // Past the span: the neighbour, committed by the chunk layer.
  ASSERT_EQ(huge_->resize(e, 16 * kMiB, kPage, false), p);
  fill(p, 16 * kMiB, 'u');
  // Shrink keeps the accounting straight: the uncommitted tail goes back uncommitted.
  EXPECT_EQ(huge_->resize_in_place(e, 2 * kMiB, false), 2 * kMiB);
  expect_consistent();
  free(p);
  free(busy);
  expect_empty();
  // What went back is handed out again and is usable.
  void* q = alloc(32 * kMiB);
  fill(q, 32 * kMiB, 'w');
  ASSERT_EQ(huge_->resize(extent(q), 48 * kMiB, kPage, false), q);
  fill(q, 48 * kMiB, 'x');
  free(q);
  expect_empty();
}

TEST_F(HugeTest, StrictOvercommitMovesCommitTheTarget) {
  kernel_.overcommit = "2\n";
  make();
  void* p = alloc(2 * kMiB);
  void* busy = alloc(2 * kMiB);
  ASSERT_EQ(addr(busy), addr(p) + 2 * kMiB);  // packed: no headroom
  fill(p, 2 * kMiB, 'q');
  void* q = huge_->resize(extent(p), 8 * kMiB, kPage, true);
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(growth(GrowthPath::kMremap), 1u);
  EXPECT_TRUE(holds(q, 2 * kMiB, 'q'));
  EXPECT_TRUE(all_zero(static_cast<char*>(q) + 2 * kMiB, 6 * kMiB));
  fill(q, 8 * kMiB, 'r');
  Extent* t = extent(q);
  ASSERT_EQ(huge_->resize(t, t->size, kPage, false), q);  // commits the rest of the headroom
  fill(q, t->size, 'r');
  Blocker b = block_after(t);
  kernel_.fail(Sys::kMremap, ENOMEM);
  void* r = huge_->resize(t, 2 * t->size, kPage, false);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(growth(GrowthPath::kCopy), 1u);
  unblock(b);
  EXPECT_TRUE(holds(r, 8 * kMiB, 'r'));
  fill(r, extent(r)->usable, 's');
  free(r);
  free(busy);
  expect_empty();
}

}  // namespace
}  // namespace ductile
