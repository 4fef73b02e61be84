// SPDX-License-Identifier: BSD-2-Clause
// Huge growth under failures (huge/resize.cc): each system call on the way refused, the old
// block intact and nothing leaked.
#include <cerrno>

#include <gtest/gtest.h>

#include "chunk/chunk.h"
#include "huge/huge.h"
#include "support/fake_kernel.h"
#include "support/maps.h"
#include "unit/huge/huge_fixture.h"

namespace ductile {
namespace {

using chunk::Extent;
using test::HugeTest;
using test::Sys;
using test::fill;
using test::guarded;
using test::holds;
using test::kMiB;

// ---- failures of every system call on the way -------------------------------

struct Scenario {
  const char* name;
  bool strict;
  size_t reservation;
  bool busy_neighbour;
  size_t grow_to;
  bool guard = false;
};

void PrintTo(const Scenario& sc, std::ostream* os) { *os << sc.name; }

class HugeFailure : public HugeTest, public ::testing::WithParamInterface<Scenario> {};

TEST_P(HugeFailure, EachFailingCallLeavesTheOldBlockIntactAndNothingLeaks) {
  const Scenario sc = GetParam();
  const Sys kinds[] = {Sys::kMmap, Sys::kMunmap, Sys::kMprotect, Sys::kMremap, Sys::kMadvise};
  for (Sys sys : kinds) {
    for (int times : {1, 1000}) {  // that one call, or every call from then on
      for (int skip = 0; skip < 16; skip++) {
        kernel_.overcommit = sc.strict ? "2\n" : "0\n";
        make(sc.reservation, sc.guard ? guarded() : huge::Options());
        void* p = alloc(2 * kMiB);
        void* busy = sc.busy_neighbour ? alloc(2 * kMiB) : nullptr;
        fill(p, 2 * kMiB, 'o');
        Extent* e = extent(p);
        size_t before = kernel_.count(sys);
        kernel_.fail(sys, ENOMEM, times, skip);
        void* q = huge_->resize(e, sc.grow_to, kPage, false);
        const bool hit = kernel_.count(sys) - before > static_cast<size_t>(skip);
        kernel_.clear_failures();
        SCOPED_TRACE(::testing::Message() << sc.name << " sys " << static_cast<int>(sys) << " times "
                                          << times << " skip " << skip);
        if (q == nullptr) {
          // Intact: same place, same size, same bytes, still ours, still writable.
          ASSERT_EQ(chunks_->lookup(p), e);
          EXPECT_EQ(e->kind, chunk::ExtentKind::kHuge);
          EXPECT_EQ(e->usable, 2 * kMiB);
          EXPECT_TRUE(holds(p, 2 * kMiB, 'o'));
          fill(p, 2 * kMiB, 'p');
          q = p;
          if (sc.guard) {
            // (Past the guard page a refused call may leave another one.)
            EXPECT_EQ(test::open_bytes(e->base + e->usable, e->base + e->usable + kPage), 0u) << "guard lost";
          }
        } else {
          EXPECT_TRUE(holds(q, 2 * kMiB, 'o'));
          EXPECT_EQ(extent(q)->usable, sc.grow_to);
          fill(q, sc.grow_to, 'o');
          fill(q, 2 * kMiB, 'p');
          if (sc.guard) {
            Extent* t = extent(q);
            EXPECT_EQ(test::open_bytes(t->base + t->usable, t->base + t->usable + kPage), 0u) << "no guard";
          }
        }
        expect_consistent();
        // And it still works once the kernel agrees: grows again, and frees.
        void* r = huge_->resize(extent(q), 2 * sc.grow_to, kPage, false);
        ASSERT_NE(r, nullptr);
        EXPECT_TRUE(holds(r, 2 * kMiB, 'p'));
        free(r);
        if (busy) free(busy);
        expect_empty();
        if (!hit) break;  // no call of this kind was left to fail
      }
    }
  }
}

TEST_F(HugeTest, RefusedEverywhereTheResizeFailsAndTheBlockIsIntact) {
  // Fixed map refused, and no span to move into: nothing can serve.
  make(4 * kMiB);
  void* p = alloc(2 * kMiB);
  fill(p, 2 * kMiB, 'i');
  Extent* e = extent(p);
  kernel_.fail(Sys::kMmap, ENOMEM, 1000);
  EXPECT_EQ(huge_->resize(e, 16 * kMiB, kPage, false), nullptr);
  EXPECT_EQ(huge_->resize_in_place(e, 16 * kMiB, false), 2 * kMiB);
  kernel_.clear_failures();
  EXPECT_EQ(chunks_->lookup(p), e);
  EXPECT_EQ(e->usable, 2 * kMiB);
  EXPECT_TRUE(holds(p, 2 * kMiB, 'i'));
  expect_consistent();
  // Strict overcommit: the commit of the headroom, and of any target, refused.
  kernel_.overcommit = "2\n";
  make();
  p = alloc(2 * kMiB);
  fill(p, 2 * kMiB, 'j');
  e = extent(p);
  kernel_.fail(Sys::kMprotect, ENOMEM, 1000);
  EXPECT_EQ(huge_->resize(e, 3 * kMiB, kPage, false), nullptr);
  kernel_.clear_failures();
  EXPECT_EQ(e->usable, 2 * kMiB);
  EXPECT_TRUE(holds(p, 2 * kMiB, 'j'));
  fill(p, 2 * kMiB, 'k');
  ASSERT_EQ(huge_->resize(e, 3 * kMiB, kPage, false), p);
  free(p);
  expect_empty();
}

TEST_P(HugeFailure, AllocUnderFailuresKeepsNothing) {
  const Scenario sc = GetParam();
  for (Sys sys : {Sys::kMmap, Sys::kMprotect, Sys::kMadvise}) {
    kernel_.overcommit = sc.strict ? "2\n" : "0\n";
    make(sc.reservation, sc.guard ? guarded() : huge::Options());
    kernel_.fail(sys, ENOMEM, 1000);
    void* p = huge_->alloc(sc.grow_to, kPage, false);
    kernel_.clear_failures();
    if (p != nullptr) {
      fill(p, sc.grow_to, 'a');  // advice is best effort: the block is fine without it
      free(p);
    }
    expect_empty();
  }
}

INSTANTIATE_TEST_SUITE_P(
    Paths, HugeFailure,
    ::testing::Values(Scenario{"mremap", false, 256 * kMiB, true, 8 * kMiB},
                      Scenario{"fixed_map", false, 4 * kMiB, false, 16 * kMiB},
                      Scenario{"strict_headroom", true, 256 * kMiB, false, 4 * kMiB},
                      Scenario{"strict_mremap", true, 256 * kMiB, true, 8 * kMiB},
                      Scenario{"strict_fixed_map", true, 4 * kMiB, false, 16 * kMiB},
                      Scenario{"guard_headroom", false, 256 * kMiB, false, 3 * kMiB, true},
                      Scenario{"guard_neighbour", false, 256 * kMiB, false, 24 * kMiB, true},
                      Scenario{"guard_mremap", false, 256 * kMiB, true, 8 * kMiB, true},
                      Scenario{"guard_fixed_map", false, 4 * kMiB, false, 16 * kMiB, true},
                      Scenario{"guard_strict_neighbour", true, 256 * kMiB, false, 3 * kMiB, true},
                      Scenario{"guard_strict_mremap", true, 256 * kMiB, true, 8 * kMiB, true},
                      Scenario{"guard_strict_fixed_map", true, 4 * kMiB, false, 16 * kMiB, true}),
    [](const ::testing::TestParamInfo<Scenario>& i) { return std::string(i.param.name); });

}  // namespace
}  // namespace ductile
