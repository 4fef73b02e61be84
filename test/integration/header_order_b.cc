// SPDX-License-Identifier: BSD-2-Clause
// <jemalloc/jemalloc.h> first, then <ductile/ductile.h>: see header_order_a.cc.
#include <jemalloc/jemalloc.h>
#include <ductile/ductile.h>

#include <cstdint>

#include <gtest/gtest.h>

TEST(HeaderOrder, JemallocThenDuctile) {
  EXPECT_EQ(MALLOCX_LG_ALIGN(6), 6);
  void* p = mallocx(100, MALLOCX_LG_ALIGN(6));
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u);
  EXPECT_EQ(nallocx(100, MALLOCX_LG_ALIGN(6)), ductile_nallocx(100, MALLOCX_LG_ALIGN(6)));
  dallocx(p, 0);
}
