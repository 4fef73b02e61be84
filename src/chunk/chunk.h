/* SPDX-License-Identifier: BSD-2-Clause */
// Layer 2, the chunk layer: owns ductile's address space and hands it out as
// page-multiple extents.
//
//  * Address space comes in reservations of at least Options::reservation
//    bytes, placed one after another at hinted, 2 MiB-aligned addresses with
//    MAP_FIXED_NOREPLACE: one mmap per reservation, no over-allocating and
//    trimming for alignment (that is only the fallback when every hint is
//    taken). Consecutive reservations are adjacent, so their free space
//    coalesces and huge blocks can grow across them.
//  * Free extents are retained: dirty (maybe resident) first, reused before
//    clean ones -- also when no dirty extent holds a request alone: it then
//    takes a dirty extent together with the free run next to it, so that
//    freed pages are written again before untouched ones are faulted in
//    while the dirty ones pile up awaiting decay. A dirty extent is purged
//    only after it has stayed unused for the decay time (the hysteresis: a
//    size that drains and refills within the decay time costs no system
//    call), in batches through the OS layer. trim() purges everything
//    retained now.
//  * "The extent that starts exactly at A": alloc_at() and grow() answer it,
//    from a free extent there or (grow) by mapping fresh space there.
//  * lookup() answers which extent owns an address without taking a lock.
//
// All methods are thread safe and never allocate through ductile.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "base/counter.h"
#include "base/lock.h"
#include "chunk/clock.h"
#include "chunk/extent.h"
#include "chunk/extent_set.h"
#include "chunk/meta_alloc.h"
#include "chunk/page_map.h"
#include "os/os.h"

namespace ductile::chunk {

struct Options {
  // How long a dirty extent stays resident before decay purges it. 10 s is
  // jemalloc's default dirty decay; DUCTILE_CONF decay_ms overrides it.
  uint64_t decay_ns = 10'000'000'000;
  // The smallest reservation. Address space is plentiful on 64-bit and a
  // read/write MAP_NORESERVE reservation costs nothing until touched, while
  // every mapping counts against vm.max_map_count: few, large reservations.
  // Capped at a sixteenth of RLIMIT_AS where one is set.
  size_t reservation = size_t{1} << 30;
  // First address tried for reservations; 0 picks a randomised one in the
  // otherwise empty range above 2 TiB (ASLR keeps its entropy).
  uintptr_t first_hint = 0;
  // Ranges holding pages that mremap moved in, each a mapping of its own,
  // kept with their pages for reuse until decay purges them; past this many
  // a freed one is mapped afresh at once. 1024: a few percent of
  // vm.max_map_count (65 530).
  size_t remapped_bound = 1024;
  // The most bytes one decay step purges when it runs inside an allocator
  // call (the rest is left for the next calls, or the background thread):
  // one huge page. Unbounded, a free that came due for decay purged every
  // old dirty extent, 1 GiB or more, inside that free -- sometimes under a
  // bin lock and the slab arena's lock, which take chunks from here.
  size_t decay_step_bytes = size_t{2} << 20;
  // The layer is constructed in zero-filled static storage (the process-wide
  // runtime): the page map's root need not be cleared (see PageMap).
  bool storage_zeroed = false;
};

struct Allocation {
  Extent* extent = nullptr;  // nullptr: refused or out of memory
  bool zeroed = false;       // every byte is known to read as zero
};

enum class GrowPath : uint8_t {
  kRefused,    // the space after the extent is busy, too small, or unmappable
  kNeighbour,  // took the free extent that starts at the extent's end
  kMapped,     // mapped fresh address space at the extent's end
};

struct GrowResult {
  GrowPath path = GrowPath::kRefused;
  bool zeroed = false;  // the added bytes read as zero
};

struct ChunkStats {
  size_t reserved = 0;      // address space mapped as reservations
  size_t active = 0;        // in extents handed to upper layers
  size_t dirty = 0;         // retained, maybe resident
  size_t clean = 0;         // purged or never touched
  size_t purging = 0;       // in a purge batch that has not completed
  size_t dirty_extents = 0; // free extents that are dirty (mallinfo's ordblks)
  size_t reservations = 0;  // reservation mappings made
  uint64_t allocs = 0;
  uint64_t frees = 0;
  uint64_t alloc_at_hits = 0;
  uint64_t alloc_at_refusals = 0;
  uint64_t purged_bytes = 0;
  uint64_t purges = 0;  // extents purged
  size_t map_pages = 0;         // pages of page-map entries written and not given back
  uint64_t map_released = 0;    // bytes of such pages given back (PageMap::release_idle)
};

// A size the layer takes: not 0, and whole pages.
inline bool valid_size(size_t size) { return size != 0 && is_aligned(size, kPage); }

class ChunkLayer {
 public:
  ChunkLayer(os::Os& os, Clock& clock, const Options& options = Options()) noexcept;
  ChunkLayer(const ChunkLayer&) = delete;
  // The process's first reservation hint from 64 random bits (and, in a
  // sanitizer build, the address of the main thread's stack): 2 MiB
  // aligned, in the first half of a page-map leaf's span.
  static uintptr_t hint_from(uint64_t r, uintptr_t stack) noexcept;
  // A reservation of `res` bytes at `hint` cut at the end of the page-map
  // leaf the hint lies in, where that keeps at least half of it; else res.
  static size_t to_leaf_end(uintptr_t hint, size_t res) noexcept;
  ChunkLayer& operator=(const ChunkLayer&) = delete;

