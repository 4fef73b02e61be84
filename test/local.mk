# SPDX-License-Identifier: BSD-2-Clause
## test/local.mk -- GoogleTest unit tests (included from Makefile.am).
## Run with `make check`.  Each program links libductile_core.la.

ductile_test_cppflags = $(AM_CPPFLAGS) -I$(top_srcdir)/test $(GTEST_CFLAGS)
ductile_test_cxxflags = $(AM_CXXFLAGS) -pthread
ductile_test_ldflags = -pthread
ductile_test_ldadd = libductile_cxx.la libductile_core.la $(GTEST_LIBS)

ductile_unit_tests = \
	test/unit/os_test \
	test/unit/chunk_test \
	test/unit/huge_test \
	test/unit/small_test \
	test/unit/core_test
check_PROGRAMS += $(ductile_unit_tests)
TESTS += $(ductile_unit_tests)

test_unit_os_test_SOURCES = \
	test/unit/os/os_test.cc \
	test/unit/os/kernel_linux_test.cc \
	test/unit/os/map_budget_test.cc \
	test/unit/os/os_helpers.h \
	test/unit/base/lock_test.cc \
	test/support/maps.h \
	test/support/fake_kernel.h \
	test/support/fake_kernel.cc
test_unit_os_test_CPPFLAGS = $(ductile_test_cppflags)
test_unit_os_test_CXXFLAGS = $(ductile_test_cxxflags)
test_unit_os_test_LDFLAGS = $(ductile_test_ldflags)
test_unit_os_test_LDADD = $(ductile_test_ldadd)

test_unit_chunk_test_SOURCES = \
	test/unit/chunk/chunk_test.cc \
	test/unit/chunk/carve_test.cc \
	test/unit/chunk/resize_test.cc \
	test/unit/chunk/decay_test.cc \
	test/unit/chunk/chunk_fixture.h \
	test/unit/chunk/page_map_test.cc \
	test/unit/chunk/extent_set_test.cc \
	test/support/fake_kernel.h \
	test/support/fake_kernel.cc \
	test/support/fake_clock.h \
	test/support/layers.h \
	test/support/maps.h
test_unit_chunk_test_CPPFLAGS = $(ductile_test_cppflags)
test_unit_chunk_test_CXXFLAGS = $(ductile_test_cxxflags)
test_unit_chunk_test_LDFLAGS = $(ductile_test_ldflags)
test_unit_chunk_test_LDADD = $(ductile_test_ldadd)

test_unit_huge_test_SOURCES = \
	test/unit/huge/huge_test.cc \
	test/unit/huge/huge_guard_test.cc \
	test/unit/huge/resize_test.cc \
	test/unit/huge/resize_move_test.cc \
	test/unit/huge/resize_failure_test.cc \
	test/unit/huge/huge_fixture.h \
	test/support/fake_kernel.h \
	test/support/fake_kernel.cc \
	test/support/fake_clock.h \
	test/support/layers.h
test_unit_huge_test_CPPFLAGS = $(ductile_test_cppflags)
test_unit_huge_test_CXXFLAGS = $(ductile_test_cxxflags)
test_unit_huge_test_LDFLAGS = $(ductile_test_ldflags)
test_unit_huge_test_LDADD = $(ductile_test_ldadd)

test_unit_small_test_SOURCES = \
	test/unit/small/size_classes_test.cc \
	test/unit/small/thread_cache_test.cc \
	test/unit/small/bin_test.cc \
	test/unit/small/region_test.cc \
	test/unit/small/region_purge_test.cc \
	test/unit/small/decay_test.cc \
	test/unit/small/prefaulter_test.cc \
	test/unit/small/region_fixture.h \
	test/unit/core/options_test.cc \
	test/support/fake_kernel.h \
	test/support/fake_kernel.cc \
	test/support/fake_clock.h \
	test/support/layers.h \
	test/support/maps.h
test_unit_small_test_CPPFLAGS = $(ductile_test_cppflags)
test_unit_small_test_CXXFLAGS = $(ductile_test_cxxflags)
test_unit_small_test_LDFLAGS = $(ductile_test_ldflags)
test_unit_small_test_LDADD = $(ductile_test_ldadd)

