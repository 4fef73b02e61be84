// SPDX-License-Identifier: BSD-2-Clause
// Options set through the option table (core/options.cc): set_option's words and refusals,
// without warnings.
#include <cstring>

#include <gtest/gtest.h>

#include "core/options.h"
#include "core/runtime.h"

namespace ductile {
namespace {

TEST(Options, SetOptionUsesTheTableWithoutWarnings) {
  core::Options o;
  testing::internal::CaptureStderr();
  EXPECT_TRUE(core::set_option(o, "stats_print", "1", 1));
  EXPECT_TRUE(o.stats_print);
  EXPECT_TRUE(core::set_option(o, "decay_ms", "250", 3));
  EXPECT_EQ(o.decay_ms, 250u);
  EXPECT_FALSE(core::set_option(o, "decay_ms", "x", 1));
  EXPECT_EQ(o.decay_ms, 250u);
  EXPECT_FALSE(core::set_option(o, "nope", "1", 1));
  EXPECT_FALSE(core::set_option(o, "stats_print", "maybe", 5));
  for (const char* word : {"0", "false", "no", "off"}) {
    EXPECT_TRUE(core::set_option(o, "stats_print", word, std::strlen(word))) << word;
    EXPECT_FALSE(o.stats_print) << word;
  }
  for (const char* word : {"1", "true", "yes", "on"}) {
    EXPECT_TRUE(core::set_option(o, "stats_print", word, std::strlen(word))) << word;
    EXPECT_TRUE(o.stats_print) << word;
  }
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "");
}

}  // namespace
}  // namespace ductile
