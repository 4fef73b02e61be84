#include <sys/mman.h>

#include <cstring>

#include <gtest/gtest.h>



// Maps n pages the test owns directly (not through the Os) and fills them.
  void* p = ::mmap(nullptr, pages * kPage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  EXPECT_NE(p, MAP_FAILED);
  std::memset(p, fill, pages * kPage);
  return static_cast<char*>(p);
}

