// SPDX-License-Identifier: BSD-2-Clause
// Allocator-agnostic malloc/free benchmarks. This program calls only the C
// library's malloc and free and does not link libductile, so running it under
// LD_PRELOAD=<allocator>.so measures that allocator (bench/compare-small.sh
// runs it under glibc, jemalloc, mimalloc, tcmalloc and ductile).
//
//   BM_Pair/N             one malloc+free pair of N bytes per iteration
//   BM_Batch64            malloc 1000 blocks of 64 B, then free them (items =
//                         pairs)
//   BM_MediumBatch/N      malloc N blocks of 24 KiB (a medium class), write
//                         a byte of each, then free them (items = pairs):
//                         a batch beyond a thread cache's eight
//   BM_ReallocGrow        a string's way up: malloc 16 B, realloc it to 64,
//                         256, 1 KiB and 4 KiB, writing its last byte at each
//                         size, then free it (items = reallocs)
//   BM_ProducerConsumer   thread 0 mallocs blocks of 16..512 B (cycling) and
//                         passes them through a lock-free SPSC ring to thread
//                         1, which reads each block's first byte and frees
//                         it (items = blocks freed)
//
// Extra flag (parsed before Google Benchmark's): --pair_iterations=N runs
// every BM_Pair/N for exactly N iterations instead of timing it, so that an
// outside syscall counter (perf, strace) can divide by a known count.
#include <benchmark/benchmark.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define DUCTILE_BENCH_PAUSE() _mm_pause()
#else
#define DUCTILE_BENCH_PAUSE() ((void)0)
#endif

namespace {

void BM_Pair(benchmark::State& state) {
  const size_t size = static_cast<size_t>(state.range(0));
  for (auto _ : state) {
    char* p = static_cast<char*>(std::malloc(size));
    if (p == nullptr) {
      state.SkipWithError("malloc returned NULL");
      break;
    }
    p[0] = 1;  // touch one byte
    benchmark::DoNotOptimize(p);
    std::free(p);
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations());
}

constexpr int kBatch = 1000;

void BM_Batch64(benchmark::State& state) {
  std::vector<void*> blocks(kBatch);
  const size_t size = static_cast<size_t>(state.range(0));
  for (auto _ : state) {
    for (int i = 0; i < kBatch; ++i) {
      char* p = static_cast<char*>(std::malloc(size));
      p[0] = 1;
      blocks[static_cast<size_t>(i)] = p;
    }
    benchmark::DoNotOptimize(blocks.data());
    for (int i = 0; i < kBatch; ++i) std::free(blocks[static_cast<size_t>(i)]);
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * kBatch);
}

void BM_MediumBatch(benchmark::State& state) {
  const size_t n = static_cast<size_t>(state.range(0));
  std::vector<void*> blocks(n);
  for (auto _ : state) {
    for (size_t i = 0; i < n; ++i) {
      char* p = static_cast<char*>(std::malloc(24 * 1024));
      p[0] = 1;
      blocks[i] = p;
    }
    benchmark::DoNotOptimize(blocks.data());
    for (size_t i = 0; i < n; ++i) std::free(blocks[i]);
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(n));
}

void BM_ReallocGrow(benchmark::State& state) {
  static constexpr size_t kSizes[] = {64, 256, 1024, 4096};
  for (auto _ : state) {
    char* p = static_cast<char*>(std::malloc(16));
    p[15] = 1;
    for (size_t size : kSizes) {
      p = static_cast<char*>(std::realloc(p, size));
      if (p == nullptr) {
        state.SkipWithError("realloc returned NULL");
        return;
      }
      p[size - 1] = 1;
    }
    benchmark::DoNotOptimize(p);
    std::free(p);
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * 4);
}

// Bounded single-producer single-consumer ring, batched on both sides: the
// producer publishes its tail every kPublish pushes (flush() publishes the rest)
// and, when the ring is full, waits until a whole batch is free; the consumer
// publishes its head every kPublish pops and whenever it runs dry. The index
// cache lines thus cross between cores once per batch, never once per block,
// and the run cannot fall into a lock-step regime where every block costs a
// cross-core round trip (on this 2-vCPU machine that regime is ~250 ns per
// block and would hide the allocator).
class SpscRing {
 public:
  static constexpr size_t kSize = 1024;   // power of two
  static constexpr size_t kPublish = 32;  // power of two, kSize / kPublish >= 4

