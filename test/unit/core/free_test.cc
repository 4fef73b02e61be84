// SPDX-License-Identifier: BSD-2-Clause
// free through the whole allocator (core/free.cc): foreign pointers, the page-map tags that free
// reads, and frees from other threads.
//
// This program links the library's objects, so ductile is also the allocator of the
// test process itself.
#include <atomic>
#include <cstdint>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "core/runtime.h"
#include "ductile/ductile.h"
#include "small/size_classes.h"
#include "support/patterns.h"
#include "support/sizes.h"

namespace ductile {
namespace {

using small::class_of;
using small::class_size;
using test::check;
using test::fill;

TEST(Malloc, FreeOfNullIsHarmlessAndOfForeignPointersFatal) {
  ductile_free(nullptr);
  int on_stack = 5;
  EXPECT_DEATH(ductile_free(&on_stack), "^ductile: free\\(\\): invalid pointer 0x[0-9a-f]+\n");
  EXPECT_EQ(on_stack, 5);
  EXPECT_EQ(ductile_malloc_usable_size(&on_stack), 0u);
  EXPECT_EQ(ductile_malloc_usable_size(nullptr), 0u);
}

// free() reads the class from the page-map tag: every page of a slab and the
// first page of a medium block carry their class's tag, interior and last
// pages of medium blocks and every page of a huge block none. Hardened
// builds number a slab's pages in the tag too (small::kSlabPageTagStep).
uint16_t tag_of(const void* p) { return chunk::PageMap::entry_tag(core::rt().chunks.lookup_entry(p)); }
uint16_t slab_tag(size_t cls, const chunk::Extent* e, uintptr_t a) {
  return static_cast<uint16_t>(small::free_tag(cls) + (a - e->base) / kPage * small::kSlabPageTagStep);
}

TEST(FreeTag, EveryClassIsTaggedWhereFreeLooks) {
  for (size_t c = 0; c < small::kNumClasses; c++) {
    const size_t size = test::request_of_class(c);
    if (class_size(c) >= core::g_huge_threshold) break;
    if (size == 0) continue;  // (a hardened build's 8-byte class)
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
      EXPECT_EQ(tag_of(p + class_size(c) - 1), 0u);  // last page: boundary only
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
  // The classes, and the usable size of `from` (a hardened build's: the request).
  const size_t from_cls = test::class_of_request(from), to_cls = test::class_of_request(to);
  const size_t from_usable = kHardened ? from : class_size(from_cls);
  char* p = static_cast<char*>(ductile_malloc(from));
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(tag_of(p), small::free_tag(from_cls));
  size_t got = ductile_xallocx(p, to, 0, 0);
  if (got >= to) EXPECT_EQ(tag_of(p), small::free_tag(to_cls));
  else EXPECT_EQ(tag_of(p), small::free_tag(from_cls));
  EXPECT_EQ(ductile_xallocx(p, from, 0, 0), from_usable);
  EXPECT_EQ(tag_of(p), small::free_tag(from_cls));
  EXPECT_EQ(ductile_malloc_usable_size(p), from_usable);
  ductile_free(p);
  // The freed block is reused by its class, not by the class it had grown to.
  void* q = ductile_malloc(from);
  EXPECT_EQ(q, p);
  EXPECT_EQ(ductile_malloc_usable_size(q), from_usable);
  ductile_free(q);
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

}  // namespace
}  // namespace ductile
