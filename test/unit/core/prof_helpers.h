/* SPDX-License-Identifier: BSD-2-Clause */
// Helpers that the heap profiling tests share; prof_test.cc's main runs them with profiling on.
#pragma once

#include <cstddef>
#include <string>

#include <gtest/gtest.h>

#include "core/free.h"
#include "core/prof.h"
#include "ductile/ductile.h"

namespace ductile {

// Where the dumps go (the prefix is g_dir + "/t"), set by main.
extern std::string g_dir;

}  // namespace ductile

namespace ductile::test {

inline constexpr size_t kMiB = size_t{1} << 20;

inline core::prof::Totals totals() { return core::prof::live_totals(); }
// The bytes a block's sample counts: its usable size; a hardened build's
// block size (its usable size is the request, which the block's seal keeps).
inline size_t sampled_size(void* p) {
  return kHardened ? core::usable_of(core::owner_of(p)) : ductile_malloc_usable_size(p);
}

template <typename T>
T ctl(const char* name) {
  T v{};
  size_t len = sizeof v;
  EXPECT_EQ(ductile_mallctl(name, &v, &len, nullptr, 0), 0) << name;
  return v;
}

}  // namespace ductile::test
