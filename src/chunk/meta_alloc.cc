// SPDX-License-Identifier: BSD-2-Clause
// Metadata memory (chunk/meta_alloc.h), carved from blocks the OS layer maps.
#include "chunk/meta_alloc.h"

namespace ductile::chunk {

void* MetaAlloc::alloc(size_t size, size_t align) noexcept {
  if (size == 0 || align > kPage || !is_pow2(align)) return nullptr;
  LockGuard g(lock_);
  uintptr_t p = align_up(cur_, align);
  if (cur_ == 0 || p + size > end_ || p + size < p) {
    // The first block is the larger first_block_, and a big request it
    // holds is served from it like any other.
    const bool first = cur_ == 0 && size < first_block_;
    size_t block = first ? align_up(first_block_, kPage) : size >= kBlock ? align_up(size, kPage) : kBlock;
    if (block == 0) return nullptr;
    void* mem = os_.reserve(block);
    if (mem == nullptr) return nullptr;
    if (!os_.commit(mem, block)) {
      (void)os_.unmap(mem, block);
      return nullptr;
    }
    mapped_ += block;
    // A big request (a page-map leaf) gets its own block; the current block stays current.
    if (size >= kBlock && !first) return mem;
    cur_ = addr(mem);
    end_ = cur_ + block;
    p = cur_;
  }
  cur_ = p + size;
  return ptr(p);
}

}  // namespace ductile::chunk
