// SPDX-License-Identifier: BSD-2-Clause
// The option table (core/options.h): each option's name, parser and
// printer, and the parser of DUCTILE_CONF strings.
#include "core/options.h"

#include <signal.h>

#include <cstring>

#include "small/size_classes.h"

namespace ductile::core {

namespace {

bool parse_u64(const char* s, size_t n, uint64_t* out) {
  if (n == 0) return false;
  uint64_t v = 0;
  size_t i = 0;
  for (; i < n && s[i] >= '0' && s[i] <= '9'; i++) {
    uint64_t d = static_cast<uint64_t>(s[i] - '0');
    if (v > (UINT64_MAX - d) / 10) return false;
    v = v * 10 + d;
  }
  if (i == 0) return false;
  // Optional size suffix: k, m, g (powers of 1024).
  if (i + 1 == n) {
    unsigned shift = 0;
    switch (s[i]) {
      case 'k': case 'K': shift = 10; break;
      case 'm': case 'M': shift = 20; break;
      case 'g': case 'G': shift = 30; break;
      default: return false;
    }
    if (v > (UINT64_MAX >> shift)) return false;
    v <<= shift;
    i++;
  }
  if (i != n) return false;
  *out = v;
  return true;
}

// A whole number no larger than `most`.
bool parse_at_most(const char* s, size_t n, uint64_t most, size_t* out) {
  uint64_t v;
  if (!parse_u64(s, n, &v) || v > most) return false;
  *out = static_cast<size_t>(v);
  return true;
}

bool is(const char* s, size_t n, const char* word) { return std::strlen(word) == n && !std::strncmp(s, word, n); }

// The usual words: 1/0, true/false, yes/no, on/off.
bool parse_bool(const char* s, size_t n, bool* out) {
  if (is(s, n, "1") || is(s, n, "true") || is(s, n, "yes") || is(s, n, "on")) return *out = true, true;
  if (is(s, n, "0") || is(s, n, "false") || is(s, n, "no") || is(s, n, "off")) return *out = false, true;
  return false;
}

constexpr struct {
  const char* name;  // without "SIG"
  int number;
} kSignals[] = {
    {"HUP", SIGHUP},   {"INT", SIGINT},   {"QUIT", SIGQUIT},     {"USR1", SIGUSR1}, {"USR2", SIGUSR2},
    {"ALRM", SIGALRM}, {"TERM", SIGTERM}, {"WINCH", SIGWINCH},   {"URG", SIGURG},   {"PROF", SIGPROF},
    {"VTALRM", SIGVTALRM}, {"IO", SIGIO}, {"PWR", SIGPWR},
};

bool set_decay(Options& o, const char* v, size_t n) {
  uint64_t x;
  if (!parse_u64(v, n, &x) || x > UINT64_MAX / 1000000u) return false;
  o.decay_ms = x;
  return true;
}
bool set_thp(Options& o, const char* v, size_t n) {
  if (n == 4 && !std::strncmp(v, "auto", 4)) o.thp = huge::ThpPolicy::kAuto;
  else if (n == 6 && !std::strncmp(v, "always", 6)) o.thp = huge::ThpPolicy::kAlways;
  else if (n == 5 && !std::strncmp(v, "never", 5)) o.thp = huge::ThpPolicy::kNever;
  else return false;
  return true;
}
bool set_threshold(Options& o, const char* v, size_t n) {
  uint64_t x;
  // Below the largest small class there would be no medium classes left;
  // above the class table there are no classes to round to.
  if (!parse_u64(v, n, &x) || x <= small::kMaxSmall || x > small::kMaxClassSize) return false;
  o.huge_threshold = align_up(x, kPage);
  return true;
}
bool set_tcache(Options& o, const char* v, size_t n) { return parse_bool(v, n, &o.tcache); }
bool set_hardened(Options& o, const char* v, size_t n) { return parse_bool(v, n, &o.hardened); }
bool set_freed_fill(Options& o, const char* v, size_t n) { return parse_at_most(v, n, UINT32_MAX, &o.freed_fill); }
bool set_stats_print(Options& o, const char* v, size_t n) { return parse_bool(v, n, &o.stats_print); }
bool set_prefault(Options& o, const char* v, size_t n) { return parse_bool(v, n, &o.prefault); }
bool set_background_thread(Options& o, const char* v, size_t n) { return parse_bool(v, n, &o.background_thread); }
bool set_bin_sets(Options& o, const char* v, size_t n) { return parse_at_most(v, n, kMaxBinSetsOption, &o.bin_sets); }

bool set_prof(Options& o, const char* v, size_t n) { return parse_bool(v, n, &o.prof); }
bool set_prof_active(Options& o, const char* v, size_t n) { return parse_bool(v, n, &o.prof_active); }
bool set_prof_final(Options& o, const char* v, size_t n) { return parse_bool(v, n, &o.prof_final); }
bool set_prof_leak(Options& o, const char* v, size_t n) { return parse_bool(v, n, &o.prof_leak); }
// jemalloc's bound: the mean interval must fit in 64 bits.
bool set_lg_prof_sample(Options& o, const char* v, size_t n) { return parse_at_most(v, n, 63, &o.lg_prof_sample); }
bool set_lg_prof_interval(Options& o, const char* v, size_t n) {
  size_t x;
  if (is(v, n, "-1")) return o.lg_prof_interval = -1, true;
  if (!parse_at_most(v, n, 63, &x)) return false;
  o.lg_prof_interval = static_cast<int>(x);
  return true;
}
bool set_prof_gdump(Options& o, const char* v, size_t n) { return parse_bool(v, n, &o.prof_gdump); }
bool set_prof_signal(Options& o, const char* v, size_t n) {
  const int sig = parse_signal(v, n);
  if (sig < 0) return false;
  o.prof_signal = sig;
  return true;
}
bool set_growth_prof(Options& o, const char* v, size_t n) { return parse_bool(v, n, &o.growth_prof); }
bool set_lg_growth_sample(Options& o, const char* v, size_t n) { return parse_at_most(v, n, 63, &o.lg_growth_sample); }
bool set_stats_print_opts(Options& o, const char* v, size_t n) {
  if (n >= kMaxStatsOpts) return false;
  // malloc_stats_print's letters ductile reads: J (JSON), b (no bins);
  // jemalloc's others are accepted and change nothing.
  for (size_t i = 0; i < n; i++)
    if (!std::strchr("Jgmdablxeh", v[i])) return false;
  std::memcpy(o.stats_print_opts, v, n);
  o.stats_print_opts[n] = '\0';
  return true;
}
bool set_prof_prefix(Options& o, const char* v, size_t n) {
  if (n >= kMaxPrefix) return false;
  std::memcpy(o.prof_prefix, v, n);
  o.prof_prefix[n] = '\0';
  return true;
}

struct Entry {
  const char* name;
  bool (*set)(Options&, const char*, size_t);
  OptionKind kind;
  const char* allowed;  // what a "bad value" warning says the values are
};

constexpr const char* kBoolWords = "true or false (1/0, yes/no, on/off)";

constexpr Entry kTable[] = {
    {"decay_ms", set_decay, OptionKind::kNumber, "0 to 18446744073709 milliseconds"},
    {"thp", set_thp, OptionKind::kText, "auto, always or never"},
    {"huge_threshold", set_threshold, OptionKind::kNumber, "16385 to 4194304 bytes (k, m, g suffixes)"},
    {"tcache", set_tcache, OptionKind::kBool, kBoolWords},
    {"hardened", set_hardened, OptionKind::kBool, kBoolWords},
    {"freed_fill", set_freed_fill, OptionKind::kNumber, "0 (none) to 4294967295"},
    {"stats_print", set_stats_print, OptionKind::kBool, kBoolWords},
    {"stats_print_opts", set_stats_print_opts, OptionKind::kText, "up to 31 of the letters Jgmdablxeh"},
    {"prefault", set_prefault, OptionKind::kBool, kBoolWords},
    {"bin_sets", set_bin_sets, OptionKind::kNumber, "0 (one per CPU) to 8"},
    {"background_thread", set_background_thread, OptionKind::kBool, kBoolWords},
    {"prof", set_prof, OptionKind::kBool, kBoolWords},
    {"prof_active", set_prof_active, OptionKind::kBool, kBoolWords},
    {"lg_prof_sample", set_lg_prof_sample, OptionKind::kNumber, "0 to 63"},
    {"prof_prefix", set_prof_prefix, OptionKind::kText, "up to 255 bytes"},
    {"prof_final", set_prof_final, OptionKind::kBool, kBoolWords},
    {"prof_leak", set_prof_leak, OptionKind::kBool, kBoolWords},
    {"lg_prof_interval", set_lg_prof_interval, OptionKind::kNumber, "-1 (off) to 63"},
    {"prof_gdump", set_prof_gdump, OptionKind::kBool, kBoolWords},
    {"prof_signal", set_prof_signal, OptionKind::kText, "a signal name (SIGUSR2, USR2), a number up to 64 but KILL, STOP, SEGV and BUS, or none"},
    {"growth_prof", set_growth_prof, OptionKind::kBool, kBoolWords},
    {"lg_growth_sample", set_lg_growth_sample, OptionKind::kNumber, "0 to 63"},
};

// "DUCTILE_CONF: <what> "<entry>" ignored[ (<allowed>)]": an entry longer
// than 64 bytes is cut, and the cut ends in an ellipsis.
void warn_entry(const char* what, const char* s, size_t n, const char* allowed = nullptr) {
  char buf[256];
  size_t len = 0;
  auto put = [&](const char* t, size_t k) {
    for (size_t i = 0; i < k && len + 1 < sizeof buf; i++) buf[len++] = t[i];
  };
  put("DUCTILE_CONF: ", 14);
  put(what, std::strlen(what));
  put(" \"", 2);
  if (n > 64) {
    put(s, 64);
    put("\u2026", std::strlen("\u2026"));
  } else {
    put(s, n);
  }
  put("\" ignored", 9);
  if (allowed != nullptr) {
    put(" (allowed: ", 11);
    put(allowed, std::strlen(allowed));
    put(")", 1);
  }
  buf[len] = '\0';
  warn(buf);
}

}  // namespace

size_t parse_options(const char* conf, Options& opts) noexcept {
  if (conf == nullptr) return 0;
  size_t rejected = 0;
  const char* p = conf;
  while (*p) {
    const char* end = std::strchr(p, ',');
    size_t len = end ? static_cast<size_t>(end - p) : std::strlen(p);
    const char* colon = static_cast<const char*>(std::memchr(p, ':', len));
    if (len == 0) {
      // tolerate empty entries ("a:1,,b:2")
    } else if (colon == nullptr) {
      warn_entry("malformed entry", p, len);
      rejected++;
    } else {
      size_t klen = static_cast<size_t>(colon - p);
      const Entry* found = nullptr;
      for (const Entry& e : kTable)
        if (std::strlen(e.name) == klen && !std::strncmp(e.name, p, klen)) found = &e;
      if (found == nullptr) {
        warn_entry("unknown option", p, len);
        rejected++;
      } else if (!found->set(opts, colon + 1, len - klen - 1)) {
        warn_entry("bad value for", p, len, found->allowed);
        rejected++;
      }
    }
    if (!end) break;
    p = end + 1;
  }
  return rejected;
}

size_t option_count() noexcept { return sizeof kTable / sizeof kTable[0]; }

const char* option_name(size_t i) noexcept { return i < option_count() ? kTable[i].name : nullptr; }

OptionKind option_kind(size_t i) noexcept { return i < option_count() ? kTable[i].kind : OptionKind::kText; }

int parse_signal(const char* s, size_t n) noexcept {
  if (is(s, n, "none") || is(s, n, "0")) return 0;
  if (n > 3 && !std::strncmp(s, "SIG", 3)) s += 3, n -= 3;
  for (const auto& sig : kSignals)
    if (is(s, n, sig.name)) return sig.number;
  size_t x;
  if (parse_at_most(s, n, 64, &x) && x >= 1 && x != SIGKILL && x != SIGSTOP && x != SIGSEGV && x != SIGBUS)
    return static_cast<int>(x);
  return -1;
}

bool set_option(Options& opts, const char* name, const char* value, size_t n) noexcept {
  for (const Entry& e : kTable) {
    if (std::strcmp(e.name, name) != 0) continue;
    Options tmp = opts;
    if (!e.set(tmp, value, n)) return false;
    opts = tmp;
    return true;
  }
  return false;
}

bool option_to_string(const Options& o, const char* name, char* buf, size_t n) noexcept {
  if (n == 0) return false;
  auto copy = [&](const char* s) {
    size_t i = 0;
    for (; s[i] && i + 1 < n; i++) buf[i] = s[i];
    buf[i] = '\0';
  };
  if (!std::strcmp(name, "decay_ms")) (void)format_u64(o.decay_ms, buf, n);
  else if (!std::strcmp(name, "huge_threshold")) (void)format_u64(o.huge_threshold, buf, n);
  else if (!std::strcmp(name, "thp"))
    copy(o.thp == huge::ThpPolicy::kAuto ? "auto" : o.thp == huge::ThpPolicy::kAlways ? "always" : "never");
  else if (!std::strcmp(name, "tcache")) copy(o.tcache ? "true" : "false");
  else if (!std::strcmp(name, "hardened")) copy(o.hardened ? "true" : "false");
  else if (!std::strcmp(name, "freed_fill")) (void)format_u64(o.freed_fill, buf, n);
  else if (!std::strcmp(name, "stats_print")) copy(o.stats_print ? "true" : "false");
  else if (!std::strcmp(name, "prefault")) copy(o.prefault ? "true" : "false");
  else if (!std::strcmp(name, "bin_sets")) (void)format_u64(o.bin_sets, buf, n);
  else if (!std::strcmp(name, "background_thread")) copy(o.background_thread ? "true" : "false");
  else if (!std::strcmp(name, "prof")) copy(o.prof ? "true" : "false");
  else if (!std::strcmp(name, "prof_active")) copy(o.prof_active ? "true" : "false");
  else if (!std::strcmp(name, "lg_prof_sample")) (void)format_u64(o.lg_prof_sample, buf, n);
  else if (!std::strcmp(name, "prof_prefix")) copy(o.prof_prefix);
  else if (!std::strcmp(name, "prof_final")) copy(o.prof_final ? "true" : "false");
  else if (!std::strcmp(name, "prof_leak")) copy(o.prof_leak ? "true" : "false");
  else if (!std::strcmp(name, "stats_print_opts")) copy(o.stats_print_opts);
  else if (!std::strcmp(name, "prof_gdump")) copy(o.prof_gdump ? "true" : "false");
  else if (!std::strcmp(name, "growth_prof")) copy(o.growth_prof ? "true" : "false");
  else if (!std::strcmp(name, "lg_growth_sample")) (void)format_u64(o.lg_growth_sample, buf, n);
  else if (!std::strcmp(name, "lg_prof_interval")) {
    if (o.lg_prof_interval < 0) copy("-1");
    else (void)format_u64(static_cast<uint64_t>(o.lg_prof_interval), buf, n);
  } else if (!std::strcmp(name, "prof_signal")) {
    const char* known = nullptr;
    for (const auto& sig : kSignals)
      if (sig.number == o.prof_signal) known = sig.name;
    if (o.prof_signal == 0) {
      copy("none");
    } else if (known != nullptr && n > 3) {
      copy("SIG");
      size_t i = 3;
      for (; *known && i + 1 < n; i++) buf[i] = *known++;
      buf[i] = '\0';
    } else {
      (void)format_u64(static_cast<uint64_t>(o.prof_signal), buf, n);
    }
  } else return false;
  return true;
}

}  // namespace ductile::core