  // An extent of `size` bytes (a page multiple) at an `align`-aligned address
  // (a power of two, at least a page). In this order: a dirty extent that
  // holds it alone (the smallest); a window over a dirty extent and the free
  // extents (dirty or clean) adjacent to it, placed to reuse the most dirty
  // bytes (starting at a dirty extent's start, or ending at its end); a clean
  // extent; a new reservation. zeroed only when all of it was clean. In
  // strict overcommit mode only the first `commit` bytes are committed (all
  // of it by default; a window is made of committed extents only).
  // `space`: which address space (Space): the huge-page spaces, advised
  // MADV_HUGEPAGE a whole reservation at a time, are for blocks that are
  // densely used (whatever touches a page of it gets a whole huge page).
  // `room`: bytes wanted behind the block from clean space (a huge block's
  // headroom). Where no dirty extent holds the block, a clean extent that
  // holds block and room is taken whole, in one carve: the extent comes back
  // `size + room` bytes long. Otherwise it is `size` bytes, and the caller
  // may grow() it.
  [[nodiscard]] Allocation alloc(size_t size, size_t align = kPage, size_t commit = SIZE_MAX,
                                 Space space = Space::kPlain, size_t room = 0) noexcept;
  // The free extent that starts exactly at `a`, cut to `size` bytes; refused
  // (extent == nullptr) when no free extent of at least that size starts there.
  [[nodiscard]] Allocation alloc_at(uintptr_t a, size_t size) noexcept;
  // Grows active extent `e` in place to `new_size`, from the run of free
  // extents (dirty and clean alike) starting at e->end(), and (if `may_map`
  // and the address past the run is not ours) by reserving fresh space there.
  // kMapped when a mapping was made, else kNeighbour; zeroed when every piece
  // taken was clean or fresh. Refused, with e unchanged, when a busy extent is
  // in the way. In strict overcommit mode the added bytes are committed.
  // With `clean_only`, a dirty extent in the run refuses it too (for room
  // that should not hold resident pages, such as a new block's headroom).
  [[nodiscard]] GrowResult grow(Extent* e, size_t new_size, bool may_map, bool clean_only = false) noexcept;
  // Returns the tail of active extent `e` beyond `new_size` as a free
  // extent: dirty up to `written` bytes from e's start (what may have been
  // written), clean past it (never touched: reads as zero).
  [[nodiscard]] bool shrink(Extent* e, size_t new_size, size_t written = SIZE_MAX) noexcept;
  // Retains `e` as a dirty free extent. Bytes past `committed` go back clean:
  // in strict overcommit mode they were never committed (and stay so); in
  // normal mode the caller vouches that they were never written since they
  // came clean (a huge span's untouched headroom).
  // `idle_since`: when the pages were last in use, if earlier than now (a
  // slab region that already sat empty for a while): decay counts from then.
  void free(Extent* e, size_t committed = SIZE_MAX, uint64_t idle_since = kNow) noexcept;
  static constexpr uint64_t kNow = UINT64_MAX;
  // Frees n active extents and purges them now (batched), rather than
  // leaving them to decay: for memory that is known to be cold, such as what
  // an exiting thread held. They come back as clean (zeroed) extents.
  void release(Extent* const* v, size_t n) noexcept;
  // `e`'s pages were moved away by mremap: its range is no longer mapped.
  void forget(Extent* e) noexcept;
  // Likewise, but maps the range again (MAP_FIXED_NOREPLACE, and the
  // huge-page advice of its space) and keeps it as clean free space: the
  // reservation stays whole, one mapping with its neighbours, and the range
  // is handed out again. Forgets it if the kernel refuses.
  void refill(Extent* e) noexcept;
  // Active extent `e` now holds pages that mremap moved in: a mapping of
  // their own, which never merges with its neighbours, until the range is
  // mapped afresh -- when purged, or when freed while more than
  // Options::remapped_bound such extents exist.
  void mark_remapped(Extent* e) noexcept;

