/* SPDX-License-Identifier: BSD-2-Clause */
// Layer 3, the huge layer: blocks at or above the huge threshold. Each block
// sits at the start of a span (a chunk-layer extent) whose rest is headroom.
// Growth, in this order (the first that can serve wins):
//   1. kHeadroom  — the span already holds it: commit more of it (no system
//                   call in normal overcommit mode, no copy);
//   2. kNeighbour — take the free extent right after the span (chunk grow);
//   3. kFixedMap  — map fresh space at the address past the span
//                   (MAP_FIXED_NOREPLACE, never clobbering);
//   4. kMremap    — move the pages with mremap into a fresh, larger span of ours
//                   (page tables move, bytes don't);
//   5. kCopy      — allocate, copy, free.
// resize_in_place() tries 1-3 only (xallocx); resize() all five (realloc, rallocx).
// alloc_from() makes a huge block out of a medium block that realloc grows
// into the huge range: onto a clean span its pages move by mremap (no
// untouched page of it is made resident), onto recycled pages it is copied.
//
// The span: an extent of kind kHuge whose `usable` bytes are the block (a
// page multiple) and whose `owner` is the layer's Span record. Spans start
// 2 MiB aligned and are whole huge pages long (the block's last huge page is
// not shared with anybody, so it can be a transparent huge page).
//
// Placement and recycling: the block is placed first, where the chunk layer
// fits it best (a recycled, still faulted-in extent before fresh space), and
// its headroom is then taken from whatever is free behind it (only where
// nothing is free there does the block look for a place with room, keeping
// resident pages over fresh ones). A freed span goes back dirty up to the
// furthest byte the block could have written, and clean past it -- so the
// next block of that size lands on the same pages, and a zeroing request
// or a purge never pays for headroom that was never touched. Under strict
// overcommit the uncommitted rest goes back clean and uncommitted instead.
//
// Headroom policy (span_for): a span holds the block plus `headroom_factor`
// times the block, capped at `max_headroom`, rounded up to huge pages. It
// costs address space only: in normal overcommit mode reservations are
// read/write MAP_NORESERVE, so headroom is usable without a system call and
// counts for nothing until touched; under strict overcommit it stays
// PROT_NONE (uncharged) and is committed block by block with mprotect.
// Growth that takes the neighbour or maps past the span takes the new size's
// headroom too when it is there; a shrink gives back whatever lies past the
// new size's span. The default, 1 (room for one doubling), from
// bench/huge_bench on this 2-core machine: four blocks doubling in turn from
// 2 to 64 MiB while small extents are taken between the steps moved 20 times
// per round with no headroom, 8 with factor 1 and 4 with factor 3 (24, 10
// and 5 system calls; 33, 20 and 16 new mappings; 41, 35 and 30 ms), while
// a lone vector grows in place whatever the factor (its neighbour is free).
// Factor 3 would halve the moves again but doubles the address space held
// and, on a recycled span, the resident pages a block's headroom keeps from
// decay (up to factor x the block). max_headroom (1 GiB, a reservation)
// bounds that for the largest blocks. A block that grows -- moved by
// growth, or grown past its span -- takes growth_headroom_factor (7: three
// more doublings): 64 buffers doubling round-robin moved at every other
// doubling with factor 1, and not at all with 7. Under strict overcommit a
// new block that is not growing takes no headroom (see take_span_strict).
//
// Guard (hardened mode, Options::guard): the page past the block is a
// guard (os::Os::guard: a guard marker, or PROT_NONE where the kernel has
// none), so that running off the block's end faults; a span always
// holds a page past its block. Span::committed is the block's usable size,
// the guard page's offset. Growth moves the guard page and opens the block
// behind it; a shrink guards the new end and opens the old guard page. The
// headroom past the guard page stays read/write: guarding it whole rewrote
// the page-table entries of a recycled span's resident pages at every
// malloc and free (large-cycle ran 3.4 times as long). Under strict
// overcommit everything past the block is uncommitted, PROT_NONE, as the
// commit path there has it. In normal overcommit mode the guard is lifted
// before a span or its tail goes back to the chunk layer, whose free space
// is read/write (see docs/ARCHITECTURE.md, Guard pages behind huge blocks).
//
// Transparent huge pages (ThpPolicy, only where the system's mode is
// madvise; in always mode the kernel does it anyway, in never mode nothing
// can): a span comes from the chunk layer's huge-page space -- reservations
// advised MADV_HUGEPAGE whole, kept apart from plain space -- when its block
// is densely used, else from plain space. Advising each span on its own
// split a reservation's mapping twice per span (34 000 live blocks made
// 34 000 mappings, against vm.max_map_count's 65 530), and made every block
// fully resident on its first touch (3 000 blocks of 2-4 MiB with one page
// written held 6 GiB, glibc 24 MiB). Densely used, for kAuto: a block that
// grows -- by realloc from a smaller block, or moved by growth -- such as a
// growing vector, from half a huge page on (its headroom then counted as
// for a whole one); a block that grows in place stays where it is. A block
// always lies in one mapping, which mremap needs: growth never crosses from
// one space into the other, and pages moved from plain into huge-page space
// are advised on arrival.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "base/lock.h"
#include "chunk/chunk.h"

