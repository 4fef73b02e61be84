// SPDX-License-Identifier: BSD-2-Clause
// fork() while other threads use stdio and allocate (a cross-cutting suite, kept by its concern
// under core/, beside the fork handlers of core/fork.cc).
//
// The C library's stdio calls malloc while holding its own locks (getline grows
// its buffer under the FILE's lock; fflush(NULL) holds the list of open files and
// locks each FILE in turn), and fork takes the stdio list lock after the
// pthread_atfork prepare handlers have run. An allocator whose prepare handler
// takes its locks without regard to stdio's could then deadlock: the forking
// thread holds the allocator and waits for the list; a thread in fflush(NULL)
// holds the list and waits for a FILE; a thread in getline holds that FILE and
// waits for the allocator.
//
// The program is built twice: linked with the allocator's objects (ductile
// is the allocator of the whole process) and on its own, which the preload
// test runs with LD_PRELOAD=libductile.so (and which also passes on the C
// library's allocator). Each scenario runs in a fresh process (a death test
// in the "threadsafe" style re-executes the program), so a hang costs only
// its own scenario, and the single-threaded one really starts with one
// thread. A watchdog (SIGALRM) turns a hang into a failure: it is re-armed
// whenever a child has been reaped, so it fires only when nothing moves.
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace {

// Seconds without progress after which a scenario is declared hung. A fork
// round takes a few milliseconds (up to a tenth of a second seen on a
// loaded machine).
constexpr unsigned kStallSeconds = 5;

const char* g_watch_what = "scenario";
// Fork rounds completed, for the watchdog's message.
std::atomic<int> g_rounds{0};

void on_stall(int) {
  char num[16];
  char* p = num + sizeof num;
  unsigned n = static_cast<unsigned>(g_rounds.load());
  do *--p = static_cast<char>('0' + n % 10); while ((n /= 10) != 0);
  const char head[] = "fork_stdio_test: no progress for a while in: ";
  const char mid[] = ", after fork rounds: ";
  (void)!write(2, head, sizeof head - 1);
  (void)!write(2, g_watch_what, strlen(g_watch_what));
  (void)!write(2, mid, sizeof mid - 1);
  (void)!write(2, p, static_cast<size_t>(num + sizeof num - p));
  (void)!write(2, " (deadlock?)\n", 13);
  _exit(3);
}

// Arms (or re-arms) the watchdog. A forked child does not inherit the
// alarm: it arms its own.
void watchdog(const char* what) {
  g_watch_what = what;
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_stall;
  sigaction(SIGALRM, &sa, nullptr);
  alarm(kStallSeconds);
}

// Text whose lines have these lengths (newline included), over and over:
// getline starts each line with a small buffer and grows it with realloc,
// through the small and medium sizes and, for the last, into a huge block.
std::string make_lines(const std::vector<size_t>& lengths) {
  std::string s;
  char c = 'a';
  for (size_t n : lengths) {
    s.append(n - 1, c);
    s.push_back('\n');
    c = c == 'z' ? 'a' : static_cast<char>(c + 1);
  }
  return s;
}

// Reads `text` line by line from a FILE (fmemopen: in the C library's list
// of open files, so fflush(NULL) locks it too) until `stop`, starting every
// line with a fresh buffer. Returns false if a line came back wrong.
bool read_lines(const std::string& text, const std::atomic<bool>& stop) {
  FILE* f = fmemopen(const_cast<char*>(text.data()), text.size(), "r");
  if (f == nullptr) return false;
  bool ok = true;
  while (!stop.load(std::memory_order_relaxed)) {
    char* line = nullptr;
    size_t cap = 0;
    ssize_t n = getline(&line, &cap, f);
    if (n < 0) {
      rewind(f);
    } else if (line[n - 1] != '\n' || (n > 1 && line[0] != line[n - 2])) {
      ok = false;
    }
    free(line);
    sched_yield();  // the C library's locks are not fair: let a waiting flush in
  }
  fclose(f);
  return ok;
}

// malloc, realloc and free over every size range until `stop`.
void churn(unsigned seed, const std::atomic<bool>& stop) {
  std::vector<void*> slots(32, nullptr);
  unsigned x = seed * 2654435761u + 1;
  while (!stop.load(std::memory_order_relaxed)) {
    x = x * 1103515245u + 12345u;
    void*& p = slots[(x >> 8) % slots.size()];
    size_t size = (x >> 16) % 7 == 0 ? (1 + (x >> 4) % 4096) * 1024 : 1 + (x >> 12) % 3000;
    if ((x >> 20) % 3 == 0) {
      free(p);
      p = nullptr;
    } else if (void* q = realloc(p, size)) {
      memset(q, 1, size < 64 ? size : 64);
      p = q;
    }
  }
  for (void* p : slots) free(p);
}

// What every child does: allocate, use stdio (the list lock, a memory
// stream), and -- unless `light` -- use it from a second thread, which
// waits for the list lock if the fork left it held or its count off.
int child_work(int round, bool light) {
  watchdog("a forked child");
  int bad = 0;
  for (size_t size : {24ul, 3000ul, 100000ul, light ? 0ul : 3ul << 20}) {
    if (size == 0) continue;
    char* p = static_cast<char*>(malloc(size));
    if (p == nullptr) bad |= 1;
    else memset(p, 7, size);
    p = static_cast<char*>(realloc(p, size * 2));
    if (p == nullptr || p[size - 1] != 7) bad |= 2;
    free(p);
  }
  char* buf = nullptr;
  size_t len = 0;
  FILE* m = open_memstream(&buf, &len);
  if (m == nullptr) return bad | 4;
  fprintf(m, "child %d", round);
  if (fclose(m) != 0 || buf == nullptr || strncmp(buf, "child ", 6) != 0) bad |= 8;
  free(buf);
  fflush(nullptr);
  if (light) return bad;
  std::thread t([&] {
    fflush(nullptr);
    FILE* f = fopen("/dev/null", "w");
    if (f == nullptr || fputs("x", f) < 0 || fclose(f) != 0) bad |= 16;
  });
  t.join();
  return bad;
}

// Forks `rounds` times with up to `window` children alive at once; false
// once a child did not exit with 0. Every `full`th child does the whole of
// child_work, the others its light part. Re-arms the watchdog whenever a
// child has been reaped.
bool fork_rounds(int rounds, int full, int window, const char* what) {
  int alive = 0;
  bool ok = true;
  auto reap = [&] {
    int status = 0;
    pid_t pid = waitpid(-1, &status, 0);
    if (pid < 0) return false;
    alive--;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      fprintf(stderr, "%s: a child ended with status %#x\n", what, status);
      return false;
    }
    g_rounds++;
    watchdog(what);
    return true;
  };
  for (int i = 0; i < rounds && ok; i++) {
    pid_t pid = fork();
    if (pid < 0) {
      ok = false;
      break;
    }
    if (pid == 0) _exit(child_work(i, i % full != 0));
    alive++;
    if (alive == window) ok = reap();
  }
  while (alive > 0) ok = reap() && ok;
  return ok;
}

