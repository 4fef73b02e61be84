# SPDX-License-Identifier: BSD-2-Clause
# Sourced by the comparison scripts: where the peer allocators are, one
# check that an allocator's library can really be preloaded, and a command
# run under one.
#
# The peers are Debian's packages; JEMALLOC_LIB, MIMALLOC_LIB and TCMALLOC_LIB
# override their paths.
peer_libdir=/usr/lib/x86_64-linux-gnu
jemalloc_lib=${JEMALLOC_LIB:-$peer_libdir/libjemalloc.so.2}
mimalloc_lib=${MIMALLOC_LIB:-$peer_libdir/libmimalloc.so.2}
tcmalloc_lib=${TCMALLOC_LIB:-$peer_libdir/libtcmalloc_minimal.so.4}

# check_allocator NAME LIB LOGDIR: sets `status` (ok or unavailable) and
# `detail`. An empty LIB is the C library's own malloc. A library is usable
# when it exists, defines malloc, and runs /bin/true under LD_PRELOAD (its
# output goes to LOGDIR/NAME.true).
check_allocator() {
  local name=$1 l=$2 logdir=$3
  status=ok
  if [ -z "$l" ]; then
    detail="system malloc ($(ldd --version 2>&1 | head -1 | sed 's/.* //'))"
    return
  fi
  detail=$l
  if [ ! -f "$l" ]; then
    status=unavailable; detail="$l not found"
  elif ! nm -D --defined-only "$l" 2>/dev/null | grep -qE ' [TWi] malloc(@|$)'; then
    status=unavailable; detail="$l does not define malloc"
  elif ! LD_PRELOAD=$l /bin/true >"$logdir/$name.true" 2>&1; then
    status=unavailable
    detail="LD_PRELOAD=$l /bin/true failed: $(head -c 200 "$logdir/$name.true" | tr '\n\t' '  ')"
  fi
}

# preloaded LIB ERRFILE COMMAND...: runs COMMAND with LIB preloaded (an empty
# LIB: the C library's own malloc, with LD_PRELOAD cleared), its standard
# error appended to ERRFILE; its status is the command's.
preloaded() {
  local l=$1 err=$2
  shift 2
  if [ -n "$l" ]; then
    env LD_PRELOAD="$l" "$@" 2>>"$err"
  else
    env -u LD_PRELOAD "$@" 2>>"$err"
  fi
}

# usage [STATUS]: prints the running script's help -- its header comment, the
# lines from the second up to the first that is not a comment -- and exits.
usage() {
  awk 'NR == 1 { next } /^#/ { sub(/^# ?/, ""); print; next } { exit }' "$0"
  exit "${1:-0}"
}

# parse_options SPEC... -- ARG...: sets the variables that the specs name from
# the command-line arguments. `--name=var` takes a value (`--name V` or
# `--name=V`); `--name:var=value` is a flag that sets var to value. -h and
# --help print the usage; any other argument is an error.
parse_options() {
  local specs=() arg name spec rest found
  while [ $# -gt 0 ] && [ "$1" != -- ]; do specs+=("$1"); shift; done
  shift
  while [ $# -gt 0 ]; do
    arg=$1 name=${1%%=*} found=
    case $arg in -h|--help) usage 0 ;; esac
    for spec in "${specs[@]}"; do
      case $spec in
        "$name="*)
          if [ "$arg" = "$name" ]; then
            [ $# -ge 2 ] || { echo "$(basename "$0"): $name takes a value" >&2; usage 2 >&2; }
            printf -v "${spec#*=}" '%s' "$2"
            shift
          else
            printf -v "${spec#*=}" '%s' "${arg#*=}"
          fi
          found=1
          break ;;
        "$name:"*)
          rest=${spec#*:}
          printf -v "${rest%%=*}" '%s' "${rest#*=}"
          found=1
          break ;;
      esac
    done
    [ -n "$found" ] || { echo "$(basename "$0"): unknown option '$arg'" >&2; usage 2 >&2; }
    shift
  done
}
