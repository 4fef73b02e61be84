// SPDX-License-Identifier: BSD-2-Clause
// The fork handlers (core/fork.cc): the child of a threaded program allocates in every range.
//
// This program links the library's objects, so ductile is also the allocator of the
// test process itself.
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "ductile/ductile.h"

namespace ductile {
namespace {

TEST(Fork, ChildOfAThreadedProgramCanAllocate) {
  std::atomic<bool> stop{false};
  std::vector<std::thread> ts;
  for (int t = 0; t < 4; t++) {
    ts.emplace_back([&, t] {
      std::vector<void*> v(64, nullptr);
      unsigned i = 0;
      while (!stop.load(std::memory_order_relaxed)) {
        void*& slot = v[i++ % v.size()];
        ductile_free(slot);
        slot = ductile_malloc(16 + (i * 37 + t) % 100000);
      }
      for (void* p : v) ductile_free(p);
    });
  }
  for (int round = 0; round < 30; round++) {
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      // In the child: every size range must work, and so must threads.
      bool ok = true;
      for (size_t size : {8ul, 1000ul, 50000ul, 3ul << 20}) {
        void* p = ductile_malloc(size);
        ok = ok && p != nullptr;
        if (p) std::memset(p, 1, size);
        ductile_free(p);
      }
      std::thread child_thread([&] { ductile_free(ductile_malloc(100)); });
      child_thread.join();
      (void)ductile_trim();
      _exit(ok ? 0 : 1);
    }
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "round " << round;
  }
  stop = true;
  for (auto& th : ts) th.join();
}

}  // namespace
}  // namespace ductile
