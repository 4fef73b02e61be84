#include "core/options.h"

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

bool parse_bool(const char* s, size_t n, bool* out) {
  if ((n == 4 && !std::strncmp(s, "true", 4)) || (n == 1 && s[0] == '1')) return *out = true, true;
  if ((n == 5 && !std::strncmp(s, "false", 5)) || (n == 1 && s[0] == '0')) return *out = false, true;
  return false;
}

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
bool set_prof_prefix(Options& o, const char* v, size_t n) {
  if (n >= kMaxPrefix) return false;
  std::memcpy(o.prof_prefix, v, n);
  o.prof_prefix[n] = '\0';
  return true;
}

struct Entry {
  const char* name;
  bool (*set)(Options&, const char*, size_t);
};

constexpr Entry kTable[] = {
    {"decay_ms", set_decay},
    {"thp", set_thp},
    {"huge_threshold", set_threshold},
    {"tcache", set_tcache},
    {"hardened", set_hardened},
    {"stats_print", set_stats_print},
    {"prefault", set_prefault},
    {"bin_sets", set_bin_sets},
    {"background_thread", set_background_thread},
    {"prof", set_prof},
    {"prof_active", set_prof_active},
    {"lg_prof_sample", set_lg_prof_sample},
    {"prof_prefix", set_prof_prefix},
    {"prof_final", set_prof_final},
    {"prof_leak", set_prof_leak},
};

void warn_entry(const char* what, const char* s, size_t n) {
  char buf[160];
  size_t len = 0;
  auto put = [&](const char* t, size_t k) {
    for (size_t i = 0; i < k && len + 1 < sizeof buf; i++) buf[len++] = t[i];
  };
  put("DUCTILE_CONF: ", 14);
  put(what, std::strlen(what));
  put(" \"", 2);
  put(s, n > 64 ? 64 : n);
  put("\" ignored", 9);
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
        warn_entry("bad value for", p, len);
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
  else return false;
  return true;
}

}  // namespace ductile::core
