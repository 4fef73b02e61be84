## test/local.mk -- GoogleTest unit tests (included from Makefile.am).
## Run with `make check`.  Each program links libductile_core.la.

ductile_test_cppflags = $(AM_CPPFLAGS) -I$(top_srcdir)/test $(GTEST_CFLAGS)
ductile_test_cxxflags = $(AM_CXXFLAGS) -pthread
ductile_test_ldflags = -pthread
ductile_test_ldadd = libductile_core.la $(GTEST_LIBS)

ductile_unit_tests = \
	test/unit/os_test \
	test/unit/chunk_test
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
	test/support/fake_clock.h
test_unit_chunk_test_CPPFLAGS = $(ductile_test_cppflags)
test_unit_chunk_test_CXXFLAGS = $(ductile_test_cxxflags)
test_unit_chunk_test_LDFLAGS = $(ductile_test_ldflags)
test_unit_chunk_test_LDADD = $(ductile_test_ldadd)
