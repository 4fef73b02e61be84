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
	test/unit/os_test.cc \
	test/support/fake_kernel.h \
	test/support/fake_kernel.cc
test_unit_os_test_CPPFLAGS = $(ductile_test_cppflags)
test_unit_os_test_CXXFLAGS = $(ductile_test_cxxflags)
test_unit_os_test_LDFLAGS = $(ductile_test_ldflags)
test_unit_os_test_LDADD = $(ductile_test_ldadd)

test_unit_chunk_test_SOURCES = \
	test/unit/chunk_test.cc \
	test/unit/page_map_test.cc \
	test/unit/extent_set_test.cc \
	test/support/fake_kernel.h \
	test/support/fake_kernel.cc \
	test/support/fake_clock.h \
	test/support/layers.h
test_unit_chunk_test_CPPFLAGS = $(ductile_test_cppflags)
test_unit_chunk_test_CXXFLAGS = $(ductile_test_cxxflags)
test_unit_chunk_test_LDFLAGS = $(ductile_test_ldflags)
test_unit_chunk_test_LDADD = $(ductile_test_ldadd)

test_unit_huge_test_SOURCES = \
	test/unit/huge_test.cc \
	test/support/fake_kernel.h \
	test/support/fake_kernel.cc \
	test/support/fake_clock.h \
	test/support/layers.h
test_unit_huge_test_CPPFLAGS = $(ductile_test_cppflags)
test_unit_huge_test_CXXFLAGS = $(ductile_test_cxxflags)
test_unit_huge_test_LDFLAGS = $(ductile_test_ldflags)
test_unit_huge_test_LDADD = $(ductile_test_ldadd)

test_unit_small_test_SOURCES = \
	test/unit/small_test.cc \
	test/unit/region_test.cc \
	test/unit/options_test.cc \
	test/support/fake_kernel.h \
	test/support/fake_kernel.cc \
	test/support/fake_clock.h \
	test/support/layers.h
test_unit_small_test_CPPFLAGS = $(ductile_test_cppflags)
test_unit_small_test_CXXFLAGS = $(ductile_test_cxxflags)
test_unit_small_test_LDFLAGS = $(ductile_test_ldflags)
test_unit_small_test_LDADD = $(ductile_test_ldadd)

# Links the allocator's objects into the test program: ductile is the
# allocator of the whole test process.
test_unit_core_test_SOURCES = test/unit/core_test.cc test/support/patterns.h
test_unit_core_test_CPPFLAGS = $(ductile_test_cppflags)
test_unit_core_test_CXXFLAGS = $(ductile_test_cxxflags)
test_unit_core_test_LDFLAGS = $(ductile_test_ldflags)
test_unit_core_test_LDADD = $(ductile_test_ldadd)

# fork() while other threads use stdio and allocate. Built twice from one
# source: linked with the allocator's objects (run here), and on its own
# (fork_stdio_plain), which preload_test.sh runs under LD_PRELOAD.
check_PROGRAMS += test/unit/fork_stdio_test test/integration/fork_stdio_plain
TESTS += test/unit/fork_stdio_test
test_unit_fork_stdio_test_SOURCES = test/unit/fork_stdio_test.cc
test_unit_fork_stdio_test_CPPFLAGS = $(ductile_test_cppflags)
test_unit_fork_stdio_test_CXXFLAGS = $(ductile_test_cxxflags)
test_unit_fork_stdio_test_LDFLAGS = $(ductile_test_ldflags)
test_unit_fork_stdio_test_LDADD = $(ductile_test_ldadd)
test_integration_fork_stdio_plain_SOURCES = test/unit/fork_stdio_test.cc
test_integration_fork_stdio_plain_CPPFLAGS = $(GTEST_CFLAGS)
test_integration_fork_stdio_plain_CXXFLAGS = $(ductile_test_cxxflags)
test_integration_fork_stdio_plain_LDFLAGS = $(ductile_test_ldflags)
test_integration_fork_stdio_plain_LDADD = $(GTEST_LIBS)