# Links the allocator's objects into the test program: ductile is the
# allocator of the whole test process.
# realloc_test.cc first: its Realloc suite then runs before the aligned
# allocations of up to 64 MiB in alloc_test.cc, as it did before the tests
# were split by file (Realloc.OfForeignOrFreedPointersIsFatal's message for
# a freed 16 MiB block depends on the heap the tests before it left).
test_unit_core_test_SOURCES = \
	test/unit/core/realloc_test.cc \
	test/unit/core/alloc_test.cc \
	test/unit/core/startup_test.cc \
	test/unit/core/free_test.cc \
	test/unit/core/cache_test.cc \
	test/unit/core/cache_depth_test.cc \
	test/unit/core/depot_test.cc \
	test/unit/core/fork_test.cc \
	test/unit/core/control_test.cc \
	test/support/maps.h \
	test/support/patterns.h
test_unit_core_test_CPPFLAGS = $(ductile_test_cppflags)
test_unit_core_test_CXXFLAGS = $(ductile_test_cxxflags)
test_unit_core_test_LDFLAGS = $(ductile_test_ldflags)
test_unit_core_test_LDADD = $(ductile_test_ldadd)

# Under --enable-sanitizers the library does not define malloc and the C++
# operators (the sanitizer's runtime does), so the programs and scripts that
# test ductile as the program's allocator -- linked in, or preloaded -- are
# not built; the layers' unit tests and the ductile_ entry points are.
if !DUCTILE_SANITIZE
# fork() while other threads use stdio and allocate. Built twice from one
# source: linked with the allocator's objects (run here), and on its own
# (fork_stdio_plain), which preload_test.sh runs under LD_PRELOAD.
check_PROGRAMS += test/unit/fork_stdio_test test/integration/fork_stdio_plain
TESTS += test/unit/fork_stdio_test
test_unit_fork_stdio_test_SOURCES = test/unit/core/fork_stdio_test.cc
test_unit_fork_stdio_test_CPPFLAGS = $(ductile_test_cppflags)
test_unit_fork_stdio_test_CXXFLAGS = $(ductile_test_cxxflags)
test_unit_fork_stdio_test_LDFLAGS = $(ductile_test_ldflags)
test_unit_fork_stdio_test_LDADD = $(ductile_test_ldadd)
test_integration_fork_stdio_plain_SOURCES = test/unit/core/fork_stdio_test.cc
test_integration_fork_stdio_plain_CPPFLAGS = $(GTEST_CFLAGS)
test_integration_fork_stdio_plain_CXXFLAGS = $(ductile_test_cxxflags)
test_integration_fork_stdio_plain_LDFLAGS = $(ductile_test_ldflags)
test_integration_fork_stdio_plain_LDADD = $(GTEST_LIBS)

# Real programs under LD_PRELOAD of the built library.
TESTS += test/integration/preload_test.sh
EXTRA_DIST += test/integration/preload_test.sh
EXTRA_DIST += test/support/sizes.h

# Under an address-space limit (ulimit -v): real programs, a realloc-growth
# loop to the limit and threads that allocate until refused.
check_PROGRAMS += test/integration/rlimit_prog
test_integration_rlimit_prog_SOURCES = test/integration/rlimit_prog.c test/integration/prog_check.h
test_integration_rlimit_prog_CFLAGS = -pthread
test_integration_rlimit_prog_LDFLAGS = -pthread
test_integration_rlimit_prog_LDADD = libductile.la
# Out of memory in every range, from C++: bad_alloc, then recovery.
check_PROGRAMS += test/integration/rlimit_oom
test_integration_rlimit_oom_SOURCES = test/integration/rlimit_oom.cc
test_integration_rlimit_oom_LDADD = libductile.la
TESTS += test/integration/rlimit_test.sh
EXTRA_DIST += test/integration/rlimit_test.sh test/integration/report.sh

# Freed memory returns while the program is quiet (decay_ms:0, the
# background thread).
check_PROGRAMS += test/integration/quiet_prog
test_integration_quiet_prog_SOURCES = test/integration/quiet_prog.c
test_integration_quiet_prog_LDADD = libductile.la
TESTS += test/integration/decay_test.sh
EXTRA_DIST += test/integration/decay_test.sh

