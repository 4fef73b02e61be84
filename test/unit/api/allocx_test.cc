// SPDX-License-Identifier: BSD-2-Clause
// jemalloc's extended API (api/allocx.cc): mallocx, nallocx, sallocx, rallocx, xallocx, dallocx and
// sdallocx, their flags, and MALLOCX_TCACHE_NONE.
//
// This program links the library's objects, so ductile is also the allocator of the
// test process itself.
#include <errno.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include <gtest/gtest.h>

#include "core/runtime.h"
#include "ductile/ductile.h"
#include "small/size_classes.h"
#include "support/patterns.h"
#include "support/sizes.h"
#include "unit/api/api_helpers.h"

namespace ductile {
namespace {

using test::all_zero;
using test::check;
using test::edge_sizes;
using test::fill;
using test::kMaxSize;
using test::kMiB;

// ---- flags -------------------------------------------------------------

TEST(Flags, EncodeAsJemallocDoes) {
  EXPECT_EQ(MALLOCX_LG_ALIGN(0), 0);
  EXPECT_EQ(MALLOCX_LG_ALIGN(12), 12);
  for (int lg = 0; lg < 63; lg++) EXPECT_EQ(MALLOCX_ALIGN(uint64_t{1} << lg), lg) << lg;
  EXPECT_EQ(MALLOCX_ALIGN(24), 3);  // not a power of two: its lowest set bit
  EXPECT_EQ(MALLOCX_ZERO, 0x40);
  EXPECT_EQ(MALLOCX_TCACHE_NONE, 0x100);
  EXPECT_EQ(MALLOCX_TCACHE(0), 0x200);
  EXPECT_EQ(MALLOCX_ARENA(0), 1 << 20);
  EXPECT_EQ(MALLOCX_ARENA(5), 6 << 20);
  EXPECT_EQ(MALLCTL_ARENAS_ALL, 4096);
}

// ---- mallocx / nallocx / sallocx ---------------------------------------

TEST(Mallocx, EverySizeAndAlignmentAgreesWithNallocx) {
  for (size_t size : edge_sizes()) {
    for (int lg : {0, 3, 4, 6, 12, 16, 21, 22}) {
      for (int extra : {0, static_cast<int>(MALLOCX_ZERO), static_cast<int>(MALLOCX_TCACHE_NONE),
                        MALLOCX_ARENA(0)}) {
        int flags = MALLOCX_LG_ALIGN(lg) | extra;
        void* p = ductile_mallocx(size, flags);
        ASSERT_NE(p, nullptr) << size << " lg " << lg;
        size_t align = size_t{1} << lg;
        EXPECT_TRUE(is_aligned(addr(p), align)) << size << " lg " << lg;
        size_t usable = ductile_sallocx(p, flags);
        EXPECT_GE(usable, size);
        EXPECT_EQ(usable, ductile_nallocx(size, flags)) << size << " lg " << lg;
        EXPECT_EQ(usable, ductile_malloc_usable_size(p));
        if (flags & MALLOCX_ZERO) {
          EXPECT_TRUE(all_zero(p, 0, size)) << size;
        }
        static_cast<volatile char*>(p)[size - 1] = 1;
        ductile_dallocx(p, flags);
      }
    }
  }
}

TEST(Mallocx, UnprefixedNamesAreTheSameFunctions) {
  EXPECT_EQ(reinterpret_cast<void*>(&mallocx), reinterpret_cast<void*>(&ductile_mallocx));
  EXPECT_EQ(reinterpret_cast<void*>(&rallocx), reinterpret_cast<void*>(&ductile_rallocx));
  EXPECT_EQ(reinterpret_cast<void*>(&xallocx), reinterpret_cast<void*>(&ductile_xallocx));
  EXPECT_EQ(reinterpret_cast<void*>(&sallocx), reinterpret_cast<void*>(&ductile_sallocx));
  EXPECT_EQ(reinterpret_cast<void*>(&dallocx), reinterpret_cast<void*>(&ductile_dallocx));
  EXPECT_EQ(reinterpret_cast<void*>(&sdallocx), reinterpret_cast<void*>(&ductile_sdallocx));
  EXPECT_EQ(reinterpret_cast<void*>(&nallocx), reinterpret_cast<void*>(&ductile_nallocx));
  EXPECT_EQ(reinterpret_cast<void*>(&mallctl), reinterpret_cast<void*>(&ductile_mallctl));
  EXPECT_EQ(reinterpret_cast<void*>(&malloc_stats_print), reinterpret_cast<void*>(&ductile_malloc_stats_print));
  void* p = mallocx(100, 0);
  EXPECT_EQ(sallocx(p, 0), ductile_sallocx(p, 0));
  dallocx(p, 0);
}

TEST(Mallocx, ZeroFlagZeroesRecycledMemory) {
  for (size_t size : {24ul, 3000ul, 40000ul, 3 * kMiB}) {
    for (int round = 0; round < 3; round++) {
      void* dirty = ductile_malloc(size);
      std::memset(dirty, 0xa5, size);
      ductile_free(dirty);
      void* p = ductile_mallocx(size, MALLOCX_ZERO);
      ASSERT_NE(p, nullptr);
      EXPECT_TRUE(all_zero(p, 0, size)) << size;
      std::memset(p, 0x5a, size);
      ductile_dallocx(p, 0);
    }
  }
}

TEST(Mallocx, AlignmentLargerThanTheSize) {
  for (size_t align = 16; align <= 64 * kMiB; align <<= 1) {
    void* p = ductile_mallocx(1, MALLOCX_ALIGN(align));
    ASSERT_NE(p, nullptr) << align;
    EXPECT_TRUE(is_aligned(addr(p), align)) << align;
    EXPECT_EQ(ductile_sallocx(p, 0), ductile_nallocx(1, MALLOCX_ALIGN(align))) << align;
    ductile_dallocx(p, MALLOCX_ALIGN(align));
  }
}

TEST(Mallocx, AlignmentNotAPowerOfTwoUsesItsLowestBit) {
  // MALLOCX_ALIGN does not validate (as jemalloc's): 24 asks for 8, 96 for 32.
  void* p = ductile_mallocx(40, MALLOCX_ALIGN(24));
  ASSERT_NE(p, nullptr);
  EXPECT_TRUE(is_aligned(addr(p), 8));
  void* q = ductile_mallocx(40, MALLOCX_ALIGN(96));
  ASSERT_NE(q, nullptr);
  EXPECT_TRUE(is_aligned(addr(q), 32));
  ductile_dallocx(p, 0);
  ductile_dallocx(q, 0);
}

TEST(Mallocx, ImpossibleRequestsFailCleanly) {
  for (size_t size : {SIZE_MAX, SIZE_MAX - kPage, kMaxSize + 1, kMaxSize, kMaxSize - kPage}) {
    errno = 0;
    EXPECT_EQ(ductile_mallocx(size, 0), nullptr) << size;
    EXPECT_EQ(errno, ENOMEM) << size;
    EXPECT_EQ(ductile_mallocx(size, MALLOCX_ZERO | MALLOCX_LG_ALIGN(12)), nullptr) << size;
    if (size > kMaxSize) {
      EXPECT_EQ(ductile_nallocx(size, 0), 0u) << size;
    }
  }
  EXPECT_EQ(ductile_nallocx(kMaxSize, 0), 0u);  // rounding would take it past PTRDIFF_MAX
  // An alignment whose padding alone exceeds what can exist.
  EXPECT_EQ(ductile_mallocx(1, MALLOCX_LG_ALIGN(63)), nullptr);
  EXPECT_EQ(ductile_nallocx(1, MALLOCX_LG_ALIGN(63)), 0u);
  EXPECT_EQ(ductile_mallocx(kMiB, MALLOCX_LG_ALIGN(62)), nullptr);
  // Still healthy afterwards.
  void* p = ductile_mallocx(64, 0);
  EXPECT_NE(p, nullptr);
  ductile_dallocx(p, 0);
}

TEST(Sallocx, ForeignAndNullPointersAreZero) {
  int on_stack = 0;
  EXPECT_EQ(ductile_sallocx(&on_stack, 0), 0u);
  EXPECT_EQ(ductile_sallocx(nullptr, 0), 0u);
}

// ---- rallocx -----------------------------------------------------------

TEST(Rallocx, KeepsContentsAcrossEveryRange) {
  const size_t sizes[] = {10, 300, 5000, 40000, 900000, 3 * kMiB, 9 * kMiB, 600000, 100, 7};
  void* p = ductile_mallocx(sizes[0], 0);
  fill(p, sizes[0], 21);
  size_t valid = sizes[0];
  for (size_t n : sizes) {
    void* q = ductile_rallocx(p, n, 0);
    ASSERT_NE(q, nullptr) << n;
    EXPECT_GE(ductile_sallocx(q, 0), n);
    ASSERT_TRUE(check(q, valid < n ? valid : n, 21)) << n;
    fill(q, n, 21);
    valid = n;
    p = q;
  }
  ductile_dallocx(p, 0);
}

TEST(Rallocx, ZeroFlagZeroesFromTheOldUsableSize) {
  const size_t sizes[] = {10, 100, 3000, 50000, 200000, 3 * kMiB, 12 * kMiB};
  for (size_t i = 0; i + 1 < sizeof sizes / sizeof sizes[0]; i++) {
    // Dirty the memory the grown block might reuse.
    void* d = ductile_malloc(sizes[i + 1]);
    std::memset(d, 0xee, sizes[i + 1]);
    ductile_free(d);
    void* p = ductile_mallocx(sizes[i], MALLOCX_ZERO);
    size_t old = ductile_sallocx(p, 0);
    fill(p, old, 4);
    void* q = ductile_rallocx(p, sizes[i + 1], MALLOCX_ZERO);
    ASSERT_NE(q, nullptr);
    EXPECT_TRUE(check(q, old, 4)) << sizes[i];
    EXPECT_TRUE(all_zero(q, old, sizes[i + 1])) << sizes[i] << " -> " << sizes[i + 1];
    ductile_dallocx(q, 0);
  }
}

TEST(Rallocx, AlignmentIsHonouredWhenItChanges) {
  for (size_t align : {64ul, 4096ul, 65536ul, 2 * kMiB, 8 * kMiB}) {
    for (size_t size : {100ul, 20000ul, 3 * kMiB}) {
      void* p = ductile_mallocx(size, 0);
      fill(p, size, 8);
      void* q = ductile_rallocx(p, size * 2, MALLOCX_ALIGN(align));
      ASSERT_NE(q, nullptr);
      EXPECT_TRUE(is_aligned(addr(q), align)) << size << " " << align;
      EXPECT_TRUE(check(q, size, 8));
      ductile_dallocx(q, 0);
    }
  }
}

TEST(Rallocx, FailureLeavesTheBlockIntact) {
  for (size_t size : {40ul, 50000ul, 5 * kMiB}) {
    void* p = ductile_mallocx(size, 0);
    fill(p, size, 5);
    EXPECT_EQ(ductile_rallocx(p, SIZE_MAX, 0), nullptr);
    EXPECT_EQ(ductile_rallocx(p, kMaxSize + 1, MALLOCX_ZERO), nullptr);
    EXPECT_EQ(ductile_rallocx(p, 64, MALLOCX_LG_ALIGN(63)), nullptr);
    EXPECT_TRUE(check(p, size, 5));
    EXPECT_GE(ductile_sallocx(p, 0), size);
    ductile_dallocx(p, 0);
  }
}

// jemalloc(3): rallocx "resizes the allocation at ptr to be at least size
// bytes", and its usable size is then what nallocx(size, flags) answers --
// shrinking included (jemalloc: 65536 -> 57344 leaves 57344).
TEST(Rallocx, ShrinkingLeavesTheNewSizesClass) {
  const size_t cases[][2] = {{65536, 57344}, {65536, 40000}, {kMiB, 20000}, {kMiB, 600000},
                             {300, 100},     {20000, 17000}, {5 * kMiB, 3 * kMiB}};
  for (auto [from, to] : cases) {
    void* p = ductile_mallocx(from, 0);
    ASSERT_NE(p, nullptr);
    fill(p, from, 3);
    void* q = ductile_rallocx(p, to, 0);
    ASSERT_NE(q, nullptr) << from << " -> " << to;
    EXPECT_EQ(ductile_sallocx(q, 0), ductile_nallocx(to, 0)) << from << " -> " << to;
    EXPECT_TRUE(check(q, to, 3)) << from << " -> " << to;
    ductile_dallocx(q, 0);
  }
}

// nallocx(size, flags) is sallocx of what mallocx(size, flags) and
// rallocx(p, size, flags) return, for every size range and alignment and
// whatever block rallocx starts from.
TEST(Rallocx, UsableSizeIsNallocxForEverySizeAndAlignment) {
  std::vector<size_t> targets = edge_sizes();
  for (size_t s : {24ul, 48ul, 4095ul, 8192ul, 20480ul, 57344ul, 65536ul, 3 * kMiB}) targets.push_back(s);
  size_t failures = 0;
  for (size_t size : targets) {
    for (int lg = 0; lg <= 21; lg++) {
      const int flags = MALLOCX_LG_ALIGN(lg);
      const size_t want = ductile_nallocx(size, flags);
      void* m = ductile_mallocx(size, flags);
      ASSERT_NE(m, nullptr);
      if (ductile_sallocx(m, 0) != want && ++failures <= 20)
        ADD_FAILURE() << "mallocx(" << size << ", lg " << lg << "): " << ductile_sallocx(m, 0) << " != " << want;
      ductile_dallocx(m, 0);
      for (size_t from : {1ul, 100ul, 4096ul, 20000ul, 65536ul, 3 * kMiB}) {
        void* p = ductile_mallocx(from, 0);
        ASSERT_NE(p, nullptr);
        void* q = ductile_rallocx(p, size, flags);
        ASSERT_NE(q, nullptr) << from << " -> " << size << " lg " << lg;
        EXPECT_TRUE(is_aligned(addr(q), size_t{1} << lg));
        if (ductile_sallocx(q, 0) != want && ++failures <= 20)
          ADD_FAILURE() << "rallocx(" << from << " -> " << size << ", lg " << lg << "): " << ductile_sallocx(q, 0)
                        << " != nallocx " << want;
        ductile_dallocx(q, 0);
      }
    }
  }
  EXPECT_EQ(failures, 0u);
}

TEST(Rallocx, AnAlignmentAboveAPageLeavesTheSizeNallocxAnswers) {
  // A 4 KiB slab object that happens to be 8 KiB aligned, asked for 4 KiB
  // aligned to 8 KiB: mallocx would give a medium block (nallocx says so).
  std::vector<void*> held;
  void* p = nullptr;
  for (int i = 0; i < 64 && p == nullptr; i++) {
    void* b = ductile_mallocx(4096, 0);
    if (is_aligned(addr(b), 8192)) p = b;
    else held.push_back(b);
  }
  ASSERT_NE(p, nullptr);
  void* q = ductile_rallocx(p, 4096, MALLOCX_LG_ALIGN(13));
  ASSERT_NE(q, nullptr);
  EXPECT_TRUE(is_aligned(addr(q), 8192));
  EXPECT_EQ(ductile_sallocx(q, 0), ductile_nallocx(4096, MALLOCX_LG_ALIGN(13)));
  ductile_dallocx(q, 0);
  for (void* b : held) ductile_dallocx(b, 0);
}

// ---- xallocx -----------------------------------------------------------

TEST(Xallocx, NeverMovesAndAnswersTheRealSize) {
  for (size_t size : edge_sizes()) {
    void* p = ductile_mallocx(size, 0);
    fill(p, size, 6);
    size_t old = ductile_sallocx(p, 0);
    // The bytes the block has kept throughout: past a shrink's size they
    // are no longer the program's, and growing again need not bring them
    // back (in hardened mode a huge block's guard page moves there, and a
    // guard marker drops its page).
    size_t kept = size;
    for (size_t want : {size / 2 + 1, size, old, old + 1, old * 2, old * 3 + 12345}) {
      size_t got = ductile_xallocx(p, want, 0, 0);
      EXPECT_EQ(got, ductile_sallocx(p, 0)) << size << " -> " << want;
      EXPECT_TRUE(got >= want || got == old || got >= size) << size << " -> " << want << " got " << got;
      if (got < kept) kept = got;
      EXPECT_TRUE(check(p, kept, 6)) << size << " -> " << want;
      old = got;
    }
    ductile_dallocx(p, 0);
  }
}

TEST(Xallocx, SmallBlocksCannotGrowPastTheirClass) {
  void* p = ductile_mallocx(16, 0);
  // What the block holds: its class's size (a hardened build's, less the
  // seal: small/seal.h).
  const size_t room = test::request_of_class(test::class_of_request(16));
  EXPECT_EQ(ductile_xallocx(p, room + 1, 0, 0), 16u);
  EXPECT_EQ(ductile_xallocx(p, 8, 0, 0), 16u);
  EXPECT_EQ(ductile_xallocx(p, 16, 100, 0), 16u);
  ductile_dallocx(p, 0);
}

TEST(Xallocx, MediumShrinksInPlace) {
  void* p = ductile_mallocx(1 * kMiB, 0);
  fill(p, 100000, 3);
  size_t got = ductile_xallocx(p, 100000, 0, 0);
  // (A hardened build reports the request, which the block's seal keeps.)
  EXPECT_EQ(got, kHardened ? 100000 : small::class_size(small::class_of(100000)));
  EXPECT_TRUE(check(p, 100000, 3));
  ductile_dallocx(p, 0);
}

TEST(Xallocx, ExtraIsBestEffort) {
  // size + extra too big for any growth: the block keeps what it can.
  void* p = ductile_mallocx(40000, 0);
  size_t old = ductile_sallocx(p, 0);
  size_t got = ductile_xallocx(p, 30000, SIZE_MAX - 30000, 0);
  EXPECT_GE(got, 30000u);
  EXPECT_EQ(got, ductile_sallocx(p, 0));
  got = ductile_xallocx(p, old, kMaxSize, MALLOCX_ZERO);
  EXPECT_GE(got, old);
  ductile_dallocx(p, 0);
}

TEST(Xallocx, AnAlignmentTheBlockLacksIsRefused) {
  void* p = ductile_mallocx(5000, 0);
  size_t old = ductile_sallocx(p, 0);
  size_t align = kPage;
  while (is_aligned(addr(p), align)) align <<= 1;
  EXPECT_EQ(ductile_xallocx(p, 9000, 0, MALLOCX_ALIGN(align)), old);
  EXPECT_EQ(ductile_xallocx(p, SIZE_MAX, 0, 0), old);  // past PTRDIFF_MAX
  ductile_dallocx(p, 0);
}

TEST(Xallocx, HugeBlocksGrowInPlaceWithZeroedBytes) {
  // Where ductile differs from jemalloc on purpose: jemalloc answers the old size.
  // A new huge block on clean space has headroom as large as the block
  // (huge.h, span_for); one on recycled pages grows over the free pages
  // behind it: either way, in place -- unless an active block sits right
  // behind those pages (a medium block that an earlier test left in this
  // thread's cache did): start from a trim, which hands cached blocks back.
  ductile_trim();
  void* p = ductile_mallocx(4 * kMiB, 0);
  ASSERT_NE(p, nullptr);
  fill(p, 4 * kMiB, 2);
  auto in_place = [] {
    const huge::HugeStats s = core::rt().huge.stats();
    return s.growth[static_cast<size_t>(huge::GrowthPath::kHeadroom)] +
           s.growth[static_cast<size_t>(huge::GrowthPath::kNeighbour)];
  };
  const uint64_t before = in_place();
  size_t got = ductile_xallocx(p, 8 * kMiB, 0, MALLOCX_ZERO);
  EXPECT_EQ(got, 8 * kMiB);
  EXPECT_EQ(ductile_sallocx(p, 0), got);
  EXPECT_EQ(in_place(), before + 1);
  EXPECT_TRUE(check(p, 4 * kMiB, 2));
  EXPECT_TRUE(all_zero(p, 4 * kMiB, 8 * kMiB));
  // Size + extra: the extra as far as the block can go, never less than size.
  got = ductile_xallocx(p, 9 * kMiB, 1000 * kMiB, MALLOCX_ZERO);
  EXPECT_GE(got, 8 * kMiB);
  EXPECT_EQ(ductile_sallocx(p, 0), got);
  EXPECT_TRUE(got == 8 * kMiB || all_zero(p, 8 * kMiB, got));
  // And shrink back, in place.
  got = ductile_xallocx(p, 5 * kMiB, 0, 0);
  EXPECT_EQ(got, 5 * kMiB);
  EXPECT_TRUE(check(p, 4 * kMiB, 2));
  ductile_dallocx(p, 0);
}

// ---- dallocx / sdallocx ------------------------------------------------

TEST(Sdallocx, EverySizeBetweenTheRequestAndTheUsableSize) {
  for (size_t size : edge_sizes()) {
    size_t usable = ductile_nallocx(size, 0);
    ASSERT_GE(usable, size);
    // Every size for small gaps; for big ones, both ends and a stride between.
    size_t step = usable - size <= 4096 ? 1 : (usable - size) / 64 + 1;
    for (size_t s = size;; s += step) {
      if (s > usable) s = usable;
      void* p = ductile_mallocx(size, 0);
      ASSERT_NE(p, nullptr);
      static_cast<volatile char*>(p)[size - 1] = 1;
      ductile_sdallocx(p, s, 0);
      if (s == usable) break;
    }
  }
  // The blocks went back where they belong: what is handed out next is whole.
  std::vector<void*> v;
  for (size_t size : edge_sizes()) {
    void* p = ductile_mallocx(size, 0);
    fill(p, size < 4096 ? size : 4096, 1);
    v.push_back(p);
  }
  for (size_t i = 0; i < v.size(); i++) {
    size_t size = edge_sizes()[i];
    EXPECT_TRUE(check(v[i], size < 4096 ? size : 4096, 1)) << size;
    ductile_sdallocx(v[i], size, 0);
  }
}

TEST(Sdallocx, AlignedBlocksWithTheirFlags) {
  for (size_t align : {32ul, 4096ul, kMiB, 4 * kMiB}) {
    for (size_t size : {1ul, 700ul, 70000ul}) {
      int flags = MALLOCX_ALIGN(align);
      void* p = ductile_mallocx(size, flags);
      ASSERT_NE(p, nullptr);
      ductile_sdallocx(p, size, flags);
    }
  }
}

TEST(Sdallocx, AWrongSizeDoesNotCorrupt) {
  if (kHardened) GTEST_SKIP() << "a hardened build ends the program instead (hardening_test)";
  // Lie about the size in every direction; then churn and check that no block
  // was handed out twice.
  for (size_t size : {16ul, 100ul, 5000ul, 200000ul, 3 * kMiB}) {
    for (size_t lie : {size_t{0}, size_t{1}, size / 2, size * 2, size * 1000, SIZE_MAX}) {
      void* p = ductile_mallocx(size, 0);
      ductile_sdallocx(p, lie, 0);
    }
  }
  std::vector<void*> live;
  for (int i = 0; i < 2000; i++) {
    size_t size = 16 + static_cast<size_t>(i) * 97 % 100000;
    void* p = ductile_mallocx(size, 0);
    ASSERT_NE(p, nullptr);
    fill(p, 16, static_cast<unsigned>(i));
    live.push_back(p);
  }
  for (size_t i = 0; i < live.size(); i++) {
    EXPECT_TRUE(check(live[i], 16, static_cast<unsigned>(i))) << i;
    ductile_sdallocx(live[i], 16 + i * 97 % 100000, 0);
  }
}

// MALLOCX_TCACHE_NONE: neither taken from nor given to the thread cache.
TEST(Mallocx, TcacheNoneBypassesTheThreadCache) {
  for (size_t size : {16ul, 100ul, 4096ul, 40000ul}) {
    // Give the thread's cache bin of this class something to hand out.
    std::vector<void*> v;
    for (int i = 0; i < 8; i++) v.push_back(ductile_malloc(size));
    for (void* b : v) ductile_free(b);
    small::ThreadCache* tc = core::own_cache();
    ASSERT_NE(tc, nullptr);
    const size_t cls = small::class_of(size);
    const uint32_t count = tc->bins[cls].count();
    ASSERT_GT(count, 0u) << size;
    void* p = ductile_mallocx(size, MALLOCX_TCACHE_NONE);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(tc->bins[cls].count(), count) << size;
    for (uint32_t i = 0; i < tc->bins[cls].count(); i++) EXPECT_NE(tc->bins[cls].items[i], p);
    void* q = ductile_rallocx(p, size + 1, MALLOCX_TCACHE_NONE);
    ASSERT_NE(q, nullptr);
    EXPECT_EQ(tc->bins[cls].count(), count) << size;
    ductile_dallocx(q, MALLOCX_TCACHE_NONE);
    EXPECT_EQ(tc->bins[cls].count(), count) << size;
    const size_t cls2 = small::class_of(size + 1);
    for (uint32_t i = 0; i < tc->bins[cls2].count(); i++) EXPECT_NE(tc->bins[cls2].items[i], q);
    void* r = ductile_mallocx(size, MALLOCX_TCACHE_NONE);
    ductile_sdallocx(r, size, MALLOCX_TCACHE_NONE);
    EXPECT_EQ(tc->bins[cls].count(), count) << size;
  }
}

}  // namespace
}  // namespace ductile
