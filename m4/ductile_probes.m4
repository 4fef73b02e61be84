# SPDX-License-Identifier: BSD-2-Clause
# ductile_probes.m4 -- kernel and libc interface probes for ductile.
#
# One macro per probe.  Each prints a "checking ..." line, caches its result
# in ductile_cv_* (override with e.g. ductile_cv_madv_free=no when
# cross-compiling) and defines HAVE_* in config.h when the interface is there.
# Required interfaces stop configure with AC_MSG_ERROR; optional ones warn
# and say what the code falls back to.  DUCTILE_PROBES runs them all.
#
# Probes are compiled as C++ (g++ defines _GNU_SOURCE, which mremap and the
# MREMAP_* / MADV_* constants need).

# serial 1

# _DUCTILE_MMAN_PROLOGUE: headers every mmap/madvise probe includes.
m4_define([_DUCTILE_MMAN_PROLOGUE], [[
#include <stddef.h>
#include <sys/mman.h>
]])

# _DUCTILE_SYSCALL_PROLOGUE: headers for the raw syscall-number probes.
m4_define([_DUCTILE_SYSCALL_PROLOGUE], [[
#include <sys/syscall.h>
#include <unistd.h>
]])

# _DUCTILE_OPTIONAL(CACHE-VAR, FALLBACK-TEXT)
# Warn when an optional interface is missing.
m4_define([_DUCTILE_OPTIONAL],
[AS_IF([test "x$$1" != xyes],
  [AC_MSG_WARN([$2])])])

