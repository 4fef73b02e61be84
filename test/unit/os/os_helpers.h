/* SPDX-License-Identifier: BSD-2-Clause */
// Helpers that the OS layer's tests share.
#pragma once

#include <sys/mman.h>

#include <cstddef>
#include <cstring>

#include <gtest/gtest.h>

#include "base/common.h"

namespace ductile::test {

// Maps n pages the test owns directly (not through the Os) and fills them.
inline char* scratch(size_t pages, char fill = 'x') {
  void* p = ::mmap(nullptr, pages * kPage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  EXPECT_NE(p, MAP_FAILED);
  std::memset(p, fill, pages * kPage);
  return static_cast<char*>(p);
}

}  // namespace ductile::test
