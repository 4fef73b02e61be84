# SPDX-License-Identifier: BSD-2-Clause
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
ductile_bench_ldadd = libductile_cxx.la libductile_core.la $(BENCHMARK_LIBS)

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

## Allocator-agnostic programs for bench/compare-small.sh: they call only the
## C library's malloc/free and do NOT link libductile, so LD_PRELOAD picks the
## allocator measured. malloc_bench also runs under `make bench` (glibc).
ductile_benches += bench/malloc_bench
EXTRA_PROGRAMS += bench/rss_per_block
CLEANFILES += bench/rss_per_block

bench_malloc_bench_SOURCES = bench/malloc_bench.cc
bench_malloc_bench_CPPFLAGS = $(BENCHMARK_CFLAGS)
bench_malloc_bench_CXXFLAGS = $(AM_CXXFLAGS) -pthread
bench_malloc_bench_LDFLAGS = -pthread
bench_malloc_bench_LDADD = $(BENCHMARK_LIBS)

bench_rss_per_block_SOURCES = bench/rss_per_block.c
bench_rss_per_block_CPPFLAGS =
bench_rss_per_block_CFLAGS = -Wall -Wextra
bench_rss_per_block_LDADD =

# Resident memory after medium blocks grow into the huge range, untouched or
# written: `make compare-realloc-rss` (seconds).
EXTRA_PROGRAMS += bench/realloc_rss
CLEANFILES += bench/realloc_rss
bench_realloc_rss_SOURCES = bench/realloc_rss.c
bench_realloc_rss_CPPFLAGS =
bench_realloc_rss_CFLAGS = -Wall -Wextra
bench_realloc_rss_LDADD =

REALLOC_RSS_FLAGS =
# What threads that went quiet keep resident: `make compare-idle`.
EXTRA_PROGRAMS += bench/idle_threads
CLEANFILES += bench/idle_threads
bench_idle_threads_SOURCES = bench/idle_threads.c
bench_idle_threads_CPPFLAGS =
bench_idle_threads_CFLAGS = -Wall -Wextra -pthread
bench_idle_threads_LDFLAGS = -pthread
bench_idle_threads_LDADD =
IDLE_FLAGS =
.PHONY: compare-idle
compare-idle: bench/idle_threads $(lib_LTLIBRARIES)
	BUILD_DIR=$(abs_top_builddir) bash $(srcdir)/bench/compare-idle.sh $(IDLE_FLAGS)

# The attack table (test/attacks/attack-table.sh): every case of
# test/attacks/attacks under ductile (default, hardened:true and, with
# HARDENED_LIB, an --enable-hardened build), Scudo (SCUDO_LIB), mimalloc
# built with MI_SECURE (MIMALLOC_SECURE_LIB) and glibc, as a Markdown table
# (seconds); docs/measurements/attacks.md has it. e.g.
# `make attack-table HARDENED_LIB=/path/to/libductile.so ATTACK_FLAGS="--runs 5"`.
ATTACK_FLAGS =
.PHONY: attack-table
attack-table: test/attacks/attacks $(lib_LTLIBRARIES)
	BUILD_DIR=$(abs_top_builddir) bash $(srcdir)/test/attacks/attack-table.sh $(ATTACK_FLAGS)

.PHONY: compare-realloc-rss
compare-realloc-rss: bench/realloc_rss $(lib_LTLIBRARIES)
	BUILD_DIR=$(abs_top_builddir) bash $(srcdir)/bench/compare-realloc-rss.sh $(REALLOC_RSS_FLAGS)

# `make compare-small` runs glibc, jemalloc, mimalloc, tcmalloc and ductile
# side by side (about 3 minutes); COMPARE_SMALL_FLAGS=--quick for a short run.
COMPARE_SMALL_FLAGS =
.PHONY: compare-small
compare-small: bench/malloc_bench bench/rss_per_block $(lib_LTLIBRARIES)
	BUILD_DIR=$(abs_top_builddir) bash $(srcdir)/bench/compare-small.sh $(COMPARE_SMALL_FLAGS)