# Strict overcommit gives the commit charge of purged memory back (skipped
# unless the machine is in vm.overcommit_memory=2).
check_PROGRAMS += test/integration/commit_prog
test_integration_commit_prog_SOURCES = test/integration/commit_prog.c
test_integration_commit_prog_LDADD = libductile.la
TESTS += test/integration/commit_test.sh
EXTRA_DIST += test/integration/commit_test.sh


# Heap profiles read by the real google-pprof: a program with known
# allocation sites (built without the library: LD_PRELOAD picks it), the
# final dump, prof.dump and bin/ductile --profile.
check_PROGRAMS += test/integration/prof_prog
test_integration_prof_prog_SOURCES = test/integration/prof_prog.c
test_integration_prof_prog_CFLAGS = -O2
TESTS += test/integration/prof_test.sh
EXTRA_DIST += test/integration/prof_test.sh

# Growth profiles read by the real google-pprof, the totals at exit and
# bin/ductile --growth: a program with known growth sites.
check_PROGRAMS += test/integration/growth_prog
test_integration_growth_prog_SOURCES = test/integration/growth_prog.c
test_integration_growth_prog_CFLAGS = -O2
TESTS += test/integration/growth_test.sh
EXTRA_DIST += test/integration/growth_test.sh

# Statistics and options from the environment (DUCTILE_STATS, DUCTILE_CONF
# warnings, stats_print_opts) and bin/ductile --help.
TESTS += test/integration/env_test.sh
EXTRA_DIST += test/integration/env_test.sh

# The source tree's layout: the layer rule, the core's include order, the
# one file that calls the kernel, files of at most 500 lines that say what
# they own.
TESTS += test/integration/layout_test.sh
EXTRA_DIST += test/integration/layout_test.sh

# The README's quick start: two commands, the first one working as root
# without sudo and as a user with it (stub apt-get and sudo).
TESTS += test/integration/readme_test.sh
EXTRA_DIST += test/integration/readme_test.sh

# make compare-vector at a tiny size: its chart goes to the build directory.
TESTS += test/integration/compare_vector_test.sh
EXTRA_DIST += test/integration/compare_vector_test.sh

# make compare-vector-push at a tiny size: ductile::vector grows in place.
TESTS += test/integration/compare_vector_push_test.sh
EXTRA_DIST += test/integration/compare_vector_push_test.sh

# The licence: COPYING, debian/copyright, and the SPDX line of every
# tracked source file (skipped outside a git checkout; --fix adds it).
TESTS += test/integration/licence_test.sh
EXTRA_DIST += test/integration/licence_test.sh COPYING

# The Debian packaging's fields (skipped without debian/).
TESTS += test/integration/packaging_test.sh
EXTRA_DIST += test/integration/packaging_test.sh

# make install's ldconfig hook (a stub ldconfig) and the manual pages.
TESTS += test/integration/install_test.sh
EXTRA_DIST += test/integration/install_test.sh

# The public header compiles as C89, C99 and C++98 (the library itself is
# C++17): each program includes it with -pedantic-errors under that
# standard and calls through it.
header_std_tests = test/integration/header_c89 test/integration/header_c99 test/integration/header_cxx98
check_PROGRAMS += $(header_std_tests)
TESTS += $(header_std_tests)
test_integration_header_c89_SOURCES = test/integration/header_c.c
test_integration_header_c89_CFLAGS = -std=c89 -pedantic-errors -Wall -Wextra -Werror
test_integration_header_c89_LDADD = libductile.la
test_integration_header_c99_SOURCES = test/integration/header_c.c
test_integration_header_c99_CFLAGS = -std=c99 -pedantic-errors -Wall -Wextra -Werror
test_integration_header_c99_LDADD = libductile.la
test_integration_header_cxx98_SOURCES = test/integration/header_cxx98.cc
test_integration_header_cxx98_CXXFLAGS = -std=c++98 -pedantic-errors -Wall -Wextra -Werror
test_integration_header_cxx98_LDADD = libductile.la

