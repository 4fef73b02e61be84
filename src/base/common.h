/* SPDX-License-Identifier: BSD-2-Clause */
// Compiler attributes, always-on checks and debug assertions, page arithmetic.
// Every other header includes this one; it includes nothing of ours.
#pragma once

#include <cerrno>
#include <cstddef>
#include <cstdint>

#include "config.h"

#define DUCTILE_LIKELY(x) __builtin_expect(!!(x), 1)
#define DUCTILE_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define DUCTILE_NOINLINE __attribute__((noinline))
#define DUCTILE_ALWAYS_INLINE inline __attribute__((always_inline))
#define DUCTILE_EXPORT __attribute__((visibility("default")))
// An exported standard name that is another name of ductile_<name>: the API
// layer defines the ductile_ functions and aliases the standard names to them.
// In a sanitizer build the standard names are not defined at all: the
// sanitizer's runtime replaces malloc itself, and a second definition would
// bypass it (or free its blocks as ours).
#define DUCTILE_ALIAS_ALWAYS(name) __attribute__((alias("ductile_" #name), visibility("default")))
#ifdef DUCTILE_SANITIZE
#define DUCTILE_ALIAS(name)
#else
#define DUCTILE_ALIAS(name) DUCTILE_ALIAS_ALWAYS(name)
#endif
// jemalloc's names (mallocx, mallctl...), which no sanitizer defines: in
// every build.
#define DUCTILE_JEMALLOC_ALIAS(name) DUCTILE_ALIAS_ALWAYS(name)
// A large static array (the runtime's storage, tables of tens of KiB):
// placed after the library's other zero-initialised data (the linker puts
// .lbss after .bss), so that the small variables a program's first call
// writes share the few pages around the end of the initialised data, which
// loading the library already made private, instead of each landing on a
// page of its own between two arrays (one page fault each, at start-up).
// One that other files use is declared DUCTILE_HIDDEN there: the linker
// does not turn a load of a large section's address from the GOT into a
// `lea`, as it does for the others.
#define DUCTILE_LARGE_STATIC __attribute__((section(".lbss")))
// A variable of the library declared in a header: its address is known to
// be the library's own, so code reaches it relative to the instruction, not
// through the GOT.
#define DUCTILE_HIDDEN __attribute__((visibility("hidden")))

namespace ductile {

// Build options as constants the compiler always sees, so debug-only code is
// type-checked in every build and cannot rot behind #ifdef.
#ifdef DUCTILE_DEBUG
inline constexpr bool kDebug = true;
#else
inline constexpr bool kDebug = false;
#endif
#ifdef DUCTILE_HARDENED
inline constexpr bool kHardened = true;
#else
inline constexpr bool kHardened = false;
#endif
#ifdef DUCTILE_STATS
inline constexpr bool kStats = true;
#else
inline constexpr bool kStats = false;
#endif
// Built with --enable-sanitizers: parts of the address space are the
// sanitizer's (its shadow), which the chunk layer's hints must avoid.
#ifdef DUCTILE_SANITIZE
inline constexpr bool kSanitized = true;
#else
inline constexpr bool kSanitized = false;
#endif

// Puts errno back as it was when the scope ends. A call that succeeds must
// leave errno alone (C11 7.5), but on its way the allocator makes calls that
// fail by design -- a start-up probe, a refused address hint, a fallback --
// and each sets errno. Failures the caller should see set errno after the
// scope that holds one of these.
class KeepErrno {
 public:
  KeepErrno() noexcept : saved_(errno) {}
  ~KeepErrno() { errno = saved_; }
  KeepErrno(const KeepErrno&) = delete;
  KeepErrno& operator=(const KeepErrno&) = delete;

 private:
  int saved_;
};

#ifdef DUCTILE_PROF
inline constexpr bool kProf = true;
#else
inline constexpr bool kProf = false;
#endif

// Writes a message to stderr with write(2) and aborts. Never allocates.
[[noreturn]] void fatal(const char* msg) noexcept;
// A fault of the program's, found in a call it made (a double free, a
// pointer ductile never returned): writes "ductile: <what> <p>" to stderr in
// one line, as glibc's "free(): invalid pointer", and aborts. Never allocates.
[[noreturn]] void fatal_pointer(const char* what, const void* p) noexcept;
// Writes a one-line warning to stderr with write(2). Never allocates.
void warn(const char* msg) noexcept;
// Writes v in decimal into buf (n bytes, NUL-terminated, cut short if it does
// not fit; 21 bytes always do). Returns the digits written. Never allocates.
size_t format_u64(uint64_t v, char* buf, size_t n) noexcept;

}  // namespace ductile

// Always-on check: for invariants whose violation would corrupt memory.
#define DUCTILE_CHECK(cond)                                               \
  do {                                                                    \
    if (DUCTILE_UNLIKELY(!(cond)))                                        \
      ::ductile::fatal(__FILE__ ":" DUCTILE_STR(__LINE__) ": check failed: " #cond); \
  } while (0)
// Debug-only assertion (--enable-debug); compiled but not evaluated otherwise.
#define DUCTILE_ASSERT(cond)                                              \
  do {                                                                    \
    if (::ductile::kDebug && DUCTILE_UNLIKELY(!(cond)))                   \
      ::ductile::fatal(__FILE__ ":" DUCTILE_STR(__LINE__) ": assertion failed: " #cond); \
  } while (0)
#define DUCTILE_STR2(x) #x
#define DUCTILE_STR(x) DUCTILE_STR2(x)

namespace ductile {

// 4 KiB base pages: checked against sysconf(_SC_PAGESIZE) at start-up.
inline constexpr size_t kPageShift = 12;
inline constexpr size_t kPage = size_t{1} << kPageShift;
// The transparent huge page size on x86-64 and arm64 with 4 KiB pages.
inline constexpr size_t kHugePageShift = 21;
inline constexpr size_t kHugePage = size_t{1} << kHugePageShift;

constexpr bool is_pow2(size_t x) { return x != 0 && (x & (x - 1)) == 0; }
// Round up to a multiple of a power of two; returns 0 on overflow.
constexpr size_t align_up(size_t x, size_t a) {
  return x > SIZE_MAX - (a - 1) ? 0 : (x + a - 1) & ~(a - 1);
}
constexpr uintptr_t align_down(uintptr_t x, size_t a) { return x & ~(uintptr_t{a} - 1); }
constexpr bool is_aligned(uintptr_t x, size_t a) { return (x & (a - 1)) == 0; }
inline uintptr_t addr(const void* p) { return reinterpret_cast<uintptr_t>(p); }
inline void* ptr(uintptr_t a) { return reinterpret_cast<void*>(a); }

}  // namespace ductile
