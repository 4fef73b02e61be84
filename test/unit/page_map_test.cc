#include <gtest/gtest.h>

#include "chunk/page_map.h"
#include "support/fake_kernel.h"

namespace ductile {
namespace {

TEST(PageMap, SetAndLookup) {
  test::FakeKernel k;
  os::Os os(k);
  chunk::MetaAlloc meta(os);
  chunk::PageMap map(meta);
  chunk::Extent e;
  e.base = uintptr_t{5} << 40;
  e.size = 64 * kPage;
  EXPECT_EQ(map.lookup(e.base), nullptr);
  ASSERT_TRUE(map.set_boundaries(&e));
  EXPECT_EQ(map.lookup(e.base), &e);
  EXPECT_EQ(map.lookup(e.base + kPage - 1), &e);
  EXPECT_EQ(map.lookup(e.end() - 1), &e);
  EXPECT_EQ(map.lookup(e.base + kPage), nullptr);
  ASSERT_TRUE(map.set_range(e.base, e.size, &e));
  for (size_t i = 0; i < 64; i++) EXPECT_EQ(map.lookup(e.base + i * kPage), &e);
  EXPECT_EQ(map.lookup(e.end()), nullptr);
  EXPECT_EQ(map.lookup(uintptr_t{1} << 48), nullptr);  // beyond 48-bit addresses
  EXPECT_FALSE(map.ensure(uintptr_t{1} << 48, kPage));
}

TEST(PageMap, NodeAllocationFailureIsReported) {
  test::FakeKernel k;
  os::Os os(k);
  chunk::MetaAlloc meta(os);
  chunk::PageMap map(meta);
  k.fail(test::Sys::kMmap, ENOMEM);
  chunk::Extent e;
  e.base = uintptr_t{6} << 40;
  e.size = kPage;
  EXPECT_FALSE(map.set_boundaries(&e));
  EXPECT_EQ(map.lookup(e.base), nullptr);
  EXPECT_TRUE(map.set_boundaries(&e));
  EXPECT_EQ(map.lookup(e.base), &e);
}

}  // namespace
}  // namespace ductile
