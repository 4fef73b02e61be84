/* SPDX-License-Identifier: BSD-2-Clause */
// The fixture of the slab arena's tests: a slab arena over a chunk layer on the fake kernel,
// and the kernel calls it made.
#pragma once

#include <sys/mman.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include <gtest/gtest.h>

#include "chunk/chunk.h"
#include "small/region.h"
#include "support/fake_kernel.h"
#include "support/layers.h"

namespace ductile::test {

class RegionTest : public test::ChunkLayerTest {
 protected:
  void SetUp() override {
    make_chunks(64 << 20, chunk::Options().decay_ns);
    arena_.init(chunks_.get(), nullptr, options());
    kernel_.reset_calls();
  }

  // The arena's options in these tests: a busy region is advised at once,
  // however few the arena holds (advise_after has a test of its own).
  static small::ArenaOptions options() {
    small::ArenaOptions o;
    o.advise_after = 1;
    return o;
  }
  // madvise calls with `advice` that cover [a, a + len) exactly.
  size_t advised(int advice, uintptr_t a, size_t len) const {
    size_t n = 0;
    for (const auto& c : kernel_.calls())
      if (c.sys == test::Sys::kMadvise && c.arg == advice && addr(c.addr) == a && c.len == len) n++;
    return n;
  }
  size_t madvises(int advice) const {
    size_t n = 0;
    for (const auto& c : kernel_.calls())
      if (c.sys == test::Sys::kMadvise && c.arg == advice) n++;
    return n;
  }
  // Purge calls of any kind (batched or one range each).
  size_t purges() const {
    return kernel_.count(test::Sys::kProcessMadvise) + madvises(MADV_DONTNEED);
  }
  // Lends slabs of `pages` until `bytes` are carved.
  std::vector<small::Lent> carve(size_t bytes, size_t pages = 16) {
    std::vector<small::Lent> v;
    for (size_t done = 0; done < bytes; done += pages * kPage) {
      small::Lent l = arena_.alloc(pages);
      EXPECT_NE(l.extent, nullptr);
      // Slabs are written: the pages become resident.
      std::memset(ptr(l.extent->base), 0xab, l.extent->size);
      v.push_back(l);
    }
    return v;
  }

  small::SlabArena arena_;
};

}  // namespace ductile::test
