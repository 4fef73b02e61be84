// SPDX-License-Identifier: BSD-2-Clause
// mallctl, mallctlnametomib, mallctlbymib and malloc_stats_print: the name
// tree, its lookup and the entry points (the leaves: mallctl_leaves.cc).
//
// The namespace is a static tree: inner nodes have named children or one
// child that matches an integer component ("arena.<i>.purge"); leaves have a
// handler. A MIB holds, per component, the child's position among its
// siblings, or the integer itself for an integer component, as jemalloc's
// does. Reads and writes follow jemalloc's rules (jemalloc(3), RETURN
// VALUES): a read needs *oldlenp == sizeof the value, else as much as fits is
// copied, *oldlenp says how much, and the answer is EINVAL; a write needs
// newlen == sizeof the value (EINVAL); writing a read-only value, or reading
// or writing a void one, is EPERM; an unknown name is ENOENT.
#include <errno.h>

#include <cstring>

#include "api/mallctl_leaves.h"
#include "core/growth.h"
#include "core/runtime.h"
#include "core/stats.h"
#include "ductile/ductile.h"

using namespace ductile;
using namespace ductile::ctl;

namespace {

// Longest name component, and deepest name, we accept.
constexpr size_t kMaxComponent = 64;
constexpr size_t kMaxDepth = 8;

// ---- the tree ----------------------------------------------------------
#define LEAF(n, f) Node{n, f, nullptr, 0, nullptr, nullptr}
#define INNER(n, a) Node{n, nullptr, a, sizeof a / sizeof a[0], nullptr, nullptr}
#define INDEXED(n, child, ok) Node{n, nullptr, nullptr, 0, &child, ok}

constexpr Node kStatsArenaI[] = {LEAF("pactive", ctl_arena_pactive), LEAF("pdirty", ctl_arena_pdirty)};
constexpr Node kStatsArenaIndexed = INNER(nullptr, kStatsArenaI);
constexpr Node kStatsKids[] = {
    LEAF("allocated", ctl_stats_allocated), LEAF("active", ctl_stats_active),
    LEAF("resident", ctl_stats_resident),   LEAF("mapped", ctl_stats_mapped),
    LEAF("retained", ctl_stats_retained),   LEAF("metadata", ctl_stats_metadata),
    INDEXED("arenas", kStatsArenaIndexed, arena_index_ok),
};
constexpr Node kThreadTcache[] = {LEAF("flush", ctl_purge), LEAF("enabled", ctl_thread_tcache_enabled)};
constexpr Node kThread[] = {
    LEAF("arena", ctl_thread_arena),
    LEAF("allocated", ctl_thread_counter<true>),
    LEAF("allocatedp", ctl_thread_counter_ptr<true>),
    LEAF("deallocated", ctl_thread_counter<false>),
    LEAF("deallocatedp", ctl_thread_counter_ptr<false>),
    INNER("tcache", kThreadTcache),
};
constexpr Node kArenaI[] = {LEAF("purge", ctl_purge), LEAF("decay", ctl_purge)};
constexpr Node kArenaIndexed = INNER(nullptr, kArenaI);
constexpr Node kTcache[] = {
    LEAF("create", ctl_tcache_create),
    LEAF("flush", ctl_tcache_flush<false>),
    LEAF("destroy", ctl_tcache_flush<true>),
};
constexpr Node kBinI[] = {LEAF("size", ctl_bin_size)};
constexpr Node kBinIndexed = INNER(nullptr, kBinI);
constexpr Node kLextentI[] = {LEAF("size", ctl_lextent_size)};
constexpr Node kLextentIndexed = INNER(nullptr, kLextentI);
constexpr Node kArenas[] = {
    LEAF("narenas", ctl_narenas),
    LEAF("create", ctl_arenas_create),
    LEAF("page", ctl_page),
    LEAF("dirty_decay_ms", ctl_arenas_dirty_decay_ms),
    LEAF("quantum", ctl_quantum),
    LEAF("nbins", ctl_nbins),
    INDEXED("bin", kBinIndexed, bin_index_ok),
    LEAF("nlextents", ctl_nlextents),
    INDEXED("lextent", kLextentIndexed, lextent_index_ok),
};
// Every option of the option table (core/options.cc), with its type, plus
// jemalloc's names for the same settings. api_test checks that every option
// in the table has a node here.
constexpr Node kOpt[] = {
    LEAF("decay_ms", ctl_opt_decay_ms),             // uint64_t, rw
    LEAF("thp", ctl_opt_thp),                       // const char *
    LEAF("huge_threshold", ctl_opt_huge_threshold), // size_t
    LEAF("tcache", ctl_opt_tcache),                 // bool
    LEAF("hardened", ctl_opt_hardened),             // bool
    LEAF("freed_fill", ctl_opt_freed_fill),         // size_t
    LEAF("stats_print", ctl_opt_stats_print),       // bool
    LEAF("prefault", ctl_opt_prefault),             // bool
    LEAF("bin_sets", ctl_opt_bin_sets),             // size_t (0: one per CPU)
    LEAF("background_thread", ctl_opt_background_thread), // bool
    LEAF("prof", ctl_opt_prof),                     // bool
    LEAF("prof_active", ctl_opt_prof_active),       // bool
    LEAF("lg_prof_sample", ctl_opt_lg_prof_sample), // size_t
    LEAF("prof_prefix", ctl_opt_prof_prefix),       // const char *
    LEAF("prof_final", ctl_opt_prof_final),         // bool
    LEAF("prof_leak", ctl_opt_prof_leak),           // bool
    LEAF("lg_prof_interval", ctl_opt_lg_prof_interval), // ssize_t (-1: no interval dumps)
    LEAF("prof_gdump", ctl_opt_prof_gdump),         // bool
    LEAF("prof_signal", ctl_opt_prof_signal),       // int (0: none)
    LEAF("stats_print_opts", ctl_opt_stats_print_opts), // const char *
    LEAF("growth_prof", ctl_opt_growth_prof),       // bool
    LEAF("lg_growth_sample", ctl_opt_lg_growth_sample), // size_t
    LEAF("dirty_decay_ms", ctl_opt_dirty_decay_ms), // ssize_t, jemalloc's
    LEAF("narenas", ctl_opt_narenas),               // unsigned, jemalloc's
    LEAF("muzzy_decay_ms", ctl_opt_muzzy_decay_ms), // ssize_t, jemalloc's (0: no muzzy stage)
    LEAF("tcache_max", ctl_opt_tcache_max),         // size_t, jemalloc's
};
constexpr Node kConfig[] = {
    LEAF("debug", ctl_config_debug), LEAF("hardened", ctl_config_hardened), LEAF("stats", ctl_config_stats), LEAF("prof", ctl_config_prof)};
constexpr Node kProfGrowth[] = {LEAF("dump", ctl_prof_growth_dump)};
constexpr Node kProfKids[] = {
    LEAF("active", ctl_prof_active),
    LEAF("dump", ctl_prof_dump),
    LEAF("reset", ctl_prof_reset),
    LEAF("lg_sample", ctl_prof_lg_sample),
    LEAF("interval", ctl_prof_interval),
    LEAF("gdump", ctl_prof_gdump),
    INNER("growth", kProfGrowth),
};
constexpr Node kGrowth[] = {
    LEAF("headroom", ctl_growth<0>), LEAF("neighbour", ctl_growth<1>), LEAF("fixed_map", ctl_growth<2>),
    LEAF("mremap", ctl_growth<3>),   LEAF("copy", ctl_growth<4>),
};
static_assert(sizeof kGrowth / sizeof kGrowth[0] == huge::kGrowthPaths, "a node for every growth path");
// The process's growth by way (core/growth.h), then the bytes copied.
constexpr Node kGrew[] = {
    LEAF("in_place", ctl_grew<0>), LEAF("headroom", ctl_grew<1>), LEAF("neighbour", ctl_grew<2>),
    LEAF("fixed_map", ctl_grew<3>), LEAF("mremap", ctl_grew<4>),  LEAF("copy", ctl_grew<5>),
    LEAF("copied_bytes", ctl_grew<core::growth::kCopied>),
};
static_assert(sizeof kGrew / sizeof kGrew[0] == small::kGrowthCounters, "a node for every growth counter");
constexpr Node kHuge[] = {
    INNER("growth", kGrowth),          LEAF("allocs", ctl_huge_allocs), LEAF("frees", ctl_huge_frees),
    LEAF("shrinks", ctl_huge_shrinks), LEAF("active", ctl_huge_active), LEAF("spans", ctl_huge_spans),
    LEAF("allocated", ctl_huge_allocated),
};
constexpr Node kOs[] = {
    LEAF("mmap", ctl_os_calls<os::Call::kMmap>),
    LEAF("munmap", ctl_os_calls<os::Call::kMunmap>),
    LEAF("mprotect", ctl_os_calls<os::Call::kMprotect>),
    LEAF("mremap", ctl_os_calls<os::Call::kMremap>),
    LEAF("madvise", ctl_os_calls<os::Call::kMadvise>),
    LEAF("process_madvise", ctl_os_calls<os::Call::kProcessMadvise>),
    LEAF("pidfd_open", ctl_os_calls<os::Call::kPidfdOpen>),
    LEAF("purged_bytes", ctl_os_purged_bytes),
    LEAF("purged_ranges", ctl_os_purged_ranges),
};
static_assert(os::kCallKinds == 7, "a ductile.os node for every kind of system call");
constexpr Node kChunk[] = {
    LEAF("reserved", ctl_chunk_reserved), LEAF("reservations", ctl_chunk_reservations),
    LEAF("active", ctl_chunk_active),     LEAF("dirty", ctl_chunk_dirty),
    LEAF("clean", ctl_chunk_clean),       LEAF("allocs", ctl_chunk_allocs),
    LEAF("frees", ctl_chunk_frees),       LEAF("purges", ctl_chunk_purges),
    LEAF("purged_bytes", ctl_chunk_purged_bytes),
    LEAF("map_pages", ctl_chunk_map_pages), LEAF("map_released", ctl_chunk_map_released),
};
constexpr Node kSmall[] = {
    LEAF("allocated", ctl_small_allocated),   LEAF("active", ctl_small_active),
    LEAF("regions", ctl_small_regions),       LEAF("advised_regions", ctl_small_advised),
    LEAF("dense_regions", ctl_small_dense),   LEAF("region_dirty", ctl_small_region_dirty),
};
constexpr Node kPrefault[] = {
    LEAF("running", ctl_prefault_running),
    LEAF("starts", ctl_prefault_starts),
    LEAF("populated_bytes", ctl_prefault_bytes),
};
constexpr Node kMedium[] = {LEAF("allocated", ctl_medium_allocated)};
constexpr Node kMaps[] = {
    LEAF("limit", ctl_maps_limit),   LEAF("threshold", ctl_maps_threshold),
    LEAF("count", ctl_maps_count),   LEAF("counts", ctl_maps_counts),
    LEAF("tight", ctl_maps_tight),   LEAF("splits_avoided", ctl_maps_splits_avoided),
};
constexpr Node kDuctile[] = {
    INNER("huge", kHuge),     INNER("os", kOs),   INNER("chunk", kChunk),
    INNER("small", kSmall),   INNER("medium", kMedium), INNER("prefault", kPrefault),
    INNER("maps", kMaps),     LEAF("trim", ctl_trim), INNER("growth", kGrew),
};
constexpr Node kRootKids[] = {
    LEAF("version", ctl_version),
    LEAF("epoch", ctl_epoch),
    LEAF("background_thread", ctl_background_thread),
    LEAF("max_background_threads", ctl_max_background_threads),
    INNER("stats", kStatsKids),
    INNER("thread", kThread),
    INNER("tcache", kTcache),
    INDEXED("arena", kArenaIndexed, arena_index_ok),
    INNER("arenas", kArenas),
    INNER("opt", kOpt),
    INNER("config", kConfig),
    INNER("prof", kProfKids),
    INNER("ductile", kDuctile),
};
constexpr Node kRoot = INNER("", kRootKids);

#undef LEAF
#undef INNER
#undef INDEXED

// ---- lookup ------------------------------------------------------------
// One step down from `n` by the MIB component `c`; nullptr if there is none.
const Node* child(const Node* n, size_t c) {
  if (n->indexed != nullptr) return n->index_ok(c) ? n->indexed : nullptr;
  return c < n->nkids ? &n->kids[c] : nullptr;
}

// Translates up to *depth components of `name` into mib[]; *depth becomes
// the number translated and *whole says whether that was all of them.
// Returns the node reached, or nullptr (ENOENT).
const Node* lookup(const char* name, size_t* mib, size_t* depth, bool* whole) {
  const Node* n = &kRoot;
  size_t i = 0;
  const char* p = name;
  *whole = false;
  while (i < *depth) {
    const char* dot = std::strchr(p, '.');
    size_t len = dot ? static_cast<size_t>(dot - p) : std::strlen(p);
    if (len == 0 || len > kMaxComponent || n->ctl != nullptr) return nullptr;
    size_t c = SIZE_MAX;
    if (n->indexed != nullptr) {
      size_t v = 0;
      for (size_t k = 0; k < len; k++) {
        if (p[k] < '0' || p[k] > '9' || v > (SIZE_MAX - 9) / 10) return nullptr;
        v = v * 10 + static_cast<size_t>(p[k] - '0');
      }
      c = v;
    } else {
      for (size_t k = 0; k < n->nkids; k++)
        if (std::strlen(n->kids[k].name) == len && std::strncmp(n->kids[k].name, p, len) == 0) c = k;
    }
    const Node* next = c == SIZE_MAX ? nullptr : child(n, c);
    if (next == nullptr) return nullptr;
    mib[i++] = c;
    n = next;
    if (!dot) {
      *whole = true;
      break;
    }
    p = dot + 1;
  }
  *depth = i;
  return n;
}

bool ready() { return core::ensure_ready(); }

}  // namespace

