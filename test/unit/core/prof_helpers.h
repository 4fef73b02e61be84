
#include <string>

#include <gtest/gtest.h>

#include "core/prof.h"
#include "ductile/ductile.h"

namespace ductile {






template <typename T>
T ctl(const char* name) {
  T v{};
  size_t len = sizeof v;
  EXPECT_EQ(ductile_mallctl(name, &v, &len, nullptr, 0), 0) << name;
  return v;
}

