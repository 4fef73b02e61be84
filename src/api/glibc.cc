// SPDX-License-Identifier: BSD-2-Clause
// The rest of glibc's allocator interface, so that a program linked with
// ductile (or running with it preloaded) asks ductile, not the C library's
// unused heap: mallinfo, mallinfo2, malloc_stats, malloc_info and mallopt;
// and C23's free_sized and free_aligned_sized. What each answer means is in
// docs/ARCHITECTURE.md (API layer). As elsewhere, the ductile_ names are the
// definitions and the standard names are aliases.
#include <errno.h>
#include <limits.h>
#include <malloc.h>
#include <stdio.h>

#include "base/thread.h"
#include "core/runtime.h"
#include "core/stats.h"
#include "ductile/ductile.h"
#include "small/size_classes.h"

using namespace ductile;

namespace {

// The figures, or all zeroes while this thread is creating the runtime.
core::HeapInfo heap_info() {
  if (!core::ensure_ready()) return core::HeapInfo();
  core::StatsSnapshot s;
  core::take_snapshot(s);
  return core::heap_info(s);
}

// mallinfo's fields are int: a figure past INT_MAX saturates (glibc's wraps).
int saturate(size_t v) { return v > static_cast<size_t>(INT_MAX) ? INT_MAX : static_cast<int>(v); }

void to_file(void* fp, const char* text) { (void)fputs(text, static_cast<FILE*>(fp)); }

// The huge threshold that M_MMAP_THRESHOLD asks for: the value, as glibc
// reads it (a size_t, so a negative one is past every size), brought into
// the range the huge_threshold option allows.
size_t threshold_for(int value) {
  const size_t v = static_cast<size_t>(static_cast<long>(value));
  if (v <= small::kMaxSmall) return small::kMaxSmall + 1;
  return v > small::kMaxClassSize ? small::kMaxClassSize : v;
}

}  // namespace

extern "C" {

DUCTILE_EXPORT struct mallinfo2 ductile_mallinfo2(void) noexcept {
  const core::HeapInfo h = heap_info();
  struct mallinfo2 m = {};
  m.arena = h.arena;
  m.ordblks = h.ordblks;
  m.smblks = h.smblks;
  m.hblks = h.hblks;
  m.hblkhd = h.hblkhd;
  m.usmblks = h.usmblks;
  m.fsmblks = h.fsmblks;
  m.uordblks = h.uordblks;
  m.fordblks = h.fordblks;
  m.keepcost = h.keepcost;
  return m;
}

DUCTILE_EXPORT struct mallinfo ductile_mallinfo(void) noexcept {
  const core::HeapInfo h = heap_info();
  struct mallinfo m = {};
  m.arena = saturate(h.arena);
  m.ordblks = saturate(h.ordblks);
  m.smblks = saturate(h.smblks);
  m.hblks = saturate(h.hblks);
  m.hblkhd = saturate(h.hblkhd);
  m.usmblks = saturate(h.usmblks);
  m.fsmblks = saturate(h.fsmblks);
  m.uordblks = saturate(h.uordblks);
  m.fordblks = saturate(h.fordblks);
  m.keepcost = saturate(h.keepcost);
  return m;
}

// The summary DUCTILE_STATS=1 prints at exit, on standard error now. As
// glibc's, no cancellation point: the whole summary is written, and a
// cancellation pending is acted on at the thread's next cancellation point.
DUCTILE_EXPORT void ductile_malloc_stats(void) noexcept {
  const NoCancel no_cancel;
  (void)fflush(stderr);  // what the program wrote there before comes first
  if (!core::ensure_ready()) return;  // called while this thread builds the runtime
  core::print_stats(nullptr, nullptr, nullptr);
}

DUCTILE_EXPORT int ductile_malloc_info(int options, FILE* fp) noexcept {
  // As glibc's code (its manual page says -1 and errno): EINVAL, returned.
  if (options != 0) return EINVAL;
  if (!core::ensure_ready()) return 0;  // called while this thread builds the runtime
  // The snapshot is taken first and no lock is held while the text goes to
  // fp, whose stdio buffer may be allocated now.
  core::print_xml(to_file, fp);
  return 0;
}

DUCTILE_EXPORT int ductile_mallopt(int param, int value) noexcept {
  // glibc's answers (2.36): 1; unknown parameters are accepted too. Only
  // M_MMAP_THRESHOLD has a meaning here: see docs/ARCHITECTURE.md. M_MXFAST
  // is refused (0), whatever the value: it sizes glibc's fast bins, and 0
  // turns them off, after which mallinfo's smblks is 0; ductile has no such
  // cache, and its smblks (free objects in slabs) would contradict a yes.
  switch (param) {
    case M_MXFAST:
      return 0;
    case M_MMAP_THRESHOLD:
      (void)core::set_huge_threshold(threshold_for(value));
      return 1;
    default:
      return 1;
  }
}

DUCTILE_EXPORT void ductile_free_sized(void* p, size_t size) noexcept {
  // The size is not needed (the page map finds the block in O(1)) and not
  // trusted, as sdallocx's: a wrong one cannot corrupt. Hardened mode checks it.
  core::dealloc_sized(p, size);
}

DUCTILE_EXPORT void ductile_free_aligned_sized(void* p, size_t alignment, size_t size) noexcept {
  core::dealloc_sized(p, size, alignment);
}


struct mallinfo2 mallinfo2(void) noexcept DUCTILE_ALIAS(mallinfo2);
struct mallinfo mallinfo(void) noexcept DUCTILE_ALIAS(mallinfo);
void malloc_stats(void) noexcept DUCTILE_ALIAS(malloc_stats);
int malloc_info(int, FILE*) noexcept DUCTILE_ALIAS(malloc_info);
int mallopt(int, int) noexcept DUCTILE_ALIAS(mallopt);
void free_sized(void*, size_t) noexcept DUCTILE_ALIAS(free_sized);
void free_aligned_sized(void*, size_t, size_t) noexcept DUCTILE_ALIAS(free_aligned_sized);

}  // extern "C"
