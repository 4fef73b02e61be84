// SPDX-License-Identifier: BSD-2-Clause
// Allocation past the inline path (core/alloc.h).
#include "core/alloc.h"

#include <cerrno>
#include <cstring>

#include "core/cache.h"
#include "core/depot.h"
#include "core/fallback_heap.h"
#include "core/startup.h"
#include "small/seal.h"

namespace ductile::core {

using chunk::Extent;
using chunk::ExtentKind;
using small::ThreadCache;

void* medium_from_chunks(size_t cls, size_t align, bool zero, bool tagged, chunk::Space space) {
  size_t size = small::class_size(cls);
  chunk::Allocation a = rt().chunks.alloc(align_up(size, kPage), align < kPage ? kPage : align, SIZE_MAX, space);
  if (a.extent == nullptr) return nullptr;
  Extent* e = a.extent;
  e->kind = ExtentKind::kMedium;
  e->cached = 0;
  e->purging = 0;
  // Medium blocks end up in thread caches, which the background thread
  // collects (collect_cached_medium): their bytes ring its doorbell.
  rt().chunks.note_retained(e->size);
  e->size_class = static_cast<uint16_t>(cls);
  e->usable = size;
  e->lg_align = g_hardened ? lg_align_of(align) : 0;
  if (tagged) rt().chunks.tag_first_page(e, small::free_tag(cls));
  if (zero && !a.zeroed) std::memset(ptr(e->base), 0, size);
  else if (g_hardened && !a.zeroed) small::mark_word(ptr(e->base)) = 0;  // a freed mark left there
  return ptr(e->base);
}

void note_alignment(void* p, size_t align) noexcept {
  if (!g_hardened || p == nullptr) return;
  // A slab's object (its page's tag names a small class) has none to keep:
  // no load from its extent (realloc-heavy programs come here each time).
  const uintptr_t entry = rt().chunks.lookup_entry(p);
  if (small::tag_class(chunk::PageMap::entry_tag(entry)) < small::kNumSmall) return;
  Extent* e = chunk::PageMap::entry_extent(entry);
  if (e == nullptr || e->kind == ExtentKind::kSlab || addr(p) != e->base) return;
  e->lg_align = lg_align_of(align);
  // An aligned medium block frees through the slow path, which forgets its
  // alignment before a cache takes it (a block rallocx left in place may
  // carry its class's tag).
  if (e->lg_align != 0 && e->kind == ExtentKind::kMedium && (!kProf || e->sample == nullptr))
    rt().chunks.tag_first_page(e, 0);
}

namespace {

// `cached`: through the thread cache (false: MALLOCX_TCACHE_NONE, straight
// from the bin or the chunk layer).
void* alloc_class(size_t cls, bool zero, bool cached) {
  ThreadCache* tc = cached ? cache() : nullptr;
  if (tc) {
    small::CacheBin& b = tc->bins[cls];
    if (b.empty() && small::is_small_class(cls)) {
      adapt_depth(tc, cls, true);
      b.set_count(rt().bins[tc->bin_set][cls].fill(b.items, small::half_bin(b)));
      start_helper_if_asked();
      decay_from_calls();
    } else if (b.empty() && depot_holds(cls)) {
      b.set_count(depot_take(cls, b.items, small::half_bin(b)));
    }
    if (!b.empty()) {
      if (kStats || kProf) tc->allocated += small::class_size(cls);
      void* p = small::is_small_class(cls) ? cache_slot_out<false>(b, cls) : cache_slot_out<true>(b, cls);
      if (zero) std::memset(p, 0, small::class_size(cls));
      return p;
    }
    if (small::is_small_class(cls)) return nullptr;  // the bin could not fill
  } else if (small::is_small_class(cls)) {
    void* p = nullptr;
    ThreadCache* own = own_cache();
    if (rt().bins[own ? own->bin_set : 0][cls].fill(&p, 1) == 0) return nullptr;
    start_helper_if_asked();
    count_bytes(small::class_size(cls), 0);
    if (g_hardened) small::take_marked(p, small::class_size(cls));
    if (zero) std::memset(p, 0, small::class_size(cls));
    return p;
  } else if (g_hardened && cached && depot_holds_uncached(cls)) {
    // Hardened mode without a cache: the depot's blocks first, their marks
    // checked (core/free.cc: depot_keep).
    void* slot[2];  // a cache bin's pair (thread_cache.h)
    if (depot_take(cls, slot, 1) == 1) {
      void* p = slot[0];
      medium_take(static_cast<Extent*>(slot[1]));
      small::take_marked(p, small::class_size(cls));
      count_bytes(small::class_size(cls), 0);
      if (zero) std::memset(p, 0, small::class_size(cls));
      return p;
    }
  }
  void* p = medium_from_chunks(cls, kPage, zero);
  if (p) count_bytes(small::class_size(cls), 0);
  return p;
}

// ---- sampled blocks (core/prof.h) --------------------------------------
// The sampling clock of a thread without a cache (tcache:false, exiting).
__thread uint64_t t_prof_allocated __attribute__((tls_model("initial-exec"))) = 0;
__thread uint64_t t_prof_at __attribute__((tls_model("initial-exec"))) = 0;
__thread uint64_t t_prof_rng __attribute__((tls_model("initial-exec"))) = 0;

// Whether this allocation of `usable` bytes is to be sampled. The clock of
// a thread cache counts its bytes where the block is handed out.
bool sample_due(size_t usable) {
  if (ThreadCache* tc = own_cache()) return prof::due({&tc->allocated, &tc->prof_at, &tc->prof_rng}, usable, false);
  return prof::due({&t_prof_allocated, &t_prof_at, &t_prof_rng}, usable, true);
}

// A sampled block: of its own (a page run below the huge threshold, with no
// page-map tag), its extent holding the sample. nullptr when no sample
// could be taken or no block had: the caller serves the request as usual.
void* alloc_sampled(size_t size, size_t align, bool zero, bool growing, const Placement& at) {
  prof::Sample* s = prof::record(at.usable);
  if (s == nullptr) return nullptr;
  void* p = at.kind == Placement::kHuge ? rt().huge.alloc(size, align, zero, growing)
                                        : medium_from_chunks(at.cls, align, zero, false);
  if (at.kind == Placement::kHuge) note_alignment(p, align);
  if (p == nullptr) {
    prof::release(s);
    return nullptr;
  }
  rt().chunks.lookup(p)->sample = s;
  count_bytes(at.usable, 0);
  return p;
}

// Whether a growing medium block of `usable` bytes goes to the dense space
// (Runtime::growing_medium): wherever there is one, so that the caller need
// not ask again. The block counts towards Runtime::growth_made.
bool dense_for_growth(size_t usable) {
  Runtime& r = rt();
  if (r.growth_made.load(std::memory_order_relaxed) < Runtime::kHugeGrowthAfter)
    r.growth_made.fetch_add(usable, std::memory_order_relaxed);
  if (r.growing_medium() == chunk::Space::kPlain) return false;
  if (DUCTILE_UNLIKELY(!r.chunks.advised_now(chunk::Space::kDense)) &&
      r.chunks.active_bytes() >= Runtime::kDenseAdviceAt)
    r.chunks.set_dense_advice(true);
  return true;
}

}  // namespace

void* alloc_impl(size_t size, size_t align, bool zero, bool cached, bool growing) {
  if (DUCTILE_UNLIKELY(!ensure_ready())) {
    void* p = bootstrap_alloc(size, align);  // zeroed: static storage, never reused
    return p;
  }
  if (DUCTILE_UNLIKELY(g_fork_heap)) return fork_heap_alloc(size, align);
  if (DUCTILE_UNLIKELY(size > static_cast<size_t>(PTRDIFF_MAX))) {
    errno = ENOMEM;
    return nullptr;
  }
  const InCall in_call;
  void* p;
  const Placement at = place_request(size, align);
  bool slab = false;  // a slab object: its seal word is checked (small/seal.h)
  if (kProf && DUCTILE_UNLIKELY(sample_due(at.usable)) &&
      (p = alloc_sampled(size, align, zero, growing, at)) != nullptr) {
  } else if (at.kind == Placement::kHuge) {
    p = rt().huge.alloc(size, align, zero, growing);
    if (p) count_bytes(at.usable, 0);
    note_alignment(p, align);
  } else if (at.kind == Placement::kAlignedMedium) {
    // Hardened mode: untagged, so that its free takes the slow path, which
    // forgets its alignment before a cache hands it to a plain malloc.
    p = medium_from_chunks(at.cls, align, zero, !g_hardened);
    if (p) count_bytes(at.usable, 0);
  } else if (growing && !small::is_small_class(at.cls) && dense_for_growth(at.usable)) {
    p = medium_from_chunks(at.cls, kPage, zero, true, chunk::Space::kDense);
    if (p) count_bytes(at.usable, 0);
  } else {
    p = alloc_class(at.cls, zero, cached);
    slab = small::is_small_class(at.cls) && !zero;  // (zeroed whole, its seal word too)
  }
  if (DUCTILE_UNLIKELY(p == nullptr)) errno = ENOMEM;
  else if (g_hardened && at.kind != Placement::kHuge) small::seal(p, at.usable, size, small::seal_key(p), slab);
  wake_background_if_rung();
  return p;
}

void* alloc_slow(size_t size) noexcept { return alloc_impl(size, 0, false); }

void* alloc_aligned(size_t size, size_t align, bool zero) noexcept {
  if (!is_pow2(align)) {
    errno = EINVAL;
    return nullptr;
  }
  void* p = alloc_impl(size, align, zero);
  DUCTILE_ASSERT(p == nullptr || is_aligned(addr(p), align));
  return p;
}

size_t usable_size_for(size_t size, size_t align) noexcept {
  if (!ensure_ready() || size > static_cast<size_t>(PTRDIFF_MAX) || !is_pow2(align)) return 0;
  const Placement at = place_request(size, align);
  return g_hardened && at.kind != Placement::kHuge ? size : at.usable;  // a sealed block's request
}

void* alloc_aligned_uncached(size_t size, size_t align, bool zero) noexcept {
  if (!is_pow2(align)) {
    errno = EINVAL;
    return nullptr;
  }
  return alloc_impl(size, align, zero, false);
}

}  // namespace ductile::core
