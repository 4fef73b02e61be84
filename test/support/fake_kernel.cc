#include "support/fake_kernel.h"

#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

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

void* FakeKernel::mmap(void* addr, size_t len, int prot, int flags) noexcept {
  if (int err = record(Sys::kMmap, addr, len, flags)) {
    errno = err;
    return MAP_FAILED;
  }
  if (no_map_fixed_noreplace) flags &= ~kNoreplace;
  return ::mmap(addr, len, prot, flags, -1, 0);
}

int FakeKernel::munmap(void* addr, size_t len) noexcept {
  if (int err = record(Sys::kMunmap, addr, len, 0)) {
    errno = err;
    return -1;
  }
  return ::munmap(addr, len);
}

int FakeKernel::mprotect(void* addr, size_t len, int prot) noexcept {
  if (int err = record(Sys::kMprotect, addr, len, prot)) {
    errno = err;
    return -1;
  }
  return ::mprotect(addr, len, prot);
}

void* FakeKernel::mremap(void* old_addr, size_t old_len, size_t new_len, int flags, void* new_addr) noexcept {
  if (int err = record(Sys::kMremap, old_addr, new_len, flags)) {
    errno = err;
    return MAP_FAILED;
  }
  return ::mremap(old_addr, old_len, new_len, flags, new_addr);
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
  if (advice == 23 /* MADV_POPULATE_WRITE */ && populate_errno) {
    errno = populate_errno;
    return -1;
  }
  return ::madvise(addr, len, advice);
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

ssize_t FakeKernel::read_small_file(const char* path, char* buf, size_t n) noexcept {
  const char* src = nullptr;
  if (std::strstr(path, "overcommit_memory")) src = overcommit;
  if (std::strstr(path, "transparent_hugepage/enabled")) src = thp;
  if (src == nullptr || n == 0) return -1;
  size_t size = std::strlen(src);
  size_t len = size < n - 1 ? size : n - 1;
  std::memcpy(buf, src, len);
  buf[len] = '\0';
  return static_cast<ssize_t>(len);
}

}  // namespace ductile::test
