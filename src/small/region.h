/* SPDX-License-Identifier: BSD-2-Clause */
// Slab regions: small objects' slabs packed into 2 MiB-aligned regions, so
// that memory full of small objects can sit on transparent huge pages.
//
// The arena takes whole 2 MiB regions (one huge page each) from the chunk
// layer and lends slabs out of them, from the region whose longest free run
// is the shortest that holds the slab (regions are filed by it, so this is
// one bitmap scan), so slabs crowd into the fullest regions. A region starts on small pages: one that has
// proven busy -- it has carved past a first prefix (1 MiB) -- is advised as
// huge pages (khugepaged collapses it) once the arena holds a few regions
// (ArenaOptions::advise_after); a small program that never gets that far
// pays nothing for huge pages. An arena that already holds several
// regions (ArenaOptions::dense_after) takes its next ones from the chunk
// layer's dense space where there is one (ArenaOptions::busy_space),
// advised before their first touch, so each is one huge-page fault instead
// of 512 small ones (a region advised after its prefix keeps faulting small
// pages until khugepaged collapses it), and no region's advice splits a
// mapping.
//
// Memory goes back in whole huge pages where possible: a slab returned from
// an advised region keeps its pages (purging a few small pages would break
// the huge page up), and a region whose slabs are all gone goes back to the
// chunk layer whole, dirty, where decay purges it as one range (trim: now).
// Only when an advised region has stayed almost empty (below 1/8 of its
// pages in use) for the decay time are its free pages purged one run at a
// time; trim purges every free page. A region that was never advised is
// purged slab by slab, as a plain slab would be.
//
// With a prefault helper, carving in a busy region queues the next stretch
// beyond its carve point to be faulted in ahead of the owner.
#pragma once

#include <cstddef>
#include <cstdint>

#include "base/counter.h"
#include "base/lock.h"
#include "chunk/chunk.h"
#include "small/prefaulter.h"

namespace ductile::small {

inline constexpr size_t kRegionSize = kHugePage;
inline constexpr size_t kRegionPages = kRegionSize / kPage;
inline constexpr size_t kRegionWords = kRegionPages / 64;

struct ArenaOptions {
  // A region that has carved past this many bytes is busy: advised as huge
  // pages, and prefaulted ahead if there is a helper.
  size_t busy_prefix = size_t{1} << 20;
  bool thp = true;  // advise busy regions
  // Busy regions are advised only once the arena holds this many regions
  // (8 MiB); then every busy region is. khugepaged collapses an advised
  // region whole, free pages and all, so a small program's partly used
  // last region would cost up to 2 MiB (a program with 2 MB of small
  // objects peaked at 6.6 MB instead of 4.6 MB).
  size_t advise_after = 4;
  // Where the regions of a large arena come from: the chunk layer's dense
  // space (already advised as huge pages) where the kernel's THP mode is
  // madvise and `thp` holds; otherwise the plain space, each region advised
  // on its own once busy.
  chunk::Space busy_space = chunk::Space::kPlain;
  // A large arena: one that holds this many regions (128 MiB). A region
  // from the dense space is resident whole from its first touch, where one
  // in plain space is resident as far as it is used: the arena's last
  // region, partly used, costs up to 2 MiB more in the dense space, which
  // from here on is at most 1/64 of the arena. (From 16 regions on, a
  // million 72-byte objects cost 2.8 % over their class instead of 0.7 %.)
  size_t dense_after = 64;
  // How far ahead of a busy region's carve point the helper faults pages in.
  size_t prefault_ahead = size_t{256} << 10;
  // Whole-free regions kept, unpurged, for the next slab (hysteresis).
  size_t retain_regions = 1;
};

struct ArenaStats {
  size_t regions = 0;          // regions held
  size_t advised = 0;          // of which advised as huge pages (or in the dense space)
  size_t dense = 0;            // of which taken from the dense space
  size_t slab_pages = 0;       // pages lent to slabs
  size_t dirty_pages = 0;      // free pages of held regions that may be resident
  uint64_t region_allocs = 0;  // regions taken from the chunk layer
  uint64_t region_releases = 0;  // regions given back whole
  uint64_t lends = 0;          // slabs lent
  uint64_t returns = 0;        // slabs returned
  uint64_t purged_pages = 0;   // free pages purged inside held regions
  uint64_t prefaults = 0;      // stretches queued for the helper
  // Regions looked at to place a slab or to file a new region: the work of
  // finding room, which must not grow with the number of regions held.
  uint64_t search_steps = 0;
  size_t purging = 0;          // stretches of held regions in purge jobs now
};

struct Region;

// A slab's pages, as the arena lent them.
struct Lent {
  chunk::Extent* extent = nullptr;  // nullptr: out of memory
  Region* region = nullptr;
};

class SlabArena {
 public:
  SlabArena() = default;
  SlabArena(const SlabArena&) = delete;
  SlabArena& operator=(const SlabArena&) = delete;

  void init(chunk::ChunkLayer* chunks, Prefaulter* prefault, const ArenaOptions& opts) noexcept;
  chunk::ChunkLayer& chunks() noexcept { return *chunks_; }