  void push(void* p) {
    const size_t t = tail_local_;
    if (t - head_cache_ > kSize - kPublish) {
      flush();
      unsigned spins = 0;
      for (;;) {
        head_cache_ = head_.load(std::memory_order_acquire);
        if (t - head_cache_ <= kSize - kPublish) break;
        backoff(spins);
      }
    }
    slots_[t & (kSize - 1)] = p;
    tail_local_ = t + 1;
    if ((tail_local_ & (kPublish - 1)) == 0) flush();
  }

  void flush() { tail_.store(tail_local_, std::memory_order_release); }

  void* pop() {
    const size_t h = head_local_;
    if (h == tail_cache_) {
      head_.store(h, std::memory_order_release);
      unsigned spins = 0;
      for (;;) {
        tail_cache_ = tail_.load(std::memory_order_acquire);
        if (h != tail_cache_) break;
        backoff(spins);
      }
    }
    void* p = slots_[h & (kSize - 1)];
    head_local_ = h + 1;
    if ((head_local_ & (kPublish - 1)) == 0) {
      head_.store(head_local_, std::memory_order_release);
    }
    return p;
  }

 private:
  // Spin briefly, then yield: on a 2-core machine the other side may not be
  // running at all.
  static void backoff(unsigned& spins) {
    if (++spins < 64) {
      DUCTILE_BENCH_PAUSE();
    } else {
      std::this_thread::yield();
    }
  }

  // Consumer side.
  alignas(64) std::atomic<size_t> head_{0};
  alignas(64) size_t head_local_ = 0;
  size_t tail_cache_ = 0;
  // Producer side.
  alignas(64) std::atomic<size_t> tail_{0};
  alignas(64) size_t tail_local_ = 0;
  size_t head_cache_ = 0;
  alignas(64) void* slots_[kSize] = {};
};

SpscRing g_ring;

void BM_ProducerConsumer(benchmark::State& state) {
  // Both threads run the same number of iterations: every block pushed is
  // popped, and the ring is empty when the run ends.
  if (state.thread_index() == 0) {
    size_t i = 0;
    for (auto _ : state) {
      const size_t size = 16 + 16 * (i++ & 31);  // 16, 32, ..., 512
      char* p = static_cast<char*>(std::malloc(size));
      p[0] = static_cast<char>(i);
      g_ring.push(p);
      // The last block must be published inside the loop: the loop's end
      // waits for the consumer at a barrier.
      if (static_cast<benchmark::IterationCount>(i) == state.max_iterations) {
        g_ring.flush();
      }
    }
  } else {
    for (auto _ : state) {
      char* p = static_cast<char*>(g_ring.pop());
      // Read the byte the producer wrote, as a consumer reads what it is
      // sent. (DoNotOptimize(p[0]) alone may take the byte's address as an
      // operand and load nothing: the consumer then never touched a block.)
      const char c = *static_cast<volatile char*>(p);
      benchmark::DoNotOptimize(c);
      std::free(p);
    }
    state.SetItemsProcessed(state.iterations());
  }
}

long g_pair_iterations = 0;  // 0: timed as usual

void register_benchmarks() {
  auto* pair = benchmark::RegisterBenchmark("BM_Pair", BM_Pair);
  for (long n : {16L, 64L, 4096L, 65536L, 1048576L}) pair->Arg(n);
  if (g_pair_iterations > 0) pair->Iterations(g_pair_iterations);
  benchmark::RegisterBenchmark("BM_Batch64", BM_Batch64)->Arg(64);
  benchmark::RegisterBenchmark("BM_MediumBatch", BM_MediumBatch)->Arg(16)->Arg(32)->Arg(400);
  benchmark::RegisterBenchmark("BM_ReallocGrow", BM_ReallocGrow);
  benchmark::RegisterBenchmark("BM_ProducerConsumer", BM_ProducerConsumer)
      ->Threads(2)
      ->UseRealTime();
}

}  // namespace

int main(int argc, char** argv) {
  // Take our own flag out before Google Benchmark sees the arguments.
  int out = 1;
  for (int i = 1; i < argc; ++i) {
    static const char kFlag[] = "--pair_iterations=";
    if (std::strncmp(argv[i], kFlag, sizeof kFlag - 1) == 0) {
      g_pair_iterations = std::strtol(argv[i] + sizeof kFlag - 1, nullptr, 10);
    } else {
      argv[out++] = argv[i];
    }
  }
  argc = out;
  argv[argc] = nullptr;

  register_benchmarks();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