# Every statement of the version agrees with configure.ac's.
TESTS += test/integration/version_test.sh
EXTRA_DIST += test/integration/version_test.sh
endif !DUCTILE_SANITIZE
AM_TESTS_ENVIRONMENT = builddir='$(abs_top_builddir)'; export builddir;
# Every test runs under test/support/run-test: one still running after 10
# minutes (the slowest takes under a minute, 5 to 10 times that in a
# sanitizer build) has hung; its threads' stacks go to its log and it fails.
LOG_COMPILER = $(SHELL) $(top_srcdir)/test/support/run-test
AM_LOG_FLAGS = 600
EXTRA_DIST += test/support/run-test

# The API layer: jemalloc's extended API, mallctl, stats and the C++
# operators, with the allocator's objects linked into the test program.
# They test ductile as the program's allocator too (operator new, glibc's
# mallinfo2 and malloc_info, the standard names against glibc's answers),
# so a sanitizer build leaves them out; the fuzzer's driver covers the
# ductile_ entry points there.
if !DUCTILE_SANITIZE
ductile_api_tests = test/unit/api_test test/unit/cxx_new_test test/unit/glibc_test test/unit/stats_lock_test
check_PROGRAMS += $(ductile_api_tests)
TESTS += $(ductile_api_tests)
endif !DUCTILE_SANITIZE

test_unit_api_test_SOURCES = \
	test/unit/api/allocx_test.cc \
	test/unit/api/malloc_test.cc \
	test/unit/api/mallctl_test.cc \
	test/unit/api/mallctl_leaves_test.cc \
	test/unit/core/stats_format_test.cc \
	test/unit/core/options_set_test.cc \
	test/unit/api/api_helpers.h \
	test/support/maps.h \
	test/support/patterns.h \
	test/integration/json_check.h
test_unit_api_test_CPPFLAGS = $(ductile_test_cppflags)
test_unit_api_test_CXXFLAGS = $(ductile_test_cxxflags)
test_unit_api_test_LDFLAGS = $(ductile_test_ldflags)
test_unit_api_test_LDADD = $(ductile_test_ldadd)

# glibc's allocator interface: mallinfo2, malloc_info, malloc_stats and
# mallopt, against glibc's own where it answers too.
test_unit_glibc_test_SOURCES = \
	test/unit/api/glibc_test.cc \
	test/unit/api/glibc_malloc_info_test.cc \
	test/unit/api/glibc_helpers.h \
	test/support/patterns.h \
	test/support/xml_check.h
test_unit_glibc_test_CPPFLAGS = $(ductile_test_cppflags)
test_unit_glibc_test_CXXFLAGS = $(ductile_test_cxxflags)
test_unit_glibc_test_LDFLAGS = $(ductile_test_ldflags)
test_unit_glibc_test_LDADD = $(ductile_test_ldadd)

# Reading the statistics takes no lock: the program counts the locks the
# allocator's objects take (it defines pthread_mutex_lock).
test_unit_stats_lock_test_SOURCES = test/unit/core/stats_lock_test.cc
test_unit_stats_lock_test_CPPFLAGS = $(ductile_test_cppflags)
test_unit_stats_lock_test_CXXFLAGS = $(ductile_test_cxxflags)
test_unit_stats_lock_test_LDFLAGS = $(ductile_test_ldflags)
test_unit_stats_lock_test_LDADD = $(ductile_test_ldadd)

test_unit_cxx_new_test_SOURCES = test/unit/api/new_delete_test.cc
test_unit_cxx_new_test_CPPFLAGS = $(ductile_test_cppflags)
test_unit_cxx_new_test_CXXFLAGS = $(ductile_test_cxxflags)
test_unit_cxx_new_test_LDFLAGS = $(ductile_test_ldflags)
test_unit_cxx_new_test_LDADD = $(ductile_test_ldadd)

# How blocks grow, and the growth profile (the program runs itself again
# with DUCTILE_CONF set), over the fake kernel; -rdynamic: dladdr names the
# test's functions in the profile's stacks.
check_PROGRAMS += test/unit/growth_test
TESTS += test/unit/growth_test
test_unit_growth_test_SOURCES = \
	test/unit/core/growth_test.cc \
	test/support/fake_kernel.h \
	test/support/fake_kernel.cc \
	test/support/patterns.h \
	test/support/run_again.h
