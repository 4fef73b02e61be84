// SPDX-License-Identifier: BSD-2-Clause
// The profiler started from the options (with its prof_signal handler), and
// heap profiles written out: a dump's text and name, the files, the dumps
// asked for, prof.dump, and the final dump with its leak summary.
#include "core/prof.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "base/lock.h"
#include "core/prof_table.h"
#include "core/state.h"

namespace ductile::core::prof {

namespace {

// The dumps' sequence numbers (g_lock).
uint64_t g_dump_seq = 0;   // every dump of this process
uint64_t g_mdump_seq = 0;  // prof.dump's
uint64_t g_idump_seq = 0;  // lg_prof_interval's
uint64_t g_udump_seq = 0;  // prof_gdump's
uint64_t g_sdump_seq = 0;  // prof_signal's

// ---- writing a dump ----------------------------------------------------
// "<n>: <bytes> [<n>: <bytes>]", the counts of google-pprof's heap format.
void counts(Out& o, uint64_t ln, uint64_t lb, uint64_t tn, uint64_t tb) {
  o.u64(ln).str(": ").u64(lb).str(" [").u64(tn).str(": ").u64(tb).str("]");
}

bool write_to_fd(int fd, Bucket* const* table, const char* type) {
  Out o(fd);
  {
    LockGuard g(g_lock);
    uint64_t ln = 0, lb = 0, tn = 0, tb = 0;
    for_each_bucket(table, [&](const Bucket& b) { ln += b.live_n, lb += b.live_bytes, tn += b.total_n, tb += b.total_bytes; });
    o.str("heap profile: ");
    counts(o, ln, lb, tn, tb);
    o.str(" @ ").str(type).str("\n");
    for_each_bucket(table, [&](const Bucket& b) {
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

}  // namespace

int write_table(const char* path, Bucket* const* table, const char* type) {
  int fd = ::open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return EFAULT;
  bool ok = write_to_fd(fd, table, type);
  ok = ::close(fd) == 0 && ok;
  return ok ? 0 : EFAULT;
}

// Heap profiles are jemalloc's names, suffix "heap": kind "m" for
// prof.dump, "i" for lg_prof_interval, "u" for prof_gdump, "s" -- ductile's
// -- for prof_signal, "f" without a number for the final dump.
void dump_name(char* out, size_t n, char kind, bool numbered, const char* suffix) {
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
  put(".");
  put(suffix);
  out[len] = '\0';
}

namespace {

int dump_to(const char* path) {
  // heap_v2/<rate>: samples of a Poisson process over bytes, which
  // google-pprof scales back up by 1 / (1 - exp(-size / rate)).
  char type[40] = "heap_v2/";
  (void)format_u64(rate(), type + 8, sizeof type - 8);
  return write_table(path, g_table, type);
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
    dump_name(name, sizeof name, k.kind, true, "heap");
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

}  // namespace

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
  if ((g_enabled && g_final && g_leak) || (kProf && o.growth_prof)) {
    // Programs may close stderr in an atexit handler that runs first.
    int fd = fcntl(2, F_DUPFD_CLOEXEC, 64);
    if (fd >= 0) g_exit_fd = fd;
  }
}

void poll() noexcept {
  if (DUCTILE_UNLIKELY(g_want.load(std::memory_order_relaxed) != 0) && !t_busy) write_wanted();
}

// ---- dumps --------------------------------------------------------------
int dump(const char* filename) noexcept {
  if (!g_enabled) return EFAULT;
  char name[kMaxPath];
  if (filename == nullptr) {
    if (g_prefix[0] == '\0') return EFAULT;
    dump_name(name, sizeof name, 'm', true, "heap");
    filename = name;
  }
  return dump_to(filename);
}

void at_exit() noexcept {
  if (!g_enabled || !g_final || g_prefix[0] == '\0') return;
  char name[kMaxPath];
  dump_name(name, sizeof name, 'f', false, "heap");
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

}  // namespace ductile::core::prof
