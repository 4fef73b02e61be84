// SPDX-License-Identifier: BSD-2-Clause
// The huge layer against the fake kernel: every growth path in the situation
// that calls for it and the next one when it is refused, contents kept on
// every path, in-place resizing that never moves, shrink and regrow, zeroing,
// no system calls in a steady alloc/free loop, transparent huge page advice,
// strict overcommit, failure of each system call on the way, statistics,
// and a multi-threaded stress test.
#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "chunk/chunk.h"
#include "huge/huge.h"
#include "support/fake_clock.h"
#include "support/fake_kernel.h"
#include "support/layers.h"
#include "support/maps.h"

namespace ductile {
namespace {

using chunk::ChunkLayer;
using chunk::Extent;
using huge::GrowthPath;
using huge::HugeLayer;
using test::FakeClock;
using test::FakeKernel;
using test::Sys;

constexpr size_t kMiB = size_t{1} << 20;
constexpr int kMadvHugepage = 14;  // MADV_HUGEPAGE

void fill(void* p, size_t n, unsigned char seed) { std::memset(p, seed, n); }

// Every 512th byte and the last: enough to see a lost, moved or zeroed page.
bool holds(const void* p, size_t n, unsigned char seed) {
  const auto* c = static_cast<const unsigned char*>(p);
  for (size_t i = 0; i < n; i += 512)
    if (c[i] != seed) return false;
  return n == 0 || c[n - 1] == seed;
}

bool all_zero(const void* p, size_t n) {
  const auto* c = static_cast<const unsigned char*>(p);
  for (size_t i = 0; i < n; i++)
    if (c[i] != 0) return false;
  return true;
}

class HugeTest : public test::ChunkLayerTest {
 protected:
  void SetUp() override { make(); }

  // A fresh stack of layers (the kernel's settings are read by the Os).
  void make(size_t reservation = 256 * kMiB, huge::Options ho = huge::Options(), size_t remapped_bound = 1024) {
    huge_.reset();
    kernel_.clear_failures();
    make_chunks(reservation, kOneSecond, remapped_bound);
    huge_ = std::make_unique<HugeLayer>(*chunks_, ho);
  }

  Extent* extent(void* p) {
    Extent* e = chunks_->lookup(p);
    EXPECT_NE(e, nullptr);
    if (e != nullptr) {
      EXPECT_EQ(e->kind, chunk::ExtentKind::kHuge);
      EXPECT_EQ(e->base, addr(p));
    }
    return e;
  }
  void* alloc(size_t size, size_t align = kPage, bool zero = false) {
    void* p = huge_->alloc(size, align, zero);
    EXPECT_NE(p, nullptr);
    return p;
  }
  void free(void* p) { huge_->free(extent(p)); }
  uint64_t growth(GrowthPath p) { return huge_->stats().growth[static_cast<size_t>(p)]; }
  uint64_t syscalls() { return os_->counters().total(); }
  uint64_t calls(os::Call c) { return os_->counters().get(c); }

  // Accounting that must hold whenever no call is in flight.
  void expect_consistent() {
    chunk::ChunkStats c = chunks_->stats();
    EXPECT_EQ(c.active + c.dirty + c.clean, c.reserved);
    EXPECT_EQ(huge_->stats().span_bytes, c.active);  // only the huge layer uses these chunks
  }
  void expect_empty() {
    huge::HugeStats h = huge_->stats();
    EXPECT_EQ(h.active_bytes, 0u);
    EXPECT_EQ(h.span_bytes, 0u);
    EXPECT_EQ(h.allocs, h.frees);
    EXPECT_EQ(chunks_->stats().active, 0u);
    expect_consistent();
  }

