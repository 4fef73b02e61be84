// SPDX-License-Identifier: BSD-2-Clause
// Heap profiling's sampling: the table of stacks, capturing a stack, samples
// and their buckets, the arithmetic, prof.active and prof.gdump (start-up
// from the options and the dumps: prof_dump.cc).
#include "core/prof.h"

#include <dlfcn.h>
#include <execinfo.h>
#include <link.h>

#include <atomic>
#include <cstring>

#include "base/fork_gate.h"
#include "base/lock.h"
#include "core/prof_table.h"
#include "core/state.h"

namespace ductile::core::prof {

struct Sample {
  Bucket* bucket;
  uint64_t bytes;
  uint64_t epoch;  // the reset it was taken after
  Sample* next_free;
};

// The state prof_table.h declares.
bool g_enabled = false;
bool g_final = false;
bool g_leak = false;
char g_prefix[kMaxPrefix] = {};
int g_exit_fd = 2;
int g_stop_signal = 0;
std::atomic<unsigned> g_want{0};
// This thread is inside the profiler: what it allocates is not sampled.
__thread bool t_busy __attribute__((tls_model("initial-exec"))) = false;

Mutex g_lock;  // the table, the samples' records and the counters below
DUCTILE_LARGE_STATIC Bucket* g_table[kTableSize];
std::atomic<bool> g_active{false};
std::atomic<size_t> g_lg{19};
int g_lg_interval = -1;
std::atomic<bool> g_gdump{false};

namespace {

Sample* g_free_samples = nullptr;
uint64_t g_epoch = 0;

std::atomic<uint64_t> g_interval_bytes{0};  // the bytes counted towards lg_prof_interval
// The bytes this thread had allocated at its last sampling step.
__thread uint64_t t_counted __attribute__((tls_model("initial-exec"))) = 0;

// The live sampled bytes and their highest mark (g_lock).
uint64_t g_live_bytes = 0;
uint64_t g_live_high = 0;

// The executable segment ductile's code lies in, so that its own frames are
// left off the top of every stack. Found once, on the first sample.
std::atomic<bool> g_text_known{false};
uintptr_t g_text_lo = 0, g_text_hi = 0;

int find_text(struct dl_phdr_info* info, size_t, void* arg) {
  const uintptr_t self = *static_cast<uintptr_t*>(arg);
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_LOAD || !(ph.p_flags & PF_X)) continue;
    const uintptr_t lo = info->dlpi_addr + ph.p_vaddr, hi = lo + ph.p_memsz;
    if (self >= lo && self < hi) {
      g_text_lo = lo;
      g_text_hi = hi;
      return 1;
    }
  }
  return 0;
}

void learn_text() {
  if (g_text_known.load(std::memory_order_acquire)) return;
  uintptr_t self = reinterpret_cast<uintptr_t>(&record);
  dl_iterate_phdr(find_text, &self);
  g_text_known.store(true, std::memory_order_release);
}

bool in_text(void* pc) { return addr(pc) >= g_text_lo && addr(pc) < g_text_hi; }

// Debian's libunwind, when installed: its unw_backtrace keeps a per-thread
// cache of frame layouts and took 1 543 instructions for a stack of 14
// frames where the C library's backtrace() (libgcc's unwinder, which reads
// the DWARF unwind tables at every frame) took 22 409 (callgrind). Loaded
// on the first sample, never linked: programs that do not profile do not
// load it, and without it backtrace() serves.
using UnwBacktrace = int (*)(void**, int);
std::atomic<UnwBacktrace> g_unw{nullptr};
std::atomic<bool> g_unw_tried{false};

void learn_unwinder() {
  if (g_unw_tried.load(std::memory_order_acquire)) return;
  if (void* h = dlopen("libunwind.so.8", RTLD_NOW | RTLD_LOCAL))
    g_unw.store(reinterpret_cast<UnwBacktrace>(dlsym(h, "unw_backtrace")), std::memory_order_release);
  g_unw_tried.store(true, std::memory_order_release);
}

std::atomic<void (*)()> g_capture_hook{nullptr};
std::atomic<bool> g_whole_stacks{false};

uint64_t hash_of(void* const* frames, size_t depth) {
  uint64_t h = 0x9e3779b97f4a7c15ull ^ depth;
  for (size_t i = 0; i < depth; i++) {
    h ^= addr(frames[i]);
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
  }
  return h;
}

Sample* new_sample() {
  if (Sample* s = g_free_samples) {
    g_free_samples = s->next_free;
    return s;
  }
  return static_cast<Sample*>(rt().chunks.meta().alloc(sizeof(Sample), alignof(Sample)));
}

uint64_t splitmix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace

uint64_t rate() { return uint64_t{1} << g_lg.load(std::memory_order_relaxed); }