test_unit_growth_test_CPPFLAGS = $(ductile_test_cppflags)
test_unit_growth_test_CXXFLAGS = $(ductile_test_cxxflags)
test_unit_growth_test_LDFLAGS = $(ductile_test_ldflags) -rdynamic
test_unit_growth_test_LDADD = $(ductile_test_ldadd) -ldl

# The differential tests pair jemalloc's names with free() and the other
# standard names, which are the sanitizer's in a sanitizer build.
if !DUCTILE_SANITIZE
# Sampled heap profiling with profiling on (the program runs itself again
# with DUCTILE_CONF set), linked with the allocator's objects.
check_PROGRAMS += test/unit/prof_test
TESTS += test/unit/prof_test
test_unit_prof_test_SOURCES = \
	test/unit/core/prof_test.cc \
	test/unit/core/prof_dump_test.cc \
	test/unit/core/prof_helpers.h \
	test/support/patterns.h \
	test/support/run_again.h
test_unit_prof_test_CPPFLAGS = $(ductile_test_cppflags)
test_unit_prof_test_CXXFLAGS = $(ductile_test_cxxflags)
test_unit_prof_test_LDFLAGS = $(ductile_test_ldflags)
test_unit_prof_test_LDADD = $(ductile_test_ldadd)

# Differential tests: one source, built against the shipped libductile.so
# and against Debian's libjemalloc; see the top of differential_test.cc.
ductile_differential_tests = \
	test/integration/differential_ductile \
	test/integration/differential_jemalloc
check_PROGRAMS += $(ductile_differential_tests)
TESTS += $(ductile_differential_tests)

ductile_differential_sources = \
	test/integration/differential_test.cc \
	test/support/patterns.h \
	test/integration/json_check.h
# The ductile build also checks that <ductile/ductile.h> and
# <jemalloc/jemalloc.h> can be included together, in either order.
test_integration_differential_ductile_SOURCES = $(ductile_differential_sources) \
	test/integration/header_order_a.cc \
	test/integration/header_order_b.cc
test_integration_differential_ductile_CPPFLAGS = \
	-I$(top_srcdir)/include -I$(top_srcdir)/test $(JEMALLOC_CFLAGS) $(GTEST_CFLAGS)
test_integration_differential_ductile_CXXFLAGS = $(ductile_test_cxxflags)
test_integration_differential_ductile_LDFLAGS = $(ductile_test_ldflags)
test_integration_differential_ductile_LDADD = libductile.la $(GTEST_LIBS)

test_integration_differential_jemalloc_SOURCES = $(ductile_differential_sources)
test_integration_differential_jemalloc_CPPFLAGS = \
	-DDUCTILE_DIFF_JEMALLOC -I$(top_srcdir)/test $(JEMALLOC_CFLAGS) $(GTEST_CFLAGS)
test_integration_differential_jemalloc_CXXFLAGS = $(ductile_test_cxxflags)
test_integration_differential_jemalloc_LDFLAGS = $(ductile_test_ldflags)
test_integration_differential_jemalloc_LDADD = $(JEMALLOC_LIBS) $(GTEST_LIBS)

# No successful call changes errno, the first one (which makes the runtime)
# included.
check_PROGRAMS += test/integration/errno_prog
test_integration_errno_prog_SOURCES = test/integration/errno_prog.c test/integration/prog_check.h
test_integration_errno_prog_CPPFLAGS = -I$(top_srcdir)/include
test_integration_errno_prog_CFLAGS = -pthread
test_integration_errno_prog_LDFLAGS = -pthread
test_integration_errno_prog_LDADD = libductile.la
TESTS += test/integration/errno_prog

# Allocations made while ductile starts (from an interposed getenv).
check_PROGRAMS += test/integration/startup_prog
test_integration_startup_prog_SOURCES = test/integration/startup_prog.c test/integration/prog_check.h
test_integration_startup_prog_LDADD = libductile.la
TESTS += test/integration/startup_prog

# The pages of ductile's storage and code a program's first malloc touches.
check_PROGRAMS += test/integration/first_pages_prog
test_integration_first_pages_prog_SOURCES = test/integration/first_pages_prog.c test/integration/prog_check.h
test_integration_first_pages_prog_LDADD = libductile.la
TESTS += test/integration/first_pages_prog

