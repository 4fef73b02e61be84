// Every replaceable global operator new and delete (C++17: plain, array,
// nothrow, sized, aligned and their combinations), forwarding to the core.
//
// Failure follows [new.delete]: call the new-handler and retry while there is
// one; without one, throw std::bad_alloc (or, for the nothrow forms, return
// null). The failure path is out of line and calls nothing of ours but the
// core again, so it cannot recurse into operator new. An alignment that is
// not a power of two (undefined behaviour for the caller) fails at once,
// without consulting the handler: retrying could never help.
//
// The size passed to a sized delete is not used: the page map finds a
// block's extent in O(1) without it, and a wrong size must not corrupt.
#include <new>

#include "core/runtime.h"

using namespace ductile;

namespace {

// `align`: 1 for the forms without an alignment argument.
DUCTILE_NOINLINE void* new_failed(size_t size, size_t align, bool nothrow) {
  for (;;) {
    if (!is_pow2(align)) break;
    std::new_handler handler = std::get_new_handler();
    if (handler == nullptr) break;
    if (nothrow) {
      try {
        handler();
      } catch (...) {
        return nullptr;
      }
    } else {
      handler();
    }
    void* p = core::alloc_aligned(size, align, false);
    if (p != nullptr) return p;
  }
  if (nothrow) return nullptr;
  throw std::bad_alloc();
}

DUCTILE_ALWAYS_INLINE void* new_impl(size_t size) {
  void* p = core::alloc(size);
  if (DUCTILE_LIKELY(p != nullptr)) return p;
  return new_failed(size, 1, false);
}

DUCTILE_ALWAYS_INLINE void* new_nothrow(size_t size) noexcept {
  void* p = core::alloc(size);
  if (DUCTILE_LIKELY(p != nullptr)) return p;
  return new_failed(size, 1, true);
}

DUCTILE_ALWAYS_INLINE void* new_aligned(size_t size, std::align_val_t al) {
  size_t align = static_cast<size_t>(al);
  void* p = core::alloc_aligned(size, align, false);
  if (DUCTILE_LIKELY(p != nullptr)) return p;
  return new_failed(size, align, false);
}

DUCTILE_ALWAYS_INLINE void* new_aligned_nothrow(size_t size, std::align_val_t al) noexcept {
  size_t align = static_cast<size_t>(al);
  void* p = core::alloc_aligned(size, align, false);
  if (DUCTILE_LIKELY(p != nullptr)) return p;
  return new_failed(size, align, true);
}

}  // namespace

DUCTILE_EXPORT void* operator new(size_t size) { return new_impl(size); }
DUCTILE_EXPORT void* operator new[](size_t size) { return new_impl(size); }
DUCTILE_EXPORT void* operator new(size_t size, const std::nothrow_t&) noexcept { return new_nothrow(size); }
DUCTILE_EXPORT void* operator new[](size_t size, const std::nothrow_t&) noexcept { return new_nothrow(size); }
DUCTILE_EXPORT void* operator new(size_t size, std::align_val_t al) { return new_aligned(size, al); }
DUCTILE_EXPORT void* operator new[](size_t size, std::align_val_t al) { return new_aligned(size, al); }
DUCTILE_EXPORT void* operator new(size_t size, std::align_val_t al, const std::nothrow_t&) noexcept {
  return new_aligned_nothrow(size, al);
}
DUCTILE_EXPORT void* operator new[](size_t size, std::align_val_t al, const std::nothrow_t&) noexcept {
  return new_aligned_nothrow(size, al);
}

DUCTILE_EXPORT void operator delete(void* p) noexcept { core::dealloc(p); }
DUCTILE_EXPORT void operator delete[](void* p) noexcept { core::dealloc(p); }
DUCTILE_EXPORT void operator delete(void* p, const std::nothrow_t&) noexcept { core::dealloc(p); }
DUCTILE_EXPORT void operator delete[](void* p, const std::nothrow_t&) noexcept { core::dealloc(p); }
DUCTILE_EXPORT void operator delete(void* p, size_t) noexcept { core::dealloc(p); }
DUCTILE_EXPORT void operator delete[](void* p, size_t) noexcept { core::dealloc(p); }
DUCTILE_EXPORT void operator delete(void* p, std::align_val_t) noexcept { core::dealloc(p); }
DUCTILE_EXPORT void operator delete[](void* p, std::align_val_t) noexcept { core::dealloc(p); }
DUCTILE_EXPORT void operator delete(void* p, std::align_val_t, const std::nothrow_t&) noexcept {
  core::dealloc(p);
}
DUCTILE_EXPORT void operator delete[](void* p, std::align_val_t, const std::nothrow_t&) noexcept {
  core::dealloc(p);
}
DUCTILE_EXPORT void operator delete(void* p, size_t, std::align_val_t) noexcept { core::dealloc(p); }
DUCTILE_EXPORT void operator delete[](void* p, size_t, std::align_val_t) noexcept { core::dealloc(p); }
