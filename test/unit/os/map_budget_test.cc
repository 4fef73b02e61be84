// SPDX-License-Identifier: BSD-2-Clause
// The mapping budget (os/map_budget.cc) on the fake kernel's model of vm.max_map_count: the
// limit read, mappings counted rarely, and a decommit that would split a mapping refused.
#include <cstring>

#include <gtest/gtest.h>

#include "os/os.h"
#include "support/fake_kernel.h"

namespace ductile {
namespace {

using os::Os;
using test::FakeKernel;

// The limit is read at the budget's first count, not at start-up: a
// program that makes a few mappings of ours never opens the file.
TEST(OsMapLimit, TheLimitIsReadAtTheFirstCount) {
  FakeKernel k;
  k.map_limit = 1000;
  k.thp = "always [madvise] never\n";
  Os os(k);
  char* p = static_cast<char*>(os.reserve(64 * kPage));
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(k.map_limit_reads(), 0u);
  EXPECT_EQ(os.map_budget().counts(), 0u);
  // Splits, until the first count: then the limit is read, once.
  size_t i = 1;
  for (; i < 64 && os.map_budget().counts() == 0; i += 2) (void)os.advise_huge_part(p + i * kPage, kPage);
  EXPECT_EQ(os.map_budget().counts(), 1u);
  EXPECT_EQ(k.map_limit_reads(), 1u);
  EXPECT_EQ(os.map_limit(), 1000u);
  for (; i < 64; i += 2) (void)os.advise_huge_part(p + i * kPage, kPage);
  EXPECT_EQ(k.map_limit_reads(), 1u);
  ASSERT_TRUE(os.unmap(p, 64 * kPage));
}

TEST(OsMapLimit, ReadsTheLimitAndCountsRarely) {
  FakeKernel k;
  k.map_limit = 1000;
  k.thp = "always [madvise] never\n";
  Os os(k);
  EXPECT_EQ(os.map_budget().counts(), 0u);  // no count at start-up
  EXPECT_EQ(k.map_limit_reads(), 0u);       // and no read of the limit
  EXPECT_EQ(os.map_limit(), 1000u);
  EXPECT_EQ(os.map_threshold(), 500u);
  EXPECT_EQ(k.map_limit_reads(), 1u);
  // Advice on every other page of a reservation: each splits it, until half
  // the limit; then none, and the rest stays the program's.
  constexpr size_t kPages = 2000;
  char* p = static_cast<char*>(os.reserve(kPages * kPage));
  ASSERT_NE(p, nullptr);
  size_t advised = 0;
  for (size_t i = 1; i < kPages; i += 2) advised += os.advise_huge_part(p + i * kPage, kPage);
  EXPECT_TRUE(os.maps_tight());
  EXPECT_GE(k.mappings(), 500u);
  EXPECT_LE(k.mappings(), 1000u * 5 / 8);
  EXPECT_EQ(k.map_refusals(), 0u);
  EXPECT_EQ(advised + os.counters().splits_avoided.load(), kPages / 2);
  // Each count (about 0.5 us a mapping) came after many calls.
  EXPECT_LE(os.map_budget().counts(), 40u);
  // Whole mappings are still advised: no split.
  char* q = static_cast<char*>(os.reserve(4 * kPage));
  EXPECT_TRUE(os.advise_huge(q, 4 * kPage));
  // The program lets its mappings go: the next counts see it.
  EXPECT_TRUE(os.unmap(p, kPages * kPage));
  for (int i = 0; i < 1000 && os.maps_tight(); i++) (void)os.advise_huge_part(q + kPage, kPage);
  EXPECT_FALSE(os.maps_tight());
  EXPECT_TRUE(os.unmap(q, 4 * kPage));
}

TEST(OsMapLimit, DecommitRefusedForTheLimitPurgesInstead) {
  FakeKernel k;
  k.overcommit = "2\n";
  k.map_limit = 10000;  // (a count comes after hundreds of calls)
  Os os(k);
  (void)os.probed_features();  // the probes' scratch mapping, before the limit
  char* p = static_cast<char*>(os.reserve(8 * kPage));
  ASSERT_NE(p, nullptr);
  ASSERT_TRUE(os.commit(p, 8 * kPage));
  std::memset(p, 'x', 8 * kPage);
  k.other_mappings = 10000 - k.mappings();  // the program holds the rest
  // PROT_NONE over the middle would split the mapping: refused, so the
  // pages are purged and the range stays committed.
  EXPECT_EQ(os.decommit(p + 2 * kPage, 2 * kPage), os::Decommit::kPurged);
  EXPECT_EQ(p[2 * kPage], 0);
  p[2 * kPage] = 1;  // still writable
  EXPECT_EQ(k.map_refusals(), 1u);
  EXPECT_TRUE(os.maps_tight());  // the refusal had the mappings counted
  // Now the split is not even tried.
  EXPECT_EQ(os.decommit(p + 5 * kPage, kPage), os::Decommit::kPurged);
  EXPECT_EQ(k.map_refusals(), 1u);
  // A whole mapping decommits as before.
  k.other_mappings = 0;
  EXPECT_TRUE(os.unmap(p, 8 * kPage));
}

}  // namespace
}  // namespace ductile
