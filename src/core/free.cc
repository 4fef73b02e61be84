// SPDX-License-Identifier: BSD-2-Clause
// Free past the inline path (core/free.h).
#include "core/free.h"

#include <cstring>

#include "core/alloc.h"
#include "core/cache.h"
#include "core/depot.h"
#include "core/fallback_heap.h"
#include "core/place.h"
#include "small/seal.h"

namespace ductile::core {

using chunk::Extent;
using chunk::ExtentKind;
using small::ThreadCache;

namespace {

// The sample goes with the block; the block goes straight back (a small
// class's page run has no cache bin to go to).
void dealloc_sampled(void* p, Extent* e) {
  if (DUCTILE_UNLIKELY(addr(p) != e->base)) return;  // not a block start: not ours to free
  prof::release(sample_of(e));
  e->sample = nullptr;
  count_bytes(0, e->usable);
  make_background_before(e->size);
  if (e->kind == ExtentKind::kHuge) rt().huge.free(e);
  else rt().chunks.free(e);
}

// The cache a free goes to. A thread's first free, made before it has a
// cache, goes straight back to the bin instead (nullptr): a thread that starts
// by freeing a block another thread allocated -- a neighbour of that thread's
// blocks -- then does not get it back from its next malloc (passive false
// sharing, the cache-scratch workload). Its second free, or first malloc,
// makes the cache, so a thread that only frees still frees through one.
ThreadCache* cache_for_free() {
  ThreadCache* tc = t_cache;
  if (DUCTILE_LIKELY(tc != no_cache())) return tc;
  if (t_state == kNoCache && !t_freed_uncached) {
    t_freed_uncached = true;
    return nullptr;
  }
  return create_cache();
}

// Hardened mode, a thread without a cache (hardened:true alone has none):
// the medium block p (extent e), marked freed, waits in the depot of its
// class, as a cache's would, where it has one, so that its hand-out or its
// way back to the chunk layer checks the mark (take_marked): a write after
// free is found. False where the depot did not take it.
bool depot_keep(void* p, Extent* e) {
  const size_t cls = e->size_class;
  if (!depot_holds_uncached(cls)) return false;
  (void)medium_put(e);
  e->lg_align = 0;
  void* slot[2] = {p, e};  // a cache bin's pair (thread_cache.h)
  if (depot_put(cls, slot, 1) == 1) return true;
  medium_take(e);
  return false;
}

// A freed small or medium block goes into the calling thread's cache (a full
// cache bin first gives back its older half); without a cache, straight back.
// `cached` false (MALLOCX_TCACHE_NONE): straight back in any case.
void cache_push(void* p, Extent* e, bool cached) {
  size_t cls = e->size_class;
  // A medium block in a thread cache (this one's or another thread's) is
  // free already: found here in every mode, before it could be handed out
  // twice (its extent is at hand).
  if (!small::is_small_class(cls) && __atomic_load_n(&e->cached, __ATOMIC_RELAXED) != 0)
    fatal_pointer("free(): double free detected", p);
  ThreadCache* tc = cached ? cache_for_free() : nullptr;
  // Into a cache or straight into a bin, it is freed (small::take_marked),
  // and maybe filled: a sample of a thread cache's frees, or (hardened:true
  // alone, no caches) every small one (a medium block waits in its class's
  // depot where it has one: depot_keep).
  if (g_hardened) {
    const bool fill =
        tc != nullptr ? fill_due(tc) : !kHardened && small::is_small_class(cls) && rt().opts.freed_fill != 0;
    small::free_marked(p, small::freed_mark(p), fill, small::class_size(cls));
  }
  if (tc == nullptr) {
    count_bytes(0, small::class_size(cls));
    if (small::is_small_class(cls)) {
      small::Bin::flush_to_owners(rt().chunks, &p, 1);
    } else if (!(g_hardened && cached && depot_keep(p, e))) {
      make_background_before(e->size);
      rt().chunks.free(e);
    }
    return;
  }
  if (!small::is_small_class(cls)) {
    (void)medium_put(e);
    e->lg_align = 0;  // handed out next by a plain malloc, maybe
  }
  small::CacheBin& b = tc->bins[cls];
  if (!b.has_room()) {
    if (small::is_small_class(cls)) adapt_depth(tc, cls, false);  // may make room
    if (!b.has_room()) {
      flush_half(tc, cls);
      decay_from_calls();
    }
  }
  if (kStats) tc->deallocated += small::class_size(cls);
  cache_slot_in(b, p, cls, e);
}

}  // namespace

void dealloc_extent(void* p, Extent* e, bool cached) {
  if (kProf && DUCTILE_UNLIKELY(e->sample != nullptr)) return dealloc_sampled(p, e);
  switch (e->kind) {
    case ExtentKind::kSlab:
      cache_push(p, e, cached);
      return;
    case ExtentKind::kMedium:
      if (DUCTILE_UNLIKELY(addr(p) != e->base)) return;  // not a block start: not ours to free
      cache_push(p, e, cached);
      return;
    case ExtentKind::kHuge:
      if (DUCTILE_UNLIKELY(addr(p) != e->base)) return;
      if (kStats)
        if (ThreadCache* tc = own_cache()) tc->deallocated += e->usable;
      make_background_before(e->size);
      rt().huge.free(e);
      return;
    case ExtentKind::kNone:
      return;
  }
}

Extent* owner_of(const void* p) noexcept {
  if (!g_ready.load(std::memory_order_acquire)) return nullptr;
  Extent* e = rt().chunks.lookup(p);
  if (e == nullptr || e->state != chunk::ExtentState::kActive || e->kind == ExtentKind::kNone ||
      addr(p) < e->base || addr(p) >= e->end())
    return nullptr;
  return e;
}

size_t usable_of(const Extent* e) noexcept {
  return e->kind == ExtentKind::kSlab ? small::class_size(e->size_class) : e->usable;
}


// A pointer that is no block of ours. Every mode reports what it can see
// without more loads than the slow path makes anyway: a pointer into no
// extent of ours, or one off the 8-byte grid (glibc's "free(): invalid
// pointer"), and one into free space -- a huge or medium block freed
// already ("double free"). Freeing it anyway would corrupt the heap.
// realloc says the same of the same pointers, in its own name.
// Before the first block of ours (nothing is ours yet: the runtime is not
// even set up) every pointer but a bootstrap one is foreign.
[[noreturn]] DUCTILE_NOINLINE void bad_free(void* p, bool by_realloc) noexcept {
  const bool ready = g_ready.load(std::memory_order_acquire);
  const Extent* e = ready ? rt().chunks.lookup(p) : nullptr;
  // A block's start in free space: its own extent, or one it merged into
  // (then no extent begins at p: the chunk layer's free sets tell).
  const bool freed = is_aligned(addr(p), kPage) &&
                     (e != nullptr ? e->state != chunk::ExtentState::kActive && addr(p) >= e->base && addr(p) < e->end()
                                   : ready && rt().chunks.in_free_space(p));
  if (by_realloc) fatal_pointer(freed ? "realloc(): block freed already" : "realloc(): invalid pointer", p);
  fatal_pointer(freed ? "free(): double free detected" : "free(): invalid pointer", p);
}

namespace {

// Hardened mode: p, inside active extent e, must be a block's start and
// not freed already: its freed mark (the inline free of --enable-hardened
// checks it too, small::free_marked), or a medium block's cached mark. Then
// its seal must hold (small/seal.h; a medium block's is read once it is
// known not to be in a cache, whose collector may have purged it).
void check_block(void* p, const Extent* e) noexcept {
  if (e->kind == ExtentKind::kSlab) {
    if ((addr(p) - e->base) % small::class_size(e->size_class) != 0) fatal_pointer("free(): invalid pointer", p);
  } else if (addr(p) != e->base) {
    fatal_pointer("free(): invalid pointer", p);
  }
  if (e->kind == ExtentKind::kHuge) return;
  const uintptr_t mark = small::freed_mark(p);
  if (small::is_freed(p, mark) ||
      (e->kind == ExtentKind::kMedium && __atomic_load_n(&e->cached, __ATOMIC_RELAXED) != 0))
    fatal_pointer("free(): double free detected", p);
  (void)checked_request(p, usable_of(e), "free(): buffer overflow detected", small::seal_key_of(mark));
}

}  // namespace

void check_realloc_of(void* p, const Extent* e) noexcept {
  bool freed = false;
  if (e->kind == ExtentKind::kMedium) freed = __atomic_load_n(&e->cached, __ATOMIC_RELAXED) != 0;
  // (Hardened mode: every freed small block carries its mark.)
  else if (e->kind == ExtentKind::kSlab && g_hardened)
    freed = small::is_freed(p);
  if (DUCTILE_UNLIKELY(freed)) fatal_pointer("realloc(): block freed already", p);
}

namespace {

void dealloc_impl(void* p, bool cached) {
  if (p == nullptr || is_bootstrap(p) || g_fork_heap) return;
  const InCall in_call;
  Extent* e = owner_of(p);
  if (DUCTILE_UNLIKELY(e == nullptr || (addr(p) & 7) != 0)) bad_free(p);
  if (g_hardened) check_block(p, e);
  dealloc_extent(p, e, cached);
  wake_background_if_rung();
}


}  // namespace

void dealloc_slow(void* p) noexcept { dealloc_impl(p, true); }

void dealloc_sized_slow(void* p, size_t size, size_t align) noexcept {
  check_sized_free(p, size, align);
  dealloc_impl(p, true);
}

void check_sized_free(void* p, size_t size, size_t align) noexcept {
  if (p != nullptr && !is_bootstrap(p)) {
    // The size must be one the block could have been allocated with: a
    // request of that size and alignment gets a block of this class, or
    // this usable size; or (a larger block that realloc left in place when
    // it shrank) at most its usable size and more than half of it.
    const Extent* e = owner_of(p);
    if (e != nullptr && (addr(p) & 7) == 0) {
      check_block(p, e);
      // (A sealed block's size: its request's, with the seal.)
      const size_t usable = usable_of(e);
      const Placement at = place_request(size, align);
      const size_t need = e->kind == ExtentKind::kHuge ? size : small::sealed_size(size);
      const bool fits = e->kind == ExtentKind::kSlab
                            ? at.kind == Placement::kClass && at.cls == e->size_class
                            : at.usable == usable || (need <= usable && need > usable / 2 - kPage);
      if (!fits) fatal_pointer("free_sized(): wrong size for block", p);
      // A medium or huge block: the alignment it was allocated with, and
      // one its address has.
      if (e->kind != ExtentKind::kSlab &&
          ((e->lg_align != 0 && lg_align_of(align) != e->lg_align) || (align > kPage && !is_aligned(addr(p), align))))
        fatal_pointer("free_sized(): wrong alignment for block", p);
    }
  }
}

size_t usable_size(const void* p) noexcept {
  if (p == nullptr) return 0;
  if (is_bootstrap(p)) return bootstrap_size(p);
  if (g_fork_heap)
    if (size_t s = fork_heap_size(p)) return s;
  Extent* e = owner_of(p);
  if (e == nullptr) return 0;
  if (g_hardened && e->kind != ExtentKind::kHuge)
    return checked_request(p, usable_of(e), "malloc_usable_size(): buffer overflow detected");
  return usable_of(e);
}

void seal_broken(const void* p) noexcept {
  if (small::is_freed(const_cast<void*>(p))) small::freed_twice(p);
  fatal_pointer("free(): buffer overflow detected", p);
}

size_t checked_request(const void* p, size_t block, const char* what, uint64_t key) noexcept {
  const size_t size = small::sealed_request(p, block, key);
  if (DUCTILE_UNLIKELY(size == SIZE_MAX)) fatal_pointer(what, p);
  return size;
}

void reseal(void* p, size_t block, size_t old, size_t size, bool zero) noexcept {
  if (zero && size > old) std::memset(static_cast<char*>(p) + old, 0, size - old);
  small::seal(p, block, size, small::seal_key(p));
}

void dealloc_uncached(void* p) noexcept { dealloc_impl(p, false); }

}  // namespace ductile::core
