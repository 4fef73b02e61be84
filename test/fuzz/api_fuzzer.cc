// SPDX-License-Identifier: BSD-2-Clause
// libFuzzer target over the API driver (api_driver.h): `make fuzz` builds
// it with clang's -fsanitize=fuzzer,address,undefined and runs it.
#include <cstdio>
#include <cstdlib>

#include "fuzz/api_driver.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ductile::fuzz::Result r = ductile::fuzz::run(data, size);
  if (!r.ok) {
    std::fprintf(stderr, "ductile API fuzzer: %s\n", r.what);
    std::abort();
  }
  return 0;
}