// Modelled on what the C library's own test of this checks
// (tst-malloc-fork-deadlock): a thread that flushes every stream, threads
// that read long lines, a thread that allocates, and a thread that forks.
[[noreturn]] void flush_getline_malloc_fork() {
  const char* what = "fork with fflush(NULL), getline and malloc threads";
  watchdog(what);
  std::atomic<bool> stop{false};
  std::atomic<int> bad{0};
  const std::string text = make_lines({80, 700, 6000, 40000, 200000, 120, 2500000});
  std::vector<std::thread> ts;
  ts.emplace_back([&] {
    while (!stop.load(std::memory_order_relaxed)) {
      fflush(nullptr);
      sched_yield();
    }
  });
  for (int i = 0; i < 2; i++) ts.emplace_back([&] { if (!read_lines(text, stop)) bad |= 1; });
  ts.emplace_back([&] { churn(1, stop); });
  bool forked = fork_rounds(100, 10, 4, what);
  stop = true;
  for (auto& t : ts) t.join();
  fflush(nullptr);
  _exit(forked && bad.load() == 0 ? 0 : 1);
}

// 500 forks, up to 8 children alive at once, while four threads write to
// their own memory streams, flush all streams now and then, read lines and
// allocate.
[[noreturn]] void fork_storm() {
  const char* what = "500-fork storm with stdio threads";
  watchdog(what);
  std::atomic<bool> stop{false};
  std::atomic<int> bad{0};
  const std::string text = make_lines({50, 900, 9000, 70000, 300});
  std::vector<std::thread> ts;
  for (int i = 0; i < 4; i++) {
    ts.emplace_back([&, i] {
      char* buf = nullptr;
      size_t len = 0;
      FILE* m = open_memstream(&buf, &len);
      FILE* in = fmemopen(const_cast<char*>(text.data()), text.size(), "r");
      if (m == nullptr || in == nullptr) {
        bad |= 1;
        return;
      }
      std::vector<void*> keep(16, nullptr);
      char* line = nullptr;
      size_t cap = 0;
      for (unsigned n = 0; !stop.load(std::memory_order_relaxed); n++) {
        fprintf(m, "thread %d line %u %s\n", i, n, "...................................");
        if (n % 64 == 0) {
          fflush(m);  // the stream's buffer grows by realloc under its lock
          if (n % 4096 == 0) {
            fclose(m);
            free(buf);
            m = open_memstream(&buf, &len);
            if (m == nullptr) {
              bad |= 2;
              break;
            }
          }
        }
        if (n % 16 == 0) fflush(nullptr);
        if (n % 8 == 0) {
          free(line);
          line = nullptr;
          cap = 0;
        }
        if (getline(&line, &cap, in) < 0) rewind(in);
        void*& p = keep[n % keep.size()];
        free(p);
        p = malloc(16 + (n * 7919u + static_cast<unsigned>(i)) % 200000);
        if (n % 4 == 0) sched_yield();
      }
      free(line);
      for (void* p : keep) free(p);
      if (m) fclose(m);
      free(buf);
      fclose(in);
    });
  }
  bool forked = fork_rounds(500, 25, 8, what);
  stop = true;
  for (auto& t : ts) t.join();
  fflush(nullptr);
  _exit(forked && bad.load() == 0 ? 0 : 1);
}

