// SPDX-License-Identifier: BSD-2-Clause
// The chunk layer: recycling, coalescing, alloc-at-address, growth, decay
// under a fake clock, hysteresis, batched purges, failure injection, bad
// input, and a multi-threaded stress test.
#include <pthread.h>
#include <sys/mman.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "chunk/chunk.h"
#include "support/fake_clock.h"
#include "support/maps.h"
#include "support/fake_kernel.h"
#include "support/layers.h"

namespace ductile {
namespace {

using chunk::Allocation;
using chunk::ChunkLayer;
using chunk::Extent;
using chunk::ExtentState;
using chunk::GrowPath;
using test::FakeClock;
using test::FakeKernel;
using test::Sys;

constexpr size_t kMiB = size_t{1} << 20;

class ChunkTest : public test::ChunkLayerTest {
 protected:
  void SetUp() override { make(); }

  void make(size_t reservation = 64 * kMiB) { make_chunks(reservation); }

  Extent* alloc(size_t size, size_t align = kPage) {
    Allocation a = chunks_->alloc(size, align);
    EXPECT_NE(a.extent, nullptr);
    return a.extent;
  }
  size_t syscalls() { return os_->counters().total(); }
  // An active extent's last page maps to it, or to nothing where that entry
  // was never written (PageMap::set_active_boundaries); never to another.
  static bool last_entry_ok(ChunkLayer& c, const Extent* e) {
    const Extent* x = c.lookup(ptr(e->end() - kPage));
    return x == nullptr || x == e;
  }
};

TEST_F(ChunkTest, AllocReturnsAlignedCommittedPages) {
  for (size_t align : {kPage, 64 * kPage, kHugePage, 4 * kHugePage}) {
    Allocation a = chunks_->alloc(3 * kPage, align);
    ASSERT_NE(a.extent, nullptr);
    EXPECT_TRUE(is_aligned(a.extent->base, align));
    EXPECT_EQ(a.extent->size, 3 * kPage);
    if (a.zeroed) {
      for (size_t i = 0; i < a.extent->size; i++) ASSERT_EQ(static_cast<char*>(ptr(a.extent->base))[i], 0);
    }
    std::memset(ptr(a.extent->base), 1, a.extent->size);
    chunks_->free(a.extent);
  }
}

TEST_F(ChunkTest, BadInputIsRefusedWithoutSyscalls) {
  size_t before = syscalls();
  EXPECT_EQ(chunks_->alloc(0).extent, nullptr);
  EXPECT_EQ(chunks_->alloc(kPage + 1).extent, nullptr);
  EXPECT_EQ(chunks_->alloc(SIZE_MAX & ~(kPage - 1)).extent, nullptr);  // address space cannot hold it
  EXPECT_EQ(chunks_->alloc(kPage, 3 * kPage).extent, nullptr);   // not a power of two
  EXPECT_EQ(chunks_->alloc(kPage, 16).extent, nullptr);          // below a page
  EXPECT_EQ(chunks_->alloc_at(kPage + 1, kPage).extent, nullptr);
  EXPECT_EQ(chunks_->alloc_at(0x1000, kPage).extent, nullptr);   // not ours
  EXPECT_EQ(chunks_->lookup(reinterpret_cast<void*>(uintptr_t{1} << 50)), nullptr);
  EXPECT_EQ(chunks_->lookup(&before), nullptr);                  // the stack is not ours
  EXPECT_FALSE(chunks_->shrink(nullptr, kPage));
  EXPECT_EQ(chunks_->grow(nullptr, kPage, true).path, GrowPath::kRefused);
  // Only the huge request may have tried (and failed) to reserve.
  EXPECT_LE(syscalls() - before, 4u);
}

TEST_F(ChunkTest, OneReservationServesManyExtents) {
  std::vector<Extent*> v;
  v.push_back(alloc(16 * kPage));  // the reservation, and a block of metadata
  size_t before = os_->counters().get(os::Call::kMmap);
  for (int i = 0; i < 99; i++) v.push_back(alloc(16 * kPage));
  EXPECT_EQ(os_->counters().get(os::Call::kMmap), before);
  EXPECT_EQ(chunks_->stats().reservations, 1u);
  for (Extent* e : v) chunks_->free(e);
}

// Under RLIMIT_AS every reservation counts whole: 1 GiB ones would make a
// process limited to 1 GiB fail its first malloc (ls under ulimit -v).
TEST_F(ChunkTest, ReservationsStayAFractionOfTheAddressSpaceLimit) {
  make(1024 * kMiB);
  Extent* a = alloc(16 * kPage);
  EXPECT_EQ(chunks_->stats().reserved, 1024 * kMiB);  // unlimited: the usual size
  chunks_->free(a);

  kernel_.as_limit = 64 * kMiB;
  make(1024 * kMiB);
  a = alloc(16 * kPage);
  EXPECT_EQ(chunks_->stats().reserved, 4 * kMiB);  // a sixteenth of the limit
  Extent* b = alloc(8 * kMiB);                      // more than that: exactly what it needs
  EXPECT_EQ(chunks_->stats().reserved, 12 * kMiB);
  EXPECT_EQ(chunks_->stats().reservations, 2u);
  chunks_->free(a);
  chunks_->free(b);

  kernel_.as_limit = 8 * kMiB;  // never below one huge page
  make(1024 * kMiB);
  a = alloc(kPage);
  EXPECT_EQ(chunks_->stats().reserved, 2 * kMiB);
  chunks_->free(a);
}

TEST_F(ChunkTest, RefusedReservationFallsBackToTheSizeAskedFor) {
  make(1024 * kMiB);
  kernel_.fail(Sys::kMmap, ENOMEM);  // the 1 GiB reservation
  errno = 0;
  Extent* a = alloc(16 * kPage);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(errno, 0);  // the refusal on the way does not show
  EXPECT_EQ(chunks_->stats().reserved, 2 * kMiB);
  EXPECT_EQ(chunks_->stats().reservations, 1u);
  chunks_->free(a);
}

// At the limit, retained free space is what stands in the way of a new
// reservation: it is unmapped and the reservation tried again.
TEST_F(ChunkTest, AtTheAddressSpaceLimitFreeSpaceIsUnmappedForANewReservation) {
  kernel_.as_limit = 64 * kMiB;
  make(4 * kMiB);
  Extent* a = alloc(2 * kMiB);
  std::memset(ptr(a->base), 1, kPage);
  const uintptr_t old_base = a->base;
  chunks_->free(a);  // 2 MiB dirty, 2 MiB clean, all of the reservation
  ASSERT_EQ(chunks_->stats().reserved, 4 * kMiB);
  const size_t unmaps = kernel_.count(Sys::kMunmap);
  kernel_.fail(Sys::kMmap, ENOMEM);  // the 8 MiB reservation, once
  Extent* b = alloc(8 * kMiB);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(chunks_->stats().reserved, 8 * kMiB);
  EXPECT_EQ(chunks_->stats().dirty, 0u);
  EXPECT_EQ(chunks_->stats().clean, 0u);
  EXPECT_EQ(kernel_.count(Sys::kMunmap), unmaps + 2);
  EXPECT_EQ(chunks_->lookup(ptr(old_base)), nullptr);
  chunks_->free(b);

  // Without a limit a refused reservation keeps the retained space.
  kernel_.as_limit = SIZE_MAX;
  make(4 * kMiB);
  a = alloc(2 * kMiB);
  chunks_->free(a);
  kernel_.fail(Sys::kMmap, ENOMEM, 4);
  Allocation r = chunks_->alloc(64 * kMiB);
  EXPECT_EQ(r.extent, nullptr);
  EXPECT_EQ(chunks_->stats().reserved, 4 * kMiB);
}

TEST_F(ChunkTest, FreedExtentIsRecycledWithoutSyscalls) {
  Extent* e = alloc(8 * kPage);
  uintptr_t base = e->base;
  std::memset(ptr(base), 'r', 8 * kPage);
  chunks_->free(e);
  size_t before = syscalls();
  Allocation a = chunks_->alloc(8 * kPage);
  ASSERT_NE(a.extent, nullptr);
  EXPECT_EQ(a.extent->base, base);
  EXPECT_FALSE(a.zeroed);  // dirty: still holds the old bytes
  EXPECT_EQ(static_cast<char*>(ptr(base))[0], 'r');
  EXPECT_EQ(syscalls(), before);
}

TEST_F(ChunkTest, FreeNeighboursCoalesce) {
  Extent* a = alloc(4 * kPage);
  Extent* b = alloc(4 * kPage);
  Extent* c = alloc(4 * kPage);
  uintptr_t base = a->base;
  ASSERT_EQ(b->base, a->end());
  ASSERT_EQ(c->base, b->end());
  chunks_->free(a);
  chunks_->free(c);
  chunks_->free(b);  // joins both sides
  Extent* whole = chunks_->lookup(ptr(base));
  ASSERT_NE(whole, nullptr);
  EXPECT_EQ(whole->base, base);
  EXPECT_EQ(whole->size, 12 * kPage);
  EXPECT_EQ(whole->state, ExtentState::kDirty);
  EXPECT_EQ(chunks_->lookup(ptr(base + 12 * kPage - kPage)), whole);
  size_t before = syscalls();
  Allocation all = chunks_->alloc(12 * kPage);
  EXPECT_EQ(all.extent->base, base);
  EXPECT_EQ(syscalls(), before);
}

// The three address spaces (chunk::Space) share no reservation and no free
// extent: advice given to a huge-page space's whole reservation must not
// reach plain space, and medium blocks packed into the dense space must not
// take a huge block's headroom (with the two mixed in one space, 64 buffers
// doubling to 16 MiB moved 28 huge blocks by mremap and faulted 2 400-10 400
// pages in each round after the first, where apart they fault none).
TEST_F(ChunkTest, EachSpaceHasReservationsOfItsOwn) {
  using chunk::Space;
  ASSERT_EQ(os_->features().thp, os::ThpMode::kMadvise);
  auto take = [&](size_t size, Space space) {
    Allocation a = chunks_->alloc(size, kPage, SIZE_MAX, space);
    EXPECT_NE(a.extent, nullptr);
    if (a.extent != nullptr) EXPECT_EQ(a.extent->space, space);
    return a.extent;
  };
  auto advice = [&] { return os_->counters().get(os::Call::kMadvise); };
  Extent* p = take(16 * kPage, Space::kPlain);
  const uint64_t advised = advice();
  Extent* d = take(16 * kPage, Space::kDense);
  Extent* h = take(16 * kPage, Space::kHuge);
  EXPECT_EQ(chunks_->stats().reservations, 3u);
  EXPECT_EQ(advice(), advised + 2);  // each huge-page space's reservation, once and whole
  // Reservations follow one another: plain, dense, huge.
  ASSERT_EQ(d->base, p->base + 64 * kMiB);
  ASSERT_EQ(h->base, d->base + 64 * kMiB);

  // A freed extent goes back to its own space only.
  const uintptr_t at = d->base;
  chunks_->free(d);
  Extent* h2 = take(16 * kPage, Space::kHuge);
  Extent* p2 = take(16 * kPage, Space::kPlain);
  EXPECT_NE(h2->base, at);
  EXPECT_NE(p2->base, at);
  d = take(16 * kPage, Space::kDense);
  EXPECT_EQ(d->base, at);  // the dirty one, again

  // The rest of the dense reservation, grown by a page: the page past it is
  // free, but the huge space's.
  Extent* rest = take(64 * kMiB - 16 * kPage, Space::kDense);
  const uintptr_t huge_start = h->base;
  ASSERT_EQ(rest->end(), huge_start);
  chunks_->free(h);
  const uint64_t before = syscalls();
  EXPECT_EQ(chunks_->grow(rest, rest->size + kPage, true).path, GrowPath::kRefused);
  EXPECT_EQ(rest->size, 64 * kMiB - 16 * kPage);
  EXPECT_EQ(syscalls(), before);
  EXPECT_EQ(chunks_->lookup(ptr(huge_start))->space, Space::kHuge);
  for (Extent* e : {p, d, h2, p2, rest}) chunks_->free(e);
}

// An extent handed out from untouched space leaves the page-map entry of its
// last page unwritten: for a huge span that entry lies in a leaf page of its
// own (entries 2 MiB apart), and writing it doubled the resident metadata of
// a sparsely used huge block. Merges still find every free neighbour.
TEST_F(ChunkTest, ActiveExtentFromUntouchedSpaceLeavesItsLastEntryUnwritten) {
  Extent* a = alloc(4 * kMiB, kHugePage);
  Extent* b = alloc(4 * kMiB, kHugePage);
  ASSERT_EQ(b->base, a->end());
  const uintptr_t base = a->base;
  EXPECT_EQ(chunks_->lookup(ptr(a->base)), a);
  EXPECT_EQ(chunks_->lookup_entry(ptr(a->end() - kPage)), 0u);
  EXPECT_EQ(chunks_->lookup_entry(ptr(b->end() - kPage)), 0u);
  chunks_->free(b);  // its left neighbour is active: nothing to merge
  EXPECT_EQ(chunks_->lookup(ptr(base + 4 * kMiB))->base, base + 4 * kMiB);
  chunks_->free(a);  // finds b (and the rest of the reservation) on its right
  Extent* whole = chunks_->lookup(ptr(base));
  ASSERT_NE(whole, nullptr);
  EXPECT_EQ(whole->base, base);
  EXPECT_GE(whole->size, 8 * kMiB);
}

// The page map under a random mix of allocations (with and without room),
// frees, grows, shrinks, trims and mapped interiors: every active extent is
// found at its first page and its 2 MiB-aligned pages (records there live
// elsewhere than page entries) and no page of it maps to another extent;
// every free extent is found at both ends. A record left behind by a merge,
// a split or a grow would point at another extent here.
TEST_F(ChunkTest, PageMapEntriesNeverPointAtAnotherExtent) {
  std::mt19937_64 rng(12345);
  std::vector<Extent*> live;
  auto check_all = [&] {
    for (Extent* e : live) {
      ASSERT_EQ(chunks_->lookup(ptr(e->base)), e);
      for (uintptr_t a = align_up(e->base, kHugePage); a < e->end(); a += kHugePage) {
        Extent* x = chunks_->lookup(ptr(a));
        ASSERT_TRUE(x == e || (x == nullptr && !e->interior_mapped && a != e->base)) << "page " << (a - e->base);
      }
      for (int k = 0; k < 8; k++) {
        const uintptr_t a = e->base + (rng() % (e->size / kPage)) * kPage;
        Extent* x = chunks_->lookup(ptr(a));
        ASSERT_TRUE(x == e || (x == nullptr && !e->interior_mapped)) << "page " << (a - e->base);
      }
      ASSERT_TRUE(last_entry_ok(*chunks_, e));
      Extent* right = chunks_->lookup(ptr(e->end()));
      ASSERT_TRUE(right == nullptr || right->base == e->end());
    }
  };
  for (int step = 0; step < 3000; step++) {
    const unsigned op = rng() % 10;
    if (op < 4 || live.empty()) {
      const size_t size = (1 + rng() % (rng() % 2 ? 16 : 2048)) * kPage;
      const size_t align = rng() % 3 == 0 ? kHugePage : kPage;
      const size_t room = rng() % 2 ? size : 0;
      Allocation a = chunks_->alloc(size, align, SIZE_MAX, chunk::Space::kPlain, room);
      ASSERT_NE(a.extent, nullptr);
      ASSERT_TRUE(a.extent->size == size || a.extent->size == size + room);
      if (rng() % 4 == 0) {
        ASSERT_TRUE(chunks_->map_interior(a.extent));
      }
      live.push_back(a.extent);
    } else {
      const size_t i = rng() % live.size();
      Extent* e = live[i];
      if (op < 7) {
        live[i] = live.back();
        live.pop_back();
        chunks_->free(e);
      } else if (op == 7) {
        (void)chunks_->grow(e, e->size + (1 + rng() % 512) * kPage, rng() % 2);
      } else if (op == 8 && e->size > kPage) {
        ASSERT_TRUE(chunks_->shrink(e, (1 + rng() % (e->size / kPage - 1)) * kPage,
                                    rng() % 2 ? SIZE_MAX : rng() % e->size));
      } else {
        (void)chunks_->trim();
      }
    }
    check_all();
    if (HasFatalFailure()) return;
  }
  for (Extent* e : live) chunks_->free(e);
}

TEST_F(ChunkTest, DirtyAndCleanDoNotCoalesce) {
  Extent* a = alloc(4 * kPage);
  Extent* b = alloc(4 * kPage);
  uintptr_t base = a->base;
  chunks_->free(a);
  EXPECT_EQ(chunks_->trim(), 4 * kPage);
  chunks_->free(b);
  EXPECT_EQ(chunks_->lookup(ptr(base))->size, 4 * kPage);
  EXPECT_EQ(chunks_->lookup(ptr(base))->state, ExtentState::kClean);
  EXPECT_EQ(chunks_->lookup(ptr(base + 4 * kPage))->state, ExtentState::kDirty);
}

// No dirty extent holds the request alone: the dirty pages are reused
// together with the free run next to them rather than left to decay while
// untouched space is faulted in.
TEST_F(ChunkTest, DirtyExtentTooSmallAloneIsTakenWithTheCleanRunAfterIt) {
  Extent* a = alloc(16 * kPage);
  uintptr_t base = a->base;
  std::memset(ptr(base), 'd', 8 * kPage);
  chunks_->free(a, 8 * kPage);  // 8 pages dirty, then clean up to the reservation's end
  ASSERT_EQ(chunks_->stats().dirty, 8 * kPage);
  size_t before = syscalls();
  Allocation got = chunks_->alloc(12 * kPage);
  ASSERT_NE(got.extent, nullptr);
  EXPECT_EQ(got.extent->base, base);  // on the dirty pages, not past them
  EXPECT_EQ(got.extent->size, 12 * kPage);
  EXPECT_FALSE(got.zeroed);
  EXPECT_EQ(static_cast<char*>(ptr(base))[8 * kPage - 1], 'd');
  EXPECT_EQ(syscalls(), before);
  chunk::ChunkStats s = chunks_->stats();
  EXPECT_EQ(s.dirty, 0u);
  EXPECT_EQ(s.active + s.dirty + s.clean, s.reserved);
  EXPECT_EQ(chunks_->lookup(ptr(base)), got.extent);
  EXPECT_TRUE(last_entry_ok(*chunks_, got.extent));
  Extent* rest = chunks_->lookup(ptr(base + 12 * kPage));
  ASSERT_NE(rest, nullptr);
  EXPECT_EQ(rest->base, base + 12 * kPage);
  EXPECT_EQ(rest->state, ExtentState::kClean);
  // Freed, it is one dirty extent again: the next request of that size fits it alone.
  chunks_->free(got.extent);
  EXPECT_EQ(chunks_->stats().dirty, 12 * kPage);
  EXPECT_EQ(chunks_->alloc(12 * kPage).extent->base, base);
}

TEST_F(ChunkTest, DirtyExtentTooSmallAloneIsTakenWithTheCleanRunBeforeIt) {
  Extent* a = alloc(8 * kPage);
  Extent* b = alloc(8 * kPage);
  Extent* guard = alloc(kPage);
  uintptr_t bb = b->base;
  chunks_->free(a, 0);  // clean: never written
  chunks_->free(b);     // dirty, with a busy extent right after it
  Allocation got = chunks_->alloc(12 * kPage);
  ASSERT_NE(got.extent, nullptr);
  EXPECT_EQ(got.extent->end(), bb + 8 * kPage);  // ends where the dirty pages end
  EXPECT_EQ(got.extent->base, bb - 4 * kPage);
  EXPECT_FALSE(got.zeroed);
  chunk::ChunkStats s = chunks_->stats();
  EXPECT_EQ(s.dirty, 0u);
  EXPECT_EQ(s.active + s.dirty + s.clean, s.reserved);
  Extent* head = chunks_->lookup(ptr(bb - 8 * kPage));
  ASSERT_NE(head, nullptr);
  EXPECT_EQ(head->size, 4 * kPage);
  EXPECT_EQ(head->state, ExtentState::kClean);
  EXPECT_EQ(chunks_->lookup(ptr(got.extent->end())), guard);
  chunks_->free(got.extent);
  chunks_->free(guard);
}

TEST_F(ChunkTest, TheRunThatReusesTheMostDirtyBytesWins) {
  Extent* a = alloc(16 * kPage);
  Extent* g1 = alloc(kPage);
  Extent* b = alloc(16 * kPage);
  Extent* g2 = alloc(kPage);
  uintptr_t bb = b->base;
  chunks_->free(b, 8 * kPage);  // 8 dirty pages, 8 clean after
  chunks_->free(a, 4 * kPage);  // 4 dirty pages, 12 clean after (the newer one)
  Allocation got = chunks_->alloc(12 * kPage);
  ASSERT_NE(got.extent, nullptr);
  EXPECT_EQ(got.extent->base, bb);
  EXPECT_EQ(chunks_->stats().dirty, 4 * kPage);  // only a's dirty pages are left
  chunks_->free(got.extent);
  chunks_->free(g1);
  chunks_->free(g2);
}

TEST_F(ChunkTest, AlignedRequestOverADirtyRunKeepsItsAlignment) {
  make(64 * kMiB);
  Extent* a = alloc(6 * kMiB, kHugePage);
  uintptr_t base = a->base;
  ASSERT_TRUE(is_aligned(base, kHugePage));
  chunks_->free(a, 3 * kMiB);  // 3 MiB dirty: not a whole number of huge pages
  Allocation got = chunks_->alloc(4 * kMiB, kHugePage);
  ASSERT_NE(got.extent, nullptr);
  EXPECT_TRUE(is_aligned(got.extent->base, kHugePage));
  EXPECT_EQ(got.extent->base, base);
  EXPECT_EQ(chunks_->stats().dirty, 0u);
  chunks_->free(got.extent);
}

TEST_F(ChunkTest, AllocAtTakesTheFreeExtentStartingThere) {
  Extent* a = alloc(4 * kPage);
  Extent* b = alloc(8 * kPage);
  Extent* guard = alloc(kPage);
  uintptr_t at = b->base;
  chunks_->free(b);
  size_t before = syscalls();
  Allocation got = chunks_->alloc_at(at, 4 * kPage);
  ASSERT_NE(got.extent, nullptr);
  EXPECT_EQ(got.extent->base, at);
  EXPECT_EQ(got.extent->size, 4 * kPage);
  EXPECT_EQ(syscalls(), before);
  // The rest of the freed extent is still free, starting right after.
  Extent* rest = chunks_->lookup(ptr(at + 4 * kPage));
  ASSERT_NE(rest, nullptr);
  EXPECT_TRUE(rest->is_free());
  EXPECT_EQ(rest->size, 4 * kPage);
  chunks_->free(got.extent);
  chunks_->free(a);
  chunks_->free(guard);
}

TEST_F(ChunkTest, AllocAtRefusesBusyShortOrForeignAddresses) {
  Extent* a = alloc(4 * kPage);
  Extent* b = alloc(2 * kPage);
  Extent* guard = alloc(kPage);
  EXPECT_EQ(chunks_->alloc_at(b->base, kPage).extent, nullptr);  // busy
  uintptr_t at = b->base;
  chunks_->free(b);
  EXPECT_EQ(chunks_->alloc_at(at, 3 * kPage).extent, nullptr);  // too short
  EXPECT_EQ(chunks_->alloc_at(at + kPage, kPage).extent, nullptr);  // inside, not at the start
  int on_stack = 0;
  EXPECT_EQ(chunks_->alloc_at(align_down(addr(&on_stack), kPage), kPage).extent, nullptr);
  EXPECT_GE(chunks_->stats().alloc_at_refusals, 4u);
  EXPECT_NE(chunks_->alloc_at(at, 2 * kPage).extent, nullptr);  // and still there to take
  chunks_->free(a);
  chunks_->free(guard);
}

TEST_F(ChunkTest, GrowTakesTheFreeNeighbour) {
  Extent* a = alloc(4 * kPage);
  Extent* b = alloc(8 * kPage);
  Extent* guard = alloc(kPage);
  std::memset(ptr(a->base), 'g', 4 * kPage);
  chunks_->free(b);
  size_t before = syscalls();
  chunk::GrowResult r = chunks_->grow(a, 10 * kPage, true);
  EXPECT_EQ(r.path, GrowPath::kNeighbour);
  EXPECT_EQ(a->size, 10 * kPage);
  EXPECT_EQ(static_cast<char*>(ptr(a->base))[4 * kPage - 1], 'g');
  EXPECT_TRUE(last_entry_ok(*chunks_, a));
  EXPECT_EQ(syscalls(), before);
  // Busy neighbour: refused, unchanged, and no mapping is attempted over it.
  EXPECT_EQ(chunks_->grow(a, 20 * kPage, true).path, GrowPath::kRefused);
  EXPECT_EQ(a->size, 10 * kPage);
  chunks_->free(a);
  chunks_->free(guard);
}

TEST_F(ChunkTest, GrowTakesARunOfDirtyAndCleanNeighbours) {
  Extent* a = alloc(4 * kPage);
  Extent* b = alloc(4 * kPage);
  Extent* c = alloc(8 * kPage);
  Extent* guard = alloc(kPage);
  uintptr_t cb = c->base;
  std::memset(ptr(a->base), 'a', 4 * kPage);
  std::memset(ptr(c->base), 'c', 8 * kPage);
  chunks_->free(b);
  ASSERT_EQ(chunks_->trim(), 4 * kPage);  // b is clean now; c, freed next, is dirty: they stay apart
  chunks_->free(c);
  ASSERT_EQ(chunks_->lookup(ptr(cb))->state, ExtentState::kDirty);
  ASSERT_EQ(chunks_->lookup(ptr(cb))->base, cb);
  size_t before = syscalls();
  chunk::GrowResult r = chunks_->grow(a, 10 * kPage, false);  // all of b, two pages of c
  ASSERT_EQ(r.path, GrowPath::kNeighbour);
  EXPECT_FALSE(r.zeroed);  // part of it was dirty
  EXPECT_EQ(syscalls(), before);
  EXPECT_EQ(a->size, 10 * kPage);
  EXPECT_TRUE(last_entry_ok(*chunks_, a));
  EXPECT_EQ(static_cast<char*>(ptr(a->base))[4 * kPage - 1], 'a');
  EXPECT_EQ(static_cast<char*>(ptr(a->base))[9 * kPage], 'c');
  // The rest of c is still free, dirty, right after a.
  Extent* rest = chunks_->lookup(ptr(a->end()));
  ASSERT_NE(rest, nullptr);
  EXPECT_EQ(rest->base, a->end());
  EXPECT_EQ(rest->size, 6 * kPage);
  EXPECT_EQ(rest->state, ExtentState::kDirty);
  chunk::ChunkStats s = chunks_->stats();
  EXPECT_EQ(s.active + s.dirty + s.clean, s.reserved);
  // And the last of the run joins too.
  EXPECT_EQ(chunks_->grow(a, 16 * kPage, false).path, GrowPath::kNeighbour);
  EXPECT_EQ(chunks_->lookup(ptr(a->end())), guard);
  chunks_->free(a);
  chunks_->free(guard);
}

TEST_F(ChunkTest, GrowAcrossARunStopsAtABusyExtentWithoutChanges) {
  Extent* a = alloc(4 * kPage);
  Extent* b = alloc(4 * kPage);
  Extent* busy = alloc(4 * kPage);
  uintptr_t bb = b->base;
  chunks_->free(b);
  size_t before = syscalls();
  EXPECT_EQ(chunks_->grow(a, 10 * kPage, true).path, GrowPath::kRefused);
  EXPECT_EQ(syscalls(), before);  // no mapping attempted over our own busy extent
  EXPECT_EQ(a->size, 4 * kPage);
  Extent* free_b = chunks_->lookup(ptr(bb));
  ASSERT_NE(free_b, nullptr);
  EXPECT_TRUE(free_b->is_free());
  EXPECT_EQ(free_b->size, 4 * kPage);
  EXPECT_EQ(chunks_->grow(a, 8 * kPage, false).path, GrowPath::kNeighbour);  // what is free still serves
  chunks_->free(a);
  chunks_->free(busy);
}

TEST_F(ChunkTest, GrowTakesTheRunThenMapsPastIt) {
  make(2 * kMiB);
  Extent* a = alloc(kMiB);
  Extent* b = alloc(kMiB);  // the rest of the reservation
  std::memset(ptr(a->base), 'r', kMiB);
  chunks_->free(b);
  EXPECT_EQ(chunks_->grow(a, 3 * kMiB, false).path, GrowPath::kRefused);  // the run ends short
  EXPECT_EQ(a->size, kMiB);
  size_t mmaps = os_->counters().get(os::Call::kMmap);
  chunk::GrowResult r = chunks_->grow(a, 3 * kMiB, true);
  ASSERT_EQ(r.path, GrowPath::kMapped);
  EXPECT_FALSE(r.zeroed);  // b was dirty
  EXPECT_EQ(os_->counters().get(os::Call::kMmap) - mmaps, 1u);
  EXPECT_EQ(a->size, 3 * kMiB);
  static_cast<char*>(ptr(a->base))[3 * kMiB - 1] = 'z';
  EXPECT_EQ(static_cast<char*>(ptr(a->base))[kMiB - 1], 'r');
  EXPECT_TRUE(last_entry_ok(*chunks_, a));
  // Mapped in whole huge pages: the remaining MiB is a free neighbour.
  EXPECT_EQ(chunks_->grow(a, 4 * kMiB, false).path, GrowPath::kNeighbour);
  chunk::ChunkStats s = chunks_->stats();
  EXPECT_EQ(s.active, 4 * kMiB);
  EXPECT_EQ(s.reserved, 4 * kMiB);
  chunks_->free(a);
}

TEST_F(ChunkTest, StrictOvercommitGrowCommitsTheAddedBytesOnly) {
  kernel_.overcommit = "2\n";
  make();
  Extent* a = alloc(4 * kPage);
  std::memset(ptr(a->base), 'x', 4 * kPage);
  kernel_.fail(Sys::kMprotect, ENOMEM);
  EXPECT_EQ(chunks_->grow(a, 8 * kPage, false).path, GrowPath::kRefused);
  EXPECT_EQ(a->size, 4 * kPage);
  kernel_.reset_calls();
  ASSERT_EQ(chunks_->grow(a, 8 * kPage, false).path, GrowPath::kNeighbour);
  auto calls = kernel_.calls();
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0].sys, Sys::kMprotect);
  EXPECT_EQ(calls[0].addr, ptr(a->base + 4 * kPage));
  EXPECT_EQ(calls[0].len, 4 * kPage);
  std::memset(ptr(a->base + 4 * kPage), 'y', 4 * kPage);  // committed: writable
  EXPECT_EQ(static_cast<char*>(ptr(a->base))[0], 'x');
  chunks_->free(a);
}