  // The extent whose first or last page holds `p`, or any page of an extent
  // that was map_interior()'d; nullptr for addresses ductile does not own.
  Extent* lookup(const void* p) const noexcept { return page_map_.lookup(addr(p)); }
  // Whether p lies in free space of ours (a dirty or clean extent), where
  // lookup() finds nothing once the extent merged with its neighbours. For
  // reports of a bad free: it walks every free extent under the lock, and
  // answers false rather than wait for a lock this thread may hold.
  bool in_free_space(const void* p) const noexcept;
  // The raw page-map entry for p: the extent and the tag an upper layer set
  // (PageMap::entry_extent, entry_tag); 0 where lookup() is nullptr.
  DUCTILE_ALWAYS_INLINE uintptr_t lookup_entry(const void* p) const noexcept {
    return page_map_.lookup_entry(addr(p));
  }
  // Maps every page of active extent `e` to it (for slabs), with `tag` plus
  // `tag_step` per page after the first. Also re-tags the pages of an
  // extent already mapped so.
  [[nodiscard]] bool map_interior(Extent* e, uint16_t tag = 0, uint16_t tag_step = 0) noexcept;
  // Tags the page-map entry of the first page of active extent `e` (owned
  // by the caller). Any later change of e's boundaries (grow, shrink, free)
  // clears it again.
  void tag_first_page(Extent* e, uint16_t tag) noexcept { page_map_.set_tag(e->base, e, tag); }
  // Lends [base, base + size) of active, interior-mapped extent `parent` to
  // an upper layer that carves it further (a slab region's slabs): a new
  // active extent with every page mapped to it (untagged; map_interior
  // tags them). nullptr when metadata runs out. The chunk layer never frees
  // or merges a lent extent.
  [[nodiscard]] Extent* lend(Extent* parent, uintptr_t base, size_t size) noexcept;
  // Ends a lend: the pages map to `parent` again, untagged, and `sub` is recycled.
  void unlend(Extent* parent, Extent* sub) noexcept;

  // Purges extents that have been dirty for at least the decay time.
  size_t decay() noexcept;
  // What the layer's own calls do: a step of at most decay_step_bytes when
  // one is due. True while old extents remain for the next step.
  bool decay_step() noexcept {
    maybe_decay();
    return backlog_.load(std::memory_order_relaxed);
  }

  // The background thread's doorbell. arm(n): raise the signal once the
  // dirty bytes, plus what upper layers noted as retained for decay (empty
  // slabs), reach n (a free counts both; a note, made under the noter's own
  // lock, only the notes). take_signal() reads and clears it (slow paths poll it
  // where they hold no lock). Disarmed (0) by default and after it fires,
  // so an armed-and-fired layer costs its callers one relaxed load.
  void arm(size_t bytes) noexcept;
  void note_retained(size_t bytes) noexcept;
  // Whether freeing `bytes` more would ring the doorbell now (armed, and
  // the dirty and noted bytes would reach the mark). Takes the lock when armed.
  bool would_ring(size_t bytes) noexcept;
  bool take_signal() noexcept {
    return signal_.load(std::memory_order_relaxed) && signal_.exchange(false, std::memory_order_acquire);
  }
  // Purges every dirty extent now. Returns the bytes purged.
  size_t trim() noexcept;

