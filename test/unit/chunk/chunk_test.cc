// SPDX-License-Identifier: BSD-2-Clause
// The chunk layer (chunk/chunk.cc): recycling, coalescing, its records in the page map, lookup,
// free, statistics, hysteresis, and a multi-threaded stress test.
#include <sys/mman.h>

#include <algorithm>
#include <cstring>
#include <new>
#include <random>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "chunk/chunk.h"
#include "support/fake_clock.h"
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
using test::FakeClock;
using test::FakeKernel;
using test::kMiB;

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

// The process's first reservation, at its random hint, ends at the end of
// the page-map leaf the hint lies in (the hint lies in a leaf's first half):
// a whole one straddled two leaves, an mmap and two page faults more at
// start-up.
TEST(ChunkReservations, TheFirstHintLiesInALeafsFirstHalf) {
  constexpr size_t kLeaf = chunk::PageMap::kLeafSpan;
  std::mt19937_64 rng(42);
  for (int i = 0; i < 10000; i++) {
    const uintptr_t h = ChunkLayer::hint_from(rng(), 0);
    ASSERT_EQ(h % kHugePage, 0u) << std::hex << h;
    ASSERT_LT(h % kLeaf, kLeaf / 2) << std::hex << h;
    ASSERT_GE(h, uintptr_t{2} << 40) << std::hex << h;
    ASSERT_LT(h, uintptr_t{3} << 40) << std::hex << h;
  }
  // Its 2 MiB steps within the leaf all occur.
  std::vector<bool> seen(kLeaf / 2 / kHugePage);
  for (int i = 0; i < 100000; i++) seen[ChunkLayer::hint_from(rng(), 0) % kLeaf / kHugePage] = true;
  EXPECT_EQ(std::count(seen.begin(), seen.end(), true), static_cast<long>(seen.size()));
}

TEST(ChunkReservations, AReservationEndsAtItsLeafsEndWhereHalfIsLeft) {
  constexpr size_t kLeaf = chunk::PageMap::kLeafSpan;
  const uintptr_t leaf = uintptr_t{15} << 40;
  EXPECT_EQ(ChunkLayer::to_leaf_end(leaf, kLeaf), kLeaf);  // aligned: one leaf already
  EXPECT_EQ(ChunkLayer::to_leaf_end(leaf + 2 * kMiB, kLeaf), kLeaf - 2 * kMiB);
  EXPECT_EQ(ChunkLayer::to_leaf_end(leaf + kLeaf / 2, kLeaf), kLeaf / 2);
  EXPECT_EQ(ChunkLayer::to_leaf_end(leaf + kLeaf / 2 + 2 * kMiB, kLeaf), kLeaf);  // under half: whole
  EXPECT_EQ(ChunkLayer::to_leaf_end(leaf + kLeaf - 40 * kMiB, 64 * kMiB), 40 * kMiB);
  EXPECT_EQ(ChunkLayer::to_leaf_end(leaf + kLeaf - 20 * kMiB, 64 * kMiB), 64 * kMiB);
  EXPECT_EQ(ChunkLayer::to_leaf_end(leaf + 2 * kMiB, 64 * kMiB), 64 * kMiB);  // inside the leaf
}

// Made in zeroed storage (the runtime's), the layer writes its page map's
// root entry for its first reservation as it is constructed (see
// PageMap::touch_root): the first allocation makes no page of the layer's
// own storage resident that construction did not, so the root's page was
// not first read (mapping the zero page) and then written (a second fault).
TEST(ChunkReservations, ZeroedStorageWritesTheFirstRootEntryAtConstruction) {
  FakeKernel k;
  FakeClock clock;
  os::Os os(k);
  (void)os.probed_features();
  chunk::Options o;
  o.reservation = 64 * kMiB;
  o.first_hint = test::free_hint(o.reservation);
  ASSERT_NE(o.first_hint, 0u);
  o.storage_zeroed = true;
  const size_t bytes = align_up(sizeof(ChunkLayer), kPage);
  void* storage = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(storage, MAP_FAILED);
  auto* c = new (storage) ChunkLayer(os, clock, o);
  const size_t made = test::resident_pages(storage, bytes);
  Allocation a = c->alloc(kPage);
  ASSERT_NE(a.extent, nullptr);
  EXPECT_EQ(a.extent->base, o.first_hint);
  EXPECT_EQ(test::resident_pages(storage, bytes), made);
  c->free(a.extent);
  c->~ChunkLayer();
  ::munmap(storage, bytes);
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
