// SPDX-License-Identifier: BSD-2-Clause
// The slab arena's regions: taking them, filing them by their longest free
// run, lending and taking back slabs, stats (giving back: region_purge.cc).
#include "small/region.h"

#include <new>

#include "base/fork_gate.h"
#include "small/region_record.h"

namespace ductile::small {

namespace {

// The first run of n clear bits, or kRegionPages.
size_t find_run(const uint64_t* w, size_t n) {
  for (size_t i = 0; i < kRegionPages;) {
    const size_t start = next_bit(w, i, ~uint64_t{0});
    if (start == kRegionPages) break;
    const size_t end = next_bit(w, start, 0);
    if (end - start >= n) return start;
    i = end;
  }
  return kRegionPages;
}

// The longest run of clear bits.
size_t longest_run(const uint64_t* w) {
  size_t best = 0;
  for (size_t i = 0; i < kRegionPages && kRegionPages - i > best;) {
    const size_t start = next_bit(w, i, ~uint64_t{0});
    if (start == kRegionPages) break;
    const size_t end = next_bit(w, start, 0);
    if (end - start > best) best = end - start;
    i = end;
  }
  return best;
}

// Whether any bit of [first, first + n) is set.
bool any_bit(const uint64_t* w, size_t first, size_t n) {
  const size_t i = next_bit(w, first, 0);
  return i < first + n;
}

}  // namespace

void SlabArena::init(chunk::ChunkLayer* chunks, Prefaulter* prefault, const ArenaOptions& opts) noexcept {
  chunks_ = chunks;
  prefault_ = prefault;
  opts_ = opts;
}

Region* SlabArena::new_region() noexcept {
  // A large arena's regions come from the dense space where there is one:
  // advised already, busy from the start.
  const bool dense = held_ >= opts_.dense_after && opts_.thp && opts_.busy_space != chunk::Space::kPlain &&
                     chunks_->os().thp_mode() == os::ThpMode::kMadvise;
  if (dense) chunks_->set_dense_advice(true);  // a large arena (the runtime defers the space's advice)
  chunk::Allocation a =
      chunks_->alloc(kRegionSize, kRegionSize, SIZE_MAX, dense ? opts_.busy_space : chunk::Space::kPlain);
  if (a.extent == nullptr) return nullptr;
  if (!chunks_->map_interior(a.extent)) {
    chunks_->free(a.extent);
    return nullptr;
  }
  Region* r = spare_;
  if (r != nullptr) {
    spare_ = r->next;
  } else {
    void* mem = chunks_->meta().alloc(sizeof(Region), alignof(Region));
    if (mem == nullptr) {
      chunks_->free(a.extent);
      return nullptr;
    }
    r = static_cast<Region*>(mem);
  }
  new (r) Region();
  r->extent = a.extent;
  r->base = a.extent->base;
  r->busy = r->advised = dense;
  a.extent->owner = r;
  // Dirty space recycled from the chunk layer may be resident.
  if (!a.zeroed) set_bits(r->dirty, 0, kRegionPages);
  r->next = regions_;
  if (regions_) regions_->prev = r;
  regions_ = r;
  held_++;
  if (r->advised) stats_.advised++;
  if (a.extent->space != chunk::Space::kPlain) stats_.dense++;
  recount(r);
  stats_.search_steps++;
  refile(r);
  empty_regions_++;
  stats_.region_allocs++;
  return r;
}

void SlabArena::unlink(Region* r) noexcept {
  held_--;
  // Its share of the sums goes with it (live and purging are 0 by now).
  if (r->advised) stats_.advised--;
  if (r->extent->space != chunk::Space::kPlain) stats_.dense--;
  stats_.slab_pages -= r->live;
  stats_.purging -= r->purging;
  stats_.dirty_pages -= r->free_dirty;
  if (r->prev) r->prev->next = r->next;
  else regions_ = r->next;
  if (r->next) r->next->prev = r->prev;
  r->prev = r->next = nullptr;
  unfile(r);
  set_sparse(r, false, 0);
  if (r->live == 0) empty_regions_--;
}

void SlabArena::recount(Region* r) noexcept {
  uint32_t n = 0;
  for (size_t i = 0; i < kRegionWords; i++) n += static_cast<uint32_t>(__builtin_popcountll(r->dirty[i] & ~r->used[i]));
  if (n > r->free_dirty) stats_.dirty_pages += n - r->free_dirty;
  else stats_.dirty_pages -= r->free_dirty - n;
  r->free_dirty = n;
}

void SlabArena::unfile(Region* r) noexcept {
  if (!r->filed) return;
  const size_t b = r->longest;
  if (r->fit_prev) r->fit_prev->fit_next = r->fit_next;
  else fit_[b] = r->fit_next;
  if (r->fit_next) r->fit_next->fit_prev = r->fit_prev;
  if (fit_[b] == nullptr) fit_nonempty_[b / 64] &= ~(uint64_t{1} << (b % 64));
  r->fit_prev = r->fit_next = nullptr;
  r->filed = false;
}

void SlabArena::refile(Region* r) noexcept {
  const uint32_t longest = static_cast<uint32_t>(longest_run(r->used));
  if (r->filed && longest == r->longest) return;
  unfile(r);
  r->longest = longest;
  if (longest == 0) return;  // full: nothing to place here
  r->fit_prev = nullptr;
  r->fit_next = fit_[longest];
  if (r->fit_next) r->fit_next->fit_prev = r;
  fit_[longest] = r;
  fit_nonempty_[longest / 64] |= uint64_t{1} << (longest % 64);
  r->filed = true;
}

Region* SlabArena::fitting(size_t pages) const noexcept {
  for (size_t w = pages / 64; w < kFitWords; w++) {
    uint64_t bits = fit_nonempty_[w];
    if (w == pages / 64) bits &= ~uint64_t{0} << (pages % 64);
    if (bits) return fit_[w * 64 + static_cast<size_t>(__builtin_ctzll(bits))];
  }
  return nullptr;
}

void SlabArena::set_sparse(Region* r, bool sparse, uint64_t now) noexcept {
  if (r->sparse == sparse) return;
  r->sparse = sparse;
  if (sparse) {
    r->sparse_since = now;
    r->sparse_prev = nullptr;
    r->sparse_next = sparse_;
    if (sparse_) sparse_->sparse_prev = r;
    sparse_ = r;
    return;
  }
  if (r->sparse_prev) r->sparse_prev->sparse_next = r->sparse_next;
  else sparse_ = r->sparse_next;
  if (r->sparse_next) r->sparse_next->sparse_prev = r->sparse_prev;
  r->sparse_prev = r->sparse_next = nullptr;
}

bool SlabArena::surplus(const Region* r) const noexcept {
  return r->live == 0 && r->purging == 0 && empty_regions_ > opts_.retain_regions;
}

Lent SlabArena::alloc(size_t pages) noexcept {
  if (pages == 0 || pages > kRegionPages) return {};
  uintptr_t advise[kAdviseAtOnce];
  size_t nadvise = 0;
  Lent out;
  {
    LockGuard g(lock_);
    // The region whose longest free run is the shortest that holds the
    // slab: the fullest regions fill first, and an empty one is taken last
    // (it may go back whole). One bitmap scan, however many regions are held.
    Region* r = fitting(pages);
    if (r == nullptr && (r = new_region()) == nullptr) return {};
    stats_.search_steps++;
    const size_t at = find_run(r->used, pages);
    DUCTILE_ASSERT(at != kRegionPages);
    if (r->ndecommitted != 0 && any_bit(r->decommitted, at, pages)) {
      // Purged under strict overcommit: charge it again first (one mprotect
      // over the run; committing committed pages again is harmless).
      if (!chunks_->os().commit(ptr(r->base + at * kPage), pages * kPage)) return {};
      r->ndecommitted -= static_cast<uint32_t>(count_bits(r->decommitted, at, pages));
      clear_bits(r->decommitted, at, pages);
    }
    chunk::Extent* e = chunks_->lend(r->extent, r->base + at * kPage, pages * kPage);
    if (e == nullptr) return {};
    set_bits(r->used, at, pages);
    refile(r);
    clear_bits(r->dirty, at, pages);
    if (r->live == 0) empty_regions_--;
    r->live += static_cast<uint32_t>(pages);
    stats_.slab_pages += pages;
    if (r->live >= kAlmostEmpty) set_sparse(r, false, 0);  // in use again
    if (at + pages > r->high) r->high = static_cast<uint32_t>(at + pages);
    stats_.lends++;
    if (!r->busy && r->high * kPage > opts_.busy_prefix) r->busy = true;
    if (opts_.thp && held_ >= opts_.advise_after && r->busy && !r->advised) {
      auto advise_region = [&](Region* q) {
        q->advised = true;
        stats_.advised++;
        advise[nadvise++] = q->base;
      };
      if (advised_any_) {
        advise_region(r);
      } else {
        // Large enough now, the first time: every busy region left
        // unadvised while the arena was small (a few), this one among them.
        for (Region* q = regions_; q != nullptr && nadvise < kAdviseAtOnce; q = q->next)
          if (q->busy && !q->advised) advise_region(q);
        advised_any_ = true;
      }
    }
    if (r->busy && prefault_ != nullptr && prefault_->enabled()) {
      size_t target = r->high + opts_.prefault_ahead / kPage;
      if (target > kRegionPages) target = kRegionPages;
      size_t from = r->ahead > r->high ? r->ahead : r->high;
      if (target > from) {
        prefault_->request(ptr(r->base + from * kPage), (target - from) * kPage);
        set_bits(r->dirty, from, target - from);
        stats_.prefaults++;
      }
      if (target > r->ahead) r->ahead = static_cast<uint32_t>(target);
    }
    recount(r);
    out = {e, r};
  }
  // Outside the lock; advising twice, or a region given back meanwhile, is harmless.
  // The advice splits the mapping the region lies in (unless its neighbours
  // are advised too): skipped near the mapping limit.
  for (size_t i = 0; i < nadvise; i++) (void)chunks_->os().advise_huge_part(ptr(advise[i]), kRegionSize);
  return out;
}

void SlabArena::free(const Lent* v, size_t n, uint64_t idle_since) noexcept {
  Job job;
  job.idle_since = idle_since;
  const uint64_t now = chunks_->now_ns();
  // A job's pieces and regions are in flight until it has run (fork_gate.h).
  // A caller may hold a bin's lock here: while a fork is in progress, the
  // slabs only go back, and purges and releases wait for a later call.
  const bool gated = ForkGate::try_enter();
  {
    LockGuard g(lock_);
    for (size_t k = 0; k < n; k++) {
      Region* r = v[k].region;
      chunk::Extent* e = v[k].extent;
      const size_t first = (e->base - r->base) / kPage;
      const size_t np = e->size / kPage;
      chunks_->unlend(r->extent, e);
      clear_bits(r->used, first, np);
      set_bits(r->dirty, first, np);
      r->live -= static_cast<uint32_t>(np);
      stats_.slab_pages -= np;
      recount(r);
      stats_.returns++;
      if (r->live == 0) empty_regions_++;
      if (!gated) continue;
      if (surplus(r) && job.nrelease < Job::kMax) {
        unlink(r);
        job.release[job.nrelease++] = r;
        continue;
      }
      if (!r->advised) {
        // Small pages anyway: the slab's pages go now, as a lone slab's would.
        if (!job.full()) {
          set_bits(r->used, first, np);
          r->purging++;
          stats_.purging++;
          recount(r);
          job.piece[job.n++] = {r, static_cast<uint32_t>(first), static_cast<uint32_t>(np)};
        }
      } else if (r->live != 0 && r->live < kAlmostEmpty) {
        // (A region already on the list keeps its time.)
        set_sparse(r, true, idle_since < now ? idle_since : now);
      }
      refile(r);
    }
    if (gated) decay_locked(now, job, step_pages());
  }
  if (!gated) return;
  (void)run(job);
  ForkGate::leave();
}

ArenaStats SlabArena::walk_stats() const noexcept {
  ArenaStats s = stats();
  LockGuard g(lock_);
  s.regions = s.advised = s.dense = s.slab_pages = s.purging = s.dirty_pages = 0;
  for (const Region* r = regions_; r != nullptr; r = r->next) {
    s.regions++;
    if (r->advised) s.advised++;
    if (r->extent->space != chunk::Space::kPlain) s.dense++;
    s.slab_pages += r->live;
    s.purging += r->purging;
    for (size_t i = 0; i < kRegionWords; i++)
      s.dirty_pages += static_cast<size_t>(__builtin_popcountll(r->dirty[i] & ~r->used[i]));
  }
  return s;
}

ArenaStats SlabArena::stats() const noexcept {
  // No lock, no walk: every figure is a counter kept under the lock.
  ArenaStats s;
  s.regions = held_;
  s.advised = stats_.advised;
  s.dense = stats_.dense;
  s.slab_pages = stats_.slab_pages;
  s.dirty_pages = stats_.dirty_pages;
  s.region_allocs = stats_.region_allocs;
  s.region_releases = stats_.region_releases;
  s.lends = stats_.lends;
  s.returns = stats_.returns;
  s.purged_pages = stats_.purged_pages;
  s.prefaults = stats_.prefaults;
  s.search_steps = stats_.search_steps;
  s.purging = stats_.purging;
  return s;
}

}  // namespace ductile::small
