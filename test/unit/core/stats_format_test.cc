// SPDX-License-Identifier: BSD-2-Clause
// The statistics as text and JSON (core/stats_format.cc), through malloc_stats_print.
//
// This program links the library's objects, so ductile is also the allocator of the
// test process itself.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include <gtest/gtest.h>

#include "core/runtime.h"
#include "ductile/ductile.h"
#include "integration/json_check.h"
#include "unit/api/api_helpers.h"

namespace ductile {
namespace {

using test::kMiB;
using test::read_ctl;

void append(void* out, const char* s) { static_cast<std::string*>(out)->append(s); }

// Collects output without allocating, to show that printing allocates nothing.
struct FixedBuffer {
  char text[1 << 16];
  size_t len = 0;
  size_t calls = 0;
};
void append_fixed(void* out, const char* s) {
  auto* b = static_cast<FixedBuffer*>(out);
  b->calls++;
  size_t n = std::strlen(s);
  if (b->len + n < sizeof b->text) {
    std::memcpy(b->text + b->len, s, n);
    b->len += n;
    b->text[b->len] = '\0';
  }
}

TEST(StatsPrint, ReadableSummaryHasEverySection) {
  void* p = ductile_malloc(5 * kMiB);
  p = ductile_realloc(p, 50 * kMiB);
  std::string out;
  ductile_malloc_stats_print(append, &out, nullptr);
  ductile_free(p);
  for (const char* want : {"___ Begin ductile statistics ___", "Bytes by layer", "small", "medium", "huge",
                           "total", "Retained:", "Purged:", "System calls: mmap", "Huge growth by path: headroom",
                           "Small classes:", "___ End ductile statistics ___"})
    EXPECT_NE(out.find(want), std::string::npos) << want << "\n" << out;
  std::string brief;
  ductile_malloc_stats_print(append, &brief, "b");
  EXPECT_EQ(brief.find("Small classes:"), std::string::npos);
  EXPECT_NE(brief.find("___ End ductile statistics ___"), std::string::npos);
}

TEST(StatsPrint, JsonIsValidAndComplete) {
  std::string out;
  ductile_malloc_stats_print(append, &out, "J");
  EXPECT_TRUE(json_check::valid(out)) << out;
  for (const char* key : {"\"ductile\"", "\"version\"", "\"options\"", "\"decay_ms\"", "\"stats\"",
                          "\"allocated\"", "\"retained\"", "\"layers\"", "\"syscalls\"", "\"mmap\"", "\"growth\"",
                          "\"headroom\"", "\"copy\"", "\"bins\"", "\"purged_bytes\""})
    EXPECT_NE(out.find(key), std::string::npos) << key;
  std::string brief;
  ductile_malloc_stats_print(append, &brief, "Jbxyz");  // unknown characters are ignored
  EXPECT_TRUE(json_check::valid(brief));
  EXPECT_EQ(brief.find("\"bins\""), std::string::npos);
}

// The options print as JSON numbers, booleans and strings by their kind.
TEST(StatsPrint, JsonOptionsHaveTheirTypes) {
  std::string out;
  ductile_malloc_stats_print(append, &out, "J");
  const std::string decay = "\"decay_ms\":" + std::to_string(core::rt().opts.decay_ms) + ",";
  EXPECT_NE(out.find(decay), std::string::npos) << out.substr(0, 600);
  EXPECT_NE(out.find(std::string("\"tcache\":") + (core::rt().opts.tcache ? "true" : "false")), std::string::npos);
  EXPECT_NE(out.find("\"lg_prof_interval\":-1"), std::string::npos);
  EXPECT_NE(out.find("\"thp\":\""), std::string::npos);
  EXPECT_NE(out.find("\"prof_signal\":\"none\""), std::string::npos);
  EXPECT_EQ(out.find("\"decay_ms\":\""), std::string::npos);
  EXPECT_TRUE(json_check::valid(out));
}

TEST(StatsPrint, AllocatesNothingItself) {
  static FixedBuffer text, json;
  uint64_t before = kStats ? read_ctl<uint64_t>("thread.allocated") : 0;
  size_t chunk_allocs = core::rt().chunks.stats().allocs;
  ductile_malloc_stats_print(append_fixed, &text, "");
  ductile_malloc_stats_print(append_fixed, &json, "J");
  if (kStats) {
    EXPECT_EQ(read_ctl<uint64_t>("thread.allocated"), before);
  }
  EXPECT_EQ(core::rt().chunks.stats().allocs, chunk_allocs);
  EXPECT_GT(text.calls, 1u);  // longer than one buffer: handed on in pieces
  EXPECT_TRUE(json_check::valid(std::string(json.text, json.len)));
}

TEST(StatsPrint, JsonCheckerRejectsBrokenJson) {
  EXPECT_TRUE(json_check::valid("{\"a\":[1,2.5e3,true,null,\"x\\n\"]}"));
  for (const char* bad : {"", "{", "{\"a\":}", "{\"a\":1,}", "[1 2]", "{a:1}", "01", "\"\x01\"", "{} {}"})
    EXPECT_FALSE(json_check::valid(bad)) << bad;
}

TEST(StatsPrint, ToStderrWithoutACallback) {
  testing::internal::CaptureStderr();
  ductile_malloc_stats_print(nullptr, nullptr, "b");
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("___ End ductile statistics ___"), std::string::npos);
}

}  // namespace
}  // namespace ductile
