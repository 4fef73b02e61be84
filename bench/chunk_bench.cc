// SPDX-License-Identifier: BSD-2-Clause
// The chunk layer on the real kernel: extent alloc/free (recycled, no system
// calls in steady state), alloc-at-address, and in-place growth.
#include <benchmark/benchmark.h>

#include <vector>

#include "chunk/chunk.h"

namespace ductile {
namespace {

struct Fixture {
  os::Os os{os::linux_kernel()};
  chunk::MonotonicClock clock;
  chunk::ChunkLayer layer{os, clock};
};

Fixture& fixture() {
  static Fixture* f = new Fixture();
  return *f;
}

void BM_ExtentAllocFree(benchmark::State& state) {
  auto& f = fixture();
  const size_t size = static_cast<size_t>(state.range(0)) * kPage;
  uint64_t calls = f.os.counters().total();
  for (auto _ : state) {
    chunk::Extent* e = f.layer.alloc(size).extent;
    benchmark::DoNotOptimize(e);
    f.layer.free(e);
  }
  state.counters["syscalls/op"] = benchmark::Counter(
      static_cast<double>(f.os.counters().total() - calls) / static_cast<double>(state.iterations()));
}
BENCHMARK(BM_ExtentAllocFree)->Arg(1)->Arg(16)->Arg(256)->Arg(4096);

void BM_ExtentAllocFreeMany(benchmark::State& state) {
  auto& f = fixture();
  std::vector<chunk::Extent*> v(256);
  for (auto _ : state) {
    for (auto& e : v) e = f.layer.alloc(((&e - v.data()) % 7 + 1) * kPage).extent;
    for (auto* e : v) f.layer.free(e);
  }
  state.SetItemsProcessed(state.iterations() * 256);
}
BENCHMARK(BM_ExtentAllocFreeMany);

void BM_AllocAtNeighbour(benchmark::State& state) {
  auto& f = fixture();
  chunk::Extent* a = f.layer.alloc(16 * kPage).extent;
  chunk::Extent* b = f.layer.alloc(16 * kPage).extent;
  chunk::Extent* guard = f.layer.alloc(kPage).extent;
  uintptr_t at = b->base;
  f.layer.free(b);
  for (auto _ : state) {
    chunk::Extent* e = f.layer.alloc_at(at, 16 * kPage).extent;
    benchmark::DoNotOptimize(e);
    f.layer.free(e);
  }
  f.layer.free(a);
  f.layer.free(guard);
}
BENCHMARK(BM_AllocAtNeighbour);

void BM_GrowShrinkInPlace(benchmark::State& state) {
  auto& f = fixture();
  chunk::Extent* a = f.layer.alloc(16 * kPage).extent;
  chunk::Extent* b = f.layer.alloc(64 * kPage).extent;
  chunk::Extent* guard = f.layer.alloc(kPage).extent;
  f.layer.free(b);
  for (auto _ : state) {
    if (f.layer.grow(a, 64 * kPage, false).path != chunk::GrowPath::kNeighbour) state.SkipWithError("refused");
    if (!f.layer.shrink(a, 16 * kPage)) state.SkipWithError("shrink failed");
  }
  f.layer.free(a);
  f.layer.free(guard);
}
BENCHMARK(BM_GrowShrinkInPlace);

}  // namespace
}  // namespace ductile

BENCHMARK_MAIN();