# Real programs under LD_PRELOAD of the built library.
TESTS += test/integration/preload_test.sh
EXTRA_DIST += test/integration/preload_test.sh

# Under an address-space limit (ulimit -v): real programs, a realloc-growth
# loop to the limit and threads that allocate until refused.
check_PROGRAMS += test/integration/rlimit_prog
test_integration_rlimit_prog_SOURCES = test/integration/rlimit_prog.c
test_integration_rlimit_prog_CFLAGS = -pthread
test_integration_rlimit_prog_LDFLAGS = -pthread
test_integration_rlimit_prog_LDADD = libductile.la
TESTS += test/integration/rlimit_test.sh
EXTRA_DIST += test/integration/rlimit_test.sh test/integration/report.sh

# Freed memory returns while the program is quiet (decay_ms:0, the
# background thread).
check_PROGRAMS += test/integration/quiet_prog
test_integration_quiet_prog_SOURCES = test/integration/quiet_prog.c
test_integration_quiet_prog_LDADD = libductile.la
TESTS += test/integration/decay_test.sh
EXTRA_DIST += test/integration/decay_test.sh
AM_TESTS_ENVIRONMENT = builddir='$(abs_top_builddir)'; export builddir;

# Heap profiles read by the real google-pprof: a program with known
# allocation sites (built without the library: LD_PRELOAD picks it), the
# final dump, prof.dump and bin/ductile --profile.
check_PROGRAMS += test/integration/prof_prog
test_integration_prof_prog_SOURCES = test/integration/prof_prog.c
test_integration_prof_prog_CFLAGS = -O2
TESTS += test/integration/prof_test.sh
EXTRA_DIST += test/integration/prof_test.sh

# Every statement of the version agrees with configure.ac's.
TESTS += test/integration/version_test.sh
EXTRA_DIST += test/integration/version_test.sh

# The API layer: jemalloc's extended API, mallctl, stats and the C++
# operators, with the allocator's objects linked into the test program.
ductile_api_tests = \
	test/unit/api_test \
	test/unit/cxx_new_test \
	test/unit/glibc_test
check_PROGRAMS += $(ductile_api_tests)
TESTS += $(ductile_api_tests)

test_unit_api_test_SOURCES = \
	test/unit/api_test.cc \
	test/support/patterns.h \
	test/integration/json_check.h
test_unit_api_test_CPPFLAGS = $(ductile_test_cppflags)
test_unit_api_test_CXXFLAGS = $(ductile_test_cxxflags)
test_unit_api_test_LDFLAGS = $(ductile_test_ldflags)
test_unit_api_test_LDADD = $(ductile_test_ldadd)

# glibc's allocator interface: mallinfo2, malloc_info, malloc_stats and
# mallopt, against glibc's own where it answers too.
test_unit_glibc_test_SOURCES = \
	test/unit/glibc_test.cc \
	test/support/patterns.h \
	test/support/xml_check.h
test_unit_glibc_test_CPPFLAGS = $(ductile_test_cppflags)
test_unit_glibc_test_CXXFLAGS = $(ductile_test_cxxflags)
test_unit_glibc_test_LDFLAGS = $(ductile_test_ldflags)
test_unit_glibc_test_LDADD = $(ductile_test_ldadd)

test_unit_cxx_new_test_SOURCES = test/unit/cxx_new_test.cc
test_unit_cxx_new_test_CPPFLAGS = $(ductile_test_cppflags)
test_unit_cxx_new_test_CXXFLAGS = $(ductile_test_cxxflags)
test_unit_cxx_new_test_LDFLAGS = $(ductile_test_ldflags)
test_unit_cxx_new_test_LDADD = $(ductile_test_ldadd)

# Sampled heap profiling with profiling on (the program runs itself again
# with DUCTILE_CONF set), linked with the allocator's objects.
check_PROGRAMS += test/unit/prof_test
TESTS += test/unit/prof_test
test_unit_prof_test_SOURCES = test/unit/prof_test.cc test/support/patterns.h
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
