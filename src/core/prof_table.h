// SPDX-License-Identifier: BSD-2-Clause
#include "core/prof.h"

#include <dlfcn.h>
#include <execinfo.h>
#include <fcntl.h>
#include <link.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include "base/fork_gate.h"
#include "base/lock.h"
#include "core/runtime.h"

namespace ductile::core::prof {

struct Bucket {
  Bucket* next;
  uint64_t hash;
  uint64_t live_n, live_bytes;    // samples alive now
  uint64_t total_n, total_bytes;  // samples taken since the last reset
  size_t depth;
  void* frames[1];  // `depth` of them: the allocation holds as many
};

struct Sample {
  Bucket* bucket;
  uint64_t bytes;
  uint64_t epoch;  // the reset it was taken after
  Sample* next_free;
};

namespace {

// 4096 chains: a program with many more allocation stacks than that walks
// short chains still (the table is static storage, 32 KiB, touched as used).
constexpr size_t kTableSize = 4096;

bool g_enabled = false;
bool g_final = false;
bool g_leak = false;
char g_prefix[kMaxPrefix] = {};
std::atomic<bool> g_active{false};
std::atomic<size_t> g_lg{19};
int g_exit_fd = 2;

Mutex g_lock;  // the table, the samples' records and the counters below
Bucket* g_table[kTableSize];
Sample* g_free_samples = nullptr;
uint64_t g_epoch = 0;
uint64_t g_dump_seq = 0;   // every dump of this process
uint64_t g_mdump_seq = 0;  // prof.dump's
uint64_t g_idump_seq = 0;  // lg_prof_interval's
uint64_t g_udump_seq = 0;  // prof_gdump's
uint64_t g_sdump_seq = 0;  // prof_signal's

// Dumps asked for and not yet written: a bit per kind. Set by the interval
// count, a new high of the live bytes and the signal handler (an atomic
// or, which is async-signal-safe); written by the next allocation that
// reaches the slow path (poll), never inside the handler.
constexpr unsigned kWantInterval = 1, kWantGdump = 2, kWantSignal = 4;
// prof_signal is one that stops the program by default (SIGTERM, SIGINT,
// SIGHUP, SIGQUIT) and had no handler: after its dump it stops the program
// as it would have.
constexpr unsigned kWantStop = 8;
int g_stop_signal = 0;
std::atomic<unsigned> g_want{0};

// lg_prof_interval: -1 for none; the bytes counted so far.
int g_lg_interval = -1;
std::atomic<uint64_t> g_interval_bytes{0};
// The bytes this thread had allocated at its last sampling step.
__thread uint64_t t_counted __attribute__((tls_model("initial-exec"))) = 0;

// prof.gdump, and the live sampled bytes and their highest mark (g_lock).
std::atomic<bool> g_gdump{false};
uint64_t g_live_bytes = 0;
uint64_t g_live_high = 0;

// This thread is inside the profiler: what it allocates is not sampled.
__thread bool t_busy __attribute__((tls_model("initial-exec"))) = false;

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

// The calling thread's stack, ductile's own frames left off its top.
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
  while (first < static_cast<size_t>(n) && in_text(raw[first])) first++;
  // Linked into the program itself (the unit tests), everything up to
  // main is "ours": keep the whole stack rather than an empty one.
  if (first == static_cast<size_t>(n)) first = 0;
  size_t depth = 0;
  for (size_t i = first; i < static_cast<size_t>(n) && depth < kMaxFrames; i++) out[depth++] = raw[i];
  return depth;
}

uint64_t hash_of(void* const* frames, size_t depth) {
  uint64_t h = 0x9e3779b97f4a7c15ull ^ depth;
  for (size_t i = 0; i < depth; i++) {
    h ^= addr(frames[i]);
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
  }
  return h;
}

// The bucket of this stack, made if new (g_lock held); nullptr without memory.
Bucket* bucket_for(void* const* frames, size_t depth) {
  const uint64_t h = hash_of(frames, depth);
  Bucket** head = &g_table[h % kTableSize];
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

Sample* new_sample() {
  if (Sample* s = g_free_samples) {
    g_free_samples = s->next_free;
    return s;
  }
  return static_cast<Sample*>(rt().chunks.meta().alloc(sizeof(Sample), alignof(Sample)));
}

template <typename F>
void for_each_bucket(F f) {
  for (Bucket* head : g_table)
    for (Bucket* b = head; b != nullptr; b = b->next) f(*b);
}

uint64_t rate() { return uint64_t{1} << g_lg.load(std::memory_order_relaxed); }

// ---- writing a dump ----------------------------------------------------
// Text goes out through a stack buffer with write(2): nothing allocates.
class Out {
 public:
  explicit Out(int fd) : fd_(fd) {}
  ~Out() { flush(); }
  Out& str(const char* s) { return bytes(s, std::strlen(s)); }
  Out& bytes(const char* s, size_t n) {
    while (n > 0) {
      if (len_ == sizeof buf_) flush();
      size_t k = sizeof buf_ - len_ < n ? sizeof buf_ - len_ : n;
      std::memcpy(buf_ + len_, s, k);
      len_ += k;
      s += k;
      n -= k;
    }
    return *this;
  }
  Out& u64(uint64_t v) {
    char t[24];
    return bytes(t, format_u64(v, t, sizeof t));
  }
  Out& hex(uintptr_t v) {
    char t[2 + 16];
    size_t n = 0;
    char d[16];
    do {
      d[n++] = "0123456789abcdef"[v & 15];
      v >>= 4;
    } while (v != 0);
    t[0] = '0';
    t[1] = 'x';
    for (size_t i = 0; i < n; i++) t[2 + i] = d[n - 1 - i];
    return bytes(t, 2 + n);
  }
  bool ok() {
    flush();
    return ok_;
  }

 private:
  void flush() {
    size_t off = 0;
    while (off < len_ && ok_) {
      ssize_t w = ::write(fd_, buf_ + off, len_ - off);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0)
        ok_ = false;
      else
        off += static_cast<size_t>(w);
    }
    len_ = 0;
  }
  int fd_;
  char buf_[4096];
  size_t len_ = 0;
  bool ok_ = true;
};

// "<n>: <bytes> [<n>: <bytes>]", the counts of google-pprof's heap format.
void counts(Out& o, uint64_t ln, uint64_t lb, uint64_t tn, uint64_t tb) {
  o.u64(ln).str(": ").u64(lb).str(" [").u64(tn).str(": ").u64(tb).str("]");
}

bool write_profile(int fd) {
  Out o(fd);
  {
    LockGuard g(g_lock);
    uint64_t ln = 0, lb = 0, tn = 0, tb = 0;
    for_each_bucket([&](const Bucket& b) { ln += b.live_n, lb += b.live_bytes, tn += b.total_n, tb += b.total_bytes; });
    // heap_v2/<rate>: samples of a Poisson process over bytes, which
    // google-pprof scales back up by 1 / (1 - exp(-size / rate)).
    o.str("heap profile: ");
    counts(o, ln, lb, tn, tb);
    o.str(" @ heap_v2/").u64(rate()).str("\n");
    for_each_bucket([&](const Bucket& b) {
      if (b.live_n == 0 && b.total_n == 0) return;
      counts(o, b.live_n, b.live_bytes, b.total_n, b.total_bytes);
      o.str(" @");
      for (size_t i = 0; i < b.depth; i++) o.str(" ").hex(addr(b.frames[i]));
      o.str("\n");
    });
  }
  // The mappings, so that google-pprof finds each address's object file.
  o.str("\nMAPPED_LIBRARIES:\n");
  int maps = ::open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  if (maps < 0) return false;
  char buf[4096];
  for (;;) {
    ssize_t r = ::read(maps, buf, sizeof buf);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    o.bytes(buf, static_cast<size_t>(r));
  }
  ::close(maps);
  return o.ok();
}

// <prefix>.<pid>.<seq>.<kind><n>.heap, jemalloc's names (kind "m" for
// prof.dump, "i" for lg_prof_interval, "u" for prof_gdump, "s" -- ductile's
// -- for prof_signal, "f" without a number for the final dump).
void dump_name(char* out, size_t n, char kind, bool numbered) {
  char pid[24], seq[24], k[24];
  format_u64(static_cast<uint64_t>(getpid()), pid, sizeof pid);
  {
    LockGuard g(g_lock);
    uint64_t* kind_seq = kind == 'i' ? &g_idump_seq : kind == 'u' ? &g_udump_seq : kind == 's' ? &g_sdump_seq
                                                                                                : &g_mdump_seq;
    format_u64(g_dump_seq++, seq, sizeof seq);
    format_u64(numbered ? (*kind_seq)++ : 0, k, sizeof k);
  }
  size_t len = 0;
  auto put = [&](const char* s) {
    for (; *s && len + 1 < n; s++) out[len++] = *s;
  };
  put(g_prefix);
  put(".");
  put(pid);
  put(".");
  put(seq);
  put(".");
  char kk[2] = {kind, '\0'};
  put(kk);
  if (numbered) put(k);
  put(".heap");
  out[len] = '\0';
}

int dump_to(const char* path) {
  int fd = ::open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return EFAULT;
  bool ok = write_profile(fd);
  ok = ::close(fd) == 0 && ok;
  return ok ? 0 : EFAULT;
}

void write_wanted();

// The handler writes the dump itself where this thread is not inside the
// allocator (no lock of ours held, no call of ours under way: the dump
// takes the table's lock and writes with write(2), allocating nothing);
// else the thread's next allocation does. A signal that stops the program
// stops it after its dump.
void on_signal(int sig) {
  const int saved = errno;
  g_want.fetch_or(sig == g_stop_signal ? kWantSignal | kWantStop : kWantSignal, std::memory_order_relaxed);
  if (!t_busy && !core::inside_allocator_now()) write_wanted();
  errno = saved;
}

// Writes the dumps asked for (see g_want), outside any lock of ours.
void write_wanted() {
  const unsigned want = g_want.exchange(0, std::memory_order_acquire);
  if (want == 0 || g_prefix[0] == '\0') return;
  const bool was_busy = t_busy;
  t_busy = true;  // nothing this thread allocates meanwhile is sampled
  char name[kMaxPath];
  const struct {
    unsigned bit;
    char kind;
  } kinds[] = {{kWantInterval, 'i'}, {kWantGdump, 'u'}, {kWantSignal, 's'}};
  for (const auto& k : kinds) {
    if (!(want & k.bit)) continue;
    dump_name(name, sizeof name, k.kind, true);
    (void)dump_to(name);
  }
  t_busy = was_busy;
  if (want & kWantStop) {
    // Blocked while its handler runs: delivered, with its default action,
    // once the handler returns (or at once outside it).
    signal(g_stop_signal, SIG_DFL);
    raise(g_stop_signal);
  }
}

uint64_t splitmix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace

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
void init(const Options& o) noexcept {
  g_enabled = kProf && o.prof;
  g_final = o.prof_final;
  g_leak = o.prof_leak;
  std::memcpy(g_prefix, o.prof_prefix, sizeof g_prefix);
  g_prefix[sizeof g_prefix - 1] = '\0';
  g_lg.store(o.lg_prof_sample, std::memory_order_relaxed);
  g_active.store(g_enabled && o.prof_active, std::memory_order_release);
  g_lg_interval = o.lg_prof_interval;
  g_gdump.store(o.prof_gdump, std::memory_order_relaxed);
  if (g_enabled && o.prof_signal > 0 && g_prefix[0] != '\0') {
    // The handler writes the dump or leaves it to the next allocation (see
    // on_signal). SA_RESTART: the program's interrupted system calls go on.
    struct sigaction sa;
    std::memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    struct sigaction old;
    if (sigaction(o.prof_signal, &sa, &old) != 0) {
      warn("prof_signal: the signal's handler could not be set");
    } else {
      const int s = o.prof_signal;
      if (old.sa_handler == SIG_DFL && (s == SIGTERM || s == SIGINT || s == SIGHUP || s == SIGQUIT)) g_stop_signal = s;
    }
  }
  if (g_enabled && g_final && g_leak) {
    // Programs may close stderr in an atexit handler that runs first.
    int fd = fcntl(2, F_DUPFD_CLOEXEC, 64);
    if (fd >= 0) g_exit_fd = fd;
  }
}

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

void poll() noexcept {
  if (DUCTILE_UNLIKELY(g_want.load(std::memory_order_relaxed) != 0) && !t_busy) write_wanted();
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
    Bucket* b = bucket_for(frames, depth);
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

// ---- dumps --------------------------------------------------------------
int dump(const char* filename) noexcept {
  if (!g_enabled) return EFAULT;
  char name[kMaxPath];
  if (filename == nullptr) {
    if (g_prefix[0] == '\0') return EFAULT;
    dump_name(name, sizeof name, 'm', true);
    filename = name;
  }
  return dump_to(filename);
}

void at_exit() noexcept {
  if (!g_enabled || !g_final || g_prefix[0] == '\0') return;
  char name[kMaxPath];
  dump_name(name, sizeof name, 'f', false);
  const bool written = dump_to(name) == 0;
  if (!g_leak) return;
  const Totals t = live_totals();
  if (t.samples == 0) return;
  Out o(g_exit_fd);
  o.str("<ductile>: Leak approximation summary: ~").u64(static_cast<uint64_t>(t.est_bytes + 0.5));
  o.str(" bytes, ~").u64(static_cast<uint64_t>(t.est_objects + 0.5)).str(" objects, >= ").u64(t.stacks);
  o.str(" contexts\n");
  if (written) o.str("<ductile>: Run google-pprof on \"").str(name).str("\" for leak detail\n");
}

// ---- fork ---------------------------------------------------------------
void prefork() noexcept { g_lock.lock(); }
void postfork_parent() noexcept { g_lock.unlock(); }
void postfork_child() noexcept { g_lock.reinit_after_fork(); }

}  // namespace ductile::core::prof
