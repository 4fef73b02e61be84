// SPDX-License-Identifier: BSD-2-Clause
// <ductile/ductile.h> and <jemalloc/jemalloc.h> in one file, ductile's
// first: it must compile, and the functions must be the library's (this
// file is part of differential_ductile). header_order_b.cc has the other order.
#include <ductile/ductile.h>
#include <jemalloc/jemalloc.h>

#include <cstdint>

#include <gtest/gtest.h>

TEST(HeaderOrder, DuctileThenJemalloc) {
  EXPECT_EQ(MALLOCX_ALIGN(4096), 12);
  void* p = mallocx(100, MALLOCX_ALIGN(4096) | MALLOCX_ZERO);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 4096, 0u);
  EXPECT_EQ(sallocx(p, 0), ductile_sallocx(p, 0));
  dallocx(p, 0);
}