  // Without the lock (counters kept under it): never waits for an
  // allocation.
  ChunkStats stats() const noexcept;
  // Bytes in extents handed to upper layers (ChunkStats::active), one load.
  size_t active_bytes() const noexcept { return stats_.active.load(); }
  // Whether space s is advised as huge pages: the huge space always; the
  // dense space unless set_dense_advice(false) deferred it (the runtime
  // does, until the process holds a few MiB: the dense space's first touch
  // makes a whole huge page resident, a small program's largest cost).
  bool advised_now(Space s) const noexcept {
    return s == Space::kHuge || (s == Space::kDense && dense_advice_.load(std::memory_order_relaxed));
  }
  // Turning it on advises the dense reservations made meanwhile, whole.
  void set_dense_advice(bool on) noexcept;
  uint64_t now_ns() noexcept { return clock_.now_ns(); }
  os::Os& os() noexcept { return os_; }
  MetaAlloc& meta() noexcept { return meta_; }
  const Options& options() const noexcept { return options_; }
  void set_decay_ns(uint64_t ns) noexcept { options_.decay_ns = ns; }

  void prefork() noexcept;
  void postfork_parent() noexcept;
  void postfork_child() noexcept;

 private:
  Extent* new_extent(uintptr_t base, size_t size, ExtentState state, bool committed, Space space,
                     bool remapped) noexcept;
  // Sets e->remapped, keeping remapped_extents_ (lock held).
  void set_remapped(Extent* e, bool remapped) noexcept;
  // Maps [base, base+size) afresh, with the huge-page advice of `space` (no
  // lock needed: the range is ours).
  bool map_fresh(uintptr_t base, size_t size, Space space) noexcept;
  bool map_fresh(const Extent* e) noexcept { return map_fresh(e->base, e->size, e->space); }
  void recycle(Extent* e) noexcept;
  ExtentSet& set_for(ExtentState s, Space space) noexcept {
    return s == ExtentState::kDirty ? dirty_[space_index(space)] : clean_[space_index(space)];
  }
  size_t dirty_bytes() const noexcept {
    size_t n = 0;
    for (const ExtentSet& d : dirty_) n += d.bytes();
    return n;
  }
  // Puts a free extent into its set, merging it with free neighbours of the same state.
  void insert_free(Extent* e, ExtentState state) noexcept;
  // Takes [start, start+size) out of free extent e (already removed from its
  // set); the head and tail pieces go back. Returns e, now covering exactly
  // the piece, or nullptr (e reinserted) if metadata ran out.
  Extent* carve(Extent* e, uintptr_t start, size_t size) noexcept;
  // When no dirty extent holds `size` bytes alone: the `align`ed window of
  // `size` bytes over a run of adjacent free extents (dirty and clean) that
  // covers the most dirty bytes, taken and returned active (stats_.active
  // counted); nullptr when no run around the largest dirty extents holds one.
  Extent* take_dirty_run(size_t size, size_t align, Space space) noexcept;
  // grow() with the lock held; `count` says whether to count at-address hits
  // and refusals.
  GrowResult grow_locked(Extent* e, size_t new_size, bool may_map, bool count, bool clean_only = false) noexcept;
  bool reserve_more(size_t size, size_t align, Space space) noexcept;
  // Maps one reservation of `res` bytes, `hint_align`ed, and adds it clean.
  bool reserve(size_t res, size_t hint_align, Space space) noexcept;
  // Unmaps every free extent (lock held): address space back to the kernel
  // when RLIMIT_AS refuses a reservation. Returns the bytes unmapped.
  size_t unmap_free() noexcept;
  // Where the next reservation is tried: process-wide unless first_hint was given.
  uintptr_t cursor() const noexcept;
  void advance_cursor(uintptr_t to) noexcept;
  void clear_interior(Extent* e) noexcept;
  // Commits the first `commit` bytes of a carved extent; false (and the
  // extent returned) when the kernel refuses.
  bool commit_carved(Extent* e, size_t commit) noexcept;
  // Purges dirty extents at least min_age_ns old (all: 0), oldest first, at
  // most `budget` bytes (an extent larger than what is left of it is cut).
  struct DecayResult {
    size_t bytes;
    bool more;  // stopped by the budget with old extents left
  };
  // `may_wait`: false on the free path (see ForkGate::try_enter).
  DecayResult purge_dirty(uint64_t min_age_ns, size_t budget = SIZE_MAX, bool may_wait = true) noexcept;
  // Purges extents already marked kPurging and out of every set (at most
  // kPurgeBatch), then puts them back clean (or dirty, if the kernel refused).
  struct PurgeResult {
    size_t bytes;
    bool complete;
  };
  PurgeResult purge_marked(Extent* const* batch, size_t n) noexcept;
  void maybe_decay() noexcept;
  // The page map's pass (PageMap::release_idle, lock taken): gives back its
  // pages that hold only zeroes -- with `aged`, only those no store touched
  // since the pass before -- looking at `budget` of them at most. True while
  // some were left for the next step.
  bool release_map(size_t budget, bool aged) noexcept;
  // A pass when one is due: once per quarter of the decay time, and no more
  // than once a second (a page written again soon after is not faulted in
  // over and over, also with decay_ms:0), or a step right after one that
  // stopped at its budget.
  void maybe_release_map(uint64_t now, size_t budget) noexcept;
  static constexpr uint64_t kMapPassMinNs = 1'000'000'000;
  // A step's budget inside an allocator call: 64 pages looked at (at most
  // 256 KiB read), given back in at most four system calls.
  static constexpr size_t kMapStepChunks = 64;
  // After `dirty` bytes are known retained: rings the doorbell if armed.
  void ring_if_due(size_t dirty) noexcept;

