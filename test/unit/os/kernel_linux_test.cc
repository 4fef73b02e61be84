// SPDX-License-Identifier: BSD-2-Clause
// The real kernel layer (os/kernel_linux.cc): what it finds is what a direct system call finds.
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "os/os.h"
#include "unit/os/os_helpers.h"

namespace ductile {
namespace {

using os::Os;
using test::scratch;

// The real kernel layer must find what a direct system call finds: batched
// purges on our own process (PIDFD_SELF, or a pidfd of our own), and pidfd_open.
TEST(OsProbe, RealKernelFindsWhatADirectCallFinds) {
  char* p = scratch(2);
  struct iovec iov[2] = {{p, kPage}, {p + kPage, kPage}};
  bool self_works = ::syscall(SYS_process_madvise, -10000, iov, 2, MADV_DONTNEED, 0u) == 2 * kPage;
  int fd = static_cast<int>(::syscall(SYS_pidfd_open, getpid(), 0u));
  bool fd_works = fd >= 0 && ::syscall(SYS_process_madvise, fd, iov, 2, MADV_DONTNEED, 0u) == 2 * kPage;
  if (fd >= 0) ::close(fd);
  ::munmap(p, 2 * kPage);
  Os os(os::linux_kernel());
  EXPECT_EQ(os.probed_features().batch_purge, self_works || fd_works);
  EXPECT_TRUE(os.features().map_fixed_noreplace);
  // On the machines this project targets (Linux 6.13 or later) it must work.
  EXPECT_TRUE(self_works || fd_works) << "process_madvise on our own process is refused by this kernel";
}

}  // namespace
}  // namespace ductile
