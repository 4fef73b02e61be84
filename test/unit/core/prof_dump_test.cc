// SPDX-License-Identifier: BSD-2-Clause
// Heap profiles written out (core/prof_dump.cc): google-pprof's heap format, dumps at an interval
// and at new highs as jemalloc names them, and the dump on a signal.
//
// Part of the prof_test program, whose main (prof_test.cc) runs it with profiling on.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <string>

#include <gtest/gtest.h>

#include "ductile/ductile.h"
#include "unit/core/prof_helpers.h"

namespace ductile {
namespace {

using ductile::g_dir;
using test::ctl;
using test::kMiB;
using test::totals;

std::string read_file(const std::string& path) {
  std::string s;
  int fd = open(path.c_str(), O_RDONLY);
  if (fd < 0) return s;
  char buf[4096];
  ssize_t n;
  while ((n = read(fd, buf, sizeof buf)) > 0) s.append(buf, static_cast<size_t>(n));
  close(fd);
  return s;
}

TEST(Prof, DumpWritesGooglePprofsHeapFormat) {
  ASSERT_EQ(ductile_mallctl("prof.reset", nullptr, nullptr, nullptr, 0), 0);
  void* p = ductile_malloc(12345);
  const std::string path = g_dir + "/named.heap";
  const char* name = path.c_str();
  ASSERT_EQ(ductile_mallctl("prof.dump", nullptr, nullptr, &name, sizeof name), 0);
  const auto t = totals();
  const std::string text = read_file(path);
  const std::string header =
      "heap profile: " + std::to_string(t.samples) + ": " + std::to_string(t.sampled_bytes) + " [";
  EXPECT_EQ(text.compare(0, header.size(), header), 0) << text.substr(0, 200);
  EXPECT_NE(text.find("] @ heap_v2/1\n"), std::string::npos);
  // The block's own line: one live sample of its usable size.
  EXPECT_NE(text.find("\n1: " + std::to_string(test::sampled_size(p)) + " ["), std::string::npos);
  EXPECT_NE(text.find("\nMAPPED_LIBRARIES:\n"), std::string::npos);
  EXPECT_NE(text.find("prof_test"), std::string::npos);  // the maps name the program
  ductile_free(p);

  // No name: <prefix>.<pid>.<seq>.m<mseq>.heap, numbered in turn (seq
  // counts every dump so named, mseq those of prof.dump).
  const std::string pid = std::to_string(getpid());
  ASSERT_EQ(ductile_mallctl("prof.dump", nullptr, nullptr, nullptr, 0), 0);
  const char* none = nullptr;
  ASSERT_EQ(ductile_mallctl("prof.dump", nullptr, nullptr, &none, sizeof none), 0);
  struct stat st;
  EXPECT_EQ(stat((g_dir + "/t." + pid + ".0.m0.heap").c_str(), &st), 0);
  EXPECT_EQ(stat((g_dir + "/t." + pid + ".1.m1.heap").c_str(), &st), 0);

  const char* bad = "/nonexistent-dir/x.heap";
  EXPECT_EQ(ductile_mallctl("prof.dump", nullptr, nullptr, &bad, sizeof bad), EFAULT);
  const char* old = nullptr;
  size_t len = sizeof old;
  EXPECT_EQ(ductile_mallctl("prof.dump", &old, &len, &name, sizeof name), EPERM);
  EXPECT_EQ(ductile_mallctl("prof.dump", nullptr, nullptr, &name, 4), EINVAL);
}

// The dump files of this process whose names hold `kind` ("u", "s").
// Allocates nothing: an allocation would write the dumps asked for, and
// every allocation here is a sample (a new high, for prof.gdump).
size_t dumps_of_kind(const char* kind) {
  size_t n = 0;
  char path[512];
  for (int seq = 0; seq < 64; seq++)
    for (int k = 0; k < 64; k++) {
      snprintf(path, sizeof path, "%s/t.%d.%d.%s%d.heap", g_dir.c_str(), static_cast<int>(getpid()), seq, kind, k);
      struct stat st;
      if (stat(path, &st) == 0) n++;
    }
  return n;
}

TEST(Prof, IntervalAndGdumpAsJemallocNamesThem) {
  EXPECT_EQ(ctl<ssize_t>("opt.lg_prof_interval"), 40);
  EXPECT_EQ(ctl<uint64_t>("prof.interval"), uint64_t{1} << 40);
  EXPECT_FALSE(ctl<bool>("opt.prof_gdump"));
  EXPECT_FALSE(ctl<bool>("prof.gdump"));
  EXPECT_EQ(ctl<int>("opt.prof_signal"), SIGUSR2);
  ASSERT_EQ(ductile_mallctl("prof.reset", nullptr, nullptr, nullptr, 0), 0);
  EXPECT_EQ(dumps_of_kind("u"), 0u);
  bool on = true, old = true;
  size_t len = sizeof old;
  ASSERT_EQ(ductile_mallctl("prof.gdump", &old, &len, &on, sizeof on), 0);
  EXPECT_FALSE(old);
  EXPECT_TRUE(ctl<bool>("prof.gdump"));
  // A new high of the live bytes (the reset made it 0): a dump, u0, once
  // the allocation that made it is done.
  void* p = ductile_malloc(3 * kMiB);
  EXPECT_EQ(dumps_of_kind("u"), 1u);
  ductile_free(p);
  p = ductile_malloc(kMiB);  // below the high: no dump
  EXPECT_EQ(dumps_of_kind("u"), 1u);
  ductile_free(p);
  on = false;
  ASSERT_EQ(ductile_mallctl("prof.gdump", nullptr, nullptr, &on, sizeof on), 0);
  p = ductile_malloc(8 * kMiB);
  EXPECT_EQ(dumps_of_kind("u"), 1u);
  ductile_free(p);
}

// The handler writes the dump itself where the signal did not interrupt
// the allocator in this thread; where it did (here: one of ductile's locks
// held), it only asks, and the next allocation writes it.
TEST(Prof, SignalWritesItsDumpUnlessItInterruptedTheAllocator) {
  ASSERT_EQ(dumps_of_kind("s"), 0u);
  ASSERT_EQ(raise(SIGUSR2), 0);  // the handler has run when raise returns
  EXPECT_EQ(dumps_of_kind("s"), 1u);
  {
    Mutex lock;
    LockGuard inside(lock);  // as if the signal came inside the allocator
    ASSERT_EQ(raise(SIGUSR2), 0);
    ASSERT_EQ(raise(SIGUSR2), 0);  // two before an allocation: one dump
    EXPECT_EQ(dumps_of_kind("s"), 1u);
  }
  void* p = ductile_malloc(100);
  ductile_free(p);
  EXPECT_EQ(dumps_of_kind("s"), 2u);
}

}  // namespace
}  // namespace ductile
