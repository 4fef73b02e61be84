// SPDX-License-Identifier: BSD-2-Clause
// Hardening through the whole allocator (a cross-cutting suite, kept by its concern under core/):
// bad frees found and reported, and guard pages behind huge blocks.
//
// This program links the library's objects, so ductile is also the allocator of the
// test process itself.
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "core/runtime.h"
#include "ductile/ductile.h"
#include "support/maps.h"
#include "unit/core/hardened_helpers.h"
#include "support/patterns.h"
#include "support/sizes.h"

namespace ductile {
namespace {

using test::check;
using test::fill;

// What a bad free prints (fatal_pointer) before it aborts.
constexpr char kInvalid[] = "^ductile: free\\(\\): invalid pointer 0x[0-9a-f]+\n$";
constexpr char kDouble[] = "^ductile: free\\(\\): double free detected 0x[0-9a-f]+\n$";
// --enable-hardened: a freed mark missing when the block is handed out
// again (a write after free, or a double free whose mark was wiped).
constexpr char kChanged[] = "^ductile: double free or write after free detected 0x[0-9a-f]+\n$";
constexpr char kWrongAlign[] = "^ductile: free_sized\\(\\): wrong alignment for block 0x[0-9a-f]+\n$";
constexpr char kReallocFreed[] = "^ductile: realloc\\(\\): block freed already 0x[0-9a-f]+\n$";
constexpr char kWrongSize[] = "^ductile: free_sized\\(\\): wrong size for block 0x[0-9a-f]+\n$";

// Two 40 KiB blocks that are neighbours, freed past the thread cache so that
// the chunk layer merges them, then an 80 KiB block over the pair: the
// second block's old first page lies inside it. A page-map tag left there
// made free(big + 40 KiB) put that page into the cache as a 40 KiB block,
// and the next malloc(40 KiB) handed out memory inside the live 80 KiB one.
TEST(StaleTag, InteriorFreeOverMergedBlocksIsNotTaken) {
  constexpr size_t kHalf = 40 * 1024;
  char* lo = nullptr;
  std::vector<void*> held;
  for (int i = 0; i < 64 && lo == nullptr; i++) {
    char* a = static_cast<char*>(ductile_mallocx(test::request_for_block(kHalf), MALLOCX_TCACHE_NONE));
    char* b = static_cast<char*>(ductile_mallocx(test::request_for_block(kHalf), MALLOCX_TCACHE_NONE));
    ASSERT_NE(a, nullptr);
    ASSERT_NE(b, nullptr);
    if (b == a + kHalf) {
      lo = a;
    } else if (a == b + kHalf) {
      lo = b;
    } else {
      held.push_back(a);
      held.push_back(b);
      continue;
    }
    ductile_dallocx(a, MALLOCX_TCACHE_NONE);
    ductile_dallocx(b, MALLOCX_TCACHE_NONE);
  }
  ASSERT_NE(lo, nullptr) << "no two neighbouring 40 KiB blocks";
  char* big = static_cast<char*>(ductile_mallocx(test::request_for_block(2 * kHalf), MALLOCX_TCACHE_NONE));
  ASSERT_EQ(big, lo) << "the merged pair was not reused";
  fill(big, test::request_for_block(2 * kHalf), 7);
  // Not a block: must not be taken. The old boundary's page-map records were
  // cleared at the merge, so the address is not ours in any build, and free
  // says so and stops.
  EXPECT_DEATH(ductile_free(big + kHalf), kInvalid);
  std::vector<char*> got;
  for (int i = 0; i < 8; i++) {
    char* q = static_cast<char*>(ductile_malloc(kHalf));
    ASSERT_NE(q, nullptr);
    EXPECT_FALSE(q + kHalf > big && q < big + 2 * kHalf) << "a block inside a live one";
    got.push_back(q);
  }
  EXPECT_TRUE(check(big, test::request_for_block(2 * kHalf), 7));
  for (char* q : got) ductile_free(q);
  ductile_free(big);
  for (void* p : held) ductile_dallocx(p, MALLOCX_TCACHE_NONE);
}

// ---- bad frees -----------------------------------------------------------
// Every fault ends the program with one line naming it and the address, as
// glibc's "free(): invalid pointer". The hardened tests run their statement
// in a death test's fresh process with hardened mode on (hardened_helpers.h).

// Freed twice, then allocated twice: the second allocation would hand the
// block out a second time. `between`: other blocks of the size freed
// between the two frees. A block of the size stays live throughout, so that
// a slab does not go back to its region between the frees (hardened:true
// alone has no cache: the second free would find no slab there, and report
// an invalid pointer).
void free_twice(size_t size, int between = 0) {
  (void)hardened_malloc(size);
  void* p = hardened_malloc(size);
  std::vector<void*> others;
  for (int i = 0; i < between; i++) others.push_back(hardened_malloc(size));
  ductile_free(p);
  for (void* q : others) ductile_free(q);
  ductile_free(p);
  for (int i = 0; i < between + 2; i++) (void)hardened_malloc(size);
  _exit(0);
}

TEST_F(Hardened, DoubleFreeOfEveryRange) {
  EXPECT_DEATH(free_twice(8), kDouble);
  EXPECT_DEATH(free_twice(24), kDouble);
  EXPECT_DEATH(free_twice(1000), kDouble);
  EXPECT_DEATH(free_twice(40 * 1024), kDouble);
  EXPECT_DEATH(free_twice(3 << 20), kDouble);
  // With frees in between: the copies are not next to each other.
  EXPECT_DEATH(free_twice(24, 5), kDouble);
  EXPECT_DEATH(free_twice(5000, 3), kDouble);
}

// The block alone in its slab: the first free empties the slab, which
// starts over (its never-used objects begin at its first again), and the
// second free is still a double free, not a pointer never returned. Found
// at the second free itself, in both modes: a program that frees twice and
// then exits, or never allocates that size again, is told too.
void free_lone_block_twice(size_t size, bool allocate_after) {
  void* p = hardened_malloc(size);
  ductile_free(p);
  ductile_free(p);
  if (allocate_after)
    for (int i = 0; i < 2; i++) (void)hardened_malloc(size);
  _exit(0);
}

TEST_F(Hardened, ALoneSmallBlockFreedTwiceIsADoubleFreeAtTheFree) {
  for (size_t size : {8, 40, 3000})
    for (bool after : {false, true}) EXPECT_DEATH(free_lone_block_twice(size, after), kDouble) << size;
}

// realloc of a block freed already says so, in realloc's words, in both
// modes and for every range: a small block by its freed mark or its slab's
// bitmap, a medium one in a thread cache by its extent's mark.
void realloc_freed(size_t size) {
  void* p = hardened_malloc(size);
  ductile_free(p);
  (void)ductile_realloc(p, 2 * size);
  _exit(0);
}

TEST_F(Hardened, ReallocOfAFreedBlockSaysSo) {
  for (size_t size : {size_t{40}, size_t{3000}, size_t{64} << 10}) EXPECT_DEATH(realloc_freed(size), kReallocFreed) << size;
}

// --enable-hardened: the freed mark is a keyed hash of the address, so a
// mark read from one freed block (a leak) does not give another block's:
// the difference between a block's mark and its address is not the same
// for two blocks, as it was for a mark of the address XOR one secret.
// Exits 0 when no two of 64 freed blocks' marks are their addresses XOR,
// or plus, one same value.
void compare_freed_marks() {
  std::vector<char*> v;
  for (int i = 0; i < 64; i++) v.push_back(static_cast<char*>(hardened_malloc(48)));
  for (char* p : v) ductile_free(p);
  uintptr_t first_xor = 0, first_diff = 0;
  int same = 0;
  for (char* p : v) {
    uintptr_t mark;
    std::memcpy(&mark, p, sizeof mark);  // read after free: the leak
    if (p == v[0]) {
      first_xor = mark ^ addr(p);
      first_diff = mark - addr(p);
    } else {
      same += (mark ^ addr(p)) == first_xor || mark - addr(p) == first_diff;
    }
  }
  _exit(same == 0 ? 0 : 1);
}

TEST_F(Hardened, OneFreedMarkTellsNothingOfAnother) {
  if (!kHardened) GTEST_SKIP() << "--enable-hardened only";
  EXPECT_EXIT(compare_freed_marks(), ::testing::ExitedWithCode(0), "");
}

// A mark forged from a leaked one: the block freed twice is found at the
// second free; with the mark wiped before it (so that the second free is
// taken), the copy handed out second is found when the block taken first
// carries a mark extrapolated from another block's (the secret a linear
// mark would give away).
void forge_from_leaked_mark() {
  char* leaked = static_cast<char*>(hardened_malloc(48));
  char* p = static_cast<char*>(hardened_malloc(48));
  ductile_free(leaked);
  uintptr_t mark;
  std::memcpy(&mark, leaked, sizeof mark);
  const uintptr_t secret = mark ^ addr(leaked);
  ductile_free(p);
  std::memset(p, 0, sizeof(uintptr_t));  // wipes p's mark: its second free is taken
  ductile_free(p);
  char* first = static_cast<char*>(hardened_malloc(48));
  if (first == p) {
    const uintptr_t forged = addr(p) ^ secret;
    std::memcpy(first, &forged, sizeof forged);
  }
  char* second = static_cast<char*>(hardened_malloc(48));
  _exit(first == second ? 4 : 0);
}

TEST_F(Hardened, AMarkForgedFromALeakedOneIsFound) {
  if (!kHardened) GTEST_SKIP() << "--enable-hardened only";
  EXPECT_DEATH(forge_from_leaked_mark(), kChanged);
}

// --enable-hardened: both copies of a medium block freed twice into the
// cache go back at a flush; the second is found there (its extent went
// back with the first, or its mark was taken by the first).

TEST_F(Hardened, DoubleFreeOfACachedMediumBlockFoundAtTheFlush) {
  EXPECT_DEATH(
      {
        void* p = hardened_malloc(40 * 1024);
        ductile_free(p);
        ductile_free(p);
        ductile_mallctl("thread.tcache.flush", nullptr, nullptr, nullptr, 0);
        _exit(0);
      },
      kDouble);
}

// A double free once the object has left the thread cache, with other
// frees in between: its slab's bitmap has it free already (hardened:true,
// no cache), or (--enable-hardened) its freed mark is still there.
TEST_F(Hardened, DoubleFreeAfterTheCacheFlushed) {
  EXPECT_DEATH(
      {
        void* p = hardened_malloc(48);
        ductile_free(p);
        std::vector<void*> v;
        for (int i = 0; i < 1000; i++) v.push_back(hardened_malloc(48));
        for (void* q : v) ductile_free(q);
        ductile_mallctl("thread.tcache.flush", nullptr, nullptr, nullptr, 0);
        ductile_free(p);
        for (int i = 0; i < 1002; i++) (void)hardened_malloc(48);
        _exit(0);
      },
      kDouble);
}

TEST_F(Hardened, FreeOfAPointerNeverReturned) {
  EXPECT_DEATH(
      {
        int on_stack = 1;
        (void)hardened_malloc(1);
        ductile_free(&on_stack);
      },
      kInvalid);
  EXPECT_DEATH(
      {
        static char in_data[64];
        (void)hardened_malloc(1);
        ductile_free(in_data + 16);
      },
      kInvalid);
}

TEST_F(Hardened, InteriorFreeOfEveryRange) {
  EXPECT_DEATH(ductile_free(static_cast<char*>(hardened_malloc(64)) + 16), kInvalid);
  EXPECT_DEATH(ductile_free(static_cast<char*>(hardened_malloc(3000)) + 1024), kInvalid);
  EXPECT_DEATH(ductile_free(static_cast<char*>(hardened_malloc(40 * 1024)) + 4096), kInvalid);
  EXPECT_DEATH(ductile_free(static_cast<char*>(hardened_malloc(3 << 20)) + (1 << 20)), kInvalid);
  EXPECT_DEATH(ductile_free(static_cast<char*>(hardened_malloc(64)) + 3), kInvalid);
}

// A page boundary inside a slab object: its offset in its page is 0, a
// multiple of any class size, so only the page's number in the slab (the
// page-map tag's, in a --enable-hardened build) shows that it is no
// object's start.
TEST_F(Hardened, InteriorFreeAtAPageBoundaryInsideAnObject) {
  EXPECT_DEATH(
      {
        for (int i = 0; i < 1000; i++) {
          char* p = static_cast<char*>(hardened_malloc(40));  // 48-byte objects, with the seal
          const uintptr_t boundary = align_up(addr(p) + 1, kPage);
          if (boundary < addr(p) + 48) ductile_free(ptr(boundary));
        }
        _exit(4);
      },
      kInvalid);
}

TEST_F(Hardened, SizedFreeWithTheWrongSize) {
  EXPECT_DEATH(ductile_sdallocx(hardened_malloc(24), 4096, 0), kWrongSize);
  EXPECT_DEATH(ductile_sdallocx(hardened_malloc(4096), 24, 0), kWrongSize);
  EXPECT_DEATH(ductile_free_sized(hardened_malloc(40 * 1024), 200 * 1024), kWrongSize);
  EXPECT_DEATH(ductile_free_sized(hardened_malloc(3 << 20), 8 << 20), kWrongSize);
  EXPECT_DEATH(::operator delete(hardened_malloc(100), size_t{1000}), kWrongSize);
}

// A medium or huge block allocated with an alignment past a page: a sized
// free must name that alignment (jemalloc's rule for sdallocx, C23's for
// free_aligned_sized), and one that names an alignment its address does
// not have is wrong too.
TEST_F(Hardened, SizedFreeWithTheWrongAlignment) {
  EXPECT_DEATH(ductile_sdallocx(ductile_mallocx(70000, MALLOCX_LG_ALIGN(16)), 70000, 0), kWrongAlign);
  EXPECT_DEATH(ductile_sdallocx(ductile_mallocx(70000, MALLOCX_LG_ALIGN(16)), 70000, MALLOCX_LG_ALIGN(17)),
               kWrongAlign);
  EXPECT_DEATH(ductile_free_sized(ductile_aligned_alloc(size_t{4} << 20, 3 << 20), 3 << 20), kWrongAlign);
  EXPECT_DEATH(ductile_sdallocx(hardened_malloc(70000), 70000, MALLOCX_LG_ALIGN(30)), kWrongAlign);
}

// Blocks that come back with another alignment: an aligned medium block
// freed and handed out again by a plain malloc, a huge span reused, a
// block rallocx'd to an alignment or realloc'd from one.
void sized_frees_after_reuse() {
  // A plain medium block whose address happens to have the alignment:
  // rallocx leaves it in place, aligned from then on; freed so, a plain
  // malloc may take it from the cache next.
  std::vector<void*> others;
  void* lucky = nullptr;
  for (int i = 0; i < 256 && lucky == nullptr; i++) {
    void* q = hardened_malloc(70000);
    if (is_aligned(addr(q), size_t{1} << 16)) lucky = q;
    else others.push_back(q);
  }
  if (lucky != nullptr) {
    if (ductile_rallocx(lucky, 70000, MALLOCX_LG_ALIGN(16)) != lucky) _exit(5);
    ductile_sdallocx(lucky, 70000, MALLOCX_LG_ALIGN(16));
    ductile_sdallocx(hardened_malloc(70000), 70000, 0);
  }
  for (void* q : others) ductile_free(q);
  for (int round = 0; round < 3; round++) {
    for (size_t size : {size_t{70000}, size_t{3} << 20}) {
      void* a = ductile_mallocx(size, MALLOCX_LG_ALIGN(16));
      ductile_sdallocx(a, size, MALLOCX_LG_ALIGN(16));
      void* b = hardened_malloc(size);  // may be a's block, from the cache or the span
      ductile_sdallocx(b, size, 0);
      void* c = ductile_rallocx(hardened_malloc(size), size, MALLOCX_LG_ALIGN(16));
      ductile_sdallocx(c, size, MALLOCX_LG_ALIGN(16));
      void* d = ductile_realloc(ductile_mallocx(size, MALLOCX_LG_ALIGN(16)), size + 4096);
      ductile_sdallocx(d, size + 4096, 0);
      // Shrunk in place by xallocx, then freed by free(): still aligned
      // as it was made, and the block a plain malloc takes next is not.
      void* e = ductile_mallocx(size, MALLOCX_LG_ALIGN(16));
      const size_t now = ductile_xallocx(e, size / 2, 0, 0);
      ductile_free(e);
      ductile_sdallocx(hardened_malloc(now), now, 0);
    }
  }
  _exit(0);
}

TEST_F(Hardened, SizedFreesOfReusedAndReallocatedBlocksAreAccepted) {
  EXPECT_EXIT(sized_frees_after_reuse(), ::testing::ExitedWithCode(0), "");
}

TEST_F(Hardened, RightSizesAndAlignmentsAreAccepted) {
  // Not a death test: this process is not hardened (unless the build is),
  // so run the frees in a hardened child and check that it exits cleanly.
  EXPECT_EXIT(
      {
        for (size_t size : {1ul, 8ul, 24ul, 100ul, 5000ul, 40000ul, 300000ul, 3ul << 20}) {
          ductile_sdallocx(hardened_malloc(size), size, 0);
          ductile_free_sized(hardened_malloc(size), size);
          ::operator delete(hardened_malloc(size), size);
          ductile_sdallocx(ductile_mallocx(size, MALLOCX_ALIGN(64)), size, MALLOCX_ALIGN(64));
          void* p = ductile_aligned_alloc(4096, size);
          ductile_free_aligned_sized(p, 4096, size);
          // realloc leaves blocks larger than the size it was given.
          void* r = ductile_realloc(hardened_malloc(size * 2), size + 1);
          ductile_sdallocx(r, size + 1, 0);
        }
        _exit(0);
      },
      ::testing::ExitedWithCode(0), "");
}

// In hardened mode freed objects are kept in their slab's bitmap, outside
// the objects, for every class: a write after free cannot redirect a later
// allocation (by default the 8- and 16-byte classes link freed objects
// through their first word). The write is found too: the freed mark is
// gone when the block is handed out again.
void write_after_free_then_allocate(bool flush) {
  std::vector<char*> v;
  for (int i = 0; i < 100; i++) v.push_back(static_cast<char*>(hardened_malloc(16)));
  for (char* p : v) ductile_free(p);
  for (char* p : v) std::memset(p, 0x41, 16);  // the program's bug
  if (flush) ductile_mallctl("thread.tcache.flush", nullptr, nullptr, nullptr, 0);
  for (int i = 0; i < 200; i++) {
    char* q = static_cast<char*>(hardened_malloc(16));
    if (core::owner_of(q) == nullptr || (addr(q) & 15) != 0) _exit(1);
    std::memset(q, 0, 16);
  }
  _exit(0);
}

TEST_F(Hardened, AWriteAfterFreeRedirectsNoAllocation) {
  for (bool flush : {false, true}) EXPECT_DEATH(write_after_free_then_allocate(flush), kChanged);
}

// A medium block written after its free: found where it is handed out again,
// or where it goes back to the chunk layer (a trim). With hardened:true alone
// (no thread cache) the block waits, marked, in its class's depot (up to 256
// KiB); an --enable-hardened build's thread cache holds it.
void write_after_free_of_medium(size_t size, bool trim) {
  char* p = static_cast<char*>(hardened_malloc(size));
  if (p == nullptr) _exit(3);
  ductile_free(p);
  std::memset(p, 0x41, 8);  // the program's bug
  if (trim) {
    ductile_mallctl("thread.tcache.flush", nullptr, nullptr, nullptr, 0);
    ductile_malloc_trim(0);
  }
  for (int i = 0; i < 2; i++) ductile_free(hardened_malloc(size));
  _exit(0);
}

TEST_F(Hardened, AWriteAfterFreeOfAMediumBlockIsFound) {
  for (size_t size : {size_t{20} << 10, size_t{64} << 10, size_t{200} << 10})
    for (bool trim : {false, true}) EXPECT_DEATH(write_after_free_of_medium(size, trim), kChanged) << size;
}

// The depot's blocks carry no false report: medium blocks of every depot
// class, allocated, written whole, freed in turn and handed out again, with
// trims between.
TEST_F(Hardened, MediumBlocksReusedAcrossTheDepotAreAccepted) {
  EXPECT_EXIT(
      {
        std::vector<char*> held;
        for (int round = 0; round < 4; round++) {
          for (size_t size = 16 << 10; size <= (size_t{300} << 10); size += 12 << 10) {
            char* p = static_cast<char*>(hardened_malloc(size));
            if (p == nullptr) _exit(3);
            std::memset(p, round, size);
            held.push_back(p);
          }
          for (size_t i = 0; i < held.size(); i += 2) ductile_free(held[i]);
          for (size_t i = 1; i < held.size(); i += 2) ductile_free(held[i]);
          held.clear();
          if (round == 1) ductile_malloc_trim(0);
        }
        _exit(0);
      },
      ::testing::ExitedWithCode(0), "");
}

// ---- guard pages behind huge blocks --------------------------------------
// In hardened mode the page past a huge block's usable end is PROT_NONE
// (its guard page): a write running off its end faults instead of landing
// in the headroom or in a neighbour. Also once the block has grown in place
// and once it has shrunk (the guard page moves with the end).

// Writes one byte at p[at], through a volatile pointer (the compiler may
// not drop or move it).
void poke(void* p, size_t at) { static_cast<volatile char*>(p)[at] = 1; }

constexpr size_t kHugeBlock = 3 << 20;

TEST_F(Hardened, AWritePastAHugeBlockFaults) {
  EXPECT_EXIT(
      {
        void* p = hardened_malloc(kHugeBlock);
        const size_t usable = ductile_malloc_usable_size(p);
        if (p == nullptr || usable < kHugeBlock) _exit(3);
        std::memset(p, 7, usable);  // the block itself is all writable
        poke(p, usable);
        _exit(0);
      },
      ::testing::KilledBySignal(SIGSEGV), "");
}

TEST_F(Hardened, AReadPastAHugeBlockFaults) {
  EXPECT_EXIT(
      {
        void* p = hardened_malloc(kHugeBlock);
        const size_t usable = ductile_malloc_usable_size(p);
        (void)static_cast<volatile char*>(p)[usable];
        _exit(0);
      },
      ::testing::KilledBySignal(SIGSEGV), "");
}

TEST_F(Hardened, AWritePastAHugeBlockGrownInPlaceFaults) {
  EXPECT_EXIT(
      {
        void* p = hardened_malloc(kHugeBlock);
        void* q = ductile_realloc(p, kHugeBlock + (1 << 20));  // into the headroom
        const size_t usable = ductile_malloc_usable_size(q);
        if (q != p || usable < kHugeBlock + (1 << 20)) _exit(3);
        std::memset(q, 7, usable);
        poke(q, usable);
        _exit(0);
      },
      ::testing::KilledBySignal(SIGSEGV), "");
  EXPECT_EXIT(
      {
        void* p = hardened_malloc(kHugeBlock);
        // Past the span: over the free neighbour, still in place.
        void* q = ductile_realloc(p, 4 * kHugeBlock);
        const size_t usable = ductile_malloc_usable_size(q);
        if (q != p || usable < 4 * kHugeBlock) _exit(3);
        std::memset(q, 7, usable);
        poke(q, usable);
        _exit(0);
      },
      ::testing::KilledBySignal(SIGSEGV), "");
}

TEST_F(Hardened, AWritePastAShrunkHugeBlockFaults) {
  EXPECT_EXIT(
      {
        void* p = hardened_malloc(4 * kHugeBlock);
        std::memset(p, 7, 4 * kHugeBlock);
        void* q = ductile_realloc(p, kHugeBlock);
        const size_t usable = ductile_malloc_usable_size(q);
        if (q != p || usable < kHugeBlock || usable >= 4 * kHugeBlock) _exit(3);
        std::memset(q, 8, usable);
        poke(q, usable);
        _exit(0);
      },
      ::testing::KilledBySignal(SIGSEGV), "");
}

// Freed, the span is reused whole: its guard does not outlive the block.
TEST_F(Hardened, AHugeSpanIsWholeAgainOnceFreed) {
  EXPECT_EXIT(
      {
        for (int i = 0; i < 4; i++) {
          void* p = hardened_malloc(kHugeBlock << i);
          const size_t usable = ductile_malloc_usable_size(p);
          std::memset(p, i, usable);
          ductile_free(p);
          void* q = ductile_malloc(2 * (kHugeBlock << i));  // over the freed guard
          std::memset(q, i, ductile_malloc_usable_size(q));
          std::vector<void*> small;
          for (int j = 0; j < 2000; j++) {
            small.push_back(ductile_malloc(40000));
            std::memset(small.back(), j, 40000);
          }
          for (void* s : small) ductile_free(s);
          ductile_free(q);
          (void)ductile_trim();
        }
        _exit(0);
      },
      ::testing::ExitedWithCode(0), "");
}

// Every live huge block has a guard page, and a program holds as many as it
// likes: guard markers split no mapping. With mprotect each guard cost two
// mappings, and at the kernel's limit (vm.max_map_count, 65 530 by
// default) the 32 749th block was refused with ENOMEM.
TEST_F(Hardened, HugeBlocksPastTheMappingLimitAreGuarded) {
  void* page = mmap(nullptr, kPage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(page, MAP_FAILED);
  const bool markers = madvise(page, kPage, 102 /* MADV_GUARD_INSTALL */) == 0;
  munmap(page, kPage);
  if (!markers) GTEST_SKIP() << "this kernel has no guard markers (Linux 6.13): each guard is a mapping";
  const size_t n = std::min<size_t>(test::max_map_count() / 2 + 1000, 70000);
  EXPECT_EXIT(
      {
        const size_t maps = test::mapping_count();
        std::vector<void*> v(n);
        for (size_t i = 0; i < n; i++) {
          v[i] = hardened_malloc(kHugeBlock);
          if (v[i] == nullptr) _exit(4);
          static_cast<char*>(v[i])[0] = 1;
        }
        if (test::mapping_count() > maps + 64) _exit(5);
        // The last one is guarded like the first.
        const size_t usable = ductile_malloc_usable_size(v[n - 1]);
        if (test::open_bytes(addr(v[n - 1]) + usable, addr(v[n - 1]) + usable + kPage) != 0) _exit(6);
        for (void* p : v) ductile_free(p);
        _exit(0);
      },
      ::testing::ExitedWithCode(0), "");
}

// Without hardened mode a huge block has no guard, and its life makes no
// mprotect (normal overcommit mode, where commit is no system call).
TEST(DefaultMode, HugeBlocksMakeNoMprotect) {
  ASSERT_TRUE(core::ensure_ready());
  if (core::g_hardened || core::rt().os.features().strict_overcommit)
    GTEST_SKIP() << "hardened build or strict overcommit";
  const uint64_t before = core::rt().os.counters().get(os::Call::kMprotect);
  void* p = ductile_malloc(kHugeBlock);
  const size_t usable = ductile_malloc_usable_size(p);
  std::memset(p, 1, usable);
  static_cast<volatile char*>(p)[usable] = 1;  // the headroom: no guard
  void* q = ductile_realloc(p, 2 * kHugeBlock);
  q = ductile_realloc(q, kHugeBlock + 4096);
  ductile_free(q);
  EXPECT_EQ(core::rt().os.counters().get(os::Call::kMprotect), before);
}

// Without hardened mode the cheap checks still report: a pointer that is
// not ours, one off the 8-byte grid, a huge or medium block freed twice.
TEST(DefaultMode, CheapChecksReport) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        int on_stack = 1;
        ductile_free(&on_stack);
      },
      kInvalid);
  EXPECT_DEATH(ductile_free(static_cast<char*>(ductile_malloc(64)) + 1), kInvalid);
  EXPECT_DEATH(ductile_free(static_cast<char*>(ductile_malloc(3 << 20)) + 4), kInvalid);
  EXPECT_DEATH(
      {
        void* p = ductile_malloc(3 << 20);
        ductile_free(p);
        ductile_free(p);
      },
      kDouble);
}

