// SPDX-License-Identifier: BSD-2-Clause
// The one file that issues memory system calls.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <new>

#include "base/common.h"  // config.h: which system calls the headers name
#include "os/kernel.h"

namespace ductile::os {
namespace {

class LinuxKernel final : public Kernel {
 public:
  void* mmap(void* addr, size_t len, int prot, int flags) noexcept override {
    return ::mmap(addr, len, prot, flags, -1, 0);
  }
  int munmap(void* addr, size_t len) noexcept override { return ::munmap(addr, len); }
  int mprotect(void* addr, size_t len, int prot) noexcept override {
    return ::mprotect(addr, len, prot);
  }
  void* mremap(void* old_addr, size_t old_len, size_t new_len, int flags,
               void* new_addr) noexcept override {
    return ::mremap(old_addr, old_len, new_len, flags, new_addr);
  }
  int madvise(void* addr, size_t len, int advice) noexcept override {
    return ::madvise(addr, len, advice);
  }
  ssize_t process_madvise(int pidfd, const struct iovec* iov, size_t n, int advice) noexcept override {
#ifdef HAVE_SYS_PROCESS_MADVISE
    return ::syscall(SYS_process_madvise, pidfd, iov, n, advice, 0u);
#else
    (void)pidfd, (void)iov, (void)n, (void)advice;
    errno = ENOSYS;
    return -1;
#endif
  }
  int pidfd_open(pid_t pid) noexcept override {
#ifdef HAVE_SYS_PIDFD_OPEN
    return static_cast<int>(::syscall(SYS_pidfd_open, pid, 0u));
#else
    (void)pid;
    errno = ENOSYS;
    return -1;
#endif
  }
  int close(int fd) noexcept override { return ::close(fd); }
  int membarrier(int cmd, unsigned flags) noexcept override {
#ifdef SYS_membarrier
    return static_cast<int>(::syscall(SYS_membarrier, cmd, flags, 0));
#else
    (void)cmd;
    (void)flags;
    errno = ENOSYS;
    return -1;
#endif
  }
  ssize_t read_small_file(const char* path, char* buf, size_t n) noexcept override {
    int fd = ::open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    ssize_t total = 0;
    while (static_cast<size_t>(total) + 1 < n) {
      ssize_t r = ::read(fd, buf + total, n - 1 - static_cast<size_t>(total));
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) break;
      total += r;
      // The files read are one line each: once it has ended, no read for
      // the end of the file (three system calls of every start-up).
      if (std::memchr(buf + total - r, '\n', static_cast<size_t>(r)) != nullptr) break;
    }
    ::close(fd);
    buf[total] = '\0';
    return total;
  }
  size_t count_mappings() noexcept override { return count_proc_self_maps(); }
  size_t address_space_limit() noexcept override {
    struct rlimit r;
    if (::getrlimit(RLIMIT_AS, &r) != 0 || r.rlim_cur == RLIM_INFINITY || r.rlim_cur > SIZE_MAX) return SIZE_MAX;
    return static_cast<size_t>(r.rlim_cur);
  }
};

// Constant-initialised storage: no static constructor, no allocation.
alignas(LinuxKernel) unsigned char g_kernel_storage[sizeof(LinuxKernel)];
LinuxKernel* g_kernel = nullptr;

}  // namespace

size_t count_proc_self_maps() noexcept {
  int fd = ::open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  // A small buffer: this may run on a thread with a small stack.
  char buf[4096];
  size_t lines = 0;
  for (;;) {
    ssize_t r = ::read(fd, buf, sizeof buf);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    for (ssize_t i = 0; i < r; i++) lines += buf[i] == '\n';
  }
  ::close(fd);
  return lines;
}

Kernel& linux_kernel() noexcept {
  // Racing first callers construct the same stateless object in place; the
  // vtable pointer they write is identical.
  LinuxKernel* k = __atomic_load_n(&g_kernel, __ATOMIC_ACQUIRE);
  if (k == nullptr) {
    k = new (g_kernel_storage) LinuxKernel();
    __atomic_store_n(&g_kernel, k, __ATOMIC_RELEASE);
  }
  return *k;
}

}  // namespace ductile::os
