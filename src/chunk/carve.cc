// SPDX-License-Identifier: BSD-2-Clause
// Carving: an extent for a request, taken from the free sets (clean or dirty
// runs) or from new reservations, and at a given address (alloc_at).
#include "chunk/chunk.h"

#include <cstring>

namespace ductile::chunk {

Extent* ChunkLayer::carve(Extent* e, uintptr_t start, size_t size) noexcept {
  ExtentState state = e->state;
  Extent* head = nullptr;
  Extent* tail = nullptr;
  if (start > e->base) {
    head = new_extent(e->base, start - e->base, state, e->committed, e->space, e->remapped);
    if (head == nullptr) {
      insert_free(e, state);
      return nullptr;
    }
  }
  if (start + size < e->end()) {
    tail = new_extent(start + size, e->end() - (start + size), state, e->committed, e->space, e->remapped);
    if (tail == nullptr) {
      if (head) recycle(head);
      insert_free(e, state);
      return nullptr;
    }
  }
  if (head) {
    head->freed_ns = e->freed_ns;
    (void)page_map_.set_boundaries(head);
    set_for(state, e->space).insert(head);
  }
  if (tail) {
    tail->freed_ns = e->freed_ns;
    (void)page_map_.set_boundaries(tail);
    set_for(state, e->space).insert(tail);
  }
  e->base = start;
  e->size = size;
  return e;
}

bool ChunkLayer::commit_carved(Extent* e, size_t commit) noexcept {
  if (e->committed) return true;
  size_t n = commit < e->size ? align_up(commit, kPage) : e->size;
  if (n == 0) return true;
  if (!os_.commit(ptr(e->base), n)) return false;
  if (n < e->size) {
    // Only a prefix is committed: the rest goes back as uncommitted space.
    Extent* rest = new_extent(e->base + n, e->size - n, ExtentState::kClean, false, e->space, e->remapped);
    if (rest == nullptr) {
      // No record for the tail: commit it too, so the extent is what its flag says.
      if (!os_.commit(ptr(e->base + n), e->size - n)) return false;
      e->committed = true;
      return true;
    }
    e->size = n;
    insert_free(rest, ExtentState::kClean);
  }
  e->committed = true;
  return true;
}

Allocation ChunkLayer::alloc(size_t size, size_t align, size_t commit, Space space, size_t room) noexcept {
  if (!valid_size(size) || !is_pow2(align) || align < kPage) return {};
  if (room != 0 && (!valid_size(room) || !valid_size(size + room))) room = 0;
  maybe_decay();
  LockGuard g(lock_);
  Extent* e = dirty_[space_index(space)].find(size, align);
  // Block and room from one clean extent, carved once: taking the block
  // first and growing it over its room would write the page-map entry at
  // the block's end too, a leaf page of its own for a huge block.
  auto clean_with_room = [&] {
    if (room == 0) return false;
    e = clean_[space_index(space)].find(size + room, align);
    if (e != nullptr) size += room;
    return e != nullptr;
  };
  if (e == nullptr) {
    // No dirty extent holds it alone: dirty pages together with the free run
    // next to them still beat untouched space (each untouched page faults,
    // and the dirty ones would only wait for decay).
    if (Extent* r = take_dirty_run(size, align, space)) {
      stats_.allocs++;
      return {r, false};
    }
    if (!clean_with_room()) e = clean_[space_index(space)].find(size, align);
  }
  if (e == nullptr) {
    if (!reserve_more(size + room, align, space) && (room == 0 || !reserve_more(size, align, space))) return {};
    if (!clean_with_room()) e = clean_[space_index(space)].find(size, align);
    if (e == nullptr) return {};
  }
  bool zeroed = e->state == ExtentState::kClean;
  set_for(e->state, space).remove(e);
  uintptr_t start = align_up(e->base, align);
  e = carve(e, start, size);
  if (e == nullptr) return {};
  if (!commit_carved(e, commit)) {
    insert_free(e, ExtentState::kClean);
    return {};
  }
  e->state = ExtentState::kActive;
  (void)page_map_.set_active_boundaries(e);
  stats_.active += e->size;
  stats_.allocs++;
  return {e, zeroed};
}

namespace {
// How many dirty extents take_dirty_run() looks at (the largest first), and
// how many free neighbours on each side of one it walks.
constexpr size_t kRunCandidates = 16;
constexpr size_t kRunSide = 8;
}  // namespace

Extent* ChunkLayer::take_dirty_run(size_t size, size_t align, Space space) noexcept {
  Extent* cand[kRunCandidates];
  const size_t nc = dirty_[space_index(space)].largest(cand, kRunCandidates);
  // A piece of a run: free, committed (under strict overcommit the window
  // is then committed as a whole and needs no system call), of the same space.
  auto joins = [space](const Extent* n) {
    return n != nullptr && (n->state == ExtentState::kDirty || n->state == ExtentState::kClean) && n->committed &&
           n->space == space;
  };
  uintptr_t best = 0;
  Extent* best_piece = nullptr;  // the piece that holds `best`
  size_t best_dirty = 0;
  for (size_t c = 0; c < nc; c++) {
    Extent* d = cand[c];
    if (d->size <= best_dirty || !d->committed) continue;  // d cannot beat the best
    // The run of adjacent free extents around d: run[lo, hi).
    Extent* run[2 * kRunSide + 1];
    size_t lo = kRunSide, hi = kRunSide + 1;
    run[lo] = d;
    while (lo > 0 && run[lo]->base >= kPage) {
      Extent* p = page_map_.lookup(run[lo]->base - kPage);
      if (!joins(p) || p->end() != run[lo]->base) break;
      run[--lo] = p;
    }
    while (hi < 2 * kRunSide + 1) {
      Extent* n = page_map_.lookup(run[hi - 1]->end());
      if (!joins(n) || n->base != run[hi - 1]->end()) break;
      run[hi++] = n;
    }
    const uintptr_t r0 = run[lo]->base, r1 = run[hi - 1]->end();
    if (r1 - r0 < size) continue;
    // Two placements: from d's start, and ending at d's end (or as close
    // before it as the alignment allows); each reaches into the run.
    uintptr_t late = d->end() - r0 >= size ? d->end() - size : r0;
    uintptr_t starts[2] = {align_up(d->base, align), align_down(late, align)};
    if (starts[1] < r0) starts[1] = align_up(r0, align);
    for (uintptr_t st : starts) {
      if (st < r0 || st >= r1 || r1 - st < size) continue;
      const uintptr_t en = st + size;
      size_t dirty = 0;
      Extent* piece = nullptr;
      for (size_t i = lo; i < hi; i++) {
        Extent* n = run[i];
        if (n->base <= st && st < n->end()) piece = n;
        if (n->state != ExtentState::kDirty) continue;
        uintptr_t a = n->base > st ? n->base : st;
        uintptr_t b = n->end() < en ? n->end() : en;
        if (b > a) dirty += b - a;
      }
      if (dirty > best_dirty) {
        best_dirty = dirty;
        best = st;
        best_piece = piece;
      }
    }
  }
  if (best_piece == nullptr) return nullptr;
  // Cut the window's first piece out, then grow it over the rest of the run
  // (grow_locked checks the run again and changes nothing when it fails).
  const ExtentState state = best_piece->state;
  set_for(state, space).remove(best_piece);
  const size_t first = best_piece->end() - best < size ? best_piece->end() - best : size;
  Extent* e = carve(best_piece, best, first);
  if (e == nullptr) return nullptr;
  e->state = ExtentState::kActive;
  (void)page_map_.set_active_boundaries(e);
  stats_.active += e->size;
  if (first < size && grow_locked(e, size, false, false).path == GrowPath::kRefused) {
    stats_.active -= e->size;
    insert_free(e, state);  // merges back with the head carve() cut off
    return nullptr;
  }
  return e;
}

Allocation ChunkLayer::alloc_at(uintptr_t a, size_t size) noexcept {
  if (!valid_size(size) || !is_aligned(a, kPage) || a + size < a) return {};
  LockGuard g(lock_);
  Extent* e = page_map_.lookup(a);
  if (e == nullptr || e->base != a || e->size < size ||
      (e->state != ExtentState::kDirty && e->state != ExtentState::kClean)) {
    stats_.alloc_at_refusals++;
    return {};
  }
  bool zeroed = e->state == ExtentState::kClean;
  set_for(e->state, e->space).remove(e);
  e = carve(e, a, size);
  if (e == nullptr || !commit_carved(e, SIZE_MAX)) {
    if (e) insert_free(e, ExtentState::kClean);
    stats_.alloc_at_refusals++;
    return {};
  }
  e->state = ExtentState::kActive;
  (void)page_map_.set_active_boundaries(e);
  stats_.active += e->size;
  stats_.allocs++;
  stats_.alloc_at_hits++;
  return {e, zeroed};
}

}  // namespace ductile::chunk