namespace ductile::huge {

enum class GrowthPath : uint8_t { kHeadroom, kNeighbour, kFixedMap, kMremap, kCopy, kCount };
inline constexpr size_t kGrowthPaths = static_cast<size_t>(GrowthPath::kCount);
const char* growth_path_name(GrowthPath p) noexcept;

// kAuto: huge-page space for blocks that grow and are at least half a huge
// page (a smaller block in a huge page would make most of its 2 MiB
// resident; realloc makes growing blocks of 1-2 MiB only of buffers on their
// way up, see core's grows_huge).
// kAlways: for every huge block. kNever: for none.
enum class ThpPolicy : uint8_t { kAuto, kAlways, kNever };

struct Options {
  // Requests of at least this many bytes are huge. 2 MiB: one transparent huge
  // page; a smaller block could not be backed by one anyway.
  size_t threshold = kHugePage;
  ThpPolicy thp = ThpPolicy::kAuto;
  // Headroom = headroom_factor x block (0: none), at most max_headroom.
  unsigned headroom_factor = 1;
  size_t max_headroom = size_t{1} << 30;
  // For a block that is growing (moved by growth, or grown past its span):
  // it has shown that it grows, and three more doublings fit in place.
  unsigned growth_headroom_factor = 7;
  // Hardened mode: the page past a block's usable end is PROT_NONE (under
  // strict overcommit everything past it), and a span always has that page,
  // so that running off the block's end faults.
  bool guard = false;
};

struct HugeStats {
  uint64_t allocs = 0;
  uint64_t frees = 0;
  uint64_t shrinks = 0;
  uint64_t growth[kGrowthPaths] = {};
  size_t active_bytes = 0;  // sum of block sizes
  size_t span_bytes = 0;    // sum of span sizes (blocks + headroom)
};

class HugeLayer {
 public:
  HugeLayer(chunk::ChunkLayer& chunks, const Options& options = Options()) noexcept;
  HugeLayer(const HugeLayer&) = delete;
  HugeLayer& operator=(const HugeLayer&) = delete;

  // A block of at least `size` bytes aligned to `align` (a power of two; any
  // value up to a page is served at page alignment); zeroed when `zero`.
  // nullptr on failure (the caller sets errno).
  // `growing`: a block that grows (realloc of a smaller one): densely used,
  // it goes to huge-page space (see space_for).
  [[nodiscard]] void* alloc(size_t size, size_t align, bool zero, bool growing = false) noexcept;
  // A growing block of at least `size` bytes (as alloc's with `growing`)
  // for the contents of `from`: an active extent an upper layer hands over
  // (a medium block that realloc grows into the huge range, at most `size`
  // bytes), whose first from->usable bytes are the block's. Where the new
  // span comes clean (fresh or purged: nothing of it resident), from's pages
  // move to its start by mremap, with the rest of the huge page they begin
  // (one mapping, which can be a transparent huge page), from's range goes
  // back to the chunk layer, mapped afresh, as clean free space, and
  // `*moved` is set: no byte is copied, and no untouched page of the old
  // block is faulted in (a copy wrote them into the new block's huge page:
  // 2 MiB resident for an untouched 1 MiB block). Where the span is
  // recycled pages, still resident, `*moved` stays false and the caller
  // copies and frees `from`: a move would drop those pages for fresh ones
  // (a block that grows the same way round after round would fault every
  // round). nullptr, with `from` untouched, where there is no span.
  // Under strict overcommit or with guard pages (spans of exact pages) the
  // pages never move.
  [[nodiscard]] void* alloc_from(chunk::Extent* from, size_t size, bool zero, bool* moved) noexcept;
  // Frees a block this layer handed out (`e` is chunks.lookup(p), kind kHuge).
  void free(chunk::Extent* e) noexcept;
  // The bytes the block may use (what malloc_usable_size reports).
  static size_t usable_size(const chunk::Extent* e) noexcept { return e->usable; }
  // The usable size a request of `size` bytes would get (nallocx); 0 if none can.
  static size_t size_for(size_t size) noexcept;

