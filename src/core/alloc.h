/* SPDX-License-Identifier: BSD-2-Clause */
// Allocation: the slow path, medium blocks from the chunk layer, sampled
// blocks, aligned and uncached requests.
#pragma once

#include <cstddef>

#include "core/place.h"
#include "core/prof.h"
#include "core/state.h"

namespace ductile::core {

// Slow paths and everything but the cache hits. All set errno on failure.
void* alloc_slow(size_t size) noexcept;
// `align`: a power of two; `zero`: the block reads as zeroes.
void* alloc_aligned(size_t size, size_t align, bool zero) noexcept;
// MALLOCX_TCACHE_NONE: as alloc_aligned and free, but the block neither comes
// from nor goes to the thread cache (straight from and back to its bin or
// the chunk layer).
void* alloc_aligned_uncached(size_t size, size_t align, bool zero) noexcept;
// The usable size malloc(size) would give (nallocx); 0 if it would fail.
size_t usable_size_for(size_t size, size_t align) noexcept;

// ---- medium blocks -----------------------------------------------------
// A page run of its own for a block of class cls. `tagged` false leaves its
// first page without the page-map tag, so that its free takes the slow path
// (a sampled block, which may be of a small class too).
// Hardened mode's record of a block's alignment (chunk::Extent::lg_align):
// log2 of an alignment past a page, else 0.
inline uint8_t lg_align_of(size_t align) {
  return align > kPage ? static_cast<uint8_t>(__builtin_ctzll(align)) : 0;
}
// Hardened mode: records the alignment `align` of p, a huge or medium block
// (nothing for nullptr or a small one; nothing outside hardened mode).
void note_alignment(void* p, size_t align) noexcept;
void* medium_from_chunks(size_t cls, size_t align, bool zero, bool tagged = true,
                         chunk::Space space = chunk::Space::kPlain);

// The sample a sampled block's extent holds.
inline prof::Sample* sample_of(const chunk::Extent* e) { return static_cast<prof::Sample*>(e->sample); }

// `growing`: the block replaces a smaller one (realloc): a huge one is
// densely used, and goes to huge-page space; a medium one, past the first
// few, to the dense space.
void* alloc_impl(size_t size, size_t align, bool zero, bool cached = true, bool growing = false);

}  // namespace ductile::core
