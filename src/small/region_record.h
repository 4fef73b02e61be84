// SPDX-License-Identifier: BSD-2-Clause
#include "small/region.h"

#include <new>

#include "base/fork_gate.h"

namespace ductile::small {

struct Region {
  chunk::Extent* extent = nullptr;  // the chunk layer's 2 MiB extent
  uintptr_t base = 0;
  uint64_t used[kRegionWords] = {};   // lent to a slab, or reserved for a purge in flight
  uint64_t dirty[kRegionWords] = {};  // free, and maybe resident (written or prefaulted)
  // Strict overcommit: free pages purged by decommitting (PROT_NONE), to be
  // committed again before they are lent.
  uint64_t decommitted[kRegionWords] = {};
  uint32_t ndecommitted = 0;  // set bits of `decommitted`
  uint32_t live = 0;     // pages lent to slabs
  uint32_t high = 0;     // the carve point: no page at or above it was ever lent
  uint32_t ahead = 0;    // pages below this were queued for the prefault helper
  uint32_t purging = 0;  // ranges of it in purge jobs now
  uint32_t free_dirty = 0;  // pages free and dirty (dirty & ~used), as the arena's dirty_pages counts them
  uint64_t sparse_since = 0;  // when an advised region fell under 1/8 in use (valid while `sparse`)
  // The longest run of free (not used) pages: the region's place in the
  // arena's fit lists (SlabArena::fit_), kept exact at every change of `used`.
  uint32_t longest = 0;
  bool filed = false;    // on the fit list of `longest`
  bool sparse = false;   // on the arena's list of almost-empty advised regions
  bool busy = false;     // carved past the prefix
  bool advised = false;  // advised as huge pages
  Region* prev = nullptr;  // every region held (no order)
  Region* next = nullptr;
  Region* fit_prev = nullptr;  // the fit list of `longest`
  Region* fit_next = nullptr;
  Region* sparse_prev = nullptr;
  Region* sparse_next = nullptr;
};

namespace {

constexpr uint32_t kAlmostEmpty = kRegionPages / 8;

void set_bits(uint64_t* w, size_t first, size_t n) {
  for (size_t i = first; i < first + n; i++) w[i / 64] |= uint64_t{1} << (i % 64);
}
void clear_bits(uint64_t* w, size_t first, size_t n) {
  for (size_t i = first; i < first + n; i++) w[i / 64] &= ~(uint64_t{1} << (i % 64));
}
size_t count_bits(const uint64_t* w, size_t first, size_t n) {
  size_t c = 0;
  for (size_t i = first; i < first + n; i++) c += (w[i / 64] >> (i % 64)) & 1;
  return c;
}

// The index of the first set bit at or after i in the bitmap `w` (each word
// xor-ed with `flip`: ~0 finds clear bits), or kRegionPages.
size_t next_bit(const uint64_t* w, size_t i, uint64_t flip) {
  if (i >= kRegionPages) return kRegionPages;
  size_t k = i / 64;
  uint64_t word = (w[k] ^ flip) & (~uint64_t{0} << (i % 64));
  while (word == 0) {
    if (++k == kRegionWords) return kRegionPages;
    word = w[k] ^ flip;
  }
  return k * 64 + static_cast<size_t>(__builtin_ctzll(word));
}

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

size_t popcount(const uint64_t* w) {
  size_t n = 0;
  for (size_t i = 0; i < kRegionWords; i++) n += static_cast<size_t>(__builtin_popcountll(w[i]));
  return n;
}

}  // namespace

struct SlabArena::Job {
  static constexpr size_t kMax = 64;
  struct Piece {
    Region* region;
    uint32_t first;
    uint32_t n;
  };
  Piece piece[kMax];
  size_t n = 0;
  // Regions already unlinked, to be purged whole and given back.
  Region* release[kMax];
  size_t nrelease = 0;
  bool trim = false;  // give back whole-free regions regardless of retention
  uint64_t idle_since = chunk::ChunkLayer::kNow;  // when the released regions' pages were last used