  // Grows or shrinks the block in place (paths 1-3 for growth; shrinking gives
  // the tail back). Returns the new usable size; the old one when it could
  // not. New bytes are zeroed when `zero`.
  // `way`, where given, is set to the growth path a growing block took.
  size_t resize_in_place(chunk::Extent* e, size_t new_size, bool zero, GrowthPath* way = nullptr) noexcept;
  // Like resize_in_place, then mremap, then copy: returns the block's address
  // (maybe new), or nullptr with the old block intact. `new_size` is at least
  // the threshold.
  [[nodiscard]] void* resize(chunk::Extent* e, size_t new_size, size_t align, bool zero,
                             GrowthPath* way = nullptr) noexcept;

  HugeStats stats() const noexcept;
  const Options& options() const noexcept { return options_; }
  // The runtime's dispatch reads the threshold with a relaxed atomic load;
  // mallopt changes it at run time (core::set_huge_threshold).
  void set_threshold(size_t t) noexcept { __atomic_store_n(&options_.threshold, t, __ATOMIC_RELAXED); }

  // The span a block of `usable` bytes gets: block + headroom, whole huge pages.
  size_t span_for(size_t usable, bool growing = false) const noexcept;

  void prefork() noexcept { lock_.lock(); }
  void postfork_parent() noexcept { lock_.unlock(); }
  void postfork_child() noexcept { lock_.reinit_after_fork(); }

 private:
  // Per-span state the extent has no room for.
  struct Span {
    // Strict overcommit or hardened mode: [base, base+committed) is
    // read/write, the rest of the span PROT_NONE (in hardened mode
    // committed == usable: the rest is the guard). Otherwise everything is.
    size_t committed = 0;
    // [base+zero_from, end) is known to read as zeroes: never touched since
    // it came clean. Saves the memset of a zeroing growth.
    size_t zero_from = 0;
    // Hardened mode, normal overcommit: a guard page may lie past the one
    // at `committed` (a refused lift left it there), so lifts cover the
    // whole range in question rather than the guard page alone.
    bool strays = false;
    // [base, base+moved_in) holds pages that alloc_from moved in: a mapping
    // of their own, mapped afresh when the span goes back (drop_moved_in).
    size_t moved_in = 0;
    // Aligned past a huge page: its span goes back purged (see free).
    bool far_aligned = false;
    Span* next = nullptr;  // free list
  };
  struct Fresh {
    chunk::Extent* e = nullptr;
    size_t zero_from = 0;  // [base+zero_from, end) reads as zeroes
    size_t committed = 0;
  };
  struct Counters {
    std::atomic<uint64_t> allocs{0};
    std::atomic<uint64_t> frees{0};
    std::atomic<uint64_t> shrinks{0};
    std::atomic<uint64_t> growth[kGrowthPaths] = {};
    std::atomic<size_t> active_bytes{0};
    std::atomic<size_t> span_bytes{0};
  };

  bool strict() const noexcept { return chunks_.os().features().strict_overcommit; }
  bool guarded() const noexcept { return options_.guard; }
  // The least a span holds past its block: a guard page in hardened mode.
  size_t guard_room() const noexcept { return guarded() ? kPage : 0; }
  // Hardened mode: the bytes a guard at a block's end `usable` covers, in a
  // span open up to `committed`: one page, or under strict overcommit all
  // of the open span past the block.
  size_t guard_size(size_t committed, size_t usable) const noexcept { return strict() ? committed - usable : kPage; }
  static Span* span_of(const chunk::Extent* e) noexcept { return static_cast<Span*>(e->owner); }
  Span* new_record() noexcept;
  void free_record(Span* s) noexcept;

