/* SPDX-License-Identifier: BSD-2-Clause */
// The raw memory system calls, behind an interface so that tests can put a
// fake kernel under the OS layer (test/support/fake_kernel.h) that records
// each call and fails the ones a test chooses.
//
// Contract: each method is one system call with the kernel's own convention
// (MAP_FAILED or -1, with errno set). No method allocates. The OS layer
// (os.h) is the only caller.
#pragma once

#include <sys/types.h>
#include <sys/uio.h>

#include <cstddef>

namespace ductile::os {

class Kernel {
 public:
  virtual ~Kernel() = default;
  virtual void* mmap(void* addr, size_t len, int prot, int flags) noexcept = 0;
  virtual int munmap(void* addr, size_t len) noexcept = 0;
  virtual int mprotect(void* addr, size_t len, int prot) noexcept = 0;
  virtual void* mremap(void* old_addr, size_t old_len, size_t new_len, int flags,
                       void* new_addr) noexcept = 0;
  virtual int madvise(void* addr, size_t len, int advice) noexcept = 0;
  virtual ssize_t process_madvise(int pidfd, const struct iovec* iov, size_t n, int advice) noexcept = 0;
  virtual int pidfd_open(pid_t pid) noexcept = 0;
  virtual int close(int fd) noexcept = 0;
  // membarrier(2) (Linux 4.14 for the private expedited commands).
  virtual int membarrier(int cmd, unsigned flags) noexcept = 0;
  // Reads the first line (up to n-1 bytes) of a small /proc or /sys file
  // into buf (NUL-terminated); returns the length or -1.
  virtual ssize_t read_small_file(const char* path, char* buf, size_t n) noexcept = 0;
  // The soft RLIMIT_AS in bytes (getrlimit); SIZE_MAX when unlimited.
  virtual size_t address_space_limit() noexcept = 0;
  // The process's mappings now: the lines of /proc/self/maps (0 if it
  // cannot be read). It costs about 0.5 us a mapping (the kernel formats
  // every line): a slow-path call.
  virtual size_t count_mappings() noexcept = 0;
};

// The real kernel. A single static instance: usable before constructors run.
Kernel& linux_kernel() noexcept;

// The lines of /proc/self/maps, read without allocating (0 if it cannot be
// read): the real kernel's count_mappings, and a fake kernel's where it
// does not model mappings (a plain call: the tests, built with RTTI, may
// not call through the library's object, built without it, under UBSan).
size_t count_proc_self_maps() noexcept;

}  // namespace ductile::os
