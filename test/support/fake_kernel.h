/* SPDX-License-Identifier: BSD-2-Clause */
// A kernel for tests: forwards to the real system calls (so the memory is
// real), records every call, and can behave like an older kernel or fail any
// chosen call.
#pragma once

#include <sys/uio.h>

#include <cerrno>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <vector>

#include "os/kernel.h"

namespace ductile::test {

enum class Sys { kMmap, kMunmap, kMprotect, kMremap, kMadvise, kProcessMadvise, kPidfdOpen, kCount };

struct SysCall {
  Sys sys;
  void* addr;
  size_t len;
  int arg;  // prot, advice, flags or the number of iovec entries
};

class FakeKernel final : public os::Kernel {
 public:
  // --- behaviour of an older or restricted kernel ---
  bool no_map_fixed_noreplace = false;  // before 4.17: the flag is ignored, the address a hint
  bool no_pidfd_self = false;           // before 6.15: PIDFD_SELF is EBADF
  int process_madvise_errno = 0;        // e.g. ENOSYS (before 5.10) or EINVAL (before 6.13)
  int pidfd_open_errno = 0;
  int membarrier_errno = 0;  // e.g. ENOSYS (before 4.3) or EINVAL (no private expedited command, before 4.14)
  size_t process_madvise_max_bytes = 0;  // >0: advise at most this many bytes per call (short returns)
  int madv_free_errno = 0;
  int populate_errno = 0;
  int guard_markers_errno = 0;  // MADV_GUARD_INSTALL: EINVAL before 6.13 (or on a locked mapping)
  const char* overcommit = "0\n";
  const char* thp = "always [madvise] never\n";
  size_t as_limit = SIZE_MAX;  // what address_space_limit() reports (RLIMIT_AS)

  // --- a mapping limit (vm.max_map_count) ---
  // >0: the kernel keeps a model of the mappings its calls made (merging
  // neighbours of equal protection, huge-page advice and page offset, as
  // the kernel does for anonymous memory), reports `map_limit` as
  // /proc/sys/vm/max_map_count, counts `other_mappings` (the program's)
  // besides its own, and fails a call with ENOMEM where the mappings after
  // it would exceed the limit, without making it. The model allocates.
  size_t map_limit = 0;
  size_t other_mappings = 0;
  // The mappings now (the model's plus other_mappings), the most there
  // ever were, and the calls refused for the limit.
  size_t mappings() const;
  size_t peak_mappings() const;
  size_t map_refusals() const;

  // Fails the next `times` calls of `sys` with `err` (after `skip` successful ones).
  void fail(Sys sys, int err, int times = 1, int skip = 0);
  void clear_failures();

  // --- fault injection by position ---
  // The n-th memory system call from now (1-based; mmap, munmap, mprotect,
  // mremap, madvise, process_madvise) fails with `err`; 0 disarms. Lock-free
  // and allocation-free, so it also works under the process's own allocator.
  void fail_nth(uint64_t n, int err = ENOMEM);
  // Memory system calls since the last fail_nth(), and whether the chosen one
  // has been failed.
  uint64_t memory_calls() const { return nth_seen_.load(std::memory_order_relaxed); }
  bool fault_injected() const { return nth_fired_.load(std::memory_order_relaxed); }

  // false: keep no record of the calls (count() and calls() see nothing):
  // for a kernel under the process's own allocator, where the record's
  // vector would allocate from inside the allocator.
  bool log_calls = true;

  size_t count(Sys sys) const;
  std::vector<SysCall> calls() const;
  // Where the last mmap that succeeded mapped (its calls() entry has the hint).
  void* last_map() const { return last_map_.load(std::memory_order_relaxed); }
  // Reads of vm.max_map_count, and of the THP mode.
  unsigned map_limit_reads() const { return map_limit_reads_.load(std::memory_order_relaxed); }
  unsigned thp_reads() const { return thp_reads_.load(std::memory_order_relaxed); }
  void reset_calls();

  void* mmap(void* addr, size_t len, int prot, int flags) noexcept override;
  int munmap(void* addr, size_t len) noexcept override;
  int mprotect(void* addr, size_t len, int prot) noexcept override;
  void* mremap(void* old_addr, size_t old_len, size_t new_len, int flags, void* new_addr) noexcept override;
  int madvise(void* addr, size_t len, int advice) noexcept override;
  ssize_t process_madvise(int pidfd, const struct iovec* iov, size_t n, int advice) noexcept override;
  int pidfd_open(pid_t pid) noexcept override;
  int close(int fd) noexcept override;
  int membarrier(int cmd, unsigned flags) noexcept override;
  ssize_t read_small_file(const char* path, char* buf, size_t n) noexcept override;
  size_t address_space_limit() noexcept override { return as_limit; }
  size_t count_mappings() noexcept override;

 private:
  struct Failure {
    Sys sys;
    int err;
    int times;
    int skip;
  };
  // Records the call; returns the errno to fail it with, or 0.
  int record(Sys sys, void* addr, size_t len, int arg);

  std::atomic<uint64_t> nth_{0};
  std::atomic<uint64_t> nth_seen_{0};
  std::atomic<void*> last_map_{nullptr};
  std::atomic<unsigned> map_limit_reads_{0};
  std::atomic<unsigned> thp_reads_{0};
  std::atomic<int> nth_err_{0};
  std::atomic<bool> nth_fired_{false};
  mutable std::mutex mu_;
  std::vector<SysCall> calls_;
  std::vector<Failure> failures_;

  // The mapping model: segments by start address.
  struct Seg {
    uintptr_t end;
    int prot;
    bool huge;       // MADV_HUGEPAGE
    intptr_t shift;  // first-mapped address minus current: pages moved by mremap differ
    bool same(const Seg& o) const { return prot == o.prot && huge == o.huge && shift == o.shift; }
  };
  using Segs = std::map<uintptr_t, Seg>;
  enum class Change { kMap, kUnmap, kProtect, kHuge, kNoHuge };
  static void split_at(Segs& m, uintptr_t a);
  static void merge_around(Segs& m, uintptr_t a, uintptr_t b);
  static void apply(Segs& m, uintptr_t a, uintptr_t b, Change c, int prot);
  // The change in mappings a call would make; whether the limit allows it
  // (if not: errno ENOMEM, counted as a refusal); the call made.
  long delta(uintptr_t a, uintptr_t b, Change c, int prot) const;
  bool admit(long delta);
  void commit(uintptr_t a, uintptr_t b, Change c, int prot);
  // The same for a model rebuilt whole (mremap).
  bool admit(const Segs& next);
  bool model_on() const { return map_limit != 0; }
  Segs segs_;
  size_t peak_ = 0;
  size_t refusals_ = 0;
};

}  // namespace ductile::test
