// SPDX-License-Identifier: BSD-2-Clause
// The allocator as a whole, through the ductile_ entry points and the core's
// counters. This program links the library's objects statically, so ductile
// is also the allocator of the test process itself.
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "core/runtime.h"
#include "core/stats.h"
#include "ductile/ductile.h"
#include "small/size_classes.h"
#include "support/maps.h"
#include "support/patterns.h"

namespace ductile {
namespace {

using small::class_of;
using test::check;
using test::fill;
using small::class_size;

size_t natural_alignment(size_t size) {
  size_t low = size & (~size + 1);  // lowest set bit
  return low < alignof(max_align_t) ? low : alignof(max_align_t);
}


TEST(Malloc, EverySizeClassRoundTrips) {
  std::vector<std::pair<void*, size_t>> live;
  for (size_t c = 0; c < small::kNumClasses; c++) {
    size_t hi = class_size(c);
    size_t lo = c == 0 ? 1 : class_size(c - 1) + 1;
    if (hi >= core::rt().huge.options().threshold) break;
    for (size_t size : {lo, hi}) {
      void* p = ductile_malloc(size);
      ASSERT_NE(p, nullptr) << size;
      EXPECT_EQ(ductile_malloc_usable_size(p), hi) << size;
      EXPECT_TRUE(is_aligned(addr(p), natural_alignment(hi))) << size;
      fill(p, hi, static_cast<unsigned>(size));
      live.push_back({p, size});
    }
  }
  for (auto [p, size] : live) {
    EXPECT_TRUE(check(p, class_size(class_of(size)), static_cast<unsigned>(size))) << size;
    ductile_free(p);
  }
}

TEST(Malloc, ZeroSizeGivesAUniqueBlock) {
  void* a = ductile_malloc(0);
  void* b = ductile_malloc(0);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_NE(a, b);
  ductile_free(a);
  ductile_free(b);
}

TEST(Malloc, ImpossibleSizesFailWithEnomem) {
  for (size_t size : {SIZE_MAX, SIZE_MAX - kPage, static_cast<size_t>(PTRDIFF_MAX) + 1}) {
    errno = 0;
    EXPECT_EQ(ductile_malloc(size), nullptr);
    EXPECT_EQ(errno, ENOMEM);
  }
  errno = 0;
  EXPECT_EQ(ductile_calloc(SIZE_MAX / 2, 3), nullptr);
  EXPECT_EQ(errno, ENOMEM);
  void* p = ductile_malloc(16);
  errno = 0;
  EXPECT_EQ(ductile_reallocarray(p, SIZE_MAX / 4, 8), nullptr);
  EXPECT_EQ(errno, ENOMEM);
  ductile_free(p);
}

TEST(Malloc, FreeOfNullIsHarmlessAndOfForeignPointersFatal) {
  ductile_free(nullptr);
  int on_stack = 5;
  EXPECT_DEATH(ductile_free(&on_stack), "^ductile: free\\(\\): invalid pointer 0x[0-9a-f]+\n");
  EXPECT_EQ(on_stack, 5);
  EXPECT_EQ(ductile_malloc_usable_size(&on_stack), 0u);
  EXPECT_EQ(ductile_malloc_usable_size(nullptr), 0u);
}

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

TEST(Calloc, ZeroesRecycledMemory) {
  for (size_t size : {24ul, 200ul, 5000ul, 100000ul, 3ul << 20}) {
    void* p = ductile_malloc(size);
    std::memset(p, 0xff, size);
    ductile_free(p);
    auto* q = static_cast<unsigned char*>(ductile_calloc(1, size));
    ASSERT_NE(q, nullptr);
    for (size_t i = 0; i < size; i++) ASSERT_EQ(q[i], 0) << size << " at " << i;
    ductile_free(q);
  }
}

TEST(Aligned, EveryPowerOfTwoUpTo64MiB) {
  for (size_t align = 1; align <= (size_t{64} << 20); align <<= 1) {
    for (size_t size : {1ul, 8ul, 100ul, 4096ul, 70000ul, 3ul << 20}) {
      void* p = ductile_aligned_alloc(align, size);
      ASSERT_NE(p, nullptr) << align << " " << size;
      EXPECT_TRUE(is_aligned(addr(p), align)) << align << " " << size;
      EXPECT_GE(ductile_malloc_usable_size(p), size);
      fill(p, size, 3);
      EXPECT_TRUE(check(p, size, 3));
      ductile_free(p);
      if (align >= sizeof(void*)) {
        void* q = nullptr;
        ASSERT_EQ(ductile_posix_memalign(&q, align, size), 0);
        EXPECT_TRUE(is_aligned(addr(q), align));
        ductile_free(q);
      }
    }
  }
}

TEST(Aligned, BadAlignmentsAreRefused) {
  void* q = reinterpret_cast<void*>(1);
  EXPECT_EQ(ductile_posix_memalign(&q, 24, 8), EINVAL);
  EXPECT_EQ(ductile_posix_memalign(&q, 4, 8), EINVAL);  // not a multiple of sizeof(void*)
  EXPECT_EQ(ductile_posix_memalign(&q, 0, 8), EINVAL);
  EXPECT_EQ(q, reinterpret_cast<void*>(1));  // untouched on error
  errno = 0;
  EXPECT_EQ(ductile_aligned_alloc(24, 48), nullptr);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(ductile_posix_memalign(&q, 64, SIZE_MAX - 10), ENOMEM);
  // memalign rounds a non-power-of-two alignment up, as glibc does.
  void* m = ductile_memalign(24, 10);
  ASSERT_NE(m, nullptr);
  EXPECT_TRUE(is_aligned(addr(m), 32));
  ductile_free(m);
}

TEST(Aligned, VallocAndPvalloc) {
  void* v = ductile_valloc(10);
  EXPECT_TRUE(is_aligned(addr(v), kPage));
  void* pv = ductile_pvalloc(kPage + 1);
  EXPECT_TRUE(is_aligned(addr(pv), kPage));
  EXPECT_GE(ductile_malloc_usable_size(pv), 2 * kPage);
  void* pz = ductile_pvalloc(0);
  EXPECT_GE(ductile_malloc_usable_size(pz), kPage);
  ductile_free(v);
  ductile_free(pv);
  ductile_free(pz);
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

TEST(Realloc, GrowingMediumSpaceFollowsTheKernelsModeAndThePolicy) {
  using huge::ThpPolicy;
  using os::ThpMode;
  EXPECT_EQ(core::dense_space(ThpPolicy::kAuto, ThpMode::kMadvise), chunk::Space::kDense);
  EXPECT_EQ(core::dense_space(ThpPolicy::kAlways, ThpMode::kMadvise), chunk::Space::kDense);
  EXPECT_EQ(core::dense_space(ThpPolicy::kNever, ThpMode::kMadvise), chunk::Space::kPlain);
  for (ThpMode m : {ThpMode::kAlways, ThpMode::kNever, ThpMode::kUnknown})
    for (ThpPolicy p : {ThpPolicy::kAuto, ThpPolicy::kAlways, ThpPolicy::kNever})
      EXPECT_EQ(core::dense_space(p, m), chunk::Space::kPlain);
  ASSERT_TRUE(core::ensure_ready());  // the runtime is made by ductile's first call
  EXPECT_EQ(core::rt().growing_medium, core::dense_space(core::rt().opts.thp, core::rt().os.features().thp));
}

// Buffers that grow by realloc through the medium sizes are written as they
// grow: where the kernel's THP mode is madvise they go to the dense
// huge-page space, packed together (each touched huge page serves many of
// them), and not one to a span -- after the first MiB of them, made in
// plain space (a program that grows a buffer or two pays no huge page). A
// fresh medium block stays in plain space. Growth out of the small classes
// counts too (it used to take the plain malloc of the small-object path).
TEST(Realloc, GrowingMediumBlocksArePackedIntoTheirSpace) {
  ASSERT_TRUE(core::ensure_ready());  // as above
  core::Runtime& rt = core::rt();
  const chunk::Space space = rt.growing_medium;
  auto space_of = [](const void* p) { return core::rt().chunks.lookup(p)->space; };
  void* fresh = ductile_malloc(40 * 1024);
  ASSERT_NE(fresh, nullptr);
  EXPECT_EQ(space_of(fresh), chunk::Space::kPlain);

  // The first MiB: counted, and made as any medium block (from the thread
  // cache or plain space); then the dense space's.
  rt.plain_growth.store(0);  // as in a new process
  std::vector<void*> grown;
  for (int i = 0; i < 48; i++) {
    const size_t before = rt.plain_growth.load();
    void* p = ductile_malloc(small::kMaxSmall);
    ASSERT_NE(p, nullptr);
    fill(p, small::kMaxSmall, 3);
    void* q = ductile_realloc(p, 32 * 1024);
    ASSERT_NE(q, nullptr);
    EXPECT_TRUE(check(q, small::kMaxSmall, 3));
    grown.push_back(q);
    if (space == chunk::Space::kPlain) {
      EXPECT_EQ(space_of(q), chunk::Space::kPlain);
      EXPECT_EQ(rt.plain_growth.load(), 0u);
    } else if (before < core::Runtime::kPlainGrowth) {
      EXPECT_EQ(rt.plain_growth.load(), before + 32 * 1024) << i;
    } else {
      EXPECT_EQ(space_of(q), space) << i;
      EXPECT_EQ(rt.plain_growth.load(), before) << i;
    }
  }
  if (space != chunk::Space::kPlain) EXPECT_EQ(rt.plain_growth.load(), core::Runtime::kPlainGrowth);
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
      if (old != 0) ASSERT_TRUE(check(q, old, static_cast<unsigned>(b))) << size;
      fill(q, size, static_cast<unsigned>(b));
      buf[b] = q;
      if (size > small::kMaxSmall) EXPECT_EQ(space_of(q), space) << size;
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
  if (space != chunk::Space::kPlain) EXPECT_LE(huge_pages.size(), 3u);
  for (void* q : buf) ductile_free(q);
  ductile_free(fresh);
}

// A buffer that realloc has grown in the dense space (from small sizes,
// past the process's first MiB of such) and that reaches half the huge
// threshold becomes a huge block: its span's headroom takes the next
// doublings in place, where the step into the huge range used to copy it.
// Plain medium blocks, rallocx (whose usable size must be nallocx's) and a
// process without a dense space keep the medium block.
TEST(Realloc, ADenseBufferGrownToHalfTheThresholdBecomesHugeAndGrowsInPlace) {
  // The runtime is made by ductile's first call (under a sanitizer that is
  // not the test program's first malloc).
  ASSERT_TRUE(core::ensure_ready());
  core::Runtime& rt = core::rt();
  const bool dense = rt.growing_medium != chunk::Space::kPlain;
  const size_t threshold = rt.huge.options().threshold;
  ASSERT_EQ(threshold, kHugePage);
  rt.plain_growth.store(core::Runtime::kPlainGrowth);  // past the first MiB
  auto kind_of = [](const void* p) { return core::rt().chunks.lookup(p)->kind; };
  auto in_place = [] {
    const huge::HugeStats s = core::rt().huge.stats();
    return s.growth[static_cast<size_t>(huge::GrowthPath::kHeadroom)] +
           s.growth[static_cast<size_t>(huge::GrowthPath::kNeighbour)];
  };

  void* p = ductile_malloc(small::kMaxSmall);
  ASSERT_NE(p, nullptr);
  fill(p, small::kMaxSmall, 7);
  size_t old = small::kMaxSmall;
  for (size_t size = 2 * small::kMaxSmall; size < threshold / 2; size *= 2) {
    p = ductile_realloc(p, size);
    ASSERT_NE(p, nullptr);
    ASSERT_TRUE(check(p, old, 7));
    fill(p, size, 7);
    old = size;
    EXPECT_EQ(kind_of(p), chunk::ExtentKind::kMedium);
    EXPECT_EQ(core::rt().chunks.lookup(p)->space, rt.growing_medium);
  }
  void* q = ductile_realloc(p, threshold / 2);
  ASSERT_NE(q, nullptr);
  ASSERT_TRUE(check(q, old, 7));
  fill(q, threshold / 2, 7);
  EXPECT_EQ(kind_of(q), dense ? chunk::ExtentKind::kHuge : chunk::ExtentKind::kMedium);
  EXPECT_EQ(ductile_malloc_usable_size(q), threshold / 2);
  if (dense) EXPECT_EQ(core::rt().chunks.lookup(q)->space, chunk::Space::kHuge);
  // Below the threshold and past it: in place, in the span's headroom.
  const uint64_t grown = in_place();
  old = threshold / 2;
  for (size_t size : {threshold * 3 / 4, threshold, 4 * threshold}) {
    void* r = ductile_realloc(q, size);
    ASSERT_NE(r, nullptr);
    ASSERT_TRUE(check(r, old, 7)) << size;
    fill(r, size, 7);
    if (dense) EXPECT_EQ(r, q) << size;
    q = r;
    old = size;
  }
  if (dense) EXPECT_EQ(in_place(), grown + 3);
  // Shrinking below the threshold makes a medium block again.
  void* s = ductile_realloc(q, threshold / 4);
  ASSERT_NE(s, nullptr);
  EXPECT_TRUE(check(s, threshold / 4, 7));
  EXPECT_EQ(kind_of(s), chunk::ExtentKind::kMedium);
  ductile_free(s);

  // rallocx: exactly nallocx's usable size, so a medium block.
  void* d = ductile_realloc(ductile_malloc(small::kMaxSmall), threshold / 4);
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

class Hysteresis : public ::testing::TestWithParam<size_t> {};

TEST_P(Hysteresis, OneBlockAllocFreeMakesNoChunkOrOsCalls) {
  const size_t size = GetParam();
  for (int i = 0; i < 10; i++) ductile_free(ductile_malloc(size));  // warm-up
  chunk::ChunkStats before = core::rt().chunks.stats();
  uint64_t calls = core::rt().os.counters().total();
  for (int i = 0; i < 100000; i++) {
    void* p = ductile_malloc(size);
    static_cast<volatile char*>(p)[0] = 1;
    ductile_free(p);
  }
  chunk::ChunkStats after = core::rt().chunks.stats();
  EXPECT_EQ(after.allocs, before.allocs);
  EXPECT_EQ(after.frees, before.frees);
  EXPECT_EQ(core::rt().os.counters().total(), calls);
}

INSTANTIATE_TEST_SUITE_P(Sizes, Hysteresis, ::testing::Values(16, 4096, 65536, 1 << 20));

// free() reads the class from the page-map tag: every page of a slab and the
// first page of a medium block carry their class's tag, interior and last
// pages of medium blocks and every page of a huge block none. Hardened
// builds number a slab's pages in the tag too (small::kSlabPageTagStep).
uint16_t tag_of(const void* p) { return chunk::PageMap::entry_tag(core::rt().chunks.lookup_entry(p)); }
uint16_t slab_tag(size_t cls, const chunk::Extent* e, uintptr_t a) {
  return static_cast<uint16_t>(small::free_tag(cls) + (a - e->base) / kPage * small::kSlabPageTagStep);
}

// A touched huge page is resident whole: an arena with tens of MiB of small
// objects keeps its slab regions in plain space, so that its last region,
// partly used, is resident only as far as it is used (with regions from the
// dense space after the first 16, a million 72-byte objects cost 82.2 bytes
// each instead of 80.5, over the goal of their class + 2 %). An arena of
// 64 regions (128 MiB) takes its next ones from the dense space.
TEST(SmallObjects, AnArenaOfTensOfMiBKeepsItsRegionsInPlainSpace) {
  ASSERT_TRUE(core::ensure_ready());
  core::StatsSnapshot s;
  core::take_snapshot(s);
  const size_t dense_before = s.arena.dense;
  std::vector<void*> v(1000000);
  for (void*& p : v) {
    p = ductile_malloc(72);
    ASSERT_NE(p, nullptr);
    static_cast<char*>(p)[0] = 1;
  }
  core::take_snapshot(s);
  EXPECT_EQ(s.arena.dense, dense_before);
  EXPECT_GE(s.arena.regions, 35u);  // 72 MB of 80-byte objects
  if (core::rt().growing_medium == chunk::Space::kDense) {
    // Past 128 MiB the arena's next regions are dense.
    std::vector<void*> more(1000000);
    for (void*& p : more) {
      p = ductile_malloc(72);
      ASSERT_NE(p, nullptr);
    }
    core::take_snapshot(s);
    EXPECT_GT(s.arena.dense, dense_before);
    for (void* p : more) ductile_free(p);
  }
  for (void* p : v) ductile_free(p);
  // Leave no region half full for later tests to fill (their threads'
  // slabs would land in these regions' holes, which never fall whole-free).
  ductile_trim();
}

TEST(FreeTag, EveryClassIsTaggedWhereFreeLooks) {
  for (size_t c = 0; c < small::kNumClasses; c++) {
    size_t size = class_size(c);
    if (size >= core::g_huge_threshold) break;
    char* p = static_cast<char*>(ductile_malloc(size));
    ASSERT_NE(p, nullptr);
    chunk::Extent* e = core::rt().chunks.lookup(p);
    ASSERT_NE(e, nullptr) << size;
    EXPECT_EQ(e->size_class, c);
    EXPECT_EQ(small::tag_class(tag_of(p)), c) << size;
    if (small::is_small_class(c)) {
      EXPECT_EQ(e->kind, chunk::ExtentKind::kSlab);
      for (uintptr_t a = e->base; a < e->end(); a += kPage) EXPECT_EQ(tag_of(ptr(a)), slab_tag(c, e, a));
    } else {
      EXPECT_EQ(e->kind, chunk::ExtentKind::kMedium);
      EXPECT_EQ(tag_of(p), small::free_tag(c)) << size;
      EXPECT_EQ(tag_of(p + kPage), 0u);             // not mapped
      EXPECT_EQ(tag_of(p + size - 1), 0u);          // last page: boundary only
      if (kHardened) EXPECT_DEATH(ductile_free(p + 8), "free\\(\\): invalid pointer");
      else ductile_free(p + 8);                     // not a block start: ignored
      EXPECT_EQ(core::rt().chunks.lookup(p)->state, chunk::ExtentState::kActive);
    }
    ductile_free(p);
  }
  void* h = ductile_malloc(core::g_huge_threshold);
  EXPECT_EQ(tag_of(h), 0u);
  ductile_free(h);
}

TEST(FreeTag, MediumResizedInPlaceIsTaggedWithItsNewClass) {
  size_t from = 40 * 1024, to = 100 * 1024;
  char* p = static_cast<char*>(ductile_malloc(from));
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(tag_of(p), small::free_tag(class_of(from)));
  size_t got = ductile_xallocx(p, to, 0, 0);
  if (got >= to) EXPECT_EQ(tag_of(p), small::free_tag(class_of(to)));
  else EXPECT_EQ(tag_of(p), small::free_tag(class_of(from)));
  EXPECT_EQ(ductile_xallocx(p, from, 0, 0), class_size(class_of(from)));
  EXPECT_EQ(tag_of(p), small::free_tag(class_of(from)));
  EXPECT_EQ(ductile_malloc_usable_size(p), class_size(class_of(from)));
  ductile_free(p);
  // The freed block is reused by its class, not by the class it had grown to.
  void* q = ductile_malloc(from);
  EXPECT_EQ(q, p);
  EXPECT_EQ(ductile_malloc_usable_size(q), class_size(class_of(from)));
  ductile_free(q);
}

// A medium class's cache bin holds two blocks of 64 KiB: a third freed
// gives back the oldest, and the two kept come back newest first, each with
// its own extent (a bin keeps a block's address and extent side by side).
TEST(ThreadCache, AFullMediumBinGivesBackItsOldestBlock) {
  constexpr size_t kSize = 64 * 1024;
  ASSERT_EQ(small::cache_cap(class_of(kSize)), 2u);
  core::flush_thread_cache();
  void* a = ductile_malloc(kSize);
  void* b = ductile_malloc(kSize);
  void* c = ductile_malloc(kSize);
  ASSERT_TRUE(a && b && c);
  ductile_free(a);
  ductile_free(b);
  ductile_free(c);  // the bin was full: a goes back to the chunk layer
  EXPECT_EQ(core::rt().chunks.lookup(a)->cached, 0u);
  EXPECT_NE(core::rt().chunks.lookup(b)->cached, 0u);
  EXPECT_NE(core::rt().chunks.lookup(c)->cached, 0u);
  void* x = ductile_malloc(kSize);
  void* y = ductile_malloc(kSize);
  EXPECT_EQ(x, c);
  EXPECT_EQ(y, b);
  EXPECT_EQ(core::rt().chunks.lookup(b)->cached, 0u);
  EXPECT_EQ(core::rt().chunks.lookup(c)->cached, 0u);
  std::memset(x, 1, kSize);
  std::memset(y, 2, kSize);
  ductile_free(x);
  ductile_free(y);
}

// A thread that keeps a handful of blocks of each medium size up to 32 KiB
// (buffers of a request, say) cycles them through its cache: after the
// first round no allocation or free reaches the chunk layer and its lock,
// which the program's other threads want too.
TEST(ThreadCache, AHandfulOfSmallMediumBlocksStaysInTheCache) {
  constexpr int kBlocks = 8;
  for (size_t size : {20 * 1024, 32 * 1024}) {
    ASSERT_GE(small::cache_cap(class_of(size)), kBlocks) << size;
    std::thread worker([size] {
      void* p[kBlocks];
      uint64_t allocs = 0, frees = 0;
      for (int round = 0; round < 3; round++) {
        if (round == 1) {
          allocs = core::rt().chunks.stats().allocs;
          frees = core::rt().chunks.stats().frees;
        }
        for (void*& q : p) {
          q = ductile_malloc(size);
          ASSERT_NE(q, nullptr);
          std::memset(q, round, size);
        }
        for (void* q : p) ductile_free(q);
      }
      EXPECT_EQ(core::rt().chunks.stats().allocs, allocs) << size;
      EXPECT_EQ(core::rt().chunks.stats().frees, frees) << size;
    });
    worker.join();
  }
}

TEST(Threads, FirstFreeOfANewThreadIsNotReusedByIt) {
  // Passive false sharing: this thread allocates neighbouring blocks and
  // hands one to a new thread, which frees it and then allocates the same
  // size. It must not get the handed block back (that block's cache line is
  // shared with this thread's). Its second free goes to its own cache.
  void* mine = ductile_malloc(8);
  void* handed = ductile_malloc(8);
  void* got = nullptr;
  void* second = nullptr;
  void* again = nullptr;
  std::thread([&] {
    ductile_free(handed);
    got = ductile_malloc(8);
    second = ductile_malloc(8);
    ductile_free(second);
    again = ductile_malloc(8);
    ductile_free(again);
    ductile_free(got);
  }).join();
  EXPECT_NE(got, handed);
  EXPECT_NE(got, nullptr);
  EXPECT_EQ(again, second);
  ductile_free(mine);
}

// A thread without a cache reads core::no_cache(), whose bins are empty and
// without room, so that the inline malloc and free need no null test; it
// must stay all zero whatever such threads do: free first, allocate, exit,
// and allocate and free again from a key destructor after the cache is gone.
namespace {
pthread_key_t g_late_key;
std::atomic<int> g_late_rounds{0};
void late_destructor(void* v) {
  if (core::own_cache() != nullptr) {  // ductile's destructor has not run yet
    pthread_setspecific(g_late_key, v);
    return;
  }
  ductile_free(v);
  void* p = ductile_malloc(24);
  void* q = ductile_malloc(40000);
  ductile_free(p);
  ductile_free(q);
  g_late_rounds++;
}
bool all_zero(const unsigned char* p, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (p[i] != 0) return false;
  return true;
}
}  // namespace

TEST(Threads, TheCacheOfThreadsWithoutOneStaysEmpty) {
  ASSERT_EQ(pthread_key_create(&g_late_key, late_destructor), 0);
  void* handed = ductile_malloc(16);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; t++) {
    threads.emplace_back([&, t] {
      EXPECT_EQ(core::t_cache, core::no_cache());
      if (t == 0) ductile_free(handed);  // a first free, before any cache
      pthread_setspecific(g_late_key, ductile_malloc(100));
      for (size_t size : {8, 100, 5000, 70000, 3 << 20}) {
        void* p = ductile_malloc(size);
        ASSERT_NE(p, nullptr);
        ductile_free(p);
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(g_late_rounds.load(), 4);
  EXPECT_TRUE(all_zero(core::g_no_cache, sizeof(core::g_no_cache)));
  pthread_key_delete(g_late_key);
}

TEST(Threads, ExitLeavesItsMemoryToDecay) {
  // A thread's exit is no sign that the process will not need the memory
  // again soon (the next thread usually does): the slabs it emptied stay in
  // their bins and its cached medium blocks go back to the chunk layer, all
  // dirty, for the next user or for decay -- the exit itself purges nothing.
  ASSERT_TRUE(core::ensure_ready());  // the runtime is made by ductile's first call
  const uint64_t decay = core::rt().chunks.options().decay_ns;
  core::rt().chunks.set_decay_ns(uint64_t{3600} * 1000000000);  // nothing comes due meanwhile
  const os::Counters& os = core::rt().os.counters();
  const uint64_t purged_before = os.purged_bytes.load();
  const uint64_t ranges_before = os.purged_ranges.load();
  const size_t cls = class_of(256);
  const size_t empty_before = core::rt().class_stats(cls).empty_slabs;
  constexpr size_t kMedium = 24 * 1024;
  void* m[2] = {};
  std::thread worker([&m] {
    std::vector<void*> v;
    for (int i = 0; i < 40000; i++) v.push_back(ductile_malloc(256));  // 10 MB
    for (void* p : v) ductile_free(p);
    m[0] = ductile_malloc(kMedium);
    m[1] = ductile_malloc(kMedium);
    std::memset(m[0], 1, kMedium);
    std::memset(m[1], 1, kMedium);
    ductile_free(m[0]);
    ductile_free(m[1]);  // in the thread's cache as it exits
  });
  worker.join();
  EXPECT_EQ(os.purged_bytes.load(), purged_before);
  EXPECT_EQ(os.purged_ranges.load(), ranges_before);
  // Its empty slabs wait in the bin (more than the one kept for hysteresis),
  // and its cached blocks in the chunk layer, free and still resident.
  EXPECT_GT(core::rt().class_stats(cls).empty_slabs, empty_before + small::Bin::kRetainEmpty);
  for (void* p : m) {
    const chunk::Extent* e = core::rt().chunks.lookup(p);
    EXPECT_TRUE(e == nullptr || e->state != chunk::ExtentState::kActive);  // not a block's any more
    EXPECT_EQ(test::resident_pages(p, kMedium), kMedium / kPage);
  }
  // Trim purges all of it.
  const size_t slab = small::kClasses.slab_pages[cls] * kPage;
  ductile_trim();
  EXPECT_GE(os.purged_bytes.load() - purged_before, 40000u * 256 - slab + 2 * kMedium);
  EXPECT_LE(core::rt().class_stats(cls).empty_slabs, small::Bin::kRetainEmpty * core::rt().nbinsets);
  core::rt().chunks.set_decay_ns(decay);
}

TEST(Threads, CrossThreadFreesWithAShadowOfContents) {
  // Threads put blocks into slots; any thread takes a block out of any slot,
  // checks it and frees it, so most frees are cross-thread. Each block starts
  // with its size and carries its slot's tag at both ends: a block handed to
  // two owners at once, or reused while still live, shows up as a wrong tag.
  constexpr int kThreads = 8;
  constexpr int kSlots = 4096;
  constexpr int kOps = 60000;
  std::vector<std::atomic<void*>> slots(kSlots);
  std::atomic<int> bad{0};
  // Head tag after the size word, tail tag at the end; they never overlap.
  auto tag_len = [](size_t size) { return (size - 8) / 2 < 56 ? (size - 8) / 2 : 56; };
  auto tag = [&](void* p, size_t size, int k) {
    std::memcpy(p, &size, sizeof size);
    size_t m = tag_len(size);
    fill(static_cast<char*>(p) + 8, m, static_cast<unsigned>(k));
    fill(static_cast<char*>(p) + size - m, m, static_cast<unsigned>(k) + 1);
  };
  auto tag_ok = [&](void* p, int k) {
    size_t size;
    std::memcpy(&size, p, sizeof size);
    size_t m = tag_len(size);
    return check(static_cast<char*>(p) + 8, m, static_cast<unsigned>(k)) &&
           check(static_cast<char*>(p) + size - m, m, static_cast<unsigned>(k) + 1);
  };
  std::vector<std::thread> ts;
  for (int t = 0; t < kThreads; t++) {
    ts.emplace_back([&, t] {
      std::mt19937 rng(t * 131 + 1);
      for (int i = 0; i < kOps; i++) {
        int victim = static_cast<int>(rng() % kSlots);
        if (void* old = slots[victim].exchange(nullptr, std::memory_order_acq_rel)) {
          if (!tag_ok(old, victim)) bad++;
          ductile_free(old);
        }
        size_t size;
        unsigned r = rng() % 1000;
        if (r < 700) size = 16 + rng() % 256;
        else if (r < 990) size = 257 + rng() % 70000;
        else if (r < 999) size = 70000 + rng() % 1000000;
        else size = (2 << 20) + rng() % (2 << 20);
        void* p = ductile_malloc(size);
        if (p == nullptr) {
          bad++;
          continue;
        }
        int k = static_cast<int>(rng() % kSlots);
        tag(p, size, k);
        void* expected = nullptr;
        if (!slots[k].compare_exchange_strong(expected, p, std::memory_order_acq_rel)) ductile_free(p);
      }
    });
  }
  for (auto& th : ts) th.join();
  for (int k = 0; k < kSlots; k++)
    if (void* p = slots[k].load()) {
      if (!tag_ok(p, k)) bad++;
      ductile_free(p);
    }
  EXPECT_EQ(bad.load(), 0);
}

TEST(Fork, ChildOfAThreadedProgramCanAllocate) {
  std::atomic<bool> stop{false};
  std::vector<std::thread> ts;
  for (int t = 0; t < 4; t++) {
    ts.emplace_back([&, t] {
      std::vector<void*> v(64, nullptr);
      unsigned i = 0;
      while (!stop.load(std::memory_order_relaxed)) {
        void*& slot = v[i++ % v.size()];
        ductile_free(slot);
        slot = ductile_malloc(16 + (i * 37 + t) % 100000);
      }
      for (void* p : v) ductile_free(p);
    });
  }
  for (int round = 0; round < 30; round++) {
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      // In the child: every size range must work, and so must threads.
      bool ok = true;
      for (size_t size : {8ul, 1000ul, 50000ul, 3ul << 20}) {
        void* p = ductile_malloc(size);
        ok = ok && p != nullptr;
        if (p) std::memset(p, 1, size);
        ductile_free(p);
      }
      std::thread child_thread([&] { ductile_free(ductile_malloc(100)); });
      child_thread.join();
      (void)ductile_trim();
      _exit(ok ? 0 : 1);
    }
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "round " << round;
  }
  stop = true;
  for (auto& th : ts) th.join();
}

TEST(Trim, GivesBackEverythingRetained) {
  std::vector<void*> v;
  for (int i = 0; i < 2000; i++) v.push_back(ductile_malloc(1000 + i * 10));
  for (void* p : v) ductile_free(p);
  ductile_trim();
  chunk::ChunkStats s = core::rt().chunks.stats();
  EXPECT_EQ(s.dirty, 0u);
  EXPECT_EQ(ductile_malloc_trim(0), 0);  // nothing left to release
  void* p = ductile_malloc(100);
  EXPECT_NE(p, nullptr);
  ductile_free(p);
}

}  // namespace
}  // namespace ductile
