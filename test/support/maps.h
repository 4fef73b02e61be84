/* SPDX-License-Identifier: BSD-2-Clause */
// What the kernel says about our own address space (/proc/self/maps and
// statm), for tests that check protections -- under strict overcommit, what
// is writable is what is charged -- and resident pages.
#pragma once

#include <sys/mman.h>
#include <sys/prctl.h>

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "base/common.h"

namespace ductile::test {

// A huge-page-aligned address with `bytes` of free address space at it,
// where the kernel itself places mappings: free in every build (a fixed
// address may be a sanitizer's shadow). The range is one the kernel gave
// and took back; 0 where it gave none.
inline uintptr_t free_hint(size_t bytes) {
  void* probe = ::mmap(nullptr, bytes + kHugePage, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (probe == MAP_FAILED) return 0;
  ::munmap(probe, bytes + kHugePage);
  return align_up(addr(probe), kHugePage);
}

// Calls f(x, y) for each piece [x, y) of [lo, hi) that is mapped writable.
template <typename F>
void for_each_writable(uintptr_t lo, uintptr_t hi, F f) {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    unsigned long a = 0, b = 0;
    char perms[8] = {};
    if (std::sscanf(line.c_str(), "%lx-%lx %7s", &a, &b, perms) != 3 || perms[1] != 'w') continue;
    const uintptr_t x = a > lo ? a : lo, y = b < hi ? b : hi;
    if (y > x) f(x, y);
  }
}

// Bytes of [lo, hi) mapped writable: the commit charge of a private
// anonymous range under vm.overcommit_memory=2.
inline size_t writable_bytes(uintptr_t lo, uintptr_t hi) {
  size_t n = 0;
  for_each_writable(lo, hi, [&](uintptr_t x, uintptr_t y) { n += y - x; });
  return n;
}

// Pages of [lo, hi) that hold a guard marker (MADV_GUARD_INSTALL): bit 58
// of their /proc/self/pagemap entry (Linux 6.14). 0 where pagemap cannot be
// read, or on kernels that have no markers (none can be there).
inline size_t guard_marked_pages(uintptr_t lo, uintptr_t hi) {
  FILE* f = std::fopen("/proc/self/pagemap", "rb");
  if (f == nullptr) return 0;
  size_t n = 0;
  std::vector<uint64_t> v(512);
  for (uintptr_t a = lo / kPage; a < hi / kPage;) {
    const size_t want = hi / kPage - a < v.size() ? hi / kPage - a : v.size();
    if (std::fseek(f, static_cast<long>(a * sizeof(uint64_t)), SEEK_SET) != 0) break;
    const size_t got = std::fread(v.data(), sizeof(uint64_t), want, f);
    for (size_t i = 0; i < got; i++) n += (v[i] >> 58) & 1;
    if (got < want) break;
    a += got;
  }
  std::fclose(f);
  return n;
}

// Bytes of [lo, hi) a program can use: mapped writable, and no guard
// marker there. A guard is either (hardened mode: mprotect, or a marker).
inline size_t open_bytes(uintptr_t lo, uintptr_t hi) {
  size_t n = 0;
  for_each_writable(lo, hi, [&](uintptr_t x, uintptr_t y) { n += y - x - guard_marked_pages(x, y) * kPage; });
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

// Mappings that overlap [lo, hi): a range that mprotect split counts its
// pieces. Unlike the count of the whole process's, another part of the
// program (a sanitizer's runtime) cannot move it.
inline size_t mapping_count(uintptr_t lo, uintptr_t hi) {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  size_t n = 0;
  while (std::getline(maps, line)) {
    unsigned long a = 0, b = 0;
    if (std::sscanf(line.c_str(), "%lx-%lx", &a, &b) == 2 && a < hi && b > lo) n++;
  }
  return n;
}

// Lines of /proc/self/maps: the process's mappings, which vm.max_map_count
// (/proc/sys/vm/max_map_count) limits.
inline size_t mapping_count() { return mapping_count(0, UINTPTR_MAX); }

inline size_t max_map_count() {
  std::ifstream f("/proc/sys/vm/max_map_count");
  size_t n = 0;
  f >> n;
  return n;
}

// Transparent huge pages off for this process while it lives (prctl
// PR_SET_THP_DISABLE; the previous setting is restored). khugepaged may
// collapse an advised range that has one page resident into a whole huge
// page at any moment; a test that counts the pages an operation made
// resident turns THP off for that count to be the operation's own.
class NoHugePages {
 public:
  NoHugePages() : was_(::prctl(PR_GET_THP_DISABLE, 0, 0, 0, 0) == 1) {
    ok_ = ::prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0) == 0;
  }
  ~NoHugePages() {
    if (!was_) ::prctl(PR_SET_THP_DISABLE, 0, 0, 0, 0);
  }
  NoHugePages(const NoHugePages&) = delete;
  NoHugePages& operator=(const NoHugePages&) = delete;
  bool ok() const { return ok_; }

 private:
  bool was_;
  bool ok_ = false;
};

// What khugepaged may do to [p, p + n) at any moment: collapse it into huge
// pages (MADV_COLLAPSE, Linux 6.1; the kernel refuses it while THP are off,
// and older kernels do not know it). Tests call it where a collapse would
// change what they count.
inline void collapse_as_khugepaged_may(void* p, size_t n) {
  constexpr int kMadvCollapse = 25;
  (void)::madvise(p, n, kMadvCollapse);
}

}  // namespace ductile::test
