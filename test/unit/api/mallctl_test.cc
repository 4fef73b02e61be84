// SPDX-License-Identifier: BSD-2-Clause
// mallctl's name tree and entry points (api/mallctl.cc): unknown names, and the MIB forms.
//
// This program links the library's objects, so ductile is also the allocator of the
// test process itself.
#include <errno.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include <gtest/gtest.h>

#include "ductile/ductile.h"
#include "unit/api/api_helpers.h"

namespace ductile {
namespace {

using test::read_ctl;

TEST(Mallctl, UnknownNamesAreEnoent) {
  size_t v;
  for (const char* name :
       {"", "nope", "stats", "stats.", ".stats.allocated", "stats.allocated.more", "stats..allocated",
        "version.x", "arena", "arena.0", "arena.4095.purge", "arena.x.purge", "arena.-1.purge",
        "arena.99999999999999999999999999.purge", "arena.0.nope", "opt.nope", "ductile.os.nope",
        "ductile.huge.growth.teleport", "a.b.c.d.e.f.g.h.i.j.k"}) {
    size_t len = sizeof v;
    EXPECT_EQ(ductile_mallctl(name, &v, &len, nullptr, 0), ENOENT) << '"' << name << '"';
  }
  EXPECT_EQ(ductile_mallctl(nullptr, nullptr, nullptr, nullptr, 0), EINVAL);
}

// ---- MIBs --------------------------------------------------------------

TEST(Mib, AgreesWithNamesForEveryLeaf) {
  for (const char* name : {"version", "epoch", "stats.allocated", "stats.mapped", "thread.allocated",
                           "arenas.page", "opt.decay_ms", "ductile.os.mmap", "ductile.huge.growth.copy",
                           "ductile.chunk.reserved"}) {
    size_t mib[8];
    size_t miblen = 8;
    ASSERT_EQ(ductile_mallctlnametomib(name, mib, &miblen), 0) << name;
    size_t dots = static_cast<size_t>(std::count(name, name + std::strlen(name), '.'));
    EXPECT_EQ(miblen, dots + 1) << name;
    uint64_t by_name = 0, by_mib = 0;
    size_t l1 = 8, l2 = 8;
    int r1 = ductile_mallctl(name, &by_name, &l1, nullptr, 0);
    int r2 = ductile_mallctlbymib(mib, miblen, &by_mib, &l2, nullptr, 0);
    EXPECT_EQ(r1, r2) << name;
    EXPECT_EQ(l1, l2) << name;
    if (std::strcmp(name, "ductile.os.mmap") == 0 || std::strcmp(name, "arenas.page") == 0) {
      EXPECT_EQ(by_name, by_mib) << name;
    }
  }
}

TEST(Mib, PartialMibsAndArenaIndices) {
  size_t mib[4];
  size_t miblen = 1;
  ASSERT_EQ(ductile_mallctlnametomib("stats.allocated", mib, &miblen), 0);
  EXPECT_EQ(miblen, 1u);
  EXPECT_EQ(ductile_mallctlbymib(mib, 1, nullptr, nullptr, nullptr, 0), ENOENT);  // an inner node
  miblen = 4;
  ASSERT_EQ(ductile_mallctlnametomib("arena.0.purge", mib, &miblen), 0);
  ASSERT_EQ(miblen, 3u);
  EXPECT_EQ(mib[1], 0u);
  EXPECT_EQ(ductile_mallctlbymib(mib, 3, nullptr, nullptr, nullptr, 0), 0);
  mib[1] = MALLCTL_ARENAS_ALL;
  EXPECT_EQ(ductile_mallctlbymib(mib, 3, nullptr, nullptr, nullptr, 0), 0);
  mib[1] = read_ctl<unsigned>("arenas.narenas");  // the first index not made yet
  EXPECT_EQ(ductile_mallctlbymib(mib, 3, nullptr, nullptr, nullptr, 0), ENOENT);
  mib[1] = 0;
  mib[2] = 999;
  EXPECT_EQ(ductile_mallctlbymib(mib, 3, nullptr, nullptr, nullptr, 0), ENOENT);
  // Past a leaf.
  size_t vmib[2];
  miblen = 2;
  ASSERT_EQ(ductile_mallctlnametomib("version", vmib, &miblen), 0);
  ASSERT_EQ(miblen, 1u);
  vmib[1] = 0;
  EXPECT_EQ(ductile_mallctlbymib(vmib, 2, nullptr, nullptr, nullptr, 0), ENOENT);
  miblen = 2;
  EXPECT_EQ(ductile_mallctlnametomib("no.such", vmib, &miblen), ENOENT);
  EXPECT_EQ(ductile_mallctlnametomib("version.x", vmib, &miblen), ENOENT);
  EXPECT_EQ(ductile_mallctlnametomib("version", nullptr, &miblen), EINVAL);
  EXPECT_EQ(ductile_mallctlbymib(nullptr, 1, nullptr, nullptr, nullptr, 0), EINVAL);
}

}  // namespace
}  // namespace ductile
