/* SPDX-License-Identifier: BSD-2-Clause */
// Making the runtime: the Runtime's construction from the options, on the
// first call into the allocator.
#pragma once

#include "os/kernel.h"

namespace ductile::core {

// The kernel under the runtime's OS layer, asked once while the runtime is
// made: os::linux_kernel(). A weak definition, so that a test program can
// define its own and put a fault-injecting kernel under the whole allocator
// (test/unit/core/fault_test.cc); the shared library binds it internally.
os::Kernel& runtime_kernel() noexcept;

// Makes the runtime ready; false while it is being made by this very thread.
bool ensure_ready() noexcept;

}  // namespace ductile::core