  // Makes whatever follows e's span busy, so that it cannot grow in place:
  // a page of ours taken from the free extent there, or a foreign page
  // mapped there when the address is not ours. Undo with unblock() before
  // checking the accounting.
  struct Blocker {
    Extent* ours = nullptr;
    void* foreign = nullptr;
  };
  Blocker block_after(const Extent* e) {
    Blocker b;
    Extent* n = chunks_->lookup(ptr(e->end()));
    if (n == nullptr) {
      b.foreign = ::mmap(ptr(e->end()), kPage, PROT_READ | PROT_WRITE,
                         MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
      EXPECT_EQ(b.foreign, ptr(e->end()));
    } else if (n->is_free()) {
      b.ours = chunks_->alloc_at(e->end(), kPage).extent;
      EXPECT_NE(b.ours, nullptr);
    }
    return b;
  }
  // Whether nothing is mapped at [a, a+len): the fixed-map path needs that
  // past the last reservation, which holds unless something (a sanitizer's
  // shadow memory, say) sits at the chunk layer's hint.
  static bool unmapped(uintptr_t a, size_t len) {
    void* p = ::mmap(ptr(a), len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    if (p == MAP_FAILED) return false;
    ::munmap(p, len);
    return p == ptr(a);
  }
  void unblock(Blocker b) {
    if (b.ours) chunks_->free(b.ours);
    if (b.foreign) ::munmap(b.foreign, kPage);
  }

  std::unique_ptr<HugeLayer> huge_;
};

// ---- allocation --------------------------------------------------------------

TEST_F(HugeTest, AllocGivesAnAlignedSpanWithHeadroom) {
  void* p = alloc(3 * kMiB + 1);
  Extent* e = extent(p);
  EXPECT_TRUE(is_aligned(addr(p), kHugePage));
  EXPECT_EQ(e->usable, 3 * kMiB + kPage);
  EXPECT_EQ(HugeLayer::usable_size(e), 3 * kMiB + kPage);
  EXPECT_EQ(e->size, huge_->span_for(3 * kMiB + kPage));
  EXPECT_EQ(e->size, 8 * kMiB);  // block + the same again, in whole huge pages
  fill(p, e->usable, 'a');
  huge::HugeStats s = huge_->stats();
  EXPECT_EQ(s.allocs, 1u);
  EXPECT_EQ(s.active_bytes, 3 * kMiB + kPage);
  EXPECT_EQ(s.span_bytes, 8 * kMiB);
  expect_consistent();
  free(p);
  expect_empty();
}

TEST_F(HugeTest, AlignmentsUpToLargePowersOfTwo) {
  for (size_t align : {size_t{0}, size_t{1}, size_t{64}, kPage, kHugePage, 8 * kMiB, 64 * kMiB}) {
    void* p = alloc(2 * kMiB, align);
    EXPECT_TRUE(is_aligned(addr(p), align > kPage ? align : kPage)) << align;
    fill(p, 2 * kMiB, 'l');
    free(p);
  }
  EXPECT_EQ(huge_->alloc(2 * kMiB, 3 * kPage, false), nullptr);  // not a power of two
  expect_empty();
}

// A block aligned past its reservation's size sits at the reservation's
// start. Freed, its span goes back purged, one with the clean space behind
// it, so that the next such block finds that address again -- also among
// many dirty extents, which the dirty block's few pages used to be lost
// among (every such block took a reservation of its own).
TEST_F(HugeTest, ABlockAlignedPastItsReservationFindsItsAddressAgain) {
  constexpr size_t kAlign = size_t{1} << 32;
  std::vector<void*> keep, gaps;
  for (int i = 0; i < 40; i++) {  // dirty extents apart from each other
    void* p = alloc(4 * kMiB);
    fill(p, 4 * kMiB, 'g');
    (i % 2 ? keep : gaps).push_back(p);
  }
  for (void* p : gaps) free(p);
  void* a = alloc(100, kAlign);
  ASSERT_TRUE(is_aligned(addr(a), kAlign));
  const size_t reserved = chunks_->stats().reserved;
  for (int i = 0; i < 4; i++) {
    fill(a, 100, 'a');
    free(a);
    void* b = alloc(100, kAlign);
    EXPECT_EQ(b, a) << i;
    a = b;
  }
  EXPECT_EQ(chunks_->stats().reserved, reserved);
  free(a);
  for (void* p : keep) free(p);
  expect_empty();
}

TEST_F(HugeTest, SizesBeyondWhatMallocMayGiveAreRefused) {
  EXPECT_EQ(HugeLayer::size_for(SIZE_MAX), 0u);
  EXPECT_EQ(HugeLayer::size_for(static_cast<size_t>(PTRDIFF_MAX) + 1), 0u);
  EXPECT_EQ(HugeLayer::size_for(2 * kMiB + 1), 2 * kMiB + kPage);
  EXPECT_EQ(huge_->alloc(SIZE_MAX - kPage, kPage, false), nullptr);
  // Address space runs out (no kernel gives 2^62 bytes): refused, nothing kept.
  EXPECT_EQ(huge_->alloc(size_t{1} << 62, kPage, false), nullptr);
  expect_empty();
}

TEST_F(HugeTest, ZeroedAllocOnARecycledDirtySpan) {
  void* p = alloc(8 * kMiB);
  fill(p, 8 * kMiB, 0xab);
  free(p);
  void* q = alloc(8 * kMiB, kPage, true);
  ASSERT_EQ(q, p);  // the same span, still dirty
  EXPECT_TRUE(all_zero(q, 8 * kMiB));
  free(q);
  void* r = alloc(8 * kMiB);  // and without asking, the old bytes are there
  ASSERT_EQ(r, p);
  fill(r, kMiB, 0xcd);
  free(r);
  expect_empty();
}

TEST_F(HugeTest, FreedSpanGivesItsUntouchedHeadroomBackClean) {
  void* p = alloc(2 * kMiB);  // a fresh span: block 2 MiB, headroom 2 MiB never written
  Extent* e = extent(p);
  ASSERT_EQ(e->size, 4 * kMiB);
  fill(p, 2 * kMiB, 'c');
  free(p);
  EXPECT_EQ(chunks_->stats().dirty, 2 * kMiB);  // only what the block could write
  Extent* head = chunks_->lookup(p);
  Extent* tail = chunks_->lookup(ptr(addr(p) + 2 * kMiB));
  ASSERT_NE(head, nullptr);
  ASSERT_NE(tail, nullptr);
  EXPECT_EQ(head->state, chunk::ExtentState::kDirty);
  EXPECT_EQ(tail->state, chunk::ExtentState::kClean);
  // Grown into and shrunk back: what was written stays dirty.
  void* q = alloc(2 * kMiB);
  Extent* f = extent(q);
  ASSERT_EQ(huge_->resize(f, 8 * kMiB, kPage, false), q);
  fill(q, 8 * kMiB, 'd');
  EXPECT_EQ(huge_->resize_in_place(f, 2 * kMiB, false), 2 * kMiB);
  free(q);
  EXPECT_GE(chunks_->stats().dirty, 8 * kMiB);
  expect_empty();
}

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

TEST_F(HugeTest, ANewBlockOnRecycledPagesTakesNoDirtyHeadroom) {
  void* d = alloc(32 * kMiB);
  fill(d, 32 * kMiB, 0xee);
  free(d);
  // 8 MiB on the freed block's pages: the 24 MiB of them behind it stay free
  // (dirty) for other blocks, not held as this one's headroom.
  void* p = alloc(8 * kMiB);
  ASSERT_EQ(p, d);
  EXPECT_EQ(extent(p)->size, 8 * kMiB);
  void* q = alloc(16 * kMiB);
  EXPECT_EQ(addr(q), addr(p) + 8 * kMiB);  // reuses them
  free(q);
  free(p);
  // On clean space a new block gets its headroom as before.
  void* fresh = alloc(4 * kMiB);
  void* far = alloc(64 * kMiB);  // clean space: span with headroom
  EXPECT_GT(extent(far)->size, 64 * kMiB);
  free(far);
  free(fresh);
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

// ---- recycling ------------------------------------------------------------------

TEST_F(HugeTest, BiggerBlockStartsOnTheDirtyPagesOfAFreedOne) {
  void* p = alloc(20 * kMiB);  // its span: 20 MiB written, 20 MiB of headroom never touched
  fill(p, 20 * kMiB, 'f');
  free(p);
  ASSERT_EQ(chunks_->stats().dirty, 20 * kMiB);
  uint64_t maps = calls(os::Call::kMmap);
  void* q = alloc(24 * kMiB);  // fits no dirty extent alone
  EXPECT_EQ(q, p);             // the dirty pages and the clean headroom after them
  EXPECT_EQ(chunks_->stats().dirty, 0u);
  EXPECT_EQ(calls(os::Call::kMmap), maps);
  fill(q, 24 * kMiB, 'g');
  free(q);
  expect_empty();
}

// Blocks of random sizes freed and allocated in turn, as a program that
// keeps a few large buffers does: the pages ever written (what is resident
// while decay is far away) stay within a bound of the live bytes, rather
// than growing with every block that fits no freed one alone.
TEST_F(HugeTest, RandomCycleReusesDirtyPagesBeforeUntouchedOnes) {
  make(1024 * kMiB);
  constexpr int kLive = 8;
  std::mt19937_64 rng(7);
  auto size = [&] {  // 2-16 MiB, as many per doubling
    size_t base = (2 * kMiB) << (rng() % 3);
    return base + align_down(static_cast<size_t>(rng() % base), kPage);
  };
  std::vector<uintptr_t> touched;  // 2 MiB pages written, sorted
  auto touch = [&](void* p, size_t n) {
    for (uintptr_t a = align_down(addr(p), kHugePage); a < addr(p) + n; a += kHugePage) {
      auto it = std::lower_bound(touched.begin(), touched.end(), a);
      if (it == touched.end() || *it != a) touched.insert(it, a);
    }
  };
  void* blocks[kLive];
  size_t sizes[kLive];
  size_t live = 0, peak_live = 0;
  for (int i = 0; i < kLive; i++) {
    sizes[i] = size();
    blocks[i] = alloc(sizes[i]);
    touch(blocks[i], sizes[i]);
    live += sizes[i];
  }
  for (int step = 0; step < 400; step++) {
    int k = static_cast<int>(rng() % kLive);
    free(blocks[k]);
    live -= sizes[k];
    sizes[k] = size();
    blocks[k] = alloc(sizes[k]);
    touch(blocks[k], sizes[k]);
    live += sizes[k];
    if (live > peak_live) peak_live = live;
  }
  EXPECT_EQ(chunks_->stats().purged_bytes, 0u);  // no decay: the clock stood still
  // A live block's headroom may hold pages an earlier block wrote, so up to
  // twice the live bytes are expected; fresh space for each block that fits
  // no freed one alone made it 3.3 times (290 MiB for 88 MiB live).
  EXPECT_LE(touched.size() * kHugePage, peak_live / 2 * 5);
  for (void* p : blocks) free(p);
  expect_empty();
}

// ---- steady state -------------------------------------------------------------

TEST_F(HugeTest, AllocFreeLoopMakesNoSyscallsInSteadyState) {
  // Warm up: the largest span once, grown the way the loop grows.
  void* w = alloc(2 * kMiB);
  ASSERT_EQ(huge_->resize(extent(w), 64 * kMiB, kPage, false), w);
  free(w);
  uint64_t before = syscalls();
  for (int i = 0; i < 2000; i++) {
    size_t size = (size_t{2} << (i % 5)) * kMiB;  // 2..32 MiB
    void* p = alloc(size);
    static_cast<char*>(p)[0] = 1;
    static_cast<char*>(p)[size - 1] = 1;
    if (i % 3 == 0) {
      ASSERT_EQ(huge_->resize(extent(p), 2 * size, kPage, false), p);
    }
    free(p);
    if (i % 10 == 0) clock_.advance_ms(1);  // 200 ms: well within the decay time
  }
  EXPECT_EQ(syscalls(), before);
  expect_empty();
}

TEST_F(HugeTest, RoundsAfterTheFirstGrowThroughTheRecycledSpan) {
  uintptr_t base = 0;
  uint64_t after_first = 0;
  for (int round = 0; round < 3; round++) {
    void* p = alloc(2 * kMiB);
    if (round == 0) base = addr(p);
    EXPECT_EQ(addr(p), base);
    for (size_t size = 4 * kMiB; size <= 128 * kMiB; size *= 2) {
      void* q = huge_->resize(extent(p), size, kPage, false);
      ASSERT_EQ(q, p);
      fill(static_cast<char*>(p) + size / 2, size / 2, 0xff);
    }
    free(p);
    if (round == 0) after_first = syscalls();
  }
  EXPECT_EQ(syscalls(), after_first);
  EXPECT_EQ(growth(GrowthPath::kMremap) + growth(GrowthPath::kCopy), 0u);
  expect_empty();
}

// ---- transparent huge pages ----------------------------------------------------

std::vector<test::SysCall> advice_calls(const FakeKernel& k) {
  std::vector<test::SysCall> v;
  for (const auto& c : k.calls())
    if (c.sys == Sys::kMadvise && c.arg == kMadvHugepage) v.push_back(c);
  return v;
}

// A fresh block comes from plain space: a program that touches one page of
// it pays one page (advised, every touched 2 MiB became resident: 3 000
// blocks of 2-4 MiB with a page written each held 6 GiB). A growing one
// (realloc) comes from huge-page space, advised a reservation at a time.
TEST_F(HugeTest, FreshBlocksArePlainAndGrowingOnesGetHugePageSpace) {
  ASSERT_EQ(os_->features().thp, os::ThpMode::kMadvise);
  kernel_.reset_calls();
  void* p = alloc(8 * kMiB);
  EXPECT_EQ(extent(p)->space, chunk::Space::kPlain);
  ASSERT_EQ(huge_->resize(extent(p), 16 * kMiB, kPage, false), p);
  EXPECT_EQ(advice_calls(kernel_).size(), 0u);

  void* g = huge_->alloc(4 * kMiB, kPage, false, true);
  ASSERT_NE(g, nullptr);
  Extent* e = extent(g);
  EXPECT_EQ(e->space, chunk::Space::kHuge);
  auto v = advice_calls(kernel_);
  ASSERT_EQ(v.size(), 1u);  // the whole reservation, once
  EXPECT_EQ(v[0].len, 256 * kMiB);
  EXPECT_LE(addr(v[0].addr), addr(g));
  EXPECT_GE(addr(v[0].addr) + v[0].len, e->end());
  void* g2 = huge_->alloc(4 * kMiB, kPage, false, true);
  ASSERT_NE(g2, nullptr);
  EXPECT_EQ(extent(g2)->space, chunk::Space::kHuge);
  ASSERT_EQ(huge_->resize(e, 8 * kMiB, kPage, false), g);
  EXPECT_EQ(advice_calls(kernel_).size(), 1u);  // growth inside it needs none
  free(p);
  free(g);
  free(g2);
  expect_empty();
}

TEST_F(HugeTest, HugePageSpaceFollowsThePolicy) {
  huge::Options o;
  o.thp = huge::ThpPolicy::kNever;
  make(256 * kMiB, o);
  kernel_.reset_calls();
  void* p = huge_->alloc(8 * kMiB, kPage, false, true);
  EXPECT_EQ(extent(p)->space, chunk::Space::kPlain);
  EXPECT_EQ(advice_calls(kernel_).size(), 0u);
  free(p);

  // kAuto with a lowered threshold: a growing block under a huge page stays
  // plain (its span's whole huge page would be resident).
  o.thp = huge::ThpPolicy::kAuto;
  o.threshold = 256 * 1024;
  make(256 * kMiB, o);
  p = huge_->alloc(256 * 1024, kPage, false, true);
  EXPECT_EQ(extent(p)->space, chunk::Space::kPlain);
  const size_t small_span = extent(p)->size;
  free(p);
  // From half a huge page on it is on its way to a whole one (realloc makes
  // such blocks from a buffer in the dense space): huge-page space, and
  // headroom counted from a whole huge page, as that block's would be.
  p = huge_->alloc(kHugePage / 2, kPage, false, true);
  EXPECT_EQ(extent(p)->space, chunk::Space::kHuge);
  void* whole = huge_->alloc(kHugePage, kPage, false, true);
  EXPECT_EQ(extent(p)->size, extent(whole)->size);
  EXPECT_GT(extent(p)->size, small_span);
  free(p);
  free(whole);

  o.thp = huge::ThpPolicy::kAlways;
  make(256 * kMiB, o);
  kernel_.reset_calls();
  p = alloc(256 * 1024);
  EXPECT_EQ(extent(p)->space, chunk::Space::kHuge);
  EXPECT_EQ(advice_calls(kernel_).size(), 1u);
  free(p);

  // The system's mode is always: the kernel does it, no space apart.
  kernel_.thp = "[always] madvise never\n";
  make();
  kernel_.reset_calls();
  p = huge_->alloc(8 * kMiB, kPage, false, true);
  EXPECT_EQ(extent(p)->space, chunk::Space::kPlain);
  EXPECT_EQ(advice_calls(kernel_).size(), 0u);
  free(p);
}

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
  for (const auto& c : calls)
    if (c.sys == Sys::kMremap) EXPECT_EQ(c.addr, old);
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

// ---- strict overcommit --------------------------------------------------------

// Under strict overcommit uncommitted space is PROT_NONE, a mapping of its
// own: a new block is exactly its pages, committed, right after the block
// before it, so live blocks are one read-write mapping (with headroom each
// was two, and 32 700 live blocks reached vm.max_map_count).
TEST_F(HugeTest, StrictOvercommitPacksNewBlocksWithoutGaps) {
  kernel_.overcommit = "2\n";
  make();
  ASSERT_TRUE(os_->features().strict_overcommit);
  kernel_.reset_calls();
  const size_t sizes[] = {2 * kMiB + 100 * 1024, 3 * kMiB, 2 * kMiB, 5 * kMiB - kPage};
  uintptr_t next = 0;
  std::vector<void*> blocks;
  for (size_t size : sizes) {
    void* p = alloc(size);
    Extent* e = extent(p);
    EXPECT_EQ(e->size, align_up(size, kPage));
    if (next != 0) {
      EXPECT_EQ(addr(p), next);
    }
    next = e->end();
    fill(p, e->size, 'n');
    blocks.push_back(p);
  }
  // Committed: each block's pages exactly, nothing else.
  size_t committed = 0;
  for (const auto& c : kernel_.calls())
    if (c.sys == Sys::kMprotect && addr(c.addr) >= addr(blocks[0]) && addr(c.addr) < next) committed += c.len;
  size_t total = 0;
  for (size_t size : sizes) total += align_up(size, kPage);
  EXPECT_EQ(committed, total);
  for (void* p : blocks) free(p);
  expect_empty();
}

// #11's case 2 under strict overcommit, on the fake kernel's model of the
// mappings, scaled down tenfold to stay quick (10 000 blocks, limit 6 554;
// 100 000 blocks against 65 530 behave the same, in 40 s): the live huge
// blocks take few mappings (packed: one read/write run), and with every
// other one freed and purged -- each hole would be a PROT_NONE mapping of
// its own -- ductile stops splitting at half the limit and hands the purged
// spans out again, all of them, with no call refused.
TEST_F(HugeTest, StrictOvercommitLiveBlocksStayFarFromTheMappingLimit) {
  constexpr size_t kBlocks = 10000, kLimit = 6554;
  kernel_.overcommit = "2\n";
  kernel_.map_limit = kLimit;
  kernel_.log_calls = false;
  make(size_t{1} << 30);
  std::vector<void*> v(kBlocks);
  for (size_t i = 0; i < kBlocks; i++) {
    v[i] = huge_->alloc(2 * kMiB + (i % 4) * kPage * 64, kPage, false);
    ASSERT_NE(v[i], nullptr) << i;
    static_cast<char*>(v[i])[0] = 1;
  }
  EXPECT_LE(kernel_.mappings() * 10, kBlocks);  // at most 0.1 a block
  for (size_t i = 0; i < kBlocks; i += 2) free(v[i]);
  (void)chunks_->trim();
  for (size_t i = 0; i < kBlocks; i += 2) {
    v[i] = huge_->alloc(2 * kMiB, kPage, false);
    ASSERT_NE(v[i], nullptr) << i;
    static_cast<char*>(v[i])[0] = 2;
  }
  EXPECT_EQ(kernel_.map_refusals(), 0u);
  EXPECT_LE(kernel_.peak_mappings(), kLimit * 5 / 8);
  for (void* p : v) free(p);
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

// ---- guard pages (hardened mode) ---------------------------------------------
// With Options::guard, the page past a block's usable end is PROT_NONE, and
// the span always has that page; the headroom past it stays read/write
// (under strict overcommit everything past the block is uncommitted,
// PROT_NONE). Checked with the kernel's own view (/proc/self/maps).

huge::Options guarded() {
  huge::Options o;
  o.guard = true;
  return o;
}

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
  if (GetParam() == GuardMode::kMprotect) EXPECT_FALSE(os_->guard_markers());
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

// ---- failures of every system call on the way -------------------------------

struct Scenario {
  const char* name;
  bool strict;
  size_t reservation;
  bool busy_neighbour;
  size_t grow_to;
  bool guard = false;
};

void PrintTo(const Scenario& sc, std::ostream* os) { *os << sc.name; }

class HugeFailure : public HugeTest, public ::testing::WithParamInterface<Scenario> {};

TEST_P(HugeFailure, EachFailingCallLeavesTheOldBlockIntactAndNothingLeaks) {
  const Scenario sc = GetParam();
  const Sys kinds[] = {Sys::kMmap, Sys::kMunmap, Sys::kMprotect, Sys::kMremap, Sys::kMadvise};
  for (Sys sys : kinds) {
    for (int times : {1, 1000}) {  // that one call, or every call from then on
      for (int skip = 0; skip < 16; skip++) {
        kernel_.overcommit = sc.strict ? "2\n" : "0\n";
        make(sc.reservation, sc.guard ? guarded() : huge::Options());
        void* p = alloc(2 * kMiB);
        void* busy = sc.busy_neighbour ? alloc(2 * kMiB) : nullptr;
        fill(p, 2 * kMiB, 'o');
        Extent* e = extent(p);
        size_t before = kernel_.count(sys);
        kernel_.fail(sys, ENOMEM, times, skip);
        void* q = huge_->resize(e, sc.grow_to, kPage, false);
        const bool hit = kernel_.count(sys) - before > static_cast<size_t>(skip);
        kernel_.clear_failures();
        SCOPED_TRACE(::testing::Message() << sc.name << " sys " << static_cast<int>(sys) << " times "
                                          << times << " skip " << skip);
        if (q == nullptr) {
          // Intact: same place, same size, same bytes, still ours, still writable.
          ASSERT_EQ(chunks_->lookup(p), e);
          EXPECT_EQ(e->kind, chunk::ExtentKind::kHuge);
          EXPECT_EQ(e->usable, 2 * kMiB);
          EXPECT_TRUE(holds(p, 2 * kMiB, 'o'));
          fill(p, 2 * kMiB, 'p');
          q = p;
          if (sc.guard) {
            // (Past the guard page a refused call may leave another one.)
            EXPECT_EQ(test::open_bytes(e->base + e->usable, e->base + e->usable + kPage), 0u) << "guard lost";
          }
        } else {
          EXPECT_TRUE(holds(q, 2 * kMiB, 'o'));
          EXPECT_EQ(extent(q)->usable, sc.grow_to);
          fill(q, sc.grow_to, 'o');
          fill(q, 2 * kMiB, 'p');
          if (sc.guard) {
            Extent* t = extent(q);
            EXPECT_EQ(test::open_bytes(t->base + t->usable, t->base + t->usable + kPage), 0u) << "no guard";
          }
        }
        expect_consistent();
        // And it still works once the kernel agrees: grows again, and frees.
        void* r = huge_->resize(extent(q), 2 * sc.grow_to, kPage, false);
        ASSERT_NE(r, nullptr);
        EXPECT_TRUE(holds(r, 2 * kMiB, 'p'));
        free(r);
        if (busy) free(busy);
        expect_empty();
        if (!hit) break;  // no call of this kind was left to fail
      }
    }
  }
}

TEST_F(HugeTest, RefusedEverywhereTheResizeFailsAndTheBlockIsIntact) {
  // Fixed map refused, and no span to move into: nothing can serve.
  make(4 * kMiB);
  void* p = alloc(2 * kMiB);
  fill(p, 2 * kMiB, 'i');
  Extent* e = extent(p);
  kernel_.fail(Sys::kMmap, ENOMEM, 1000);
  EXPECT_EQ(huge_->resize(e, 16 * kMiB, kPage, false), nullptr);
  EXPECT_EQ(huge_->resize_in_place(e, 16 * kMiB, false), 2 * kMiB);
  kernel_.clear_failures();
  EXPECT_EQ(chunks_->lookup(p), e);
  EXPECT_EQ(e->usable, 2 * kMiB);
  EXPECT_TRUE(holds(p, 2 * kMiB, 'i'));
  expect_consistent();
  // Strict overcommit: the commit of the headroom, and of any target, refused.
  kernel_.overcommit = "2\n";
  make();
  p = alloc(2 * kMiB);
  fill(p, 2 * kMiB, 'j');
  e = extent(p);
  kernel_.fail(Sys::kMprotect, ENOMEM, 1000);
  EXPECT_EQ(huge_->resize(e, 3 * kMiB, kPage, false), nullptr);
  kernel_.clear_failures();
  EXPECT_EQ(e->usable, 2 * kMiB);
  EXPECT_TRUE(holds(p, 2 * kMiB, 'j'));
  fill(p, 2 * kMiB, 'k');
  ASSERT_EQ(huge_->resize(e, 3 * kMiB, kPage, false), p);
  free(p);
  expect_empty();
}

TEST_P(HugeFailure, AllocUnderFailuresKeepsNothing) {
  const Scenario sc = GetParam();
  for (Sys sys : {Sys::kMmap, Sys::kMprotect, Sys::kMadvise}) {
    kernel_.overcommit = sc.strict ? "2\n" : "0\n";
    make(sc.reservation, sc.guard ? guarded() : huge::Options());
    kernel_.fail(sys, ENOMEM, 1000);
    void* p = huge_->alloc(sc.grow_to, kPage, false);
    kernel_.clear_failures();
    if (p != nullptr) {
      fill(p, sc.grow_to, 'a');  // advice is best effort: the block is fine without it
      free(p);
    }
    expect_empty();
  }
}

INSTANTIATE_TEST_SUITE_P(
    Paths, HugeFailure,
    ::testing::Values(Scenario{"mremap", false, 256 * kMiB, true, 8 * kMiB},
                      Scenario{"fixed_map", false, 4 * kMiB, false, 16 * kMiB},
                      Scenario{"strict_headroom", true, 256 * kMiB, false, 4 * kMiB},
                      Scenario{"strict_mremap", true, 256 * kMiB, true, 8 * kMiB},
                      Scenario{"strict_fixed_map", true, 4 * kMiB, false, 16 * kMiB},
                      Scenario{"guard_headroom", false, 256 * kMiB, false, 3 * kMiB, true},
                      Scenario{"guard_neighbour", false, 256 * kMiB, false, 24 * kMiB, true},
                      Scenario{"guard_mremap", false, 256 * kMiB, true, 8 * kMiB, true},
                      Scenario{"guard_fixed_map", false, 4 * kMiB, false, 16 * kMiB, true},
                      Scenario{"guard_strict_neighbour", true, 256 * kMiB, false, 3 * kMiB, true},
                      Scenario{"guard_strict_mremap", true, 256 * kMiB, true, 8 * kMiB, true},
                      Scenario{"guard_strict_fixed_map", true, 4 * kMiB, false, 16 * kMiB, true}),
    [](const ::testing::TestParamInfo<Scenario>& i) { return std::string(i.param.name); });

// ---- statistics ----------------------------------------------------------------

TEST_F(HugeTest, StatsCountEachPath) {
  make(8 * kMiB);
  void* p = alloc(2 * kMiB);  // span 4 MiB at the start of an 8 MiB reservation
  Extent* e = extent(p);
  if (!unmapped(e->base + 8 * kMiB, 16 * kMiB)) GTEST_SKIP() << "the address past the reservation is taken";
  ASSERT_EQ(huge_->resize(e, 4 * kMiB, kPage, false), p);   // headroom
  ASSERT_EQ(huge_->resize(e, 6 * kMiB, kPage, false), p);   // the reservation's rest
  ASSERT_EQ(huge_->resize(e, 12 * kMiB, kPage, false), p);  // past the reservation: mapped
  huge::HugeStats s = huge_->stats();
  EXPECT_EQ(s.growth[static_cast<size_t>(GrowthPath::kHeadroom)], 1u);
  EXPECT_EQ(s.growth[static_cast<size_t>(GrowthPath::kNeighbour)], 1u);
  EXPECT_EQ(s.growth[static_cast<size_t>(GrowthPath::kFixedMap)], 1u);
  EXPECT_EQ(s.growth[static_cast<size_t>(GrowthPath::kMremap)], 0u);
  EXPECT_EQ(s.growth[static_cast<size_t>(GrowthPath::kCopy)], 0u);

  // Each step grows by 2 MiB only past what the step before left (growing
  // to twice the span each time made a 1.5 GiB copy).
  ASSERT_EQ(huge_->resize(e, 14 * kMiB, kPage, false), p);  // headroom again
  Blocker b = block_after(e);
  void* q = huge_->resize(e, e->size + 2 * kMiB, kPage, false);  // mremap
  ASSERT_NE(q, nullptr);
  unblock(b);
  Extent* t = extent(q);
  ASSERT_EQ(huge_->resize(t, t->usable + 2 * kMiB, kPage, false), q);  // headroom
  b = block_after(t);
  kernel_.fail(Sys::kMremap, ENOMEM);
  void* r = huge_->resize(t, t->size + 2 * kMiB, kPage, false);  // copy
  ASSERT_NE(r, nullptr);
  unblock(b);
  EXPECT_EQ(huge_->resize_in_place(extent(r), 2 * kMiB, false), 2 * kMiB);

  s = huge_->stats();
  EXPECT_EQ(s.allocs, 1u);
  EXPECT_EQ(s.frees, 0u);
  EXPECT_EQ(s.shrinks, 1u);
  EXPECT_EQ(s.growth[static_cast<size_t>(GrowthPath::kHeadroom)], 3u);
  EXPECT_EQ(s.growth[static_cast<size_t>(GrowthPath::kNeighbour)], 1u);
  EXPECT_EQ(s.growth[static_cast<size_t>(GrowthPath::kFixedMap)], 1u);
  EXPECT_EQ(s.growth[static_cast<size_t>(GrowthPath::kMremap)], 1u);
  EXPECT_EQ(s.growth[static_cast<size_t>(GrowthPath::kCopy)], 1u);
  EXPECT_EQ(s.active_bytes, 2 * kMiB);
  EXPECT_EQ(s.span_bytes, extent(r)->size);
  free(r);
  EXPECT_EQ(huge_->stats().frees, 1u);
  EXPECT_EQ(std::string(huge::growth_path_name(GrowthPath::kFixedMap)), "fixed_map");
  expect_empty();
}

// ---- threads ---------------------------------------------------------------------

TEST(HugeStress, ThreadsAllocGrowShrinkAndFreeConcurrently) {
  FakeKernel kernel;
  os::Os os(kernel);
  FakeClock clock;
  chunk::Options co;
  co.reservation = 64 * kMiB;
  co.decay_ns = 20 * 1000000ull;  // purges now and then, but not after every other op
  ChunkLayer chunks(os, clock, co);
  HugeLayer layer(chunks);
  std::atomic<int> errors{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; t++) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(t);
      const unsigned char tag = static_cast<unsigned char>('A' + t);
      std::vector<void*> mine;
      auto ok = [&](void* p) {
        Extent* e = chunks.lookup(p);
        auto* c = static_cast<unsigned char*>(p);
        return e != nullptr && e->base == addr(p) && c[0] == tag && c[e->usable - 1] == tag;
      };
      for (int i = 0; i < 300; i++) {
        unsigned op = rng() % 7;  // alloc, alloc, resize, resize, decay, free, free
        if (op < 2 || mine.empty()) {
          size_t size = (2 + rng() % 3) * kMiB;
          void* p = layer.alloc(size, kPage, op == 0);
          if (p == nullptr) {
            errors++;
            continue;
          }
          std::memset(p, tag, size);
          mine.push_back(p);
        } else if (op < 4) {
          size_t k = rng() % mine.size();
          if (!ok(mine[k])) errors++;
          Extent* e = chunks.lookup(mine[k]);
          size_t old = e->usable;
          size_t size = (1 + rng() % 8) * kMiB;
          void* q = layer.resize(e, size, kPage, false);
          if (q == nullptr) {
            errors++;
            continue;
          }
          if (size > old) std::memset(static_cast<char*>(q) + old, tag, chunks.lookup(q)->usable - old);
          mine[k] = q;
          if (!ok(q)) errors++;
        } else if (op == 4) {
          clock.advance_ms(1);
          (void)chunks.decay();
        } else {
          size_t k = rng() % mine.size();
          if (!ok(mine[k])) errors++;
          layer.free(chunks.lookup(mine[k]));
          mine[k] = mine.back();
          mine.pop_back();
        }
      }
      for (void* p : mine) {
        if (!ok(p)) errors++;
        layer.free(chunks.lookup(p));
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(errors.load(), 0);
  huge::HugeStats s = layer.stats();
  EXPECT_EQ(s.active_bytes, 0u);
  EXPECT_EQ(s.span_bytes, 0u);
  chunk::ChunkStats c = chunks.stats();
  EXPECT_EQ(c.active, 0u);
  EXPECT_EQ(c.dirty + c.clean, c.reserved);
}

}  // namespace
}  // namespace ductile
