/* SPDX-License-Identifier: BSD-2-Clause */
// Run-time options: one table, one parser. Sources, later ones winning: the
// built-in defaults, the configure-time default (--with-malloc-conf), the
// DUCTILE_CONF environment variable ("thp:never,decay_ms:2000").
// A malformed entry prints one warning (without allocating) and is ignored.
#pragma once

#include <cstddef>
#include <cstdint>

#include "huge/huge.h"

namespace ductile::core {

// The most sets of bins (core::Runtime::kMaxBinSets).
inline constexpr size_t kMaxBinSetsOption = 8;
// The longest prof_prefix, with its terminating NUL.
inline constexpr size_t kMaxPrefix = 256;
// The longest stats_print_opts, with its terminating NUL.
inline constexpr size_t kMaxStatsOpts = 32;

struct Options {
  uint64_t decay_ms = 10000;           // chunk::Options::decay_ns
  huge::ThpPolicy thp = huge::ThpPolicy::kAuto;
  size_t huge_threshold = kHugePage;   // huge::Options::threshold
  bool tcache = true;                  // per-thread caches
  bool stats_print = false;            // print statistics at exit (also DUCTILE_STATS=1)
  char stats_print_opts[kMaxStatsOpts] = "";  // malloc_stats_print's opts for that print ("J": JSON)
  bool prefault = false;               // the prefault helper thread (small::Prefaulter)
  size_t bin_sets = 1;                 // sets of bins (Runtime::bins), at most 8; 0: one per CPU
  bool background_thread = true;       // finish decay for a quiet program (core::BackgroundThread)
  bool hardened = kHardened;           // validate every free (--enable-hardened: always)
  size_t freed_fill = 64;              // --enable-hardened: one freed block in N filled and checked (0: none)
  // Sampled heap profiling (core/prof.h), jemalloc's options.
  bool prof = false;                   // built up at start-up, or never
  bool prof_active = true;             // sampling from the start (prof.active switches it)
  size_t lg_prof_sample = 19;          // mean bytes between samples: 2^19, jemalloc's 512 KiB
  char prof_prefix[kMaxPrefix] = "jeprof";  // dump files' names; empty: no automatic dumps
  bool prof_final = false;             // dump at exit: <prefix>.<pid>.<seq>.f.heap
  bool prof_leak = false;              // with prof_final: print a leak summary at exit
  int lg_prof_interval = -1;           // a dump per 2^N bytes allocated; -1: none
  bool prof_gdump = false;             // a dump at each new high of the sampled live bytes
  int prof_signal = 0;                 // a dump when this signal arrives; 0: none
  // The growth profile (core/growth.h), ductile's own.
  bool growth_prof = false;            // sample growth events by call site; a profile at exit
  size_t lg_growth_sample = 16;        // mean bytes grown between samples: 2^16, 64 KiB
};

// How an option's value reads: a number, true/false, or text (for JSON).
enum class OptionKind { kNumber, kBool, kText };

// Parses "key:value,key:value" into `opts`. Returns the number of entries
// rejected (each was warned about).
size_t parse_options(const char* conf, Options& opts) noexcept;

// Writes the option `name`'s value as text; false if there is no such option.
bool option_to_string(const Options& opts, const char* name, char* buf, size_t n) noexcept;

// The table's option names, in order (for mallctl "opt.*" and the stats
// printer): option_name(i) for i < option_count().
size_t option_count() noexcept;
const char* option_name(size_t i) noexcept;
OptionKind option_kind(size_t i) noexcept;

// The signal number of a name as prof_signal takes it ("SIGUSR2", "USR2",
// "12"); 0 for none ("0", "none"); -1 for anything else.
int parse_signal(const char* s, size_t n) noexcept;

// Sets one option from the text `value` (n bytes) with the table's parser.
// False, with `opts` unchanged, for an unknown name or a bad value; warns
// about nothing (the caller reports the error its own way).
bool set_option(Options& opts, const char* name, const char* value, size_t n) noexcept;

}  // namespace ductile::core
