// SPDX-License-Identifier: BSD-2-Clause
// Growth and shrink of an extent in place (chunk/resize.cc): free neighbours and runs of them,
// maps past the reservation that never clobber, strict overcommit, and failed maps.
#include <sys/mman.h>

#include <cerrno>
#include <cstring>

#include <gtest/gtest.h>

#include "chunk/chunk.h"
#include "support/fake_kernel.h"
#include "unit/chunk/chunk_fixture.h"

namespace ductile {
namespace {

using chunk::Extent;
using chunk::ExtentState;
using chunk::GrowPath;
using test::ChunkTest;
using test::Sys;
using test::kMiB;

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

}  // namespace
}  // namespace ductile
