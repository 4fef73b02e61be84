/* SPDX-License-Identifier: BSD-2-Clause */
// Sampled heap profiling: which code holds the memory. jemalloc's scheme
// and names (prof, prof_active, lg_prof_sample, prof_prefix, prof_final,
// prof_leak, lg_prof_interval, prof_gdump; prof.active, prof.dump,
// prof.reset, prof.lg_sample, prof.interval, prof.gdump), and prof_signal.
//
// Dumps other than prof.dump's and the final one are asked for where they
// become due -- every 2^lg_prof_interval bytes (counted at the sampling
// clock's steps), at a new high of the sampled live bytes (prof_gdump), in
// a handler of prof_signal (which only sets a bit: no lock, no file) --
// and written by the next allocation that reaches the slow path, outside
// every lock of the allocator and never inside a signal handler.
//
// Each thread counts the bytes it allocates (ThreadCache::allocated) and
// takes a sample when the count passes ThreadCache::prof_at, which is then
// moved on by a random interval drawn from an exponential distribution of
// mean 2^lg_prof_sample bytes: an allocation of s bytes is sampled with
// probability 1 - exp(-s / 2^lg_prof_sample), which is what google-pprof
// undoes when it reads the dump ("heap_v2/<rate>"). Without prof:true
// prof_at is UINT64_MAX, so the inline malloc pays one compare that never
// branches; with it but prof.active false the clock runs on, and only the
// slow path it leads to looks at prof.active.
//
// A sampled block is a block of its own: an extent (a page run for small
// and medium sizes, the usual span for huge ones) whose first page carries
// no page-map tag, so its free leaves the inline path and finds the sample
// through Extent::sample. No other free pays for sampling.
//
// The stack is taken from the unwind tables (the programs Debian builds
// have no frame pointers), with libunwind's unw_backtrace where it is
// installed, else the C library's backtrace(), before any lock of ours is
// taken, with a per-thread guard so that the unwinder's own allocations
// (its first use loads a library) are served unsampled.
#pragma once

#include <cstddef>
#include <cstdint>

#include "base/common.h"
#include "core/options.h"

namespace ductile::core::prof {

// The deepest stack recorded (frames past it are left out).
inline constexpr size_t kMaxFrames = 64;
// The most bytes of a dump file's name (prefix, pid, sequence, suffix).
inline constexpr size_t kMaxPath = kMaxPrefix + 64;

struct Sample;

// The sampling clock of one thread: its byte count, the count at which it
// takes its next sample (0: draw one at the next slow path; UINT64_MAX:
// profiling is off for good) and its random state. Only its thread reads
// or writes it.
struct Clock {
  uint64_t* allocated;
  uint64_t* at;
  uint64_t* rng;
};

// Reads the options at start-up (the runtime's constructor).
void init(const Options& o) noexcept;
// opt.prof: profiling was asked for at start-up; fixed for the process.
bool enabled() noexcept;
// prof.active: samples are being taken now.
bool active() noexcept;
// Sets prof.active; returns the old value.
bool set_active(bool on) noexcept;
// lg_prof_interval: a dump per 2^N bytes allocated, -1 for none (always -1
// without opt.prof).
int lg_interval() noexcept;
// prof.gdump: a dump at each new high of the sampled live bytes. set_gdump
// returns the old value (false, and nothing set, without opt.prof).
bool gdump() noexcept;
bool set_gdump(bool on) noexcept;
// Writes the dumps that lg_prof_interval, prof.gdump and prof_signal have
// asked for since the last call; called from the allocation slow path (by
// due()), where no lock of the allocator is held.
void poll() noexcept;
// prof.lg_sample: the mean interval's log2 now.
size_t lg_sample() noexcept;
// The first value of a new thread's ThreadCache::prof_at.
uint64_t initial_at() noexcept;

// True when an allocation of `bytes` on this clock is to be sampled; moves
// the clock on (the caller counts the bytes into *allocated itself, unless
// `count` says this function is to).
bool due(const Clock& c, size_t bytes, bool count) noexcept;

// Takes the calling thread's stack and records a live sample of `bytes`;
// nullptr when none can be taken (the thread is already inside the
// profiler, or no metadata could be had): the block is then not sampled.
Sample* record(size_t bytes) noexcept;
// The sampled block is freed.
void release(Sample* s) noexcept;
// The sampled block was resized in place: it now holds `bytes`.
void resize(Sample* s, size_t bytes) noexcept;
// Tests: `hook` (nullptr: none) runs at the start of every stack capture.
void set_capture_hook(void (*hook)()) noexcept;
// Tests linked with the allocator's objects, where ductile's code and the
// program's are one text: stacks keep every frame (`on`), not only those
// past the frames in that text.
void set_whole_stacks(bool on) noexcept;

// prof.dump: writes the profile to `filename`, or (nullptr) to
// <prefix>.<pid>.<seq>.m<mseq>.heap. 0, or EFAULT when profiling is off or
// the file cannot be written.
int dump(const char* filename) noexcept;
// prof.reset: forgets every sample taken so far (blocks sampled before are
// no longer counted, live or freed) and sets the interval to 2^lg.
void reset(size_t lg) noexcept;
// At exit: the final dump (prof_final) and the leak summary (prof_leak).
void at_exit() noexcept;

// What the live samples amount to, raw and as google-pprof estimates the
// whole heap from them (for tests and the leak summary).
struct Totals {
  uint64_t samples = 0;        // live sampled blocks
  uint64_t sampled_bytes = 0;  // their bytes
  uint64_t stacks = 0;         // distinct stacks holding them
  double est_objects = 0;
  double est_bytes = 0;
};
Totals live_totals() noexcept;

void prefork() noexcept;
void postfork_parent() noexcept;
void postfork_child() noexcept;

// The arithmetic behind sampling, without libm (the library links only the
// C library): natural log and exp(-x), accurate to about 1e-6.
double ln(double x) noexcept;
double exp_neg(double x) noexcept;
// The next interval in bytes (at least 1) for a mean of 2^lg, from *rng.
uint64_t draw_interval(uint64_t* rng, size_t lg) noexcept;

}  // namespace ductile::core::prof
