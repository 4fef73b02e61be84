// SPDX-License-Identifier: BSD-2-Clause
// The malloc family's entry points (api/malloc.cc): their edge cases as glibc answers them, huge and
// impossible alignments, the ABI's alignment, and sparsely touched huge blocks.
//
// This program links the library's objects, so ductile is also the allocator of the
// test process itself.
#include <dlfcn.h>
#include <errno.h>
#include <malloc.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <new>
#include <string>

#include <gtest/gtest.h>

#include "ductile/ductile.h"
#include "small/size_classes.h"
#include "support/maps.h"
#include "support/patterns.h"
#include "unit/api/api_helpers.h"

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

using test::check;
using test::fill;
using test::kMaxSize;
using test::kMiB;

// Hides a constant from the compiler's allocation-size warnings.
size_t opaque(size_t v) {
  volatile size_t x = v;
  return x;
}

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
  // (A hardened build reports the request, 0, which its seal keeps.)
  EXPECT_EQ(ductile_malloc_usable_size(pn) > 0, !kHardened);
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
