// SPDX-License-Identifier: BSD-2-Clause
// Growth and shrink of an extent in place: into its free neighbour or a
// fresh mapping past it, and back.
#include "chunk/chunk.h"

#include <cstring>

namespace ductile::chunk {

GrowResult ChunkLayer::grow(Extent* e, size_t new_size, bool may_map, bool clean_only) noexcept {
  if (e == nullptr || e->state != ExtentState::kActive || !valid_size(new_size) || new_size <= e->size)
    return {};
  const uintptr_t start = e->end();
  const uintptr_t end = e->base + new_size;
  if (end < start || !PageMap::in_range(end)) return {};
  LockGuard g(lock_);
  return grow_locked(e, new_size, may_map, true, clean_only);
}

GrowResult ChunkLayer::grow_locked(Extent* e, size_t new_size, bool may_map, bool count, bool clean_only) noexcept {
  const uintptr_t start = e->end();
  const uintptr_t end = e->base + new_size;
  const bool strict = os_.features().strict_overcommit;
  // The run of free extents from e's end towards `end`. Dirty and clean
  // extents never coalesce, so a block that grows past what was faulted in
  // last time meets a dirty extent followed by a clean one: take them all.
  uintptr_t cur = start;
  bool zeroed = true;
  while (cur < end) {
    Extent* n = page_map_.lookup(cur);
    if (n == nullptr) break;  // not ours from here on
    if (n->base != cur || (n->state != ExtentState::kDirty && n->state != ExtentState::kClean) ||
        (clean_only && n->state == ExtentState::kDirty) || n->space != e->space) {
      if (count) stats_.alloc_at_refusals++;
      return {};
    }
    zeroed = zeroed && n->state == ExtentState::kClean;
    cur = n->end();
  }
  const uintptr_t run_end = cur < end ? cur : end;  // [start, run_end) comes from free extents
  // Past the run the address is not ours: map fresh space exactly there, in
  // whole huge pages so the next growth finds a free neighbour.
  size_t map = 0;
  if (cur < end) {
    if (!may_map) {
      if (count) stats_.alloc_at_refusals++;
      return {};
    }
    map = align_up(end - cur, kHugePage);
    if (map == 0 || cur + map < cur || !PageMap::in_range(cur + map)) return {};
  }
  // Everything that can fail comes first, so that a refusal changes nothing.
  Extent* tail = nullptr;  // the last free extent's part past `end`
  Extent* rest = nullptr;  // the new mapping's part past `end`
  if (map == 0 && cur > end) {
    tail = new_extent(end, cur - end, ExtentState::kClean, true, e->space, false);
    if (tail == nullptr) return {};
  } else if (map > end - cur) {
    rest = new_extent(end, cur + map - end, ExtentState::kClean, !strict, e->space, false);
    if (rest == nullptr) return {};
  }
  auto undo = [&] {
    if (tail) recycle(tail);
    if (rest) recycle(rest);
    return GrowResult{};
  };
  if (strict) {
    // Commit the uncommitted free pieces. One that fails leaves the pieces
    // before it committed but marked uncommitted: a later commit of them is
    // a harmless repeat.
    for (uintptr_t a = start; a < run_end;) {
      Extent* n = page_map_.lookup(a);
      uintptr_t to = n->end() < end ? n->end() : end;
      if (!n->committed && !os_.commit(ptr(a), to - a)) return undo();
      a = n->end();
    }
  }
  if (map != 0) {
    if (!page_map_.ensure(cur, map)) return undo();
    if (os_.reserve_at(ptr(cur), map) != os::MapStatus::kMapped) return undo();
    if (advised_now(e->space)) (void)os_.advise_huge(ptr(cur), map);  // merges with the mapping before it
    if (strict && !os_.commit(ptr(cur), end - cur)) {
      (void)os_.unmap(ptr(cur), map);
      return undo();
    }
  }
  // Take the run: each piece's boundary pages are e's interior (or its new
  // last page) now, and so is e's old last page: their records go. The last
  // piece's part past `end` stays free.
  if (!e->interior_mapped && start - kPage != e->base && run_end > start) page_map_.clear_record(start - kPage);
  for (uintptr_t a = start; a < run_end;) {
    Extent* n = page_map_.lookup(a);
    uintptr_t n_end = n->end();
    set_for(n->state, n->space).remove(n);
    page_map_.clear_record(n->base);
    if (n_end > end) {
      tail->base = end;
      tail->size = n_end - end;
      tail->state = n->state;
      tail->committed = n->committed;
      tail->freed_ns = n->freed_ns;
      set_remapped(tail, n->remapped);
      (void)page_map_.set_boundaries(tail);
      set_for(tail->state, tail->space).insert(tail);
      tail = nullptr;
    } else {
      page_map_.clear_record(n_end - kPage);
    }
    if (n->remapped) {
      // A free piece with moved-in pages: map the part taken afresh (its
      // bytes are free anyway) rather than let e carry that mapping along
      // uncounted (remapped_extents_ counts extents, and e may have one).
      const size_t len = (n_end < end ? n_end : end) - n->base;
      if (!(map_fresh(n->base, len, e->space) && (!strict || os_.commit(ptr(n->base), len))))
        set_remapped(e, true);  // e now holds (part of) that mapping
    }
    recycle(n);
    a = n_end;
  }
  if (map != 0) {
    stats_.reserved += map;
    stats_.reservations++;
    advance_cursor(cur + map);
  }
  e->size = new_size;
  if (e->interior_mapped) (void)page_map_.set_range(start, end - start, e);
  (void)page_map_.set_active_boundaries(e);
  if (rest) insert_free(rest, ExtentState::kClean);
  stats_.active += end - start;
  if (count && run_end > start) stats_.alloc_at_hits++;
  return {map != 0 ? GrowPath::kMapped : GrowPath::kNeighbour, zeroed};
}

bool ChunkLayer::shrink(Extent* e, size_t new_size, size_t written) noexcept {
  if (e == nullptr || e->state != ExtentState::kActive || !valid_size(new_size) || new_size >= e->size)
    return false;
  LockGuard g(lock_);
  // [new_size, dirty_end) may hold written pages; [dirty_end, size) never did.
  size_t dirty_end = written >= e->size ? e->size : align_up(written, kPage);
  if (dirty_end < new_size) dirty_end = new_size;
  Extent* tail = nullptr;
  Extent* clean = nullptr;
  if (dirty_end > new_size) {
    tail = new_extent(e->base + new_size, dirty_end - new_size, ExtentState::kActive, e->committed, e->space,
                      e->remapped);
    if (tail == nullptr) return false;
  }
  if (dirty_end < e->size) {
    // Moved-in pages lie before `written` (they were written): not here.
    clean = new_extent(e->base + dirty_end, e->size - dirty_end, ExtentState::kActive, e->committed, e->space, false);
    if (clean == nullptr) {
      if (tail == nullptr) return false;
      tail->size = e->size - new_size;  // all of it dirty, as before
    }
  }
  if (e->interior_mapped) (void)page_map_.set_range(e->base + new_size, e->size - new_size, nullptr);
  stats_.active -= e->size - new_size;
  e->size = new_size;
  (void)page_map_.set_active_boundaries(e);  // the new last page was interior: zero
  const uint64_t now = clock_.now_ns();
  if (tail != nullptr) {
    tail->freed_ns = now;
    insert_free(tail, ExtentState::kDirty);
  }
  if (clean != nullptr) {
    clean->freed_ns = now;
    insert_free(clean, ExtentState::kClean);
  }
  ring_if_due(dirty_bytes());
  return true;
}

}  // namespace ductile::chunk
