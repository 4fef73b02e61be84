// SPDX-License-Identifier: BSD-2-Clause
// The small layer's decay steps (small/decay.cc): an idle class's empty slabs go back within
// the decay time, by other classes' calls or the background thread.
#include <cstring>
#include <vector>

#include <gtest/gtest.h>

#include "small/bin.h"
#include "small/decay.h"
#include "small/region.h"
#include "support/fake_clock.h"
#include "support/layers.h"
#include "unit/small/region_fixture.h"

namespace ductile {
namespace {

using namespace small;
using test::RegionTest;

// ---- idle classes: decay steps from other classes' calls, or the background thread

class IdleClassTest : public RegionTest {
 protected:
  static constexpr uint64_t kDecayMs = 1000;
  void SetUp() override {
    make_chunks(64 << 20, kDecayMs * 1000000);
    arena_.init(chunks_.get(), nullptr, ArenaOptions());
    bins_[0].init(class_of(64), &arena_);
    bins_[1].init(class_of(1000), &arena_);
    decay_.init(bins_, 2, &arena_);
    // 8 MiB of 64-byte objects, all freed: the class then goes idle.
    idle_.resize((8 << 20) / 64);
    EXPECT_EQ(bins_[0].fill(idle_.data(), idle_.size()), idle_.size());
    for (void* p : idle_) std::memset(p, 1, 64);
    bins_[0].flush(idle_.data(), idle_.size());
  }
  void TearDown() override {
    for (Bin& b : bins_) b.trim();
    arena_.trim();
  }
  // Bytes that may still be resident: empty slabs of the idle class, dirty
  // pages of regions and dirty extents.
  size_t retained() {
    return bins_[0].stats().empty_slabs * kClasses.slab_pages[class_of(64)] * kPage +
           arena_.stats().dirty_pages * kPage + chunks_->stats().dirty;
  }
  Bin bins_[2];
  Decay decay_;
  std::vector<void*> idle_;
};

// The program goes on allocating and freeing another size; no background
// thread. Before, the idle class kept its 8 MiB of empty slabs for good.
TEST_F(IdleClassTest, OtherClassesCallsReturnItsEmptySlabsWithinTwiceTheDecayTime) {
  ASSERT_GE(retained(), size_t{8} << 20);
  std::vector<void*> v(64);
  for (uint64_t t = 0; t < 2 * kDecayMs; t += 10) {
    clock_.advance_ms(10);
    ASSERT_EQ(bins_[1].fill(v.data(), v.size()), v.size());
    decay_.tick();  // what the runtime's slow paths do after a fill
    bins_[1].flush(v.data(), v.size());
    decay_.tick();  // and after a flush
  }
  EXPECT_LE(bins_[0].stats().empty_slabs, Bin::kRetainEmpty);
  // What stays: the slab kept per class, and one whole region kept for the
  // next slab (both hysteresis), with the other class's slab in it.
  EXPECT_LE(retained(), kRegionSize + 2 * 16 * kPage);
}

// A thread whose frees all hit its cache, 64 per millisecond, as in the
// scale benchmark's idle-class case: it looks at every Decay::look()-th
// free. The budget is cut to 16 KiB a step, so that the 8 MiB here take the
// 512 steps that 512 MiB take at the default 2 MiB. Looking at every 256th
// free while a backlog remained, half of it was still there at twice the
// decay time.
TEST_F(IdleClassTest, AThreadThatOnlyFreesIntoItsCacheWorksOffABacklogInTime) {
  // The same 8 MiB again, in chunks whose steps are 16 KiB.
  for (Bin& b : bins_) b.trim();
  arena_.trim();
  make_chunks(64 << 20, kDecayMs * 1000000, 1024, 16 << 10);
  arena_.init(chunks_.get(), nullptr, ArenaOptions());
  bins_[0].init(class_of(64), &arena_);
  bins_[1].init(class_of(1000), &arena_);
  decay_.init(bins_, 2, &arena_);
  ASSERT_EQ(bins_[0].fill(idle_.data(), idle_.size()), idle_.size());
  for (void* p : idle_) std::memset(p, 1, 64);
  bins_[0].flush(idle_.data(), idle_.size());
  ASSERT_GE(retained(), size_t{8} << 20);

  uint32_t countdown = Decay::kEvent;
  for (uint64_t ms = 0; ms < 2 * kDecayMs; ms++) {
    clock_.advance_ms(1);
    for (int f = 0; f < 64; f++)
      if (--countdown == 0) countdown = decay_.look();
  }
  EXPECT_LE(bins_[0].stats().empty_slabs, Bin::kRetainEmpty);
  EXPECT_LE(retained(), kRegionSize + 2 * 16 * kPage);
}

// The program goes quiet: the background thread's steps (four per decay
// time) do it alone.
TEST_F(IdleClassTest, TheBackgroundThreadsStepsReturnThemWhenTheProgramIsQuiet) {
  for (uint64_t t = 0; t < 2 * kDecayMs; t += kDecayMs / 4) {
    clock_.advance_ms(kDecayMs / 4);
    (void)decay_.step();
  }
  EXPECT_LE(bins_[0].stats().empty_slabs, Bin::kRetainEmpty);
  EXPECT_LE(retained(), kRegionSize + 16 * kPage);
}

// A step from a call purges at most its budget (one huge page) in each
// layer it steps -- the arena, for the slabs the bins release, and the chunk
// layer -- and the next calls take the rest.
TEST_F(IdleClassTest, AStepFromACallStaysWithinItsBudget) {
  clock_.advance_ms(2 * kDecayMs);
  const size_t budget = chunks_->options().decay_step_bytes;
  size_t calls = 0;
  while (retained() > kRegionSize + 16 * kPage && calls < 2000) {
    const uint64_t before = os_->counters().purged_bytes.load();
    decay_.tick();
    EXPECT_LE(os_->counters().purged_bytes.load() - before, 2 * budget);
    clock_.advance_ms(1);
    calls++;
  }
  EXPECT_LE(retained(), kRegionSize + 16 * kPage);
  EXPECT_GE(calls, (size_t{8} << 20) / (2 * budget));
}

}  // namespace
}  // namespace ductile