# A bad free as the process's first call into ductile (no runtime yet).
check_PROGRAMS += test/integration/first_call_prog
test_integration_first_call_prog_SOURCES = test/integration/first_call_prog.c test/integration/prog_check.h
test_integration_first_call_prog_LDADD = libductile.la
TESTS += test/integration/first_call_prog

# A process with 40 pthread keys before its first allocation: libc's
# pthread_setspecific callocs while a thread's cache is being made.
check_PROGRAMS += test/integration/many_keys_prog
test_integration_many_keys_prog_SOURCES = test/integration/many_keys_prog.c test/integration/prog_check.h
test_integration_many_keys_prog_CFLAGS = -pthread
test_integration_many_keys_prog_LDFLAGS = -pthread
test_integration_many_keys_prog_LDADD = libductile.la
TESTS += test/integration/many_keys_prog

# A medium or huge block freed twice, in a process with nothing allocated before.
check_PROGRAMS += test/integration/double_free_prog
test_integration_double_free_prog_SOURCES = test/integration/double_free_prog.c test/integration/prog_check.h
test_integration_double_free_prog_CFLAGS = -pthread
test_integration_double_free_prog_LDFLAGS = -pthread
test_integration_double_free_prog_LDADD = libductile.la
TESTS += test/integration/double_free_prog

# The attack table's cases (test/attacks/attacks.c): heap misuses, one per
# case, run under LD_PRELOAD (the program does not link libductile).
# attacks_test.sh checks that the built library with hardened:true still
# reports the ones it reports today; `make attack-table` (bench/local.mk)
# runs every case under ductile and its peers.
check_PROGRAMS += test/attacks/attacks
test_attacks_attacks_SOURCES = test/attacks/attacks.c
test_attacks_attacks_CPPFLAGS =
test_attacks_attacks_CFLAGS = -Wall -Wextra -fno-builtin
test_attacks_attacks_LDADD = -ldl
TESTS += test/integration/attacks_test.sh
EXTRA_DIST += test/integration/attacks_test.sh test/attacks/attack-table.sh

# fork() from a signal handler that interrupted malloc, free or fork.
check_PROGRAMS += test/integration/signal_fork_prog
test_integration_signal_fork_prog_SOURCES = test/integration/signal_fork_prog.c test/integration/prog_check.h
test_integration_signal_fork_prog_LDADD = libductile.la
TESTS += test/integration/signal_fork_prog

# Idle threads' cached medium blocks go back to the kernel; busy ones keep theirs.
check_PROGRAMS += test/integration/idle_cache_prog
test_integration_idle_cache_prog_SOURCES = test/integration/idle_cache_prog.c test/integration/prog_check.h
test_integration_idle_cache_prog_CPPFLAGS = -I$(top_srcdir)/include
test_integration_idle_cache_prog_CFLAGS = -pthread
test_integration_idle_cache_prog_LDFLAGS = -pthread
test_integration_idle_cache_prog_LDADD = libductile.la
TESTS += test/integration/idle_cache_prog

# Bad frees, fork while other threads are inside the allocator, many
# threads on few cores (the allocator's objects linked in, as core_test).
check_PROGRAMS += test/unit/hardening_test
TESTS += test/unit/hardening_test
test_unit_hardening_test_SOURCES = \
	test/unit/core/hardening_test.cc \
	test/unit/core/seal_test.cc \
	test/unit/core/hardened_helpers.h \
	test/unit/core/stress_test.cc \
	test/support/maps.h \
	test/support/patterns.h
test_unit_hardening_test_CPPFLAGS = $(ductile_test_cppflags)
test_unit_hardening_test_CXXFLAGS = $(ductile_test_cxxflags)
test_unit_hardening_test_LDFLAGS = $(ductile_test_ldflags)
test_unit_hardening_test_LDADD = $(ductile_test_ldadd)
endif !DUCTILE_SANITIZE

