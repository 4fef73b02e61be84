// SPDX-License-Identifier: BSD-2-Clause
// The C allocation functions: each forwards to the core. The ductile_ names
// are the definitions; the standard names are aliases of them, so a
// preloaded libductile interposes on the C library's allocator with no extra
// call.
#include <errno.h>
#include <malloc.h>
#include <stdlib.h>
#include <unistd.h>

#include "core/runtime.h"
#include "ductile/ductile.h"

using namespace ductile;

namespace {
bool mul_overflows(size_t a, size_t b, size_t* out) { return __builtin_mul_overflow(a, b, out); }
}  // namespace

extern "C" {

// Each on a 64-byte line of its own start: where the link put them decided
// the pair's speed with the same instructions (16 B: 3.9 ns at a line's
// start, 4.2 at its middle, on an AMD EPYC).
__attribute__((aligned(64))) DUCTILE_EXPORT void* ductile_malloc(size_t size) noexcept { return core::alloc(size); }

__attribute__((aligned(64))) DUCTILE_EXPORT void ductile_free(void* p) noexcept { core::dealloc(p); }

DUCTILE_EXPORT void* ductile_calloc(size_t n, size_t size) noexcept {
  size_t total;
  if (mul_overflows(n, size, &total)) {
    errno = ENOMEM;
    return nullptr;
  }
  return core::alloc_aligned(total, 1, true);
}

DUCTILE_EXPORT void* ductile_realloc(void* p, size_t size) noexcept {
  // As glibc: realloc(p, 0) frees p and returns NULL; realloc(NULL, 0) is malloc(0).
  if (size == 0 && p != nullptr) {
    core::dealloc(p);
    return nullptr;
  }
  return core::reallocate(p, size);
}

DUCTILE_EXPORT void* ductile_reallocarray(void* p, size_t n, size_t size) noexcept {
  size_t total;
  if (mul_overflows(n, size, &total)) {
    errno = ENOMEM;
    return nullptr;
  }
  return ductile_realloc(p, total);
}

DUCTILE_EXPORT int ductile_posix_memalign(void** out, size_t align, size_t size) noexcept {
  // A bad alignment is only returned. An allocation that fails leaves
  // ENOMEM in errno as well, as glibc's does: programs read errno after a
  // failed posix_memalign as after a failed malloc.
  if (!is_pow2(align) || align % sizeof(void*) != 0) return EINVAL;
  void* p = core::alloc_aligned(size, align, false);
  if (p == nullptr) return ENOMEM;  // errno is ENOMEM already
  *out = p;
  return 0;
}

DUCTILE_EXPORT void* ductile_aligned_alloc(size_t align, size_t size) noexcept {
  // glibc accepts any power of two (C17 dropped the size-multiple rule).
  return core::alloc_aligned(size, align, false);
}

DUCTILE_EXPORT void* ductile_memalign(size_t align, size_t size) noexcept {
  // As glibc: an alignment that is not a power of two is rounded up to one;
  // only one above 2^63, which has none to round up to, is EINVAL (2^63
  // itself, or anything rounded up to it, cannot be met: ENOMEM).
  if (align > SIZE_MAX / 2 + 1) {
    errno = EINVAL;
    return nullptr;
  }
  size_t a = 1;
  while (a < align) a <<= 1;
  return core::alloc_aligned(size, a, false);
}

DUCTILE_EXPORT void* ductile_valloc(size_t size) noexcept { return core::alloc_aligned(size, kPage, false); }

DUCTILE_EXPORT void* ductile_pvalloc(size_t size) noexcept {
  size_t rounded = align_up(size == 0 ? 1 : size, kPage);
  if (rounded == 0) {
    errno = ENOMEM;
    return nullptr;
  }
  return core::alloc_aligned(rounded, kPage, false);
}

DUCTILE_EXPORT size_t ductile_malloc_usable_size(void* p) noexcept { return core::usable_size(p); }

DUCTILE_EXPORT size_t ductile_trim(void) noexcept { return core::trim(); }

DUCTILE_EXPORT int ductile_malloc_trim(size_t pad) noexcept {
  (void)pad;
  return core::trim() != 0 ? 1 : 0;
}


void* malloc(size_t) noexcept DUCTILE_ALIAS(malloc);
void free(void*) noexcept DUCTILE_ALIAS(free);
void* calloc(size_t, size_t) noexcept DUCTILE_ALIAS(calloc);
void* realloc(void*, size_t) noexcept DUCTILE_ALIAS(realloc);
void* reallocarray(void*, size_t, size_t) noexcept DUCTILE_ALIAS(reallocarray);
int posix_memalign(void**, size_t, size_t) noexcept DUCTILE_ALIAS(posix_memalign);
void* aligned_alloc(size_t, size_t) noexcept DUCTILE_ALIAS(aligned_alloc);
void* memalign(size_t, size_t) noexcept DUCTILE_ALIAS(memalign);
void* valloc(size_t) noexcept DUCTILE_ALIAS(valloc);
void* pvalloc(size_t) noexcept DUCTILE_ALIAS(pvalloc);
size_t malloc_usable_size(void*) noexcept DUCTILE_ALIAS(malloc_usable_size);
int malloc_trim(size_t) noexcept DUCTILE_ALIAS(malloc_trim);

// glibc's internal names for the same functions, which it exports: code that
// calls the C library's allocator by them (wrappers that define malloc
// themselves, for one) gets ductile's, the allocator the program uses.
void* __libc_malloc(size_t) noexcept DUCTILE_ALIAS(malloc);
void __libc_free(void*) noexcept DUCTILE_ALIAS(free);
void* __libc_calloc(size_t, size_t) noexcept DUCTILE_ALIAS(calloc);
void* __libc_realloc(void*, size_t) noexcept DUCTILE_ALIAS(realloc);
void* __libc_memalign(size_t, size_t) noexcept DUCTILE_ALIAS(memalign);
void* __libc_valloc(size_t) noexcept DUCTILE_ALIAS(valloc);
void* __libc_pvalloc(size_t) noexcept DUCTILE_ALIAS(pvalloc);

}  // extern "C"
