// SPDX-License-Identifier: BSD-2-Clause
// Statistics read: the snapshot of every layer's counters, and heap_info's
// totals derived from it (printed by stats_format.cc).
#include "core/stats.h"

#include "core/state.h"

namespace ductile::core {

const char* growth_name(size_t path) noexcept {
  return path < huge::kGrowthPaths ? kGrowthNames[path] : nullptr;
}

void take_snapshot(StatsSnapshot& s) noexcept {
  Runtime& r = rt();
  s = StatsSnapshot();
  for (size_t c = 0; c < small::kNumSmall; c++) {
    small::BinStats b = r.class_stats(c);
    s.bins[c] = b;
    size_t objs = b.slabs * small::kClasses.objects_per_slab[c];
    s.small.allocated += sub_or_zero(objs, b.free_objects) * small::class_size(c);
    s.small.active += b.slabs * small::kClasses.slab_pages[c] * kPage;
  }
  s.huge_layer = r.huge.stats();
  s.growth = growth::totals();
  s.arena = r.arena.stats();
  s.prefault = r.prefault.stats();
  s.background = r.background.stats();
  s.chunk = r.chunks.stats();
  s.huge.allocated = s.huge_layer.active_bytes;
  s.huge.active = align_up(s.huge_layer.active_bytes, kPage);
  // Medium blocks are the chunk layer's active extents that are neither slab
  // regions nor huge spans (the layers are read one after another: clamp).
  s.medium.active = sub_or_zero(s.chunk.active, s.arena.regions * small::kRegionSize + s.huge_layer.span_bytes);
  s.medium.allocated = s.medium.active;
  s.allocated = s.small.allocated + s.medium.allocated + s.huge.allocated;
  s.active = s.small.active + s.medium.active + s.huge.active;
  s.metadata = r.chunks.meta().bytes_mapped();
  s.mapped = s.chunk.active + s.metadata;
  s.resident = s.active + s.chunk.dirty + s.arena.dirty_pages * kPage + s.metadata;
  s.retained = s.chunk.clean;
  const os::Counters& k = r.os.counters();
  for (size_t i = 0; i < os::kCallKinds; i++) s.calls[i] = k.get(static_cast<os::Call>(i));
  s.purged_bytes = k.purged_bytes.load(std::memory_order_relaxed);
  s.purged_ranges = k.purged_ranges.load(std::memory_order_relaxed);
  if (small::ThreadCache* tc = own_cache()) {
    s.thread_allocated = tc->allocated;
    s.thread_deallocated = tc->deallocated;
  }
}

HeapInfo heap_info(const StatsSnapshot& s) noexcept {
  HeapInfo h;
  size_t empty_slab_bytes = 0;
  for (size_t c = 0; c < small::kNumSmall; c++) {
    h.smblks += s.bins[c].free_objects;
    h.fsmblks += s.bins[c].free_objects * small::class_size(c);
    empty_slab_bytes += s.bins[c].empty_slabs * small::kClasses.slab_pages[c] * kPage;
  }
  const size_t region_free = s.arena.dirty_pages * kPage;
  h.uordblks = s.small.allocated + s.medium.allocated;
  h.fordblks = sub_or_zero(s.small.active, s.small.allocated) + region_free + s.chunk.dirty;
  h.arena = h.uordblks + h.fordblks;
  h.ordblks = s.chunk.dirty_extents;
  h.hblks = static_cast<size_t>(sub_or_zero(s.huge_layer.allocs, s.huge_layer.frees));
  h.hblkhd = s.huge.active;
  h.keepcost = s.chunk.dirty + region_free + empty_slab_bytes;
  return h;
}

}  // namespace ductile::core