// Every medium and huge block freed twice is reported at the second free,
// in every mode: the first copy is in this thread's cache, went back to the
// chunk layer, or (huge) is a span kept for reuse. Allocations after the
// second free would otherwise hand the block out twice.
void free_twice_then_allocate(size_t size, bool flush) {
  void* p = ductile_malloc(size);
  ductile_free(p);
  if (flush) ductile_mallctl("thread.tcache.flush", nullptr, nullptr, nullptr, 0);
  ductile_free(p);
  void* a = ductile_malloc(size);
  void* b = ductile_malloc(size);
  // Not reached when the second free is found; a block handed out twice
  // exits distinctly.
  _exit(a == b ? 4 : 0);
}

TEST(DefaultMode, MediumAndHugeDoubleFreesAreFoundAtTheFree) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  for (size_t size : {size_t{20} << 10, size_t{64} << 10, size_t{1} << 20, size_t{3} << 20, size_t{4} << 20,
                      size_t{8} << 20, size_t{64} << 20})
    for (bool flush : {false, true}) {
      SCOPED_TRACE(testing::Message() << size << " bytes, flush " << flush);
      EXPECT_DEATH(free_twice_then_allocate(size, flush), kDouble);
    }
}

// A huge block freed into free space that its neighbours merged with (the
// aligned blocks before leave free extents all around): no extent begins at
// its address any more, and the second free, or a realloc, still says it
// was freed.
void free_or_realloc_after_merge(bool by_realloc) {
  for (size_t align = 1; align <= (size_t{64} << 20); align <<= 1)
    for (size_t size : {size_t{1}, size_t{4096}, size_t{70000}, size_t{3} << 20}) ductile_free(ductile_aligned_alloc(align, size));
  void* p = ductile_malloc(16 << 20);
  ductile_free(p);
  if (by_realloc) (void)ductile_realloc(p, 100);
  else ductile_free(p);
  _exit(0);
}

TEST(DefaultMode, AFreedHugeBlockMergedWithItsNeighboursIsStillFreed) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(free_or_realloc_after_merge(false), kDouble);
  EXPECT_DEATH(free_or_realloc_after_merge(true), "^ductile: realloc\\(\\): block freed already 0x[0-9a-f]+\n$");
}

TEST(DefaultMode, ReallocOfACachedMediumBlockSaysItWasFreed) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        void* p = ductile_malloc(64 << 10);
        ductile_free(p);
        (void)ductile_realloc(p, 128 << 10);
        _exit(0);
      },
      kReallocFreed);
}

// The second free from another thread, while the first copy sits in the
// first thread's cache.
TEST(DefaultMode, AMediumBlockFreedTwiceByTwoThreadsIsFound) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        void* p = ductile_malloc(64 << 10);
        ductile_free(p);
        std::thread t([p] { ductile_free(p); });
        t.join();
        _exit(0);
      },
      kDouble);
}

}  // namespace
}  // namespace ductile
