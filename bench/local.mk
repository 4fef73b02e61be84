## bench/local.mk -- Google Benchmark programs (included from Makefile.am).
## Not built by `make`; `make bench` builds and runs them.
## Pass other flags with e.g. `make bench BENCH_FLAGS=--benchmark_filter=Huge`.

ductile_benches = \
	bench/chunk_bench
EXTRA_PROGRAMS += $(ductile_benches)
CLEANFILES += $(ductile_benches)

ductile_bench_cppflags = $(AM_CPPFLAGS) $(BENCHMARK_CFLAGS)
ductile_bench_cxxflags = $(AM_CXXFLAGS) -pthread
ductile_bench_ldflags = -pthread
ductile_bench_ldadd = libductile_core.la $(BENCHMARK_LIBS)

bench_chunk_bench_SOURCES = bench/chunk_bench.cc
bench_chunk_bench_CPPFLAGS = $(ductile_bench_cppflags)
bench_chunk_bench_CXXFLAGS = $(ductile_bench_cxxflags)
bench_chunk_bench_LDFLAGS = $(ductile_bench_ldflags)
bench_chunk_bench_LDADD = $(ductile_bench_ldadd)

# Google Benchmark 1.7.1 (Debian 12) takes --benchmark_min_time as a plain
# number of seconds; the "0.2s" form is 1.8+.
BENCH_MIN_TIME = 0.2
BENCH_FLAGS =

.PHONY: bench
bench: $(ductile_benches)
	@set -e; for b in $(ductile_benches); do \
	  echo "== $$b"; \
	  ./$$b --benchmark_min_time=$(BENCH_MIN_TIME) $(BENCH_FLAGS); \
	done
