/* SPDX-License-Identifier: BSD-2-Clause */
// The fixture of the chunk layer's tests: a chunk layer over the fake kernel and clock.
#pragma once

#include <cstddef>

#include <gtest/gtest.h>

#include "chunk/chunk.h"
#include "support/layers.h"

namespace ductile::test {

inline constexpr size_t kMiB = size_t{1} << 20;

class ChunkTest : public test::ChunkLayerTest {
 protected:
  void SetUp() override { make(); }

  void make(size_t reservation = 64 * kMiB) { make_chunks(reservation); }

  chunk::Extent* alloc(size_t size, size_t align = kPage) {
    chunk::Allocation a = chunks_->alloc(size, align);
    EXPECT_NE(a.extent, nullptr);
    return a.extent;
  }
  size_t syscalls() { return os_->counters().total(); }
  // An active extent's last page maps to it, or to nothing where that entry
  // was never written (PageMap::set_active_boundaries); never to another.
  static bool last_entry_ok(chunk::ChunkLayer& c, const chunk::Extent* e) {
    const chunk::Extent* x = c.lookup(ptr(e->end() - kPage));
    return x == nullptr || x == e;
  }
};

}  // namespace ductile::test