  // A span for a block of `usable` bytes (the policy's size, else the least),
  // `align`ed (at least 2 MiB), with the block committed.
  // `growing`: the span is for a block that is growing (moved by growth),
  // which takes its headroom from recycled pages too; a new block takes it
  // from clean space only.
  // In hardened mode the block ends at its guard (committed == usable).
  Fresh take_span(size_t usable, size_t align, bool growing = false) noexcept;
  Fresh place_span(size_t usable, size_t align, bool growing) noexcept;
  Fresh take_span_strict(size_t usable, size_t align, size_t least, size_t want, chunk::Space space) noexcept;
  // Makes e, freshly taken, a huge block of `usable` bytes described by s.
  void adopt(chunk::Extent* e, Span* s, const Fresh& f, size_t usable) noexcept;
  // Strict overcommit: commits the span up to `upto` bytes from its base;
  // hardened mode: opens the block up to there, its guard moved behind.
  bool commit_to(chunk::Extent* e, Span* s, size_t upto) noexcept;
  // Hardened mode: moves the guard back to `usable` (a shrink); under
  // strict overcommit all the span's open bytes past it become guard.
  bool guard_past(chunk::Extent* e, Span* s, size_t usable) noexcept;
  // Hardened mode under strict overcommit: guards what growth added to the
  // span past `old_end`; refused, gives it back to the chunk layer.
  bool guard_added(chunk::Extent* e, Span* s, uintptr_t old_end) noexcept;
  // Before the span goes back to the chunk layer: maps the pages alloc_from
  // moved in afresh, so that the span is one mapping with its neighbours
  // again (failing that, the chunk layer is told it holds moved-in pages).
  // `moved_in`: the span's Span::moved_in.
  void drop_moved_in(chunk::Extent* e, size_t moved_in) noexcept;
  // Frees the span to the chunk layer (lifting its guard first in normal
  // overcommit mode, whose free space is read/write). `strays`: Span::strays.
  void give_back(chunk::Extent* e, size_t committed, size_t zero_from, bool strays) noexcept;
  // Hardened mode, normal overcommit: lifts the guards in [from, to) of a
  // span whose guard page is at `committed` -- that page, where it lies in
  // the range, or with `strays` the whole range. Lifting a guard marker
  // walks the page tables of the range it is given (every entry of a
  // resident one: 7 us of a free's 11 for the whole headroom of an 8 MiB
  // block), so it is given one page where one page is guarded.
  bool lift_guards(chunk::Extent* e, size_t committed, bool strays, size_t from, size_t to) noexcept;
  // Growth paths 1-3. False, with the block unchanged, when none could serve.
  bool grow_in_place(chunk::Extent* e, Span* s, size_t usable, bool zero, GrowthPath* way) noexcept;
  // Paths 2-3: extends the span past its end to hold `usable` bytes.
  chunk::GrowResult extend(chunk::Extent* e, size_t usable) noexcept;
  // Paths 4-5: moves the block into a new span. nullptr, block intact, on failure.
  void* move(chunk::Extent* e, Span* s, size_t usable, size_t align, bool zero, GrowthPath* way) noexcept;
  // After a failed mremap onto `t`: makes sure [t, t+len) is still mapped.
  bool restore_target(chunk::Extent* t, size_t len) noexcept;
  // The block becomes `usable` bytes: zeroes the new bytes when asked, counts.
  // Zeroes [a, a+n): large page-aligned parts by dropping their pages.
  void zero_range(uintptr_t a, size_t n) noexcept;
  static constexpr size_t kZeroByPurge = 2 * kHugePage;
  void set_usable(chunk::Extent* e, Span* s, size_t usable, bool zero) noexcept;
  // Shrinks the block to `usable` bytes and gives back the span past its
  // policy size. False, block unchanged, when its new guard is refused.
  bool shrink_block(chunk::Extent* e, Span* s, size_t usable) noexcept;
  // Returns the span's bytes past `keep` to the chunk layer (best effort).
  void trim_span(chunk::Extent* e, Span* s, size_t keep) noexcept;

  // The address space a span for a block of `usable` bytes comes from:
  // huge-page space (Space::kHuge) or plain.
  chunk::Space space_for(size_t usable, bool growing) const noexcept;

  chunk::ChunkLayer& chunks_;
  Options options_;
  mutable Mutex lock_;  // guards spare_
  Span* spare_ = nullptr;
  Counters stats_;
};

}  // namespace ductile::huge
