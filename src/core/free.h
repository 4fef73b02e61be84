/* SPDX-License-Identifier: BSD-2-Clause */
// Free past the inline path: whose block a pointer is (ownership), the checks
// and their messages, sized free, and the free into the thread cache.
#pragma once

#include <cstddef>

#include "core/state.h"

namespace ductile::core {

void dealloc_slow(void* p) noexcept;
// Hardened mode, before a free that says the size (and alignment, 0 for
// none) the block was allocated with (sdallocx, free_sized, sized operator
// delete): a size it cannot have been allocated with ends the program.
// Without hardened mode the size is neither needed nor trusted.
void check_sized_free(void* p, size_t size, size_t align) noexcept;
DUCTILE_ALWAYS_INLINE void check_size(void* p, size_t size, size_t align = 0) noexcept {
  if (DUCTILE_UNLIKELY(g_hardened)) check_sized_free(p, size, align);
}
// check_sized_free, then dealloc_slow: the one call that a hardened
// build's inline sized free leaves by, so that it needs no stack frame.
void dealloc_sized_slow(void* p, size_t size, size_t align) noexcept;
void dealloc_uncached(void* p) noexcept;
// The active extent of ours that holds p (a block's extent), or nullptr.
chunk::Extent* owner_of(const void* p) noexcept;
// The usable size of the block whose extent is e.
size_t usable_of(const chunk::Extent* e) noexcept;
// The usable size of a block of ours; 0 for anything else. Hardened mode:
// a sealed block's request (checked_request).
size_t usable_size(const void* p) noexcept;
// Hardened mode: the request's size that the sealed block p (a slab object
// or medium block of `block` bytes: small/seal.h) holds; a broken seal ends
// the program with the message `what`.
// `key`: the block's seal key, where the caller has its freed mark.
size_t checked_request(const void* p, size_t block, const char* what, uint64_t key) noexcept;
inline size_t checked_request(const void* p, size_t block, const char* what) noexcept {
  return checked_request(p, block, what, small::seal_key(p));
}
// Hardened builds: the seal of a block freed on the inline path is broken:
// "free(): double free detected" where the block carries its freed mark (a
// filled block freed again), else "free(): buffer overflow detected".
[[noreturn]] void seal_broken(const void* p) noexcept;
// Hardened mode: the sealed block p, which held `old` bytes asked for, now
// holds `size` (realloc and xallocx in place); `zero`: the bytes between
// the two are zeroed, as a grown block's new bytes are.
void reseal(void* p, size_t block, size_t old, size_t size, bool zero) noexcept;

// A pointer that is no block of ours (realloc: `by_realloc`): reports it and
// ends the program.
[[noreturn]] void bad_free(void* p, bool by_realloc = false) noexcept;
// realloc of p, a block of active extent e: a medium block in a thread cache
// (every mode) or, in hardened mode, a small one freed already (its freed
// mark, or its slab's bitmap) is "realloc(): block freed already", as one
// whose extent went back is.
void check_realloc_of(void* p, const chunk::Extent* e) noexcept;
// Frees p, a block of extent e (`cached` false: MALLOCX_TCACHE_NONE).
void dealloc_extent(void* p, chunk::Extent* e, bool cached = true);

}  // namespace ductile::core
