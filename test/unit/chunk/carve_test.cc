// SPDX-License-Identifier: BSD-2-Clause
// Reservation and carving in the chunk layer (chunk/carve.cc): reservations and their limits,
// each space's own, dirty runs, alignment, alloc-at-address, commits under strict overcommit.
#include <sys/mman.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include <gtest/gtest.h>

#include "chunk/chunk.h"
#include "support/fake_kernel.h"
#include "support/maps.h"
#include "unit/chunk/chunk_fixture.h"

namespace ductile {
namespace {

using chunk::Allocation;
using chunk::ChunkLayer;
using chunk::Extent;
using chunk::ExtentState;
using chunk::GrowPath;
using test::ChunkTest;
using test::Sys;
using test::kMiB;

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

// The dense space's advice can wait (the runtime defers it until the
// process holds a few MiB: the space's first touch would make a whole huge
// page resident): its reservation is made without advice, and turning the
// advice on advises it then, once and whole. The huge space is advised as
// ever.
TEST_F(ChunkTest, TheDenseSpacesAdviceCanWait) {
  using chunk::Space;
  ASSERT_EQ(os_->thp_mode(), os::ThpMode::kMadvise);
  auto advice = [&] { return os_->counters().get(os::Call::kMadvise); };
  chunks_->set_dense_advice(false);
  EXPECT_FALSE(chunks_->advised_now(Space::kDense));
  EXPECT_TRUE(chunks_->advised_now(Space::kHuge));
  const uint64_t before = advice();
  Allocation d = chunks_->alloc(16 * kPage, kPage, SIZE_MAX, Space::kDense);
  ASSERT_NE(d.extent, nullptr);
  EXPECT_EQ(advice(), before);  // reserved, not advised
  chunks_->set_dense_advice(true);
  EXPECT_EQ(advice(), before + 1);  // its reservation, whole
  chunks_->set_dense_advice(true);
  EXPECT_EQ(advice(), before + 1);  // once
  Allocation h = chunks_->alloc(16 * kPage, kPage, SIZE_MAX, Space::kHuge);
  ASSERT_NE(h.extent, nullptr);
  EXPECT_EQ(advice(), before + 2);
  chunks_->free(d.extent);
  chunks_->free(h.extent);
}

// The three address spaces (chunk::Space) share no reservation and no free
// extent: advice given to a huge-page space's whole reservation must not
// reach plain space, and medium blocks packed into the dense space must not
// take a huge block's headroom (with the two mixed in one space, 64 buffers
// doubling to 16 MiB moved 28 huge blocks by mremap and faulted 2 400-10 400
// pages in each round after the first, where apart they fault none).
TEST_F(ChunkTest, EachSpaceHasReservationsOfItsOwn) {
  using chunk::Space;
  ASSERT_EQ(os_->thp_mode(), os::ThpMode::kMadvise);
  auto take = [&](size_t size, Space space) {
    Allocation a = chunks_->alloc(size, kPage, SIZE_MAX, space);
    EXPECT_NE(a.extent, nullptr);
    if (a.extent != nullptr) {
      EXPECT_EQ(a.extent->space, space);
    }
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
  o.first_hint = test::free_hint(64 * kMiB);
  ASSERT_NE(o.first_hint, 0u);
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

TEST_F(ChunkTest, StrictOvercommitPartialCommit) {
  kernel_.overcommit = "2\n";
  make();
  Allocation a = chunks_->alloc(64 * kPage, kPage, 4 * kPage);
  ASSERT_NE(a.extent, nullptr);
  // Only the committed prefix is handed out as usable; free it with its commit size.
  EXPECT_EQ(a.extent->size, 4 * kPage);
  chunks_->free(a.extent, 4 * kPage);
}

}  // namespace
}  // namespace ductile
