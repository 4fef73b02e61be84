/* SPDX-License-Identifier: BSD-2-Clause */
// Requests and size classes for tests that run in both builds: a hardened
// build's blocks hold their request and a seal (small/seal.h), so a request
// of a class's size lands in the next class there.
#pragma once

#include <cstddef>

#include "base/common.h"
#include "small/seal.h"
#include "small/size_classes.h"

namespace ductile::test {

// The class a request of `size` bytes gets (no alignment).
inline size_t class_of_request(size_t size) {
  return small::class_of(kHardened ? small::sealed_size(size) : size);
}

// The largest request a block of `block` bytes (16 or more) holds: all of
// it, less the seal in a hardened build.
constexpr size_t request_for_block(size_t block) { return block - (kHardened ? small::kSealSize : 0); }

// The largest request a block of class `cls` holds, where the 8-byte class
// of a hardened build holds none (0: skip it).
inline size_t request_of_class(size_t cls) {
  const size_t size = small::class_size(cls);
  return kHardened && size < small::sealed_size(0) ? 0 : request_for_block(size);
}

}  // namespace ductile::test