// A fork from a process that never had a second thread: the C library then
// takes and resets no stdio lock itself, so whatever an atfork handler took
// it must give back in both parent and child. A new thread in each must
// then be able to use the list lock.
[[noreturn]] void single_threaded_fork() {
  const char* what = "single-threaded fork, then stdio from a new thread";
  watchdog(what);
  free(malloc(100));  // the allocator is set up (and its fork handlers registered)
  pid_t pid = fork();
  if (pid < 0) _exit(1);
  if (pid == 0) _exit(child_work(0, false));
  int status = 0;
  bool ok = waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  std::thread t([&] {
    fflush(nullptr);
    FILE* f = fopen("/dev/null", "w");
    ok = ok && f != nullptr && fclose(f) == 0;
  });
  t.join();
  _exit(ok ? 0 : 1);
}

class ForkStdio : public ::testing::Test {
 protected:
  void SetUp() override { GTEST_FLAG_SET(death_test_style, "threadsafe"); }
};

TEST_F(ForkStdio, ForkWhileThreadsFlushReadLinesAndAllocate) {
  EXPECT_EXIT(flush_getline_malloc_fork(), ::testing::ExitedWithCode(0), "");
}

TEST_F(ForkStdio, StormOf500ForksWithStdioThreads) {
  EXPECT_EXIT(fork_storm(), ::testing::ExitedWithCode(0), "");
}

TEST_F(ForkStdio, SingleThreadedForkLeavesTheListLockFree) {
  EXPECT_EXIT(single_threaded_fork(), ::testing::ExitedWithCode(0), "");
}

}  // namespace
