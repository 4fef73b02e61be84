// SPDX-License-Identifier: BSD-2-Clause
// Lending: a run of an active extent handed to another layer as an extent of
// its own (a huge span's headroom, a slab region's pages), and taken back.
#include "chunk/chunk.h"

namespace ductile::chunk {

bool ChunkLayer::map_interior(Extent* e, uint16_t tag, uint16_t tag_step) noexcept {
  if (e == nullptr || e->state != ExtentState::kActive) return false;
  // Under the lock, as every write of page-map entries where there may be
  // none yet: the pass of release_map() gives back pages of entries that
  // hold only zeroes, and must not drop a store made while it looks.
  LockGuard g(lock_);
  if (!page_map_.set_range(e->base, e->size, e, tag, tag_step)) return false;
  e->interior_mapped = true;
  return true;
}

Extent* ChunkLayer::lend(Extent* parent, uintptr_t base, size_t size) noexcept {
  DUCTILE_CHECK(parent != nullptr && parent->state == ExtentState::kActive && parent->interior_mapped &&
                is_aligned(base, kPage) && size != 0 && is_aligned(size, kPage) && base >= parent->base &&
                base + size <= parent->end());
  LockGuard g(lock_);
  Extent* e = new_extent(base, size, ExtentState::kActive, parent->committed, parent->space, false);
  if (e == nullptr) return nullptr;
  e->interior_mapped = true;
  // The parent's pages are mapped already: no node to create, cannot fail.
  (void)page_map_.set_range(base, size, e);
  return e;
}

void ChunkLayer::unlend(Extent* parent, Extent* sub) noexcept {
  DUCTILE_CHECK(parent != nullptr && sub != nullptr && sub->base >= parent->base && sub->end() <= parent->end());
  LockGuard g(lock_);
  (void)page_map_.set_range(sub->base, sub->size, parent);
  recycle(sub);
}

}  // namespace ductile::chunk
