// SPDX-License-Identifier: BSD-2-Clause
// Growth and shrink of a huge block: in place (headroom, the neighbour, a
// fixed mapping), else a move (mremap or a copy); shrink and trimming a span.
#include "huge/huge.h"

#include <cstring>

#include "base/fork_gate.h"

namespace ductile::huge {

using chunk::Extent;
using chunk::GrowPath;
using chunk::GrowResult;

namespace {
constexpr size_t min_of(size_t a, size_t b) { return a < b ? a : b; }
}  // namespace

// ---- usable size and shrink --------------------------------------------

void HugeLayer::set_usable(Extent* e, Span* s, size_t usable, bool zero) noexcept {
  const size_t old = e->usable;
  if (usable > old) {
    if (zero) {
      // Only what is not known to be zero: a clean span's untouched part is.
      size_t end = min_of(usable, s->zero_from);
      if (end > old) zero_range(e->base + old, end - old);
    }
    if (s->zero_from < usable) s->zero_from = usable;  // the caller may write it now
    stats_.active_bytes.fetch_add(usable - old, std::memory_order_relaxed);
  } else {
    stats_.active_bytes.fetch_sub(old - usable, std::memory_order_relaxed);
  }
  e->usable = usable;
}

void HugeLayer::trim_span(Extent* e, Span* s, size_t keep) noexcept {
  if (keep >= e->size) return;
  const size_t before = e->size;
  if (guarded() && !strict()) {
    // The tail goes back read/write (see give_back); refused, the span keeps it.
    const size_t from = s->committed > keep ? s->committed : keep;
    if (!lift_guards(e, s->committed, s->strays, from, e->size)) return;
  }
  if (strict() && s->committed < e->size) {
    // The chunk layer gives the tail e's `committed` flag: cut the
    // uncommitted part off on its own, marked as such.
    size_t cut = s->committed > keep ? s->committed : keep;
    e->committed = false;
    bool ok = chunks_.shrink(e, cut);
    e->committed = true;
    if (!ok) return;
  }
  // Past zero_from nothing was ever written: that part goes back clean.
  if (keep < e->size && !chunks_.shrink(e, keep, strict() ? SIZE_MAX : s->zero_from)) {
    // Out of metadata: the span keeps (some of) its tail, nothing is lost.
  }
  if (s->committed > e->size) s->committed = e->size;
  if (s->zero_from > e->size) s->zero_from = e->size;
  stats_.span_bytes.fetch_sub(before - e->size, std::memory_order_relaxed);
}

bool HugeLayer::shrink_block(Extent* e, Span* s, size_t usable) noexcept {
  if (!guard_past(e, s, usable)) return false;
  set_usable(e, s, usable, false);
  stats_.shrinks.fetch_add(1, std::memory_order_relaxed);
  trim_span(e, s, span_for(usable));
  return true;
}

// ---- growth ------------------------------------------------------------------

GrowResult HugeLayer::extend(Extent* e, size_t usable) noexcept {
  // Take the new size's headroom along when it is free: it costs nothing
  // until touched. Not under strict overcommit, where the chunk layer
  // commits (and the kernel charges) what it adds.
  // Failing that, the least that ends on a huge-page boundary, then the
  // least: free space that starts mid-way in a huge page has its page-map
  // record in a page of slots (page_map.h), and such boundaries live on
  // through the splits and merges after.
  const size_t least = usable + guard_room();
  const size_t want = strict() ? least : span_for(usable, true);
  const size_t whole = align_up(least, kHugePage);
  const size_t sizes[3] = {want, whole > least && whole < want ? whole : want, least};
  for (int pass = 0; pass < 2; pass++) {
    const bool may_map = pass == 1;  // the neighbours first, then a mapping past them
    for (size_t i = 0; i < 3; i++) {
      if (i > 0 && sizes[i] == sizes[i - 1]) continue;
      GrowResult r = chunks_.grow(e, sizes[i], may_map);
      if (r.path != GrowPath::kRefused) return r;
    }
  }
  return {};
}

bool HugeLayer::grow_in_place(Extent* e, Span* s, size_t usable, bool zero, GrowthPath* way) noexcept {
  GrowthPath path = GrowthPath::kHeadroom;
  if (usable + guard_room() > e->size) {
    // The chunk layer commits what it adds (in normal mode it is read/write
    // anyway). Without a guard what lies before must be committed first;
    // with one, the added pages are guarded first and the block opened
    // after, so that a refusal anywhere leaves block and guard whole.
    if (!guarded() && !commit_to(e, s, e->size)) return false;
    const uintptr_t old_end = e->end();
    GrowResult r = extend(e, usable);
    if (r.path == GrowPath::kRefused) return false;
    path = r.path == GrowPath::kMapped ? GrowthPath::kFixedMap : GrowthPath::kNeighbour;
    stats_.span_bytes.fetch_add(e->end() - old_end, std::memory_order_relaxed);
    if (!r.zeroed) s->zero_from = e->size;
    if (!guarded()) {
      s->committed = e->size;
    } else if (strict() && !guard_added(e, s, old_end)) {
      // (In normal mode the added pages are headroom, read/write, and
      // commit_to below moves the guard page.)
      return false;
    }
  }
  if (!commit_to(e, s, usable)) return false;
  set_usable(e, s, usable, zero);
  stats_.growth[static_cast<size_t>(path)].fetch_add(1, std::memory_order_relaxed);
  if (way != nullptr) *way = path;
  return true;
}

bool HugeLayer::restore_target(Extent* t, size_t len) noexcept {
  // mremap onto a fixed target unmaps the target first; a kernel that fails
  // after that (ENOMEM in the move itself) leaves a hole there. Find out
  // without clobbering anything: mapping there again succeeds only on a hole.
  os::MapStatus st = chunks_.os().reserve_at(ptr(t->base), len);
  if (st == os::MapStatus::kOccupied) return true;  // refused before it touched the target
  if (st == os::MapStatus::kFailed) return false;
  // A fresh mapping carries no advice.
  if (chunks_.advised_now(t->space)) (void)chunks_.os().advise_huge(ptr(t->base), len);
  return !strict() || chunks_.os().commit(ptr(t->base), len);
}

void* HugeLayer::move(Extent* e, Span* s, size_t usable, size_t align, bool zero, GrowthPath* way) noexcept {
  // From the mremap to the chunk layer's refill of the old range, and from
  // taking the new span to adopting it, the layers disagree about the
  // block: in flight (fork_gate.h).
  const InFlight gate;
  const uintptr_t from = e->base;
  const size_t carry = min_of(e->usable, usable);
  const bool growing = usable > e->usable;
  Fresh f = take_span(usable, align, growing);
  if (f.e == nullptr) return nullptr;
  GrowthPath path = GrowthPath::kCopy;
  // 4. mremap: only whole blocks (not a shrinking, aligning move), and only
  // once the old span is exactly the bytes that move, so that the chunk
  // layer can forget it afterwards. Moving no more than the block's whole
  // huge pages keeps the rest of the new headroom the target's own
  // (already mapped) space. Whole huge pages (where the span has them:
  // not under strict overcommit or with guard pages, whose spans are the
  // block's pages) move by their page-table entries rather than 512 at a
  // time, and leave both spans' free space ending on huge-page
  // boundaries, whose page-map records need no page of slots (page_map.h).
  size_t moved = carry;
  if (!strict() && !guarded()) {
    const size_t whole = align_up(carry, kHugePage);
    if (whole >= carry && whole <= e->size && whole <= f.e->size) moved = whole;
  }
  if (carry == e->usable) {
    trim_span(e, s, moved);
    if (e->size == moved) {
      void* p = chunks_.os().remap(ptr(from), moved, moved, os::RemapMode::kFixed, ptr(f.e->base));
      if (p != nullptr) {
        path = GrowthPath::kMremap;
      } else if (!restore_target(f.e, moved)) {
        // The target is in an unknown state: drop it (unmapping a hole is
        // harmless) and copy into another span.
        (void)chunks_.os().unmap(ptr(f.e->base), f.e->size);
        chunks_.forget(f.e);
        f = take_span(usable, align, growing);
        if (f.e == nullptr) return nullptr;
      }
    }
  }
  Extent* t = f.e;
  if (path == GrowthPath::kCopy) std::memcpy(ptr(t->base), ptr(from), carry);

  // The old block is gone (moved) or to be freed; s describes the new one.
  const size_t old_committed = s->committed;
  const size_t old_zero_from = s->zero_from;
  const bool old_strays = s->strays;
  const size_t old_moved_in = s->moved_in;
  stats_.active_bytes.fetch_sub(e->usable, std::memory_order_relaxed);
  stats_.span_bytes.fetch_sub(e->size, std::memory_order_relaxed);
  adopt(t, s, f, carry);
  s->far_aligned = align > kHugePage;
  if (path == GrowthPath::kMremap) {
    // Pages moved past the block hold what the old span's held there.
    if (old_zero_from > s->zero_from) s->zero_from = old_zero_from;
    // The moved pages brought their mapping's flags along: moved from plain
    // into huge-page space they split its mapping until advised like it.
    if (chunks_.advised_now(t->space) && !chunks_.advised_now(e->space))
      (void)chunks_.os().advise_huge(ptr(t->base), moved);
    chunks_.mark_remapped(t);
    chunks_.refill(e);
  } else {
    drop_moved_in(e, old_moved_in);
    give_back(e, old_committed, old_zero_from, old_strays);
  }
  set_usable(t, s, usable, zero);
  stats_.growth[static_cast<size_t>(path)].fetch_add(1, std::memory_order_relaxed);
  if (way != nullptr) *way = path;
  return ptr(t->base);
}

size_t HugeLayer::resize_in_place(Extent* e, size_t new_size, bool zero, GrowthPath* way) noexcept {
  Span* s = span_of(e);
  const size_t old = e->usable;
  const size_t usable = size_for(new_size);
  if (usable == 0 || usable == old) return old;
  if (usable < old) return shrink_block(e, s, usable) ? usable : old;
  return grow_in_place(e, s, usable, zero, way) ? usable : old;
}

void* HugeLayer::resize(Extent* e, size_t new_size, size_t align, bool zero, GrowthPath* way) noexcept {
  if (align < kPage) align = kPage;
  if (!is_pow2(align)) return nullptr;
  Span* s = span_of(e);
  const size_t usable = size_for(new_size);
  if (usable == 0) return nullptr;
  if (is_aligned(e->base, align)) {
    if (usable <= e->usable) {
      if (usable < e->usable) (void)shrink_block(e, s, usable);  // refused: the block stays larger
      return ptr(e->base);
    }
    if (grow_in_place(e, s, usable, zero, way)) return ptr(e->base);
  }
  return move(e, s, usable, align, zero, way);
}

}  // namespace ductile::huge
