// SPDX-License-Identifier: BSD-2-Clause
// vecstr: growing vectors and strings (written for ductile).
//
// Keeps 256 containers live; each operation replaces a random one by a new
// std::vector<uint32_t> grown by push_back, or a std::string grown by
// appends, to a log-uniform length (up to 64 Ki elements / 256 KiB), so the
// containers' doubling reallocations cross the small, medium and (for the
// longest) large sizes.
//
// Usage: vecstr [scale]
// Work: 40000 * scale containers.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "wl.h"

namespace {
struct Item {
  std::vector<uint32_t> v;
  std::string s;
};
}  // namespace

int main(int argc, char **argv) {
  double scale = wl_scale(argc, argv);
  long ops = static_cast<long>(40000 * scale);
  if (ops < 1) ops = 1;
  wl_rng r;
  wl_seed(&r, 2024);
  std::vector<std::unique_ptr<Item>> live(256);
  unsigned long check = 0;
  double t0 = wl_now();
  for (long op = 0; op < ops; op++) {
    auto item = std::make_unique<Item>();
    if (wl_below(&r, 2)) {
      size_t n = wl_logrange(&r, 1, 65536);
      for (size_t i = 0; i < n; i++) item->v.push_back(static_cast<uint32_t>(i));
      check += item->v.back();
    } else {
      size_t n = wl_logrange(&r, 1, 262144);
      while (item->s.size() < n) {
        size_t piece = wl_range(&r, 1, 24);
        item->s.append(piece, static_cast<char>('a' + piece));
      }
      check += static_cast<unsigned char>(item->s.back());
    }
    live[wl_below(&r, live.size())] = std::move(item);
  }
  double secs = wl_now() - t0;
  live.clear();
  char extra[64];
  snprintf(extra, sizeof extra, "containers=%ld check=%lu", ops, check & 0xff);
  wl_report("vecstr", secs, extra);
  return 0;
}