  // The sets' buckets (ExtentSet), 9 KiB that the constructor leaves as
  // they are in the runtime's static storage and that nothing reads before
  // a set holds an extent. Five sets' heads come first, so that the
  // members below, which start-up writes, lie together on a page or two
  // with the page map's own first ones; the plain space's clean set's lie
  // between the two (plain_clean_heads_), as start-up puts the rest of its
  // first reservation there: on one of the pages start-up writes anyway.
  Extent* set_heads_[2 * kSpaces - 1][ExtentSet::kBuckets];
  os::Os& os_;
  Clock& clock_;
  Options options_;
  MetaAlloc meta_;

  mutable Mutex lock_;
  ExtentSet dirty_[kSpaces];  // [space_index(space)]
  ExtentSet clean_[kSpaces];
  Extent* spare_ = nullptr;  // recycled extent structs
  uintptr_t own_cursor_ = 0;  // Options::first_hint given: this layer's own cursor
  uint64_t last_decay_ns_ = 0;
  std::atomic<uint64_t> last_map_pass_ns_{0};
  std::atomic<bool> map_backlog_{false};
  // The last step from a call stopped at its budget: the next call steps
  // again without waiting for the next quarter of the decay time.
  std::atomic<bool> backlog_{false};
  size_t remapped_extents_ = 0;  // extents with e->remapped (lock held to change)
  std::atomic<size_t> armed_at_{0};
  std::atomic<size_t> noted_{0};
  std::atomic<bool> signal_{false};
  std::atomic<bool> dense_advice_{true};
  // The dense space's reservations (lock_), for set_dense_advice(true).
  static constexpr size_t kDenseReservations = 16;
  uintptr_t dense_base_[kDenseReservations] = {};
  size_t dense_size_[kDenseReservations] = {};
  size_t ndense_ = 0;
  // ChunkStats's figures, kept under the lock and read without it
  // (stats()); the free bytes and extents are the sets' own counters.
  struct Counters {
    LockedCounter<size_t> reserved;
    LockedCounter<size_t> active;
    LockedCounter<size_t> purging;
    LockedCounter<size_t> reservations;
    LockedCounter<uint64_t> allocs;
    LockedCounter<uint64_t> frees;
    LockedCounter<uint64_t> alloc_at_hits;
    LockedCounter<uint64_t> alloc_at_refusals;
    LockedCounter<uint64_t> purged_bytes;
    LockedCounter<uint64_t> purges;
    LockedCounter<uint64_t> map_released;
  };
  Counters stats_;
  Extent* plain_clean_heads_[ExtentSet::kBuckets];  // see set_heads_
  // Last: its root is 2 MiB of static storage in the runtime, of which a
  // page or two are ever written; the members above, written at start-up,
  // then share pages with the runtime's other members (core/state.h).
  PageMap page_map_;
};

}  // namespace ductile::chunk
