// SPDX-License-Identifier: BSD-2-Clause
// The API layer through its C entry points: jemalloc's extended API
// (mallocx ... nallocx), mallctl and its MIB forms, malloc_stats_print, and
// the malloc family's edge cases that the issue names. This program links the
// library's objects statically, so ductile is the allocator of the whole
// test process, and the internals are at hand to check answers against.
#include <dlfcn.h>
#include <errno.h>
#include <malloc.h>
#include <sys/types.h>

#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <cstdint>
#include <cstring>
#include <new>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "core/options.h"
#include "core/runtime.h"
#include "core/stats.h"
#include "ductile/ductile.h"
#include "integration/json_check.h"
#include "small/size_classes.h"
#include "support/maps.h"
#include "support/patterns.h"

// glibc's own allocator, the reference for "matches glibc". ductile defines
// its __libc_ names too, so they are looked up past this program, in the C
// library.
template <typename F>
F from_libc(const char* name) {
  return reinterpret_cast<F>(dlsym(RTLD_NEXT, name));
}
// glibc's functions themselves, for the tests that compare with them.
void* (*const glibc_malloc)(size_t) = from_libc<void* (*)(size_t)>("__libc_malloc");
void* (*const glibc_calloc)(size_t, size_t) = from_libc<void* (*)(size_t, size_t)>("__libc_calloc");
void* (*const glibc_realloc)(void*, size_t) = from_libc<void* (*)(void*, size_t)>("__libc_realloc");
void (*const glibc_free)(void*) = from_libc<void (*)(void*)>("__libc_free");
void* (*const glibc_memalign)(size_t, size_t) = from_libc<void* (*)(size_t, size_t)>("__libc_memalign");
void* (*const glibc_valloc)(size_t) = from_libc<void* (*)(size_t)>("__libc_valloc");
void* (*const glibc_pvalloc)(size_t) = from_libc<void* (*)(size_t)>("__libc_pvalloc");

