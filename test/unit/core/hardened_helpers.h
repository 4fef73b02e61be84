/* SPDX-License-Identifier: BSD-2-Clause */
// The fixture of the hardened-mode death tests (hardening_test.cc,
// seal_test.cc): each statement runs in a fresh process (the threadsafe
// death-test style re-executes the program) with DUCTILE_CONF=hardened:true,
// the run-time switch, plus what a test adds; in a --enable-hardened build
// it is on without it.
#pragma once

#include <stdlib.h>
#include <unistd.h>

#include <cstddef>
#include <string>

#include <gtest/gtest.h>

#include "core/runtime.h"
#include "ductile/ductile.h"

namespace ductile {

class Hardened : public ::testing::Test {
 protected:
  void SetUp() override {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    setenv("DUCTILE_CONF", "hardened:true", 1);
  }
  void TearDown() override { unsetenv("DUCTILE_CONF"); }
  // Runs the next death tests with `conf` after hardened:true.
  static void also(const char* conf) { setenv("DUCTILE_CONF", (std::string("hardened:true,") + conf).c_str(), 1); }
};

// In the death test's own process: hardened mode must be on there.
inline void* hardened_malloc(size_t size) {
  if (!core::ensure_ready() || !core::g_hardened) _exit(3);
  return ductile_malloc(size);
}

}  // namespace ductile
