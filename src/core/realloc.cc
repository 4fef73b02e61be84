// SPDX-License-Identifier: BSD-2-Clause
// realloc, rallocx and xallocx (core/realloc.h).
#include "core/realloc.h"

#include <cerrno>
#include <cstring>

#include "core/alloc.h"
#include "core/fallback_heap.h"
#include "core/fast_path.h"
#include "core/free.h"
#include "core/growth.h"
#include "core/place.h"
#include "small/seal.h"

namespace ductile::core {

using chunk::Extent;
using chunk::ExtentKind;
using growth::Way;

namespace {

// The way of a huge block's growth path.
Way way_of(huge::GrowthPath p) { return static_cast<Way>(static_cast<size_t>(p) + 1); }
static_assert(static_cast<size_t>(Way::kHeadroom) == static_cast<size_t>(huge::GrowthPath::kHeadroom) + 1 &&
                  static_cast<size_t>(Way::kCopy) == static_cast<size_t>(huge::GrowthPath::kCopy) + 1,
              "the huge layer's growth paths are the ways after in place, in order");

}  // namespace

namespace {

// resize_in_place of the block of extent e, by block sizes.
size_t resize_block(Extent* e, size_t size, bool zero) noexcept {
  size_t old = usable_of(e);
  if (e->kind == ExtentKind::kHuge && size >= huge_threshold()) {
    huge::GrowthPath path = huge::GrowthPath::kHeadroom;
    size_t now = rt().huge.resize_in_place(e, size, zero, &path);
    if (now != old) {
      count_bytes(now, old);
      if (kProf && e->sample != nullptr) prof::resize(sample_of(e), now);
      if (now > old) growth::note(way_of(path), size - old, 0);
    }
    return now;
  }
  if (e->kind == ExtentKind::kMedium && size < huge_threshold() && size > small::kMaxSmall) {
    size_t cls = small::class_of(size);
    size_t want = small::class_size(cls);
    if (want > e->size) {
      chunk::GrowResult g = rt().chunks.grow(e, want, false);
      if (g.path == chunk::GrowPath::kRefused) return old;
      if (zero && !g.zeroed) std::memset(ptr(e->base + old), 0, want - old);
    } else if (want < e->size && !rt().chunks.shrink(e, want)) {
      return old;
    }
    if (want > old) growth::note(Way::kInPlace, size - old, 0);
    e->size_class = static_cast<uint16_t>(cls);
    e->usable = want;
    if (kProf && e->sample != nullptr) prof::resize(sample_of(e), want);  // and stays untagged
    // Grow and shrink cleared the tag; an aligned block (hardened mode) stays
    // without, so that its free forgets its alignment (note_alignment).
    else if (e->lg_align == 0) rt().chunks.tag_first_page(e, small::free_tag(cls));
    count_bytes(want, old);
    return want;
  }
  return old;  // small blocks, and moves between ranges, cannot be done in place
}

}  // namespace

size_t resize_in_place(void* p, size_t size, bool zero) noexcept {
  if (g_fork_heap) return usable_size(p);
  const InCall in_call;
  Extent* e = owner_of(p);
  if (e == nullptr) return 0;
  if (!g_hardened || e->kind == ExtentKind::kHuge) return resize_block(e, size, zero);
  // A sealed block: room for `size` and the seal, else its request stays;
  // as it does where it still fits and `size` is smaller (as a small
  // block's usable size stays without the seal).
  const size_t old = checked_request(p, usable_of(e), "xallocx(): buffer overflow detected");
  const size_t block = resize_block(e, small::sealed_size(size), zero);
  if (size > block - small::kSealSize || (size < old && old <= block - small::kSealSize)) return old;
  reseal(p, block, old, size, zero);
  return size;
}

namespace {

// Whether realloc grows the medium block e to `size` as a huge block, below
// the huge threshold: where e is in the dense space (a buffer grown from
// small sizes), the process is past its first MiB of such
// (Runtime::kHugeGrowthAfter), and `size` is at least half the threshold.
// Its span's headroom then takes the next doublings in place, and the copy
// at the threshold goes: half of what such a buffer copied on its way up
// (1 MiB of 2). The cost, where it stops growing there: its huge page, up
// to 1 MiB more resident than the block. `old` is e's usable size.
bool grows_huge(const Extent* e, size_t old, size_t size) {
  if (e->kind != ExtentKind::kMedium || e->space == chunk::Space::kPlain) return false;
  if (rt().growth_made.load(std::memory_order_relaxed) < Runtime::kHugeGrowthAfter) return false;
  const size_t threshold = huge_threshold();
  return size > old && size >= threshold / 2 && size < threshold;
}

// Whether the medium block e (usable size `old`), grown to `size` aligned
// to `align`, becomes a huge block that may take over its pages rather than
// a copy of them (huge: alloc_from, which moves them onto a clean span): a
// block of half a huge page or more in plain space (an untouched 1 MiB
// block copied into its new block's huge page made 2 MiB resident for
// nothing). Below half a huge page the copy is small, and the moved pages
// would leave most of the huge page the block starts in to 4 KiB faults; a
// dense block (grows_huge) was written as it grew, and lies in huge pages
// that moving part of one would split. A sampled block keeps its own path.
bool brings_pages(const Extent* e, size_t old, size_t size, size_t align) {
  if (e->kind != ExtentKind::kMedium || e->space != chunk::Space::kPlain || e->size < kHugePage / 2) return false;
  if (kProf && e->sample != nullptr) return false;
  return size > old && align <= kHugePage && place(size, align).kind == Placement::kHuge;
}

// realloc (`exact` false) and rallocx (`exact` true, where the block is left
// with exactly the usable size nallocx(size, flags) answers: a shrinking
// medium block shrinks in place or moves, as in jemalloc).
void* reallocate_impl(void* p, size_t size, size_t align, bool zero, bool exact, bool cached) {
  if (align != 0 && !is_pow2(align)) {
    errno = EINVAL;
    return nullptr;
  }
  if (p == nullptr) return alloc_impl(size, align, zero, cached);
  if (DUCTILE_UNLIKELY(size > static_cast<size_t>(PTRDIFF_MAX))) {
    errno = ENOMEM;
    return nullptr;
  }
  if (DUCTILE_UNLIKELY(g_fork_heap)) {
    const size_t old = usable_size(p);
    void* q = fork_heap_alloc(size, align);
    if (q != nullptr) std::memcpy(q, p, old < size ? old : size);
    return q;  // the old block stays where it is
  }
  const InCall in_call;
  // Off the 8-byte grid: no block of ours, as free() would say. (Before the
  // first block of ours, a pointer on the grid finds no tag and no owner
  // below, and is refused there, as free() refuses it.)
  if (DUCTILE_UNLIKELY((addr(p) & 7) != 0)) bad_free(p, true);
  // A small object (its page's tag gives the class, as for free): stay in
  // the class, or move through the inline malloc and free -- a thread-cache
  // pop and push -- without the extent (realloc-heavy code grows small
  // strings and vectors this way all the time).
  if (align == 0 && !zero && cached) {
    const uintptr_t entry = rt().chunks.lookup_entry(p);
    const size_t cls = small::tag_class(chunk::PageMap::entry_tag(entry));
    if (cls < small::kNumSmall) {
      // (Hardened mode: the freed mark tells, without the extent.)
      if (DUCTILE_UNLIKELY(g_hardened) && DUCTILE_UNLIKELY(small::is_freed(p)))
        fatal_pointer("realloc(): block freed already", p);
      const size_t block = small::class_size(cls);
      // Hardened mode: the request's size, and room for a new one's seal.
      const size_t old = g_hardened ? checked_request(p, block, "realloc(): buffer overflow detected") : block;
      const size_t need = g_hardened ? small::sealed_size(size) : size;
      if (need <= block && small::class_of(need) == cls) {
        if (g_hardened) reseal(p, block, old, size, false);
        return p;
      }
      // Past the small classes the new block is a growing one (alloc_impl's
      // `growing`), as from a medium block.
      void* q = need > small::kMaxSmall ? alloc_impl(size, 0, false, true, true) : alloc(size);
      if (q == nullptr) return nullptr;  // errno is set; the old block is intact
      std::memcpy(q, p, old < size ? old : size);
      dealloc(p);
      if (size > old) growth::note(Way::kCopy, size - old, old);
      return q;
    }
  }
  size_t old;
  size_t block = 0;    // a sealed block's size
  size_t need = size;  // the new block's size, with a seal
  Extent* e = nullptr;
  bool to_huge = false;  // grows_huge, for realloc
  if (is_bootstrap(p)) {
    old = bootstrap_size(p);
  } else {
    e = owner_of(p);
    // Not a block of ours, or one freed already: as free() would.
    if (DUCTILE_UNLIKELY(e == nullptr)) bad_free(p, true);
    check_realloc_of(p, e);
    old = usable_of(e);
    // A sealed block (hardened mode): `old` is its request's size, `block`
    // its own, `need` the new request's with its seal.
    if (g_hardened && e->kind != ExtentKind::kHuge) {
      block = old;
      old = checked_request(p, block, "realloc(): buffer overflow detected");
      need = small::sealed_size(size);
    }
    to_huge = !exact && align <= kPage && grows_huge(e, old, size);
    // Past half the threshold a huge block stays huge as realloc grows it
    // (grows_huge makes such blocks).
    if (e->kind == ExtentKind::kHuge &&
        (size >= huge_threshold() || (!exact && size > old && size >= huge_threshold() / 2))) {
      // A sampled block's sample follows it, moved or not, with its new size.
      prof::Sample* s = kProf ? sample_of(e) : nullptr;
      e->sample = nullptr;
      huge::GrowthPath path = huge::GrowthPath::kHeadroom;
      void* q = rt().huge.resize(e, size, align < kPage ? kPage : align, zero, &path);
      if (q == nullptr) errno = ENOMEM;
      else count_bytes(huge::HugeLayer::size_for(size), old);
      if (q != nullptr && size > old) growth::note(way_of(path), size - old, path == huge::GrowthPath::kCopy ? old : 0);
      if (s != nullptr) {
        Extent* now = rt().chunks.lookup(q != nullptr ? q : p);
        now->sample = s;
        if (q != nullptr) prof::resize(s, now->usable);
      }
      return q;
    }
    bool aligned = align <= small::kMinAlign || is_aligned(addr(p), align);
    const size_t room = block != 0 ? block : old;  // the block's own size
    bool stays = false;
    if (exact) {
      // Stay only as what a new block would be: the same class, or a medium
      // block resized in place to it.
      const Placement at = place_request(size, align);
      stays = aligned && at.kind != Placement::kHuge &&
              ((at.cls == e->size_class && e->kind != ExtentKind::kHuge) ||
               (e->kind == ExtentKind::kMedium && !small::is_small_class(at.cls) &&
                resize_block(e, at.usable, zero) == at.usable));
    } else {
      // Same class, or a smaller one not worth moving for: stay. (Not a
      // dense buffer on its way to the huge range: that one moves there now,
      // and grows in place from then on.)
      stays = aligned && ((need <= room && (e->kind == ExtentKind::kSlab ? small::class_of(need) == e->size_class
                                                                         : need > room / 2 && e->kind != ExtentKind::kHuge)) ||
                          (e->kind == ExtentKind::kMedium && need > small::kMaxSmall && need < huge_threshold() &&
                           !to_huge && resize_block(e, need, zero) >= need));
    }
    if (stays) {
      if (block != 0) reseal(p, usable_of(e), old, size, zero);
      return p;
    }
  }
  bool moved = false;  // e's pages are the new block's (huge: alloc_from)
  void* q = nullptr;
  if (e != nullptr && brings_pages(e, old, size, align)) q = rt().huge.alloc_from(e, size, zero, &moved);
  else if (to_huge) q = rt().huge.alloc(size, kPage, zero, true);
  if (q != nullptr) count_bytes(huge::HugeLayer::size_for(size), 0);
  else q = alloc_impl(size, align, zero, cached, size > old);
  if (q == nullptr) return nullptr;  // the old block is intact
  if (size > old) growth::note(moved ? Way::kMremap : Way::kCopy, size - old, moved ? 0 : old);
  if (moved) {
    count_bytes(0, block != 0 ? block : old);
    return q;
  }
  std::memcpy(q, p, old < size ? old : size);
  if (e) dealloc_extent(p, e, cached);
  return q;
}

}  // namespace

void* reallocate(void* p, size_t size) noexcept {
  void* q = reallocate_impl(p, size, 0, false, false, true);
  if (DUCTILE_UNLIKELY(g_hardened)) note_alignment(q, 0);  // realloc's block has none
  return q;
}

void* reallocate_aligned(void* p, size_t size, size_t align, bool zero, bool cached) noexcept {
  void* q = reallocate_impl(p, size, align, zero, true, cached);
  if (DUCTILE_UNLIKELY(g_hardened)) note_alignment(q, align);
  return q;
}

}  // namespace ductile::core