namespace ductile {
namespace {

using test::all_zero;
using test::check;
using test::fill;

constexpr size_t kMaxSize = static_cast<size_t>(PTRDIFF_MAX);
constexpr size_t kMiB = size_t{1} << 20;

size_t threshold() { return core::rt().huge.options().threshold; }

// Hides a constant from the compiler's allocation-size warnings.
size_t opaque(size_t v) {
  volatile size_t x = v;
  return x;
}


// Sizes around every range's edges: small, medium, huge.
std::vector<size_t> edge_sizes() {
  std::vector<size_t> v = {1,    7,    8,     9,      16,     17,     100,    1024,          1025,
                           4096, 4097, 16384, 16385,  20000,  65536,  100000, 1048576 + 1};
  size_t t = threshold();
  for (size_t s : {t - kPage - 1, t - 1, t, t + 1, 3 * kMiB + 5, 9 * kMiB}) v.push_back(s);
  return v;
}

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
  EXPECT_EQ(ductile_xallocx(p, 17, 0, 0), 16u);
  EXPECT_EQ(ductile_xallocx(p, 8, 0, 0), 16u);
  EXPECT_EQ(ductile_xallocx(p, 16, 100, 0), 16u);
  ductile_dallocx(p, 0);
}

TEST(Xallocx, MediumShrinksInPlace) {
  void* p = ductile_mallocx(1 * kMiB, 0);
  fill(p, 100000, 3);
  size_t got = ductile_xallocx(p, 100000, 0, 0);
  EXPECT_EQ(got, small::class_size(small::class_of(100000)));
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

// ---- the malloc family's edge cases the issue names --------------------

TEST(MallocFamily, FreeNullAndDallocxOfForeignPointers) {
  ductile_free(nullptr);
  free(nullptr);
  int on_stack = 3;
  // Freeing what ductile never returned ends the program with glibc's words.
  EXPECT_DEATH(ductile_dallocx(&on_stack, 0), "^ductile: free\\(\\): invalid pointer 0x[0-9a-f]+\n");
  EXPECT_DEATH(ductile_sdallocx(&on_stack, sizeof on_stack, 0), "free\\(\\): invalid pointer");
  EXPECT_EQ(on_stack, 3);
  EXPECT_EQ(ductile_xallocx(&on_stack, 100, 0, 0), 0u);
}

TEST(MallocFamily, ReallocToZeroMatchesGlibc) {
  // glibc: realloc(p, 0) frees p and returns NULL without touching errno;
  // realloc(NULL, 0) is malloc(0): a unique, freeable pointer.
  auto libc_malloc = glibc_malloc;
  auto libc_realloc = glibc_realloc;
  auto libc_free = glibc_free;
  ASSERT_TRUE(libc_malloc && libc_realloc && libc_free);
  ASSERT_NE(reinterpret_cast<void*>(libc_malloc), reinterpret_cast<void*>(&ductile_malloc));
  void* g = libc_malloc(10);
  errno = 1234;
  void* gr = libc_realloc(g, 0);
  int g_errno = errno;
  void* gn = libc_realloc(nullptr, 0);
  EXPECT_NE(gn, nullptr);
  libc_free(gn);

  void* p = malloc(10);
  errno = 1234;
  void* pr = realloc(p, 0);
  EXPECT_EQ(pr == nullptr, gr == nullptr);
  EXPECT_EQ(errno, g_errno);
  void* pn = realloc(nullptr, 0);
  EXPECT_NE(pn, nullptr);
  EXPECT_GT(ductile_malloc_usable_size(pn), 0u);
  free(pn);
  if (pr) free(pr);
}

TEST(MallocFamily, OverflowingAndMisalignedRequests) {
  errno = 0;
  EXPECT_EQ(calloc(opaque(SIZE_MAX / 2), 3), nullptr);
  EXPECT_EQ(errno, ENOMEM);
  errno = 0;
  EXPECT_EQ(malloc(opaque(SIZE_MAX)), nullptr);
  EXPECT_EQ(errno, ENOMEM);
  void* q = nullptr;
  EXPECT_EQ(posix_memalign(&q, 24, 64), EINVAL);
  EXPECT_EQ(posix_memalign(&q, 0, 64), EINVAL);
  errno = 0;
  EXPECT_EQ(aligned_alloc(3, 64), nullptr);
  EXPECT_EQ(errno, EINVAL);
  // An alignment larger than the size.
  void* a = aligned_alloc(kMiB, 1);
  ASSERT_NE(a, nullptr);
  EXPECT_TRUE(is_aligned(addr(a), kMiB));
  free(a);
}

// The bytes of every mapping the process has: its address space.
size_t mapped_bytes() {
  std::FILE* f = std::fopen("/proc/self/maps", "r");
  if (f == nullptr) return 0;
  size_t n = 0;
  unsigned long a = 0, b = 0;
  char line[512];
  while (std::fgets(line, sizeof line, f) != nullptr)
    if (std::sscanf(line, "%lx-%lx", &a, &b) == 2) n += b - a;
  std::fclose(f);
  return n;
}

// A block aligned past the huge page holds the address space of its size,
// not of its alignment: aligned_alloc(2^40, 1) used to reserve 1 TiB and
// keep it, and a few calls near 2^46 would have used up the address space.
// Every entry point that takes an alignment, and rallocx to one.
TEST(MallocFamily, AHugeAlignmentHoldsNoAddressSpaceForItself) {
  constexpr size_t kTiB = size_t{1} << 40;
  constexpr size_t kBound = size_t{4} << 30;  // a reservation (1 GiB) and change
  const size_t before = mapped_bytes();
  ASSERT_GT(before, 0u);
  auto expect_bounded = [&](void* p, const char* what) {
    ASSERT_NE(p, nullptr) << what;
    EXPECT_TRUE(is_aligned(addr(p), kTiB)) << what;
    EXPECT_LT(mapped_bytes() - before, kBound) << what;
    fill(p, 100, 4);
    EXPECT_TRUE(check(p, 100, 4)) << what;
  };
  void* p = aligned_alloc(opaque(kTiB), 1);
  expect_bounded(p, "aligned_alloc");
  free(p);
  p = memalign(opaque(kTiB), 100);
  expect_bounded(p, "memalign");
  free(p);
  p = nullptr;
  ASSERT_EQ(posix_memalign(&p, kTiB, 100), 0);
  expect_bounded(p, "posix_memalign");
  free(p);
  p = ductile_mallocx(100, MALLOCX_ALIGN(kTiB));
  expect_bounded(p, "mallocx");
  void* q = ductile_rallocx(p, 5000, MALLOCX_ALIGN(kTiB));
  expect_bounded(q, "rallocx");
  ductile_dallocx(q, 0);
  void* m = malloc(100);
  fill(m, 100, 4);
  q = ductile_rallocx(m, 100, MALLOCX_ALIGN(kTiB));
  expect_bounded(q, "rallocx of a small block");
  ductile_dallocx(q, 0);
  EXPECT_LT(mapped_bytes() - before, kBound);
}

// An alignment that no address of the process can have fails as glibc's
// impossible requests do: ENOMEM, the old block intact.
TEST(MallocFamily, AnImpossibleAlignmentFailsWithEnomem) {
  for (size_t align : {size_t{1} << 62, size_t{1} << 63}) {
    errno = 0;
    EXPECT_EQ(aligned_alloc(opaque(align), 1), nullptr) << align;
    EXPECT_EQ(errno, ENOMEM) << align;
    errno = 0;
    EXPECT_EQ(memalign(opaque(align), 1), nullptr) << align;
    EXPECT_EQ(errno, ENOMEM) << align;
    void* q = &errno;
    errno = 0;
    EXPECT_EQ(posix_memalign(&q, align, 1), ENOMEM) << align;
    EXPECT_EQ(q, &errno) << align;  // untouched
    EXPECT_EQ(errno, ENOMEM) << align;  // and in errno too, as glibc's
    errno = 0;
    EXPECT_EQ(ductile_mallocx(1, MALLOCX_ALIGN(align)), nullptr) << align;
    EXPECT_EQ(errno, ENOMEM) << align;
    void* p = ductile_mallocx(3 * kMiB, 0);
    ASSERT_NE(p, nullptr);
    fill(p, 3 * kMiB, 6);
    EXPECT_EQ(ductile_rallocx(p, 4 * kMiB, MALLOCX_ALIGN(align)), nullptr) << align;
    EXPECT_TRUE(check(p, 3 * kMiB, 6));
    ductile_dallocx(p, 0);
  }
}

// ---- the ABI's alignment ------------------------------------------------

// The x86-64 ABI gives malloc'd memory alignof(max_align_t) = 16 bytes, and
// GCC may store to it with aligned 16-byte SSE moves: every block of 16
// bytes or more must be 16-aligned; only a smaller one may be 8-aligned.
// Every peer (glibc, jemalloc, mimalloc, tcmalloc) returns 16 from 16 bytes on.
constexpr size_t kAbiAlign = alignof(max_align_t);
static_assert(kAbiAlign == 16, "the x86-64 ABI");

// "" when p is a block of at least size bytes aligned as the ABI asks, else
// what is wrong with it.
std::string abi_violation(const char* what, const void* p, size_t size) {
  const size_t want = size >= kAbiAlign ? kAbiAlign : 8;
  std::string why;
  if (p == nullptr) why = "null";
  else if (!is_aligned(addr(p), want)) why = "aligned to " + std::to_string(addr(p) & (~addr(p) + 1)) + " only";
  else if (ductile_malloc_usable_size(const_cast<void*>(p)) < size) why = "usable size too small";
  return why.empty() ? why : std::string(what) + "(" + std::to_string(size) + "): " + why;
}

TEST(AbiAlignment, EverySizeToOneMiBThroughEveryEntryPoint) {
  // Every size through malloc, mallocx and realloc (grown one byte at a
  // time); every size to 16 KiB, then every 509th, through the ones that
  // write the block (calloc, operator new).
  size_t failures = 0;
  auto expect = [&](const char* what, const void* p, size_t size) {
    std::string why = abi_violation(what, p, size);
    if (!why.empty() && ++failures <= 20) ADD_FAILURE() << why;
  };
  void* grown = nullptr;
  for (size_t size = 1; size <= kMiB + 64; size++) {
    void* p = malloc(opaque(size));
    expect("malloc", p, size);
    free(p);
    p = mallocx(size, 0);
    expect("mallocx", p, size);
    dallocx(p, 0);
    grown = realloc(grown, size);
    expect("realloc", grown, size);
    if (size <= 16384 || size % 509 == 0) {
      p = calloc(1, opaque(size));
      expect("calloc", p, size);
      free(p);
      p = calloc(opaque(size), 1);
      expect("calloc(n, 1)", p, size);
      free(p);
      p = ::operator new(size);
      expect("operator new", p, size);
      ::operator delete(p);
      p = ::operator new[](size, std::nothrow);
      expect("operator new[] nothrow", p, size);
      ::operator delete[](p);
      p = mallocx(size, MALLOCX_ZERO);
      expect("mallocx zero", p, size);
      dallocx(p, 0);
    }
  }
  // And shrunk one byte at a time (a block may stay in place).
  for (size_t size = 4096; size >= 1; size--) {
    grown = realloc(grown, size);
    expect("realloc shrinking", grown, size);
  }
  free(grown);
  EXPECT_EQ(failures, 0u);
}

TEST(AbiAlignment, SmallAlignmentsGiveAtLeastTheAbiAlignment) {
  // An alignment below 16 asks for less than malloc gives, never for less
  // than the ABI.
  size_t failures = 0;
  auto expect = [&](const char* what, const void* p, size_t size) {
    std::string why = abi_violation(what, p, size);
    if (!why.empty() && ++failures <= 20) ADD_FAILURE() << why;
  };
  for (size_t size = 1; size <= 8192; size++) {
    for (size_t align : {1, 2, 4, 8}) {
      void* p = memalign(align, opaque(size));
      expect("memalign", p, size);
      free(p);
      p = aligned_alloc(align, opaque(size));
      expect("aligned_alloc", p, size);
      free(p);
      p = mallocx(size, MALLOCX_ALIGN(align));
      expect("mallocx align", p, size);
      dallocx(p, 0);
    }
    void* q = nullptr;
    ASSERT_EQ(posix_memalign(&q, 8, opaque(size)), 0);
    expect("posix_memalign", q, size);
    free(q);
  }
  EXPECT_EQ(failures, 0u);
}

TEST(AbiAlignment, EveryClassOfSixteenBytesOrMoreIsAMultipleOfSixteen) {
  EXPECT_EQ(small::class_size(0), 8u);  // sizes 1..8: 8 bytes, 8-aligned
  for (size_t c = 1; c < small::kNumClasses; c++)
    EXPECT_EQ(small::class_size(c) % kAbiAlign, 0u) << small::class_size(c);
}

// What glibc's own tests check of every allocator: a request that cannot be
// met fails with NULL and ENOMEM, never crashes or wraps round.
TEST(MallocFamily, TooLargeRequestsFailWithEnomemAsInGlibc) {
  const size_t huge_sizes[] = {SIZE_MAX,      SIZE_MAX - 1,  SIZE_MAX - 15,     SIZE_MAX - kPage,
                               kMaxSize + 1,  kMaxSize,      kMaxSize - kPage,  SIZE_MAX / 2 + 17};
  void* live = malloc(10);
  for (size_t size : huge_sizes) {
    auto expect_enomem = [&](const char* what, void* p, void* glibc) {
      int e = errno;
      EXPECT_EQ(p, nullptr) << what << "(" << size << ")";
      EXPECT_EQ(glibc, nullptr) << what << "(" << size << ") under glibc";
      EXPECT_EQ(e, ENOMEM) << what << "(" << size << ")";
    };
    void* g;
    errno = 0;
    g = glibc_malloc(opaque(size));
    errno = 0;
    expect_enomem("malloc", malloc(opaque(size)), g);
    g = glibc_calloc(1, opaque(size));
    errno = 0;
    expect_enomem("calloc(1, n)", calloc(1, opaque(size)), g);
    g = glibc_calloc(opaque(size), 1);
    errno = 0;
    expect_enomem("calloc(n, 1)", calloc(opaque(size), 1), g);
    void* gl = glibc_malloc(10);
    g = glibc_realloc(gl, opaque(size));
    glibc_free(gl);
    errno = 0;
    expect_enomem("realloc", realloc(live, opaque(size)), g);
    for (size_t align : {size_t{16}, kPage, size_t{1} << 21}) {
      g = glibc_memalign(align, opaque(size));
      errno = 0;
      expect_enomem("memalign", memalign(align, opaque(size)), g);
      errno = 0;
      expect_enomem("aligned_alloc", aligned_alloc(align, opaque(size)), nullptr);
      // posix_memalign reports through its result, and sets errno to
      // ENOMEM as glibc does (its allocation fails as malloc's does:
      // programs read errno after it); *memptr is left alone.
      void* out = &live;
      errno = 1234;
      EXPECT_EQ(posix_memalign(&out, align, opaque(size)), ENOMEM) << size;
      EXPECT_EQ(errno, ENOMEM) << size;
      EXPECT_EQ(out, &live) << size;
    }
    g = glibc_valloc(opaque(size));
    errno = 0;
    expect_enomem("valloc", valloc(opaque(size)), g);
    g = glibc_pvalloc(opaque(size));
    errno = 0;
    expect_enomem("pvalloc", pvalloc(opaque(size)), g);
    errno = 0;
    expect_enomem("mallocx", mallocx(size, 0), nullptr);
    errno = 0;
    expect_enomem("mallocx zero", mallocx(size, MALLOCX_ZERO), nullptr);
    errno = 0;
    expect_enomem("mallocx aligned", mallocx(size, MALLOCX_LG_ALIGN(12)), nullptr);
    errno = 0;
    expect_enomem("rallocx", rallocx(live, size, 0), nullptr);
    errno = 0;
    expect_enomem("reallocarray", reallocarray(live, opaque(size), 1), nullptr);
  }
  // The block survived every failed resize.
  EXPECT_GE(malloc_usable_size(live), 10u);
  free(live);
}

// Alignments too large to meet, as glibc answers them (2.36; the same
// calls without ductile): memalign and aligned_alloc fail with EINVAL only
// above 2^63 (SIZE_MAX / 2 + 1) and otherwise round the alignment up to a
// power of two and fail with ENOMEM; posix_memalign returns EINVAL for
// anything but a power of two, leaving errno alone, and ENOMEM for one it
// cannot meet, setting errno to ENOMEM too. (Alignments from 2^48, past any user address, so that none
// can be met; aligned_alloc of a non-power of two at or below 2^63 is
// EINVAL, as glibc 2.38 made it, where 2.36 rounded it up as memalign does.)
TEST(MallocFamily, HugeAlignmentsFailAsInGlibc) {
  const size_t p62 = size_t{1} << 62, p63 = size_t{1} << 63;
  const size_t aligns[] = {size_t{1} << 48, size_t{1} << 61, p62 - 1, p62, p62 + 1,
                           p63 - 1,         p63,             p63 + 1, SIZE_MAX - 1, SIZE_MAX};
  for (size_t align : aligns) {
    for (size_t size : {size_t{1}, size_t{4096}, size_t{3} << 20}) {
      errno = 0;
      void* g = glibc_memalign(align, size);
      const int g_errno = errno;
      ASSERT_EQ(g, nullptr);
      errno = 0;
      EXPECT_EQ(memalign(align, size), nullptr) << align;
      EXPECT_EQ(errno, g_errno) << "memalign(" << align << ", " << size << ")";
      EXPECT_EQ(g_errno, align > p63 ? EINVAL : ENOMEM) << align;
      errno = 0;
      EXPECT_EQ(aligned_alloc(align, size), nullptr) << align;
      EXPECT_EQ(errno, is_pow2(align) ? ENOMEM : EINVAL) << "aligned_alloc(" << align << ", " << size << ")";
      void* out = &g;
      errno = 1234;
      EXPECT_EQ(posix_memalign(&out, align, size), is_pow2(align) ? ENOMEM : EINVAL) << align;
      EXPECT_EQ(errno, is_pow2(align) ? ENOMEM : 1234) << "posix_memalign(" << align << ", " << size << ")";
      EXPECT_EQ(out, &g);
    }
  }
}

// ---- mallctl -----------------------------------------------------------

template <typename T>
T read_ctl(const char* name) {
  T v{};
  size_t len = sizeof v;
  EXPECT_EQ(ductile_mallctl(name, &v, &len, nullptr, 0), 0) << name;
  EXPECT_EQ(len, sizeof v) << name;
  return v;
}

// The version the library reports is configure.ac's (AC_INIT, PACKAGE_VERSION
// in config.h), through ductile_version() and mallctl("version") alike.
TEST(Mallctl, VersionIsConfigures) {
  EXPECT_STREQ(ductile_version(), PACKAGE_VERSION);
  EXPECT_STREQ(read_ctl<const char*>("version"), PACKAGE_VERSION);
}

TEST(Mallctl, VersionAndEpoch) {
  EXPECT_STREQ(read_ctl<const char*>("version"), ductile_version());
  uint64_t e0 = read_ctl<uint64_t>("epoch");
  uint64_t e1 = 0;
  size_t len = sizeof e1;
  ASSERT_EQ(ductile_mallctl("epoch", &e1, &len, &e0, sizeof e0), 0);
  EXPECT_EQ(e1, e0 + 1);
  EXPECT_EQ(ductile_mallctl("epoch", nullptr, nullptr, &e0, 4), EINVAL);
}

TEST(Mallctl, StatsAreOrderedAndFollowAllocations) {
  size_t allocated = read_ctl<size_t>("stats.allocated");
  size_t active = read_ctl<size_t>("stats.active");
  EXPECT_LE(allocated, active);
  EXPECT_LE(active, read_ctl<size_t>("stats.resident"));
  EXPECT_LE(active, read_ctl<size_t>("stats.mapped"));
  EXPECT_GT(read_ctl<size_t>("stats.metadata"), 0u);
  (void)read_ctl<size_t>("stats.retained");

  void* p = ductile_malloc(32 * kMiB);
  size_t grown = read_ctl<size_t>("stats.allocated");
  EXPECT_GE(grown, allocated + 32 * kMiB);
  EXPECT_GE(read_ctl<size_t>("ductile.huge.allocated"), 32 * kMiB);
  ductile_free(p);
  EXPECT_LE(read_ctl<size_t>("stats.allocated"), grown - 32 * kMiB);
}

// The mapping budget's figures (os/map_budget.h): the kernel's limit as
// read at start-up, the threshold past which ductile stops splitting
// mappings, and the last count of the process's mappings.
TEST(Mallctl, MapsReportTheMappingBudget) {
  size_t limit = os::kDefaultMaxMapCount;
  if (FILE* f = std::fopen("/proc/sys/vm/max_map_count", "r")) {
    unsigned long v = 0;
    if (std::fscanf(f, "%lu", &v) == 1 && v != 0) limit = v;
    std::fclose(f);
  }
  EXPECT_EQ(read_ctl<size_t>("ductile.maps.limit"), limit);
  EXPECT_EQ(read_ctl<size_t>("ductile.maps.threshold"), limit / 2);
  EXPECT_FALSE(read_ctl<bool>("ductile.maps.tight"));
  const os::MapBudget& b = core::rt().os.map_budget();
  EXPECT_EQ(read_ctl<uint64_t>("ductile.maps.counts"), b.counts());
  EXPECT_EQ(read_ctl<size_t>("ductile.maps.count"), b.last_count());
  EXPECT_LE(read_ctl<size_t>("ductile.maps.count"), limit);
  EXPECT_EQ(read_ctl<uint64_t>("ductile.maps.splits_avoided"),
            core::rt().os.counters().splits_avoided.load(std::memory_order_relaxed));
  // Read-only.
  size_t v = 1;
  EXPECT_EQ(ductile_mallctl("ductile.maps.limit", nullptr, nullptr, &v, sizeof v), EPERM);
}

TEST(Mallctl, StatsMatchTheSnapshot) {
  core::StatsSnapshot s;
  core::take_snapshot(s);
  EXPECT_EQ(read_ctl<size_t>("ductile.chunk.reserved"), s.chunk.reserved);
  EXPECT_EQ(read_ctl<uint64_t>("ductile.os.mmap"), core::rt().os.counters().get(os::Call::kMmap));
  EXPECT_EQ(s.allocated, s.small.allocated + s.medium.allocated + s.huge.allocated);
  EXPECT_EQ(s.active, s.small.active + s.medium.active + s.huge.active);
  // Slab regions: the dense ones are counted among the advised ones.
  EXPECT_EQ(read_ctl<size_t>("ductile.small.regions"), s.arena.regions);
  EXPECT_EQ(read_ctl<size_t>("ductile.small.advised_regions"), s.arena.advised);
  EXPECT_EQ(read_ctl<size_t>("ductile.small.dense_regions"), s.arena.dense);
  EXPECT_LE(s.arena.dense, s.arena.advised);
}

TEST(Mallctl, ThreadCounters) {
  if (!kStats) GTEST_SKIP() << "--disable-stats";
  for (size_t size : {100ul, 50000ul, 6 * kMiB}) {
    uint64_t a0 = read_ctl<uint64_t>("thread.allocated");
    uint64_t d0 = read_ctl<uint64_t>("thread.deallocated");
    void* p = ductile_malloc(size);
    uint64_t a1 = read_ctl<uint64_t>("thread.allocated");
    EXPECT_GE(a1 - a0, size) << size;
    ductile_free(p);
    EXPECT_GE(read_ctl<uint64_t>("thread.deallocated") - d0, size) << size;
  }
  uint64_t* ap = read_ctl<uint64_t*>("thread.allocatedp");
  uint64_t* dp = read_ctl<uint64_t*>("thread.deallocatedp");
  ASSERT_NE(ap, nullptr);
  ASSERT_NE(dp, nullptr);
  uint64_t before = *ap;
  void* p = ductile_malloc(1000);
  EXPECT_GE(*ap - before, 1000u);
  EXPECT_EQ(*ap, read_ctl<uint64_t>("thread.allocated"));
  ductile_free(p);
  EXPECT_EQ(*dp, read_ctl<uint64_t>("thread.deallocated"));
}

TEST(Mallctl, ThreadCounterPointersStartAtTheCounters) {
  // A new thread's first read of *thread.allocatedp is thread.allocated:
  // asking for the pointer allocates nothing that would be counted.
  if (!kStats) GTEST_SKIP() << "--disable-stats";
  std::thread([] {
    uint64_t a0 = read_ctl<uint64_t>("thread.allocated");
    uint64_t d0 = read_ctl<uint64_t>("thread.deallocated");
    uint64_t* ap = read_ctl<uint64_t*>("thread.allocatedp");
    uint64_t* dp = read_ctl<uint64_t*>("thread.deallocatedp");
    ASSERT_NE(ap, nullptr);
    ASSERT_NE(dp, nullptr);
    EXPECT_EQ(*ap, a0);
    EXPECT_EQ(*dp, d0);
    EXPECT_EQ(*ap, read_ctl<uint64_t>("thread.allocated"));
    EXPECT_EQ(*dp, read_ctl<uint64_t>("thread.deallocated"));
    void* p = ductile_malloc(1000);
    EXPECT_GE(*ap - a0, 1000u);
    EXPECT_EQ(*ap, read_ctl<uint64_t>("thread.allocated"));
    ductile_free(p);
    EXPECT_GE(*dp - d0, 1000u);
    EXPECT_EQ(*dp, read_ctl<uint64_t>("thread.deallocated"));
  }).join();
}

TEST(Mallctl, ReadRulesFollowJemalloc) {
  size_t v = 0;
  // Too short: as much as fits, the length says how much, EINVAL.
  size_t len = 4;
  EXPECT_EQ(ductile_mallctl("arenas.page", &v, &len, nullptr, 0), EINVAL);
  EXPECT_EQ(len, 4u);
  EXPECT_EQ(v, kPage);  // the low 4 bytes, little-endian
  len = 16;
  char big[16] = {};
  EXPECT_EQ(ductile_mallctl("arenas.page", big, &len, nullptr, 0), EINVAL);
  EXPECT_EQ(len, sizeof(size_t));
  // No buffer: nothing read, nothing reported.
  len = 5;
  EXPECT_EQ(ductile_mallctl("arenas.page", nullptr, &len, nullptr, 0), 0);
  EXPECT_EQ(len, 5u);
  EXPECT_EQ(ductile_mallctl("arenas.page", &v, nullptr, nullptr, 0), 0);
}

TEST(Mallctl, WriteRulesFollowJemalloc) {
  size_t v = 1;
  EXPECT_EQ(ductile_mallctl("stats.allocated", nullptr, nullptr, &v, sizeof v), EPERM);
  EXPECT_EQ(ductile_mallctl("version", nullptr, nullptr, &v, sizeof v), EPERM);
  EXPECT_EQ(ductile_mallctl("stats.allocated", nullptr, nullptr, nullptr, 8), EPERM);
  bool b = false;
  EXPECT_EQ(ductile_mallctl("opt.tcache", nullptr, nullptr, &b, sizeof b), EPERM);
  EXPECT_EQ(ductile_mallctl("opt.huge_threshold", nullptr, nullptr, &v, sizeof v), EPERM);
  // A void value: neither read nor written.
  size_t len = sizeof v;
  EXPECT_EQ(ductile_mallctl("arena.0.purge", &v, &len, nullptr, 0), EPERM);
  EXPECT_EQ(ductile_mallctl("arena.0.purge", nullptr, nullptr, &v, sizeof v), EPERM);
}

TEST(Mallctl, UnknownNamesAreEnoent) {
  size_t v;
  for (const char* name :
       {"", "nope", "stats", "stats.", ".stats.allocated", "stats.allocated.more", "stats..allocated",
        "version.x", "arena", "arena.0", "arena.4095.purge", "arena.x.purge", "arena.-1.purge",
        "arena.99999999999999999999999999.purge", "arena.0.nope", "opt.nope", "ductile.os.nope",
        "ductile.huge.growth.teleport", "a.b.c.d.e.f.g.h.i.j.k"}) {
    size_t len = sizeof v;
    EXPECT_EQ(ductile_mallctl(name, &v, &len, nullptr, 0), ENOENT) << '"' << name << '"';
  }
  EXPECT_EQ(ductile_mallctl(nullptr, nullptr, nullptr, nullptr, 0), EINVAL);
}

TEST(Mallctl, PurgeAndDecayGiveBackWhatIsRetained) {
  std::vector<void*> v;
  for (int i = 0; i < 64; i++) v.push_back(ductile_malloc(100000 + i * 4096));
  for (void* p : v) ductile_free(p);
  void* h = ductile_malloc(20 * kMiB);
  ductile_free(h);
  EXPECT_EQ(ductile_mallctl("arena.0.purge", nullptr, nullptr, nullptr, 0), 0);
  EXPECT_EQ(read_ctl<size_t>("ductile.chunk.dirty"), 0u);
  EXPECT_EQ(ductile_mallctl("arena.4096.purge", nullptr, nullptr, nullptr, 0), 0);
  EXPECT_EQ(ductile_mallctl("arena.0.decay", nullptr, nullptr, nullptr, 0), 0);
  EXPECT_EQ(ductile_mallctl("arena.4096.decay", nullptr, nullptr, nullptr, 0), 0);
  EXPECT_EQ(ductile_mallctl("thread.tcache.flush", nullptr, nullptr, nullptr, 0), 0);
  (void)read_ctl<size_t>("ductile.trim");
}

TEST(Mallctl, ArenasAndConfig) {
  EXPECT_GE(read_ctl<unsigned>("arenas.narenas"), 1u);  // and one more for each arenas.create
  EXPECT_EQ(read_ctl<unsigned>("opt.narenas"), 1u);
  EXPECT_EQ(read_ctl<size_t>("arenas.page"), kPage);
  EXPECT_EQ(read_ctl<bool>("config.stats"), kStats);
  EXPECT_EQ(read_ctl<bool>("config.debug"), kDebug);
}

// Programs written for jemalloc make arenas of their own and pass
// MALLOCX_ARENA(a), often with MALLOCX_TCACHE_NONE, or make explicit thread
// caches: all of it keeps working, served by the one arena.
TEST(Mallctl, ArenasCreateGivesIndicesThatMallocxArenaTakes) {
  const unsigned n0 = read_ctl<unsigned>("arenas.narenas");
  unsigned a = read_ctl<unsigned>("arenas.create");
  EXPECT_EQ(a, n0);
  EXPECT_EQ(read_ctl<unsigned>("arenas.narenas"), a + 1);
  EXPECT_EQ(read_ctl<unsigned>("opt.narenas"), 1u);
  for (size_t size : edge_sizes()) {
    for (int flags : {MALLOCX_ARENA(a), MALLOCX_ARENA(a) | MALLOCX_TCACHE_NONE,
                      MALLOCX_ARENA(a) | MALLOCX_TCACHE_NONE | MALLOCX_ZERO | MALLOCX_LG_ALIGN(6)}) {
      void* p = ductile_mallocx(size, flags);
      ASSERT_NE(p, nullptr) << size;
      EXPECT_EQ(ductile_sallocx(p, flags), ductile_nallocx(size, flags));
      fill(p, size, 1);
      void* q = ductile_rallocx(p, size * 2, flags);
      ASSERT_NE(q, nullptr) << size;
      EXPECT_TRUE(check(q, size, 1));
      ductile_sdallocx(q, size * 2, flags);
    }
  }
  // Its purge and decay, and binding a thread to it.
  const std::string purge = "arena." + std::to_string(a) + ".purge";
  EXPECT_EQ(ductile_mallctl(purge.c_str(), nullptr, nullptr, nullptr, 0), 0);
  const std::string beyond = "arena." + std::to_string(a + 1) + ".purge";
  EXPECT_EQ(ductile_mallctl(beyond.c_str(), nullptr, nullptr, nullptr, 0), ENOENT);
  std::thread([a] {
    EXPECT_EQ(read_ctl<unsigned>("thread.arena"), 0u);
    unsigned old = 99;
    size_t len = sizeof old;
    unsigned v = a;
    EXPECT_EQ(ductile_mallctl("thread.arena", &old, &len, &v, sizeof v), 0);
    EXPECT_EQ(old, 0u);
    EXPECT_EQ(read_ctl<unsigned>("thread.arena"), a);
    v = a + 1;
    EXPECT_EQ(ductile_mallctl("thread.arena", nullptr, nullptr, &v, sizeof v), EFAULT);
    EXPECT_EQ(read_ctl<unsigned>("thread.arena"), a);
  }).join();
  // Default extent hooks (null) are taken; hooks of the program's own are not.
  void* hooks = nullptr;
  unsigned b = 0;
  size_t len = sizeof b;
  EXPECT_EQ(ductile_mallctl("arenas.create", &b, &len, &hooks, sizeof hooks), 0);
  EXPECT_EQ(b, a + 1);
  hooks = &b;
  EXPECT_EQ(ductile_mallctl("arenas.create", &b, &len, &hooks, sizeof hooks), EPERM);
  EXPECT_EQ(read_ctl<unsigned>("arenas.narenas"), a + 2);
}

TEST(Mallctl, ArenasCreateStopsAtTheLastIndexMallocxArenaHolds) {
  // In a child: the indices it takes are gone for good.
  EXPECT_EXIT(
      {
        unsigned a = 0;
        size_t len = sizeof a;
        int r;
        while ((r = ductile_mallctl("arenas.create", &a, &len, nullptr, 0)) == 0) {
        }
        unsigned n = 0;
        len = sizeof n;
        ductile_mallctl("arenas.narenas", &n, &len, nullptr, 0);
        void* p = ductile_mallocx(100, MALLOCX_ARENA(a) | MALLOCX_TCACHE_NONE);
        // MALLOCX_ARENA(a) holds a + 1 in 12 bits; 4096 is MALLCTL_ARENAS_ALL.
        _exit(r == EAGAIN && a == 4094 && n == 4095 && p != nullptr ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

TEST(Mallctl, ExplicitThreadCaches) {
  unsigned t = 0;
  size_t len = sizeof t;
  ASSERT_EQ(ductile_mallctl("tcache.create", &t, &len, nullptr, 0), 0);
  unsigned t2 = read_ctl<unsigned>("tcache.create");
  EXPECT_NE(t, t2);
  for (size_t size : edge_sizes()) {
    void* p = ductile_mallocx(size, MALLOCX_TCACHE(t));
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(ductile_sallocx(p, 0), ductile_nallocx(size, MALLOCX_TCACHE(t)));
    ductile_dallocx(p, MALLOCX_TCACHE(t));
  }
  EXPECT_EQ(ductile_mallctl("tcache.flush", nullptr, nullptr, &t, sizeof t), 0);
  EXPECT_EQ(ductile_mallctl("tcache.flush", nullptr, nullptr, nullptr, 0), EINVAL);  // no index
  EXPECT_EQ(ductile_mallctl("tcache.flush", &t, &len, &t, sizeof t), EPERM);       // write-only
  unsigned never = 5000;
  EXPECT_EQ(ductile_mallctl("tcache.flush", nullptr, nullptr, &never, sizeof never), EFAULT);
  EXPECT_EQ(ductile_mallctl("tcache.destroy", nullptr, nullptr, &t, sizeof t), 0);
  EXPECT_EQ(ductile_mallctl("tcache.destroy", nullptr, nullptr, &t2, sizeof t2), 0);
  // A destroyed index is handed out again.
  EXPECT_EQ(read_ctl<unsigned>("tcache.create"), t < t2 ? t : t2);
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
    const uint32_t count = tc->bins[cls].count;
    ASSERT_GT(count, 0u) << size;
    void* p = ductile_mallocx(size, MALLOCX_TCACHE_NONE);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(tc->bins[cls].count, count) << size;
    for (uint32_t i = 0; i < tc->bins[cls].count; i++) EXPECT_NE(tc->bins[cls].items[i], p);
    void* q = ductile_rallocx(p, size + 1, MALLOCX_TCACHE_NONE);
    ASSERT_NE(q, nullptr);
    EXPECT_EQ(tc->bins[cls].count, count) << size;
    ductile_dallocx(q, MALLOCX_TCACHE_NONE);
    EXPECT_EQ(tc->bins[cls].count, count) << size;
    const size_t cls2 = small::class_of(size + 1);
    for (uint32_t i = 0; i < tc->bins[cls2].count; i++) EXPECT_NE(tc->bins[cls2].items[i], q);
    void* r = ductile_mallocx(size, MALLOCX_TCACHE_NONE);
    ductile_sdallocx(r, size, MALLOCX_TCACHE_NONE);
    EXPECT_EQ(tc->bins[cls].count, count) << size;
  }
}

TEST(Mallctl, EveryOptionOfTheTableHasAnOptNode) {
  ASSERT_GT(core::option_count(), 0u);
  for (size_t i = 0; i < core::option_count(); i++) {
    std::string name = std::string("opt.") + core::option_name(i);
    EXPECT_EQ(ductile_mallctl(name.c_str(), nullptr, nullptr, nullptr, 0), 0) << name;
  }
  EXPECT_EQ(core::option_name(core::option_count()), nullptr);
  const core::Options& o = core::rt().opts;
  EXPECT_EQ(read_ctl<uint64_t>("opt.decay_ms"), o.decay_ms);
  EXPECT_EQ(read_ctl<size_t>("opt.huge_threshold"), o.huge_threshold);
  EXPECT_EQ(read_ctl<bool>("opt.tcache"), o.tcache);
  EXPECT_EQ(read_ctl<bool>("opt.stats_print"), o.stats_print);
  char text[32];
  ASSERT_TRUE(core::option_to_string(o, "thp", text, sizeof text));
  EXPECT_STREQ(read_ctl<const char*>("opt.thp"), text);
  EXPECT_EQ(read_ctl<ssize_t>("opt.dirty_decay_ms"), static_cast<ssize_t>(o.decay_ms));
}

// The names tools and programs written for jemalloc read, with jemalloc's
// types: each answers ductile's own figure.
TEST(Mallctl, SizeClassesAsJemallocNamesThem) {
  EXPECT_EQ(read_ctl<size_t>("arenas.quantum"), size_t{16});
  const unsigned nbins = read_ctl<unsigned>("arenas.nbins");
  EXPECT_EQ(nbins, small::kNumSmall);
  size_t prev = 0;
  for (unsigned i = 0; i < nbins; i++) {
    const std::string name = "arenas.bin." + std::to_string(i) + ".size";
    const size_t size = read_ctl<size_t>(name.c_str());
    EXPECT_GT(size, prev) << name;
    EXPECT_EQ(ductile_nallocx(size, 0), size) << name;  // a class: nallocx keeps it
    prev = size;
  }
  EXPECT_EQ(prev, small::kMaxSmall);
  const std::string past = "arenas.bin." + std::to_string(nbins) + ".size";
  size_t v, len = sizeof v;
  EXPECT_EQ(ductile_mallctl(past.c_str(), &v, &len, nullptr, 0), ENOENT);

  const unsigned nlextents = read_ctl<unsigned>("arenas.nlextents");
  ASSERT_GT(nlextents, 0u);
  for (unsigned i = 0; i < nlextents; i++) {
    const std::string name = "arenas.lextent." + std::to_string(i) + ".size";
    const size_t size = read_ctl<size_t>(name.c_str());
    EXPECT_GT(size, prev) << name;
    EXPECT_EQ(size % kPage, 0u) << name;
    EXPECT_EQ(ductile_nallocx(size, 0), size) << name;
    prev = size;
  }
  // The last class below the huge threshold; past it, blocks are huge.
  EXPECT_GE(prev, threshold() - 1);
  EXPECT_LT(prev - prev / 8, threshold());
  const std::string last = "arenas.lextent." + std::to_string(nlextents) + ".size";
  len = sizeof v;
  EXPECT_EQ(ductile_mallctl(last.c_str(), &v, &len, nullptr, 0), ENOENT);
  // What the thread cache keeps: up to the largest of them.
  EXPECT_EQ(read_ctl<size_t>("opt.tcache_max"), prev);
  size_t q = 16;
  EXPECT_EQ(ductile_mallctl("arenas.quantum", nullptr, nullptr, &q, sizeof q), EPERM);
  unsigned u;
  len = sizeof(size_t);
  EXPECT_EQ(ductile_mallctl("arenas.nbins", &u, &len, nullptr, 0), EINVAL);  // unsigned, not size_t
}

TEST(Mallctl, ArenaPagesAreTheStatsInPages) {
  std::vector<void*> blocks;
  for (int i = 0; i < 64; i++) blocks.push_back(ductile_malloc(64 * 1024));
  uint64_t epoch = 1;
  ASSERT_EQ(ductile_mallctl("epoch", nullptr, nullptr, &epoch, sizeof epoch), 0);
  const size_t active = read_ctl<size_t>("stats.active");
  const size_t pactive = read_ctl<size_t>("stats.arenas.0.pactive");
  const std::string all = "stats.arenas." + std::to_string(MALLCTL_ARENAS_ALL) + ".pactive";
  const size_t pactive_all = read_ctl<size_t>(all.c_str());
  // Read one after another: other threads of the test may move them a little.
  EXPECT_NEAR(static_cast<double>(pactive), static_cast<double>(active / kPage), 64.0);
  EXPECT_NEAR(static_cast<double>(pactive_all), static_cast<double>(pactive), 64.0);
  EXPECT_GE(pactive * kPage, size_t{64} * 64 * 1024 / 2);
  for (void* p : blocks) ductile_free(p);
  (void)read_ctl<size_t>("stats.arenas.0.pdirty");
  (void)core::trim();
  core::StatsSnapshot s;
  core::take_snapshot(s);
  EXPECT_EQ(read_ctl<size_t>("stats.arenas.0.pdirty"), s.chunk.dirty / kPage + s.arena.dirty_pages);
  size_t v, len = sizeof v;
  EXPECT_EQ(ductile_mallctl("stats.arenas.4000.pactive", &v, &len, nullptr, 0), ENOENT);  // never created
  EXPECT_EQ(ductile_mallctl("stats.arenas.0.pactive", nullptr, nullptr, &v, sizeof v), EPERM);
}

TEST(Mallctl, ThreadCacheCanBeSwitchedOffPerThread) {
  if (!core::rt().opts.tcache || (core::g_hardened && !kHardened))
    GTEST_SKIP() << "no thread caches in this configuration";
  std::thread t([] {
    void* warm = ductile_malloc(48);
    ductile_free(warm);
    EXPECT_TRUE(read_ctl<bool>("thread.tcache.enabled"));
    ASSERT_NE(core::own_cache(), nullptr);
    bool off = false, old = false;
    size_t len = sizeof old;
    ASSERT_EQ(ductile_mallctl("thread.tcache.enabled", &old, &len, &off, sizeof off), 0);
    EXPECT_TRUE(old);
    EXPECT_FALSE(read_ctl<bool>("thread.tcache.enabled"));
    EXPECT_EQ(core::own_cache(), nullptr);  // flushed and given back
    void* p = ductile_malloc(48);
    ductile_free(p);
    EXPECT_EQ(core::own_cache(), nullptr);  // and none made again
    bool on = true;
    EXPECT_EQ(ductile_mallctl("thread.tcache.enabled", nullptr, nullptr, &on, 1), 0);
    EXPECT_EQ(ductile_mallctl("thread.tcache.enabled", nullptr, nullptr, &on, 4), EINVAL);
    p = ductile_malloc(48);
    ductile_free(p);
    EXPECT_NE(core::own_cache(), nullptr);
    EXPECT_TRUE(read_ctl<bool>("thread.tcache.enabled"));
  });
  t.join();
  EXPECT_TRUE(read_ctl<bool>("thread.tcache.enabled"));  // this thread's is its own
}

TEST(Mallctl, DecayBackgroundAndProfilingNamesOfJemalloc) {
  EXPECT_EQ(read_ctl<ssize_t>("opt.muzzy_decay_ms"), 0);  // no muzzy stage
  EXPECT_EQ(read_ctl<size_t>("max_background_threads"), 1u);
  size_t one = 1, two = 2;
  EXPECT_EQ(ductile_mallctl("max_background_threads", nullptr, nullptr, &one, sizeof one), 0);
  EXPECT_EQ(ductile_mallctl("max_background_threads", nullptr, nullptr, &two, sizeof two), EINVAL);
  EXPECT_EQ(read_ctl<ssize_t>("opt.lg_prof_interval"), core::rt().opts.lg_prof_interval);
  EXPECT_EQ(read_ctl<ssize_t>("opt.lg_prof_interval"), -1);
  EXPECT_FALSE(read_ctl<bool>("opt.prof_gdump"));
  EXPECT_EQ(read_ctl<int>("opt.prof_signal"), 0);
  EXPECT_STREQ(read_ctl<const char*>("opt.stats_print_opts"), "");
  if (kProf) {
    EXPECT_EQ(read_ctl<uint64_t>("prof.interval"), 0u);  // no interval dumps here
    EXPECT_FALSE(read_ctl<bool>("prof.gdump"));
    bool on = true;
    EXPECT_EQ(ductile_mallctl("prof.gdump", nullptr, nullptr, &on, sizeof on), ENOENT);  // needs opt.prof
    uint64_t v = 1;
    EXPECT_EQ(ductile_mallctl("prof.interval", nullptr, nullptr, &v, sizeof v), EPERM);
  }
}

TEST(Mallctl, DecayTimeIsWritableThroughTheOptionParser) {
  uint64_t saved = read_ctl<uint64_t>("opt.decay_ms");
  uint64_t v = 2500, old = 0;
  size_t len = sizeof old;
  ASSERT_EQ(ductile_mallctl("opt.decay_ms", &old, &len, &v, sizeof v), 0);
  EXPECT_EQ(old, saved);
  EXPECT_EQ(read_ctl<uint64_t>("opt.decay_ms"), 2500u);
  EXPECT_EQ(core::rt().chunks.options().decay_ns, 2500u * 1000000u);
  EXPECT_EQ(read_ctl<ssize_t>("arenas.dirty_decay_ms"), 2500);
  // Values the option table refuses.
  v = UINT64_MAX;
  EXPECT_EQ(ductile_mallctl("opt.decay_ms", nullptr, nullptr, &v, sizeof v), EINVAL);
  EXPECT_EQ(ductile_mallctl("opt.decay_ms", nullptr, nullptr, &v, 4), EINVAL);
  EXPECT_EQ(read_ctl<uint64_t>("opt.decay_ms"), 2500u);
  // jemalloc's name: -1 is "never", below that is EFAULT.
  ssize_t never = -1, bad = -2, ms = 700;
  ASSERT_EQ(ductile_mallctl("arenas.dirty_decay_ms", nullptr, nullptr, &never, sizeof never), 0);
  EXPECT_EQ(read_ctl<ssize_t>("arenas.dirty_decay_ms"), -1);
  EXPECT_EQ(ductile_mallctl("arenas.dirty_decay_ms", nullptr, nullptr, &bad, sizeof bad), EFAULT);
  ASSERT_EQ(ductile_mallctl("arenas.dirty_decay_ms", nullptr, nullptr, &ms, sizeof ms), 0);
  EXPECT_EQ(read_ctl<uint64_t>("opt.decay_ms"), 700u);
  ASSERT_EQ(ductile_mallctl("opt.decay_ms", nullptr, nullptr, &saved, sizeof saved), 0);
  EXPECT_EQ(core::rt().chunks.options().decay_ns, saved * 1000000u);
}

TEST(Mallctl, GrowthAndSyscallCountersHaveTheirNames) {
  for (size_t i = 0; i < os::kCallKinds; i++) {
    std::string name = std::string("ductile.os.") + os::call_name(static_cast<os::Call>(i));
    uint64_t v = read_ctl<uint64_t>(name.c_str());
    EXPECT_EQ(v, core::rt().os.counters().get(static_cast<os::Call>(i))) << name;
  }
  (void)read_ctl<uint64_t>("ductile.os.purged_bytes");
  (void)read_ctl<uint64_t>("ductile.os.purged_ranges");
  uint64_t before = 0;
  for (size_t i = 0; i < huge::kGrowthPaths; i++)
    before += read_ctl<uint64_t>((std::string("ductile.huge.growth.") + core::growth_name(i)).c_str());
  // Doubling a huge block takes some growth path every time.
  void* p = ductile_malloc(4 * kMiB);
  for (size_t size = 8 * kMiB; size <= 128 * kMiB; size *= 2) {
    p = ductile_realloc(p, size);
    ASSERT_NE(p, nullptr);
  }
  ductile_free(p);
  uint64_t after = 0;
  huge::HugeStats hs = core::rt().huge.stats();
  for (size_t i = 0; i < huge::kGrowthPaths; i++) {
    uint64_t v = read_ctl<uint64_t>((std::string("ductile.huge.growth.") + core::growth_name(i)).c_str());
    EXPECT_EQ(v, hs.growth[i]);
    after += v;
  }
  EXPECT_GE(after - before, 5u);
  EXPECT_EQ(read_ctl<uint64_t>("ductile.huge.allocs"), hs.allocs);
}

// ---- MIBs --------------------------------------------------------------

TEST(Mib, AgreesWithNamesForEveryLeaf) {
  for (const char* name : {"version", "epoch", "stats.allocated", "stats.mapped", "thread.allocated",
                           "arenas.page", "opt.decay_ms", "ductile.os.mmap", "ductile.huge.growth.copy",
                           "ductile.chunk.reserved"}) {
    size_t mib[8];
    size_t miblen = 8;
    ASSERT_EQ(ductile_mallctlnametomib(name, mib, &miblen), 0) << name;
    size_t dots = static_cast<size_t>(std::count(name, name + std::strlen(name), '.'));
    EXPECT_EQ(miblen, dots + 1) << name;
    uint64_t by_name = 0, by_mib = 0;
    size_t l1 = 8, l2 = 8;
    int r1 = ductile_mallctl(name, &by_name, &l1, nullptr, 0);
    int r2 = ductile_mallctlbymib(mib, miblen, &by_mib, &l2, nullptr, 0);
    EXPECT_EQ(r1, r2) << name;
    EXPECT_EQ(l1, l2) << name;
    if (std::strcmp(name, "ductile.os.mmap") == 0 || std::strcmp(name, "arenas.page") == 0) {
      EXPECT_EQ(by_name, by_mib) << name;
    }
  }
}

TEST(Mib, PartialMibsAndArenaIndices) {
  size_t mib[4];
  size_t miblen = 1;
  ASSERT_EQ(ductile_mallctlnametomib("stats.allocated", mib, &miblen), 0);
  EXPECT_EQ(miblen, 1u);
  EXPECT_EQ(ductile_mallctlbymib(mib, 1, nullptr, nullptr, nullptr, 0), ENOENT);  // an inner node
  miblen = 4;
  ASSERT_EQ(ductile_mallctlnametomib("arena.0.purge", mib, &miblen), 0);
  ASSERT_EQ(miblen, 3u);
  EXPECT_EQ(mib[1], 0u);
  EXPECT_EQ(ductile_mallctlbymib(mib, 3, nullptr, nullptr, nullptr, 0), 0);
  mib[1] = MALLCTL_ARENAS_ALL;
  EXPECT_EQ(ductile_mallctlbymib(mib, 3, nullptr, nullptr, nullptr, 0), 0);
  mib[1] = read_ctl<unsigned>("arenas.narenas");  // the first index not made yet
  EXPECT_EQ(ductile_mallctlbymib(mib, 3, nullptr, nullptr, nullptr, 0), ENOENT);
  mib[1] = 0;
  mib[2] = 999;
  EXPECT_EQ(ductile_mallctlbymib(mib, 3, nullptr, nullptr, nullptr, 0), ENOENT);
  // Past a leaf.
  size_t vmib[2];
  miblen = 2;
  ASSERT_EQ(ductile_mallctlnametomib("version", vmib, &miblen), 0);
  ASSERT_EQ(miblen, 1u);
  vmib[1] = 0;
  EXPECT_EQ(ductile_mallctlbymib(vmib, 2, nullptr, nullptr, nullptr, 0), ENOENT);
  miblen = 2;
  EXPECT_EQ(ductile_mallctlnametomib("no.such", vmib, &miblen), ENOENT);
  EXPECT_EQ(ductile_mallctlnametomib("version.x", vmib, &miblen), ENOENT);
  EXPECT_EQ(ductile_mallctlnametomib("version", nullptr, &miblen), EINVAL);
  EXPECT_EQ(ductile_mallctlbymib(nullptr, 1, nullptr, nullptr, nullptr, 0), EINVAL);
}

// ---- malloc_stats_print ------------------------------------------------

void append(void* out, const char* s) { static_cast<std::string*>(out)->append(s); }

// Collects output without allocating, to show that printing allocates nothing.
struct FixedBuffer {
  char text[1 << 16];
  size_t len = 0;
  size_t calls = 0;
};
void append_fixed(void* out, const char* s) {
  auto* b = static_cast<FixedBuffer*>(out);
  b->calls++;
  size_t n = std::strlen(s);
  if (b->len + n < sizeof b->text) {
    std::memcpy(b->text + b->len, s, n);
    b->len += n;
    b->text[b->len] = '\0';
  }
}

TEST(StatsPrint, ReadableSummaryHasEverySection) {
  void* p = ductile_malloc(5 * kMiB);
  p = ductile_realloc(p, 50 * kMiB);
  std::string out;
  ductile_malloc_stats_print(append, &out, nullptr);
  ductile_free(p);
  for (const char* want : {"___ Begin ductile statistics ___", "Bytes by layer", "small", "medium", "huge",
                           "total", "Retained:", "Purged:", "System calls: mmap", "Huge growth by path: headroom",
                           "Small classes:", "___ End ductile statistics ___"})
    EXPECT_NE(out.find(want), std::string::npos) << want << "\n" << out;
  std::string brief;
  ductile_malloc_stats_print(append, &brief, "b");
  EXPECT_EQ(brief.find("Small classes:"), std::string::npos);
  EXPECT_NE(brief.find("___ End ductile statistics ___"), std::string::npos);
}

TEST(StatsPrint, JsonIsValidAndComplete) {
  std::string out;
  ductile_malloc_stats_print(append, &out, "J");
  EXPECT_TRUE(json_check::valid(out)) << out;
  for (const char* key : {"\"ductile\"", "\"version\"", "\"options\"", "\"decay_ms\"", "\"stats\"",
                          "\"allocated\"", "\"retained\"", "\"layers\"", "\"syscalls\"", "\"mmap\"", "\"growth\"",
                          "\"headroom\"", "\"copy\"", "\"bins\"", "\"purged_bytes\""})
    EXPECT_NE(out.find(key), std::string::npos) << key;
  std::string brief;
  ductile_malloc_stats_print(append, &brief, "Jbxyz");  // unknown characters are ignored
  EXPECT_TRUE(json_check::valid(brief));
  EXPECT_EQ(brief.find("\"bins\""), std::string::npos);
}

// The options print as JSON numbers, booleans and strings by their kind.
TEST(StatsPrint, JsonOptionsHaveTheirTypes) {
  std::string out;
  ductile_malloc_stats_print(append, &out, "J");
  const std::string decay = "\"decay_ms\":" + std::to_string(core::rt().opts.decay_ms) + ",";
  EXPECT_NE(out.find(decay), std::string::npos) << out.substr(0, 600);
  EXPECT_NE(out.find(std::string("\"tcache\":") + (core::rt().opts.tcache ? "true" : "false")), std::string::npos);
  EXPECT_NE(out.find("\"lg_prof_interval\":-1"), std::string::npos);
  EXPECT_NE(out.find("\"thp\":\""), std::string::npos);
  EXPECT_NE(out.find("\"prof_signal\":\"none\""), std::string::npos);
  EXPECT_EQ(out.find("\"decay_ms\":\""), std::string::npos);
  EXPECT_TRUE(json_check::valid(out));
}

TEST(StatsPrint, AllocatesNothingItself) {
  static FixedBuffer text, json;
  uint64_t before = kStats ? read_ctl<uint64_t>("thread.allocated") : 0;
  size_t chunk_allocs = core::rt().chunks.stats().allocs;
  ductile_malloc_stats_print(append_fixed, &text, "");
  ductile_malloc_stats_print(append_fixed, &json, "J");
  if (kStats) {
    EXPECT_EQ(read_ctl<uint64_t>("thread.allocated"), before);
  }
  EXPECT_EQ(core::rt().chunks.stats().allocs, chunk_allocs);
  EXPECT_GT(text.calls, 1u);  // longer than one buffer: handed on in pieces
  EXPECT_TRUE(json_check::valid(std::string(json.text, json.len)));
}

TEST(StatsPrint, JsonCheckerRejectsBrokenJson) {
  EXPECT_TRUE(json_check::valid("{\"a\":[1,2.5e3,true,null,\"x\\n\"]}"));
  for (const char* bad : {"", "{", "{\"a\":}", "{\"a\":1,}", "[1 2]", "{a:1}", "01", "\"\x01\"", "{} {}"})
    EXPECT_FALSE(json_check::valid(bad)) << bad;
}

TEST(StatsPrint, ToStderrWithoutACallback) {
  testing::internal::CaptureStderr();
  ductile_malloc_stats_print(nullptr, nullptr, "b");
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("___ End ductile statistics ___"), std::string::npos);
}

// ---- options -----------------------------------------------------------

TEST(Options, SetOptionUsesTheTableWithoutWarnings) {
  core::Options o;
  testing::internal::CaptureStderr();
  EXPECT_TRUE(core::set_option(o, "stats_print", "1", 1));
  EXPECT_TRUE(o.stats_print);
  EXPECT_TRUE(core::set_option(o, "decay_ms", "250", 3));
  EXPECT_EQ(o.decay_ms, 250u);
  EXPECT_FALSE(core::set_option(o, "decay_ms", "x", 1));
  EXPECT_EQ(o.decay_ms, 250u);
  EXPECT_FALSE(core::set_option(o, "nope", "1", 1));
  EXPECT_FALSE(core::set_option(o, "stats_print", "maybe", 5));
  for (const char* word : {"0", "false", "no", "off"}) {
    EXPECT_TRUE(core::set_option(o, "stats_print", word, std::strlen(word))) << word;
    EXPECT_FALSE(o.stats_print) << word;
  }
  for (const char* word : {"1", "true", "yes", "on"}) {
    EXPECT_TRUE(core::set_option(o, "stats_print", word, std::strlen(word))) << word;
    EXPECT_TRUE(o.stats_print) << word;
  }
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "");
}

// Huge blocks of which a program touches one page each cost that page, as
// in glibc, and not the page map's metadata besides: each span's first and
// last page entries lay in 4 KiB pages of their own (3 pages per block: 30 000
// sparse 2-4 MiB blocks held 357 MiB against glibc's 118).
TEST(MallocFamily, SparselyTouchedHugeBlocksCostThePagesTouched) {
  constexpr size_t kBlocks = 2000;
  static char* blocks[kBlocks];
  const long before = test::resident_pages();
  ASSERT_GT(before, 0);
  for (size_t i = 0; i < kBlocks; i++) {
    const size_t size = 2 * kMiB + (i * 7919 * kPage) % (2 * kMiB);
    blocks[i] = static_cast<char*>(malloc(size));
    ASSERT_NE(blocks[i], nullptr);
    blocks[i][0] = 1;
  }
  const long grown = test::resident_pages() - before;
  EXPECT_LE(grown, static_cast<long>(kBlocks * 3 / 2)) << grown << " pages resident for " << kBlocks << " blocks";
  for (char* b : blocks) free(b);
}

}  // namespace
}  // namespace ductile
