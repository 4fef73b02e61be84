// What the kernel says about our own address space (/proc/self/maps and
// statm), for tests that check protections -- under strict overcommit, what
// is writable is what is charged -- and resident pages.
#pragma once

#include <sys/mman.h>

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "base/common.h"

namespace ductile::test {

// Bytes of [lo, hi) mapped writable: the commit charge of a private
// anonymous range under vm.overcommit_memory=2.
inline size_t writable_bytes(uintptr_t lo, uintptr_t hi) {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  size_t n = 0;
  while (std::getline(maps, line)) {
    unsigned long a = 0, b = 0;
    char perms[8] = {};
    if (std::sscanf(line.c_str(), "%lx-%lx %7s", &a, &b, perms) != 3 || perms[1] != 'w') continue;
    const uintptr_t x = a > lo ? a : lo, y = b < hi ? b : hi;
    if (y > x) n += y - x;
  }
  return n;
}

// Pages of this process resident now (the second field of
// /proc/self/statm); -1 where it cannot be read.
inline long resident_pages() {
  FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) return -1;
  long size = 0, resident = 0;
  if (std::fscanf(f, "%ld %ld", &size, &resident) != 2) resident = -1;
  std::fclose(f);
  return resident;
}

// Pages of [p, p + n) in memory now (mincore); SIZE_MAX where it cannot be asked.
inline size_t resident_pages(const void* p, size_t n) {
  std::vector<unsigned char> v((n + kPage - 1) / kPage);
  if (::mincore(const_cast<void*>(p), n, v.data()) != 0) return SIZE_MAX;
  size_t r = 0;
  for (unsigned char c : v) r += c & 1;
  return r;
}

// Lines of /proc/self/maps: the process's mappings, which vm.max_map_count
// (/proc/sys/vm/max_map_count) limits.
inline size_t mapping_count() {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  size_t n = 0;
  while (std::getline(maps, line)) n++;
  return n;
}

inline size_t max_map_count() {
  std::ifstream f("/proc/sys/vm/max_map_count");
  size_t n = 0;
  f >> n;
  return n;
}

}  // namespace ductile::test
