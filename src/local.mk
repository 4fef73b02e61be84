# SPDX-License-Identifier: BSD-2-Clause
## src/local.mk -- the allocator library (included from Makefile.am).

# All allocator sources go into this libtool convenience library (not
# installed), so the unit tests can link the internals directly.
# One file per line; keep the list sorted by directory.
noinst_LTLIBRARIES += libductile_core.la
libductile_core_la_SOURCES = \
	src/base/common.h \
	src/base/counter.h \
	src/base/lock.h \
	src/base/fork_gate.h \
	src/base/fork_gate.cc \
	src/base/thread.h \
	src/base/log.cc \
	src/os/kernel.h \
	src/os/kernel_linux.cc \
	src/os/os.h \
	src/os/os.cc \
	src/os/map_budget.h \
	src/os/map_budget.cc \
	src/chunk/extent.h \
	src/chunk/page_map.h \
	src/chunk/page_map.cc \
	src/chunk/meta_alloc.h \
	src/chunk/meta_alloc.cc \
	src/chunk/extent_set.h \
	src/chunk/extent_set.cc \
	src/chunk/chunk.h \
	src/chunk/chunk.cc \
	src/chunk/carve.cc \
	src/chunk/resize.cc \
	src/chunk/lend.cc \
	src/chunk/decay.cc \
	src/chunk/clock.h \
	src/huge/huge.h \
	src/huge/huge.cc \
	src/huge/resize.cc \
	src/small/size_classes.h \
	src/small/bin.h \
	src/small/seal.h \
	src/small/bin.cc \
	src/small/prefaulter.h \
	src/small/prefaulter.cc \
	src/small/region.h \
	src/small/region_record.h \
	src/small/region.cc \
	src/small/region_purge.cc \
	src/small/decay.h \
	src/small/decay.cc \
	src/small/thread_cache.h \
	src/core/background.h \
	src/core/background.cc \
	src/core/options.h \
	src/core/options.cc \
	src/core/prof.h \
	src/core/prof_table.h \
	src/core/prof.cc \
	src/core/prof_dump.cc \
	src/core/growth.h \
	src/core/growth.cc \
	src/core/state.h \
	src/core/state.cc \
	src/core/fallback_heap.h \
	src/core/fallback_heap.cc \
	src/core/place.h \
	src/core/place.cc \
	src/core/cache.h \
	src/core/cache.cc \
	src/core/depot.h \
	src/core/depot.cc \
	src/core/collect.h \
	src/core/collect.cc \
	src/core/fork.h \
	src/core/fork.cc \
	src/core/startup.h \
	src/core/startup.cc \
	src/core/alloc.h \
	src/core/alloc.cc \
	src/core/free.h \
	src/core/free.cc \
	src/core/fast_path.h \
	src/core/realloc.h \
	src/core/realloc.cc \
	src/core/control.h \
	src/core/control.cc \
	src/core/runtime.h \
	src/core/stdio_fork.h \
	src/api/version.cc
libductile_core_la_CXXFLAGS = $(AM_CXXFLAGS) $(DUCTILE_LIB_CXXFLAGS)

# The installed library (shared and static): exactly the objects of
# libductile_core.la and libductile_cxx.la (libtool links a convenience
# library whole into the .so and copies all its objects into the .a).  It
# has no sources of its own; the never-built dummy C source makes automake
# link it as C: no libstdc++ among its dependencies (new_delete.cc finds the
# C++ runtime of the program when it needs it).
lib_LTLIBRARIES += libductile.la
libductile_la_SOURCES =
nodist_EXTRA_libductile_la_SOURCES = src/dummy.c
libductile_la_LIBADD = libductile_cxx.la libductile_core.la
libductile_la_LDFLAGS = \
	-version-info 0:0:0 \
	-Wl,--version-script=$(top_srcdir)/src/ductile.map
EXTRA_libductile_la_DEPENDENCIES = $(top_srcdir)/src/ductile.map

# The API layer's C++ operators, jemalloc's extended API, mallctl and stats,
# and the rest of glibc's allocator interface.
libductile_core_la_SOURCES += \
	src/core/stats.h \
	src/core/stats_format.h \
	src/core/stats.cc \
	src/core/stats_format.cc \
	src/api/allocx.cc \
	src/api/glibc.cc \
	src/api/mallctl_leaves.h \
	src/api/mallctl.cc \
	src/api/mallctl_leaves.cc \
	src/api/mallctl_growth.cc

# Last: malloc and free then lie beside the end of the library's code, the
# 64 KiB window of it that every process faults in anyway (_fini, at its
# exit), and not in a window of their own between the core and the
# statistics: one page fault fewer for every process.
libductile_core_la_SOURCES += src/api/malloc.cc

# The C++ operators: the one part built with exceptions (the nothrow forms
# catch what a new-handler throws).
noinst_LTLIBRARIES += libductile_cxx.la
libductile_cxx_la_SOURCES = src/api/new_delete.cc
libductile_cxx_la_CXXFLAGS = $(AM_CXXFLAGS) $(DUCTILE_LIB_CXXFLAGS) -fexceptions