// ---- stacks and their buckets --------------------------------------------
size_t capture(void** out) {
  if (void (*hook)() = g_capture_hook.load(std::memory_order_acquire)) hook();
  learn_text();
  learn_unwinder();
  void* raw[kMaxFrames + 16];
  const int want = static_cast<int>(sizeof raw / sizeof raw[0]);
  const UnwBacktrace unw = g_unw.load(std::memory_order_acquire);
  int n = unw != nullptr ? unw(raw, want) : backtrace(raw, want);
  if (n < 0) n = 0;
  size_t first = 0;
  if (!g_whole_stacks.load(std::memory_order_relaxed))
    while (first < static_cast<size_t>(n) && in_text(raw[first])) first++;
  // Linked into the program itself (the unit tests), everything up to
  // main is "ours": keep the whole stack rather than an empty one.
  if (first == static_cast<size_t>(n)) first = 0;
  size_t depth = 0;
  for (size_t i = first; i < static_cast<size_t>(n) && depth < kMaxFrames; i++) out[depth++] = raw[i];
  return depth;
}

Bucket* bucket_for(Bucket** table, void* const* frames, size_t depth) {
  const uint64_t h = hash_of(frames, depth);
  Bucket** head = &table[h % kTableSize];
  for (Bucket* b = *head; b != nullptr; b = b->next)
    if (b->hash == h && b->depth == depth && std::memcmp(b->frames, frames, depth * sizeof(void*)) == 0) return b;
  const size_t bytes = sizeof(Bucket) + (depth > 0 ? depth - 1 : 0) * sizeof(void*);
  auto* b = static_cast<Bucket*>(rt().chunks.meta().alloc(bytes, alignof(Bucket)));
  if (b == nullptr) return nullptr;
  b->hash = h;
  b->depth = depth;
  std::memcpy(b->frames, frames, depth * sizeof(void*));
  b->next = *head;
  *head = b;
  return b;
}

// ---- arithmetic ---------------------------------------------------------
double ln(double x) noexcept {
  // x = m * 2^e with m in [sqrt(1/2), sqrt(2)); ln m = 2 atanh(t),
  // t = (m-1)/(m+1), |t| < 0.18 (and no cancellation for x near 1).
  uint64_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  int e = static_cast<int>((bits >> 52) & 0x7ff) - 1023;
  bits = (bits & ((uint64_t{1} << 52) - 1)) | (uint64_t{1023} << 52);
  double m;
  std::memcpy(&m, &bits, sizeof m);
  if (m > 1.4142135623730951) {
    m *= 0.5;
    e++;
  }
  const double t = (m - 1) / (m + 1), t2 = t * t;
  const double s = t * (1 + t2 * (1.0 / 3 + t2 * (1.0 / 5 + t2 * (1.0 / 7 + t2 * (1.0 / 9 + t2 / 11)))));
  return e * 0.6931471805599453 + 2 * s;
}

double exp_neg(double x) noexcept {
  if (x > 700) return 0;
  // exp(-x) = 2^-k exp(-r), x = k ln2 + r, r in [0, ln2).
  const int k = static_cast<int>(x / 0.6931471805599453);
  const double r = x - k * 0.6931471805599453;
  double term = 1, sum = 1;
  for (int i = 1; i < 14; i++) {
    term *= -r / i;
    sum += term;
  }
  double scale = 1;
  for (int i = 0; i < k; i++) scale *= 0.5;
  return sum * scale;
}

uint64_t draw_interval(uint64_t* rng, size_t lg) noexcept {
  if (*rng == 0) {
    static std::atomic<uint64_t> seed{0};
    *rng = splitmix(addr(rng) ^ seed.fetch_add(0x632be59bd9b4e019ull, std::memory_order_relaxed)) | 1;
  }
  // xorshift64*
  uint64_t x = *rng;
  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  *rng = x;
  x *= 0x2545f4914f6cdd1dull;
  const double u = static_cast<double>((x >> 11) + 1) * (1.0 / 9007199254740992.0);  // (0, 1]
  const double v = -ln(u) * static_cast<double>(uint64_t{1} << lg);
  return v < 1 ? 1 : v > 9.0e18 ? UINT64_MAX / 2 : static_cast<uint64_t>(v);
}

// ---- switches -----------------------------------------------------------
bool enabled() noexcept { return g_enabled; }
bool active() noexcept { return g_active.load(std::memory_order_acquire); }
size_t lg_sample() noexcept { return g_lg.load(std::memory_order_relaxed); }
uint64_t initial_at() noexcept { return g_enabled ? 0 : UINT64_MAX; }

int lg_interval() noexcept { return g_enabled ? g_lg_interval : -1; }
bool gdump() noexcept { return g_enabled && g_gdump.load(std::memory_order_relaxed); }
bool set_gdump(bool on) noexcept {
  if (!g_enabled) return false;
  return g_gdump.exchange(on, std::memory_order_relaxed);
}

bool set_active(bool on) noexcept {
  if (!g_enabled) return false;
  return g_active.exchange(on, std::memory_order_acq_rel);
}

