// What the kernel says about our own address space (/proc/self/maps), for
// tests that check protections -- under strict overcommit, what is writable
// is what is charged.
#pragma once

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>

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

}  // namespace ductile::test
