// SPDX-License-Identifier: BSD-2-Clause
// The option table (core/options.cc): every option parsed, malformed entries rejected, the
// profiling options, and the values printed.
#include <signal.h>

#include <string>

#include <gtest/gtest.h>

#include "core/options.h"

namespace ductile {
namespace {

using core::Options;
using core::parse_options;

TEST(Options, ParsesEveryKnownOption) {
  Options o;
  EXPECT_EQ(parse_options("thp:never,decay_ms:2000,huge_threshold:4m,tcache:false", o), 0u);
  EXPECT_EQ(o.thp, huge::ThpPolicy::kNever);
  EXPECT_EQ(o.decay_ms, 2000u);
  EXPECT_EQ(o.huge_threshold, size_t{4} << 20);
  EXPECT_FALSE(o.tcache);
  EXPECT_EQ(parse_options("thp:always,,tcache:1", o), 0u);
  EXPECT_EQ(o.thp, huge::ThpPolicy::kAlways);
  EXPECT_TRUE(o.tcache);
  EXPECT_EQ(parse_options("", o), 0u);
  EXPECT_EQ(parse_options(nullptr, o), 0u);
}

TEST(Options, MalformedEntriesAreRejectedAndKeepTheDefault) {
  Options o;
  testing::internal::CaptureStderr();
  EXPECT_EQ(parse_options("thp:sometimes", o), 1u);
  EXPECT_EQ(parse_options("decay_ms:12x", o), 1u);
  EXPECT_EQ(parse_options("decay_ms:99999999999999999999999", o), 1u);
  EXPECT_EQ(parse_options("huge_threshold:100", o), 1u);  // below the small classes
  EXPECT_EQ(parse_options("huge_threshold:1g", o), 1u);   // above the class table
  EXPECT_EQ(parse_options("nosuch:1,decay_ms", o), 2u);
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("ductile: warning: DUCTILE_CONF: unknown option \"nosuch:1\" ignored"), std::string::npos);
  Options defaults;
  EXPECT_EQ(o.thp, defaults.thp);
  EXPECT_EQ(o.decay_ms, defaults.decay_ms);
  EXPECT_EQ(o.huge_threshold, defaults.huge_threshold);
}

// Heap profiling's options, with jemalloc's defaults and bounds.
TEST(Options, ProfilingOptions) {
  Options o;
  EXPECT_FALSE(o.prof);
  EXPECT_TRUE(o.prof_active);
  EXPECT_EQ(o.lg_prof_sample, 19u);
  EXPECT_STREQ(o.prof_prefix, "jeprof");
  EXPECT_EQ(parse_options("prof:true,prof_active:false,lg_prof_sample:63,prof_prefix:/var/tmp/app,"
                          "prof_final:1,prof_leak:true",
                          o),
            0u);
  EXPECT_TRUE(o.prof);
  EXPECT_FALSE(o.prof_active);
  EXPECT_EQ(o.lg_prof_sample, 63u);
  EXPECT_STREQ(o.prof_prefix, "/var/tmp/app");
  EXPECT_TRUE(o.prof_final);
  EXPECT_TRUE(o.prof_leak);
  EXPECT_EQ(parse_options("prof_prefix:", o), 0u);  // no automatic dumps
  EXPECT_STREQ(o.prof_prefix, "");
  char buf[64];
  ASSERT_TRUE(core::option_to_string(o, "lg_prof_sample", buf, sizeof buf));
  EXPECT_STREQ(buf, "63");

  testing::internal::CaptureStderr();
  EXPECT_EQ(parse_options("lg_prof_sample:64", o), 1u);
  EXPECT_EQ(parse_options(("prof_prefix:" + std::string(core::kMaxPrefix, 'x')).c_str(), o), 1u);
  EXPECT_EQ(parse_options("prof:maybe", o), 1u);
  (void)testing::internal::GetCapturedStderr();
  EXPECT_EQ(o.lg_prof_sample, 63u);
  EXPECT_STREQ(o.prof_prefix, "");
  EXPECT_TRUE(o.prof);
}

// The dumps' options: lg_prof_interval (-1 to 63), prof_gdump, and
// prof_signal (a name with or without SIG, a number, or none).
TEST(Options, ProfilingDumpOptions) {
  Options o;
  EXPECT_EQ(o.lg_prof_interval, -1);
  EXPECT_FALSE(o.prof_gdump);
  EXPECT_EQ(o.prof_signal, 0);
  EXPECT_EQ(parse_options("lg_prof_interval:30,prof_gdump:on,prof_signal:SIGUSR2", o), 0u);
  EXPECT_EQ(o.lg_prof_interval, 30);
  EXPECT_TRUE(o.prof_gdump);
  EXPECT_EQ(o.prof_signal, SIGUSR2);
  char buf[64];
  ASSERT_TRUE(core::option_to_string(o, "prof_signal", buf, sizeof buf));
  EXPECT_STREQ(buf, "SIGUSR2");
  EXPECT_EQ(parse_options("prof_signal:USR1,lg_prof_interval:-1", o), 0u);
  EXPECT_EQ(o.prof_signal, SIGUSR1);
  EXPECT_EQ(o.lg_prof_interval, -1);
  ASSERT_TRUE(core::option_to_string(o, "lg_prof_interval", buf, sizeof buf));
  EXPECT_STREQ(buf, "-1");
  EXPECT_EQ(parse_options("prof_signal:40", o), 0u);
  EXPECT_EQ(o.prof_signal, 40);
  ASSERT_TRUE(core::option_to_string(o, "prof_signal", buf, sizeof buf));
  EXPECT_STREQ(buf, "40");
  EXPECT_EQ(parse_options("prof_signal:none", o), 0u);
  EXPECT_EQ(o.prof_signal, 0);

  testing::internal::CaptureStderr();
  EXPECT_EQ(parse_options("lg_prof_interval:64", o), 1u);
  EXPECT_EQ(parse_options("lg_prof_interval:-2", o), 1u);
  EXPECT_EQ(parse_options("prof_signal:SIGKILL", o), 1u);
  EXPECT_EQ(parse_options("prof_signal:9", o), 1u);
  EXPECT_EQ(parse_options("prof_signal:65", o), 1u);
  EXPECT_EQ(parse_options("prof_signal:SIGNOPE", o), 1u);
  EXPECT_EQ(parse_options("stats_print_opts:Q", o), 1u);
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("\"lg_prof_interval:64\" ignored (allowed: -1 (off) to 63)"), std::string::npos) << err;
  EXPECT_EQ(o.lg_prof_interval, -1);
  EXPECT_EQ(o.prof_signal, 0);
  EXPECT_EQ(parse_options("stats_print_opts:Jb", o), 0u);
  EXPECT_STREQ(o.stats_print_opts, "Jb");
}

TEST(Options, PrintsValues) {
  Options o;
  char buf[32];
  ASSERT_TRUE(core::option_to_string(o, "decay_ms", buf, sizeof buf));
  EXPECT_STREQ(buf, "10000");
  ASSERT_TRUE(core::option_to_string(o, "thp", buf, sizeof buf));
  EXPECT_STREQ(buf, "auto");
  EXPECT_FALSE(core::option_to_string(o, "nope", buf, sizeof buf));
}

}  // namespace
}  // namespace ductile
