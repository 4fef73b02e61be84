// SPDX-License-Identifier: BSD-2-Clause
// The API fuzzer's driver on fixed seeds (a cross-cutting suite, kept by its concern under api/,
// whose entry points it drives).
//
// The driver (test/fuzz/api_driver.h) runs inputs from a fixed seed: the same
// sequences on every run, bounded in time, inside make check. `make fuzz` runs
// the driver under libFuzzer for long runs.
#include <cstdint>
#include <cstdio>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "fuzz/api_driver.h"

namespace ductile {
namespace {

// Runs `inputs` byte strings of `len` random bytes from `seed`; returns the
// calls made.
uint64_t run_seeded(uint64_t seed, size_t inputs, size_t len) {
  std::mt19937_64 rng(seed);
  std::vector<uint8_t> data(len);
  uint64_t calls = 0, refused = 0;
  for (size_t i = 0; i < inputs; i++) {
    for (auto& b : data) b = static_cast<uint8_t>(rng());
    fuzz::Result r = fuzz::run(data.data(), data.size());
    EXPECT_TRUE(r.ok) << "seed " << seed << ", input " << i << ": " << r.what;
    if (!r.ok) break;
    calls += r.calls;
    refused += r.refused;
  }
  std::printf("seed %llu: %zu inputs of %zu bytes, %llu calls, %llu refused\n",
              static_cast<unsigned long long>(seed), inputs, len, static_cast<unsigned long long>(calls),
              static_cast<unsigned long long>(refused));
  return calls;
}

TEST(ApiFuzz, FixedSeeds) {
  for (uint64_t seed : {1, 2, 3}) EXPECT_GT(run_seeded(seed, 60, 600), 0u);
}

// An empty input and one that runs out mid-call do nothing wrong.
TEST(ApiFuzz, ShortInputs) {
  EXPECT_TRUE(fuzz::run(nullptr, 0).ok);
  const uint8_t one[] = {3};
  EXPECT_TRUE(fuzz::run(one, 1).ok);
}

}  // namespace
}  // namespace ductile
