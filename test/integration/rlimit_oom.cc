// SPDX-License-Identifier: BSD-2-Clause
// Out of memory under RLIMIT_AS (run by rlimit_test.sh under `ulimit -v`,
// 512 MiB): blocks of every range are allocated until ductile refuses, and
// then malloc is NULL with ENOMEM, operator new throws std::bad_alloc, the
// nothrow form is nullptr, every block allocated before is intact, and once
// half of them are freed the same requests succeed again.
//
// Exits 0 when every check holds; prints the first failed check otherwise.
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <vector>

#define CHECK(c)                                                                   \
  do {                                                                             \
    if (!(c)) {                                                                    \
      std::fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #c); \
      std::exit(1);                                                                \
    }                                                                              \
  } while (0)

namespace {

// Stores the pointer where the compiler must assume it is read: a new and
// delete of a block that is never used may otherwise be left out.
void* volatile g_sink;

struct Block {
  unsigned char* p;
  size_t size;
};

unsigned char mark(const Block& b, size_t i) { return static_cast<unsigned char>((uintptr_t(b.p) >> 12) + i / 4096 * 7); }
void write_marks(const Block& b) {
  for (size_t i = 0; i < b.size; i += 4096) b.p[i] = mark(b, i);
  b.p[b.size - 1] = 0x5a;
}
bool marks_ok(const Block& b) {
  for (size_t i = 0; i < b.size; i += 4096)
    if (b.p[i] != mark(b, i)) return false;
  return b.p[b.size - 1] == 0x5a;
}

// Allocates blocks of `size` with malloc until refused; returns them.
std::vector<Block> fill_with(size_t size, std::vector<Block>& keep) {
  std::vector<Block> got;
  for (;;) {
    errno = 0;
    auto* p = static_cast<unsigned char*>(std::malloc(size));
    if (p == nullptr) {
      CHECK(errno == ENOMEM);
      return got;
    }
    Block b{p, size};
    write_marks(b);
    got.push_back(b);
    keep.push_back(b);
  }
}

}  // namespace

int main() {
  std::vector<Block> all;
  all.reserve(1 << 16);  // the bookkeeping itself must not be what runs out
  // Huge, then medium, then small blocks, each until refused: the address
  // space fills up in every range.
  size_t huge = fill_with(16u << 20, all).size();
  size_t medium = fill_with(256u << 10, all).size();
  size_t small = fill_with(2000, all).size();
  CHECK(huge > 4);
  std::printf("refused after %zu huge, %zu medium, %zu small blocks\n", huge, medium, small);

  // Every form of refusal.
  errno = 0;
  CHECK(std::malloc(16u << 20) == nullptr && errno == ENOMEM);
  errno = 0;
  CHECK(std::calloc(1, 16u << 20) == nullptr && errno == ENOMEM);
  bool threw = false;
  try {
    char* p = new char[64u << 20];
    g_sink = p;
    delete[] p;
  } catch (const std::bad_alloc&) {
    threw = true;
  }
  CHECK(threw);
  g_sink = new (std::nothrow) char[64u << 20];
  CHECK(g_sink == nullptr);
  // A realloc that cannot grow leaves the block as it was.
  Block& first = all.front();
  errno = 0;
  CHECK(std::realloc(first.p, 256u << 20) == nullptr && errno == ENOMEM);
  for (const Block& b : all) CHECK(marks_ok(b));

  // Work resumes once memory is freed: free every other block.
  std::vector<Block> left;
  for (size_t i = 0; i < all.size(); i++) {
    if (i % 2) std::free(all[i].p);
    else left.push_back(all[i]);
  }
  for (const Block& b : left) CHECK(marks_ok(b));
  void* again = std::malloc(16u << 20);
  CHECK(again != nullptr);
  std::memset(again, 1, 16u << 20);
  char* n = new char[16u << 20];
  g_sink = n;
  std::memset(n, 2, 16u << 20);
  delete[] n;
  std::free(again);
  for (const Block& b : left) std::free(b.p);
  // And all of it, once everything is back.
  std::vector<Block> second;
  CHECK(fill_with(16u << 20, second).size() >= huge);
  for (const Block& b : second) {
    CHECK(marks_ok(b));
    std::free(b.p);
  }
  return 0;
}