## bench/free_path: the common malloc and free, counted under callgrind by
## `make count-instructions` (instructions per step, start-up subtracted;
## COUNT_FLAGS passes e.g. --steps N or other libraries to compare).
EXTRA_PROGRAMS += bench/free_path
CLEANFILES += bench/free_path
bench_free_path_SOURCES = bench/free_path.c
bench_free_path_CPPFLAGS =
bench_free_path_CFLAGS = -Wall -Wextra
bench_free_path_LDADD =

COUNT_FLAGS =
.PHONY: count-instructions
count-instructions: bench/free_path $(lib_LTLIBRARIES)
	BUILD_DIR=$(abs_top_builddir) bash $(srcdir)/bench/count-instructions.sh $(COUNT_FLAGS)

## The vector-doubling benchmark: plain C, only realloc/free/memset,
## so LD_PRELOAD picks the allocator; --bare-thp and --bare-faulted are the
## two bare-memory limits. `make check` builds it (compare_vector_test.sh
## runs the comparison at a tiny size); `make compare-vector` runs it under
## glibc, jemalloc, mimalloc, tcmalloc and ductile and draws
## vector-doubling.png (figures in vector-doubling.dat) in the build
## directory. The README's chart, docs/vector-doubling.png, is rewritten only
## on purpose: `make compare-vector VECTOR_FLAGS=--docs` (a new run), or
## `make vector-chart` (redrawn from docs/vector-doubling.dat).
check_PROGRAMS += bench/vector_doubling
CLEANFILES += vector-doubling.png vector-doubling.dat

# The huge layer itself (Google Benchmark): the headroom policy's trade-off.
ductile_benches += bench/huge_bench
bench_huge_bench_SOURCES = bench/huge_bench.cc
bench_huge_bench_CPPFLAGS = $(ductile_bench_cppflags)
bench_huge_bench_CXXFLAGS = $(ductile_bench_cxxflags)
bench_huge_bench_LDFLAGS = $(ductile_bench_ldflags)
bench_huge_bench_LDADD = $(ductile_bench_ldadd)

bench_vector_doubling_SOURCES = bench/vector_doubling.c
bench_vector_doubling_CPPFLAGS =
bench_vector_doubling_CFLAGS = -Wall -Wextra
bench_vector_doubling_LDADD = -lpthread

bench: bench/vector_doubling

# e.g. make compare-vector VECTOR_FLAGS="--rounds 3 --no-png"
VECTOR_FLAGS =
.PHONY: compare-vector
compare-vector: bench/vector_doubling $(lib_LTLIBRARIES)
	BUILD_DIR=$(abs_top_builddir) bash $(srcdir)/bench/compare-vector.sh $(VECTOR_FLAGS)

.PHONY: vector-chart
vector-chart:
	gnuplot -e "datafile='$(srcdir)/docs/vector-doubling.dat'; outfile='$(srcdir)/docs/vector-doubling.png'" \
	  $(srcdir)/bench/vector.gp

## push_back of 1 GiB of uint64_t (bench/vector_push.cc): std::vector, and
## ductile::vector (include/ductile/vector.h), whose buffer grows in place.
## The program does not link libductile -- LD_PRELOAD picks the allocator,
## and ductile::vector needs ductile preloaded -- and `make check` builds it
## (compare_vector_push_test.sh runs the comparison at a tiny size). `make
## compare-vector-push` runs std::vector under glibc, jemalloc, mimalloc,
## tcmalloc and ductile and ductile::vector under ductile, 3 runs of each
## interleaved (about a minute; VECTOR_PUSH_FLAGS, e.g. "--reps 5" or
## "--size 256M"); docs/measurements/vector-push.md has the figures.
check_PROGRAMS += bench/vector_push
bench_vector_push_SOURCES = bench/vector_push.cc
bench_vector_push_CPPFLAGS = -I$(top_srcdir)/include
bench_vector_push_CXXFLAGS = $(AM_CXXFLAGS)
bench_vector_push_LDADD =
bench: bench/vector_push

