/* SPDX-License-Identifier: BSD-2-Clause */
// realloc, rallocx and xallocx: a block resized in place where it can be, or
// moved through the growth chain (the huge layer's) or by a copy.
#pragma once

#include <cstddef>

namespace ductile::core {

// realloc semantics, except that size 0 is served as a minimal block (the API
// layer decides what realloc(p, 0) means).
void* reallocate(void* p, size_t size) noexcept;
// rallocx semantics: may move; the result is `align`-aligned (0: no
// requirement) and its usable size is exactly usable_size_for(size, align),
// shrinking included; with `zero`, bytes past the old usable size read as
// zero; `cached` false bypasses the thread cache (MALLOCX_TCACHE_NONE).
void* reallocate_aligned(void* p, size_t size, size_t align, bool zero, bool cached = true) noexcept;
// Grows or shrinks in place only (xallocx): returns the usable size after.
size_t resize_in_place(void* p, size_t size, bool zero) noexcept;

}  // namespace ductile::core
