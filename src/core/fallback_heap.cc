// SPDX-License-Identifier: BSD-2-Clause
// The start-up buffer and the heap of a child forked mid-call
// (core/fallback_heap.h).
#include "core/fallback_heap.h"

#include <cerrno>
#include <cstring>

#include "core/state.h"

namespace ductile::core {

namespace {

constexpr size_t kBootstrapBytes = 64 * 1024;
DUCTILE_LARGE_STATIC alignas(16) unsigned char g_bootstrap[kBootstrapBytes];
std::atomic<size_t> g_bootstrap_used{0};

}  // namespace

bool is_bootstrap(const void* p) {
  return addr(p) >= addr(g_bootstrap) && addr(p) < addr(g_bootstrap) + kBootstrapBytes;
}

// `align`: 0 or a power of two. Sizes and alignments are bounded by the
// buffer before any arithmetic, so nothing wraps (size + 16 did, near SIZE_MAX).
void* bootstrap_alloc(size_t size, size_t align) {
  if (align < 16) align = 16;
  if (size > kBootstrapBytes || align > kBootstrapBytes) {
    errno = ENOMEM;
    return nullptr;
  }
  size_t off = g_bootstrap_used.load(std::memory_order_relaxed);
  size_t start, end;
  do {
    start = align_up(addr(g_bootstrap) + off + 16, align) - addr(g_bootstrap);
    end = start + align_up(size, 16);
    if (end > kBootstrapBytes) {
      errno = ENOMEM;
      return nullptr;
    }
  } while (!g_bootstrap_used.compare_exchange_weak(off, end, std::memory_order_relaxed));
  unsigned char* p = g_bootstrap + start;
  std::memcpy(p - 16, &size, sizeof size);
  return p;
}

size_t bootstrap_size(const void* p) {
  size_t s;
  std::memcpy(&s, static_cast<const unsigned char*>(p) - 16, sizeof s);
  return s;
}

bool g_fork_heap = false;  // set in such a child only
Mutex g_fork_heap_lock;    // for the threads such a child may start

namespace {

struct ForkHeapChunk {
  uintptr_t base = 0, end = 0;
};
constexpr size_t kForkHeapChunks = 48;  // doubling sizes: far more than any address space
ForkHeapChunk g_fork_chunks[kForkHeapChunks];
size_t g_fork_nchunks = 0;
uintptr_t g_fork_next = 0;  // in the newest chunk

}  // namespace


void* fork_heap_alloc(size_t size, size_t align) {
  if (align < 16) align = 16;
  if (size > static_cast<size_t>(PTRDIFF_MAX) || align > (size_t{1} << 40)) {
    errno = ENOMEM;
    return nullptr;
  }
  const size_t need = align_up(size ? size : 1, 16);
  LockGuard g(g_fork_heap_lock);
  uintptr_t start = g_fork_nchunks ? align_up(g_fork_next + 16, align) : 0;
  if (g_fork_nchunks == 0 || start + need > g_fork_chunks[g_fork_nchunks - 1].end) {
    const size_t least = size_t{1} << (20 + (g_fork_nchunks < 20 ? g_fork_nchunks : 20));
    size_t n = align_up(need + align + 16, kPage);
    if (n < least) n = least;
    void* m = g_fork_nchunks < kForkHeapChunks ? rt().os.reserve(n) : nullptr;
    if (m != nullptr && !rt().os.commit(m, n)) {
      (void)rt().os.unmap(m, n);
      m = nullptr;
    }
    if (m == nullptr) {
      errno = ENOMEM;
      return nullptr;
    }
    g_fork_chunks[g_fork_nchunks++] = {addr(m), addr(m) + n};
    start = align_up(addr(m) + 16, align);
  }
  g_fork_next = start + need;
  std::memcpy(ptr(start - 16), &size, sizeof size);
  return ptr(start);  // fresh mappings read as zero
}

// The size of a block of the child's own heap; 0 for any other pointer.
size_t fork_heap_size(const void* p) {
  LockGuard g(g_fork_heap_lock);
  for (size_t i = 0; i < g_fork_nchunks; i++)
    if (addr(p) >= g_fork_chunks[i].base && addr(p) < g_fork_chunks[i].end) {
      size_t s;
      std::memcpy(&s, static_cast<const unsigned char*>(p) - 16, sizeof s);
      return s;
    }
  return 0;
}

}  // namespace ductile::core
