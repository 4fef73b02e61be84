// SPDX-License-Identifier: BSD-2-Clause
// push_back of 1 GiB of uint64_t, one element at a time, into a std::vector
// (whatever allocator LD_PRELOAD puts under it) or, with --ductile-vector,
// into a ductile::vector (include/ductile/vector.h), which needs ductile
// preloaded: the program does not link libductile, so that the same binary
// measures every allocator, and refers to ductile's functions weakly.
//
// Usage: vector_push [--ductile-vector | --settle] [size]
//   size      the bytes of uint64_t pushed (default 1G; K, M and G suffixes)
//   --settle  no push_back: maps twice size with huge-page advice, writes it
//             and unmaps it, so that the run after it finds memory that the
//             (virtual) machine has backed already, in whole huge pages (on
//             this project's virtual machines a huge-page fault on memory
//             never backed cost 4 to 5 times one on backed memory: a run's
//             time depended on the runs before it; compare-vector.sh does
//             the same before each of its runs)
//
// Prints one line of key=value pairs: mode, bytes (pushed), final (the
// buffer's capacity in bytes at the end), seconds (the push_back loop; the
// buffer freed after the clock stops), peak_rss_mib (getrusage ru_maxrss),
// steps (capacity changes of a buffer of 2 MiB or more), moves (those that
// changed its address), and -- only under ductile, read through its mallctl
// -- the huge blocks' growth counts by path (headroom, neighbour, fixed_map,
// mremap, copy).
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <vector>

#include <sys/mman.h>
#include <sys/resource.h>

#include <ductile/vector.h>

// Defined when ductile is preloaded; null otherwise.
#pragma weak ductile_mallocx
#pragma weak ductile_rallocx
#pragma weak ductile_xallocx
#pragma weak ductile_sallocx
#pragma weak ductile_sdallocx
#pragma weak ductile_nallocx
#pragma weak ductile_mallctl

namespace {

// The size from which a changed address counts as a move: ductile's huge
// threshold, about where every allocator stops using size classes.
constexpr size_t kMoveFrom = size_t{2} << 20;

double now() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

bool parse_size(const char* s, size_t* out) {
  char* end;
  errno = 0;
  unsigned long long v = std::strtoull(s, &end, 0);
  if (errno != 0 || end == s) return false;
  switch (*end) {
    case 'k': case 'K': v <<= 10; end++; break;
    case 'm': case 'M': v <<= 20; end++; break;
    case 'g': case 'G': v <<= 30; end++; break;
    default: break;
  }
  if (*end != '\0') return false;
  *out = static_cast<size_t>(v);
  return true;
}

struct Result {
  double seconds;
  size_t final_bytes, steps, moves;
};

// The loop, the same for both containers. The buffer is freed after the
// clock stops (still within the process, so its peak is the loop's).
template <class Vector>
Result push(size_t elements) {
  Result r{};
  auto* v = new Vector;
  const uint64_t* data = nullptr;
  size_t cap = 0;
  const double t0 = now();
  for (uint64_t i = 0; i < elements; i++) {
    v->push_back(i);
    if (v->capacity() != cap) {  // the branch the loop takes at each growth only
      if (cap * sizeof(uint64_t) >= kMoveFrom) {
        r.steps++;
        if (v->data() != data) r.moves++;
      }
      cap = v->capacity();
      data = v->data();
    }
  }
  r.seconds = now() - t0;
  r.final_bytes = v->capacity() * sizeof(uint64_t);
  // Read one element in every page, so the loop cannot be dropped.
  uint64_t sum = 0;
  for (size_t i = 0; i < elements; i += 512) sum += (*v)[i];
  if (elements > 0 && sum == 1) std::fputs("", stderr);
  delete v;
  return r;
}

int settle(size_t len) {
  void* p = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    std::perror("mmap");
    return 1;
  }
  (void)madvise(p, len, MADV_HUGEPAGE);
  std::memset(p, 1, len);
  munmap(p, len);
  return 0;
}

void print_ductile_growth() {
  static const char* const paths[] = {"headroom", "neighbour", "fixed_map", "mremap", "copy"};
  if (ductile_mallctl == nullptr) return;
  for (const char* path : paths) {
    char name[64];
    uint64_t v = 0;
    size_t len = sizeof v;
    std::snprintf(name, sizeof name, "ductile.huge.growth.%s", path);
    if (ductile_mallctl(name, &v, &len, nullptr, 0) == 0 && len == sizeof v)
      std::printf(" %s=%llu", path, static_cast<unsigned long long>(v));
  }
}

}  // namespace

int main(int argc, char** argv) {
  bool ductile_vector = false, settling = false;
  size_t bytes = size_t{1} << 30;
  for (int i = 1; i < argc; i++) {
    if (std::strcmp(argv[i], "--ductile-vector") == 0) {
      ductile_vector = true;
    } else if (std::strcmp(argv[i], "--settle") == 0) {
      settling = true;
    } else if (!parse_size(argv[i], &bytes) || bytes < sizeof(uint64_t) || bytes > (size_t{1} << 40)) {
      std::fprintf(stderr, "usage: %s [--ductile-vector | --settle] [size]\n", argv[0]);
      return 2;
    }
  }
  if (settling) return settle(2 * bytes);
  if (ductile_vector && (ductile_mallocx == nullptr || ductile_xallocx == nullptr)) {
    std::fprintf(stderr, "%s: --ductile-vector needs ductile (LD_PRELOAD=libductile.so)\n", argv[0]);
    return 2;
  }
  const size_t elements = bytes / sizeof(uint64_t);
  const Result r = ductile_vector ? push<ductile::vector<uint64_t>>(elements) : push<std::vector<uint64_t>>(elements);
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  std::printf("mode=%s bytes=%zu final=%zu seconds=%.4f peak_rss_mib=%.1f steps=%zu moves=%zu",
              ductile_vector ? "ductile::vector" : "std::vector", elements * sizeof(uint64_t), r.final_bytes,
              r.seconds, static_cast<double>(ru.ru_maxrss) / 1024.0, r.steps, r.moves);
  print_ductile_growth();
  std::printf("\n");
  return 0;
}
