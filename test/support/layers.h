/* SPDX-License-Identifier: BSD-2-Clause */
// The base of the fixtures that test the chunk layer or a layer built on it:
// a fake kernel and clock, and an OS layer and a chunk layer over them.
#pragma once

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <memory>

#include "chunk/chunk.h"
#include "os/os.h"
#include "support/fake_clock.h"
#include "support/fake_kernel.h"

namespace ductile::test {

class ChunkLayerTest : public ::testing::Test {
 protected:
  static constexpr uint64_t kOneSecond = 1000 * 1000000ull;

  // (Re)builds the OS layer and the chunk layer over the fake kernel and
  // clock, with reservations of `reservation` bytes and a decay time of
  // `decay_ns`. Whatever was built on the previous chunk layer must be
  // dropped first.
  void make_chunks(size_t reservation, uint64_t decay_ns = kOneSecond, size_t remapped_bound = 1024,
                   size_t decay_step_bytes = chunk::Options().decay_step_bytes) {
    chunks_.reset();
    os_.reset();
    os_ = std::make_unique<os::Os>(kernel_);
    // The layer's kernel probes run at its first purge; here at once, so
    // that the tests' counts and planned failures see the layer's own calls.
    (void)os_->probed_features();
    chunk::Options o;
    o.decay_ns = decay_ns;
    o.decay_step_bytes = decay_step_bytes;
    o.reservation = reservation;
    o.remapped_bound = remapped_bound;
    chunks_ = std::make_unique<chunk::ChunkLayer>(*os_, clock_, o);
  }

  FakeKernel kernel_;
  FakeClock clock_;
  std::unique_ptr<os::Os> os_;
  std::unique_ptr<chunk::ChunkLayer> chunks_;
};

}  // namespace ductile::test
