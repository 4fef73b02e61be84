// SPDX-License-Identifier: BSD-2-Clause
// The OS layer (os/os.cc) against a fake kernel: feature probes, fallbacks that stick,
// batched purges, map-at-address without clobbering, guards, and the counters.
#include <sys/mman.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "os/os.h"
#include "support/fake_kernel.h"
#include "support/maps.h"
#include "unit/os/os_helpers.h"

namespace ductile {
namespace {

using os::Advice;
using os::Call;
using os::MapStatus;
using os::Os;
using os::Range;
using os::RemapMode;
using test::FakeKernel;
using test::Sys;
using test::scratch;

bool all_zero(const char* p, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (p[i] != 0) return false;
  return true;
}

// Every other page of a scratch area: n discontiguous one-page ranges.
std::vector<Range> every_other_page(char* base, size_t n) {
  std::vector<Range> r;
  for (size_t i = 0; i < n; i++) r.push_back({base + 2 * i * kPage, kPage});
  return r;
}

TEST(OsProbe, ThisKernelAnswers) {
  FakeKernel k;
  Os os(k);
  // The machines this project runs on: Linux 6.x with THP in madvise mode.
  EXPECT_TRUE(os.features().map_fixed_noreplace);
  EXPECT_TRUE(os.probed_features().batch_purge);
  EXPECT_TRUE(os.probed_features().madv_free);
  EXPECT_TRUE(os.probed_features().populate_write);
  EXPECT_EQ(os.thp_mode(), os::ThpMode::kMadvise);
  EXPECT_FALSE(os.features().strict_overcommit);
}

// The THP mode is read at its first use, once: a program whose first call
// grows nothing and advises nothing does not open the file.
TEST(OsProbe, TheThpModeIsReadAtItsFirstUse) {
  FakeKernel k;
  Os os(k);
  EXPECT_EQ(k.thp_reads(), 0u);
  EXPECT_EQ(os.thp_mode(), os::ThpMode::kMadvise);
  EXPECT_EQ(k.thp_reads(), 1u);
  EXPECT_EQ(os.thp_mode(), os::ThpMode::kMadvise);
  void* p = os.reserve(4 * kPage);
  ASSERT_NE(p, nullptr);
  EXPECT_TRUE(os.advise_huge(p, 4 * kPage));
  EXPECT_EQ(k.thp_reads(), 1u);
  ASSERT_TRUE(os.unmap(p, 4 * kPage));
}

TEST(OsProbe, ThpModeAndOvercommitFromSys) {
  FakeKernel k;
  k.thp = "[always] madvise never\n";
  k.overcommit = "2\n";
  Os os(k);
  EXPECT_EQ(os.thp_mode(), os::ThpMode::kAlways);
  EXPECT_TRUE(os.features().strict_overcommit);
  FakeKernel k2;
  k2.thp = "always madvise [never]\n";
  Os os2(k2);
  EXPECT_EQ(os2.thp_mode(), os::ThpMode::kNever);
}

TEST(OsProbe, OldKernelWithoutFeatures) {
  FakeKernel k;
  k.no_map_fixed_noreplace = true;
  k.process_madvise_errno = ENOSYS;
  k.madv_free_errno = EINVAL;
  k.populate_errno = EINVAL;
  Os os(k);
  EXPECT_FALSE(os.probed_features().batch_purge);
  EXPECT_FALSE(os.probed_features().madv_free);
  EXPECT_FALSE(os.probed_features().populate_write);
  // MAP_FIXED_NOREPLACE is assumed until a hint comes back elsewhere; that
  // stray mapping is given back, and the flag is not passed again.
  EXPECT_TRUE(os.features().map_fixed_noreplace);
  char* mine = scratch(2, 'q');
  EXPECT_EQ(os.reserve_at(mine, kPage), MapStatus::kOccupied);
  EXPECT_EQ(mine[0], 'q');
  EXPECT_FALSE(os.features().map_fixed_noreplace);
  EXPECT_EQ(k.count(Sys::kMmap), k.count(Sys::kMunmap));
  ::munmap(mine, 2 * kPage);
}

// A program that never purges nor prefaults makes none of the probes'
// calls: constructing the layer reads its files and maps nothing; the
// first purge probes, once, and a second purge does not.
TEST(OsProbe, ScratchProbesWaitForTheFirstPurge) {
  FakeKernel k;
  Os os(k);
  char* mine = static_cast<char*>(os.reserve(4 * kPage));
  ASSERT_NE(mine, nullptr);
  EXPECT_EQ(k.count(Sys::kMmap), 1u);  // the reservation alone
  EXPECT_EQ(k.count(Sys::kMadvise), 0u);
  EXPECT_EQ(k.count(Sys::kProcessMadvise), 0u);
  mine[0] = 1;
  Range r{mine, kPage};
  EXPECT_EQ(os.purge(&r, 1), 1u);
  EXPECT_EQ(mine[0], 0);
  const size_t probe_calls = k.count(Sys::kMmap) - 1 + k.count(Sys::kProcessMadvise) + k.count(Sys::kMadvise) - 1;
  EXPECT_GT(probe_calls, 0u);
  k.reset_calls();
  mine[0] = 1;
  EXPECT_EQ(os.purge(&r, 1), 1u);
  EXPECT_EQ(k.calls().size(), 1u);  // the purge's one madvise: no probe again
  EXPECT_TRUE(os.unmap(mine, 4 * kPage));
}

TEST(OsReserve, BadInputMakesNoCall) {
  FakeKernel k;
  Os os(k);
  k.reset_calls();
  EXPECT_EQ(os.reserve(0), nullptr);
  EXPECT_EQ(os.reserve(kPage + 1), nullptr);
  EXPECT_EQ(os.reserve_at(reinterpret_cast<void*>(kPage + 3), kPage), MapStatus::kFailed);
  EXPECT_EQ(os.reserve_at(reinterpret_cast<void*>(UINTPTR_MAX & ~(kPage - 1)), 2 * kPage), MapStatus::kFailed);
  EXPECT_FALSE(os.unmap(reinterpret_cast<void*>(kPage + 1), kPage));
  EXPECT_EQ(k.calls().size(), 0u);
}

TEST(OsReserve, ReserveIsReadWriteInNormalModeAndCommitIsFree) {
  FakeKernel k;
  Os os(k);
  k.reset_calls();
  os.counters().reset();
  char* p = static_cast<char*>(os.reserve(4 * kPage));
  ASSERT_NE(p, nullptr);
  EXPECT_TRUE(os.commit(p, 4 * kPage));
  p[0] = 1;
  p[4 * kPage - 1] = 2;
  EXPECT_EQ(k.count(Sys::kMprotect), 0u);
  EXPECT_EQ(os.counters().get(Call::kMmap), 1u);
  EXPECT_TRUE(os.unmap(p, 4 * kPage));
}

TEST(OsReserve, StrictOvercommitCommitsWithMprotect) {
  FakeKernel k;
  k.overcommit = "2\n";
  Os os(k);
  k.reset_calls();
  os.counters().reset();
  char* p = static_cast<char*>(os.reserve(4 * kPage));
  ASSERT_NE(p, nullptr);
  EXPECT_TRUE(os.commit(p, 2 * kPage));
  p[0] = 1;
  EXPECT_EQ(k.count(Sys::kMprotect), 1u);
  EXPECT_EQ(os.decommit(p, 2 * kPage), os::Decommit::kDecommitted);
  EXPECT_EQ(os.counters().get(Call::kMmap), 2u);  // reserve + PROT_NONE over the range
  EXPECT_TRUE(os.unmap(p, 4 * kPage));
}

TEST(OsReserveAt, MapsExactlyThereWhenFree) {
  FakeKernel k;
  Os os(k);
  char* probe = static_cast<char*>(os.reserve(8 * kPage));
  ASSERT_TRUE(os.unmap(probe, 8 * kPage));
  EXPECT_EQ(os.reserve_at(probe + 2 * kPage, 4 * kPage), MapStatus::kMapped);
  probe[2 * kPage] = 7;
  EXPECT_TRUE(os.unmap(probe + 2 * kPage, 4 * kPage));
}

class OsReserveAtOccupied : public ::testing::TestWithParam<bool> {};

TEST_P(OsReserveAtOccupied, NeverClobbers) {
  FakeKernel k;
  k.no_map_fixed_noreplace = GetParam();
  Os os(k);
  char* mine = scratch(4, 'q');
  k.reset_calls();
  EXPECT_EQ(os.reserve_at(mine + kPage, 2 * kPage), MapStatus::kOccupied);
  for (size_t i = 0; i < 4 * kPage; i++) ASSERT_EQ(mine[i], 'q');
  // With MAP_FIXED_NOREPLACE: one refused call. Without: the hint missed and
  // the misplaced mapping was unmapped again.
  EXPECT_EQ(k.count(Sys::kMmap), 1u);
  EXPECT_EQ(k.count(Sys::kMunmap), GetParam() ? 1u : 0u);
  ::munmap(mine, 4 * kPage);
}

INSTANTIATE_TEST_SUITE_P(WithAndWithoutNoreplace, OsReserveAtOccupied, ::testing::Bool());

TEST(OsReserveAt, KernelRefusalIsFailedNotOccupied) {
  FakeKernel k;
  Os os(k);
  k.fail(Sys::kMmap, ENOMEM);
  EXPECT_EQ(os.reserve_at(reinterpret_cast<void*>(uintptr_t{3} << 40), kPage), MapStatus::kFailed);
}

TEST(OsPurge, SingleRangeIsOneMadvise) {
  FakeKernel k;
  Os os(k);
  char* p = scratch(2);
  (void)os.probed_features();
  k.reset_calls();
  Range r{p, 2 * kPage};
  EXPECT_EQ(os.purge(&r, 1), 1u);
  EXPECT_EQ(k.count(Sys::kMadvise), 1u);
  EXPECT_EQ(k.count(Sys::kProcessMadvise), 0u);
  EXPECT_TRUE(all_zero(p, 2 * kPage));
  ::munmap(p, 2 * kPage);
}

class OsBatchPurge : public ::testing::TestWithParam<size_t> {};

TEST_P(OsBatchPurge, NRangesTakeCeilNOverBatchCalls) {
  const size_t n = GetParam();
  FakeKernel k;
  Os os(k);
  ASSERT_TRUE(os.probed_features().batch_purge);
  char* p = scratch(2 * n);
  auto ranges = every_other_page(p, n);
  k.reset_calls();
  EXPECT_EQ(os.purge(ranges.data(), n), n);
  EXPECT_EQ(k.count(Sys::kProcessMadvise), (n + os::kPurgeBatch - 1) / os::kPurgeBatch);
  EXPECT_EQ(k.count(Sys::kMadvise), 0u);
  for (size_t i = 0; i < n; i++) {
    EXPECT_TRUE(all_zero(p + 2 * i * kPage, kPage));
    EXPECT_EQ(p[(2 * i + 1) * kPage], 'x');  // the pages between were left alone
  }
  EXPECT_EQ(os.counters().purged_ranges.load(), n);
  ::munmap(p, 2 * n * kPage);
}

INSTANTIATE_TEST_SUITE_P(Sizes, OsBatchPurge, ::testing::Values(2, 16, 17, 40, 100));

TEST(OsBatchPurge, MissingCallFallsBackToOneMadvisePerRange) {
  FakeKernel k;
  k.process_madvise_errno = ENOSYS;
  Os os(k);
  EXPECT_FALSE(os.probed_features().batch_purge);
  char* p = scratch(80);
  auto ranges = every_other_page(p, 40);
  k.reset_calls();
  EXPECT_EQ(os.purge(ranges.data(), 40), 40u);
  EXPECT_EQ(k.count(Sys::kMadvise), 40u);
  EXPECT_EQ(k.count(Sys::kProcessMadvise), 0u);
  for (size_t i = 0; i < 40; i++) EXPECT_TRUE(all_zero(p + 2 * i * kPage, kPage));
  ::munmap(p, 80 * kPage);
}

TEST(OsBatchPurge, RefusalAtRunTimeSticks) {
  FakeKernel k;
  Os os(k);
  ASSERT_TRUE(os.probed_features().batch_purge);
  char* p = scratch(80);
  auto ranges = every_other_page(p, 40);
  k.reset_calls();
  k.fail(Sys::kProcessMadvise, EPERM);  // e.g. a seccomp policy
  EXPECT_EQ(os.purge(ranges.data(), 40), 40u);
  EXPECT_EQ(k.count(Sys::kProcessMadvise), 1u);
  EXPECT_EQ(k.count(Sys::kMadvise), 40u);
  EXPECT_FALSE(os.probed_features().batch_purge);
  k.reset_calls();
  std::memset(p, 'x', 80 * kPage);
  EXPECT_EQ(os.purge(ranges.data(), 40), 40u);
  EXPECT_EQ(k.count(Sys::kProcessMadvise), 0u);  // not retried
  EXPECT_EQ(k.count(Sys::kMadvise), 40u);
  for (size_t i = 0; i < 40; i++) EXPECT_TRUE(all_zero(p + 2 * i * kPage, kPage));
  ::munmap(p, 80 * kPage);
}

TEST(OsBatchPurge, PidfdOpenWhenPidfdSelfIsMissing) {
  FakeKernel k;
  k.no_pidfd_self = true;
  Os os(k);
  EXPECT_TRUE(os.probed_features().batch_purge);
  EXPECT_GE(os.probed_features().self_pidfd, 0);
  EXPECT_EQ(k.count(Sys::kPidfdOpen), 1u);
  char* p = scratch(8);
  auto ranges = every_other_page(p, 4);
  k.reset_calls();
  EXPECT_EQ(os.purge(ranges.data(), 4), 4u);
  EXPECT_EQ(k.count(Sys::kProcessMadvise), 1u);
  for (size_t i = 0; i < 4; i++) EXPECT_TRUE(all_zero(p + 2 * i * kPage, kPage));
  ::munmap(p, 8 * kPage);
}

TEST(OsBatchPurge, NeitherPidfdSelfNorPidfdOpen) {
  FakeKernel k;
  k.no_pidfd_self = true;
  k.pidfd_open_errno = ENOSYS;
  Os os(k);
  EXPECT_FALSE(os.probed_features().batch_purge);
}

TEST(OsBatchPurge, ShortReturnsAreResumed) {
  FakeKernel k;
  Os os(k);
  ASSERT_TRUE(os.probed_features().batch_purge);
  k.process_madvise_max_bytes = 3 * kPage;  // stops inside the second two-page range
  char* p = scratch(20);
  std::vector<Range> ranges;
  for (size_t i = 0; i < 5; i++) ranges.push_back({p + 4 * i * kPage, 2 * kPage});
  k.reset_calls();
  EXPECT_EQ(os.purge(ranges.data(), 5), 5u);
  EXPECT_EQ(k.count(Sys::kMadvise), 0u);
  EXPECT_EQ(k.count(Sys::kProcessMadvise), 4u);  // 10 pages, 3 per call
  for (size_t i = 0; i < 5; i++) {
    EXPECT_TRUE(all_zero(p + 4 * i * kPage, 2 * kPage));
    EXPECT_EQ(p[(4 * i + 2) * kPage], 'x');
  }
  ::munmap(p, 20 * kPage);
}

TEST(OsBatchPurge, FailurePartWayReportsWhatWasDone) {
  FakeKernel k;
  k.process_madvise_errno = ENOSYS;
  Os os(k);
  char* p = scratch(8);
  auto ranges = every_other_page(p, 4);
  (void)os.probed_features();
  k.fail(Sys::kMadvise, ENOMEM, 1, 2);  // the third range fails
  EXPECT_EQ(os.purge(ranges.data(), 4), 2u);
  EXPECT_TRUE(all_zero(p, kPage));
  EXPECT_EQ(p[4 * kPage], 'x');  // not purged, not lost
  ::munmap(p, 8 * kPage);
}

TEST(OsPurge, MadvFreeRefusedFallsBackToDontneedAndSticks) {
  FakeKernel k;
  Os os(k);
  ASSERT_TRUE(os.probed_features().madv_free);
  k.madv_free_errno = EINVAL;
  char* p = scratch(1);
  Range r{p, kPage};
  EXPECT_EQ(os.purge(&r, 1, Advice::kFree), 1u);
  EXPECT_FALSE(os.probed_features().madv_free);
  EXPECT_TRUE(all_zero(p, kPage));
  ::munmap(p, kPage);
}

TEST(OsRemap, InPlaceMayMoveAndFixedKeepContents) {
  FakeKernel k;
  Os os(k);
  char* p = static_cast<char*>(os.reserve(2 * kPage));
  std::memset(p, 'a', 2 * kPage);
  char* blocker = static_cast<char*>(::mmap(p + 2 * kPage, kPage, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | 0x100000, -1, 0));
  if (blocker == p + 2 * kPage) {
    EXPECT_EQ(os.remap(p, 2 * kPage, 4 * kPage, RemapMode::kInPlace), nullptr);
    EXPECT_EQ(p[0], 'a');  // intact after the refusal
  }
  char* q = static_cast<char*>(os.remap(p, 2 * kPage, 4 * kPage, RemapMode::kMayMove));
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q[0], 'a');
  EXPECT_EQ(q[2 * kPage - 1], 'a');
  char* target = static_cast<char*>(os.reserve(8 * kPage));
  char* r = static_cast<char*>(os.remap(q, 4 * kPage, 8 * kPage, RemapMode::kFixed, target));
  EXPECT_EQ(r, target);
  EXPECT_EQ(r[0], 'a');
  EXPECT_EQ(os.remap(r, kPage, kPage, RemapMode::kFixed, nullptr), nullptr);
  EXPECT_EQ(os.counters().get(Call::kMremap), blocker == p + 2 * kPage ? 3u : 2u);
  ::munmap(r, 8 * kPage);
  if (blocker != MAP_FAILED) ::munmap(blocker, kPage);
}

TEST(OsAdvice, HugePageAdviceOnlyInMadviseMode) {
  for (const char* mode : {"always madvise [never]\n", "[always] madvise never\n", "always [madvise] never\n"}) {
    FakeKernel k;
    k.thp = mode;
    Os os(k);
    char* p = scratch(512);
    k.reset_calls();
    EXPECT_TRUE(os.advise_huge(p, 512 * kPage));
    bool madvise_mode = os.thp_mode() == os::ThpMode::kMadvise;
    EXPECT_EQ(k.count(Sys::kMadvise), madvise_mode ? 1u : 0u) << mode;
    ::munmap(p, 512 * kPage);
  }
}

TEST(OsAdvice, PopulateWriteAndItsStickyFallback) {
  FakeKernel k;
  Os os(k);
  char* p = static_cast<char*>(os.reserve(4 * kPage));
  EXPECT_TRUE(os.populate(p, 4 * kPage));
  EXPECT_TRUE(all_zero(p, 4 * kPage));
  k.populate_errno = EINVAL;
  EXPECT_FALSE(os.populate(p, 4 * kPage));
  EXPECT_FALSE(os.probed_features().populate_write);
  k.reset_calls();
  EXPECT_FALSE(os.populate(p, 4 * kPage));
  EXPECT_EQ(k.count(Sys::kMadvise), 0u);
  (void)os.unmap(p, 4 * kPage);
}

TEST(OsCounters, CountEveryCallByKind) {
  FakeKernel k;
  Os os(k);
  (void)os.probed_features();
  os.counters().reset();
  void* p = os.reserve(kPage);
  Range r{p, kPage};
  (void)os.purge(&r, 1);
  (void)os.unmap(p, kPage);
  EXPECT_EQ(os.counters().get(Call::kMmap), 1u);
  EXPECT_EQ(os.counters().get(Call::kMadvise), 1u);
  EXPECT_EQ(os.counters().get(Call::kMunmap), 1u);
  EXPECT_EQ(os.counters().total(), 3u);
  EXPECT_STREQ(os::call_name(Call::kProcessMadvise), "process_madvise");
}

TEST(OsFork, ChildReprobesItsOwnPidfd) {
  FakeKernel k;
  k.no_pidfd_self = true;
  Os os(k);
  int parent_fd = os.probed_features().self_pidfd;
  ASSERT_GE(parent_fd, 0);
  os.after_fork_in_child();  // as the child's fork handler would
  EXPECT_EQ(k.count(Sys::kPidfdOpen), 1u);  // the child's first purge probes, not the fork
  EXPECT_TRUE(os.probed_features().batch_purge);
  EXPECT_EQ(k.count(Sys::kPidfdOpen), 2u);
}

// A probe made late can find its scratch mapping refused (at the mapping
// limit, or out of commit charge): that purge is done without the probed
// features, and the next one asks again.
TEST(OsProbe, ARefusedScratchMappingIsAskedForAgain) {
  FakeKernel k;
  Os os(k);
  char* p = scratch(2);
  Range r{p, kPage};
  k.fail(Sys::kMmap, ENOMEM);
  EXPECT_EQ(os.purge(&r, 1, Advice::kFree), 1u);
  EXPECT_TRUE(all_zero(p, kPage));  // MADV_DONTNEED: the probe told nothing
  EXPECT_EQ(k.count(Sys::kMmap), 1u);
  EXPECT_EQ(k.count(Sys::kMadvise), 1u);
  p[0] = 'y';
  EXPECT_EQ(os.purge(&r, 1), 1u);
  EXPECT_EQ(k.count(Sys::kMmap), 2u);  // asked again, and mapped
  EXPECT_EQ(k.count(Sys::kMunmap), 1u);
  EXPECT_TRUE(os.features().madv_free);
  EXPECT_TRUE(os.features().batch_purge);
  EXPECT_EQ(p[0], 0);
  ::munmap(p, 2 * kPage);
}

// Threads that make their first purges at once: one of them probes, once;
// every purge is done, with or without the probed features.
TEST(OsProbe, ConcurrentFirstPurgesProbeOnce) {
  FakeKernel k;
  Os os(k);
  constexpr int kThreads = 8;
  constexpr size_t kRanges = 4;
  std::vector<char*> areas;
  for (int t = 0; t < kThreads; t++) areas.push_back(scratch(2 * kRanges));
  std::atomic<int> ready{0};
  std::atomic<size_t> purged{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; t++) {
    threads.emplace_back([&, t] {
      auto ranges = every_other_page(areas[t], kRanges);
      ready.fetch_add(1);
      while (ready.load() < kThreads) {
      }
      purged.fetch_add(os.purge(ranges.data(), kRanges, t % 2 ? Advice::kFree : Advice::kDontNeed));
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(purged.load(), kThreads * kRanges);
  // The probe's scratch mapping is the layer's one mmap here.
  EXPECT_EQ(k.count(Sys::kMmap), 1u);
  EXPECT_EQ(k.count(Sys::kMunmap), 1u);
  EXPECT_TRUE(os.probed_features().batch_purge);
  for (int t = 0; t < kThreads; t++) {
    for (size_t i = 0; i < kRanges; i++) {
      // MADV_FREE may leave a page until memory is short; DONTNEED zeroes it.
      if (t % 2 == 0) {
        EXPECT_TRUE(all_zero(areas[t] + 2 * i * kPage, kPage));
      }
      EXPECT_EQ(areas[t][(2 * i + 1) * kPage], 'x');
    }
    ::munmap(areas[t], 2 * kRanges * kPage);
  }
}

// ---- guards (hardened mode's huge blocks), normal overcommit -------------------

// `pages` pages reserved through the Os and filled with 'x'.
char* guard_area(Os& os, size_t pages) {
  char* p = static_cast<char*>(os.reserve(pages * kPage));
  EXPECT_NE(p, nullptr);
  if (p != nullptr) std::memset(p, 'x', pages * kPage);
  return p;
}

bool pages_hold(const char* p, size_t first, size_t n, char c) {
  for (size_t i = first * kPage; i < (first + n) * kPage; i++)
    if (p[i] != c) return false;
  return true;
}

// Where the kernel has guard markers (Linux 6.13) a guard is one madvise and
// splits no mapping -- with mprotect each guarded block cost two, and the
// mapping limit capped how many a program could hold -- and lifting it over
// a wider range leaves the other pages as they were.
TEST(OsGuard, AGuardIsAMarkerThatSplitsNoMapping) {
  FakeKernel k;
  Os os(k);
  char* p = guard_area(os, 8);
  ASSERT_NE(p, nullptr);
  const uintptr_t lo = addr(p), hi = addr(p) + 8 * kPage;
  const size_t maps = test::mapping_count(lo, hi);
  k.reset_calls();
  ASSERT_TRUE(os.guard(p + 3 * kPage, kPage));
  if (!os.guard_markers()) {
    // A kernel before 6.13: mprotect, as the fallback tests below check.
    EXPECT_EQ(k.count(Sys::kMprotect), 1u);
    EXPECT_TRUE(os.unguard(p + 3 * kPage, kPage));
    EXPECT_TRUE(os.unmap(p, 8 * kPage));
    GTEST_SKIP() << "this kernel has no guard markers (Linux 6.13)";
  }
  EXPECT_EQ(k.count(Sys::kMadvise), 1u);
  EXPECT_EQ(k.count(Sys::kMprotect), 0u);
  EXPECT_EQ(test::mapping_count(lo, hi), maps);
  EXPECT_EQ(test::guard_marked_pages(addr(p), addr(p) + 8 * kPage), 1u);
  EXPECT_EQ(test::open_bytes(addr(p), addr(p) + 8 * kPage), 7 * kPage);
  EXPECT_DEATH(*static_cast<volatile char*>(p + 3 * kPage) = 1, "");
  EXPECT_TRUE(pages_hold(p, 0, 3, 'x'));
  EXPECT_TRUE(pages_hold(p, 4, 4, 'x'));
  k.reset_calls();
  ASSERT_TRUE(os.unguard(p + 2 * kPage, 4 * kPage));
  EXPECT_EQ(k.count(Sys::kMadvise), 1u);
  EXPECT_EQ(k.count(Sys::kMprotect), 0u);
  EXPECT_EQ(test::open_bytes(addr(p), addr(p) + 8 * kPage), 8 * kPage);
  EXPECT_TRUE(pages_hold(p, 0, 3, 'x'));
  EXPECT_TRUE(pages_hold(p, 3, 1, 0));  // the marker dropped the page
  EXPECT_TRUE(pages_hold(p, 4, 4, 'x'));
  p[3 * kPage] = 1;
  EXPECT_TRUE(os.unmap(p, 8 * kPage));
}

// A kernel that refuses markers from the first guard on (before 6.13):
// mprotect makes every guard, tried once, and lifts them.
TEST(OsGuard, WithoutMarkersMprotectMakesEveryGuard) {
  FakeKernel k;
  k.guard_markers_errno = EINVAL;
  Os os(k);
  char* p = guard_area(os, 8);
  ASSERT_NE(p, nullptr);
  k.reset_calls();
  errno = 0;
  ASSERT_TRUE(os.guard(p + 1 * kPage, kPage));
  ASSERT_TRUE(os.guard(p + 5 * kPage, kPage));
  EXPECT_EQ(errno, 0);
  EXPECT_FALSE(os.guard_markers());
  EXPECT_EQ(k.count(Sys::kMadvise), 1u);  // the one refusal
  EXPECT_EQ(k.count(Sys::kMprotect), 2u);
  EXPECT_EQ(test::open_bytes(addr(p), addr(p) + 8 * kPage), 6 * kPage);
  k.reset_calls();
  ASSERT_TRUE(os.unguard(p, 8 * kPage));
  EXPECT_EQ(k.count(Sys::kMadvise), 0u);
  EXPECT_EQ(k.count(Sys::kMprotect), 1u);
  EXPECT_EQ(test::open_bytes(addr(p), addr(p) + 8 * kPage), 8 * kPage);
  EXPECT_TRUE(pages_hold(p, 0, 8, 'x'));  // mprotect keeps the pages
  EXPECT_TRUE(os.unmap(p, 8 * kPage));
}

// Markers taken, then one refused (a locked mapping, mlockall): that guard
// is made by mprotect, and unguard lifts both kinds.
TEST(OsGuard, ARefusedMarkerAfterOthersIsMadeByMprotect) {
  FakeKernel k;
  Os os(k);
  char* p = guard_area(os, 8);
  ASSERT_NE(p, nullptr);
  ASSERT_TRUE(os.guard(p + 1 * kPage, kPage));
  if (!os.guard_markers()) {
    EXPECT_TRUE(os.unguard(p + 1 * kPage, kPage));
    EXPECT_TRUE(os.unmap(p, 8 * kPage));
    GTEST_SKIP() << "this kernel has no guard markers (Linux 6.13)";
  }
  k.guard_markers_errno = EINVAL;
  k.reset_calls();
  ASSERT_TRUE(os.guard(p + 5 * kPage, kPage));
  EXPECT_EQ(k.count(Sys::kMprotect), 1u);
  EXPECT_EQ(test::open_bytes(addr(p), addr(p) + 8 * kPage), 6 * kPage);
  k.guard_markers_errno = 0;
  ASSERT_TRUE(os.guard(p + 6 * kPage, kPage));  // markers again
  EXPECT_TRUE(os.guard_markers());
  k.reset_calls();
  ASSERT_TRUE(os.unguard(p, 8 * kPage));
  EXPECT_EQ(k.count(Sys::kMadvise), 1u);
  EXPECT_EQ(k.count(Sys::kMprotect), 1u);
  EXPECT_EQ(test::open_bytes(addr(p), addr(p) + 8 * kPage), 8 * kPage);
  EXPECT_TRUE(os.unmap(p, 8 * kPage));
}

// Any other refusal (ENOMEM: no page tables) fails the guard; nothing falls
// back, nothing is left half done, errno is the caller's.
TEST(OsGuard, ARefusedGuardFailsWithNothingChanged) {
  FakeKernel k;
  Os os(k);
  char* p = guard_area(os, 4);
  ASSERT_NE(p, nullptr);
  k.fail(Sys::kMadvise, ENOMEM);
  k.fail(Sys::kMprotect, ENOMEM);
  errno = 0;
  EXPECT_FALSE(os.guard(p + kPage, kPage));
  EXPECT_EQ(errno, 0);
  EXPECT_EQ(test::open_bytes(addr(p), addr(p) + 4 * kPage), 4 * kPage);
  EXPECT_TRUE(pages_hold(p, 0, 4, 'x'));
  EXPECT_TRUE(os.unmap(p, 4 * kPage));
}

}  // namespace
}  // namespace ductile
