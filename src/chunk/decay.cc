// SPDX-License-Identifier: BSD-2-Clause
#include "chunk/chunk.h"

#include <sys/auxv.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <initializer_list>
#include <new>

#include "base/fork_gate.h"

namespace ductile::chunk {

namespace {
constexpr uintptr_t kHintBase = uintptr_t{2} << 40;  // 2 TiB
constexpr uintptr_t kHintSpread = uintptr_t{1} << 40;  // + up to 1 TiB of randomness
// Hints tried before falling back to letting the kernel choose the address.
constexpr int kHintTries = 4;

// Where the next reservation is tried, shared by every chunk layer in the
// process (the global one, and those that tests make) so they do not keep
// colliding at the same hint.
std::atomic<uintptr_t> g_cursor{0};

// Under a sanitizer the range above 2 TiB is its shadow (ASan's high shadow
// starts at 2 TiB, TSan's below 2 TiB): there every hint was taken, and each
// reservation cost four refused mmaps and an over-sized one. There the hints
// start below the main thread's stack instead, which every sanitizer keeps
// as application memory: 1.25 TiB below it is past the kernel's randomised
// mmap base (at most 1 TiB below the stack on x86-64), and above the lowest
// high application range of the sanitizers (TSan's starts 1.5 TiB below the
// top of the address space).
constexpr uintptr_t kSanitizedBelowStack = (uintptr_t{5} << 40) / 4;  // 1.25 TiB
constexpr uintptr_t kSanitizedSpread = uintptr_t{64} << 30;            // 64 GiB

uintptr_t random_hint() {
  // AT_RANDOM: 16 random bytes the kernel gives every process, on the main
  // thread's stack; reading them costs neither a system call nor an
  // allocation.
  uint64_t r = 0;
  auto* bytes = reinterpret_cast<const unsigned char*>(getauxval(AT_RANDOM));
  if (bytes) std::memcpy(&r, bytes + 8, sizeof r);
  if (kSanitized && addr(bytes) > kSanitizedBelowStack + kSanitizedSpread)
    return align_down(addr(bytes) - kSanitizedBelowStack - r % kSanitizedSpread, kHugePage);
  return kHintBase + align_down(r % kHintSpread, kHugePage);
}

bool valid_size(size_t size) { return size != 0 && is_aligned(size, kPage); }
}  // namespace

ChunkLayer::ChunkLayer(os::Os& os, Clock& clock, const Options& options) noexcept
    : os_(os), clock_(clock), options_(options), meta_(os), page_map_(meta_, options.storage_zeroed) {
  if (options_.first_hint != 0) {
    own_cursor_ = align_up(options_.first_hint, kHugePage);
  } else {
    uintptr_t expected = 0;
    g_cursor.compare_exchange_strong(expected, random_hint(), std::memory_order_relaxed);
  }
  // Under RLIMIT_AS every reservation counts whole against the limit,
  // touched or not: 1 GiB reservations would fail every allocation of a
  // process limited to 1 GiB from the first call. There reservations are at
  // most a sixteenth of the limit (a 64 MiB limit takes 4 MiB at a time,
  // next to the program's own mappings), and reserve_more() falls back to
  // exactly the size asked for.
  const size_t limit = os_.features().address_space_limit;
  if (limit != SIZE_MAX && options_.reservation > limit / 16) options_.reservation = limit / 16;
  if (options_.reservation < kHugePage) options_.reservation = kHugePage;
  options_.reservation = align_up(options_.reservation, kHugePage);
  options_.decay_step_bytes = align_up(options_.decay_step_bytes < kPage ? kPage : options_.decay_step_bytes, kPage);
}

uintptr_t ChunkLayer::cursor() const noexcept {
  return own_cursor_ ? own_cursor_ : g_cursor.load(std::memory_order_relaxed);
}

void ChunkLayer::advance_cursor(uintptr_t to) noexcept {
  if (own_cursor_) {
    if (to > own_cursor_) own_cursor_ = to;
    return;
  }
  uintptr_t cur = g_cursor.load(std::memory_order_relaxed);
  while (to > cur && !g_cursor.compare_exchange_weak(cur, to, std::memory_order_relaxed)) {
  }
}

Extent* ChunkLayer::new_extent(uintptr_t base, size_t size, ExtentState state, bool committed, Space space,
                               bool remapped) noexcept {
  Extent* e = spare_;
  if (e != nullptr) {
    spare_ = e->next;
  } else {
    void* mem = meta_.alloc(sizeof(Extent), alignof(Extent));
    if (mem == nullptr) return nullptr;
    e = static_cast<Extent*>(mem);
  }
  new (e) Extent();
  e->base = base;
  e->size = size;
  e->state = state;
  e->committed = committed;
  e->space = space;
  set_remapped(e, remapped);
  return e;
}

void ChunkLayer::set_remapped(Extent* e, bool remapped) noexcept {
  if (e->remapped == remapped) return;
  e->remapped = remapped;
  // Changed under the lock; free() reads it without.
  __atomic_fetch_add(&remapped_extents_, remapped ? size_t{1} : ~size_t{0}, __ATOMIC_RELAXED);
}

void ChunkLayer::mark_remapped(Extent* e) noexcept {
  LockGuard g(lock_);
  set_remapped(e, true);
}

bool ChunkLayer::map_fresh(uintptr_t base, size_t size, Space space) noexcept {
  return os_.map_fresh(ptr(base), size) && (!advised(space) || os_.advise_huge(ptr(base), size));
}

void ChunkLayer::recycle(Extent* e) noexcept {
  set_remapped(e, false);
  e->base = e->size = 0;
  e->next = spare_;
  spare_ = e;
}

void ChunkLayer::clear_interior(Extent* e) noexcept {
  if (!e->interior_mapped) return;
  // All of it, boundaries too: the caller records those again, and a record
  // at a 2 MiB-aligned page goes elsewhere than the page entry cleared here.
  // The nodes exist (the range was mapped before), so this cannot fail.
  (void)page_map_.set_range(e->base, e->size, nullptr);
  e->interior_mapped = false;
}

void ChunkLayer::insert_free(Extent* e, ExtentState state) noexcept {
  DUCTILE_ASSERT(state == ExtentState::kDirty || state == ExtentState::kClean);
  ExtentSet& set = set_for(state, e->space);
  if (e->base >= kPage) {
    Extent* left = page_map_.lookup(e->base - kPage);
    if (left != nullptr && left != e && left->state == state && left->end() == e->base &&
        left->committed == e->committed && left->space == e->space && !left->remapped && !e->remapped) {
      set.remove(left);
      // The old boundary between them is interior now: its records go.
      page_map_.clear_record(e->base - kPage);
      page_map_.clear_record(e->base);
      e->base = left->base;
      e->size += left->size;
      if (left->freed_ns > e->freed_ns) e->freed_ns = left->freed_ns;
      recycle(left);
    }
  }
  Extent* right = page_map_.lookup(e->end());
  if (right != nullptr && right != e && right->state == state && right->base == e->end() &&
      right->committed == e->committed && right->space == e->space && !right->remapped && !e->remapped) {
    set.remove(right);
    page_map_.clear_record(e->end() - kPage);
    page_map_.clear_record(right->base);
    e->size += right->size;
    if (right->freed_ns > e->freed_ns) e->freed_ns = right->freed_ns;
    recycle(right);
  }
  e->state = state;
  e->owner = nullptr;
  e->kind = ExtentKind::kNone;
  e->usable = 0;
  e->sample = nullptr;
  (void)page_map_.set_boundaries(e);  // nodes exist since the range was reserved
  set.insert(e);
}

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

bool ChunkLayer::reserve_more(size_t size, size_t align, Space space) noexcept {
  // A larger alignment costs no address space held: the hint is aligned
  // to it, and where the kernel places the reservation instead, reserve()
  // maps it over-sized for the alignment and unmaps the ends at once. (It
  // used to be reserved here too, and kept: aligned_alloc(2^40, 1) held
  // 1 TiB, and a few alignments near 2^46 would have taken the address
  // space.)
  const size_t want = align_up(size, kHugePage);
  if (want == 0) return false;
  const size_t hint_align = align > kHugePage ? align : kHugePage;
  // The usual size first; if the kernel refuses it (RLIMIT_AS, or a
  // fragmented address space), just what this request needs.
  if (want < options_.reservation && reserve(options_.reservation, hint_align, space)) return true;
  if (!reserve(want, hint_align, space)) {
    // At the address-space limit, retained free space is what stands in the
    // way: give it back and try once more. (Without a limit a refusal means
    // the request is absurd, and the retained pages are worth keeping.)
    const size_t limit = os_.features().address_space_limit;
    if (limit == SIZE_MAX || want > limit || unmap_free() == 0 || !reserve(want, hint_align, space)) return false;
  }
  return true;
}

size_t ChunkLayer::unmap_free() noexcept {
  size_t bytes = 0;
  for (size_t i = 0; i < 2 * kSpaces; i++) {
    ExtentSet* set = i < kSpaces ? &dirty_[i] : &clean_[i - kSpaces];
    while (Extent* e = set->oldest()) {
      set->remove(e);
      if (!os_.unmap(ptr(e->base), e->size)) {
        set->insert(e);
        return bytes;
      }
      clear_interior(e);
      page_map_.clear_boundaries(e);
      stats_.reserved -= e->size;
      bytes += e->size;
      recycle(e);
    }
  }
  return bytes;
}

bool ChunkLayer::reserve(size_t res, size_t hint_align, Space space) noexcept {
  uintptr_t base = 0;
  for (int i = 0; i < kHintTries && base == 0; i++) {
    uintptr_t hint = align_up(cursor(), hint_align);
    if (hint == 0 || !PageMap::in_range(hint + res)) break;
    os::MapStatus st = os_.reserve_at(ptr(hint), res);
    if (st == os::MapStatus::kMapped) base = hint;
    else if (st == os::MapStatus::kFailed) return false;
    advance_cursor(hint + res);  // taken now, or occupied: the next try goes past it
  }
  if (base == 0) {
    // Every hint was taken: let the kernel place it, over-sized so that an
    // aligned piece fits, and give the ends back.
    const size_t over = res + hint_align;
    if (over < res) return false;
    void* p = os_.reserve(over);
    if (p == nullptr) return false;
    base = align_up(addr(p), hint_align);
    if (base > addr(p)) (void)os_.unmap(p, base - addr(p));
    if (addr(p) + over > base + res) (void)os_.unmap(ptr(base + res), addr(p) + over - (base + res));
  }
  if (!page_map_.ensure(base, res)) {
    (void)os_.unmap(ptr(base), res);
    return false;
  }
  // Huge-page space is advised whole, once: the reservation stays one
  // mapping whatever is placed in it (before, each huge span was advised on
  // its own and split the reservation's mapping at both ends).
  if (advised(space)) (void)os_.advise_huge(ptr(base), res);
  Extent* e = new_extent(base, res, ExtentState::kClean, !os_.features().strict_overcommit, space, false);
  if (e == nullptr) {
    (void)os_.unmap(ptr(base), res);
    return false;
  }
  stats_.reserved += res;
  stats_.reservations++;
  insert_free(e, ExtentState::kClean);
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
    if (advised(e->space)) (void)os_.advise_huge(ptr(cur), map);  // merges with the mapping before it
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

void ChunkLayer::free(Extent* e, size_t committed, uint64_t idle_since) noexcept {
  DUCTILE_CHECK(e != nullptr && e->state == ExtentState::kActive);
  // A range whose pages mremap moved in keeps a mapping of its own until it
  // is mapped afresh: at its purge (decay), or now when too many such
  // mappings are about (cycles of blocks moved by growth left one per move:
  // 4 000 blocks moved per round, 694 -> 2 761 mappings in four rounds,
  // towards vm.max_map_count). Below the bound its pages stay for reuse.
  bool fresh = false;
  if (e->remapped && __atomic_load_n(&remapped_extents_, __ATOMIC_RELAXED) > options_.remapped_bound &&
      map_fresh(e)) {
    fresh = true;
    committed = 0;  // clean: fresh space (uncommitted under strict overcommit)
  }
  uint64_t now = clock_.now_ns();
  {
    LockGuard g(lock_);
    stats_.active -= e->size;
    stats_.frees++;
    clear_interior(e);
    if (fresh) set_remapped(e, false);
    if (committed < e->size) {
      // Never committed (strict overcommit: PROT_NONE) or never written
      // (normal mode: still zero): clean, not dirty.
      const bool strict = os_.features().strict_overcommit;
      size_t n = align_up(committed, kPage);
      Extent* rest =
          n < e->size ? new_extent(e->base + n, e->size - n, ExtentState::kActive, !strict, e->space, false)
                      : nullptr;  // pages moved in were written: they lie before `committed`
      if (rest != nullptr) {
        e->size = n;
        insert_free(rest, ExtentState::kClean);
      }
    }
    e->freed_ns = idle_since < now ? idle_since : now;
    if (e->size == 0) recycle(e);
    else insert_free(e, ExtentState::kDirty);
    ring_if_due(dirty_bytes());
  }
  // decay_ms:0 purges on free, every time: the rate limit of maybe_decay()
  // would leave the frees of one clock tick dirty in a program that then
  // goes quiet.
  if (options_.decay_ns == 0) {
    (void)purge_dirty(0, SIZE_MAX, false);  // (what was freed: unbounded by design)
    maybe_release_map(clock_.now_ns(), kMapStepChunks);
  } else {
    maybe_decay();
  }
}

void ChunkLayer::arm(size_t bytes) noexcept {
  noted_.store(0, std::memory_order_relaxed);
  armed_at_.store(bytes, std::memory_order_relaxed);
}

void ChunkLayer::note_retained(size_t bytes) noexcept {
  if (armed_at_.load(std::memory_order_relaxed) == 0) return;
  noted_.fetch_add(bytes, std::memory_order_relaxed);
  ring_if_due(0);  // no lock: callers hold theirs (free() adds the dirty bytes)
}

bool ChunkLayer::would_ring(size_t bytes) noexcept {
  const size_t at = armed_at_.load(std::memory_order_relaxed);
  if (at == 0) return false;
  LockGuard g(lock_);
  return dirty_bytes() + noted_.load(std::memory_order_relaxed) + bytes >= at;
}

void ChunkLayer::ring_if_due(size_t dirty) noexcept {
  const size_t at = armed_at_.load(std::memory_order_relaxed);
  if (at == 0 || dirty + noted_.load(std::memory_order_relaxed) < at) return;
  armed_at_.store(0, std::memory_order_relaxed);
  signal_.store(true, std::memory_order_release);
}

void ChunkLayer::forget(Extent* e) noexcept {
  DUCTILE_CHECK(e != nullptr && e->state == ExtentState::kActive);
  LockGuard g(lock_);
  clear_interior(e);
  page_map_.clear_boundaries(e);
  stats_.active -= e->size;
  stats_.reserved -= e->size;
  recycle(e);
}

void ChunkLayer::refill(Extent* e) noexcept {
  DUCTILE_CHECK(e != nullptr && e->state == ExtentState::kActive);
  // Before, a vacated range was only forgotten: its address space was never
  // handed out again, and each hole split the reservation's mapping.
  if (os_.reserve_at(ptr(e->base), e->size) != os::MapStatus::kMapped) {
    forget(e);
    return;
  }
  if (advised(e->space)) (void)os_.advise_huge(ptr(e->base), e->size);
  LockGuard g(lock_);
  set_remapped(e, false);
  clear_interior(e);
  stats_.active -= e->size;
  e->committed = !os_.features().strict_overcommit;  // as a fresh reservation
  insert_free(e, ExtentState::kClean);
}

bool ChunkLayer::map_interior(Extent* e, uint16_t tag, uint16_t tag_step) noexcept {
  if (e == nullptr || e->state != ExtentState::kActive) return false;
  // Under the lock, as every write of page-map entries where there may be
  // none yet: the pass of release_map() gives back pages of entries that
  // hold only zeroes, and must not drop a store made while it looks.
  LockGuard g(lock_);
  if (!page_map_.set_range(e->base, e->size, e, tag, tag_step)) return false;
  e->interior_mapped = true;
  return true;
}

Extent* ChunkLayer::lend(Extent* parent, uintptr_t base, size_t size) noexcept {
  DUCTILE_CHECK(parent != nullptr && parent->state == ExtentState::kActive && parent->interior_mapped &&
                is_aligned(base, kPage) && size != 0 && is_aligned(size, kPage) && base >= parent->base &&
                base + size <= parent->end());
  LockGuard g(lock_);
  Extent* e = new_extent(base, size, ExtentState::kActive, parent->committed, parent->space, false);
  if (e == nullptr) return nullptr;
  e->interior_mapped = true;
  // The parent's pages are mapped already: no node to create, cannot fail.
  (void)page_map_.set_range(base, size, e);
  return e;
}

void ChunkLayer::unlend(Extent* parent, Extent* sub) noexcept {
  DUCTILE_CHECK(parent != nullptr && sub != nullptr && sub->base >= parent->base && sub->end() <= parent->end());
  LockGuard g(lock_);
  (void)page_map_.set_range(sub->base, sub->size, parent);
  recycle(sub);
}

ChunkLayer::PurgeResult ChunkLayer::purge_marked(Extent* const* batch, size_t n) noexcept {
  DUCTILE_CHECK(n <= os::kPurgeBatch);
  // Ranges with a mapping of their own (pages moved in by mremap) are mapped
  // afresh, which purges them too; the rest go to one batched purge.
  // Under strict overcommit a purge decommits (maps PROT_NONE over the
  // range): madvise would drop the pages but keep the commit charge, and a
  // program that freed 1 GiB stayed charged for all of it. The extent comes
  // back uncommitted, and whoever takes it next commits it again (alloc,
  // alloc_at and grow commit what is not committed).
  const bool strict = os_.features().strict_overcommit;
  os::Range ranges[os::kPurgeBatch] = {};
  size_t index[os::kPurgeBatch];
  bool purged[os::kPurgeBatch] = {};
  bool kept[os::kPurgeBatch] = {};  // purged but still committed (near the mapping limit)
  size_t m = 0;
  for (size_t i = 0; i < n; i++) {
    if (batch[i]->remapped) {
      purged[i] = map_fresh(batch[i]);
    } else if (strict) {
      // (Mapped afresh, PROT_NONE, with the huge-page advice of its space.)
      if (!batch[i]->committed) {
        purged[i] = true;
      } else {
        const os::Decommit d = os_.decommit(ptr(batch[i]->base), batch[i]->size, advised(batch[i]->space));
        purged[i] = d != os::Decommit::kFailed;
        kept[i] = d == os::Decommit::kPurged;
      }
    } else {
      index[m] = i;
      ranges[m++] = {ptr(batch[i]->base), batch[i]->size};
    }
  }
  const size_t done = m != 0 ? os_.purge(ranges, m) : 0;
  for (size_t j = 0; j < done; j++) purged[index[j]] = true;
  size_t total = 0;
  bool complete = true;
  LockGuard g(lock_);
  for (size_t i = 0; i < n; i++) {
    stats_.purging -= batch[i]->size;
    if (purged[i]) {
      total += batch[i]->size;
      stats_.purged_bytes += batch[i]->size;
      stats_.purges++;
      if (batch[i]->remapped) set_remapped(batch[i], false);
      if (strict && !kept[i]) batch[i]->committed = false;  // decommitted, or mapped afresh: as a new reservation
      insert_free(batch[i], ExtentState::kClean);
    } else {
      complete = false;
      insert_free(batch[i], ExtentState::kDirty);  // kept, not lost; tried again later
    }
  }
  return {total, complete};
}

void ChunkLayer::release(Extent* const* v, size_t n) noexcept {
  const InFlight gate;  // marked purging, out of every set, until purged
  uint64_t now = clock_.now_ns();
  while (n > 0) {
    size_t k = n < os::kPurgeBatch ? n : os::kPurgeBatch;
    {
      LockGuard g(lock_);
      for (size_t i = 0; i < k; i++) {
        Extent* e = v[i];
        DUCTILE_CHECK(e != nullptr && e->state == ExtentState::kActive);
        stats_.active -= e->size;
        stats_.frees++;
        clear_interior(e);
        e->freed_ns = now;
        e->state = ExtentState::kPurging;
        stats_.purging += e->size;
      }
    }
    (void)purge_marked(v, k);
    v += k;
    n -= k;
  }
}

ChunkLayer::DecayResult ChunkLayer::purge_dirty(uint64_t min_age_ns, size_t budget, bool may_wait) noexcept {
  // The batch is out of every set until it is purged: in flight (fork_gate.h).
  // From the free path, which a caller may reach holding a lock of its own,
  // a fork in progress skips the purge instead (a later call does it).
  if (may_wait) ForkGate::enter();
  else if (!ForkGate::try_enter()) return {0, true};
  struct Leave {
    ~Leave() { ForkGate::leave(); }
  } leave;
  size_t total = 0;
  for (;;) {
    Extent* batch[os::kPurgeBatch];
    size_t n = 0;
    size_t taken = 0;  // bytes of this batch
    bool more = false;
    uint64_t now = clock_.now_ns();
    {
      LockGuard g(lock_);
      for (ExtentSet& dirty : dirty_) {
        for (Extent* e = dirty.oldest(); e != nullptr && n < os::kPurgeBatch;) {
          Extent* next = e->age_next;
          if (now - e->freed_ns >= min_age_ns || min_age_ns == 0) {
            const size_t left = budget - total - taken;
            if (left == 0) {
              more = true;
              break;
            }
            dirty.remove(e);
            if (e->size > left) {
              // Only the first `left` bytes this step; the rest stays dirty,
              // as old as it was (carve puts it back in the set).
              more = true;
              e = carve(e, e->base, left);
              if (e == nullptr) break;  // no record for the rest: it stays whole, for later
            }
            e->state = ExtentState::kPurging;  // unavailable until the batch completes
            stats_.purging += e->size;
            batch[n++] = e;
            taken += e->size;
          }
          e = next;
        }
      }
    }
    if (n == 0) return {total, more};
    PurgeResult r = purge_marked(batch, n);
    total += r.bytes;
    if (!r.complete) return {total, false};  // the kernel refused: try again at the next decay
    if (more || total >= budget) return {total, true};
  }
}

void ChunkLayer::maybe_decay() noexcept {
  uint64_t now = clock_.now_ns();
  maybe_release_map(now, kMapStepChunks);
  // Look at most four times per decay period -- a cheap check on the free
  // path -- unless the last step left old extents for the next calls.
  uint64_t last = __atomic_load_n(&last_decay_ns_, __ATOMIC_RELAXED);
  const bool backlog = backlog_.load(std::memory_order_relaxed);
  if (!backlog && now - last < options_.decay_ns / 4 + 1) return;
  if (!__atomic_compare_exchange_n(&last_decay_ns_, &last, now, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
    return;  // another thread is doing it
  if (backlog) backlog_.store(false, std::memory_order_relaxed);
  const DecayResult r = purge_dirty(options_.decay_ns, options_.decay_step_bytes, false);
  if (r.more) backlog_.store(true, std::memory_order_relaxed);
}

size_t ChunkLayer::decay() noexcept {
  __atomic_store_n(&last_decay_ns_, clock_.now_ns(), __ATOMIC_RELAXED);
  backlog_.store(false, std::memory_order_relaxed);
  const size_t bytes = purge_dirty(options_.decay_ns).bytes;
  maybe_release_map(clock_.now_ns(), SIZE_MAX);
  return bytes;
}

size_t ChunkLayer::trim() noexcept {
  const size_t bytes = purge_dirty(0).bytes;
  (void)release_map(SIZE_MAX, false);
  return bytes;
}

bool ChunkLayer::release_map(size_t budget, bool aged) noexcept {
  LockGuard g(lock_);
  bool more = false;
  stats_.map_released += page_map_.release_idle(os_, budget, &more, aged);
  return more;
}

void ChunkLayer::maybe_release_map(uint64_t now, size_t budget) noexcept {
  const bool backlog = map_backlog_.load(std::memory_order_relaxed);
  uint64_t last = last_map_pass_ns_.load(std::memory_order_relaxed);
  const uint64_t period = std::max<uint64_t>(options_.decay_ns / 4, kMapPassMinNs);
  if (!backlog && now - last < period) return;
  if (!last_map_pass_ns_.compare_exchange_strong(last, now, std::memory_order_relaxed)) return;
  map_backlog_.store(release_map(budget, true), std::memory_order_relaxed);
}

ChunkStats ChunkLayer::stats() const noexcept {
  ChunkStats s;
  s.reserved = stats_.reserved;
  s.active = stats_.active;
  s.purging = stats_.purging;
  s.reservations = stats_.reservations;
  s.allocs = stats_.allocs;
  s.frees = stats_.frees;
  s.alloc_at_hits = stats_.alloc_at_hits;
  s.alloc_at_refusals = stats_.alloc_at_refusals;
  s.purged_bytes = stats_.purged_bytes;
  s.purges = stats_.purges;
  s.map_released = stats_.map_released;
  s.dirty = dirty_bytes();
  s.clean = s.dirty_extents = 0;
  for (size_t i = 0; i < kSpaces; i++) {
    s.clean += clean_[i].bytes();
    s.dirty_extents += dirty_[i].count();
  }
  s.map_pages = page_map_.written_pages();
  return s;
}

void ChunkLayer::prefork() noexcept {
  lock_.lock();
  meta_.prefork();
}
void ChunkLayer::postfork_parent() noexcept {
  meta_.postfork_parent();
  lock_.unlock();
}
void ChunkLayer::postfork_child() noexcept {
  page_map_.postfork_child();
  meta_.postfork_child();
  lock_.reinit_after_fork();
}

}  // namespace ductile::chunk
