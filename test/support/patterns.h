/* SPDX-License-Identifier: BSD-2-Clause */
// Byte patterns for tests: fill a block with a pattern derived from a seed,
// check it later, and check that a range reads as zeroes.
#pragma once

#include <cstddef>

namespace ductile::test {

inline void fill(void* p, size_t n, unsigned seed) {
  auto* b = static_cast<unsigned char*>(p);
  for (size_t i = 0; i < n; i++) b[i] = static_cast<unsigned char>(seed + i * 7);
}

inline bool check(const void* p, size_t n, unsigned seed) {
  auto* b = static_cast<const unsigned char*>(p);
  for (size_t i = 0; i < n; i++)
    if (b[i] != static_cast<unsigned char>(seed + i * 7)) return false;
  return true;
}

inline bool all_zero(const void* p, size_t from, size_t to) {
  auto* b = static_cast<const unsigned char*>(p);
  for (size_t i = from; i < to; i++)
    if (b[i] != 0) return false;
  return true;
}

}  // namespace ductile::test
