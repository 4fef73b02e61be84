// SPDX-License-Identifier: BSD-2-Clause
// tree: a long-lived tree of small nodes, built, mutated and torn down
// (written for ductile).
//
// Builds a std::map<uint64_t, std::string> of N entries (values of 16-80
// bytes, so each node and each string is a heap block), mutates it with N
// random operations (erase, insert, or reassign a value of another length),
// walks it, and tears it down; 2 * scale rounds of that.
//
// Usage: tree [scale [entries]]   (defaults 1, 200000)
#include <cstdint>
#include <map>
#include <string>

#include "wl.h"

int main(int argc, char **argv) {
  double scale = wl_scale(argc, argv);
  long entries = wl_arg(argc, argv, 2, 200000);
  long rounds = static_cast<long>(2 * scale + 0.5);
  if (rounds < 1) rounds = 1;
  if (entries < 1) return 2;
  wl_rng r;
  wl_seed(&r, 77);
  unsigned long check = 0;
  double t0 = wl_now();
  for (long round = 0; round < rounds; round++) {
    std::map<uint64_t, std::string> m;
    uint64_t keyspace = static_cast<uint64_t>(entries) * 4;
    while (static_cast<long>(m.size()) < entries) {
      m.emplace(wl_below(&r, keyspace), std::string(wl_range(&r, 16, 80), 'x'));
    }
    for (long op = 0; op < entries; op++) {
      uint64_t k = wl_below(&r, keyspace);
      switch (wl_below(&r, 3)) {
        case 0: m.erase(m.lower_bound(k) == m.end() ? m.begin() : m.lower_bound(k)); break;
        case 1: m[k] = std::string(wl_range(&r, 16, 80), 'y'); break;
        default: {
          auto it = m.lower_bound(k);
          if (it != m.end()) it->second.assign(wl_range(&r, 16, 120), 'z');
        }
      }
    }
    for (const auto &kv : m) check += kv.second.size();
  }
  double secs = wl_now() - t0;
  char extra[64];
  snprintf(extra, sizeof extra, "rounds=%ld entries=%ld check=%lu", rounds, entries, check);
  wl_report("tree", secs, extra);
  return 0;
}
