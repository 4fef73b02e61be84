// SPDX-License-Identifier: BSD-2-Clause
// The huge layer on the real kernel, and the trade-off behind its headroom
// policy (huge::Options::headroom_factor; the numbers are in
// docs/measurements/huge-growth.md):
//  * BM_VectorDoubling/<factor>/<top MiB>: one round of the vector-doubling
//    loop from 2 MiB, the span recycled from round to round;
//  * BM_InterleavedDoubling/<factor>: four blocks doubling in turn from
//    2 MiB to 64 MiB while small extents are taken from the chunk layer
//    between the steps (what a real program does), so that free neighbours
//    are scarce and headroom is what keeps growth in place;
//  * BM_AllocFree/<MiB>: a huge alloc/free pair in steady state.
// Counters: moves (mremap) and copies per iteration, system calls per
// iteration, the address space the spans hold over the bytes in use (at
// most, over a round), and the mappings (VMAs) the benchmark added to the
// process by the end of a round (vm.max_map_count is 65530).
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstring>
#include <vector>

#include "chunk/chunk.h"
#include "huge/huge.h"

namespace ductile {
namespace {

constexpr size_t kMiB = size_t{1} << 20;

struct Stack {
  explicit Stack(unsigned factor) : huge(chunks, options(factor)) {}
  static huge::Options options(unsigned factor) {
    huge::Options o;
    o.headroom_factor = factor;
    return o;
  }
  ~Stack() { (void)chunks.trim(); }  // the pages go back; the address space stays (never unmapped)

  os::Os os{os::linux_kernel()};
  chunk::MonotonicClock clock;
  chunk::ChunkLayer chunks{os, clock};
  huge::HugeLayer huge;
};

size_t mappings() {
  FILE* f = std::fopen("/proc/self/maps", "r");
  if (f == nullptr) return 0;
  size_t n = 0;
  for (int c; (c = std::fgetc(f)) != EOF;) n += c == '\n';
  std::fclose(f);
  return n;
}

uint64_t moves(const huge::HugeStats& s) { return s.growth[static_cast<size_t>(huge::GrowthPath::kMremap)]; }
uint64_t copies(const huge::HugeStats& s) { return s.growth[static_cast<size_t>(huge::GrowthPath::kCopy)]; }

void report(benchmark::State& state, Stack& s, const huge::HugeStats& before, uint64_t calls) {
  huge::HugeStats after = s.huge.stats();
  const double n = static_cast<double>(state.iterations());
  state.counters["moves/iter"] = static_cast<double>(moves(after) - moves(before)) / n;
  state.counters["copies/iter"] = static_cast<double>(copies(after) - copies(before)) / n;
  state.counters["syscalls/iter"] = static_cast<double>(s.os.counters().total() - calls) / n;
}

void BM_VectorDoubling(benchmark::State& state) {
  Stack s(static_cast<unsigned>(state.range(0)));
  const size_t top = static_cast<size_t>(state.range(1)) * kMiB;
  auto round = [&] {
    // Growing: as realloc makes it from a smaller block (huge-page space).
    void* p = s.huge.alloc(2 * kMiB, kPage, false, true);
    std::memset(p, 0xff, 2 * kMiB);
    for (size_t size = 4 * kMiB; size < top; size *= 2) {
      void* q = s.huge.resize(s.chunks.lookup(p), size, kPage, false);
      if (q == nullptr) std::abort();
      p = q;
      std::memset(static_cast<char*>(p) + size / 2, 0xff, size / 2);
      benchmark::ClobberMemory();
    }
    s.huge.free(s.chunks.lookup(p));
  };
  round();  // the first round pays the page faults; the benchmark measures the rest
  huge::HugeStats before = s.huge.stats();
  uint64_t calls = s.os.counters().total();
  for (auto _ : state) round();
  report(state, s, before, calls);
}
BENCHMARK(BM_VectorDoubling)->ArgsProduct({{0, 1, 3}, {1024}})->Unit(benchmark::kMillisecond);

void BM_InterleavedDoubling(benchmark::State& state) {
  const size_t vmas_before = mappings();
  Stack s(static_cast<unsigned>(state.range(0)));
  constexpr int kBlocks = 4;
  constexpr size_t kTop = 64 * kMiB;
  double span_ratio = 0;
  size_t vmas = 0;
  auto round = [&](bool measure) {
    void* p[kBlocks];
    std::vector<chunk::Extent*> small;
    for (auto& b : p) {
      b = s.huge.alloc(2 * kMiB, kPage, false, true);  // as realloc makes it
      std::memset(b, 1, 2 * kMiB);
    }
    for (size_t size = 4 * kMiB; size <= kTop; size *= 2) {
      for (auto& b : p) {
        void* q = s.huge.resize(s.chunks.lookup(b), size, kPage, false);
        if (q == nullptr) std::abort();
        b = q;
        std::memset(static_cast<char*>(b) + size / 2, 1, size / 2);
        // Something else takes memory between the steps: 64 KiB slabs.
        small.push_back(s.chunks.alloc(16 * kPage).extent);
        if (measure) {
          huge::HugeStats h = s.huge.stats();
          double r = static_cast<double>(h.span_bytes) / static_cast<double>(h.active_bytes);
          if (r > span_ratio) span_ratio = r;
        }
      }
    }
    if (measure) vmas = mappings();
    for (auto& b : p) s.huge.free(s.chunks.lookup(b));
    for (auto* e : small) s.chunks.free(e);
  };
  round(false);
  huge::HugeStats before = s.huge.stats();
  uint64_t calls = s.os.counters().total();
  for (auto _ : state) round(false);
  report(state, s, before, calls);
  round(true);  // after the timed loop: not timed
  state.counters["span/block(max)"] = span_ratio;
  state.counters["vmas"] = static_cast<double>(vmas) - static_cast<double>(vmas_before);
}
BENCHMARK(BM_InterleavedDoubling)->Arg(0)->Arg(1)->Arg(3)->Unit(benchmark::kMillisecond);

void BM_AllocFree(benchmark::State& state) {
  static Stack* s = new Stack(huge::Options().headroom_factor);
  const size_t size = static_cast<size_t>(state.range(0)) * kMiB;
  s->huge.free(s->chunks.lookup(s->huge.alloc(size, kPage, false)));
  uint64_t calls = s->os.counters().total();
  for (auto _ : state) {
    void* p = s->huge.alloc(size, kPage, false);
    benchmark::DoNotOptimize(p);
    s->huge.free(s->chunks.lookup(p));
  }
  state.counters["syscalls/iter"] =
      static_cast<double>(s->os.counters().total() - calls) / static_cast<double>(state.iterations());
}
BENCHMARK(BM_AllocFree)->Arg(2)->Arg(64);

}  // namespace
}  // namespace ductile

BENCHMARK_MAIN();