TEST_F(ChunkTest, GrowMapsFreshSpacePastTheLastReservation) {
  make(2 * kMiB);
  Extent* a = alloc(2 * kMiB);  // the whole reservation
  std::memset(ptr(a->base), 'm', 2 * kMiB);
  chunk::GrowResult r = chunks_->grow(a, 3 * kMiB, true);
  ASSERT_EQ(r.path, GrowPath::kMapped);
  EXPECT_TRUE(r.zeroed);
  EXPECT_EQ(a->size, 3 * kMiB);
  static_cast<char*>(ptr(a->base))[3 * kMiB - 1] = 'z';
  EXPECT_EQ(static_cast<char*>(ptr(a->base))[0], 'm');
  // The mapping was rounded to a huge page: the rest is a free neighbour now.
  EXPECT_EQ(chunks_->grow(a, 4 * kMiB, false).path, GrowPath::kNeighbour);
  chunks_->free(a);
}

TEST_F(ChunkTest, GrowNeverClobbersAForeignMapping) {
  make(2 * kMiB);
  Extent* a = alloc(2 * kMiB);
  void* foreign = ::mmap(ptr(a->end()), kPage, PROT_READ | PROT_WRITE,
                         MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
  ASSERT_EQ(foreign, ptr(a->end()));
  static_cast<char*>(foreign)[0] = 'f';
  EXPECT_EQ(chunks_->grow(a, 4 * kMiB, true).path, GrowPath::kRefused);
  EXPECT_EQ(static_cast<char*>(foreign)[0], 'f');
  EXPECT_EQ(a->size, 2 * kMiB);
  ::munmap(foreign, kPage);
  chunks_->free(a);
}

TEST_F(ChunkTest, FailedMapAtLeavesTheExtentUnchanged) {
  make(2 * kMiB);
  Extent* a = alloc(2 * kMiB);
  kernel_.fail(Sys::kMmap, ENOMEM);
  EXPECT_EQ(chunks_->grow(a, 4 * kMiB, true).path, GrowPath::kRefused);
  EXPECT_EQ(a->size, 2 * kMiB);
  EXPECT_EQ(chunks_->grow(a, 4 * kMiB, true).path, GrowPath::kMapped);  // and works once the kernel does
  chunks_->free(a);
}

TEST_F(ChunkTest, ShrinkReturnsTheTailThenRegrow) {
  Extent* a = alloc(16 * kPage);
  Extent* guard = alloc(kPage);
  uintptr_t base = a->base;
  std::memset(ptr(base), 's', 16 * kPage);
  ASSERT_TRUE(chunks_->shrink(a, 4 * kPage));
  EXPECT_EQ(a->size, 4 * kPage);
  Extent* tail = chunks_->lookup(ptr(base + 4 * kPage));
  ASSERT_NE(tail, nullptr);
  EXPECT_EQ(tail->state, ExtentState::kDirty);
  EXPECT_EQ(tail->size, 12 * kPage);
  EXPECT_FALSE(chunks_->shrink(a, 4 * kPage));  // not smaller
  EXPECT_FALSE(chunks_->shrink(a, 0));
  EXPECT_EQ(chunks_->grow(a, 16 * kPage, false).path, GrowPath::kNeighbour);
  EXPECT_EQ(static_cast<char*>(ptr(base))[16 * kPage - 1], 's');
  chunks_->free(a);
  chunks_->free(guard);
}

TEST_F(ChunkTest, DecayPurgesOnlyAfterTheDecayTime) {
  Extent* e = alloc(8 * kPage);
  uintptr_t base = e->base;
  std::memset(ptr(base), 'd', 8 * kPage);
  chunks_->free(e);
  clock_.advance_ms(500);
  EXPECT_EQ(chunks_->decay(), 0u);
  EXPECT_EQ(chunks_->stats().dirty, 8 * kPage);
  EXPECT_EQ(static_cast<char*>(ptr(base))[0], 'd');
  clock_.advance_ms(600);
  EXPECT_EQ(chunks_->decay(), 8 * kPage);
  chunk::ChunkStats s = chunks_->stats();
  EXPECT_EQ(s.dirty, 0u);
  EXPECT_EQ(s.purged_bytes, 8 * kPage);
  EXPECT_EQ(static_cast<char*>(ptr(base))[0], 0);
  // A purged extent is handed out as zeroed.
  Allocation a = chunks_->alloc(8 * kPage);
  EXPECT_TRUE(a.zeroed);
}

TEST_F(ChunkTest, DecayRunsFromTheFreePath) {
  Extent* old = alloc(8 * kPage);
  Extent* guard = alloc(kPage);  // keeps `old` and `e` from coalescing
  Extent* e = alloc(kPage);
  chunks_->free(old);
  clock_.advance_ms(1500);
  size_t before = os_->counters().get(os::Call::kMadvise);
  chunks_->free(e);  // notices that `old` is past its decay time
  EXPECT_EQ(os_->counters().get(os::Call::kMadvise) - before, 1u);
  EXPECT_EQ(chunks_->stats().dirty, kPage);
  chunks_->free(guard);
}

// Records of extents whose boundaries fall inside a 2 MiB chunk write its
// page of page-map slots. Once free space has merged them away, those pages
// hold zeroes only: they go back to the kernel with decay -- not in the
// same quarter of the decay time (at least a second) as they were last
// written, so a page written again soon after is not faulted in anew --
// and at once on trim. Before, every such page stayed resident for good:
// 2 MiB per GiB of address space that huge blocks cycled through.
TEST_F(ChunkTest, PageMapPagesThatFreeSpaceNoLongerNeedsGoBackWithDecay) {
  make(256 * kMiB);
  constexpr int kBlocks = 40;
  std::vector<Extent*> v;
  for (int i = 0; i < kBlocks; i++) v.push_back(alloc(kHugePage + (i % 7 + 1) * kPage));
  Extent* keep = alloc(kPage);  // an allocator call that does not touch the others
  const size_t written = chunks_->stats().map_pages;
  EXPECT_GE(written, size_t{kBlocks / 2}) << "boundaries inside chunks write their pages of slots";
  for (Extent* e : v) chunks_->free(e);
  EXPECT_LE(chunks_->stats().dirty_extents, 2u);  // merged: their records are zeroes now
  const size_t records_left = 8;                  // what the few free extents left may hold
  EXPECT_GE(chunks_->stats().map_pages, written) << "nothing goes back at once";

  auto call = [&] {  // an allocator call: a step of decay when one is due
    chunks_->free(keep);
    keep = alloc(kPage);
  };
  // Less than a pass period later: nothing given back.
  clock_.advance_ms(500);
  for (int i = 0; i < 10; i++) call();
  EXPECT_EQ(chunks_->stats().map_released, 0u);
  // The first pass finds the pages written since the last; the next gives
  // them back, 64 per call.
  for (int pass = 0; pass < 2; pass++) {
    clock_.advance_ms(1000);
    for (int i = 0; i < 10; i++) call();
  }
  const chunk::ChunkStats s = chunks_->stats();
  EXPECT_LE(s.map_pages, records_left);
  EXPECT_GE(s.map_released, (written - records_left) * kPage);
  EXPECT_EQ(os_->counters().purged_bytes.load() - s.purged_bytes, s.map_released)
      << "the OS layer counts them as purged";

  // trim() gives back what holds only zeroes at once, written just now or not.
  v.clear();
  for (int i = 0; i < kBlocks; i++) v.push_back(alloc(kHugePage + (i % 7 + 1) * kPage));
  EXPECT_GE(chunks_->stats().map_pages, size_t{kBlocks / 2});
  for (Extent* e : v) chunks_->free(e);
  (void)chunks_->trim();
  EXPECT_LE(chunks_->stats().map_pages, records_left);
  chunks_->free(keep);
}

// A free that comes due for decay purges at most one step's budget (one
// huge page) inside that call; the next calls go on from there without
// waiting for the next quarter of the decay time, and the background
// thread's decay() takes everything. Before, the one call purged all 32 MiB.
TEST_F(ChunkTest, DecayFromACallPurgesAtMostItsBudgetAndTheNextCallsGoOn) {
  constexpr size_t kBudget = 2 * kMiB;  // chunk::Options::decay_step_bytes
  std::vector<Extent*> v;
  for (int i = 0; i < 8; i++) {
    v.push_back(alloc(4 * kMiB));
    std::memset(ptr(v.back()->base), 'b', 4 * kMiB);
    v.push_back(alloc(kPage));  // keeps them apart: eight dirty extents of 4 MiB
  }
  Extent* e = alloc(kPage);
  for (size_t i = 0; i < v.size(); i += 2) chunks_->free(v[i]);
  clock_.advance_ms(1500);
  // Every free and alloc from now on notices old dirty extents.
  size_t calls = 0;
  while (chunks_->stats().purged_bytes < 32 * kMiB && calls < 100) {
    uint64_t before = chunks_->stats().purged_bytes;
    if (calls % 2 == 0) chunks_->free(e);
    else e = alloc(kPage);
    EXPECT_LE(chunks_->stats().purged_bytes - before, kBudget) << "call " << calls;
    calls++;
  }
  EXPECT_EQ(chunks_->stats().purged_bytes, 32 * kMiB);
  EXPECT_EQ(calls, 32 * kMiB / kBudget);  // no call wasted, and no wait between them
  if (calls % 2 == 0) chunks_->free(e);
  // The background thread's step is not bounded: it holds no lock.
  for (size_t i = 0; i < v.size(); i += 2) {
    v[i] = alloc(4 * kMiB);
    std::memset(ptr(v[i]->base), 'b', 4 * kMiB);
  }
  for (size_t i = 0; i < v.size(); i += 2) chunks_->free(v[i]);
  clock_.advance_ms(1500);
  EXPECT_GE(chunks_->decay(), 32 * kMiB);
  EXPECT_EQ(chunks_->stats().dirty, 0u);
  for (size_t i = 1; i < v.size(); i += 2) chunks_->free(v[i]);
}

// decay_ms:0: every free purges, also several in one clock tick (the free
// path's rate limit used to leave all but the first dirty, for good in a
// program that then went quiet).
TEST_F(ChunkTest, ZeroDecayPurgesEveryFree) {
  make_chunks(64 * kMiB, 0);
  Extent* v[4];
  for (auto& e : v) {
    e = alloc(8 * kPage);
    std::memset(ptr(e->base), 'z', 8 * kPage);
  }
  for (Extent* e : v) {
    chunks_->free(e);  // the clock does not move
    EXPECT_EQ(chunks_->stats().dirty, 0u);
  }
  EXPECT_EQ(chunks_->stats().purged_bytes, 4 * 8 * kPage);
}

// The background thread's doorbell: rings once when the dirty bytes plus
// what upper layers noted reach the armed amount, then stays disarmed.
TEST_F(ChunkTest, DoorbellRingsOnceWhenEnoughAwaitsDecay) {
  EXPECT_FALSE(chunks_->take_signal());
  Extent* a = alloc(kMiB);
  Extent* guard = alloc(kPage);
  Extent* b = alloc(kMiB);
  chunks_->free(a);
  EXPECT_FALSE(chunks_->take_signal());  // not armed
  chunks_->arm(2 * kMiB + 64 * kPage);
  chunks_->note_retained(32 * kPage);
  EXPECT_FALSE(chunks_->take_signal());
  chunks_->free(b);  // 2 MiB dirty + 32 pages noted: not yet
  EXPECT_FALSE(chunks_->take_signal());
  chunks_->note_retained(32 * kPage);  // a note alone counts only the notes
  EXPECT_FALSE(chunks_->take_signal());
  chunks_->free(guard);  // the next free counts both: now
  EXPECT_TRUE(chunks_->take_signal());
  EXPECT_FALSE(chunks_->take_signal());  // read once
  chunks_->note_retained(kMiB);
  EXPECT_FALSE(chunks_->take_signal());  // disarmed after it rang
  chunks_->arm(kPage);                    // re-armed: the next dirty byte rings
  Extent* c = alloc(kPage);
  chunks_->free(c);
  EXPECT_TRUE(chunks_->take_signal());
}

class ChunkHysteresis : public ChunkTest, public ::testing::WithParamInterface<size_t> {};

TEST_P(ChunkHysteresis, DrainAndRefillMakesNoSyscalls) {
  const size_t size = GetParam();
  Extent* warm = alloc(size);
  chunks_->free(warm);
  size_t before = syscalls();
  for (int i = 0; i < 10000; i++) {
    Extent* e = alloc(size);
    static_cast<char*>(ptr(e->base))[0] = 1;
    chunks_->free(e);
    if (i % 10 == 0) clock_.advance_ms(1);  // 1 s of decay passes during the loop
  }
  EXPECT_EQ(syscalls(), before);
}

INSTANTIATE_TEST_SUITE_P(Sizes, ChunkHysteresis, ::testing::Values(kPage, 16 * kPage, kMiB, 8 * kMiB));

class ChunkBatchPurge : public ChunkTest, public ::testing::WithParamInterface<bool> {};

TEST_P(ChunkBatchPurge, TrimPurgesInBatches) {
  const bool batch_works = GetParam();
  if (!batch_works) kernel_.process_madvise_errno = ENOSYS;
  make();
  ASSERT_EQ(os_->features().batch_purge, batch_works);
  // 40 dirty extents that cannot coalesce: every other one stays busy.
  std::vector<Extent*> v;
  for (int i = 0; i < 80; i++) v.push_back(alloc(2 * kPage));
  for (int i = 0; i < 80; i += 2) {
    std::memset(ptr(v[i]->base), 'p', 2 * kPage);
    chunks_->free(v[i]);
  }
  os_->counters().reset();
  EXPECT_EQ(chunks_->trim(), 40 * 2 * kPage);
  const size_t n = 40;
  if (batch_works) {
    EXPECT_EQ(os_->counters().get(os::Call::kProcessMadvise), (n + os::kPurgeBatch - 1) / os::kPurgeBatch);
    EXPECT_EQ(os_->counters().get(os::Call::kMadvise), 0u);
  } else {
    EXPECT_EQ(os_->counters().get(os::Call::kMadvise), n);
  }
  for (int i = 0; i < 80; i += 2) EXPECT_EQ(static_cast<char*>(ptr(v[i]->base))[0], 0);
  EXPECT_EQ(chunks_->stats().dirty, 0u);
}

INSTANTIATE_TEST_SUITE_P(WithAndWithoutProcessMadvise, ChunkBatchPurge, ::testing::Bool());

TEST_F(ChunkTest, FailedPurgeKeepsExtentsDirtyAndUsable) {
  kernel_.process_madvise_errno = ENOSYS;
  make();
  Extent* a = alloc(4 * kPage);
  Extent* guard = alloc(kPage);
  Extent* b = alloc(4 * kPage);
  uintptr_t ab = a->base;
  std::memset(ptr(ab), 'k', 4 * kPage);
  chunks_->free(a);
  chunks_->free(b);
  kernel_.fail(Sys::kMadvise, ENOMEM, 1);
  EXPECT_EQ(chunks_->trim(), 0u);
  chunk::ChunkStats s = chunks_->stats();
  EXPECT_EQ(s.dirty, 4 * kPage + b->size);  // b coalesced with the reservation's dirty rest, if any
  EXPECT_EQ(static_cast<char*>(ptr(ab))[0], 'k');
  // Nothing was lost: the extent is handed out again, and purges once the kernel agrees.
  EXPECT_EQ(chunks_->alloc_at(ab, 4 * kPage).extent->base, ab);
  chunks_->free(chunks_->lookup(ptr(ab)));
  EXPECT_EQ(chunks_->trim(), s.dirty);
  chunks_->free(guard);
}

TEST_F(ChunkTest, FailedReservationIsCleanAndRetryable) {
  kernel_.fail(Sys::kMmap, ENOMEM, 8);
  EXPECT_EQ(chunks_->alloc(kPage).extent, nullptr);
  chunk::ChunkStats s = chunks_->stats();
  EXPECT_EQ(s.reserved, 0u);
  EXPECT_EQ(s.active, 0u);
  kernel_.clear_failures();
  EXPECT_NE(chunks_->alloc(kPage).extent, nullptr);
}

TEST_F(ChunkTest, OccupiedHintsAreSkipped) {
  chunk::Options o;
  o.reservation = 4 * kMiB;
  // A hint where the kernel itself places mappings: free address space in
  // every build (a fixed one may be a sanitizer's shadow).
  void* probe = ::mmap(nullptr, 64 * kMiB, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  ASSERT_NE(probe, MAP_FAILED);
  ::munmap(probe, 64 * kMiB);
  o.first_hint = align_up(addr(probe), kHugePage);
  void* squatter = ::mmap(ptr(o.first_hint), kPage, PROT_READ,
                          MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
  ASSERT_EQ(squatter, ptr(o.first_hint));
  ChunkLayer layer(*os_, clock_, o);
  Extent* e = layer.alloc(kPage).extent;
  ASSERT_NE(e, nullptr);
  EXPECT_GE(e->base, o.first_hint + o.reservation);
  EXPECT_TRUE(is_aligned(e->base, kHugePage));
  ::munmap(squatter, kPage);
  layer.free(e);
}

// An alignment past the huge page holds no address space for itself: the
// reservation is placed at an address of that alignment and is what the
// request needs; where the kernel places it instead (every hint occupied),
// the over-sized mapping's ends go back at once. (The alignment used to be
// reserved on top, and kept: 64 GiB for this one.)
TEST_F(ChunkTest, ALargeAlignmentReservesNoAddressSpaceForItself) {
  make(4 * kMiB);
  constexpr size_t kAlign = size_t{1} << 36;
  Extent* e = alloc(kPage, kAlign);
  ASSERT_NE(e, nullptr);
  EXPECT_TRUE(is_aligned(e->base, kAlign));
  EXPECT_EQ(chunks_->stats().reserved, 4 * kMiB);
  // Every hint occupied: the kernel places it.
  kernel_.reset_calls();
  kernel_.fail(Sys::kMmap, EEXIST, 4);
  Extent* f = alloc(kPage, kAlign);
  ASSERT_NE(f, nullptr);
  EXPECT_TRUE(is_aligned(f->base, kAlign));
  EXPECT_EQ(chunks_->stats().reserved, 8 * kMiB);
  size_t over = 0, unmapped = 0;
  for (const auto& c : kernel_.calls()) {
    if (c.sys == Sys::kMmap && c.len > 4 * kMiB) over += c.len;
    if (c.sys == Sys::kMunmap) unmapped += c.len;
  }
  EXPECT_EQ(over, 4 * kMiB + kAlign);
  EXPECT_EQ(unmapped, kAlign);
  chunks_->free(e);
  chunks_->free(f);
}

TEST_F(ChunkTest, StrictOvercommitCommitsOnlyWhatIsHandedOut) {
  kernel_.overcommit = "2\n";
  make();
  ASSERT_TRUE(os_->features().strict_overcommit);
  kernel_.reset_calls();
  Allocation a = chunks_->alloc(4 * kPage);
  ASSERT_NE(a.extent, nullptr);
  std::memset(ptr(a.extent->base), 1, 4 * kPage);
  auto calls = kernel_.calls();
  size_t committed = 0;
  for (const auto& c : calls)
    if (c.sys == Sys::kMprotect && addr(c.addr) >= a.extent->base && addr(c.addr) < a.extent->end())
      committed += c.len;
  EXPECT_EQ(committed, 4 * kPage);
  // A refused commit hands nothing out and loses nothing.
  kernel_.fail(Sys::kMprotect, ENOMEM);
  EXPECT_EQ(chunks_->alloc(4 * kPage).extent, nullptr);
  EXPECT_NE(chunks_->alloc(4 * kPage).extent, nullptr);
  // Committed memory comes back committed and is reused without a syscall.
  chunks_->free(a.extent);
  kernel_.reset_calls();
  EXPECT_NE(chunks_->alloc(4 * kPage).extent, nullptr);
  EXPECT_EQ(kernel_.calls().size(), 0u);
}

// Under strict overcommit a purge decommits: the range stops being writable
// (charged), and is committed again when handed out. Before, 1 GiB
// allocated, written, freed and purged stayed charged, all of it.
TEST_F(ChunkTest, StrictOvercommitPurgeGivesTheChargeBack) {
  kernel_.overcommit = "2\n";
  make();
  ASSERT_TRUE(os_->features().strict_overcommit);
  constexpr size_t kSize = 16 * kMiB;
  Extent* e = alloc(kSize);
  const uintptr_t base = e->base;
  std::memset(ptr(base), 'c', kSize);
  EXPECT_EQ(test::writable_bytes(base, base + kSize), kSize);
  chunks_->free(e);
  EXPECT_EQ(chunks_->trim(), kSize);
  EXPECT_EQ(test::writable_bytes(base, base + kSize), 0u);
  // Handed out again: committed first, zeroed, writable.
  Allocation a = chunks_->alloc_at(base, kSize);
  ASSERT_NE(a.extent, nullptr);
  EXPECT_TRUE(a.zeroed);
  EXPECT_EQ(test::writable_bytes(base, base + kSize), kSize);
  std::memset(ptr(base), 'd', kSize);
  // Decay does it too; a plain alloc of the space commits it again.
  chunks_->free(a.extent);
  clock_.advance_ms(1500);
  EXPECT_EQ(chunks_->decay(), kSize);
  EXPECT_EQ(test::writable_bytes(base, base + kSize), 0u);
  Allocation b = chunks_->alloc(kSize);
  ASSERT_NE(b.extent, nullptr);
  EXPECT_EQ(test::writable_bytes(b.extent->base, b.extent->end()), kSize);
  std::memset(ptr(b.extent->base), 'e', kSize);
  // And growth over decommitted space commits what it takes.
  ASSERT_TRUE(chunks_->shrink(b.extent, kSize / 2));
  EXPECT_EQ(chunks_->trim(), kSize / 2);
  EXPECT_EQ(test::writable_bytes(b.extent->end(), b.extent->end() + kSize / 2), 0u);
  ASSERT_EQ(chunks_->grow(b.extent, kSize, false).path, GrowPath::kNeighbour);
  EXPECT_EQ(test::writable_bytes(b.extent->base, b.extent->end()), kSize);
  std::memset(ptr(b.extent->base), 'f', kSize);
  chunks_->free(b.extent);
}

// Near vm.max_map_count (the fake kernel's model, 400 here): decommitting
// a freed extent between live ones splits its mapping in three. Past half
// the limit the chunk layer purges with madvise instead and keeps the range
// committed, so the program keeps the other half, and no call is refused.
TEST_F(ChunkTest, StrictOvercommitPurgeStopsSplittingPastHalfTheMappingLimit) {
  kernel_.overcommit = "2\n";
  kernel_.map_limit = 400;
  kernel_.other_mappings = 100;  // the program's own
  make(256 * kMiB);
  ASSERT_TRUE(os_->features().strict_overcommit);
  constexpr size_t kBlocks = 600, kSize = 16 * kPage;
  std::vector<Extent*> v;
  for (size_t i = 0; i < kBlocks; i++) {
    v.push_back(alloc(kSize));
    ASSERT_NE(v.back(), nullptr);
  }
  for (size_t i = 0; i < kBlocks; i += 2) chunks_->free(v[i]);
  // Every freed extent is purged, split or not.
  EXPECT_EQ(chunks_->trim(), kBlocks / 2 * kSize);
  EXPECT_EQ(kernel_.map_refusals(), 0u);
  EXPECT_LE(kernel_.peak_mappings(), 400u * 5 / 8);
  // And handed out again, writable.
  for (size_t i = 0; i < kBlocks; i += 2) {
    v[i] = alloc(kSize);
    ASSERT_NE(v[i], nullptr);
    std::memset(ptr(v[i]->base), 'm', kSize);
  }
  EXPECT_EQ(kernel_.map_refusals(), 0u);
  for (Extent* e : v) chunks_->free(e);
}

// A program already at the limit: a decommit that the kernel refuses
// (ENOMEM: it would split a mapping) still purges the pages, by madvise.
TEST_F(ChunkTest, StrictOvercommitPurgeRefusedAtTheMappingLimitStillPurges) {
  kernel_.overcommit = "2\n";
  kernel_.map_limit = 400;
  make(64 * kMiB);
  std::vector<Extent*> v;
  for (size_t i = 0; i < 8; i++) v.push_back(alloc(16 * kPage));
  kernel_.other_mappings = 400 - kernel_.mappings();  // the rest is the program's
  for (size_t i = 0; i < 8; i += 2) chunks_->free(v[i]);
  EXPECT_EQ(chunks_->trim(), 4 * 16 * kPage);
  EXPECT_LE(kernel_.mappings(), 400u);
  for (size_t i = 0; i < 8; i += 2) {
    v[i] = alloc(16 * kPage);
    ASSERT_NE(v[i], nullptr);
    std::memset(ptr(v[i]->base), 'n', 16 * kPage);
  }
  for (Extent* e : v) chunks_->free(e);
}

// The same against the real kernel's vm.max_map_count (not lowered: the
// test makes the program's mappings itself, up to 1 000 below the limit).
// Under strict overcommit (the fake kernel's answer; the calls are real)
// 2 000 purged extents between live ones would take 2 000 more mappings;
// ductile sees the count past half the limit and purges without splitting,
// so the program can still start a thread and map memory.
TEST_F(ChunkTest, StrictOvercommitNearTheRealMappingLimitLeavesTheProgramRoom) {
  const size_t limit = test::max_map_count();
  if (limit == 0 || limit > 300000) GTEST_SKIP() << "vm.max_map_count " << limit << ": too many to fill quickly";
  kernel_.overcommit = "2\n";
  make(256 * kMiB);
  constexpr size_t kBlocks = 4000, kSize = 4 * kPage;
  std::vector<Extent*> v(kBlocks);
  // The program's mappings: one read-only mapping, every other page made
  // PROT_NONE (each mprotect adds two).
  const size_t have = test::mapping_count();
  ASSERT_LT(have + 3000, limit);
  const size_t splits = (limit - 1000 - have) / 2;
  const size_t fill_size = (2 * splits + 1) * kPage;
  char* fill = static_cast<char*>(mmap(nullptr, fill_size, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(fill, MAP_FAILED);
  for (size_t i = 0; i < splits; i++) ASSERT_EQ(mprotect(fill + (2 * i + 1) * kPage, kPage, PROT_NONE), 0);
  bool all = true;
  for (size_t i = 0; i < kBlocks; i++) all &= (v[i] = chunks_->alloc(kSize).extent) != nullptr;
  for (size_t i = 0; i < kBlocks; i += 2)
    if (v[i] != nullptr) chunks_->free(v[i]);
  const size_t trimmed = chunks_->trim();
  const size_t after = test::mapping_count();
  // The program's own: a thread (its stack and guard page), and 100
  // mappings that do not merge.
  pthread_t t;
  const int thread = pthread_create(&t, nullptr, [](void*) -> void* { return nullptr; }, nullptr);
  if (thread == 0) pthread_join(t, nullptr);
  char* more = static_cast<char*>(mmap(nullptr, 200 * kPage, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  int refused = more == MAP_FAILED ? 1 : 0;
  for (size_t i = 0; more != MAP_FAILED && i < 100; i++) refused += mprotect(more + (2 * i + 1) * kPage, kPage, PROT_NONE) != 0;
  if (more != MAP_FAILED) munmap(more, 200 * kPage);
  // And the purged extents are handed out again.
  for (size_t i = 0; i < kBlocks; i += 2) all &= (v[i] = chunks_->alloc(kSize).extent) != nullptr;
  munmap(fill, fill_size);
  EXPECT_TRUE(all);
  EXPECT_EQ(trimmed, kBlocks / 2 * kSize);
  EXPECT_LE(after, limit - 500);
  EXPECT_EQ(thread, 0);
  EXPECT_EQ(refused, 0);
  for (Extent* e : v)
    if (e != nullptr) chunks_->free(e);
}

TEST_F(ChunkTest, FreeReturnsAnUnwrittenTailClean) {
  Extent* a = alloc(16 * kPage);
  Extent* guard = alloc(kPage);
  uintptr_t base = a->base;
  std::memset(ptr(base), 'w', 4 * kPage);
  chunks_->free(a, 4 * kPage);  // only the first four pages were written
  Extent* head = chunks_->lookup(ptr(base));
  Extent* tail = chunks_->lookup(ptr(base + 4 * kPage));
  ASSERT_NE(head, nullptr);
  ASSERT_NE(tail, nullptr);
  EXPECT_EQ(head->state, ExtentState::kDirty);
  EXPECT_EQ(head->size, 4 * kPage);
  EXPECT_EQ(tail->state, ExtentState::kClean);
  EXPECT_EQ(tail->base, base + 4 * kPage);
  EXPECT_EQ(tail->size, 12 * kPage);
  EXPECT_EQ(chunks_->stats().dirty, 4 * kPage);
  // Handed out again as zeroed, without a system call.
  size_t before = syscalls();
  Allocation again = chunks_->alloc_at(base + 4 * kPage, 12 * kPage);
  ASSERT_NE(again.extent, nullptr);
  EXPECT_TRUE(again.zeroed);
  EXPECT_EQ(syscalls(), before);
  chunks_->free(again.extent);
  chunks_->free(guard);
  chunk::ChunkStats s = chunks_->stats();
  EXPECT_EQ(s.active + s.dirty + s.clean, s.reserved);
}

TEST_F(ChunkTest, StrictOvercommitPartialCommit) {
  kernel_.overcommit = "2\n";
  make();
  Allocation a = chunks_->alloc(64 * kPage, kPage, 4 * kPage);
  ASSERT_NE(a.extent, nullptr);
  // Only the committed prefix is handed out as usable; free it with its commit size.
  EXPECT_EQ(a.extent->size, 4 * kPage);
  chunks_->free(a.extent, 4 * kPage);
}

TEST_F(ChunkTest, LookupFindsBoundariesAndMappedInteriors) {
  Extent* e = alloc(8 * kPage);
  EXPECT_EQ(chunks_->lookup(ptr(e->base)), e);
  EXPECT_EQ(chunks_->lookup(ptr(e->base + 123)), e);
  EXPECT_TRUE(last_entry_ok(*chunks_, e));
  EXPECT_NE(chunks_->lookup(ptr(e->base + 3 * kPage)), e);
  ASSERT_TRUE(chunks_->map_interior(e));
  for (size_t i = 0; i < 8; i++) EXPECT_EQ(chunks_->lookup(ptr(e->base + i * kPage + 5)), e);
  uintptr_t base = e->base;
  chunks_->free(e);
  // Freed: interior pages no longer claim to belong to an active extent.
  for (size_t i = 1; i < 7; i++) {
    Extent* x = chunks_->lookup(ptr(base + i * kPage));
    EXPECT_TRUE(x == nullptr || x->is_free());
  }
}

TEST_F(ChunkTest, ForgetDropsAMovedExtent) {
  Extent* e = alloc(4 * kPage);
  uintptr_t base = e->base;
  size_t reserved = chunks_->stats().reserved;
  // As the huge layer does after mremap moved the pages away:
  ASSERT_TRUE(os_->unmap(ptr(base), 4 * kPage));
  chunks_->forget(e);
  EXPECT_EQ(chunks_->lookup(ptr(base)), nullptr);
  EXPECT_EQ(chunks_->stats().reserved, reserved - 4 * kPage);
  EXPECT_EQ(chunks_->stats().active, 0u);
}

TEST_F(ChunkTest, StatsAddUp) {
  Extent* a = alloc(4 * kPage);
  Extent* b = alloc(8 * kPage);
  chunks_->free(a);
  chunk::ChunkStats s = chunks_->stats();
  EXPECT_EQ(s.active, 8 * kPage);
  EXPECT_EQ(s.active + s.dirty + s.clean, s.reserved);
  chunks_->free(b);
  s = chunks_->stats();
  EXPECT_EQ(s.active, 0u);
  EXPECT_EQ(s.dirty + s.clean, s.reserved);
}

TEST(ChunkStress, ThreadsAllocFreeAndGrowConcurrently) {
  FakeKernel kernel;
  os::Os os(kernel);
  FakeClock clock;
  chunk::Options o;
  o.decay_ns = 5 * 1000000ull;
  o.reservation = 16 * kMiB;
  ChunkLayer layer(os, clock, o);
  constexpr int kThreads = 4;
  constexpr int kOps = 4000;
  std::vector<std::thread> threads;
  std::atomic<int> errors{0};
  for (int t = 0; t < kThreads; t++) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(t);
      std::vector<Extent*> mine;
      const unsigned char tag = static_cast<unsigned char>(t + 1);
      auto check = [&](Extent* e) {
        auto* p = static_cast<unsigned char*>(ptr(e->base));
        if (p[0] != tag || p[e->size - 1] != tag || layer.lookup(p) != e) errors++;
      };
      for (int i = 0; i < kOps; i++) {
        unsigned op = rng() % 8;
        if (op < 4 || mine.empty()) {
          size_t pages = 1 + rng() % 64;
          Extent* e = layer.alloc(pages * kPage, op == 0 ? 16 * kPage : kPage).extent;
          if (e == nullptr) {
            errors++;
            continue;
          }
          auto* p = static_cast<unsigned char*>(ptr(e->base));
          p[0] = tag;
          p[e->size - 1] = tag;
          mine.push_back(e);
        } else if (op == 4) {
          Extent* e = mine[rng() % mine.size()];
          check(e);
          size_t old = e->size;
          if (layer.grow(e, old + kPage * (1 + rng() % 8), true).path != GrowPath::kRefused) {
            auto* p = static_cast<unsigned char*>(ptr(e->base));
            p[e->size - 1] = tag;
          }
        } else if (op == 5) {
          clock.advance_ms(1);
          (void)layer.decay();
        } else {
          size_t k = rng() % mine.size();
          check(mine[k]);
          layer.free(mine[k]);
          mine[k] = mine.back();
          mine.pop_back();
        }
      }
      for (Extent* e : mine) {
        check(e);
        layer.free(e);
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(errors.load(), 0);
  chunk::ChunkStats s = layer.stats();
  EXPECT_EQ(s.active, 0u);
  EXPECT_EQ(s.dirty + s.clean, s.reserved);
}

}  // namespace
}  // namespace ductile
