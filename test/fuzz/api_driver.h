/* SPDX-License-Identifier: BSD-2-Clause */
// The API fuzzer's driver, shared by the libFuzzer target (api_fuzzer.cc,
// `make fuzz`) and the fixed-seed run inside `make check`
// (test/unit/api/fuzz_test.cc).
//
// run() reads a byte string as a sequence of calls to every entry point of
// the C API -- the malloc family, jemalloc's *allocx, trim and mallctl's
// purge, and a thread that takes blocks over, frees them and exits -- with
// sizes from 0 to 64 MiB (most of them small: a heavy tail) and bad
// arguments (sizes past PTRDIFF_MAX, overflowing calloc and reallocarray
// products, alignments that are not powers of two or cannot be met). A
// shadow of every live block (its size, usable size, alignment and fill
// seed) checks each answer: contents kept across realloc, alignment,
// zeroed memory where promised, usable sizes agreeing with
// malloc_usable_size, sallocx and nallocx, errno on refusal.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ductile::fuzz {

struct Result {
  bool ok = true;
  char what[256] = {};  // the first failure
  uint64_t calls = 0;   // API calls made
  uint64_t refused = 0; // of which refused (NULL, or an error returned)
};

// Runs the calls `data` encodes, then frees every block still live.
Result run(const uint8_t* data, size_t size) noexcept;

}  // namespace ductile::fuzz
