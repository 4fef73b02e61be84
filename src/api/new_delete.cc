// SPDX-License-Identifier: BSD-2-Clause
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
//
// No link-time dependency on the C++ runtime: libductile.so does not need
// libstdc++, so a C program that preloads it does not load one. Only a
// failing operator new needs the runtime -- the new-handler and
// std::bad_alloc -- and it is a C++ program's, looked up by name when that
// happens (also one a C program dlopen()ed later with a C++ plugin). The
// nothrow forms catch what a handler throws; the symbols that catching
// needs are weak, so they resolve to the program's runtime when it has one
// at load time. Without one then, the nothrow forms do not call a handler
// (one installed later by a plugin could throw past them) and return null.
#include <dlfcn.h>

#include <atomic>
#include <new>

#include "core/runtime.h"

// A sanitizer build leaves the operators to the sanitizer's runtime (see
// DUCTILE_ALIAS in base/common.h).
#ifndef DUCTILE_SANITIZE

// The compiler's own references to the catching machinery, made weak at the
// assembler (the compiler declares these itself, beyond #pragma weak's reach).
asm(".weak __gxx_personality_v0");
asm(".weak __cxa_begin_catch");
asm(".weak __cxa_end_catch");
asm(".weak _Unwind_Resume");
// Declared for its address only: null when the program had no C++ runtime
// when ductile was loaded.
extern "C" void __gxx_personality_v0() __attribute__((weak));

using namespace ductile;

namespace {

// A symbol of the program's C++ runtime, or nullptr: first in the global
// scope, then in a runtime loaded locally (RTLD_LOCAL) by a plugin.
void* cxx_symbol(const char* name) noexcept {
  if (void* p = dlsym(RTLD_DEFAULT, name)) return p;
  static const char* const kRuntimes[] = {"libstdc++.so.6", "libc++abi.so.1", "libc++.so.1"};
  for (const char* lib : kRuntimes) {
    void* h = dlopen(lib, RTLD_LAZY | RTLD_NOLOAD);
    if (h == nullptr) continue;
    void* p = dlsym(h, name);
    dlclose(h);
    if (p != nullptr) return p;
  }
  return nullptr;
}

std::new_handler current_new_handler() noexcept {
  using Get = std::new_handler (*)();
  static std::atomic<Get> get{nullptr};
  Get f = get.load(std::memory_order_acquire);
  if (f == nullptr) {
    f = reinterpret_cast<Get>(cxx_symbol("_ZSt15get_new_handlerv"));  // std::get_new_handler()
    if (f == nullptr) return nullptr;
    get.store(f, std::memory_order_release);
  }
  return f();
}

// throw std::bad_alloc(), through the program's runtime: the exception
// object is the runtime's own bad_alloc (its vtable, type_info and
// destructor), so `catch (const std::bad_alloc&)` matches it exactly.
[[noreturn]] DUCTILE_NOINLINE void throw_bad_alloc() {
  using Allocate = void* (*)(size_t);
  using Throw = void (*)(void*, void*, void (*)(void*));
  auto allocate = reinterpret_cast<Allocate>(cxx_symbol("__cxa_allocate_exception"));
  auto raise = reinterpret_cast<Throw>(cxx_symbol("__cxa_throw"));
  void* type = cxx_symbol("_ZTISt9bad_alloc");     // typeid(std::bad_alloc)
  void* vtable = cxx_symbol("_ZTVSt9bad_alloc");   // its vtable
  void* dtor = cxx_symbol("_ZNSt9bad_allocD1Ev");  // std::bad_alloc::~bad_alloc()
  if (allocate == nullptr || raise == nullptr || type == nullptr || vtable == nullptr || dtor == nullptr)
    fatal("operator new: out of memory, and no C++ runtime to throw std::bad_alloc");
  void* e = allocate(sizeof(void*));
  // The object is just its vtable pointer, which points past the vtable's
  // offset-to-top and type_info slots (the Itanium C++ ABI).
  *static_cast<void**>(e) = static_cast<char*>(vtable) + 2 * sizeof(void*);
  raise(e, type, reinterpret_cast<void (*)(void*)>(dtor));
  __builtin_unreachable();
}

// `align`: 1 for the forms without an alignment argument.
DUCTILE_NOINLINE void* new_failed(size_t size, size_t align, bool nothrow) {
  for (;;) {
    if (!is_pow2(align)) break;
    std::new_handler handler = current_new_handler();
    if (handler == nullptr) break;
    if (nothrow) {
      // The catch needs the C++ runtime's personality routine, bound when
      // ductile was loaded. A C program that dlopen()s its C++ later (a
      // plugin) has it unbound, and what a handler threw would pass through
      // this noexcept frame: then the handler is not called, and the result
      // is null, as when it throws.
      if (&__gxx_personality_v0 == nullptr) return nullptr;
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
  throw_bad_alloc();
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
// The sized forms: the size is checked in hardened mode only (one load of a
// flag otherwise).
DUCTILE_EXPORT void operator delete(void* p, size_t size) noexcept {
  core::dealloc_sized(p, size);
}
DUCTILE_EXPORT void operator delete[](void* p, size_t size) noexcept {
  core::dealloc_sized(p, size);
}
DUCTILE_EXPORT void operator delete(void* p, std::align_val_t) noexcept { core::dealloc(p); }
DUCTILE_EXPORT void operator delete[](void* p, std::align_val_t) noexcept { core::dealloc(p); }
DUCTILE_EXPORT void operator delete(void* p, std::align_val_t, const std::nothrow_t&) noexcept {
  core::dealloc(p);
}
DUCTILE_EXPORT void operator delete[](void* p, std::align_val_t, const std::nothrow_t&) noexcept {
  core::dealloc(p);
}
DUCTILE_EXPORT void operator delete(void* p, size_t size, std::align_val_t al) noexcept {
  core::dealloc_sized(p, size, static_cast<size_t>(al));
}
DUCTILE_EXPORT void operator delete[](void* p, size_t size, std::align_val_t al) noexcept {
  core::dealloc_sized(p, size, static_cast<size_t>(al));
}

#endif  // DUCTILE_SANITIZE