  // `pages` pages (at most a region) as an active extent with every page
  // mapped to it; the caller sets its kind and owner. Contents undefined.
  Lent alloc(size_t pages) noexcept;
  // Takes back n slabs no longer in use; `idle_since` is when they were last
  // used, for the decay of the regions they leave (almost) empty.
  void free(const Lent* v, size_t n, uint64_t idle_since = chunk::ChunkLayer::kNow) noexcept;
  // Purges every free page of every region and gives back whole-free regions.
  // Returns the bytes purged.
  size_t trim() noexcept;
  // Purges the free pages of advised regions that have stayed almost empty
  // for the decay time: all of them (the background thread), or at most
  // `max_pages` (a step from an allocator call). Frees take a step on their way.
  // True when a bounded step left work due for the next one.
  bool decay(size_t max_pages = SIZE_MAX) noexcept;

  // The most pages a decay step inside an allocator call purges.
  size_t step_pages() const noexcept { return chunks_->options().decay_step_bytes / kPage; }

  // Without the lock (counters kept under it): O(1) however many regions
  // are held, and never waits for a slab's lending or return.
  ArenaStats stats() const noexcept;
  // The same figures counted region by region under the lock: what the
  // counters must always equal (tests).
  ArenaStats walk_stats() const noexcept;
  void prefork() noexcept { lock_.lock(); }
  void postfork_parent() noexcept { lock_.unlock(); }
  void postfork_child() noexcept { lock_.reinit_after_fork(); }

 private:
  struct Job;  // pages reserved for purging outside the lock
  Region* new_region() noexcept;
  void unlink(Region* r) noexcept;
  // Puts r on the fit list of its longest free run (recomputed), or none when full.
  void refile(Region* r) noexcept;
  void unfile(Region* r) noexcept;
  // The region on the first non-empty fit list of at least `pages`, or nullptr.
  Region* fitting(size_t pages) const noexcept;
  // Puts r on (or takes it off) the list of almost-empty advised regions.
  void set_sparse(Region* r, bool sparse, uint64_t now) noexcept;
  // Marks free dirty runs of r as reserved and appends them to `job`.
  void reserve_dirty(Region* r, Job& job) noexcept;
  // Purges a job's ranges, then releases the reservations (and whole regions).
  size_t run(Job& job) noexcept;
  // Purges advised regions that have stayed almost empty for the decay time
  // (checked at most four times per decay time).
  // At most max_pages pages (at least one region's); a step stopped by it
  // leaves a backlog that the next call takes without waiting.
  void decay_locked(uint64_t now, Job& job, size_t max_pages) noexcept;
  // Whether a region with no slabs left should go back to the chunk layer.
  bool surplus(const Region* r) const noexcept;
  // After r's used or dirty pages changed: its free dirty pages counted
  // again, and the arena's dirty_pages moved by the difference.
  void recount(Region* r) noexcept;

  chunk::ChunkLayer* chunks_ = nullptr;
  Prefaulter* prefault_ = nullptr;
  ArenaOptions opts_;
  mutable Mutex lock_;
  Region* regions_ = nullptr;  // every region held
  // Regions by their longest free run (1..kRegionPages pages), with a bitmap
  // of the non-empty lists: placing a slab is one bitmap scan, however many
  // regions are held. (A walk of every region from the lowest address made
  // growing a heap of small objects quadratic.)
  static constexpr size_t kFitWords = (kRegionPages + 1 + 63) / 64;
  Region* fit_[kRegionPages + 1] = {};
  uint64_t fit_nonempty_[kFitWords] = {};
  Region* sparse_ = nullptr;   // almost-empty advised regions (decay looks only here)
  Region* spare_ = nullptr;    // recycled records
  size_t empty_regions_ = 0;   // held regions with no slab
  uint64_t last_decay_ = 0;
  bool backlog_ = false;  // the last decay step stopped at its budget
  // Whether the arena has advised a region yet: the first time, the busy
  // regions of the small arena before are advised together.
  bool advised_any_ = false;
  static constexpr size_t kAdviseAtOnce = 8;
  LockedCounter<size_t> held_;  // regions held (the length of regions_)
  // ArenaStats's figures, kept under the lock and read without it
  // (stats()): the events, and the sums over the regions held, changed
  // where a region's pages change hands.
  struct Counters {
    LockedCounter<size_t> advised;
    LockedCounter<size_t> dense;
    LockedCounter<size_t> slab_pages;   // the regions' live pages
    LockedCounter<size_t> dirty_pages;  // their free_dirty pages (recount)
    LockedCounter<size_t> purging;
    LockedCounter<uint64_t> region_allocs;
    LockedCounter<uint64_t> region_releases;
    LockedCounter<uint64_t> lends;
    LockedCounter<uint64_t> returns;
    LockedCounter<uint64_t> purged_pages;
    LockedCounter<uint64_t> prefaults;
    LockedCounter<uint64_t> search_steps;
  };
  Counters stats_;
};

}  // namespace ductile::small
