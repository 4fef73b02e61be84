/* SPDX-License-Identifier: BSD-2-Clause */
// Statistics: one snapshot of every layer's counters, the derived totals that
// mallctl("stats.*") reports, and the printer behind malloc_stats_print and
// DUCTILE_STATS=1 (readable text or JSON).
//
// Taking a snapshot takes no lock and never allocates: every figure is a
// counter its layer keeps where the state changes, under the lock it holds
// there, and the snapshot reads with relaxed atomic loads (base/counter.h),
// O(size classes x bin sets) however large the heap. Printing formats into
// a stack buffer and hands it to a callback (or write(2)s it to stderr), so
// a callback may itself call malloc. Counters are read one after another,
// so the totals of a busy process are approximate, as jemalloc's are.
#pragma once

#include <cstddef>
#include <cstdint>

#include "chunk/chunk.h"
#include "core/background.h"
#include "core/growth.h"
#include "huge/huge.h"
#include "os/os.h"
#include "small/bin.h"
#include "small/prefaulter.h"
#include "small/region.h"
#include "small/size_classes.h"

namespace ductile::core {

// Bytes handed to the program (`allocated`, class sizes) and the pages that
// hold them (`active`), by layer.
struct LayerBytes {
  size_t allocated = 0;
  size_t active = 0;
};

struct StatsSnapshot {
  LayerBytes small;   // slab objects in use (thread caches count as in use)
  LayerBytes medium;  // page runs of the medium classes
  LayerBytes huge;    // huge blocks (headroom excluded)
  // jemalloc's totals: allocated <= active <= resident; mapped counts whole
  // active extents (huge headroom, slab tails) plus metadata; retained is free
  // address space kept, purged or never touched (clean extents).
  size_t allocated = 0;
  size_t active = 0;
  size_t resident = 0;  // an upper bound: active + dirty (chunks, regions) + metadata
  size_t mapped = 0;
  size_t retained = 0;
  size_t metadata = 0;

  chunk::ChunkStats chunk;
  huge::HugeStats huge_layer;
  growth::Totals growth;          // every block's growth by realloc, rallocx, xallocx
  small::BinStats bins[small::kNumSmall];
  small::ArenaStats arena;        // slab regions
  small::PrefaultStats prefault;  // the prefault helper
  BackgroundStats background;     // the background thread
  uint64_t calls[os::kCallKinds] = {};
  uint64_t purged_bytes = 0;   // by the OS layer, every purge included
  uint64_t purged_ranges = 0;
  // The calling thread's counters (0 with --disable-stats or no cache).
  uint64_t thread_allocated = 0;
  uint64_t thread_deallocated = 0;
};

// Fills `s` from the runtime (which must be ready).
void take_snapshot(StatsSnapshot& s) noexcept;

// glibc's mallinfo2 fields as ductile answers them (mallinfo, mallinfo2 and
// malloc_info; docs/ARCHITECTURE.md, API layer, says what each one means).
// Huge blocks are kept apart, as glibc keeps its mmapped chunks apart from
// its arenas: arena = uordblks + fordblks, and hblkhd is not part of it.
// Memory only: huge headroom, clean extents and metadata are in none of them.
struct HeapInfo {
  size_t arena = 0;     // uordblks + fordblks
  size_t ordblks = 0;   // free extents awaiting decay (dirty)
  size_t smblks = 0;    // free small objects in slabs
  size_t hblks = 0;     // huge blocks
  size_t hblkhd = 0;    // bytes in huge blocks
  size_t usmblks = 0;   // always 0, as glibc's
  size_t fsmblks = 0;   // bytes in the free small objects
  size_t uordblks = 0;  // bytes in small and medium blocks in use
  size_t fordblks = 0;  // free bytes retained: in slabs, slab regions, dirty extents
  size_t keepcost = 0;  // what trim would purge: dirty extents, free region pages, empty slabs
};
HeapInfo heap_info(const StatsSnapshot& s) noexcept;

// a - b, or 0 where b is the larger.
inline size_t sub_or_zero(size_t a, size_t b) { return a > b ? a - b : 0; }

// The growth paths' names, in huge::GrowthPath's order.
inline constexpr const char* kGrowthNames[] = {"headroom", "neighbour", "fixed_map", "mremap", "copy"};
static_assert(sizeof kGrowthNames / sizeof kGrowthNames[0] == huge::kGrowthPaths,
              "a name for every growth path");

// Names of the huge layer's growth paths as mallctl and the printer spell
// them: "headroom", "neighbour", "fixed_map", "mremap", "copy".
const char* growth_name(size_t path) noexcept;

// malloc_stats_print: `write` gets NUL-terminated pieces (nullptr: stderr).
// The runtime must be ready: callers call ensure_ready() first, and print
// nothing where it fails (this thread is building the runtime).
// The calling thread is not cancelled meanwhile (base/thread.h, NoCancel);
// nor in print_xml. In `opts`, 'J' selects JSON and 'b' leaves out the per-class lines; other
// characters are ignored, as jemalloc ignores the ones it does not know.
using WriteFn = void (*)(void*, const char*);
void print_stats(WriteFn write, void* opaque, const char* opts) noexcept;

// malloc_info's XML: glibc's <malloc version="1"> root and element names
// where the figures match them (from heap_info), then ductile's own figures
// in a <ductile> element. Written through `write` like print_stats, after
// the snapshot: no lock is held while `write` runs, so it may allocate. The
// runtime must be ready, as for print_stats.
void print_xml(WriteFn write, void* opaque) noexcept;

// Called once at start-up when the stats_print option (DUCTILE_STATS=1) is
// on: registers an atexit() handler that prints the readable summary to
// stderr. Standard error is duplicated now (close-on-exec, at fd 64 or
// above), because programs may close it before exit -- coreutils do, in
// their own atexit handler, which runs first.
void print_stats_at_exit_on() noexcept;

}  // namespace ductile::core