# DUCTILE_PROBE_MAP_FIXED_NOREPLACE
AC_DEFUN([DUCTILE_PROBE_MAP_FIXED_NOREPLACE],
[AC_LANG_PUSH([C++])
AC_CACHE_CHECK([for MAP_FIXED_NOREPLACE], [ductile_cv_map_fixed_noreplace],
  [AC_LINK_IFELSE([AC_LANG_PROGRAM(_DUCTILE_MMAN_PROLOGUE,
      [[void* p = mmap((void*)0x100000000, 4096, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
        return p == MAP_FAILED;]])],
    [ductile_cv_map_fixed_noreplace=yes],
    [ductile_cv_map_fixed_noreplace=no])])
AS_IF([test "x$ductile_cv_map_fixed_noreplace" = xyes],
  [AC_DEFINE([HAVE_MAP_FIXED_NOREPLACE], [1],
    [Define to 1 if <sys/mman.h> has MAP_FIXED_NOREPLACE.])])
_DUCTILE_OPTIONAL([ductile_cv_map_fixed_noreplace],
  [MAP_FIXED_NOREPLACE not found: placed mappings fall back to an address hint plus a check of the returned address])
AC_LANG_POP([C++])])

# DUCTILE_PROBE_MREMAP (required)
AC_DEFUN([DUCTILE_PROBE_MREMAP],
[AC_LANG_PUSH([C++])
AC_CACHE_CHECK([for mremap with MREMAP_MAYMOVE], [ductile_cv_mremap],
  [AC_LINK_IFELSE([AC_LANG_PROGRAM(_DUCTILE_MMAN_PROLOGUE,
      [[void* p = mremap((void*)0, 4096, 8192, MREMAP_MAYMOVE);
        return p == MAP_FAILED;]])],
    [ductile_cv_mremap=yes],
    [ductile_cv_mremap=no])])
AS_IF([test "x$ductile_cv_mremap" = xyes],
  [AC_DEFINE([HAVE_MREMAP], [1],
    [Define to 1 if mremap(2) with MREMAP_MAYMOVE is available.])],
  [AC_MSG_ERROR([mremap() with MREMAP_MAYMOVE was not found in <sys/mman.h>.
ductile needs Linux mremap(2) (glibc, compiled with _GNU_SOURCE).])])
AC_LANG_POP([C++])])

# DUCTILE_PROBE_MREMAP_FIXED
AC_DEFUN([DUCTILE_PROBE_MREMAP_FIXED],
[AC_LANG_PUSH([C++])
AC_CACHE_CHECK([for mremap with MREMAP_FIXED], [ductile_cv_mremap_fixed],
  [AC_LINK_IFELSE([AC_LANG_PROGRAM(_DUCTILE_MMAN_PROLOGUE,
      [[void* p = mremap((void*)0, 4096, 8192, MREMAP_MAYMOVE | MREMAP_FIXED,
                         (void*)0x100000000);
        return p == MAP_FAILED;]])],
    [ductile_cv_mremap_fixed=yes],
    [ductile_cv_mremap_fixed=no])])
AS_IF([test "x$ductile_cv_mremap_fixed" = xyes],
  [AC_DEFINE([HAVE_MREMAP_FIXED], [1],
    [Define to 1 if mremap(2) accepts MREMAP_FIXED and a new address.])])
_DUCTILE_OPTIONAL([ductile_cv_mremap_fixed],
  [MREMAP_FIXED not found: growing a huge allocation moves it with MREMAP_MAYMOVE only, never into a chosen address])
AC_LANG_POP([C++])])

# _DUCTILE_PROBE_MADV(ADVICE, CACHE-SUFFIX)
# Shared body of the madvise-constant probes: defines HAVE_<ADVICE>.
m4_define([_DUCTILE_PROBE_MADV],
[AC_LANG_PUSH([C++])
AC_CACHE_CHECK([for madvise $1], [ductile_cv_$2],
  [AC_LINK_IFELSE([AC_LANG_PROGRAM(_DUCTILE_MMAN_PROLOGUE,
      [[return madvise((void*)0, 4096, $1);]])],
    [ductile_cv_$2=yes],
    [ductile_cv_$2=no])])
AS_IF([test "x$ductile_cv_$2" = xyes],
  [AC_DEFINE([HAVE_$1], [1], [Define to 1 if <sys/mman.h> has $1.])])
AC_LANG_POP([C++])])

# DUCTILE_PROBE_MADV_DONTNEED (required)
AC_DEFUN([DUCTILE_PROBE_MADV_DONTNEED],
[_DUCTILE_PROBE_MADV([MADV_DONTNEED], [madv_dontneed])
AS_IF([test "x$ductile_cv_madv_dontneed" != xyes],
  [AC_MSG_ERROR([madvise() with MADV_DONTNEED was not found in <sys/mman.h>.
ductile needs it to return memory to the kernel.])])])

# DUCTILE_PROBE_MADV_FREE
AC_DEFUN([DUCTILE_PROBE_MADV_FREE],
[_DUCTILE_PROBE_MADV([MADV_FREE], [madv_free])
_DUCTILE_OPTIONAL([ductile_cv_madv_free],
  [MADV_FREE not found: lazy purging falls back to MADV_DONTNEED])])

# DUCTILE_PROBE_MADV_HUGEPAGE
AC_DEFUN([DUCTILE_PROBE_MADV_HUGEPAGE],
[_DUCTILE_PROBE_MADV([MADV_HUGEPAGE], [madv_hugepage])
_DUCTILE_OPTIONAL([ductile_cv_madv_hugepage],
  [MADV_HUGEPAGE not found: no transparent huge page hints are given (the kernel default applies)])])

# DUCTILE_PROBE_MADV_POPULATE_WRITE
AC_DEFUN([DUCTILE_PROBE_MADV_POPULATE_WRITE],
[_DUCTILE_PROBE_MADV([MADV_POPULATE_WRITE], [madv_populate_write])
_DUCTILE_OPTIONAL([ductile_cv_madv_populate_write],
  [MADV_POPULATE_WRITE not found: pre-faulting falls back to touching each page])])

# DUCTILE_PROBE_SYS_PROCESS_MADVISE
AC_DEFUN([DUCTILE_PROBE_SYS_PROCESS_MADVISE],
[AC_LANG_PUSH([C++])
AC_CACHE_CHECK([for SYS_process_madvise in <sys/syscall.h>],
  [ductile_cv_sys_process_madvise],
  [AC_LINK_IFELSE([AC_LANG_PROGRAM(_DUCTILE_SYSCALL_PROLOGUE,
      [[return (int)syscall(SYS_process_madvise, -1, (void*)0, 0, 0, 0u);]])],
    [ductile_cv_sys_process_madvise=yes],
    [ductile_cv_sys_process_madvise=no])])
AS_IF([test "x$ductile_cv_sys_process_madvise" = xyes],
  [AC_DEFINE([HAVE_SYS_PROCESS_MADVISE], [1],
    [Define to 1 if <sys/syscall.h> defines SYS_process_madvise.])])
_DUCTILE_OPTIONAL([ductile_cv_sys_process_madvise],
  [SYS_process_madvise not found: batched purging falls back to one madvise() per range])
AC_LANG_POP([C++])])

# DUCTILE_PROBE_SYS_PIDFD_OPEN
AC_DEFUN([DUCTILE_PROBE_SYS_PIDFD_OPEN],
[AC_LANG_PUSH([C++])
AC_CACHE_CHECK([for SYS_pidfd_open in <sys/syscall.h>],
  [ductile_cv_sys_pidfd_open],
  [AC_LINK_IFELSE([AC_LANG_PROGRAM(_DUCTILE_SYSCALL_PROLOGUE,
      [[return (int)syscall(SYS_pidfd_open, getpid(), 0u);]])],
    [ductile_cv_sys_pidfd_open=yes],
    [ductile_cv_sys_pidfd_open=no])])
AS_IF([test "x$ductile_cv_sys_pidfd_open" = xyes],
  [AC_DEFINE([HAVE_SYS_PIDFD_OPEN], [1],
    [Define to 1 if <sys/syscall.h> defines SYS_pidfd_open.])])
_DUCTILE_OPTIONAL([ductile_cv_sys_pidfd_open],
  [SYS_pidfd_open not found: no pidfd for process_madvise(), purging uses madvise() per range])
AC_LANG_POP([C++])])

# DUCTILE_PROBE_PIDFD_SELF
# PIDFD_SELF (Linux 6.14 uapi) is not in glibc 2.36: "no" is expected there,
# and the code then defines the value itself.
AC_DEFUN([DUCTILE_PROBE_PIDFD_SELF],
[AC_LANG_PUSH([C++])
AC_CACHE_CHECK([for PIDFD_SELF], [ductile_cv_pidfd_self],
  [AC_COMPILE_IFELSE([AC_LANG_PROGRAM([[
#if __has_include(<sys/pidfd.h>)
# include <sys/pidfd.h>
#endif
#if !defined(PIDFD_SELF) && __has_include(<linux/pidfd.h>)
# include <linux/pidfd.h>
#endif
#ifndef PIDFD_SELF
# error PIDFD_SELF is not defined
#endif
]], [[return PIDFD_SELF == -1;]])],
    [ductile_cv_pidfd_self=yes],
    [ductile_cv_pidfd_self=no])])
AS_IF([test "x$ductile_cv_pidfd_self" = xyes],
  [AC_DEFINE([HAVE_PIDFD_SELF], [1],
    [Define to 1 if <sys/pidfd.h> or <linux/pidfd.h> defines PIDFD_SELF.])])
_DUCTILE_OPTIONAL([ductile_cv_pidfd_self],
  [PIDFD_SELF not found in the system headers (expected before Linux 6.14 uapi headers): the code defines its own value; older kernels reject it and purging falls back to pidfd_open(getpid())])
AC_LANG_POP([C++])])

# DUCTILE_PROBES: run every probe, required ones first.
AC_DEFUN([DUCTILE_PROBES],
[DUCTILE_PROBE_MREMAP
DUCTILE_PROBE_MADV_DONTNEED
DUCTILE_PROBE_MAP_FIXED_NOREPLACE
DUCTILE_PROBE_MREMAP_FIXED
DUCTILE_PROBE_MADV_FREE
DUCTILE_PROBE_MADV_HUGEPAGE
DUCTILE_PROBE_MADV_POPULATE_WRITE
DUCTILE_PROBE_SYS_PROCESS_MADVISE
DUCTILE_PROBE_SYS_PIDFD_OPEN
DUCTILE_PROBE_PIDFD_SELF])
