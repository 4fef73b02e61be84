/* SPDX-License-Identifier: BSD-2-Clause */
// How blocks grow: every realloc, rallocx and xallocx that gives a block
// more usable bytes is counted by the way it grew, with the bytes it
// copied; and, with growth_prof:true, sampled by call site into a growth
// profile that google-pprof reads. A growth's bytes are the size asked for
// beyond the block's old usable size.
//
// The ways, cheapest first: in place (a small block within its class, a
// medium block whose page run grew where it lies), a huge block's headroom,
// its recycled neighbour, a mapping at the address past its span, an
// mremap move (page tables move, bytes do not; also a medium block whose
// pages move into the huge range), and a copy (a new block, the bytes
// copied, the old block freed).
//
// Counting costs a thread one or two counter updates in its cache record
// (no atomic read-modify-write, no shared line); a thread without a cache
// counts into shared atomics. A read sums every cache record ever made,
// lock-free.
//
// The profile samples growth events by the bytes they grew (a Poisson
// process, as the heap profiler samples bytes allocated: an event of g
// bytes is sampled with probability 1 - exp(-g / 2^lg_growth_sample)), and
// takes the stack with the heap profiler's unwinder. Each sample is weighed
// by the inverse of its probability when it is recorded, so the profile
// holds estimates of the whole and its header names no sampling rate
// ("heapprofile": google-pprof scales nothing). Its counts are, per stack,
//   <copies>: <bytes copied> [<growth events>: <bytes grown>]
// so that google-pprof's default view (inuse_space) lists the call sites
// that copy most, and --alloc_objects / --alloc_space all growth. The way
// each event took is the outermost frame of its stack: one of the marker
// functions ductile_grew_in_place and ductile_grew_by_<way> (exported,
// never called), so that the markers' cumulative counts list growth by way
// and --focus=ductile_grew_by_copy the call sites that copied. Without growth_prof the cost is one predictable branch per
// growth event.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/options.h"
#include "core/state.h"

namespace ductile::core::growth {

enum class Way : uint8_t { kInPlace, kHeadroom, kNeighbour, kFixedMap, kMremap, kCopy, kCount };
inline constexpr size_t kWays = static_cast<size_t>(Way::kCount);
// The counter after the ways: the bytes copied.
inline constexpr size_t kCopied = kWays;
static_assert(kCopied + 1 == small::kGrowthCounters, "a thread cache keeps every growth counter");

// The ways' names, as mallctl ("ductile.growth.<name>") and the statistics
// spell them.
inline constexpr const char* kWayNames[] = {"in_place", "headroom", "neighbour", "fixed_map", "mremap", "copy"};
static_assert(sizeof kWayNames / sizeof kWayNames[0] == kWays, "a name for every way");

// The process's totals: events by way, bytes copied.
struct Totals {
  uint64_t events[kWays] = {};
  uint64_t copied = 0;
};
Totals totals() noexcept;

// A new thread cache record (create_cache), to be summed by totals().
void add_record(small::ThreadCache* tc) noexcept;

// growth_prof (fixed at start-up): growth events are sampled.
extern bool g_on;

// Reads the options at start-up (the runtime's constructor).
void init(const Options& o) noexcept;
// The slow half of note(): the sampling clock, and a sample when it is due.
__attribute__((cold)) void sample(Way way, size_t grown, size_t copied) noexcept;
// note()'s counting for a thread without a cache.
__attribute__((cold)) void note_uncached(Way way, size_t copied) noexcept;

// A block grew by `grown` bytes (> 0) the way `way`, copying `copied`
// (0 but for kCopy).
DUCTILE_ALWAYS_INLINE void note(Way way, size_t grown, size_t copied) noexcept {
  if (kStats) {
    small::ThreadCache* tc = t_cache;  // never null
    if (DUCTILE_LIKELY(tc != no_cache())) {
      tc->growth[static_cast<size_t>(way)]++;
      if (way == Way::kCopy) tc->growth[kCopied] += copied;
    } else {
      note_uncached(way, copied);
    }
  }
  if (kProf && DUCTILE_UNLIKELY(g_on)) sample(way, grown, copied);
}

// prof.growth.dump: writes the growth profile to `filename`, or (nullptr)
// to <prof_prefix>.<pid>.<seq>.m<mseq>.growth. 0, or EFAULT when
// growth_prof is off or the file cannot be written.
int dump(const char* filename) noexcept;
// At exit, under growth_prof: the final profile,
// <prof_prefix>.<pid>.<seq>.f.growth, and a line of totals on stderr.
void at_exit() noexcept;

}  // namespace ductile::core::growth
