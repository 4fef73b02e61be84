// SPDX-License-Identifier: BSD-2-Clause
// Purge and decay in the chunk layer (chunk/decay.cc): decay under a fake clock and its budget,
// the doorbell, batched and failed purges, and purges near the mapping limit.
#include <pthread.h>
#include <sys/mman.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include <gtest/gtest.h>

#include "chunk/chunk.h"
#include "support/fake_clock.h"
#include "support/fake_kernel.h"
#include "support/layers.h"
#include "support/maps.h"
#include "unit/chunk/chunk_fixture.h"

namespace ductile {
namespace {

using chunk::Allocation;
using chunk::Extent;
using chunk::GrowPath;
using test::ChunkTest;
using test::Sys;
using test::kMiB;

TEST_F(ChunkTest, DecayPurgesOnlyAfterTheDecayTime) {
  Extent* e = alloc(8 * kPage);
  uintptr_t base = e->base;
  std::memset(ptr(base), 'd', 8 * kPage);
  chunks_->free(e);
  clock_.advance_ms(500);
  EXPECT_EQ(chunks_->decay(), 0u);
  EXPECT_EQ(chunks_->stats().dirty, 8 * kPage);
  EXPECT_EQ(static_cast<char*>(ptr(base))[0], 'd');
  clock_.advance_ms(600);
  EXPECT_EQ(chunks_->decay(), 8 * kPage);
  chunk::ChunkStats s = chunks_->stats();
  EXPECT_EQ(s.dirty, 0u);
  EXPECT_EQ(s.purged_bytes, 8 * kPage);
  EXPECT_EQ(static_cast<char*>(ptr(base))[0], 0);
  // A purged extent is handed out as zeroed.
  Allocation a = chunks_->alloc(8 * kPage);
  EXPECT_TRUE(a.zeroed);
}

TEST_F(ChunkTest, DecayRunsFromTheFreePath) {
  Extent* old = alloc(8 * kPage);
  Extent* guard = alloc(kPage);  // keeps `old` and `e` from coalescing
  Extent* e = alloc(kPage);
  chunks_->free(old);
  clock_.advance_ms(1500);
  size_t before = os_->counters().get(os::Call::kMadvise);
  chunks_->free(e);  // notices that `old` is past its decay time
  EXPECT_EQ(os_->counters().get(os::Call::kMadvise) - before, 1u);
  EXPECT_EQ(chunks_->stats().dirty, kPage);
  chunks_->free(guard);
}

// Records of extents whose boundaries fall inside a 2 MiB chunk write its
// page of page-map slots. Once free space has merged them away, those pages
// hold zeroes only: they go back to the kernel with decay -- not in the
// same quarter of the decay time (at least a second) as they were last
// written, so a page written again soon after is not faulted in anew --
// and at once on trim. Before, every such page stayed resident for good:
// 2 MiB per GiB of address space that huge blocks cycled through.
TEST_F(ChunkTest, PageMapPagesThatFreeSpaceNoLongerNeedsGoBackWithDecay) {
  make(256 * kMiB);
  constexpr int kBlocks = 40;
  std::vector<Extent*> v;
  for (int i = 0; i < kBlocks; i++) v.push_back(alloc(kHugePage + (i % 7 + 1) * kPage));
  Extent* keep = alloc(kPage);  // an allocator call that does not touch the others
  const size_t written = chunks_->stats().map_pages;
  EXPECT_GE(written, size_t{kBlocks / 2}) << "boundaries inside chunks write their pages of slots";
  for (Extent* e : v) chunks_->free(e);
  EXPECT_LE(chunks_->stats().dirty_extents, 2u);  // merged: their records are zeroes now
  const size_t records_left = 8;                  // what the few free extents left may hold
  EXPECT_GE(chunks_->stats().map_pages, written) << "nothing goes back at once";

  auto call = [&] {  // an allocator call: a step of decay when one is due
    chunks_->free(keep);
    keep = alloc(kPage);
  };
  // Less than a pass period later: nothing given back.
  clock_.advance_ms(500);
  for (int i = 0; i < 10; i++) call();
  EXPECT_EQ(chunks_->stats().map_released, 0u);
  // The first pass finds the pages written since the last; the next gives
  // them back, 64 per call.
  for (int pass = 0; pass < 2; pass++) {
    clock_.advance_ms(1000);
    for (int i = 0; i < 10; i++) call();
  }
  const chunk::ChunkStats s = chunks_->stats();
  EXPECT_LE(s.map_pages, records_left);
  EXPECT_GE(s.map_released, (written - records_left) * kPage);
  EXPECT_EQ(os_->counters().purged_bytes.load() - s.purged_bytes, s.map_released)
      << "the OS layer counts them as purged";

  // trim() gives back what holds only zeroes at once, written just now or not.
  v.clear();
  for (int i = 0; i < kBlocks; i++) v.push_back(alloc(kHugePage + (i % 7 + 1) * kPage));
  EXPECT_GE(chunks_->stats().map_pages, size_t{kBlocks / 2});
  for (Extent* e : v) chunks_->free(e);
  (void)chunks_->trim();
  EXPECT_LE(chunks_->stats().map_pages, records_left);
  chunks_->free(keep);
}

// A free that comes due for decay purges at most one step's budget (one
// huge page) inside that call; the next calls go on from there without
// waiting for the next quarter of the decay time, and the background
// thread's decay() takes everything. Before, the one call purged all 32 MiB.
TEST_F(ChunkTest, DecayFromACallPurgesAtMostItsBudgetAndTheNextCallsGoOn) {
  constexpr size_t kBudget = 2 * kMiB;  // chunk::Options::decay_step_bytes
  std::vector<Extent*> v;
  for (int i = 0; i < 8; i++) {
    v.push_back(alloc(4 * kMiB));
    std::memset(ptr(v.back()->base), 'b', 4 * kMiB);
    v.push_back(alloc(kPage));  // keeps them apart: eight dirty extents of 4 MiB
  }
  Extent* e = alloc(kPage);
  for (size_t i = 0; i < v.size(); i += 2) chunks_->free(v[i]);
  clock_.advance_ms(1500);
  // Every free and alloc from now on notices old dirty extents.
  size_t calls = 0;
  while (chunks_->stats().purged_bytes < 32 * kMiB && calls < 100) {
    uint64_t before = chunks_->stats().purged_bytes;
    if (calls % 2 == 0) chunks_->free(e);
    else e = alloc(kPage);
    EXPECT_LE(chunks_->stats().purged_bytes - before, kBudget) << "call " << calls;
    calls++;
  }
  EXPECT_EQ(chunks_->stats().purged_bytes, 32 * kMiB);
  EXPECT_EQ(calls, 32 * kMiB / kBudget);  // no call wasted, and no wait between them
  if (calls % 2 == 0) chunks_->free(e);
  // The background thread's step is not bounded: it holds no lock.
  for (size_t i = 0; i < v.size(); i += 2) {
    v[i] = alloc(4 * kMiB);
    std::memset(ptr(v[i]->base), 'b', 4 * kMiB);
  }
  for (size_t i = 0; i < v.size(); i += 2) chunks_->free(v[i]);
  clock_.advance_ms(1500);
  EXPECT_GE(chunks_->decay(), 32 * kMiB);
  EXPECT_EQ(chunks_->stats().dirty, 0u);
  for (size_t i = 1; i < v.size(); i += 2) chunks_->free(v[i]);
}

// decay_ms:0: every free purges, also several in one clock tick (the free
// path's rate limit used to leave all but the first dirty, for good in a
// program that then went quiet).
TEST_F(ChunkTest, ZeroDecayPurgesEveryFree) {
  make_chunks(64 * kMiB, 0);
  Extent* v[4];
  for (auto& e : v) {
    e = alloc(8 * kPage);
    std::memset(ptr(e->base), 'z', 8 * kPage);
  }
  for (Extent* e : v) {
    chunks_->free(e);  // the clock does not move
    EXPECT_EQ(chunks_->stats().dirty, 0u);
  }
  EXPECT_EQ(chunks_->stats().purged_bytes, 4 * 8 * kPage);
}

// The background thread's doorbell: rings once when the dirty bytes plus
// what upper layers noted reach the armed amount, then stays disarmed.
TEST_F(ChunkTest, DoorbellRingsOnceWhenEnoughAwaitsDecay) {
  EXPECT_FALSE(chunks_->take_signal());
  Extent* a = alloc(kMiB);
  Extent* guard = alloc(kPage);
  Extent* b = alloc(kMiB);
  chunks_->free(a);
  EXPECT_FALSE(chunks_->take_signal());  // not armed
  chunks_->arm(2 * kMiB + 64 * kPage);
  chunks_->note_retained(32 * kPage);
  EXPECT_FALSE(chunks_->take_signal());
  chunks_->free(b);  // 2 MiB dirty + 32 pages noted: not yet
  EXPECT_FALSE(chunks_->take_signal());
  chunks_->note_retained(32 * kPage);  // a note alone counts only the notes
  EXPECT_FALSE(chunks_->take_signal());
  chunks_->free(guard);  // the next free counts both: now
  EXPECT_TRUE(chunks_->take_signal());
  EXPECT_FALSE(chunks_->take_signal());  // read once
  chunks_->note_retained(kMiB);
  EXPECT_FALSE(chunks_->take_signal());  // disarmed after it rang
  chunks_->arm(kPage);                    // re-armed: the next dirty byte rings
  Extent* c = alloc(kPage);
  chunks_->free(c);
  EXPECT_TRUE(chunks_->take_signal());
}

class ChunkBatchPurge : public ChunkTest, public ::testing::WithParamInterface<bool> {};

TEST_P(ChunkBatchPurge, TrimPurgesInBatches) {
  const bool batch_works = GetParam();
  if (!batch_works) kernel_.process_madvise_errno = ENOSYS;
  make();
  ASSERT_EQ(os_->probed_features().batch_purge, batch_works);
  // 40 dirty extents that cannot coalesce: every other one stays busy.
  std::vector<Extent*> v;
  for (int i = 0; i < 80; i++) v.push_back(alloc(2 * kPage));
  for (int i = 0; i < 80; i += 2) {
    std::memset(ptr(v[i]->base), 'p', 2 * kPage);
    chunks_->free(v[i]);
  }
  os_->counters().reset();
  EXPECT_EQ(chunks_->trim(), 40 * 2 * kPage);
  const size_t n = 40;
  if (batch_works) {
    EXPECT_EQ(os_->counters().get(os::Call::kProcessMadvise), (n + os::kPurgeBatch - 1) / os::kPurgeBatch);
    EXPECT_EQ(os_->counters().get(os::Call::kMadvise), 0u);
  } else {
    EXPECT_EQ(os_->counters().get(os::Call::kMadvise), n);
  }
  for (int i = 0; i < 80; i += 2) EXPECT_EQ(static_cast<char*>(ptr(v[i]->base))[0], 0);
  EXPECT_EQ(chunks_->stats().dirty, 0u);
}

INSTANTIATE_TEST_SUITE_P(WithAndWithoutProcessMadvise, ChunkBatchPurge, ::testing::Bool());

TEST_F(ChunkTest, FailedPurgeKeepsExtentsDirtyAndUsable) {
  kernel_.process_madvise_errno = ENOSYS;
  make();
  Extent* a = alloc(4 * kPage);
  Extent* guard = alloc(kPage);
  Extent* b = alloc(4 * kPage);
  uintptr_t ab = a->base;
  std::memset(ptr(ab), 'k', 4 * kPage);
  chunks_->free(a);
  chunks_->free(b);
  kernel_.fail(Sys::kMadvise, ENOMEM, 1);
  EXPECT_EQ(chunks_->trim(), 0u);
  chunk::ChunkStats s = chunks_->stats();
  EXPECT_EQ(s.dirty, 4 * kPage + b->size);  // b coalesced with the reservation's dirty rest, if any
  EXPECT_EQ(static_cast<char*>(ptr(ab))[0], 'k');
  // Nothing was lost: the extent is handed out again, and purges once the kernel agrees.
  EXPECT_EQ(chunks_->alloc_at(ab, 4 * kPage).extent->base, ab);
  chunks_->free(chunks_->lookup(ptr(ab)));
  EXPECT_EQ(chunks_->trim(), s.dirty);
  chunks_->free(guard);
}

// Under strict overcommit a purge decommits: the range stops being writable
// (charged), and is committed again when handed out. Before, 1 GiB
// allocated, written, freed and purged stayed charged, all of it.
TEST_F(ChunkTest, StrictOvercommitPurgeGivesTheChargeBack) {
  kernel_.overcommit = "2\n";
  make();
  ASSERT_TRUE(os_->features().strict_overcommit);
  constexpr size_t kSize = 16 * kMiB;
  Extent* e = alloc(kSize);
  const uintptr_t base = e->base;
  std::memset(ptr(base), 'c', kSize);
  EXPECT_EQ(test::writable_bytes(base, base + kSize), kSize);
  chunks_->free(e);
  EXPECT_EQ(chunks_->trim(), kSize);
  EXPECT_EQ(test::writable_bytes(base, base + kSize), 0u);
  // Handed out again: committed first, zeroed, writable.
  Allocation a = chunks_->alloc_at(base, kSize);
  ASSERT_NE(a.extent, nullptr);
  EXPECT_TRUE(a.zeroed);
  EXPECT_EQ(test::writable_bytes(base, base + kSize), kSize);
  std::memset(ptr(base), 'd', kSize);
  // Decay does it too; a plain alloc of the space commits it again.
  chunks_->free(a.extent);
  clock_.advance_ms(1500);
  EXPECT_EQ(chunks_->decay(), kSize);
  EXPECT_EQ(test::writable_bytes(base, base + kSize), 0u);
  Allocation b = chunks_->alloc(kSize);
  ASSERT_NE(b.extent, nullptr);
  EXPECT_EQ(test::writable_bytes(b.extent->base, b.extent->end()), kSize);
  std::memset(ptr(b.extent->base), 'e', kSize);
  // And growth over decommitted space commits what it takes.
  ASSERT_TRUE(chunks_->shrink(b.extent, kSize / 2));
  EXPECT_EQ(chunks_->trim(), kSize / 2);
  EXPECT_EQ(test::writable_bytes(b.extent->end(), b.extent->end() + kSize / 2), 0u);
  ASSERT_EQ(chunks_->grow(b.extent, kSize, false).path, GrowPath::kNeighbour);
  EXPECT_EQ(test::writable_bytes(b.extent->base, b.extent->end()), kSize);
  std::memset(ptr(b.extent->base), 'f', kSize);
  chunks_->free(b.extent);
}

// Near vm.max_map_count (the fake kernel's model, 400 here): decommitting
// a freed extent between live ones splits its mapping in three. Past half
// the limit the chunk layer purges with madvise instead and keeps the range
// committed, so the program keeps the other half, and no call is refused.
TEST_F(ChunkTest, StrictOvercommitPurgeStopsSplittingPastHalfTheMappingLimit) {
  kernel_.overcommit = "2\n";
  kernel_.map_limit = 400;
  kernel_.other_mappings = 100;  // the program's own
  make(256 * kMiB);
  ASSERT_TRUE(os_->features().strict_overcommit);
  constexpr size_t kBlocks = 600, kSize = 16 * kPage;
  std::vector<Extent*> v;
  for (size_t i = 0; i < kBlocks; i++) {
    v.push_back(alloc(kSize));
    ASSERT_NE(v.back(), nullptr);
  }
  for (size_t i = 0; i < kBlocks; i += 2) chunks_->free(v[i]);
  // Every freed extent is purged, split or not.
  EXPECT_EQ(chunks_->trim(), kBlocks / 2 * kSize);
  EXPECT_EQ(kernel_.map_refusals(), 0u);
  EXPECT_LE(kernel_.peak_mappings(), 400u * 5 / 8);
  // And handed out again, writable.
  for (size_t i = 0; i < kBlocks; i += 2) {
    v[i] = alloc(kSize);
    ASSERT_NE(v[i], nullptr);
    std::memset(ptr(v[i]->base), 'm', kSize);
  }
  EXPECT_EQ(kernel_.map_refusals(), 0u);
  for (Extent* e : v) chunks_->free(e);
}

// A program already at the limit: a decommit that the kernel refuses
// (ENOMEM: it would split a mapping) still purges the pages, by madvise.
TEST_F(ChunkTest, StrictOvercommitPurgeRefusedAtTheMappingLimitStillPurges) {
  kernel_.overcommit = "2\n";
  kernel_.map_limit = 400;
  make(64 * kMiB);
  std::vector<Extent*> v;
  for (size_t i = 0; i < 8; i++) v.push_back(alloc(16 * kPage));
  kernel_.other_mappings = 400 - kernel_.mappings();  // the rest is the program's
  for (size_t i = 0; i < 8; i += 2) chunks_->free(v[i]);
  EXPECT_EQ(chunks_->trim(), 4 * 16 * kPage);
  EXPECT_LE(kernel_.mappings(), 400u);
  for (size_t i = 0; i < 8; i += 2) {
    v[i] = alloc(16 * kPage);
    ASSERT_NE(v[i], nullptr);
    std::memset(ptr(v[i]->base), 'n', 16 * kPage);
  }
  for (Extent* e : v) chunks_->free(e);
}

// The same against the real kernel's vm.max_map_count (not lowered: the
// test makes the program's mappings itself, up to 1 000 below the limit).
// Under strict overcommit (the fake kernel's answer; the calls are real)
// 2 000 purged extents between live ones would take 2 000 more mappings;
// ductile sees the count past half the limit and purges without splitting,
// so the program can still start a thread and map memory.
TEST_F(ChunkTest, StrictOvercommitNearTheRealMappingLimitLeavesTheProgramRoom) {
  const size_t limit = test::max_map_count();
  if (limit == 0 || limit > 300000) GTEST_SKIP() << "vm.max_map_count " << limit << ": too many to fill quickly";
  kernel_.overcommit = "2\n";
  make(256 * kMiB);
  constexpr size_t kBlocks = 4000, kSize = 4 * kPage;
  std::vector<Extent*> v(kBlocks);
  // The program's mappings: one read-only mapping, every other page made
  // PROT_NONE (each mprotect adds two).
  const size_t have = test::mapping_count();
  ASSERT_LT(have + 3000, limit);
  const size_t splits = (limit - 1000 - have) / 2;
  const size_t fill_size = (2 * splits + 1) * kPage;
  char* fill = static_cast<char*>(mmap(nullptr, fill_size, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(fill, MAP_FAILED);
  for (size_t i = 0; i < splits; i++) ASSERT_EQ(mprotect(fill + (2 * i + 1) * kPage, kPage, PROT_NONE), 0);
  bool all = true;
  for (size_t i = 0; i < kBlocks; i++) all &= (v[i] = chunks_->alloc(kSize).extent) != nullptr;
  for (size_t i = 0; i < kBlocks; i += 2)
    if (v[i] != nullptr) chunks_->free(v[i]);
  const size_t trimmed = chunks_->trim();
  const size_t after = test::mapping_count();
  // The program's own: a thread (its stack and guard page), and 100
  // mappings that do not merge.
  pthread_t t;
  const int thread = pthread_create(&t, nullptr, [](void*) -> void* { return nullptr; }, nullptr);
  if (thread == 0) pthread_join(t, nullptr);
  char* more = static_cast<char*>(mmap(nullptr, 200 * kPage, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  int refused = more == MAP_FAILED ? 1 : 0;
  for (size_t i = 0; more != MAP_FAILED && i < 100; i++) refused += mprotect(more + (2 * i + 1) * kPage, kPage, PROT_NONE) != 0;
  if (more != MAP_FAILED) munmap(more, 200 * kPage);
  // And the purged extents are handed out again.
  for (size_t i = 0; i < kBlocks; i += 2) all &= (v[i] = chunks_->alloc(kSize).extent) != nullptr;
  munmap(fill, fill_size);
  EXPECT_TRUE(all);
  EXPECT_EQ(trimmed, kBlocks / 2 * kSize);
  EXPECT_LE(after, limit - 500);
  EXPECT_EQ(thread, 0);
  EXPECT_EQ(refused, 0);
  for (Extent* e : v)
    if (e != nullptr) chunks_->free(e);
}

}  // namespace
}  // namespace ductile
