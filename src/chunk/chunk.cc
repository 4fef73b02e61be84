// SPDX-License-Identifier: BSD-2-Clause
// The chunk layer itself: its construction and reservations of address
// space, extent records, the free sets, free, statistics and fork.
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

// The hint of the process's first reservation, once taken (see reserve).
std::atomic<uintptr_t> g_random_hint{0};

uintptr_t random_hint() {
  // AT_RANDOM: 16 random bytes the kernel gives every process, on the main
  // thread's stack; reading them costs neither a system call nor an
  // allocation.
  uint64_t r = 0;
  auto* bytes = reinterpret_cast<const unsigned char*>(getauxval(AT_RANDOM));
  if (bytes) std::memcpy(&r, bytes + 8, sizeof r);
  return ChunkLayer::hint_from(r, addr(bytes));
}

}  // namespace

uintptr_t ChunkLayer::hint_from(uint64_t r, uintptr_t stack) noexcept {
  // The hint lies in the first half of a page-map leaf's span (of 1 GiB),
  // so that the first reservation can end at the leaf's end (see reserve):
  // 8 bits of 2 MiB steps within a leaf, and the leaf's own 10 (6 below
  // the stack).
  const uintptr_t in_leaf = align_down((r >> 32) % (PageMap::kLeafSpan / 2), kHugePage);
  if (kSanitized && stack > kSanitizedBelowStack + kSanitizedSpread)
    return align_down(stack - kSanitizedBelowStack - r % kSanitizedSpread, PageMap::kLeafSpan) + in_leaf;
  return kHintBase + align_down(r % kHintSpread, PageMap::kLeafSpan) + in_leaf;
}

size_t ChunkLayer::to_leaf_end(uintptr_t hint, size_t res) noexcept {
  const size_t left = align_up(hint + 1, PageMap::kLeafSpan) - hint;
  return left < res && left >= res / 2 ? left : res;
}

static_assert(kSpaces == 3 && space_index(Space::kPlain) == 0,
              "the constructor makes a dirty and a clean set per space, the plain space first");

ChunkLayer::ChunkLayer(os::Os& os, Clock& clock, const Options& options) noexcept
    : os_(os),
      clock_(clock),
      options_(options),
      meta_(os, MetaAlloc::kBlock + PageMap::kLeafBytes),
      dirty_{ExtentSet(set_heads_[0], options.storage_zeroed), ExtentSet(set_heads_[1], options.storage_zeroed),
             ExtentSet(set_heads_[2], options.storage_zeroed)},
      clean_{ExtentSet(plain_clean_heads_, options.storage_zeroed), ExtentSet(set_heads_[3], options.storage_zeroed),
             ExtentSet(set_heads_[4], options.storage_zeroed)},
      page_map_(meta_, options.storage_zeroed) {
  if (options_.first_hint != 0) {
    own_cursor_ = align_up(options_.first_hint, kHugePage);
  } else {
    uintptr_t expected = 0;
    const uintptr_t hint = random_hint();
    if (g_cursor.compare_exchange_strong(expected, hint, std::memory_order_relaxed))
      g_random_hint.store(hint, std::memory_order_relaxed);
  }
  if (options_.storage_zeroed) page_map_.touch_root(cursor());
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
  return os_.map_fresh(ptr(base), size) && (!advised_now(space) || os_.advise_huge(ptr(base), size));
}

void ChunkLayer::set_dense_advice(bool on) noexcept {
  if (!on) {
    dense_advice_.store(false, std::memory_order_relaxed);
    return;
  }
  if (dense_advice_.exchange(true, std::memory_order_relaxed)) return;
  // Ranges carved or mapped from now on are advised as they come; the
  // reservations made meanwhile, whole, here (a range already advised, or
  // a piece unmapped since, is no harm).
  uintptr_t base[kDenseReservations];
  size_t size[kDenseReservations];
  size_t n;
  {
    LockGuard g(lock_);
    n = ndense_;
    for (size_t i = 0; i < n; i++) {
      base[i] = dense_base_[i];
      size[i] = dense_size_[i];
    }
  }
  for (size_t i = 0; i < n; i++) (void)os_.advise_huge(ptr(base[i]), size[i]);
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

bool ChunkLayer::reserve(size_t res, size_t hint_align, Space space) noexcept {
  uintptr_t base = 0;
  for (int i = 0; i < kHintTries && base == 0; i++) {
    uintptr_t hint = align_up(cursor(), hint_align);
    if (hint == 0 || !PageMap::in_range(hint + res)) break;
    // The process's first reservation, at the random hint, ends at the end
    // of the page-map leaf it starts in: a whole one straddled two leaves,
    // and the second cost an mmap and two page faults more at start-up.
    // The cursor then lies on a leaf boundary, and the next fills a leaf.
    const size_t len = res == options_.reservation && hint == g_random_hint.load(std::memory_order_relaxed)
                           ? to_leaf_end(hint, res)
                           : res;
    os::MapStatus st = os_.reserve_at(ptr(hint), len);
    if (st == os::MapStatus::kMapped) {
      base = hint;
      res = len;
    } else if (st == os::MapStatus::kFailed) {
      return false;
    }
    advance_cursor(hint + len);  // taken now, or occupied: the next try goes past it
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
  if (advised_now(space)) (void)os_.advise_huge(ptr(base), res);
  if (space == Space::kDense && ndense_ < kDenseReservations) {
    dense_base_[ndense_] = base;
    dense_size_[ndense_++] = res;
  }
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
  if (advised_now(e->space)) (void)os_.advise_huge(ptr(e->base), e->size);
  LockGuard g(lock_);
  set_remapped(e, false);
  clear_interior(e);
  stats_.active -= e->size;
  e->committed = !os_.features().strict_overcommit;  // as a fresh reservation
  insert_free(e, ExtentState::kClean);
}

bool ChunkLayer::in_free_space(const void* p) const noexcept {
  if (!lock_.try_lock()) return false;
  bool found = false;
  for (size_t i = 0; i < kSpaces && !found; i++) found = dirty_[i].holds(addr(p)) || clean_[i].holds(addr(p));
  lock_.unlock();
  return found;
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
