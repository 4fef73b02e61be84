// SPDX-License-Identifier: BSD-2-Clause
// jemalloc's extended allocation API (mallocx and friends), forwarding to the
// core. The ductile_ names are the definitions; jemalloc's names are aliases.
//
// Flags, as jemalloc encodes them: bits 0-5 lg(alignment) (0: none), bit 6
// MALLOCX_ZERO, bits 8-19 the thread cache (0: the calling thread's; 1:
// MALLOCX_TCACHE_NONE, which bypasses it; t + 2: MALLOCX_TCACHE(t), which is
// served by the calling thread's cache), bits 20 and up the arena + 1 (every
// arena index is served by the one arena: see arenas.create in mallctl_leaves.cc).
#include <errno.h>

#include "core/runtime.h"
#include "ductile/ductile.h"

using namespace ductile;

namespace {

constexpr int kLgAlignMask = 0x3f;
constexpr int kZero = 0x40;
constexpr size_t kMaxSize = static_cast<size_t>(PTRDIFF_MAX);

// The requested alignment: 0 for none.
size_t align_of(int flags) {
  int lg = flags & kLgAlignMask;
  return lg == 0 ? 0 : size_t{1} << lg;
}
bool zero_of(int flags) { return (flags & kZero) != 0; }
// MALLOCX_TCACHE_NONE: the tcache field is 1.
bool uncached(int flags) { return ((flags >> 8) & 0xfff) == 1; }

}  // namespace

extern "C" {

DUCTILE_EXPORT void* ductile_mallocx(size_t size, int flags) noexcept {
  size_t align = align_of(flags);
  bool zero = zero_of(flags);
  if (DUCTILE_UNLIKELY(uncached(flags))) return core::alloc_aligned_uncached(size, align == 0 ? 1 : align, zero);
  if (DUCTILE_LIKELY(align == 0 && !zero)) return core::alloc(size);
  return core::alloc_aligned(size, align == 0 ? 1 : align, zero);
}

DUCTILE_EXPORT void* ductile_rallocx(void* p, size_t size, int flags) noexcept {
  return core::reallocate_aligned(p, size, align_of(flags), zero_of(flags), !uncached(flags));
}

DUCTILE_EXPORT size_t ductile_xallocx(void* p, size_t size, size_t extra, int flags) noexcept {
  size_t old = core::usable_size(p);
  if (old == 0) return 0;  // not a block of ours
  size_t align = align_of(flags);
  // An alignment the block does not have cannot be had without moving.
  if (size > kMaxSize || (align != 0 && !is_aligned(addr(p), align))) return old;
  size_t most = extra > kMaxSize - size ? kMaxSize : size + extra;
  bool zero = zero_of(flags);
  // As jemalloc: try for size + extra, and settle for size.
  size_t got = core::resize_in_place(p, most, zero);
  if (got < size && most != size) got = core::resize_in_place(p, size, zero);
  return got;
}

DUCTILE_EXPORT size_t ductile_sallocx(const void* p, int flags) noexcept {
  (void)flags;
  return core::usable_size(p);
}

DUCTILE_EXPORT void ductile_dallocx(void* p, int flags) noexcept {
  if (DUCTILE_UNLIKELY(uncached(flags))) core::dealloc_uncached(p);
  else core::dealloc(p);
}

// The size is not used: the page map finds the block's extent in O(1)
// anyway, and a wrong size must not corrupt anything. Hardened mode checks it.
DUCTILE_EXPORT void ductile_sdallocx(void* p, size_t size, int flags) noexcept {
  if (kHardened && flags == 0) return core::dealloc_sized(p, size);  // checked on the inline path
  core::check_size(p, size, align_of(flags));  // hardened mode only
  ductile_dallocx(p, flags);
}

DUCTILE_EXPORT size_t ductile_nallocx(size_t size, int flags) noexcept {
  size_t align = align_of(flags);
  // Past PTRDIFF_MAX no block can exist; nor one whose alignment padding
  // would take it there.
  if (size > kMaxSize || align > kMaxSize - size) return 0;
  size_t n = core::usable_size_for(size, align == 0 ? 1 : align);
  return n > kMaxSize ? 0 : n;
}


void* mallocx(size_t, int) DUCTILE_JEMALLOC_ALIAS(mallocx);
void* rallocx(void*, size_t, int) DUCTILE_JEMALLOC_ALIAS(rallocx);
size_t xallocx(void*, size_t, size_t, int) DUCTILE_JEMALLOC_ALIAS(xallocx);
size_t sallocx(const void*, int) DUCTILE_JEMALLOC_ALIAS(sallocx);
void dallocx(void*, int) DUCTILE_JEMALLOC_ALIAS(dallocx);
void sdallocx(void*, size_t, int) DUCTILE_JEMALLOC_ALIAS(sdallocx);
size_t nallocx(size_t, int) DUCTILE_JEMALLOC_ALIAS(nallocx);

}  // extern "C"
