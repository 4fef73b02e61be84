/* SPDX-License-Identifier: BSD-2-Clause */
#pragma once

#include <cstddef>


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




}  // namespace ductile::core