  bool full() const { return n == kMax; }
};

void SlabArena::init(chunk::ChunkLayer* chunks, Prefaulter* prefault, const ArenaOptions& opts) noexcept {
  chunks_ = chunks;
  prefault_ = prefault;
  opts_ = opts;
}

Region* SlabArena::new_region() noexcept {
  // A large arena's regions come from the dense space where there is one:
  // advised already, busy from the start.
  const bool dense = held_ >= opts_.dense_after && opts_.thp && opts_.busy_space != chunk::Space::kPlain;
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
  uintptr_t advise = 0;
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
    if (!r->busy && r->high * kPage > opts_.busy_prefix) {
      r->busy = true;
      if (opts_.thp) {
        r->advised = true;
        stats_.advised++;
        advise = r->base;
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
  if (advise != 0) (void)chunks_->os().advise_huge_part(ptr(advise), kRegionSize);
  return out;
}

void SlabArena::reserve_dirty(Region* r, Job& job) noexcept {
  uint64_t free_dirty[kRegionWords];
  for (size_t w = 0; w < kRegionWords; w++) free_dirty[w] = r->dirty[w] & ~r->used[w];
  for (size_t i = 0; i < kRegionPages && !job.full();) {
    const size_t start = next_bit(free_dirty, i, 0);
    if (start == kRegionPages) break;
    const size_t end = next_bit(free_dirty, start, ~uint64_t{0});
    set_bits(r->used, start, end - start);
    refile(r);
    r->purging++;
    stats_.purging++;
    job.piece[job.n++] = {r, static_cast<uint32_t>(start), static_cast<uint32_t>(end - start)};
    i = end;
  }
  recount(r);
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

bool SlabArena::decay(size_t max_pages) noexcept {
  const InFlight gate;  // a job's pieces and regions are in flight until it has run
  for (;;) {
    Job job;
    bool more;
    {
      LockGuard g(lock_);
      decay_locked(chunks_->now_ns(), job, max_pages);
      more = backlog_;
    }
    (void)run(job);
    if (!more || max_pages != SIZE_MAX) return more;
  }
}

void SlabArena::decay_locked(uint64_t now, Job& job, size_t max_pages) noexcept {
  const uint64_t decay = chunks_->options().decay_ns;
  if (!backlog_ && now - last_decay_ < decay / 4) return;
  last_decay_ = now;
  backlog_ = false;
  size_t pages = 0;
  // Advised regions that have stayed hardly used (under 1/8 of their pages)
  // for the decay time: their free pages now matter more than their huge
  // pages. (A region that empties and refills within the decay time --
  // threads that come and go -- keeps them.)
  // Only those on the sparse list are looked at, not every region held.
  for (Region* r = sparse_; r != nullptr;) {
    Region* next = r->sparse_next;
    if (r->live == 0 || r->live >= kAlmostEmpty) {
      set_sparse(r, false, 0);
    } else if (now - r->sparse_since >= decay) {
      // A region's free pages are at most a region: the budget holds when it
      // is at least that (it is one huge page by default).
      if (job.full() || (pages != 0 && pages + (kRegionPages - r->live) > max_pages)) {
        backlog_ = true;
        break;
      }
      const size_t before = job.n;
      reserve_dirty(r, job);
      for (size_t i = before; i < job.n; i++) pages += job.piece[i].n;
      set_sparse(r, false, 0);
    }
    r = next;
  }
}

size_t SlabArena::run(Job& job) noexcept {
  size_t bytes = 0;
  if (job.n != 0) {
    os::Range ranges[Job::kMax];
    for (size_t i = 0; i < job.n; i++)
      ranges[i] = {ptr(job.piece[i].region->base + job.piece[i].first * kPage), job.piece[i].n * kPage};
    // Under strict overcommit the pages are decommitted, so that their
    // commit charge goes too (alloc commits them again).
    const bool strict = chunks_->os().features().strict_overcommit;
    size_t done = 0;
    // (Near the mapping limit a decommit only purges: the run stays committed.)
    bool kept[Job::kMax] = {};
    if (strict) {
      for (; done < job.n; done++) {
        const os::Decommit d = chunks_->os().decommit(ranges[done].addr, ranges[done].size);
        if (d == os::Decommit::kFailed) break;
        kept[done] = d == os::Decommit::kPurged;
      }
    } else {
      done = chunks_->os().purge(ranges, job.n);
    }
    LockGuard g(lock_);
    for (size_t i = 0; i < job.n; i++) {
      Region* r = job.piece[i].region;
      clear_bits(r->used, job.piece[i].first, job.piece[i].n);
      refile(r);
      if (i < done) {
        clear_bits(r->dirty, job.piece[i].first, job.piece[i].n);
        if (strict && !kept[i]) {
          r->ndecommitted += static_cast<uint32_t>(job.piece[i].n - count_bits(r->decommitted, job.piece[i].first, job.piece[i].n));
          set_bits(r->decommitted, job.piece[i].first, job.piece[i].n);
        }
        stats_.purged_pages += job.piece[i].n;
        bytes += job.piece[i].n * kPage;
      } else {
        set_bits(r->dirty, job.piece[i].first, job.piece[i].n);
      }
      recount(r);
      r->purging--;
      stats_.purging--;
      if (r->purging == 0 && r->live == 0 && (job.trim || surplus(r)) && job.nrelease < Job::kMax) {
        unlink(r);
        job.release[job.nrelease++] = r;
      }
    }
  }
  if (job.nrelease != 0) {
    chunk::Extent* ext[Job::kMax];
    for (size_t i = 0; i < job.nrelease; i++) {
      ext[i] = job.release[i]->extent;
      ext[i]->owner = nullptr;
      if (job.trim) bytes += popcount(job.release[i]->dirty) * kPage;
    }
    // A region with decommitted pages goes back purged whole (decommitted):
    // the chunk layer takes an extent as committed or not as a whole.
    bool decommitted = false;
    for (size_t i = 0; i < job.nrelease; i++) decommitted |= job.release[i]->ndecommitted != 0;
    if (job.trim || decommitted) {
      // Purged whole now (the chunk layer batches it), kept as zeroed space.
      chunks_->release(ext, job.nrelease);
    } else {
      // Back to the chunk layer whole, as a dirty extent: the next region (or
      // anything else) takes it without faulting its pages in again, and
      // decay purges it -- as one range, the whole huge page -- if nothing
      // does within the decay time. (A thread's exit used to purge them at
      // once, and the next generation of threads faulted them all in again.)
      for (size_t i = 0; i < job.nrelease; i++) {
        const bool dirty = popcount(job.release[i]->dirty) != 0;
        chunks_->free(ext[i], dirty ? SIZE_MAX : 0, job.idle_since);
      }
    }
    LockGuard g(lock_);
    for (size_t i = 0; i < job.nrelease; i++) {
      job.release[i]->next = spare_;
      spare_ = job.release[i];
      stats_.region_releases++;
    }
  }
  job.n = job.nrelease = 0;
  return bytes;
}

size_t SlabArena::trim() noexcept {
  const InFlight gate;
  size_t bytes = 0;
  for (;;) {
    Job job;
    job.trim = true;
    {
      LockGuard g(lock_);
      for (Region* r = regions_; r != nullptr && !job.full() && job.nrelease < Job::kMax;) {
        Region* next = r->next;
        if (r->live == 0 && r->purging == 0) {
          unlink(r);
          job.release[job.nrelease++] = r;
        } else {
          reserve_dirty(r, job);
        }
        r = next;
      }
    }
    const bool more = job.full() || job.nrelease == Job::kMax;
    const size_t got = run(job);
    bytes += got;
    if (!more || got == 0) return bytes;
  }
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
