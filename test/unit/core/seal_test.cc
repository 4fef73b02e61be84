// SPDX-License-Identifier: BSD-2-Clause
// Hardened mode's seal and fill through the whole allocator (small/seal.h,
// small/bin.h): a write past a block's request is found at its free, its
// realloc or a size query, a write into a free neighbour when that one is
// handed out, and a write after free past the first word of a filled block
// when it is handed out again.
//
// Each case runs in a death test's own process with hardened mode on
// (hardened_helpers.h); an --enable-hardened build keeps its thread caches,
// so both kinds of path are tried.
#include <stdlib.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/runtime.h"
#include "ductile/ductile.h"
#include "small/bin.h"
#include "small/seal.h"
#include "unit/core/hardened_helpers.h"

namespace ductile {
namespace {

constexpr char kOverflow[] = "^ductile: free\\(\\): buffer overflow detected 0x[0-9a-f]+\n$";
constexpr char kReallocOverflow[] = "^ductile: realloc\\(\\): buffer overflow detected 0x[0-9a-f]+\n$";
constexpr char kUsableOverflow[] = "^ductile: malloc_usable_size\\(\\): buffer overflow detected 0x[0-9a-f]+\n$";
constexpr char kOverrun[] = "^ductile: malloc\\(\\): buffer overflow into a free block detected 0x[0-9a-f]+\n$";
constexpr char kChanged[] = "^ductile: double free or write after free detected 0x[0-9a-f]+\n$";

using Sealed = Hardened;

char* sealed_malloc(size_t size) { return static_cast<char*>(hardened_malloc(size)); }

// Sizes of every range below the huge one: fine and coarse small classes,
// medium blocks, one just below a class's size with the seal.
constexpr size_t kSizes[] = {1, 8, 16, 40, 100, 1000, 4088, 5000, 20 * 1024, 64 * 1024, 300 * 1024};

// A block of `size` bytes, written whole; then `len` bytes at `at`; freed.
void write_then_free(size_t size, size_t at, size_t len) {
  char* p = sealed_malloc(size);
  std::memset(p, 1, size);
  std::memset(p + at, 0x5a, len);
  ductile_free(p);
  _exit(0);
}

TEST_F(Sealed, AWritePastTheRequestIsFoundAtTheFree) {
  for (size_t size : kSizes) {
    EXPECT_DEATH(write_then_free(size, size, 1), kOverflow) << size;   // the first byte past it
    EXPECT_DEATH(write_then_free(size, size, 16), kOverflow) << size;  // and on into the seal word
  }
}

// The byte right after a request is the same in every block, with or
// without slack: a one-byte overflow of any other value breaks every
// block's seal, whatever its key. Over 4096 blocks of 40 bytes (48-byte
// objects: no slack, the seal word follows the request), each written one
// byte past its end and asked (without the free's report) whether its seal
// still holds. Where that byte was the key's, one seal in 256 held.
void overflow_by_one_everywhere() {
  int held = 0;
  for (int i = 0; i < 4096; i++) {
    char* p = sealed_malloc(40);
    p[40] = 0x41;
    held += small::sealed_request(p, 48, small::seal_key(p)) != SIZE_MAX;
  }
  _exit(held == 0 ? 0 : 1);
}

TEST_F(Sealed, AOneByteOverflowBreaksEverySeal) {
  EXPECT_EXIT(overflow_by_one_everywhere(), ::testing::ExitedWithCode(0), "");
}

// malloc_usable_size (and sallocx) report the request: all of it can be
// written, and freed without a report; nallocx says the same.
void write_all_usable(size_t size) {
  char* p = sealed_malloc(size);
  const size_t usable = ductile_malloc_usable_size(p);
  if (usable != size || ductile_sallocx(p, 0) != size || ductile_nallocx(size, 0) != size) _exit(5);
  std::memset(p, 1, usable);
  ductile_free(p);
  _exit(0);
}

TEST_F(Sealed, TheUsableSizeIsTheRequestAndAllOfItCanBeWritten) {
  for (size_t size : kSizes) EXPECT_EXIT(write_all_usable(size), ::testing::ExitedWithCode(0), "") << size;
}

// realloc and the size query check the seal too.
void write_past_then(size_t size, int call) {
  char* p = sealed_malloc(size);
  p[size] = 0x5a;
  if (call == 0) (void)ductile_realloc(p, 2 * size);
  else (void)ductile_malloc_usable_size(p);
  _exit(0);
}

TEST_F(Sealed, ReallocAndTheSizeQueryFindABrokenSeal) {
  for (size_t size : {size_t{40}, size_t{64} << 10}) {
    EXPECT_DEATH(write_past_then(size, 0), kReallocOverflow) << size;
    EXPECT_DEATH(write_past_then(size, 1), kUsableOverflow) << size;
  }
}

// A block that stays where it is (realloc within its class, xallocx) holds
// the new request: the seal moves with it, and the contents stay.
void resize_in_place_then_write_past(size_t size, size_t to, bool by_xallocx) {
  char* p = sealed_malloc(size);
  std::memset(p, 7, size);
  char* q = p;
  if (by_xallocx) {
    if (ductile_xallocx(p, to, 0, 0) != to) _exit(5);
  } else {
    q = static_cast<char*>(ductile_realloc(p, to));
  }
  if (q != p || ductile_malloc_usable_size(q) != to) _exit(6);
  for (size_t i = 0; i < (size < to ? size : to); i++)
    if (q[i] != 7) _exit(7);
  q[to] = 0x5a;
  ductile_free(q);
  _exit(0);
}

TEST_F(Sealed, ABlockResizedInPlaceCarriesItsNewRequestsSeal) {
  // 40 -> 30 stays in the 48-byte class; 100 -> 104 in the 112-byte one;
  // 20 000 -> 20 400 in the 20 KiB medium class.
  EXPECT_DEATH(resize_in_place_then_write_past(40, 30, false), kOverflow);
  EXPECT_DEATH(resize_in_place_then_write_past(20000, 20400, false), kOverflow);
  EXPECT_DEATH(resize_in_place_then_write_past(100, 104, true), kOverflow);
  EXPECT_DEATH(resize_in_place_then_write_past(20000, 20400, true), kOverflow);
}

// xallocx past what the block holds leaves it and its request alone.
TEST_F(Sealed, XallocxThatCannotGrowLeavesTheRequest) {
  EXPECT_EXIT(
      {
        char* p = sealed_malloc(100);  // a 112-byte block: 104 bytes with the seal
        if (ductile_xallocx(p, 105, 0, 0) != 100 || ductile_malloc_usable_size(p) != 100) _exit(5);
        std::memset(p, 1, 100);
        ductile_free(p);
        _exit(0);
      },
      ::testing::ExitedWithCode(0), "");
}

// Two neighbouring 40-byte requests (48-byte objects with the seal); the
// lower one freed, then its seal word written from the upper one (a write
// before the upper block): found when the lower one is handed out by the
// slow path, which every hand-out of hardened:true alone takes (a thread
// cache's inline hand-out, --enable-hardened, loads nothing from the end of
// the block: see docs/measurements/hardened.md).
void overrun_free_neighbour() {
  std::vector<char*> held;
  for (int i = 0; i < 1000; i++) {
    char* a = sealed_malloc(40);
    char* b = sealed_malloc(40);
    if (b == a + 48 || a == b + 48) {  // (a thread cache hands them out downwards)
      char* lower = a < b ? a : b;
      ductile_free(lower);
      std::memset(lower + 40, 0x5a, 8);  // from the upper block, before its start
      for (int k = 0; k < 100; k++) held.push_back(sealed_malloc(40));
      _exit(0);
    }
    held.push_back(a);
    held.push_back(b);
  }
  _exit(4);  // no neighbours found
}

TEST_F(Sealed, AWriteIntoAFreeNeighbourIsFoundAtItsHandOut) {
  if (kHardened) GTEST_SKIP() << "hardened:true alone: its hand-outs take the slow path";
  EXPECT_DEATH(overrun_free_neighbour(), kOverrun);
}

// A write after free at `at` in a freed `size`-byte block, then mallocs of
// that size until it is handed out again.
void write_after_free(size_t size, size_t at) {
  char* p = sealed_malloc(size);
  ductile_free(p);
  p[at] = 0x5a;
  for (int i = 0; i < 100; i++) (void)sealed_malloc(size);
  _exit(0);
}

// freed_fill:1 fills every freed block (hardened:true alone fills every
// small one anyway, having no caches to sample from), past the first word
// too. (A medium block freed without a cache goes straight back to the
// chunk layer, unchecked: --enable-hardened's caches hold them.)
TEST_F(Sealed, AWriteAfterFreePastTheFirstWordIsFoundWhereTheFreeFilled) {
  also("freed_fill:1");
  for (size_t size : {size_t{64}, size_t{1000}, kHardened ? size_t{40} << 10 : size_t{3000}})
    for (size_t at : {size_t{24}, size_t{8}, size_t{512}}) {
      if (at < size) {
        EXPECT_DEATH(write_after_free(size, at), kChanged) << size << " at " << at;
      }
    }
}

// freed_fill:0 fills none: the same write goes unseen.
TEST_F(Sealed, NoFillNoCheckPastTheFirstWord) {
  also("freed_fill:0");
  EXPECT_EXIT(write_after_free(64, 24), ::testing::ExitedWithCode(0), "");
}

// --enable-hardened: a sample of the frees fills, freed_fill apart on
// average (16 here): of 4096 frees, those whose block carries the filled
// mark and the fill. hardened:true alone fills every one.
void count_filled() {
  constexpr int kBlocks = 4096;
  std::vector<char*> v;
  for (int i = 0; i < kBlocks; i++) v.push_back(sealed_malloc(64));
  int filled = 0;
  for (char* p : v) {
    ductile_free(p);
    uint64_t w[2];
    std::memcpy(w, p, sizeof w);  // read after free: the test's look
    filled += w[0] == (small::freed_mark(p) ^ small::kFilledMark) && w[1] == small::kFreedFill;
  }
  if (!kHardened) _exit(filled == kBlocks ? 0 : 1);
  _exit(filled >= kBlocks / 32 && filled <= kBlocks / 8 ? 0 : 1);
}

TEST_F(Sealed, AFreeFillsItsBlockAtTheSampledRate) {
  also("freed_fill:16");
  EXPECT_EXIT(count_filled(), ::testing::ExitedWithCode(0), "");
}

// opt.freed_fill reads the rate: 64 by default.
TEST(SealedOptions, FreedFillIsAnOptionWithItsDefault) {
  size_t rate = 0, n = sizeof rate;
  ASSERT_EQ(ductile_mallctl("opt.freed_fill", &rate, &n, nullptr, 0), 0);
  EXPECT_EQ(rate, 64u);
}

}  // namespace
}  // namespace ductile
