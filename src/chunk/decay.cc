// SPDX-License-Identifier: BSD-2-Clause
// What the layer gives back: the doorbell of retained memory, purge batches,
// decay by age, trim, and the release of the mapping budget.
#include "chunk/chunk.h"

#include <algorithm>
#include <cstring>

#include "base/fork_gate.h"

namespace ductile::chunk {

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
        const os::Decommit d = os_.decommit(ptr(batch[i]->base), batch[i]->size, advised_now(batch[i]->space));
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

}  // namespace ductile::chunk