VECTOR_PUSH_FLAGS =
.PHONY: compare-vector-push
compare-vector-push: bench/vector_push $(lib_LTLIBRARIES)
	BUILD_DIR=$(abs_top_builddir) bash $(srcdir)/bench/compare-vector-push.sh $(VECTOR_PUSH_FLAGS)

## The workload suite: programs that look like real ones, written
## for ductile in plain C/C++ with only malloc/free/realloc/new/delete, so
## LD_PRELOAD picks the allocator measured (they do NOT link libductile).
## `make compare-workloads` runs them under glibc, jemalloc, mimalloc,
## tcmalloc and ductile (about 15 minutes; COMPARE_WORKLOADS_FLAGS=--quick
## for a few minutes) and draws docs/workloads.png. See docs/measurements/workloads.md.
ductile_workloads = \
	bench/workloads/larson \
	bench/workloads/xmalloc \
	bench/workloads/cache_scratch \
	bench/workloads/medium_cycle \
	bench/workloads/churn \
	bench/workloads/thread_churn \
	bench/workloads/short_threads \
	bench/workloads/batch \
	bench/workloads/prodcons \
	bench/workloads/pair_churn \
	bench/workloads/small_program \
	bench/workloads/startup \
	bench/workloads/vecstr \
	bench/workloads/tree \
	bench/workloads/trim_rss
EXTRA_PROGRAMS += $(ductile_workloads)
CLEANFILES += $(ductile_workloads)

wl_cflags = -Wall -Wextra -pthread
wl_ldflags = -pthread
bench_workloads_larson_SOURCES = bench/workloads/larson.c bench/workloads/wl.h
bench_workloads_larson_CFLAGS = $(wl_cflags)
bench_workloads_larson_LDFLAGS = $(wl_ldflags)
bench_workloads_xmalloc_SOURCES = bench/workloads/xmalloc.c bench/workloads/wl.h
bench_workloads_xmalloc_CFLAGS = $(wl_cflags)
bench_workloads_xmalloc_LDFLAGS = $(wl_ldflags)
bench_workloads_cache_scratch_SOURCES = bench/workloads/cache_scratch.c bench/workloads/wl.h
bench_workloads_cache_scratch_CFLAGS = $(wl_cflags)
bench_workloads_cache_scratch_LDFLAGS = $(wl_ldflags)
bench_workloads_medium_cycle_SOURCES = bench/workloads/medium_cycle.c bench/workloads/wl.h
bench_workloads_medium_cycle_CFLAGS = $(wl_cflags)
bench_workloads_medium_cycle_LDADD = -lm
bench_workloads_churn_SOURCES = bench/workloads/churn.c bench/workloads/wl.h
bench_workloads_churn_CFLAGS = $(wl_cflags)
bench_workloads_thread_churn_SOURCES = bench/workloads/thread_churn.c bench/workloads/wl.h
bench_workloads_thread_churn_CFLAGS = $(wl_cflags)
bench_workloads_thread_churn_LDFLAGS = $(wl_ldflags)
bench_workloads_short_threads_SOURCES = bench/workloads/short_threads.c bench/workloads/wl.h
bench_workloads_short_threads_CFLAGS = $(wl_cflags)
bench_workloads_short_threads_LDFLAGS = $(wl_ldflags)
bench_workloads_batch_SOURCES = bench/workloads/batch.c bench/workloads/wl.h
bench_workloads_batch_CFLAGS = $(wl_cflags)
bench_workloads_batch_LDFLAGS = $(wl_ldflags)
bench_workloads_prodcons_SOURCES = bench/workloads/prodcons.c bench/workloads/wl.h
bench_workloads_prodcons_CFLAGS = $(wl_cflags)
bench_workloads_prodcons_LDFLAGS = $(wl_ldflags)
bench_workloads_pair_churn_SOURCES = bench/workloads/pair_churn.c bench/workloads/wl.h
bench_workloads_pair_churn_CFLAGS = $(wl_cflags)
bench_workloads_pair_churn_LDFLAGS = $(wl_ldflags)
bench_workloads_small_program_SOURCES = bench/workloads/small_program.c bench/workloads/wl.h
bench_workloads_small_program_CFLAGS = $(wl_cflags)
bench_workloads_startup_SOURCES = bench/workloads/startup.c bench/workloads/wl.h
bench_workloads_startup_CFLAGS = $(wl_cflags)
bench_workloads_vecstr_SOURCES = bench/workloads/vecstr.cc bench/workloads/wl.h
bench_workloads_vecstr_CXXFLAGS = -Wall -Wextra
bench_workloads_tree_SOURCES = bench/workloads/tree.cc bench/workloads/wl.h
bench_workloads_tree_CXXFLAGS = -Wall -Wextra
bench_workloads_trim_rss_SOURCES = bench/workloads/trim_rss.c bench/workloads/wl.h
bench_workloads_trim_rss_CFLAGS = $(wl_cflags)
bench_workloads_trim_rss_LDFLAGS = $(wl_ldflags)
bench_workloads_trim_rss_LDADD = -ldl

