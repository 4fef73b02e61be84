/* SPDX-License-Identifier: BSD-2-Clause */
// Helpers that the API layer's tests share: sizes around every range's edges, and mallctl reads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include <gtest/gtest.h>

#include "core/runtime.h"
#include "ductile/ductile.h"

namespace ductile::test {

inline constexpr size_t kMaxSize = static_cast<size_t>(PTRDIFF_MAX);
inline constexpr size_t kMiB = size_t{1} << 20;

inline size_t threshold() { return core::rt().huge.options().threshold; }

// Sizes around every range's edges: small, medium, huge.
inline std::vector<size_t> edge_sizes() {
  std::vector<size_t> v = {1,    7,    8,     9,      16,     17,     100,    1024,          1025,
                           4096, 4097, 16384, 16385,  20000,  65536,  100000, 1048576 + 1};
  size_t t = threshold();
  for (size_t s : {t - kPage - 1, t - 1, t, t + 1, 3 * kMiB + 5, 9 * kMiB}) v.push_back(s);
  return v;
}

template <typename T>
T read_ctl(const char* name) {
  T v{};
  size_t len = sizeof v;
  EXPECT_EQ(ductile_mallctl(name, &v, &len, nullptr, 0), 0) << name;
  EXPECT_EQ(len, sizeof v) << name;
  return v;
}

}  // namespace ductile::test
