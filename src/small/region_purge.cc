// SPDX-License-Identifier: BSD-2-Clause
// What the slab arena gives back: free dirty pages reserved for a purge job,
// decay of almost-empty regions, running a job (purges, whole regions), trim.
#include "small/region.h"

#include "base/fork_gate.h"
#include "small/region_record.h"

namespace ductile::small {

namespace {

size_t popcount(const uint64_t* w) {
  size_t n = 0;
  for (size_t i = 0; i < kRegionWords; i++) n += static_cast<size_t>(__builtin_popcountll(w[i]));
  return n;
}

}  // namespace

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

}  // namespace ductile::small