# Fault injection through the whole API: the runtime over the fake kernel,
# the n-th memory system call failing, for every n (see fault_test.cc).
check_PROGRAMS += test/unit/fault_test
TESTS += test/unit/fault_test
test_unit_fault_test_SOURCES = \
	test/unit/core/fault_test.cc \
	test/support/fake_kernel.h \
	test/support/fake_kernel.cc \
	test/support/patterns.h
test_unit_fault_test_CPPFLAGS = $(ductile_test_cppflags)
test_unit_fault_test_CXXFLAGS = $(ductile_test_cxxflags)
test_unit_fault_test_LDFLAGS = $(ductile_test_ldflags)
test_unit_fault_test_LDADD = $(ductile_test_ldadd)

# The API fuzzer's driver on fixed seeds (test/fuzz/api_driver.h).
check_PROGRAMS += test/unit/fuzz_test
TESTS += test/unit/fuzz_test
test_unit_fuzz_test_SOURCES = \
	test/unit/api/fuzz_test.cc \
	test/fuzz/api_driver.h \
	test/fuzz/api_driver.cc
test_unit_fuzz_test_CPPFLAGS = $(ductile_test_cppflags)
test_unit_fuzz_test_CXXFLAGS = $(ductile_test_cxxflags)
test_unit_fuzz_test_LDFLAGS = $(ductile_test_ldflags)
test_unit_fuzz_test_LDADD = $(ductile_test_ldadd)

# ductile::vector (include/ductile/vector.h): its interface, against
# std::vector over random operations, with elements that throw, and grown
# to 1 GiB without copying a huge block. The allocator's objects are linked
# in; the vector calls only the ductile_ names, so a sanitizer build runs
# it too.
check_PROGRAMS += test/unit/vector_test
TESTS += test/unit/vector_test
test_unit_vector_test_SOURCES = \
	test/unit/api/vector_test.cc \
	test/unit/api/vector_differential_test.cc \
	test/unit/api/vector_exceptions_test.cc \
	test/unit/api/vector_growth_test.cc \
	test/unit/api/vector_helpers.h
test_unit_vector_test_CPPFLAGS = $(ductile_test_cppflags)
test_unit_vector_test_CXXFLAGS = $(ductile_test_cxxflags)
test_unit_vector_test_LDFLAGS = $(ductile_test_ldflags)
test_unit_vector_test_LDADD = $(ductile_test_ldadd)

# `make fuzz`: the same driver under libFuzzer, built with clang
# (-fsanitize=fuzzer,address,undefined) from the library's sources, and run
# for FUZZ_SECONDS; the corpus it grows stays in test/fuzz/corpus.
# Opt-in: make check does not need clang.
FUZZ_SECONDS = 60
FUZZ_CXXFLAGS = -std=c++17 -O1 -g -fno-omit-frame-pointer \
	-fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
	-Wno-return-type-c-linkage -Wno-missing-exception-spec
EXTRA_DIST += test/fuzz/api_fuzzer.cc
CLEANFILES += test/fuzz/api_fuzzer
.PHONY: fuzz
test/fuzz/api_fuzzer: $(libductile_core_la_SOURCES) test/fuzz/api_driver.cc test/fuzz/api_driver.h \
		test/fuzz/api_fuzzer.cc config.h
	@test "x$(CLANGXX)" != xno || { echo "make fuzz: clang++ not found (apt-get install clang libfuzzer-14-dev)" >&2; exit 1; }
	$(AM_V_GEN)$(MKDIR_P) test/fuzz && srcs= && \
	for f in $(libductile_core_la_SOURCES) test/fuzz/api_driver.cc test/fuzz/api_fuzzer.cc; do \
	  case $$f in *.cc) srcs="$$srcs $(srcdir)/$$f" ;; esac; \
	done && \
	$(CLANGXX) $(FUZZ_CXXFLAGS) -DDUCTILE_SANITIZE=1 -I$(top_srcdir)/src -I$(top_srcdir)/include \
	  -I$(top_srcdir)/test -I$(top_builddir) -o $@ $$srcs -pthread
fuzz: test/fuzz/api_fuzzer
	$(MKDIR_P) test/fuzz/corpus
	./test/fuzz/api_fuzzer -max_total_time=$(FUZZ_SECONDS) -max_len=4096 -rss_limit_mb=4096 \
	  -print_final_stats=1 test/fuzz/corpus
