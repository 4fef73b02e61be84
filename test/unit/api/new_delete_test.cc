// SPDX-License-Identifier: BSD-2-Clause
// Every replaceable operator new and delete (api/new_delete.cc), as ductile defines them: linked
// in, this program's new-expressions and libstdc++'s own calls reach ductile.
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <new>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "base/common.h"
#include "ductile/ductile.h"

namespace ductile {
namespace {

constexpr size_t kMiB = size_t{1} << 20;
constexpr size_t kImpossible[] = {SIZE_MAX, SIZE_MAX - 4096, static_cast<size_t>(PTRDIFF_MAX) + 1};

// Keeps the compiler from reasoning a pointer away.
void* volatile g_sink;

bool ours(const void* p, size_t size) { return ductile_malloc_usable_size(const_cast<void*>(p)) >= size; }

// A new-handler that counts its calls and removes itself on the third.
std::atomic<int> g_handler_calls{0};
void handler_gives_up() {
  if (++g_handler_calls >= 3) std::set_new_handler(nullptr);
}
void handler_throws() {
  ++g_handler_calls;
  throw std::bad_alloc();
}

// Restores the new-handler a test installed.
struct HandlerScope {
  explicit HandlerScope(std::new_handler h) : old(std::set_new_handler(h)) { g_handler_calls = 0; }
  ~HandlerScope() { std::set_new_handler(old); }
  std::new_handler old;
};

TEST(New, EveryFormAllocatesFromDuctile) {
  const std::nothrow_t& nt = std::nothrow;
  const std::align_val_t a64{64};
  for (size_t size : {size_t{1}, size_t{24}, size_t{5000}, size_t{300000}, 3 * kMiB}) {
    void* p[8] = {
        ::operator new(size),          ::operator new[](size),          ::operator new(size, nt),
        ::operator new[](size, nt),    ::operator new(size, a64),       ::operator new[](size, a64),
        ::operator new(size, a64, nt), ::operator new[](size, a64, nt),
    };
    for (int i = 0; i < 8; i++) {
      ASSERT_NE(p[i], nullptr) << size << " form " << i;
      EXPECT_TRUE(ours(p[i], size)) << size << " form " << i;
      std::memset(p[i], i, size);
    }
    for (int i = 4; i < 8; i++) EXPECT_TRUE(is_aligned(addr(p[i]), 64)) << size << " form " << i;
    ::operator delete(p[0]);
    ::operator delete[](p[1]);
    ::operator delete(p[2], nt);
    ::operator delete[](p[3], nt);
    ::operator delete(p[4], a64);
    ::operator delete[](p[5], size, a64);
    ::operator delete(p[6], a64, nt);
    ::operator delete[](p[7], a64, nt);
    void* s = ::operator new(size);
    ::operator delete(s, size);
    void* sa = ::operator new[](size);
    ::operator delete[](sa, size);
    void* sal = ::operator new(size, a64);
    ::operator delete(sal, size, a64);
    void* aal = ::operator new[](size, a64);
    ::operator delete[](aal, a64);
  }
}

TEST(New, NewExpressionsReachDuctile) {
  auto* i = new int(5);
  EXPECT_TRUE(ours(i, sizeof(int)));
  delete i;
  auto* arr = new double[1000];
  EXPECT_TRUE(ours(arr, 1000 * sizeof(double)));
  delete[] arr;
  std::vector<std::string> v;
  for (int k = 0; k < 1000; k++) v.push_back(std::string(100 + k, 'x'));
  EXPECT_TRUE(ours(v.data(), v.size() * sizeof(std::string)));
  EXPECT_TRUE(ours(v.back().data(), v.back().size()));
  std::map<int, std::string> m;
  for (int k = 0; k < 1000; k++) m[k] = std::to_string(k);
  EXPECT_EQ(m[999], "999");
}

TEST(New, SizeZeroGivesUniquePointers) {
  void* a = ::operator new(0);
  void* b = ::operator new(0);
  void* c = ::operator new[](0, std::nothrow);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(c, nullptr);
  EXPECT_NE(a, b);
  ::operator delete(a);
  ::operator delete(b);
  ::operator delete[](c);
}

TEST(New, AlignedFormsHonourEveryAlignmentTo1MiB) {
  for (size_t align = 16; align <= 4 * kMiB; align <<= 1) {
    for (size_t size : {size_t{1}, align / 2, align, align * 3 + 8}) {
      std::align_val_t al{align};
      void* p = ::operator new(size, al);
      void* q = ::operator new[](size, al);
      void* r = ::operator new(size, al, std::nothrow);
      void* s = ::operator new[](size, al, std::nothrow);
      for (void* x : {p, q, r, s}) {
        ASSERT_NE(x, nullptr) << align << " " << size;
        EXPECT_TRUE(is_aligned(addr(x), align)) << align << " " << size;
        EXPECT_TRUE(ours(x, size));
        static_cast<volatile char*>(x)[size - 1] = 1;
      }
      ::operator delete(p, size, al);
      ::operator delete[](q, al);
      ::operator delete(r, al, std::nothrow);
      ::operator delete[](s, size, al);
    }
  }
}

struct alignas(64) Line {
  char bytes[64];
};
struct alignas(4096) PageSized {
  char bytes[100];
};

TEST(New, OverAlignedTypes) {
  auto* l = new Line[33];
  EXPECT_TRUE(is_aligned(addr(l), 64));
  delete[] l;
  auto pg = std::make_unique<PageSized>();
  EXPECT_TRUE(is_aligned(addr(pg.get()), 4096));
  std::vector<PageSized> v(17);
  EXPECT_TRUE(is_aligned(addr(v.data()), 4096));
  EXPECT_TRUE(ours(v.data(), 17 * sizeof(PageSized)));
}

TEST(New, ImpossibleSizesThrowBadAlloc) {
  HandlerScope none(nullptr);
  for (size_t size : kImpossible) {
    EXPECT_THROW(g_sink = ::operator new(size), std::bad_alloc) << size;
    EXPECT_THROW(g_sink = ::operator new[](size), std::bad_alloc) << size;
    EXPECT_THROW(g_sink = ::operator new(size, std::align_val_t{64}), std::bad_alloc) << size;
    EXPECT_THROW(g_sink = ::operator new[](size, std::align_val_t{kMiB}), std::bad_alloc) << size;
  }
  volatile size_t n = SIZE_MAX / 4;
  EXPECT_THROW(g_sink = new char[n], std::bad_alloc);
}

TEST(New, NothrowFormsReturnNull) {
  HandlerScope none(nullptr);
  for (size_t size : kImpossible) {
    EXPECT_EQ(::operator new(size, std::nothrow), nullptr) << size;
    EXPECT_EQ(::operator new[](size, std::nothrow), nullptr) << size;
    EXPECT_EQ(::operator new(size, std::align_val_t{32}, std::nothrow), nullptr) << size;
    EXPECT_EQ(::operator new[](size, std::align_val_t{8192}, std::nothrow), nullptr) << size;
  }
  volatile size_t n = SIZE_MAX / 4;
  EXPECT_EQ(g_sink = new (std::nothrow) char[n], nullptr);
}

TEST(New, TheNewHandlerIsCalledUntilItGivesUp) {
  {
    HandlerScope h(handler_gives_up);
    EXPECT_THROW(g_sink = ::operator new(SIZE_MAX), std::bad_alloc);
    EXPECT_EQ(g_handler_calls.load(), 3);
  }
  {
    HandlerScope h(handler_gives_up);
    EXPECT_EQ(::operator new[](SIZE_MAX, std::nothrow), nullptr);
    EXPECT_EQ(g_handler_calls.load(), 3);
  }
  {
    HandlerScope h(handler_gives_up);
    EXPECT_THROW(g_sink = ::operator new[](SIZE_MAX / 2, std::align_val_t{256}), std::bad_alloc);
    EXPECT_EQ(g_handler_calls.load(), 3);
  }
  {
    HandlerScope h(handler_gives_up);
    EXPECT_EQ(::operator new(SIZE_MAX / 2, std::align_val_t{256}, std::nothrow), nullptr);
    EXPECT_EQ(g_handler_calls.load(), 3);
  }
}

TEST(New, AHandlerThatThrowsEndsTheLoop) {
  HandlerScope h(handler_throws);
  EXPECT_THROW(g_sink = ::operator new(SIZE_MAX), std::bad_alloc);
  EXPECT_EQ(g_handler_calls.load(), 1);
  // The nothrow forms turn the handler's exception into a null pointer.
  EXPECT_EQ(::operator new(SIZE_MAX, std::nothrow), nullptr);
  EXPECT_EQ(::operator new[](SIZE_MAX, std::align_val_t{64}, std::nothrow), nullptr);
  EXPECT_EQ(g_handler_calls.load(), 3);
}

TEST(New, AnAlignmentNotAPowerOfTwoFailsWithoutTheHandler) {
  HandlerScope h(handler_gives_up);
  EXPECT_THROW(g_sink = ::operator new(64, std::align_val_t{24}), std::bad_alloc);
  EXPECT_THROW(g_sink = ::operator new[](64, std::align_val_t{0}), std::bad_alloc);
  EXPECT_EQ(::operator new(64, std::align_val_t{3}, std::nothrow), nullptr);
  EXPECT_EQ(g_handler_calls.load(), 0);
}

// The handler makes room: here by lifting an address-space limit that makes
// the first try fail. The retry then succeeds. In a child process, since the
// limit is process-wide.
bool g_lifted = false;
rlimit g_saved_limit;
void handler_lifts_limit() {
  g_lifted = true;
  setrlimit(RLIMIT_AS, &g_saved_limit);
}

TEST(New, AHandlerThatMakesRoomLetsTheRetrySucceed) {
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    getrlimit(RLIMIT_AS, &g_saved_limit);
    unsigned long pages = 0;
    FILE* f = std::fopen("/proc/self/statm", "r");
    if (f == nullptr || std::fscanf(f, "%lu", &pages) != 1) _exit(10);
    std::fclose(f);
    rlimit tight = g_saved_limit;
    tight.rlim_cur = pages * 4096 + 256 * kMiB;
    if (setrlimit(RLIMIT_AS, &tight) != 0) _exit(11);
    std::set_new_handler(handler_lifts_limit);
    void* p = nullptr;
    try {
      p = ::operator new(size_t{8} << 30);  // 8 GiB of address space: past the limit
    } catch (const std::bad_alloc&) {
      _exit(12);
    }
    if (!g_lifted) _exit(13);
    if (ductile_malloc_usable_size(p) < (size_t{8} << 30)) _exit(14);
    static_cast<volatile char*>(p)[0] = 1;
    ::operator delete(p);
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

TEST(Delete, ASizedDeleteWithAWrongSizeDoesNotCorrupt) {
  if (kHardened) GTEST_SKIP() << "a hardened build ends the program instead (hardening_test)";
  for (size_t size : {size_t{8}, size_t{100}, size_t{5000}, size_t{200000}, 3 * kMiB}) {
    for (size_t lie : {size_t{0}, size_t{1}, size / 2 + 1, size * 2, size * 1000, SIZE_MAX}) {
      void* p = ::operator new(size);
      ::operator delete(p, lie);
      void* q = ::operator new[](size, std::align_val_t{128});
      ::operator delete[](q, lie, std::align_val_t{4096});
    }
  }
  std::vector<std::unique_ptr<std::string>> live;
  for (int i = 0; i < 3000; i++) live.push_back(std::make_unique<std::string>(static_cast<size_t>(i % 500 + 20), 'a' + i % 26));
  for (int i = 0; i < 3000; i++) {
    ASSERT_EQ(live[i]->size(), static_cast<size_t>(i % 500 + 20));
    ASSERT_EQ((*live[i])[live[i]->size() - 1], 'a' + i % 26);
  }
}

TEST(Delete, NullIsANoOpInEveryForm) {
  ::operator delete(nullptr);
  ::operator delete[](nullptr);
  ::operator delete(nullptr, std::nothrow);
  ::operator delete(nullptr, size_t{16});
  ::operator delete[](nullptr, std::align_val_t{64});
  ::operator delete(nullptr, size_t{16}, std::align_val_t{64});
}

TEST(New, ThreadsAllocateAndFreeEachOthersObjects) {
  constexpr int kThreads = 4;
  constexpr int kPerThread = 20000;
  std::vector<std::vector<std::string*>> made(kThreads);
  std::vector<std::thread> ts;
  for (int t = 0; t < kThreads; t++)
    ts.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; i++) made[t].push_back(new std::string(static_cast<size_t>(i % 300), 'q'));
    });
  for (auto& th : ts) th.join();
  ts.clear();
  std::atomic<int> bad{0};
  for (int t = 0; t < kThreads; t++)
    ts.emplace_back([&, t] {
      for (std::string* s : made[(t + 1) % kThreads]) {
        if (s->find_first_not_of('q') != std::string::npos) bad++;
        delete s;
      }
    });
  for (auto& th : ts) th.join();
  EXPECT_EQ(bad.load(), 0);
}

}  // namespace
}  // namespace ductile
