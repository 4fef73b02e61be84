// SPDX-License-Identifier: BSD-2-Clause
#include "support/fake_kernel.h"

#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <utility>

namespace ductile::test {

namespace {

constexpr int kPidfdSelf = -10000;
constexpr int kNoreplace = 0x100000;  // MAP_FIXED_NOREPLACE
}  // namespace

void FakeKernel::fail(Sys sys, int err, int times, int skip) {
  std::lock_guard<std::mutex> g(mu_);
  failures_.push_back({sys, err, times, skip});
}

void FakeKernel::fail_nth(uint64_t n, int err) {
  nth_err_.store(err, std::memory_order_relaxed);
  nth_seen_.store(0, std::memory_order_relaxed);
  nth_fired_.store(false, std::memory_order_relaxed);
  nth_.store(n, std::memory_order_release);
}

void FakeKernel::clear_failures() {
  std::lock_guard<std::mutex> g(mu_);
  failures_.clear();
}

size_t FakeKernel::count(Sys sys) const {
  std::lock_guard<std::mutex> g(mu_);
  size_t n = 0;
  for (const auto& c : calls_) n += c.sys == sys;
  return n;
}

std::vector<SysCall> FakeKernel::calls() const {
  std::lock_guard<std::mutex> g(mu_);
  return calls_;
}

void FakeKernel::reset_calls() {
  std::lock_guard<std::mutex> g(mu_);
  calls_.clear();
}

int FakeKernel::record(Sys sys, void* addr, size_t len, int arg) {
  int nth_err = 0;
  if (sys != Sys::kPidfdOpen) {
    uint64_t seen = nth_seen_.fetch_add(1, std::memory_order_relaxed) + 1;
    if (seen == nth_.load(std::memory_order_acquire)) {
      nth_fired_.store(true, std::memory_order_relaxed);
      nth_err = nth_err_.load(std::memory_order_relaxed);
    }
  }
  std::lock_guard<std::mutex> g(mu_);
  if (log_calls) calls_.push_back({sys, addr, len, arg});
  if (nth_err) return nth_err;
  for (auto& f : failures_) {
    if (f.sys != sys || f.times == 0) continue;
    if (f.skip > 0) {
      f.skip--;
      continue;
    }
    f.times--;
    return f.err;
  }
  return 0;
}

// ---- the mapping model

namespace {
constexpr uintptr_t kPageMask = 4095;
uintptr_t page_end(uintptr_t a, size_t len) { return (a + len + kPageMask) & ~kPageMask; }
}  // namespace

size_t FakeKernel::mappings() const {
  std::lock_guard<std::mutex> g(mu_);
  return segs_.size() + other_mappings;
}

size_t FakeKernel::peak_mappings() const {
  std::lock_guard<std::mutex> g(mu_);
  return peak_;
}

size_t FakeKernel::map_refusals() const {
  std::lock_guard<std::mutex> g(mu_);
  return refusals_;
}

size_t FakeKernel::count_mappings() noexcept {
  // Not an ifstream: this runs inside the allocator (under its locks), where
  // ductile is the test's malloc, so it must not allocate.
  if (!model_on()) return os::count_proc_self_maps();
  return mappings();
}

void FakeKernel::split_at(Segs& m, uintptr_t a) {
  auto it = m.upper_bound(a);
  if (it == m.begin()) return;
  --it;
  if (it->first < a && a < it->second.end) {
    Seg tail = it->second;
    it->second.end = a;
    m.emplace(a, tail);
  }
}

void FakeKernel::merge_around(Segs& m, uintptr_t a, uintptr_t b) {
  auto it = m.lower_bound(a);
  if (it != m.begin()) --it;
  while (it != m.end() && it->first <= b) {
    auto next = std::next(it);
    if (next == m.end()) break;
    if (it->second.end == next->first && it->second.same(next->second)) {
      it->second.end = next->second.end;
      m.erase(next);
    } else {
      it = next;
    }
  }
}

void FakeKernel::apply(Segs& m, uintptr_t a, uintptr_t b, Change c, int prot) {
  split_at(m, a);
  split_at(m, b);
  if (c == Change::kMap || c == Change::kUnmap) {
    m.erase(m.lower_bound(a), m.lower_bound(b));
    if (c == Change::kMap) m.emplace(a, Seg{b, prot, false, 0});
  } else {
    for (auto it = m.lower_bound(a); it != m.end() && it->first < b; ++it) {
      if (c == Change::kProtect) it->second.prot = prot;
      if (c == Change::kHuge) it->second.huge = true;
      if (c == Change::kNoHuge) it->second.huge = false;
    }
  }
  merge_around(m, a, b);
}

long FakeKernel::delta(uintptr_t a, uintptr_t b, Change c, int prot) const {
  // Merges reach only the segments next to the range: a copy of those is enough.
  Segs local;
  auto it = segs_.lower_bound(a);
  if (it != segs_.begin()) --it;
  for (; it != segs_.end(); ++it) {
    local.insert(*it);
    if (it->first > b) break;
  }
  const long before = static_cast<long>(local.size());
  apply(local, a, b, c, prot);
  return static_cast<long>(local.size()) - before;
}

bool FakeKernel::admit(long d) {
  if (static_cast<long>(segs_.size() + other_mappings) + d > static_cast<long>(map_limit)) {
    refusals_++;
    errno = ENOMEM;
    return false;
  }
  return true;
}

void FakeKernel::commit(uintptr_t a, uintptr_t b, Change c, int prot) {
  apply(segs_, a, b, c, prot);
  if (segs_.size() + other_mappings > peak_) peak_ = segs_.size() + other_mappings;
}

bool FakeKernel::admit(const Segs& next) {
  if (next.size() + other_mappings > map_limit) {
    refusals_++;
    errno = ENOMEM;
    return false;
  }
  return true;
}

// ---- the calls

void* FakeKernel::mmap(void* addr, size_t len, int prot, int flags) noexcept {
  if (int err = record(Sys::kMmap, addr, len, flags)) {
    errno = err;
    return MAP_FAILED;
  }
  if (no_map_fixed_noreplace) flags &= ~kNoreplace;
  if (!model_on()) {
    void* p = ::mmap(addr, len, prot, flags, -1, 0);
    if (p != MAP_FAILED) last_map_.store(p, std::memory_order_relaxed);
    return p;
  }
  std::lock_guard<std::mutex> g(mu_);
  const uintptr_t a = uintptr_t(addr), b = page_end(a, len);
  const bool fixed = (flags & (MAP_FIXED | kNoreplace)) != 0;
  if (fixed && !admit(delta(a, b, Change::kMap, prot))) return MAP_FAILED;
  void* p = ::mmap(addr, len, prot, flags, -1, 0);
  if (p == MAP_FAILED) return p;
  if (!fixed || p != addr) {
    if (!admit(delta(uintptr_t(p), page_end(uintptr_t(p), len), Change::kMap, prot))) {
      ::munmap(p, len);
      return MAP_FAILED;
    }
  }
  commit(uintptr_t(p), page_end(uintptr_t(p), len), Change::kMap, prot);
  last_map_.store(p, std::memory_order_relaxed);
  return p;
}

int FakeKernel::munmap(void* addr, size_t len) noexcept {
  if (int err = record(Sys::kMunmap, addr, len, 0)) {
    errno = err;
    return -1;
  }
  if (!model_on()) return ::munmap(addr, len);
  std::lock_guard<std::mutex> g(mu_);
  const uintptr_t a = uintptr_t(addr), b = page_end(a, len);
  if (!admit(delta(a, b, Change::kUnmap, 0))) return -1;
  int r = ::munmap(addr, len);
  if (r == 0) commit(a, b, Change::kUnmap, 0);
  return r;
}

int FakeKernel::mprotect(void* addr, size_t len, int prot) noexcept {
  if (int err = record(Sys::kMprotect, addr, len, prot)) {
    errno = err;
    return -1;
  }
  if (!model_on()) return ::mprotect(addr, len, prot);
  std::lock_guard<std::mutex> g(mu_);
  const uintptr_t a = uintptr_t(addr), b = page_end(a, len);
  if (!admit(delta(a, b, Change::kProtect, prot))) return -1;
  int r = ::mprotect(addr, len, prot);
  if (r == 0) commit(a, b, Change::kProtect, prot);
  return r;
}

void* FakeKernel::mremap(void* old_addr, size_t old_len, size_t new_len, int flags, void* new_addr) noexcept {
  if (int err = record(Sys::kMremap, old_addr, new_len, flags)) {
    errno = err;
    return MAP_FAILED;
  }
  if (!model_on()) return ::mremap(old_addr, old_len, new_len, flags, new_addr);
  std::lock_guard<std::mutex> g(mu_);
  const uintptr_t o = uintptr_t(old_addr);
  // The pages that stay (in place or moved) keep their segments' attributes;
  // a grown part takes the last one's.
  auto moved = [&](uintptr_t to) {
    Segs next = segs_;
    split_at(next, o);
    split_at(next, page_end(o, old_len));
    std::vector<std::pair<uintptr_t, Seg>> part;
    for (auto it = next.lower_bound(o); it != next.end() && it->first < page_end(o, old_len);)
      part.emplace_back(*it), it = next.erase(it);
    merge_around(next, o, o);
    const uintptr_t keep = page_end(o, old_len < new_len ? old_len : new_len);
    if (to != o) split_at(next, to), split_at(next, page_end(to, new_len));
    if (to != o) next.erase(next.lower_bound(to), next.lower_bound(page_end(to, new_len)));
    Seg last{0, PROT_READ | PROT_WRITE, false, 0};
    for (auto& [start, seg] : part) {
      if (start >= keep) break;
      Seg s = seg;
      s.end = (s.end < keep ? s.end : keep) - o + to;
      s.shift = seg.shift - static_cast<intptr_t>(to - o);
      next[start - o + to] = s;
      last = s;
    }
    if (new_len > old_len && !part.empty()) {
      Seg s = last;
      s.end = page_end(to, new_len);
      next[page_end(to, old_len)] = s;
    }
    merge_around(next, to, page_end(to, new_len));
    return next;
  };
  if (flags & MREMAP_FIXED) {
    Segs next = moved(uintptr_t(new_addr));
    if (!admit(next)) return MAP_FAILED;
    void* p = ::mremap(old_addr, old_len, new_len, flags, new_addr);
    if (p != MAP_FAILED) segs_.swap(next);
    return p;
  }
  if (!(flags & MREMAP_MAYMOVE)) {
    Segs next = moved(o);
    if (!admit(next)) return MAP_FAILED;
  } else if (segs_.size() + other_mappings + 1 > map_limit) {
    // Where it goes is the kernel's choice: refuse it a mapping it may need.
    refusals_++;
    errno = ENOMEM;
    return MAP_FAILED;
  }
  void* p = ::mremap(old_addr, old_len, new_len, flags, new_addr);
  if (p == MAP_FAILED) return p;
  Segs next = moved(uintptr_t(p));
  segs_.swap(next);
  if (segs_.size() + other_mappings > peak_) peak_ = segs_.size() + other_mappings;
  return p;
}

int FakeKernel::madvise(void* addr, size_t len, int advice) noexcept {
  if (int err = record(Sys::kMadvise, addr, len, advice)) {
    errno = err;
    return -1;
  }
  if (advice == MADV_FREE && madv_free_errno) {
    errno = madv_free_errno;
    return -1;
  }
  if (advice == 102 /* MADV_GUARD_INSTALL */ && guard_markers_errno) {
    errno = guard_markers_errno;
    return -1;
  }
  if (advice == 23 /* MADV_POPULATE_WRITE */ && populate_errno) {
    errno = populate_errno;
    return -1;
  }
  if (!model_on() || (advice != MADV_HUGEPAGE && advice != MADV_NOHUGEPAGE))
    return ::madvise(addr, len, advice);
  std::lock_guard<std::mutex> g(mu_);
  const uintptr_t a = uintptr_t(addr), b = page_end(a, len);
  const Change c = advice == MADV_HUGEPAGE ? Change::kHuge : Change::kNoHuge;
  if (!admit(delta(a, b, c, 0))) return -1;
  int r = ::madvise(addr, len, advice);
  if (r == 0) commit(a, b, c, 0);
  return r;
}

ssize_t FakeKernel::process_madvise(int pidfd, const struct iovec* iov, size_t n, int advice) noexcept {
  if (int err = record(Sys::kProcessMadvise, iov && n ? iov[0].iov_base : nullptr, n, advice)) {
    errno = err;
    return -1;
  }
  if (process_madvise_errno) {
    errno = process_madvise_errno;
    return -1;
  }
  if (pidfd == kPidfdSelf && no_pidfd_self) {
    errno = EBADF;
    return -1;
  }
  if (process_madvise_max_bytes == 0)
    return ::syscall(SYS_process_madvise, pidfd, iov, n, advice, 0u);
  // A short return: advise whole ranges (and part of the last) up to the limit.
  size_t left = process_madvise_max_bytes;
  ssize_t done = 0;
  for (size_t i = 0; i < n && left > 0; i++) {
    size_t len = iov[i].iov_len < left ? iov[i].iov_len : left;
    len &= ~size_t{4095};
    if (len == 0) break;
    if (::madvise(iov[i].iov_base, len, advice) != 0) return done ? done : -1;
    done += static_cast<ssize_t>(len);
    left -= len;
  }
  return done;
}

int FakeKernel::pidfd_open(pid_t pid) noexcept {
  if (int err = record(Sys::kPidfdOpen, nullptr, 0, pid)) {
    errno = err;
    return -1;
  }
  if (pidfd_open_errno) {
    errno = pidfd_open_errno;
    return -1;
  }
  return static_cast<int>(::syscall(SYS_pidfd_open, pid, 0u));
}

int FakeKernel::close(int fd) noexcept { return ::close(fd); }

int FakeKernel::membarrier(int cmd, unsigned flags) noexcept {
  if (membarrier_errno) {
    errno = membarrier_errno;
    return -1;
  }
  return static_cast<int>(::syscall(SYS_membarrier, cmd, flags, 0));
}

ssize_t FakeKernel::read_small_file(const char* path, char* buf, size_t n) noexcept {
  const char* src = nullptr;
  if (std::strstr(path, "overcommit_memory")) src = overcommit;
  if (std::strstr(path, "transparent_hugepage/enabled")) {
    thp_reads_.fetch_add(1, std::memory_order_relaxed);
    src = thp;
  }
  char limit[24];
  if (std::strstr(path, "max_map_count")) map_limit_reads_.fetch_add(1, std::memory_order_relaxed);
  if (std::strstr(path, "max_map_count") && model_on()) {
    std::snprintf(limit, sizeof limit, "%zu\n", map_limit);
    src = limit;
  }
  if (src == nullptr || n == 0) return -1;
  size_t size = std::strlen(src);
  size_t len = size < n - 1 ? size : n - 1;
  std::memcpy(buf, src, len);
  buf[len] = '\0';
  return static_cast<ssize_t>(len);
}

}  // namespace ductile::test
