/* SPDX-License-Identifier: BSD-2-Clause */
// Metadata memory for the chunk layer and the layers above it (extents,
// page-map nodes, slab headers): carved from blocks taken straight from the
// OS layer, so ductile never calls into itself for its own bookkeeping.
// Memory handed out is zeroed and never returned to the OS; fixed-size
// objects are recycled through free lists by their owners.
#pragma once

#include <cstddef>

#include "base/counter.h"
#include "base/lock.h"
#include "os/os.h"

namespace ductile::chunk {

class MetaAlloc {
 public:
  // Blocks of 2 MiB: one reservation serves thousands of extents.
  static constexpr size_t kBlock = kHugePage;

  // `first_block`: the size of the first block, where more than kBlock
  // (the chunk layer's: room for its first page-map leaf too, so that a
  // program's first allocation maps one block of metadata, not a block and
  // then a leaf).
  explicit MetaAlloc(os::Os& os, size_t first_block = kBlock) noexcept : os_(os), first_block_(first_block) {}
  MetaAlloc(const MetaAlloc&) = delete;
  MetaAlloc& operator=(const MetaAlloc&) = delete;

  // Zeroed memory aligned to `align` (power of two, at most a page). nullptr
  // when the OS refuses.
  [[nodiscard]] void* alloc(size_t size, size_t align = alignof(max_align_t)) noexcept;
  size_t bytes_mapped() const noexcept { return mapped_; }  // without the lock

  void prefork() noexcept { lock_.lock(); }
  void postfork_parent() noexcept { lock_.unlock(); }
  void postfork_child() noexcept { lock_.reinit_after_fork(); }

 private:
  os::Os& os_;
  const size_t first_block_;
  Mutex lock_;
  uintptr_t cur_ = 0;
  uintptr_t end_ = 0;
  LockedCounter<size_t> mapped_;
};

}  // namespace ductile::chunk
