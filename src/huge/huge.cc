// SPDX-License-Identifier: BSD-2-Clause
// The huge layer's spans: their records, taking and shaping them, commit
// and guard pages, THP, alloc and free, stats (growth and shrink: resize.cc).
#include "huge/huge.h"

#include <cstring>
#include <new>

#include "base/fork_gate.h"

namespace ductile::huge {

using chunk::Extent;
using chunk::ExtentKind;
using chunk::GrowPath;
using chunk::GrowResult;

namespace {
// The largest block: pointer differences within it must fit in ptrdiff_t, as
// for any malloc.
constexpr size_t kMaxBlock = static_cast<size_t>(PTRDIFF_MAX) & ~(kPage - 1);

// A growing block of half a huge page or more is on its way to a whole one:
// realloc makes such a block (core: grows_huge) from a medium one in the
// dense space, a buffer that has doubled its way up from small sizes.
constexpr bool bound_for_a_huge_page(size_t usable, bool growing) { return growing && usable >= kHugePage / 2; }
}  // namespace

const char* growth_path_name(GrowthPath p) noexcept {
  switch (p) {
    case GrowthPath::kHeadroom: return "headroom";
    case GrowthPath::kNeighbour: return "neighbour";
    case GrowthPath::kFixedMap: return "fixed_map";
    case GrowthPath::kMremap: return "mremap";
    case GrowthPath::kCopy: return "copy";
    case GrowthPath::kCount: break;
  }
  return "?";
}

HugeLayer::HugeLayer(chunk::ChunkLayer& chunks, const Options& options) noexcept
    : chunks_(chunks), options_(options) {}

size_t HugeLayer::size_for(size_t size) noexcept {
  if (size > kMaxBlock) return 0;
  return size == 0 ? kPage : align_up(size, kPage);
}

size_t HugeLayer::span_for(size_t usable, bool growing) const noexcept {
  const unsigned factor = growing ? options_.growth_headroom_factor : options_.headroom_factor;
  // Such a block's headroom is counted from the whole huge page.
  const size_t from = bound_for_a_huge_page(usable, growing) && usable < kHugePage ? kHugePage : usable;
  size_t room = 0;
  if (factor != 0) {
    room = options_.max_headroom;
    if (from <= room / factor) room = from * factor;
  }
  size_t span = usable + room;
  if (span < usable + guard_room()) span = usable + guard_room();
  size_t whole = align_up(span, kHugePage);
  if (whole == 0) whole = align_up(usable, kHugePage);
  return whole != 0 ? whole : usable;
}

// ---- span records ------------------------------------------------------

HugeLayer::Span* HugeLayer::new_record() noexcept {
  {
    LockGuard g(lock_);
    if (Span* s = spare_) {
      spare_ = s->next;
      return new (s) Span();
    }
  }
  void* mem = chunks_.meta().alloc(sizeof(Span), alignof(Span));
  return mem != nullptr ? new (mem) Span() : nullptr;
}

void HugeLayer::free_record(Span* s) noexcept {
  LockGuard g(lock_);
  s->next = spare_;
  spare_ = s;
}

// ---- taking and shaping spans --------------------------------------------

HugeLayer::Fresh HugeLayer::take_span(size_t usable, size_t align, bool growing) noexcept {
  Fresh f = place_span(usable, align, growing);
  if (f.e == nullptr || !guarded() || f.committed <= usable) return f;
  // The guard: the page past the block. (Under strict overcommit only a
  // recycled span that was committed already needs one: the rest was never
  // committed.)
  if (!strict() && !chunks_.os().guard_markers()) {
    // (A guard marker splits nothing. Until the first guard says which
    // kind the kernel gives, and from then on where it is mprotect:)
    // The pieces the guard splits the reservation's mapping into merge
    // again when it is lifted only if they share the kernel's record of
    // their anonymous pages (anon_vma), which a mapping gets at its first
    // write fault: a piece split off before that gets one of its own at
    // its own first write, and never merges with its neighbours (2 000
    // blocks freed left 1 830 mappings behind). So the block's first page
    // is written (its own byte back: the caller's block is about to be
    // written anyway) while the mapping is still whole.
    auto* first = static_cast<volatile unsigned char*>(ptr(f.e->base));
    *first = *first;
  }
  // Under strict overcommit everything past the block is decommitted, as
  // the rest of free space is; in normal mode one page alone is the guard:
  // PROT_NONE over the resident pages of a recycled span would rewrite
  // their page-table entries, and lifting it at free again (see huge.h).
  if (chunks_.os().guard(ptr(f.e->base + usable), guard_size(f.committed, usable))) {
    f.committed = usable;
    return f;
  }
  chunks_.free(f.e, strict() ? f.committed : f.zero_from);
  return {};
}

HugeLayer::Fresh HugeLayer::place_span(size_t usable, size_t align, bool growing) noexcept {
  const size_t a = align > kHugePage ? align : kHugePage;
  size_t least = align_up(usable + guard_room(), kHugePage);
  if (least == 0) least = usable;
  const size_t want = span_for(usable, growing);
  const chunk::Space space = space_for(usable, growing);
  if (strict()) {
    // A new block that is not growing: exactly its pages (and its guard
    // page), page-aligned (see take_span_strict).
    const size_t exact = usable + guard_room();
    if (!growing) return take_span_strict(usable, align > kPage ? align : kPage, exact, exact, space);
    return take_span_strict(usable, a, least, want, space);
  }
  // The block first, where the chunk layer places it best: a recycled,
  // still faulted-in extent before fresh space, the tightest first. Then its
  // headroom from whatever is free behind it. (Asking for block + headroom
  // at once would pass over the extent a block of the same size just freed:
  // its headroom went back clean, apart from it.) From clean space, block
  // and headroom come in one carve (`room`), which leaves the page-map entry
  // at the block's end unwritten.
  chunk::Allocation got = chunks_.alloc(least, a, SIZE_MAX, space, want - least);
  Extent* e = got.extent;
  if (e == nullptr) return {};
  size_t zero_from = got.zeroed ? 0 : e->size;
  if (want > e->size) {
    // A new block takes headroom only from clean space: recycled pages
    // behind it would stay resident, unused, for as long as it lives (cycling
    // 5-25 MiB blocks held about 130 MiB so). A new block on recycled pages
    // with dirty ones behind it goes without headroom; it still grows over
    // them in place. A block moved by growth is likely to grow again: it
    // takes its headroom where it finds it (interleaved doubling moved 14.75
    // times per round rather than 8 without).
    GrowResult r = chunks_.grow(e, want, false, !growing);
    if (r.path != GrowPath::kRefused) {
      if (!r.zeroed) zero_from = e->size;
    } else if (growing || got.zeroed) {
      // Something busy right behind it: look for a place with room, but
      // keep resident pages over fresh ones with room. (A new block on
      // resident pages just keeps them, without headroom.)
      chunk::Allocation roomy = chunks_.alloc(want, a, SIZE_MAX, space);
      if (roomy.extent != nullptr && !got.zeroed && roomy.zeroed) {
        chunks_.free(roomy.extent, 0);  // untouched: back as clean
      } else if (roomy.extent != nullptr) {
        chunks_.free(e, got.zeroed ? 0 : SIZE_MAX);
        e = roomy.extent;
        zero_from = roomy.zeroed ? 0 : e->size;
      }
    }
  }
  return {e, zero_from, e->size};
}

HugeLayer::Fresh HugeLayer::take_span_strict(size_t usable, size_t align, size_t least, size_t want,
                                             chunk::Space space) noexcept {
  // Block and headroom at once, uncommitted (commit 0): the chunk layer
  // would commit headroom it adds by growth, and the kernel charge it.
  // Under strict overcommit uncommitted space is PROT_NONE, a mapping apart
  // from the block's: a block with headroom is two mappings, and 32 700 live
  // blocks reached vm.max_map_count. So only a block that grows (a move by
  // realloc) gets headroom and 2 MiB alignment; a new block is its pages
  // alone, placed right after the last, and consecutive blocks are one
  // read-write mapping.
  const size_t sizes[2] = {want, least};
  for (size_t i = 0; i < 2; i++) {
    if (i == 1 && sizes[1] >= sizes[0]) break;
    chunk::Allocation got = chunks_.alloc(sizes[i], align, 0, space);
    Extent* e = got.extent;
    if (e == nullptr) continue;
    const size_t zero_from = got.zeroed ? 0 : e->size;
    if (e->committed) return {e, zero_from, e->size};
    if (!chunks_.os().commit(ptr(e->base), usable)) {
      chunks_.free(e, 0);
      return {};
    }
    // The flag now speaks for [base, base+committed), the part free() and
    // the chunk layer's shrink are told is committed.
    e->committed = true;
    return {e, zero_from, usable};
  }
  return {};
}

void HugeLayer::adopt(Extent* e, Span* s, const Fresh& f, size_t usable) noexcept {
  s->committed = f.committed;
  s->strays = false;
  s->moved_in = 0;
  s->far_aligned = false;
  // The first `usable` bytes are the caller's (new, or carried over by a move).
  s->zero_from = f.zero_from > usable ? f.zero_from : usable;
  e->kind = ExtentKind::kHuge;
  e->owner = s;
  e->usable = usable;
  stats_.span_bytes.fetch_add(e->size, std::memory_order_relaxed);
  stats_.active_bytes.fetch_add(usable, std::memory_order_relaxed);
}

bool HugeLayer::commit_to(Extent* e, Span* s, size_t upto) noexcept {
  if (upto <= s->committed || (!strict() && !guarded())) return true;
  if (!strict()) {
    // Hardened mode: the guard page moves to the new end first, and the
    // block opens after (its old guard page lifted), so that a refusal
    // leaves block and guard whole. A guard page left behind where both
    // lifts were refused lies in the headroom (Span::strays).
    if (!chunks_.os().guard(ptr(e->base + upto), kPage)) return false;
    if (!lift_guards(e, s->committed, s->strays, s->committed, upto)) {
      if (!chunks_.os().unguard(ptr(e->base + upto), kPage)) s->strays = true;
      return false;
    }
    s->committed = upto;
    return true;
  }
  // Under strict overcommit a commit (and in hardened mode the guard
  // lifted): mprotect(READ|WRITE).
  if (!chunks_.os().unguard(ptr(e->base + s->committed), upto - s->committed)) return false;
  s->committed = upto;
  return true;
}

bool HugeLayer::guard_past(Extent* e, Span* s, size_t usable) noexcept {
  if (!guarded() || s->committed <= usable) return true;
  const size_t old = s->committed;
  if (!chunks_.os().guard(ptr(e->base + usable), guard_size(old, usable))) return false;
  s->committed = usable;
  // Normal mode: the old guard page is headroom now; refused, it stays
  // (Span::strays).
  if (!strict() && !lift_guards(e, old, s->strays, usable + kPage, old + kPage)) s->strays = true;
  return true;
}

bool HugeLayer::guard_added(Extent* e, Span* s, uintptr_t old_end) noexcept {
  const size_t added = e->end() - old_end;
  if (chunks_.os().guard(ptr(old_end), added)) return true;
  // Give the added pages back (no system call): the span is as it was. Out
  // of metadata, the span keeps them open past its guard; the block is
  // intact, and they are lifted with the rest when the span goes back.
  if (chunks_.shrink(e, old_end - e->base)) {
    stats_.span_bytes.fetch_sub(added, std::memory_order_relaxed);
    if (s->zero_from > e->size) s->zero_from = e->size;
  }
  return false;
}

bool HugeLayer::lift_guards(Extent* e, size_t committed, bool strays, size_t from, size_t to) noexcept {
  if (to > e->size) to = e->size;
  if (!strays) {
    if (committed + kPage <= from || committed >= to) return true;  // no guard in the range
    from = committed;
    to = committed + kPage;
  }
  return from >= to || chunks_.os().unguard(ptr(e->base + from), to - from);
}

void HugeLayer::drop_moved_in(Extent* e, size_t moved_in) noexcept {
  if (moved_in == 0) return;
  // Marked as holding moved-in pages instead, the whole span would be kept
  // apart from its neighbours, and every growth over any part of it later
  // would map that part afresh: a buffer grown the same way round after
  // round faulted its pages again every round (a vector doubling to 512
  // MiB: 255 huge pages a round, where it had none to fault).
  const size_t n = moved_in < e->size ? moved_in : e->size;
  if (chunks_.os().map_fresh(ptr(e->base), n) &&
      (!chunks_.advised_now(e->space) || chunks_.os().advise_huge(ptr(e->base), n)))
    return;
  chunks_.mark_remapped(e);
}

void HugeLayer::give_back(Extent* e, size_t committed, size_t zero_from, bool strays) noexcept {
  if (guarded() && !strict() && committed < e->size) {
    // The chunk layer's free space is read/write in normal mode: lift the
    // guard, or map the range afresh where the kernel refuses that.
    void* a = ptr(e->base + committed);
    const size_t n = e->size - committed;
    if (!lift_guards(e, committed, strays, committed, e->size)) {
      if (!chunks_.os().map_fresh(a, n)) return;  // kept: its address space is lost, nothing else
      if (chunks_.advised_now(e->space)) (void)chunks_.os().advise_huge(a, n);
    }
  }
  chunks_.free(e, strict() ? committed : zero_from);
}

void HugeLayer::zero_range(uintptr_t a, size_t n) noexcept {
  // Past a few huge pages, the old pages are dropped rather than written
  // over: they read as zero when touched next, so a zeroed block on recycled
  // pages costs what the caller touches (as a fresh mapping would), not a
  // write of every byte (1 GiB: 0.66 s, all of it made resident).
  // MADV_DONTNEED, never MADV_FREE (whose pages may keep their old bytes).
  const uintptr_t from = align_up(a, kPage), to = align_down(a + n, kPage);
  if (to > from && to - from >= kZeroByPurge) {
    const os::Range r{ptr(from), to - from};
    if (chunks_.os().purge(&r, 1, os::Advice::kDontNeed) == 1) {
      std::memset(ptr(a), 0, from - a);
      std::memset(ptr(to), 0, a + n - to);
      return;
    }
  }
  std::memset(ptr(a), 0, n);
}

// ---- transparent huge pages ------------------------------------------------

chunk::Space HugeLayer::space_for(size_t usable, bool growing) const noexcept {
  // Only where the system's mode is madvise: in always mode every mapping
  // gets huge pages anyway, in never mode none can.
  if (chunks_.os().thp_mode() != os::ThpMode::kMadvise) return chunk::Space::kPlain;
  switch (options_.thp) {
    case ThpPolicy::kNever: return chunk::Space::kPlain;
    case ThpPolicy::kAlways: return chunk::Space::kHuge;
    case ThpPolicy::kAuto: break;
  }
  return bound_for_a_huge_page(usable, growing) ? chunk::Space::kHuge : chunk::Space::kPlain;
}

// ---- alloc and free ----------------------------------------------------------

void* HugeLayer::alloc(size_t size, size_t align, bool zero, bool growing) noexcept {
  if (align < kPage) align = kPage;
  if (!is_pow2(align)) return nullptr;
  const size_t usable = size_for(size);
  if (usable == 0) return nullptr;
  Span* s = new_record();
  if (s == nullptr) return nullptr;
  Fresh f = take_span(usable, align, growing);
  if (f.e == nullptr) {
    free_record(s);
    return nullptr;
  }
  adopt(f.e, s, f, 0);
  s->far_aligned = align > kHugePage;
  set_usable(f.e, s, usable, zero);
  stats_.allocs.fetch_add(1, std::memory_order_relaxed);
  return ptr(f.e->base);
}

void* HugeLayer::alloc_from(Extent* from, size_t size, bool zero, bool* moved) noexcept {
  DUCTILE_CHECK(from != nullptr && from->state == chunk::ExtentState::kActive && moved != nullptr);
  *moved = false;
  const size_t usable = size_for(size);
  if (usable == 0 || from->size > usable || from->usable > from->size) return nullptr;
  // Under strict overcommit or with guard pages a span is the block's exact
  // pages, its headroom uncommitted or guarded: the move past the old pages
  // that keeps the huge page whole would undo that.
  if (strict() || guarded()) return alloc(size, kPage, zero, true);
  // From the mremap to the chunk layer's refill of the old range, and from
  // taking the span to adopting it, the layers disagree: in flight.
  const InFlight gate;
  Span* s = new_record();
  if (s == nullptr) return nullptr;
  Fresh f = take_span(usable, kPage, true);
  if (f.e == nullptr) {
    free_record(s);
    return nullptr;
  }
  Extent* t = f.e;
  // The pages go to the span's start together with the rest of the huge
  // pages they begin (the target's new pages, fresh: they read as zero):
  // the moved range is a mapping of its own, never merged with its
  // neighbours, and a huge page it ended in the middle of could never be a
  // transparent one -- untouched, it is one at its first write.
  size_t len = align_up(from->size, kHugePage);
  if (len > t->size) len = from->size;
  if (f.zero_from == 0 &&
      chunks_.os().remap(ptr(from->base), from->size, len, os::RemapMode::kFixed, ptr(t->base)) != nullptr) {
    // [0, from->size) holds the old block's pages, [from->size, len) is
    // new, and the rest of the span came clean.
    Fresh in = f;
    in.zero_from = from->size;
    adopt(t, s, in, from->usable);
    // The pages brought their old mapping's flags: advised like the space
    // they are in now, or they would split its mapping.
    if (chunks_.advised_now(t->space) && !chunks_.advised_now(from->space))
      (void)chunks_.os().advise_huge(ptr(t->base), len);
    chunks_.refill(from);
    s->moved_in = len;
    *moved = true;
  } else {
    if (f.zero_from == 0 && !restore_target(t, len)) {
      // The refused mremap left the target in an unknown state: dropped
      // (unmapping a hole is harmless), and the copy goes to another span.
      (void)chunks_.os().unmap(ptr(t->base), t->size);
      chunks_.forget(t);
      f = take_span(usable, kPage, true);
      if (f.e == nullptr) {
        free_record(s);
        return nullptr;
      }
    }
    adopt(f.e, s, f, 0);
  }
  set_usable(f.e, s, usable, zero);
  stats_.allocs.fetch_add(1, std::memory_order_relaxed);
  return ptr(f.e->base);
}

void HugeLayer::free(Extent* e) noexcept {
  DUCTILE_CHECK(e != nullptr && e->kind == ExtentKind::kHuge && e->owner != nullptr);
  Span* s = span_of(e);
  stats_.active_bytes.fetch_sub(e->usable, std::memory_order_relaxed);
  stats_.span_bytes.fetch_sub(e->size, std::memory_order_relaxed);
  stats_.frees.fetch_add(1, std::memory_order_relaxed);
  // The span past `committed` (strict overcommit) or past what was ever
  // written (zero_from) goes back clean: no memset for a zeroed request
  // there, no purge of pages that were never there.
  drop_moved_in(e, s->moved_in);
  if (s->far_aligned && !strict() && !guarded()) {
    // A block aligned past a huge page sits where its reservation starts
    // (or at another address few of them have): given back dirty up to
    // what it wrote, that address starts a piece too small for the next
    // such block, which took a reservation of its own each time (an
    // aligned_alloc(2^40, 1) and free in a loop: 1 GiB more address space
    // a call). Purged, the span is clean and one with the clean space
    // behind it.
    chunks_.release(&e, 1);
  } else {
    give_back(e, s->committed, s->zero_from, s->strays);
  }
  free_record(s);
}

HugeStats HugeLayer::stats() const noexcept {
  HugeStats r;
  r.allocs = stats_.allocs.load(std::memory_order_relaxed);
  r.frees = stats_.frees.load(std::memory_order_relaxed);
  r.shrinks = stats_.shrinks.load(std::memory_order_relaxed);
  for (size_t i = 0; i < kGrowthPaths; i++) r.growth[i] = stats_.growth[i].load(std::memory_order_relaxed);
  r.active_bytes = stats_.active_bytes.load(std::memory_order_relaxed);
  r.span_bytes = stats_.span_bytes.load(std::memory_order_relaxed);
  return r;
}

}  // namespace ductile::huge
