// SPDX-License-Identifier: BSD-2-Clause
// realloc through the whole allocator (core/realloc.cc): contents kept across every range, failures,
// bad pointers, medium blocks grown in place or packed, and medium blocks grown into huge ones.
//
// This program links the library's objects, so ductile is also the allocator of the
// test process itself.
#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <vector>

#include <gtest/gtest.h>

#include "core/runtime.h"
#include "ductile/ductile.h"
#include "small/size_classes.h"
#include "support/maps.h"
#include "support/patterns.h"
#include "support/sizes.h"

namespace ductile {
namespace {

// The largest request a slab object holds: small::kMaxSmall, less the seal
// of a hardened build (small/seal.h).
constexpr size_t kLargestSmall = test::request_for_block(small::kMaxSmall);

using test::check;
using test::fill;

// realloc of a pointer free() would refuse ends the program the same way
// (as glibc's "realloc(): invalid pointer"): before, it returned NULL with
// EINVAL, which a program takes for "out of memory" and goes on with a
// pointer into freed space. (Not anchored at the start: under TSan the
// death test's child may print a report of its own first.)
TEST(Realloc, OfForeignOrFreedPointersIsFatal) {
  int on_stack = 5;
  EXPECT_DEATH(ductile_realloc(&on_stack, 64), "ductile: realloc\\(\\): invalid pointer 0x[0-9a-f]+\n");
  EXPECT_DEATH(ductile_realloc(reinterpret_cast<char*>(ductile_malloc(100)) + 3, 64),
               "ductile: realloc\\(\\): invalid pointer 0x[0-9a-f]+\n");
  EXPECT_DEATH(
      {
        void* p = ductile_malloc(16 << 20);
        ductile_free(p);
        (void)ductile_realloc(p, 32 << 20);
      },
      "ductile: realloc\\(\\): block freed already 0x[0-9a-f]+\n");
  EXPECT_EQ(on_stack, 5);
}

TEST(Realloc, KeepsContentsAcrossEveryRange) {
  // small -> medium -> huge -> bigger huge -> medium -> small
  const size_t sizes[] = {10, 300, 5000, 40000, 900000, 3 << 20, 9 << 20, 600000, 100, 7};
  void* p = ductile_realloc(nullptr, sizes[0]);
  fill(p, sizes[0], 11);
  size_t valid = sizes[0];
  for (size_t i = 1; i < sizeof sizes / sizeof sizes[0]; i++) {
    size_t n = sizes[i];
    void* q = ductile_realloc(p, n);
    ASSERT_NE(q, nullptr) << n;
    size_t keep = valid < n ? valid : n;
    ASSERT_TRUE(check(q, keep, 11)) << "to " << n;
    fill(q, n, 11);
    valid = n;
    p = q;
  }
  ductile_free(p);
}

TEST(Realloc, ZeroSizeFreesAndNullIsMalloc) {
  void* p = ductile_realloc(nullptr, 0);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(ductile_realloc(p, 0), nullptr);  // freed, as glibc does
}

TEST(Realloc, FailureLeavesTheBlockIntact) {
  for (size_t size : {40ul, 50000ul, 5ul << 20}) {
    void* p = ductile_malloc(size);
    fill(p, size, 5);
    errno = 0;
    EXPECT_EQ(ductile_realloc(p, SIZE_MAX - 100), nullptr);
    EXPECT_EQ(errno, ENOMEM);
    EXPECT_TRUE(check(p, size, 5));
    ductile_free(p);
  }
}

TEST(Realloc, MediumGrowsInPlaceIntoAFreeNeighbour) {
  void* p = ductile_malloc(40000);
  fill(p, 40000, 9);
  void* q = ductile_realloc(p, 80000);
  ASSERT_NE(q, nullptr);
  EXPECT_TRUE(check(q, 40000, 9));
  ductile_free(q);
}

// Buffers that grow by realloc through the medium sizes are written as they
// grow: where the kernel's THP mode is madvise they go to the dense
// huge-page space, packed together (each touched huge page serves many of
// them), and not one to a span -- from the first one: the dense space
// waits for its huge-page advice until the process holds 8 MiB, so a
// program that grows a buffer or two pays no huge page there, and its
// first buffers' old copies are not left dirty in plain space, where
// nothing of their size came again. The process's first MiB of them is
// counted (a dense buffer becomes huge only past it). A fresh medium block
// stays in plain space. Growth out of the small classes counts too (it
// used to take the plain malloc of the small-object path).
TEST(Realloc, GrowingMediumBlocksArePackedIntoTheirSpace) {
  ASSERT_TRUE(core::ensure_ready());  // as above
  core::Runtime& rt = core::rt();
  const chunk::Space space = rt.growing_medium();
  auto space_of = [](const void* p) { return core::rt().chunks.lookup(p)->space; };
  void* fresh = ductile_malloc(40 * 1024);
  ASSERT_NE(fresh, nullptr);
  EXPECT_EQ(space_of(fresh), chunk::Space::kPlain);

  // The first MiB: counted, and in the space from the first.
  rt.growth_made.store(0);  // as in a new process
  std::vector<void*> grown;
  for (int i = 0; i < 48; i++) {
    const size_t before = rt.growth_made.load();
    void* p = ductile_malloc(kLargestSmall);
    ASSERT_NE(p, nullptr);
    fill(p, kLargestSmall, 3);
    void* q = ductile_realloc(p, test::request_for_block(32 * 1024));
    ASSERT_NE(q, nullptr);
    EXPECT_TRUE(check(q, kLargestSmall, 3));
    grown.push_back(q);
    EXPECT_EQ(space_of(q), space) << i;
    if (before < core::Runtime::kHugeGrowthAfter) {
      EXPECT_EQ(rt.growth_made.load(), before + 32 * 1024) << i;
    } else {
      EXPECT_EQ(rt.growth_made.load(), before) << i;
    }
  }
  EXPECT_EQ(rt.growth_made.load(), core::Runtime::kHugeGrowthAfter);
  for (void* q : grown) ductile_free(q);

  // Past it: buffers grown round-robin stay in the space, moved or grown in
  // place, and lie packed.
  constexpr int kBuffers = 16;
  std::vector<void*> buf(kBuffers, nullptr);
  size_t old = 0;
  for (size_t size = 8 * 1024; size <= 128 * 1024; size *= 2) {
    for (int b = 0; b < kBuffers; b++) {
      void* q = ductile_realloc(buf[b], size);
      ASSERT_NE(q, nullptr);
      if (old != 0) {
        ASSERT_TRUE(check(q, old, static_cast<unsigned>(b))) << size;
      }
      fill(q, size, static_cast<unsigned>(b));
      buf[b] = q;
      if (size > small::kMaxSmall) {
        EXPECT_EQ(space_of(q), space) << size;
      }
    }
    old = size;
  }
  std::vector<uintptr_t> huge_pages;
  for (int b = 0; b < kBuffers; b++) {
    EXPECT_TRUE(check(buf[b], old, static_cast<unsigned>(b)));
    huge_pages.push_back(align_down(addr(buf[b]), kHugePage));
  }
  std::sort(huge_pages.begin(), huge_pages.end());
  huge_pages.erase(std::unique(huge_pages.begin(), huge_pages.end()), huge_pages.end());
  // 2 MiB of blocks: a span each would be 16 huge pages.
  if (space != chunk::Space::kPlain) {
    EXPECT_LE(huge_pages.size(), 3u);
  }
  for (void* q : buf) ductile_free(q);
  ductile_free(fresh);
}

// A buffer that realloc has grown in the dense space (from small sizes,
// past the process's first MiB of such) and that reaches half the huge
// threshold becomes a huge block: its span's headroom takes the next
// doublings in place, where the step into the huge range used to copy it.
// Within the process's first MiB of such buffers, plain medium blocks,
// rallocx (whose usable size must be nallocx's) and a process without a
// dense space keep the medium block.
TEST(Realloc, ADenseBufferGrownToHalfTheThresholdBecomesHugeAndGrowsInPlace) {
  // The runtime is made by ductile's first call (under a sanitizer that is
  // not the test program's first malloc).
  ASSERT_TRUE(core::ensure_ready());
  core::Runtime& rt = core::rt();
  const bool dense = rt.growing_medium() != chunk::Space::kPlain;
  const size_t threshold = rt.huge.options().threshold;
  ASSERT_EQ(threshold, kHugePage);
  auto kind_of = [](const void* p) { return core::rt().chunks.lookup(p)->kind; };
  // Within the first MiB: a medium block still (its huge page would cost a
  // program that grows one buffer up to 1 MiB more resident).
  rt.growth_made.store(0);
  void* first = ductile_realloc(ductile_malloc(kLargestSmall), threshold / 4);
  ASSERT_NE(first, nullptr);
  first = ductile_realloc(first, threshold / 2);
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(kind_of(first), chunk::ExtentKind::kMedium);
  ductile_free(first);
  rt.growth_made.store(core::Runtime::kHugeGrowthAfter);  // past the first MiB
  auto in_place = [] {
    const huge::HugeStats s = core::rt().huge.stats();
    return s.growth[static_cast<size_t>(huge::GrowthPath::kHeadroom)] +
           s.growth[static_cast<size_t>(huge::GrowthPath::kNeighbour)];
  };

  void* p = ductile_malloc(kLargestSmall);
  ASSERT_NE(p, nullptr);
  fill(p, kLargestSmall, 7);
  size_t old = kLargestSmall;
  for (size_t size = 2 * small::kMaxSmall; size < threshold / 2; size *= 2) {
    p = ductile_realloc(p, size);
    ASSERT_NE(p, nullptr);
    ASSERT_TRUE(check(p, old, 7));
    fill(p, size, 7);
    old = size;
    EXPECT_EQ(kind_of(p), chunk::ExtentKind::kMedium);
    EXPECT_EQ(core::rt().chunks.lookup(p)->space, rt.growing_medium());
  }
  void* q = ductile_realloc(p, threshold / 2);
  ASSERT_NE(q, nullptr);
  ASSERT_TRUE(check(q, old, 7));
  fill(q, threshold / 2, 7);
  EXPECT_EQ(kind_of(q), dense ? chunk::ExtentKind::kHuge : chunk::ExtentKind::kMedium);
  EXPECT_EQ(ductile_malloc_usable_size(q), threshold / 2);
  if (dense) {
    EXPECT_EQ(core::rt().chunks.lookup(q)->space, chunk::Space::kHuge);
  }
  // Below the threshold and past it: in place, in the span's headroom.
  const uint64_t grown = in_place();
  old = threshold / 2;
  for (size_t size : {threshold * 3 / 4, threshold, 4 * threshold}) {
    void* r = ductile_realloc(q, size);
    ASSERT_NE(r, nullptr);
    ASSERT_TRUE(check(r, old, 7)) << size;
    fill(r, size, 7);
    if (dense) {
      EXPECT_EQ(r, q) << size;
    }
    q = r;
    old = size;
  }
  if (dense) {
    EXPECT_EQ(in_place(), grown + 3);
  }
  // Shrinking below the threshold makes a medium block again.
  void* s = ductile_realloc(q, threshold / 4);
  ASSERT_NE(s, nullptr);
  EXPECT_TRUE(check(s, threshold / 4, 7));
  EXPECT_EQ(kind_of(s), chunk::ExtentKind::kMedium);
  ductile_free(s);

  // rallocx: exactly nallocx's usable size, so a medium block.
  void* d = ductile_realloc(ductile_malloc(kLargestSmall), threshold / 4);
  ASSERT_NE(d, nullptr);
  void* x = ductile_rallocx(d, threshold / 2, 0);
  ASSERT_NE(x, nullptr);
  EXPECT_EQ(kind_of(x), chunk::ExtentKind::kMedium);
  EXPECT_EQ(ductile_sallocx(x, 0), ductile_nallocx(threshold / 2, 0));
  ductile_free(x);
  // A medium block malloc made (plain space) grows as a medium block. (Not
  // one of the dense blocks freed above into the thread cache.)
  core::flush_thread_cache();
  void* m = ductile_malloc(threshold / 4);
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(core::rt().chunks.lookup(m)->space, chunk::Space::kPlain);
  void* n = ductile_realloc(m, threshold / 2);
  ASSERT_NE(n, nullptr);
  EXPECT_EQ(kind_of(n), chunk::ExtentKind::kMedium);
  ductile_free(n);
}

// A medium block that realloc or rallocx grows into the huge range brings
// its pages along (mremap) rather than a copy: an untouched one makes
// nothing resident -- the copy wrote its untouched bytes into the new
// block's huge page, 2 MiB resident for nothing written (1 002 MB for 500
// such blocks of 1 MiB, 3 MB under glibc) -- and a written one only the
// pages it had.
TEST(Realloc, AMediumBlockGrownIntoTheHugeRangeBringsItsPages) {
  ASSERT_TRUE(core::ensure_ready());  // the runtime is made by ductile's first call
  if (core::g_hardened) GTEST_SKIP() << "hardened mode guards huge blocks: the medium block is copied";
  const size_t threshold = core::rt().huge.options().threshold;
  ASSERT_EQ(threshold, kHugePage);
  constexpr size_t kMiB = size_t{1} << 20;
  test::NoHugePages no_thp;  // the pages counted below are the move's alone
  ASSERT_TRUE(no_thp.ok());
  for (int rallocx = 0; rallocx < 2; rallocx++) {
    auto grow = [&](void* p, size_t size) {
      return rallocx ? ductile_rallocx(p, size, 0) : ductile_realloc(p, size);
    };
    // Not a growing block from the thread cache: one malloc makes (plain);
    // and no recycled pages for the new block, which takes them first (and
    // copies there: see HugeTest.AMediumBlockIsCopiedOntoRecycledPagesOrWhereItCannotMove).
    core::trim();
    void* p = ductile_malloc(kMiB);
    ASSERT_NE(p, nullptr);
    ASSERT_EQ(core::rt().chunks.lookup(p)->kind, chunk::ExtentKind::kMedium);
    ASSERT_EQ(core::rt().chunks.lookup(p)->space, chunk::Space::kPlain);
    ASSERT_EQ(madvise(p, kMiB, MADV_DONTNEED), 0);  // untouched, whatever pages it came on
    void* q = grow(p, 2 * kMiB);
    ASSERT_NE(q, nullptr);
    EXPECT_EQ(core::rt().chunks.lookup(q)->kind, chunk::ExtentKind::kHuge);
    EXPECT_EQ(test::resident_pages(q, 2 * kMiB), 0u) << rallocx;
    EXPECT_EQ(test::resident_pages(p, kMiB), 0u) << rallocx;  // its old range, if still ours
    // It grows on in place, as any growing block.
    fill(q, 2 * kMiB, 5);
    void* r = grow(q, 4 * kMiB);
    EXPECT_EQ(r, q);
    EXPECT_TRUE(check(r, 2 * kMiB, 5));
    ductile_free(r);

    // Written: its pages, and no more, hold its bytes in the new block.
    core::trim();
    p = ductile_malloc(kMiB);
    ASSERT_NE(p, nullptr);
    ASSERT_EQ(madvise(p, kMiB, MADV_DONTNEED), 0);
    fill(p, kMiB / 2, 9);
    q = grow(p, 2 * kMiB);
    ASSERT_NE(q, nullptr);
    // (Its half: not the 1 MiB a copy wrote, even where khugepaged looks now.)
    test::collapse_as_khugepaged_may(q, 2 * kMiB);
    EXPECT_EQ(test::resident_pages(q, 2 * kMiB), kMiB / 2 / kPage) << rallocx;
    EXPECT_TRUE(check(q, kMiB / 2, 9));
    ductile_free(q);
  }
}

}  // namespace
}  // namespace ductile