extern "C" {

DUCTILE_EXPORT int ductile_mallctl(const char* name, void* oldp, size_t* oldlenp, void* newp,
                                   size_t newlen) noexcept {
  if (name == nullptr) return EINVAL;
  if (!ready()) return EAGAIN;
  size_t mib[kMaxDepth];
  size_t depth = kMaxDepth;
  bool whole;
  const Node* n = lookup(name, mib, &depth, &whole);
  // A name that stops at an inner node, or goes on past the deepest one we
  // translate, is not a value.
  if (n == nullptr || n->ctl == nullptr || !whole) return ENOENT;
  Req r{oldp, oldlenp, newp, newlen};
  return n->ctl(r, mib, depth);
}

DUCTILE_EXPORT int ductile_mallctlnametomib(const char* name, size_t* mibp, size_t* miblenp) noexcept {
  if (name == nullptr || mibp == nullptr || miblenp == nullptr) return EINVAL;
  if (!ready()) return EAGAIN;
  size_t depth = *miblenp < kMaxDepth ? *miblenp : kMaxDepth;
  size_t mib[kMaxDepth];
  bool whole;
  if (lookup(name, mib, &depth, &whole) == nullptr) return ENOENT;
  std::memcpy(mibp, mib, depth * sizeof(size_t));
  *miblenp = depth;
  return 0;
}

DUCTILE_EXPORT int ductile_mallctlbymib(const size_t* mib, size_t miblen, void* oldp, size_t* oldlenp,
                                        void* newp, size_t newlen) noexcept {
  if (mib == nullptr) return EINVAL;
  if (!ready()) return EAGAIN;
  const Node* n = &kRoot;
  for (size_t i = 0; i < miblen; i++) {
    if (n->ctl != nullptr || (n = child(n, mib[i])) == nullptr) return ENOENT;
  }
  if (n->ctl == nullptr) return ENOENT;
  Req r{oldp, oldlenp, newp, newlen};
  return n->ctl(r, mib, miblen);
}

DUCTILE_EXPORT void ductile_malloc_stats_print(void (*write_cb)(void*, const char*), void* cbopaque,
                                               const char* opts) noexcept {
  if (!ready()) return;  // called while this thread builds the runtime
  core::print_stats(write_cb, cbopaque, opts);
}


int mallctl(const char*, void*, size_t*, void*, size_t) DUCTILE_JEMALLOC_ALIAS(mallctl);
int mallctlnametomib(const char*, size_t*, size_t*) DUCTILE_JEMALLOC_ALIAS(mallctlnametomib);
int mallctlbymib(const size_t*, size_t, void*, size_t*, void*, size_t) DUCTILE_JEMALLOC_ALIAS(mallctlbymib);
void malloc_stats_print(void (*)(void*, const char*), void*, const char*) DUCTILE_JEMALLOC_ALIAS(malloc_stats_print);

}  // extern "C"
