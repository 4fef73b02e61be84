// SPDX-License-Identifier: BSD-2-Clause
// The prefault helper (small/prefaulter.cc): started once a region is busy, stopped cleanly,
// and started anew in a forked child.
#include <sys/wait.h>
#include <unistd.h>

#include <vector>

#include <gtest/gtest.h>

#include "small/prefaulter.h"
#include "small/region.h"
#include "unit/small/region_fixture.h"

namespace ductile {
namespace {

using namespace small;
using test::RegionTest;

constexpr int kMadvPopulateWrite = 23;

// ---- the prefault helper -------------------------------------------------

class PrefaultTest : public RegionTest {
 protected:
  void SetUp() override {
    RegionTest::SetUp();
    pf_.init(os_.get(), true);
    arena_.init(chunks_.get(), &pf_, ArenaOptions());
  }
  void TearDown() override { pf_.stop(); }
  Prefaulter pf_;
};

TEST_F(PrefaultTest, StartsOnlyOnceARegionIsBusy) {
  std::vector<Lent> v = carve(ArenaOptions().busy_prefix);
  EXPECT_FALSE(pf_.start_pending());
  EXPECT_TRUE(pf_.start());  // nothing asked for: nothing started
  EXPECT_EQ(pf_.stats().starts, 0u);
  EXPECT_FALSE(pf_.stats().running);
  std::vector<Lent> more = carve(16 * kPage);
  EXPECT_TRUE(pf_.start_pending());
  ASSERT_TRUE(pf_.start());
  EXPECT_FALSE(pf_.start_pending());
  pf_.drain();
  PrefaultStats s = pf_.stats();
  EXPECT_EQ(s.starts, 1u);
  EXPECT_TRUE(s.running);
  EXPECT_GE(s.populated, 1u);
  // It faulted in the stretch after the carve point, ahead of the owner.
  const uintptr_t carve_point = more.back().extent->end();
  EXPECT_EQ(advised(kMadvPopulateWrite, carve_point, ArenaOptions().prefault_ahead), 1u);
  arena_.free(v.data(), v.size());
  arena_.free(more.data(), more.size());
}

TEST_F(PrefaultTest, StopsCleanlyAndDropsLaterRequests) {
  std::vector<Lent> v = carve(kRegionSize / 2 + 16 * kPage);
  ASSERT_TRUE(pf_.start());
  pf_.drain();
  pf_.stop();
  EXPECT_FALSE(pf_.stats().running);
  pf_.stop();  // idempotent
  const uint64_t dropped = pf_.stats().dropped;
  std::vector<Lent> more = carve(32 * kPage);
  EXPECT_FALSE(pf_.start_pending());
  EXPECT_GT(pf_.stats().dropped, dropped);
  arena_.free(v.data(), v.size());
  arena_.free(more.data(), more.size());
}

TEST_F(PrefaultTest, DisabledNeverStarts) {
  Prefaulter off;
  off.init(os_.get(), false);
  arena_.init(chunks_.get(), &off, ArenaOptions());
  std::vector<Lent> v = carve(kRegionSize);
  EXPECT_FALSE(off.start_pending());
  EXPECT_EQ(madvises(kMadvPopulateWrite), 0u);
  arena_.free(v.data(), v.size());
}

TEST_F(PrefaultTest, AForkedChildHasNoHelperAndStartsItsOwn) {
  std::vector<Lent> v = carve(ArenaOptions().busy_prefix + 16 * kPage);
  ASSERT_TRUE(pf_.start());
  pf_.drain();
  ASSERT_TRUE(pf_.stats().running);
  arena_.prefork();
  pf_.prefork();
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    pf_.postfork_child();
    arena_.postfork_child();
    int bad = 0;
    if (pf_.stats().running) bad |= 1;
    std::vector<Lent> more;
    for (int i = 0; i < 4; i++) more.push_back(arena_.alloc(16));
    if (!pf_.start_pending()) bad |= 2;
    if (!pf_.start()) bad |= 4;
    pf_.drain();
    if (!pf_.stats().running || pf_.stats().starts != 2) bad |= 8;
    pf_.stop();
    if (pf_.stats().running) bad |= 16;
    _exit(bad);
  }
  pf_.postfork_parent();
  arena_.postfork_parent();
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_TRUE(pf_.stats().running);  // the parent's helper is untouched
  arena_.free(v.data(), v.size());
}

}  // namespace
}  // namespace ductile