bool due(const Clock& c, size_t bytes, bool count) noexcept {
  const uint64_t now = *c.allocated + bytes;
  if (count) *c.allocated = now;
  const uint64_t at = *c.at;
  poll();
  if (DUCTILE_LIKELY(now < at) || t_busy) return false;
  if (!g_enabled) {
    *c.at = UINT64_MAX;  // for good: prof:true is only read at start-up
    return false;
  }
  // lg_prof_interval: the bytes since this thread's last step are counted
  // here, at the clock's steps (about every 2^lg_prof_sample bytes), so a
  // dump comes within about one sampling interval of each 2^N bytes.
  if (g_lg_interval >= 0 && active()) {
    const uint64_t since = at != 0 && now >= t_counted ? now - t_counted : 0;
    const uint64_t before = g_interval_bytes.fetch_add(since, std::memory_order_relaxed);
    if ((before >> g_lg_interval) != ((before + since) >> g_lg_interval))
      g_want.fetch_or(kWantInterval, std::memory_order_relaxed);
  }
  t_counted = now;
  // The clock runs on while prof.active is false (a slow path per interval,
  // only under prof:true), so that switching it on reaches every thread
  // without writing to other threads' caches.
  *c.at = now + draw_interval(c.rng, lg_sample());
  return at != 0 && active();  // 0: the clock has just started
}

// ---- samples ------------------------------------------------------------
Sample* record(size_t bytes) noexcept {
  if (t_busy) return nullptr;
  t_busy = true;
  void* frames[kMaxFrames];
  size_t depth;
  {
    // The unwinders take locks of their own (libunwind's caches, the
    // loader's list of objects) that a child forked meanwhile would find
    // held forever: a capture is work in flight, which fork waits for.
    InFlight in_flight;
    depth = capture(frames);
  }
  Sample* s = nullptr;
  {
    LockGuard g(g_lock);
    Bucket* b = bucket_for(g_table, frames, depth);
    if (b != nullptr && (s = new_sample()) != nullptr) {
      s->bucket = b;
      s->bytes = bytes;
      s->epoch = g_epoch;
      b->live_n++;
      b->live_bytes += bytes;
      b->total_n++;
      b->total_bytes += bytes;
      g_live_bytes += bytes;
      if (g_live_bytes > g_live_high) {
        g_live_high = g_live_bytes;
        if (g_gdump.load(std::memory_order_relaxed)) g_want.fetch_or(kWantGdump, std::memory_order_relaxed);
      }
    }
  }
  t_busy = false;
  poll();
  return s;
}

void release(Sample* s) noexcept {
  LockGuard g(g_lock);
  if (s->epoch == g_epoch) {
    s->bucket->live_n--;
    s->bucket->live_bytes -= s->bytes;
    g_live_bytes -= s->bytes;
  }
  s->next_free = g_free_samples;
  g_free_samples = s;
}

void set_capture_hook(void (*hook)()) noexcept { g_capture_hook.store(hook, std::memory_order_release); }
void set_whole_stacks(bool on) noexcept { g_whole_stacks.store(on, std::memory_order_relaxed); }

void resize(Sample* s, size_t bytes) noexcept {
  LockGuard g(g_lock);
  if (s->epoch == g_epoch) {
    s->bucket->live_bytes = s->bucket->live_bytes - s->bytes + bytes;
    g_live_bytes = g_live_bytes - s->bytes + bytes;
    if (g_live_bytes > g_live_high) {
      g_live_high = g_live_bytes;
      if (g_gdump.load(std::memory_order_relaxed)) g_want.fetch_or(kWantGdump, std::memory_order_relaxed);
    }
  }
  s->bytes = bytes;
}

void reset(size_t lg) noexcept {
  LockGuard g(g_lock);
  g_epoch++;
  for_each_bucket([](Bucket& b) { b.live_n = b.live_bytes = b.total_n = b.total_bytes = 0; });
  g_live_bytes = g_live_high = 0;
  g_lg.store(lg, std::memory_order_relaxed);
}

Totals live_totals() noexcept {
  Totals t;
  const double r = static_cast<double>(rate());
  LockGuard g(g_lock);
  for_each_bucket([&](const Bucket& b) {
    if (b.live_n == 0) return;
    t.samples += b.live_n;
    t.sampled_bytes += b.live_bytes;
    t.stacks++;
    // google-pprof's estimate: each stack's counts over the probability
    // that a block of its mean size is sampled.
    const double scale = 1 / (1 - exp_neg(static_cast<double>(b.live_bytes) / b.live_n / r));
    t.est_objects += b.live_n * scale;
    t.est_bytes += b.live_bytes * scale;
  });
  return t;
}

// ---- fork ---------------------------------------------------------------
void prefork() noexcept { g_lock.lock(); }
void postfork_parent() noexcept { g_lock.unlock(); }
void postfork_child() noexcept { g_lock.reinit_after_fork(); }

}  // namespace ductile::core::prof