COMPARE_WORKLOADS_FLAGS =
.PHONY: compare-workloads workloads
workloads: $(ductile_workloads) bench/vector_doubling
compare-workloads: workloads $(lib_LTLIBRARIES)
	BUILD_DIR=$(abs_top_builddir) bash $(srcdir)/bench/compare-workloads.sh $(COMPARE_WORKLOADS_FLAGS)

## The scale cases (bench/scale.c): plain C, only the malloc
## family, so LD_PRELOAD picks the allocator. `make compare-scale` runs
## cases 1, 2, 4, 5, 6 and 7 under glibc, jemalloc, mimalloc, tcmalloc and
## ductile and prints a table per case (the full sizes take about half an
## hour and up to about 5 GiB; COMPARE_SCALE_FLAGS=--quick for a few
## minutes, or e.g. "--cases 1 --rounds 100000").
EXTRA_PROGRAMS += bench/scale
CLEANFILES += bench/scale
bench_scale_SOURCES = bench/scale.c
bench_scale_CPPFLAGS =
bench_scale_CFLAGS = -Wall -Wextra -pthread
bench_scale_LDFLAGS = -pthread
bench_scale_LDADD = -ldl

COMPARE_SCALE_FLAGS =
.PHONY: compare-scale
compare-scale: bench/scale $(lib_LTLIBRARIES)
	BUILD_DIR=$(abs_top_builddir) bash $(srcdir)/bench/compare-scale.sh $(COMPARE_SCALE_FLAGS)

## Statistics reads (bench/stats_latency.c): plain C, only the malloc family,
## the reads found at run time, so LD_PRELOAD picks the allocator.
## `make stats-latency` times mallctl("stats.allocated") after an epoch,
## mallinfo2 and malloc_stats under glibc, jemalloc, mimalloc, tcmalloc and
## ductile with 100 000 small blocks live (a few seconds);
## STATS_LATENCY_FLAGS="--before LIB" adds another ductile build.
EXTRA_PROGRAMS += bench/stats_latency
CLEANFILES += bench/stats_latency
bench_stats_latency_SOURCES = bench/stats_latency.c
bench_stats_latency_CPPFLAGS =
bench_stats_latency_CFLAGS = -Wall -Wextra
bench_stats_latency_LDADD = -ldl

STATS_LATENCY_FLAGS =
.PHONY: stats-latency
stats-latency: bench/stats_latency $(lib_LTLIBRARIES)
	BUILD_DIR=$(abs_top_builddir) bash $(srcdir)/bench/stats-latency.sh $(STATS_LATENCY_FLAGS)
