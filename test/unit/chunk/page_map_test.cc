// SPDX-License-Identifier: BSD-2-Clause
// The page map (chunk/page_map.cc): records and tags, mapped ranges at huge-page boundaries,
// and pages of slots given back.
#include <sys/mman.h>

#include <cstring>
#include <new>
#include <vector>

#include <gtest/gtest.h>

#include "chunk/page_map.h"
#include "small/thread_cache.h"
#include "support/fake_kernel.h"
#include "support/maps.h"

namespace ductile {
namespace {

// A page map over the fake kernel's memory, as the chunk layer makes one.
class PageMapTest : public ::testing::Test {
 protected:
  test::FakeKernel k;
  os::Os os{k};
  chunk::MetaAlloc meta{os};
  chunk::PageMap map{meta};
  // The OS layer's probes run at its first purge: here before the calls
  // the tests count.
  void SetUp() override { (void)os.probed_features(); }
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
    map.set_tag(e.base, &e, tag);
    EXPECT_EQ(chunk::PageMap::entry_tag(map.lookup_entry(e.base)), tag);
    EXPECT_EQ(map.lookup(e.base), &e);
    EXPECT_EQ(map.lookup(e.base + kPage), &e);  // only that page changed
    EXPECT_NE(chunk::PageMap::entry_tag(map.lookup_entry(e.base + kPage)), tag);
  }
  // A write without a tag clears it: set_range and set_boundaries alike.
  ASSERT_TRUE(map.set_range(e.base, kPage, &e));
  EXPECT_EQ(chunk::PageMap::entry_tag(map.lookup_entry(e.base)), 0u);
  map.set_tag(e.end() - kPage, &e, 5);
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

// A page has one entry, a record or a mapped range's, also at 2 MiB-aligned
// pages (where huge spans begin), whose entries live apart from the others.
TEST_F(PageMapTest, RecordsAndMappedRangesAtHugePageBoundaries) {
  chunk::Extent e, s;
  e.base = uintptr_t{5} << 40;
  e.size = 2 * kHugePage;
  ASSERT_TRUE(map.set_boundaries(&e));
  EXPECT_EQ(map.lookup(e.base), &e);
  EXPECT_EQ(map.lookup(e.base + 100), &e);  // any byte of the first page
  EXPECT_EQ(map.lookup(e.end() - 1), &e);
  EXPECT_EQ(map.lookup(e.base + kHugePage), nullptr);  // interior: nothing
  map.set_tag(e.base, &e, 9);
  EXPECT_EQ(chunk::PageMap::entry_tag(map.lookup_entry(e.base)), 9u);
  // A mapped range over the same page replaces the record, with its own tag.
  s.base = e.base;
  s.size = 2 * kPage;
  ASSERT_TRUE(map.set_range(s.base, s.size, &s, 3));
  EXPECT_EQ(map.lookup(e.base), &s);
  EXPECT_EQ(map.lookup(e.base + kPage), &s);
  EXPECT_EQ(chunk::PageMap::entry_tag(map.lookup_entry(e.base)), 3u);
  ASSERT_TRUE(map.set_range(s.base, s.size, nullptr));
  EXPECT_EQ(map.lookup(e.base), nullptr);
  // An active extent is recorded at its first page only; records go again.
  ASSERT_TRUE(map.set_active_boundaries(&e));
  EXPECT_EQ(map.lookup(e.base), &e);
  EXPECT_EQ(chunk::PageMap::entry_tag(map.lookup_entry(e.base)), 0u);
  map.clear_boundaries(&e);
  EXPECT_EQ(map.lookup(e.base), nullptr);
  EXPECT_EQ(map.lookup(e.end() - kPage), nullptr);
}

// Records at pages that are not 2 MiB-aligned write the page of slots of
// their 2 MiB chunk; once only zeroes are left there, the pass gives those
// pages back (one range for adjacent chunks) and lookups no longer fault
// them in. Before, every page of slots a record ever touched stayed
// resident: 2 MiB per GiB of address space that huge blocks cycled through.
TEST_F(PageMapTest, PagesOfSlotsThatHoldOnlyZeroesAreGivenBack) {
  const uintptr_t base = uintptr_t{11} << 40;
  chunk::Extent e[4];
  for (int i = 0; i < 4; i++) {
    e[i].base = base + i * kHugePage + 5 * kPage;  // first and last page in chunk i
    e[i].size = 7 * kPage;
    ASSERT_TRUE(map.set_boundaries(&e[i]));
  }
  chunk::Extent aligned;
  aligned.base = base + 8 * kHugePage;  // its first record in the edges
  aligned.size = kHugePage + 2 * kPage;  // its last page is not aligned: chunk 9
  ASSERT_TRUE(map.set_boundaries(&aligned));
  EXPECT_EQ(map.written_pages(), 5u);  // chunks 0-3 and 9
  k.reset_calls();
  EXPECT_EQ(map.release_idle(os), 0u) << "no zero stored yet";
  EXPECT_TRUE(k.calls().empty());

  // Chunks 0-2 hold zeroes only; chunk 3 keeps a record.
  for (int i = 0; i < 3; i++) map.clear_record(e[i].base);
  map.clear_record(e[3].base);
  for (int i = 0; i < 3; i++) map.clear_record(e[i].end() - kPage);
  EXPECT_EQ(map.written_pages(), 5u) << "zeroes written are still resident";
  EXPECT_EQ(map.lookup(e[3].end() - kPage), &e[3]);
  // The first pass finds them written since the last: kept, as a page
  // written again soon after would be faulted in again.
  EXPECT_EQ(map.release_idle(os), 0u);
  EXPECT_TRUE(k.calls().empty());
  // The next, with a budget, looks at that many idle chunks and says more are left.
  bool more = false;
  EXPECT_EQ(map.release_idle(os, 1, &more), kPage);
  EXPECT_TRUE(more);
  EXPECT_EQ(map.release_idle(os, SIZE_MAX, &more), 2 * kPage);
  EXPECT_FALSE(more);
  EXPECT_EQ(map.written_pages(), 2u);  // chunks 3 and 9
  std::vector<test::SysCall> calls = k.calls();
  ASSERT_EQ(calls.size(), 2u) << "two adjacent pages, one range";
  EXPECT_EQ(calls[0].sys, test::Sys::kMadvise);
  EXPECT_EQ(calls[0].len, kPage);
  EXPECT_EQ(calls[1].len, 2 * kPage);
  EXPECT_EQ(static_cast<char*>(calls[1].addr), static_cast<char*>(calls[0].addr) + kPage);
  EXPECT_EQ(test::resident_pages(calls[0].addr, calls[0].len), 0u);
  EXPECT_EQ(test::resident_pages(calls[1].addr, calls[1].len), 0u);

  // Lookups there answer nothing, and do not fault the pages in again.
  for (int i = 0; i < 3; i++) {
    EXPECT_EQ(map.lookup(e[i].base), nullptr);
    EXPECT_EQ(map.lookup(e[i].end() - kPage), nullptr);
  }
  EXPECT_EQ(test::resident_pages(calls[0].addr, calls[0].len), 0u);
  EXPECT_EQ(test::resident_pages(calls[1].addr, calls[1].len), 0u);
  EXPECT_EQ(map.lookup(e[3].end() - kPage), &e[3]);
  EXPECT_EQ(map.lookup(aligned.base), &aligned);
  EXPECT_EQ(map.lookup(aligned.end() - kPage), &aligned);

  // Chunk 3 was looked at and kept: a later pass does not look again until
  // a zero is stored there.
  k.reset_calls();
  EXPECT_EQ(map.release_idle(os), 0u);
  EXPECT_TRUE(k.calls().empty());
  map.clear_record(e[3].end() - kPage);
  EXPECT_EQ(map.release_idle(os), 0u);
  EXPECT_EQ(map.release_idle(os), kPage);
  EXPECT_EQ(map.written_pages(), 1u);
  // Unaged (trim): what holds only zeroes goes at once.
  map.clear_record(aligned.end() - kPage);
  EXPECT_EQ(map.release_idle(os, SIZE_MAX, nullptr, false), kPage);
  EXPECT_EQ(map.written_pages(), 0u);
  // A new record there works as before.
  ASSERT_TRUE(map.set_boundaries(&e[1]));
  EXPECT_EQ(map.lookup(e[1].base), &e[1]);
  EXPECT_EQ(map.written_pages(), 1u);
}

// The first and the last page of each 2 MiB have entries of their own,
// outside the pages of slots: extents that start and end at 2 MiB
// boundaries (huge spans) write no page of slots at all.
TEST_F(PageMapTest, ExtentsOnHugePageBoundariesWriteNoPageOfSlots) {
  const uintptr_t base = uintptr_t{12} << 40;
  chunk::Extent e[64];
  for (int i = 0; i < 64; i++) {
    e[i].base = base + static_cast<uintptr_t>(i) * 3 * kHugePage;
    e[i].size = (i % 3 + 1) * kHugePage;
    ASSERT_TRUE(map.set_boundaries(&e[i]));
  }
  EXPECT_EQ(map.written_pages(), 0u);
  for (int i = 0; i < 64; i++) {
    EXPECT_EQ(map.lookup(e[i].base), &e[i]);
    EXPECT_EQ(map.lookup(e[i].end() - kPage), &e[i]);
    EXPECT_EQ(map.lookup(e[i].end() - 1), &e[i]);
    EXPECT_EQ(map.lookup(e[i].base + kPage), nullptr);
  }
  // A mapped range over a whole chunk: its first and last page answer as
  // every other, and are cleared with it.
  chunk::Extent s;
  s.base = base + 3 * kHugePage;
  s.size = kHugePage;
  ASSERT_TRUE(map.set_range(s.base, s.size, &s, 1, 1));
  for (size_t p = 0; p < kHugePage / kPage; p++) {
    ASSERT_EQ(map.lookup(s.base + p * kPage), &s) << p;
    ASSERT_EQ(chunk::PageMap::entry_tag(map.lookup_entry(s.base + p * kPage)), 1 + p) << p;
  }
  ASSERT_TRUE(map.set_range(s.base, s.size, nullptr));
  EXPECT_EQ(map.lookup(s.base), nullptr);
  EXPECT_EQ(map.lookup(s.end() - kPage), nullptr);
}

// A neighbour lookup at a chunk's first or last page whose page of edges
// was never written answers nothing without reading it: the read would map
// the page (the zero page), and the store that usually follows it would
// fault again. Found on the first reservation: two leaves' pages of edges
// each faulted twice at start-up.
TEST_F(PageMapTest, LookupsDoNotReadAPageOfEdgesNeverWritten) {
  const uintptr_t leaf = uintptr_t{13} << 40;
  chunk::Extent e;
  e.base = leaf + 5 * kPage;  // both records in the first chunk's page of slots
  e.size = 7 * kPage;
  k.reset_calls();
  ASSERT_TRUE(map.set_boundaries(&e));
  // The leaf's mapping: the one the call made.
  std::vector<test::SysCall> calls = k.calls();
  ASSERT_EQ(calls.size(), 1u);
  ASSERT_EQ(calls[0].sys, test::Sys::kMmap);
  ASSERT_GE(calls[0].len, chunk::PageMap::kFanout * sizeof(uintptr_t));
  void* node = k.last_map();
  const size_t resident = test::resident_pages(node, calls[0].len);
  ASSERT_NE(resident, SIZE_MAX);
  EXPECT_EQ(resident, 2u) << "its page of slots written and the page of its list link";
  // The first chunk's first page, the last chunk's last page, and one in
  // the middle: entries in both pages of edges.
  for (uintptr_t a : {leaf, leaf + chunk::PageMap::kLeafSpan - kPage, leaf + chunk::PageMap::kLeafSpan / 2})
    EXPECT_EQ(map.lookup(a), nullptr) << std::hex << a - leaf;
  EXPECT_EQ(test::resident_pages(node, calls[0].len), resident);
  // Once written, a page of edges answers.
  chunk::Extent last;
  last.base = leaf + chunk::PageMap::kLeafSpan - kHugePage;
  last.size = kHugePage;
  ASSERT_TRUE(map.set_boundaries(&last));
  EXPECT_EQ(map.lookup(last.base), &last);
  EXPECT_EQ(map.lookup(last.end() - kPage), &last);
  EXPECT_EQ(map.lookup(leaf + chunk::PageMap::kLeafSpan - 2 * kHugePage), nullptr);
  EXPECT_EQ(map.lookup(leaf), nullptr);
  EXPECT_EQ(map.lookup(e.base), &e);
}

// In zeroed storage (the runtime's), touch_root writes the root's entry
// for an address before any leaf exists, so that the page holding it is
// faulted in by a write: the first leaf's creation then only reads and
// stores there.
TEST(PageMapZeroed, TouchRootWritesThePageOfTheEntryOnly) {
  test::FakeKernel k;
  os::Os os{k};
  chunk::MetaAlloc meta{os};
  const size_t bytes = align_up(sizeof(chunk::PageMap), kPage);
  void* storage = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(storage, MAP_FAILED);
  auto* map = new (storage) chunk::PageMap(meta, /*storage_zeroed=*/true);
  const size_t made = test::resident_pages(storage, bytes);
  EXPECT_LE(made, 1u) << "the constructor writes the members before the root only";
  const uintptr_t a = uintptr_t{14} << 40;
  map->touch_root(a);
  EXPECT_EQ(test::resident_pages(storage, bytes), made + 1);
  chunk::Extent e;
  e.base = a + 5 * kPage;
  e.size = kPage;
  ASSERT_TRUE(map->set_boundaries(&e));
  EXPECT_EQ(map->lookup(e.base), &e);
  EXPECT_EQ(test::resident_pages(storage, bytes), made + 1) << "the leaf's entry is on the page written";
  map->~PageMap();
  ::munmap(storage, bytes);
}

// The metadata allocator's first block may be made larger, to hold the
// first page-map leaf besides the first records: the chunk layer's is, so
// that a program's first allocation maps one block of metadata, not a
// block and then a leaf. Later big requests get blocks of their own.
TEST(MetaAllocFirstBlock, HoldsTheFirstLeafBesideTheFirstRecords) {
  for (bool larger : {false, true}) {
    test::FakeKernel k;
    os::Os os{k};
    (void)os.probed_features();
    chunk::MetaAlloc meta{os, larger ? chunk::MetaAlloc::kBlock + chunk::PageMap::kLeafBytes
                                     : chunk::MetaAlloc::kBlock};
    k.reset_calls();
    void* record = meta.alloc(64);
    ASSERT_NE(record, nullptr);
    void* leaf = meta.alloc(chunk::PageMap::kLeafBytes, kPage);
    ASSERT_NE(leaf, nullptr);
    EXPECT_EQ(addr(leaf) % kPage, 0u);
    EXPECT_EQ(k.count(test::Sys::kMmap), larger ? 1u : 2u) << larger;
    if (larger) {
      EXPECT_EQ(addr(leaf) - addr(record), kPage) << "the leaf follows the first record's page";
    }
    // The next records come from the first block still; a second leaf
    // takes a block of its own.
    void* next = meta.alloc(64);
    ASSERT_NE(next, nullptr);
    EXPECT_EQ(addr(next), larger ? align_up(addr(leaf) + chunk::PageMap::kLeafBytes, alignof(max_align_t))
                                 : addr(record) + 64);
    void* leaf2 = meta.alloc(chunk::PageMap::kLeafBytes, kPage);
    ASSERT_NE(leaf2, nullptr);
    EXPECT_EQ(k.count(test::Sys::kMmap), larger ? 2u : 3u) << larger;
    std::memset(record, 1, 64);
    std::memset(leaf, 2, kPage);
    std::memset(leaf2, 3, kPage);
  }
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
