// SPDX-License-Identifier: BSD-2-Clause
// What changes while the program runs (core/control.cc): trim gives back everything retained.
//
// This program links the library's objects, so ductile is also the allocator of the
// test process itself.
#include <vector>

#include <gtest/gtest.h>

#include "core/runtime.h"
#include "ductile/ductile.h"

namespace ductile {
namespace {

TEST(Trim, GivesBackEverythingRetained) {
  std::vector<void*> v;
  for (int i = 0; i < 2000; i++) v.push_back(ductile_malloc(1000 + i * 10));
  for (void* p : v) ductile_free(p);
  ductile_trim();
  chunk::ChunkStats s = core::rt().chunks.stats();
  EXPECT_EQ(s.dirty, 0u);
  EXPECT_EQ(ductile_malloc_trim(0), 0);  // nothing left to release
  void* p = ductile_malloc(100);
  EXPECT_NE(p, nullptr);
  ductile_free(p);
}

}  // namespace
}  // namespace ductile
