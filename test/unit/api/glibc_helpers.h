/* SPDX-License-Identifier: BSD-2-Clause */
// Helpers that the tests of glibc's allocator interface share.
#pragma once

#include <dlfcn.h>

#include <cstddef>

namespace ductile::test {

inline constexpr size_t kMiB = size_t{1} << 20;

// The C library's own definition of `name`.
template <typename F>
F from_libc(const char* name) {
  return reinterpret_cast<F>(dlsym(RTLD_NEXT, name));
}

// Keeps the compiler from pairing a malloc with its free and dropping both.
inline void* opaque(void* p) {
  void* volatile v = p;
  return v;
}

}  // namespace ductile::test
