// Statistics: one snapshot of every layer's counters, the derived totals that
// mallctl("stats.*") reports, and the printer behind malloc_stats_print and
// DUCTILE_STATS=1 (readable text or JSON).
//
// Taking a snapshot locks each layer briefly in turn and never allocates;
// printing formats into a stack buffer and hands it to a callback (or
// write(2)s it to stderr) with no lock held, so a callback may itself call
// malloc. Layers are read one after another, so the totals of a busy process
// are approximate, as jemalloc's are.
#pragma once

#include <cstddef>
#include <cstdint>

#include "chunk/chunk.h"
#include "core/background.h"
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

// Names of the huge layer's growth paths as mallctl and the printer spell
// them: "headroom", "neighbour", "fixed_map", "mremap", "copy".
const char* growth_name(size_t path) noexcept;

// malloc_stats_print: `write` gets NUL-terminated pieces (nullptr: stderr).
// In `opts`, 'J' selects JSON and 'b' leaves out the per-class lines; other
// characters are ignored, as jemalloc ignores the ones it does not know.
using WriteFn = void (*)(void*, const char*);
void print_stats(WriteFn write, void* opaque, const char* opts) noexcept;

// Called once at start-up when the stats_print option (DUCTILE_STATS=1) is
// on: registers an atexit() handler that prints the readable summary to
// stderr. Standard error is duplicated now (close-on-exec, at fd 64 or
// above), because programs may close it before exit -- coreutils do, in
// their own atexit handler, which runs first.
void print_stats_at_exit_on() noexcept;

}  // namespace ductile::core
