#include <gtest/gtest.h>

#include "chunk/page_map.h"
#include "small/thread_cache.h"
#include "support/fake_kernel.h"

namespace ductile {
namespace {

// A page map over the fake kernel's memory, as the chunk layer makes one.
class PageMapTest : public ::testing::Test {
 protected:
  test::FakeKernel k;
  os::Os os{k};
  chunk::MetaAlloc meta{os};
  chunk::PageMap map{meta};
};

TEST_F(PageMapTest, SetAndLookup) {
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
  // High bits never alias a mapped address.
  EXPECT_EQ(map.lookup(e.base | uintptr_t{1} << 48), nullptr);
  EXPECT_EQ(map.lookup_entry(e.base | uintptr_t{1} << 63), 0u);
  EXPECT_EQ(map.lookup(~uintptr_t{0}), nullptr);
  EXPECT_FALSE(map.ensure(uintptr_t{1} << 48, kPage));
}

TEST_F(PageMapTest, TagsRoundTripAndLookupIgnoresThem) {
  chunk::Extent e;
  e.base = uintptr_t{7} << 40;
  e.size = 16 * kPage;
  ASSERT_TRUE(map.set_range(e.base, e.size, &e));
  EXPECT_EQ(chunk::PageMap::entry_tag(map.lookup_entry(e.base)), 0u);
  // Every class's tag, and the extremes of the 16 bits, read back exactly;
  // lookup() still answers the extent, on every page.
  for (size_t c = 0; c < small::kNumClasses; c++) {
    uint16_t tag = small::free_tag(c);
    ASSERT_NE(tag, 0u);
    ASSERT_TRUE(map.set_range(e.base, e.size, &e, tag));
    for (size_t i = 0; i < 16; i++) {
      uintptr_t v = map.lookup_entry(e.base + i * kPage + 8);
      EXPECT_EQ(chunk::PageMap::entry_tag(v), tag);
      EXPECT_EQ(chunk::PageMap::entry_extent(v), &e);
      EXPECT_EQ(map.lookup(e.base + i * kPage), &e);
    }
  }
  for (uint16_t tag : {uint16_t{1}, uint16_t{0x8000}, uint16_t{0xffff}}) {
    map.set_tag(e.base, &e, tag, true);
    EXPECT_EQ(chunk::PageMap::entry_tag(map.lookup_entry(e.base)), tag);
    EXPECT_EQ(map.lookup(e.base), &e);
    EXPECT_EQ(map.lookup(e.base + kPage), &e);  // only that page changed
    EXPECT_NE(chunk::PageMap::entry_tag(map.lookup_entry(e.base + kPage)), tag);
  }
  // A write without a tag clears it: set_range and set_boundaries alike.
  ASSERT_TRUE(map.set_range(e.base, kPage, &e));
  EXPECT_EQ(chunk::PageMap::entry_tag(map.lookup_entry(e.base)), 0u);
  map.set_tag(e.end() - kPage, &e, 5, true);
  ASSERT_TRUE(map.set_boundaries(&e));
  EXPECT_EQ(chunk::PageMap::entry_tag(map.lookup_entry(e.end() - kPage)), 0u);
  EXPECT_EQ(map.lookup_entry(e.end()), 0u);
  EXPECT_EQ(map.lookup_entry(uintptr_t{1} << 48), 0u);
}

// A range with a tag step numbers its pages in the tags (hardened builds'
// slabs: small::kSlabPageTagStep), and the class in the low byte reads the
// same on every page.
TEST_F(PageMapTest, ATagStepNumbersThePages) {
  chunk::Extent e;
  e.base = uintptr_t{9} << 40;
  e.size = 32 * kPage;
  const uint16_t tag = small::free_tag(7);
  ASSERT_TRUE(map.set_range(e.base, e.size, &e, tag, 0x100));
  for (size_t i = 0; i < 32; i++) {
    const uintptr_t v = map.lookup_entry(e.base + i * kPage + 24);
    EXPECT_EQ(chunk::PageMap::entry_tag(v), tag + i * 0x100) << i;
    EXPECT_EQ(chunk::PageMap::entry_extent(v), &e);
    EXPECT_EQ(static_cast<uint8_t>(chunk::PageMap::entry_tag(v)), tag);
    EXPECT_EQ(small::tag_slab_offset(chunk::PageMap::entry_tag(v), e.base + i * kPage + 24), i * kPage + 24);
  }
  EXPECT_EQ(map.lookup_entry(e.end()), 0u);
}

// Records at 2 MiB-aligned pages (where huge spans begin) and page entries
// answer together: the record where no mapped range covers the page, the
// mapped range where one does, and clearing either leaves the other.
TEST_F(PageMapTest, RecordsAndMappedRangesAtHugePageBoundaries) {
  chunk::Extent e, s;
  e.base = uintptr_t{5} << 40;
  e.size = 2 * kHugePage;
  ASSERT_TRUE(map.set_boundaries(&e));
  EXPECT_EQ(map.lookup(e.base), &e);
  EXPECT_EQ(map.lookup(e.base + 100), &e);  // any byte of the first page
  EXPECT_EQ(map.lookup(e.end() - 1), &e);
  EXPECT_EQ(map.lookup(e.base + kHugePage), nullptr);  // interior: nothing
  map.set_tag(e.base, &e, 9, false);
  EXPECT_EQ(chunk::PageMap::entry_tag(map.lookup_entry(e.base)), 9u);
  // A mapped range over the same page answers first, with its own tag.
  s.base = e.base;
  s.size = kPage;
  ASSERT_TRUE(map.set_range(s.base, s.size, &s, 3));
  EXPECT_EQ(map.lookup(e.base), &s);
  EXPECT_EQ(chunk::PageMap::entry_tag(map.lookup_entry(e.base)), 3u);
  ASSERT_TRUE(map.set_range(s.base, s.size, nullptr));
  EXPECT_EQ(map.lookup(e.base), &e);
  // An active extent is recorded at its first page only; records go again.
  ASSERT_TRUE(map.set_active_boundaries(&e));
  EXPECT_EQ(chunk::PageMap::entry_tag(map.lookup_entry(e.base)), 0u);
  map.clear_boundaries(&e);
  EXPECT_EQ(map.lookup(e.base), nullptr);
  EXPECT_EQ(map.lookup(e.end() - kPage), nullptr);
}

TEST_F(PageMapTest, NodeAllocationFailureIsReported) {
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
