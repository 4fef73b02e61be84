/* SPDX-License-Identifier: BSD-2-Clause */
// What mallctl's name tree (mallctl.cc) and its leaves (mallctl_leaves.cc)
// share: the request, the nodes, jemalloc's read/write rules, the leaves.
#pragma once

#include <errno.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "os/os.h"

namespace ductile::ctl {

struct Req {
  void* oldp;
  size_t* oldlenp;
  void* newp;
  size_t newlen;
};

using Ctl = int (*)(Req& r, const size_t* mib, size_t miblen);

struct Node {
  const char* name;
  Ctl ctl;                 // leaves only
  const Node* kids;        // named children
  size_t nkids;
  const Node* indexed;     // the child an integer component leads to
  bool (*index_ok)(size_t);
};

// ---- jemalloc's read/write rules ---------------------------------------
template <typename T>
int read_value(Req& r, const T& v) {
  if (r.oldp == nullptr || r.oldlenp == nullptr) return 0;
  if (*r.oldlenp != sizeof(T)) {
    size_t n = *r.oldlenp < sizeof(T) ? *r.oldlenp : sizeof(T);
    std::memcpy(r.oldp, &v, n);
    *r.oldlenp = n;
    return EINVAL;
  }
  std::memcpy(r.oldp, &v, sizeof(T));
  return 0;
}

// 0, or EINVAL for a write of the wrong size; `out` is set when written.
template <typename T>
int take_write(Req& r, T* out, bool* written) {
  *written = false;
  if (r.newp == nullptr) return 0;
  if (r.newlen != sizeof(T)) return EINVAL;
  std::memcpy(out, r.newp, sizeof(T));
  *written = true;
  return 0;
}

inline bool writes(const Req& r) { return r.newp != nullptr || r.newlen != 0; }

template <typename T>
int read_only(Req& r, const T& v) {
  if (writes(r)) return EPERM;
  return read_value(r, v);
}

// A void value: an action, neither read nor written.
inline int action(Req& r) {
  return r.oldp != nullptr || r.oldlenp != nullptr || writes(r) ? EPERM : 0;
}

// ---- the leaves (mallctl_leaves.cc) ----------------------------------
// The templates are instantiated there for the arguments the tree uses.

// The root's leaves, and stats.*.
int ctl_version(Req& r, const size_t* mib, size_t miblen);
int ctl_epoch(Req& r, const size_t* mib, size_t miblen);
int ctl_stats_allocated(Req& r, const size_t* mib, size_t miblen);
int ctl_stats_active(Req& r, const size_t* mib, size_t miblen);
int ctl_stats_resident(Req& r, const size_t* mib, size_t miblen);
int ctl_stats_mapped(Req& r, const size_t* mib, size_t miblen);
int ctl_stats_retained(Req& r, const size_t* mib, size_t miblen);
int ctl_stats_metadata(Req& r, const size_t* mib, size_t miblen);

// ductile.*: the layers' own figures.
int ctl_chunk_reserved(Req& r, const size_t* mib, size_t miblen);
int ctl_chunk_reservations(Req& r, const size_t* mib, size_t miblen);
int ctl_chunk_active(Req& r, const size_t* mib, size_t miblen);
int ctl_chunk_dirty(Req& r, const size_t* mib, size_t miblen);
int ctl_chunk_clean(Req& r, const size_t* mib, size_t miblen);
int ctl_chunk_allocs(Req& r, const size_t* mib, size_t miblen);
int ctl_chunk_frees(Req& r, const size_t* mib, size_t miblen);
int ctl_chunk_purges(Req& r, const size_t* mib, size_t miblen);
int ctl_chunk_purged_bytes(Req& r, const size_t* mib, size_t miblen);
int ctl_chunk_map_pages(Req& r, const size_t* mib, size_t miblen);
int ctl_chunk_map_released(Req& r, const size_t* mib, size_t miblen);
int ctl_huge_allocs(Req& r, const size_t* mib, size_t miblen);
int ctl_huge_frees(Req& r, const size_t* mib, size_t miblen);
int ctl_huge_shrinks(Req& r, const size_t* mib, size_t miblen);
int ctl_huge_active(Req& r, const size_t* mib, size_t miblen);
int ctl_huge_spans(Req& r, const size_t* mib, size_t miblen);
int ctl_small_allocated(Req& r, const size_t* mib, size_t miblen);
int ctl_small_regions(Req& r, const size_t* mib, size_t miblen);
int ctl_small_advised(Req& r, const size_t* mib, size_t miblen);
int ctl_small_dense(Req& r, const size_t* mib, size_t miblen);
int ctl_small_region_dirty(Req& r, const size_t* mib, size_t miblen);
int ctl_prefault_running(Req& r, const size_t* mib, size_t miblen);
int ctl_prefault_starts(Req& r, const size_t* mib, size_t miblen);
int ctl_prefault_bytes(Req& r, const size_t* mib, size_t miblen);
int ctl_small_active(Req& r, const size_t* mib, size_t miblen);
int ctl_medium_allocated(Req& r, const size_t* mib, size_t miblen);
int ctl_huge_allocated(Req& r, const size_t* mib, size_t miblen);
template <size_t Path>
int ctl_growth(Req& r, const size_t* mib, size_t miblen);
template <os::Call C>
int ctl_os_calls(Req& r, const size_t* mib, size_t miblen);
int ctl_os_purged_bytes(Req& r, const size_t* mib, size_t miblen);
int ctl_os_purged_ranges(Req& r, const size_t* mib, size_t miblen);
int ctl_maps_limit(Req& r, const size_t* mib, size_t miblen);
int ctl_maps_threshold(Req& r, const size_t* mib, size_t miblen);
int ctl_maps_count(Req& r, const size_t* mib, size_t miblen);
int ctl_maps_counts(Req& r, const size_t* mib, size_t miblen);
int ctl_maps_tight(Req& r, const size_t* mib, size_t miblen);
int ctl_maps_splits_avoided(Req& r, const size_t* mib, size_t miblen);
int ctl_trim(Req& r, const size_t* mib, size_t miblen);

// thread.*, arena.<i>.*, arenas.*, tcache.*, stats.arenas.<i>.*; the indices
// the tree's integer components accept.
template <bool Allocated>
int ctl_thread_counter(Req& r, const size_t* mib, size_t miblen);
template <bool Allocated>
int ctl_thread_counter_ptr(Req& r, const size_t* mib, size_t miblen);
int ctl_purge(Req& r, const size_t* mib, size_t miblen);
bool arena_index_ok(size_t i);
int ctl_narenas(Req& r, const size_t* mib, size_t miblen);
int ctl_arenas_create(Req& r, const size_t* mib, size_t miblen);
int ctl_thread_arena(Req& r, const size_t* mib, size_t miblen);
int ctl_tcache_create(Req& r, const size_t* mib, size_t miblen);
template <bool Destroy>
int ctl_tcache_flush(Req& r, const size_t* mib, size_t miblen);
int ctl_page(Req& r, const size_t* mib, size_t miblen);
int ctl_quantum(Req& r, const size_t* mib, size_t miblen);
int ctl_nbins(Req& r, const size_t* mib, size_t miblen);
bool bin_index_ok(size_t i);
int ctl_bin_size(Req& r, const size_t* mib, size_t miblen);
int ctl_nlextents(Req& r, const size_t* mib, size_t miblen);
bool lextent_index_ok(size_t i);
int ctl_lextent_size(Req& r, const size_t* mib, size_t miblen);
int ctl_opt_tcache_max(Req& r, const size_t* mib, size_t miblen);
int ctl_arena_pactive(Req& r, const size_t* mib, size_t miblen);
int ctl_arena_pdirty(Req& r, const size_t* mib, size_t miblen);
int ctl_thread_tcache_enabled(Req& r, const size_t* mib, size_t miblen);

// opt.*, the background thread's leaves, prof.* and config.*.
int ctl_opt_decay_ms(Req& r, const size_t* mib, size_t miblen);
int ctl_arenas_dirty_decay_ms(Req& r, const size_t* mib, size_t miblen);
int ctl_opt_dirty_decay_ms(Req& r, const size_t* mib, size_t miblen);
int ctl_opt_muzzy_decay_ms(Req& r, const size_t* mib, size_t miblen);
int ctl_opt_thp(Req& r, const size_t* mib, size_t miblen);
int ctl_opt_huge_threshold(Req& r, const size_t* mib, size_t miblen);
int ctl_opt_tcache(Req& r, const size_t* mib, size_t miblen);
int ctl_opt_hardened(Req& r, const size_t* mib, size_t miblen);
int ctl_opt_stats_print(Req& r, const size_t* mib, size_t miblen);
int ctl_opt_prefault(Req& r, const size_t* mib, size_t miblen);
int ctl_opt_bin_sets(Req& r, const size_t* mib, size_t miblen);
int ctl_opt_freed_fill(Req& r, const size_t* mib, size_t miblen);
int ctl_opt_narenas(Req& r, const size_t* mib, size_t miblen);
int ctl_opt_background_thread(Req& r, const size_t* mib, size_t miblen);
int ctl_background_thread(Req& r, const size_t* mib, size_t miblen);
int ctl_max_background_threads(Req& r, const size_t* mib, size_t miblen);
int ctl_opt_prof(Req& r, const size_t* mib, size_t miblen);
int ctl_opt_prof_active(Req& r, const size_t* mib, size_t miblen);
int ctl_opt_lg_prof_sample(Req& r, const size_t* mib, size_t miblen);
int ctl_opt_prof_prefix(Req& r, const size_t* mib, size_t miblen);
int ctl_opt_prof_final(Req& r, const size_t* mib, size_t miblen);
int ctl_opt_prof_leak(Req& r, const size_t* mib, size_t miblen);
int ctl_opt_lg_prof_interval(Req& r, const size_t* mib, size_t miblen);
int ctl_opt_prof_gdump(Req& r, const size_t* mib, size_t miblen);
int ctl_opt_prof_signal(Req& r, const size_t* mib, size_t miblen);
int ctl_opt_stats_print_opts(Req& r, const size_t* mib, size_t miblen);
int ctl_prof_interval(Req& r, const size_t* mib, size_t miblen);
int ctl_prof_gdump(Req& r, const size_t* mib, size_t miblen);
int ctl_prof_active(Req& r, const size_t* mib, size_t miblen);
int ctl_prof_dump(Req& r, const size_t* mib, size_t miblen);
// mallctl_growth.cc: how blocks grow (core/growth.h). ctl_grew<I>: the
// process's counter I (the ways, then the bytes copied).
template <size_t I>
int ctl_grew(Req& r, const size_t* mib, size_t miblen);
int ctl_opt_growth_prof(Req& r, const size_t* mib, size_t miblen);
int ctl_opt_lg_growth_sample(Req& r, const size_t* mib, size_t miblen);
int ctl_prof_growth_dump(Req& r, const size_t* mib, size_t miblen);
int ctl_prof_reset(Req& r, const size_t* mib, size_t miblen);
int ctl_prof_lg_sample(Req& r, const size_t* mib, size_t miblen);
int ctl_config_debug(Req& r, const size_t* mib, size_t miblen);
int ctl_config_hardened(Req& r, const size_t* mib, size_t miblen);
int ctl_config_stats(Req& r, const size_t* mib, size_t miblen);
int ctl_config_prof(Req& r, const size_t* mib, size_t miblen);

}  // namespace ductile::ctl
