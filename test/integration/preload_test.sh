#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-2-Clause
# Real programs from the machine under LD_PRELOAD=libductile.so: each must
# produce output identical to a run without it. Ends with "N passed, N failed".
set -u
builddir=${builddir:-.}
lib=$(cd "$builddir" && pwd)/.libs/libductile.so
if [ ! -f "$lib" ]; then
  echo "libductile.so not found at $lib" >&2
  exit 1
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
passed=0
failed=0

# Proves the library is really loaded and initialised in the preloaded run:
# an unknown DUCTILE_CONF option makes ductile print one warning to stderr.
# And that it really serves the program's allocations (a library that is
# loaded but not interposed -- e.g. with versioned malloc symbols -- would
# pass the first test): DUCTILE_STATS=1 prints the summary at exit, whose
# chunk layer must have handed out memory.
probe_loaded() {
  local err=$work/probe.err
  LD_PRELOAD=$lib DUCTILE_CONF=preload_probe:1 DUCTILE_STATS=1 "$@" 2>"$err" >/dev/null
  grep -q 'ductile: warning' "$err" &&
    grep -Eq '^Chunk layer: [0-9]+ bytes reserved in [0-9]+ reservations, [1-9][0-9]* allocs' "$err"
}

# compare NAME CMD...: runs CMD with and without ductile, compares stdout.
compare() {
  local name=$1
  shift
  local plain=$work/$name.plain preloaded=$work/$name.ductile
  "$@" >"$plain" 2>"$work/$name.plain.err"
  local rc_plain=$?
  LD_PRELOAD=$lib "$@" >"$preloaded" 2>"$work/$name.ductile.err"
  local rc_ductile=$?
  if [ "$rc_plain" -eq "$rc_ductile" ] && cmp -s "$plain" "$preloaded" && probe_loaded "$@"; then
    echo "PASS: $name ($(wc -c <"$plain") bytes of output)"
    passed=$((passed + 1))
  else
    echo "FAIL: $name (exit $rc_plain vs $rc_ductile)"
    diff "$plain" "$preloaded" | head -20
    tail -20 "$work/$name.ductile.err"
    failed=$((failed + 1))
  fi
}

# A Python script that allocates heavily: dicts, lists, strings, big buffers,
# and threads.
cat >"$work/alloc.py" <<'PY'
import hashlib, threading
d = {}
for i in range(300000):
    d["key%d" % i] = [i, str(i) * (i % 13), (i, i * 2)]
for i in range(0, 300000, 3):
    del d["key%d" % i]
s = sorted(d.items(), key=lambda kv: kv[1][1])
h = hashlib.sha256()
for k, v in s[:50000]:
    h.update(k.encode())
bufs = [bytearray(1 << 20) for _ in range(64)]
for b in bufs:
    b[-1] = 7
big = b"x" * (1 << 20)
for _ in range(14):  # to 292 MB: huge blocks growing (20 rounds, 3.3 GB, took 30 s)
    big = big + big[: len(big) // 2]
print(len(d), len(big), h.hexdigest())
out = []
def work(n):
    out.append(sum(len(str(j) * 3) for j in range(n)))
ts = [threading.Thread(target=work, args=(100000 + k,)) for k in range(8)]
[t.start() for t in ts]
[t.join() for t in ts]
print(sorted(out))
PY
if command -v python3 >/dev/null; then compare python python3 "$work/alloc.py"; fi

# sort on a large file, single- and multi-threaded.
awk 'BEGIN { srand(42); for (i = 0; i < 400000; i++) printf "%08d %s\n", int(rand() * 1e8), i }' >"$work/big.txt"
compare sort sort "$work/big.txt"
compare sort-parallel sort --parallel=2 -S 64M -k2,2n "$work/big.txt"

# git on a repository: init, commit a tree of files, log, diff, gc.
if command -v git >/dev/null; then
  repo=$work/repo
  mkdir -p "$repo"
  (
    cd "$repo" && git init -q && git config user.email t@example.com && git config user.name t
    for i in $(seq 1 200); do seq 1 $((i * 10)) >"f$i.txt"; done
    git add . && GIT_COMMITTER_DATE='2020-01-01T00:00:00' git commit -q --date='2020-01-01T00:00:00' -m one
    for i in $(seq 1 200 | awk 'NR % 3 == 0'); do echo change >>"f$i.txt"; done
    git add . && GIT_COMMITTER_DATE='2020-01-02T00:00:00' git commit -q --date='2020-01-02T00:00:00' -m two
  )
  compare git-log git -C "$repo" log --stat --format='%H %s'
  compare git-diff git -C "$repo" diff HEAD~1 HEAD
  compare git-fsck git -C "$repo" fsck --full --no-progress
fi

# pass NAME / fail NAME DETAILS: the result of a check that is not a compare.
pass() {
  echo "PASS: $1"
  passed=$((passed + 1))
}
fail() {
  echo "FAIL: $1"
  shift
  [ $# -gt 0 ] && printf '%s\n' "$@" | head -20
  failed=$((failed + 1))
}

# A C++ program: containers, strings, iostreams, exceptions, aligned and
# sized new/delete, std::thread. g++ compiles it with and without ductile
# (g++, cc1plus, as and ld are themselves big C and C++ programs); the two
# binaries must print the same, and so must the program run under ductile.
cat >"$work/prog.cc" <<'CXX'
#include <algorithm>
#include <iostream>
#include <map>
#include <memory>
#include <new>
#include <numeric>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>
struct alignas(256) Block { unsigned char bytes[300]; };
int main() {
  std::map<std::string, std::vector<int>> m;
  for (int i = 0; i < 200000; i++) m["k" + std::to_string(i % 5000)].push_back(i);
  std::unordered_map<int, std::string> u;
  for (int i = 0; i < 100000; i++) u[i] = std::string(static_cast<size_t>(i % 97), static_cast<char>('a' + i % 26));
  long total = 0;
  for (auto& [k, v] : m) total += std::accumulate(v.begin(), v.end(), 0L) % 1000003 + static_cast<long>(k.size());
  std::vector<std::unique_ptr<Block>> blocks;
  for (int i = 0; i < 2000; i++) {
    blocks.push_back(std::make_unique<Block>());
    if (reinterpret_cast<uintptr_t>(blocks.back().get()) % 256 != 0) return 3;
    blocks.back()->bytes[i % 300] = static_cast<unsigned char>(i);
  }
  std::vector<std::string> words;
  for (int i = 0; i < 100000; i++) words.push_back(std::to_string(i * 7919 % 100003));
  std::sort(words.begin(), words.end());
  std::ostringstream os;
  for (size_t i = 0; i < words.size(); i += 9973) os << words[i] << ' ';
  int caught = 0;
  for (int i = 0; i < 1000; i++) {
    try {
      throw std::runtime_error(std::string(static_cast<size_t>(i % 300), 'e'));
    } catch (const std::exception& e) {
      caught += e.what()[0] == 'e' || i % 300 == 0;
    }
  }
  std::vector<long> sums(4);
  std::vector<std::thread> ts;
  for (int t = 0; t < 4; t++)
    ts.emplace_back([&sums, t] {
      std::vector<std::vector<char>> v;
      for (int i = 0; i < 50000; i++) {
        v.emplace_back(static_cast<size_t>(i % 1000 + t), 'x');
        if (v.size() > 64) v.erase(v.begin());
        sums[t] += static_cast<long>(v.back().size());
      }
    });
  for (auto& th : ts) th.join();
  std::vector<char> big;
  for (int i = 0; i < 24; i++) big.resize(size_t{1} << i, static_cast<char>(i));
  std::cout << m.size() << ' ' << u.size() << ' ' << total << ' ' << os.str() << caught << ' '
            << sums[0] + sums[1] + sums[2] + sums[3] << ' ' << big.size() << '\n';
}
CXX
if command -v g++ >/dev/null; then
  compare g++-asm g++ -std=c++17 -O2 -frandom-seed=ductile -S -o - "$work/prog.cc"
  if g++ -std=c++17 -O2 -pthread -o "$work/prog.plain" "$work/prog.cc" 2>"$work/gxx.plain.err" &&
    LD_PRELOAD=$lib g++ -std=c++17 -O2 -pthread -o "$work/prog.ductile" "$work/prog.cc" 2>"$work/gxx.ductile.err"; then
    if cmp -s <("$work/prog.plain") <("$work/prog.ductile"); then
      pass "g++-build (binaries built with and without ductile print the same)"
    else
      fail g++-build "$("$work/prog.plain" 2>&1)" "$("$work/prog.ductile" 2>&1)"
    fi
    compare cxx-program "$work/prog.plain"
  else
    fail g++-build "$(cat "$work/gxx.plain.err" "$work/gxx.ductile.err")"
  fi
fi

# perl: hashes, arrays, string building, regular expressions, sort.
cat >"$work/alloc.pl" <<'PERL'
use strict; use warnings;
my %h; my @a;
for my $i (0 .. 199999) { $h{"key$i"} = [ $i, "v" x ($i % 50), { n => $i } ]; push @a, $i * 7 % 1000; }
delete $h{"key$_"} for grep { $_ % 3 == 0 } 0 .. 199999;
my $s = ""; $s .= sprintf("%05d,", $_) for 0 .. 99999;
my @f = split /,/, $s; my $m = () = $s =~ /(\d)\1/g;
my @sorted = sort { $a <=> $b } @a; my $big = "y" x (1 << 20); $big .= $big for 1 .. 5;
my %count; $count{$_}++ for @a;
print scalar(keys %h), " ", scalar(@f), " $m $sorted[-1] ", length($big), " ", scalar(keys %count), "\n";
PERL
if command -v perl >/dev/null; then compare perl perl "$work/alloc.pl"; fi

# sqlite3: a few thousand statements -- a schema, inserts, indexes, updates,
# deletes, joins, aggregates.
awk 'BEGIN {
  print "CREATE TABLE t (id INTEGER PRIMARY KEY, grp INTEGER, name TEXT, val REAL);";
  print "CREATE TABLE g (grp INTEGER PRIMARY KEY, label TEXT);";
  for (i = 0; i < 50; i++) printf "INSERT INTO g VALUES (%d, %c%s%d%c);\n", i, 39, "group", i, 39;
  print "BEGIN;";
  for (i = 0; i < 4000; i++) printf "INSERT INTO t (grp, name, val) VALUES (%d, %c%s%d%c, %d.5);\n", i % 50, 39, "n", i * 7919 % 10007, 39, i % 1000;
  print "COMMIT;";
  print "CREATE INDEX t_grp ON t (grp);";
  print "CREATE INDEX t_name ON t (name);";
  for (i = 0; i < 500; i++) printf "UPDATE t SET val = val * 2 WHERE id = %d;\n", i * 7 + 1;
  for (i = 0; i < 300; i++) printf "DELETE FROM t WHERE id = %d;\n", i * 13 + 2;
  for (i = 0; i < 200; i++) printf "SELECT count(*), sum(val) FROM t WHERE grp = %d;\n", i % 50;
  print "SELECT g.label, count(*), round(avg(t.val), 3), max(t.name) FROM t JOIN g USING (grp) GROUP BY g.grp ORDER BY g.grp;";
  print "SELECT group_concat(name, \",\") FROM (SELECT name FROM t ORDER BY name LIMIT 500);";
  print "VACUUM;";
  print "SELECT count(*), sum(val), min(name), max(name) FROM t;";
}' >"$work/stmts.sql"
if command -v sqlite3 >/dev/null; then compare sqlite3 sqlite3 :memory: ".read $work/stmts.sql"; fi

# A multi-threaded program: threads allocate blocks of every size range,
# hand them to other threads through a shared queue, and those free them.
cat >"$work/threads.cc" <<'CXX'
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>
struct Item { unsigned char* p; size_t n; unsigned char tag; };
int main() {
  std::mutex mu; std::condition_variable cv; std::deque<Item> q; bool done = false;
  std::atomic<unsigned long> checked{0}, bad{0};
  std::vector<std::thread> consumers;
  for (int c = 0; c < 4; c++)
    consumers.emplace_back([&] {
      for (;;) {
        std::unique_lock<std::mutex> l(mu);
        cv.wait(l, [&] { return !q.empty() || done; });
        if (q.empty()) return;
        Item it = q.front(); q.pop_front(); l.unlock();
        if (it.p[0] != it.tag || it.p[it.n - 1] != it.tag) bad++;
        checked += it.n; free(it.p);
      }
    });
  std::vector<std::thread> producers;
  for (int t = 0; t < 4; t++)
    producers.emplace_back([&, t] {
      unsigned x = 12345u + static_cast<unsigned>(t);
      for (int i = 0; i < 40000; i++) {
        x = x * 1103515245u + 12345u;
        size_t n = (x >> 8) % 1000 == 0 ? (3u << 20) + x % 4096 : (x >> 8) % 50 == 0 ? 20000 + x % 300000 : 1 + x % 600;
        auto* p = static_cast<unsigned char*>(malloc(n));
        unsigned char tag = static_cast<unsigned char>(x);
        memset(p, tag, n < 64 ? n : 64); p[n - 1] = tag;
        if (i % 3 == 0) p = static_cast<unsigned char*>(realloc(p, n * 2)), n *= 2, p[n - 1] = tag;
        { std::lock_guard<std::mutex> l(mu); q.push_back({p, n, tag}); }
        cv.notify_one();
      }
    });
  for (auto& th : producers) th.join();
  { std::lock_guard<std::mutex> l(mu); done = true; }
  cv.notify_all();
  for (auto& th : consumers) th.join();
  printf("%lu bytes checked, %lu bad\n", checked.load(), bad.load());
  return bad != 0;
}
CXX
if command -v g++ >/dev/null && g++ -std=c++17 -O2 -pthread -o "$work/threads" "$work/threads.cc" 2>"$work/threads.err"; then
  compare threads "$work/threads"
  # The same with a set of bins per thread pair: frees cross sets.
  compare threads-bin-sets env DUCTILE_CONF=bin_sets:2 "$work/threads"
else
  fail threads "$(cat "$work/threads.err" 2>/dev/null)"
fi
if command -v xz >/dev/null; then compare xz-threads xz -T2 -1 --block-size=1MiB -c "$work/big.txt"; fi

# The C++ runtime is the program's: a C program that preloads ductile loads
# no libstdc++ (ductile has no link-time dependency on it), and a C++
# program's failing operator new throws the std::bad_alloc its own catch
# clauses know, calls its new-handler, and the nothrow forms return null
# even when that handler throws.
cat >"$work/nostdcxx.c" <<'C'
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
int main(void) {
  free(malloc(100));
  FILE *f = fopen("/proc/self/maps", "r");
  char line[512];
  int found = 0;
  while (f && fgets(line, sizeof line, f)) if (strstr(line, "libstdc++")) found = 1;
  puts(found ? "libstdc++ loaded" : "no libstdc++");
  return 0;
}
C
cat >"$work/badalloc.cc" <<'CXX'
#include <cstdio>
#include <new>
static int calls = 0;
static void handler() { if (++calls == 3) { std::set_new_handler(nullptr); } }
static void throwing_handler() { ++calls; throw std::bad_alloc(); }
int main() {
  const size_t huge = size_t{1} << 62;
  int ok = 0;
  try { char* p = new char[huge]; delete[] p; } catch (const std::bad_alloc& e) { ok++; }
  std::set_new_handler(handler);
  try { char* p = new char[huge]; delete[] p; } catch (const std::bad_alloc&) { ok += calls == 3; }
  calls = 0;
  std::set_new_handler(throwing_handler);
  char* q = new (std::nothrow) char[huge];
  ok += q == nullptr && calls == 1;
  std::set_new_handler(nullptr);
  try { void* r = ::operator new(huge, std::align_val_t(64)); ::operator delete(r); } catch (const std::bad_alloc&) { ok++; }
  std::printf("%d of 4\n", ok);
  return ok == 4 ? 0 : 1;
}
CXX
# A C program that loads its C++ later, in a plugin: ductile found no C++
# runtime when it was loaded, so its nothrow new cannot catch what the
# plugin's new-handler throws. It must still return null (under glibc the
# runtime's own nothrow new does), not let the exception through.
cat >"$work/lateplugin.cc" <<'CXX'
#include <cstddef>
#include <new>
static void throwing_handler() { throw std::bad_alloc(); }
extern "C" const char* plugin_run(void) {
  std::set_new_handler(throwing_handler);
  try {
    char* q = new (std::nothrow) char[std::size_t{1} << 62];
    std::set_new_handler(nullptr);
    return q == nullptr ? "nothrow new: null" : "nothrow new: a block";
  } catch (...) {
    std::set_new_handler(nullptr);
    return "nothrow new: an exception escaped";
  }
}
CXX
cat >"$work/lateplugin.c" <<'C'
#include <dlfcn.h>
#include <stdio.h>
int main(int argc, char **argv) {
  void *h = argc > 1 ? dlopen(argv[1], RTLD_NOW | RTLD_LOCAL) : NULL;
  if (!h) { printf("dlopen: %s\n", dlerror()); return 1; }
  const char *(*run)(void) = (const char *(*)(void))dlsym(h, "plugin_run");
  puts(run ? run() : "no plugin_run");
  return 0;
}
C
if command -v gcc >/dev/null && gcc -O1 -o "$work/nostdcxx" "$work/nostdcxx.c" 2>/dev/null &&
  [ "$(LD_PRELOAD=$lib "$work/nostdcxx")" = "no libstdc++" ]; then
  pass "a C program loads no C++ runtime"
else
  fail "a C program loads no C++ runtime" "$(LD_PRELOAD=$lib "$work/nostdcxx" 2>&1)"
fi
if command -v g++ >/dev/null && g++ -std=c++17 -O1 -o "$work/badalloc" "$work/badalloc.cc" 2>"$work/badalloc.err"; then
  compare bad-alloc "$work/badalloc"
else
  fail bad-alloc "$(cat "$work/badalloc.err" 2>/dev/null)"
fi
if command -v g++ >/dev/null && command -v gcc >/dev/null &&
  g++ -std=c++17 -O1 -shared -fPIC -o "$work/lateplugin.so" "$work/lateplugin.cc" 2>"$work/lateplugin.err" &&
  gcc -O1 -o "$work/lateplugin" "$work/lateplugin.c" 2>>"$work/lateplugin.err"; then
  compare late-cxx-plugin "$work/lateplugin" "$work/lateplugin.so"
else
  fail late-cxx-plugin "$(cat "$work/lateplugin.err" 2>/dev/null)"
fi

# The prefault helper (DUCTILE_CONF=prefault:true): no thread until a slab
# region has proven busy; then one; a forked child has none until it needs
# its own; parent and child exit cleanly with it running. Off by default.
cat >"$work/prefault.c" <<'C'
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
typedef int (*mallctl_fn)(const char *, void *, size_t *, void *, size_t);
static mallctl_fn ctl;
static bool running(void) { bool b = false; size_t n = sizeof b; ctl("ductile.prefault.running", &b, &n, NULL, 0); return b; }
static uint64_t starts(void) { uint64_t v = 0; size_t n = sizeof v; ctl("ductile.prefault.starts", &v, &n, NULL, 0); return v; }
static int threads(void) {
  FILE *f = fopen("/proc/self/status", "r"); char line[256]; int t = -1;
  while (f && fgets(line, sizeof line, f)) if (!strncmp(line, "Threads:", 8)) t = atoi(line + 8);
  if (f) fclose(f);
  return t;
}
static void **churn(size_t bytes) {  /* 64-byte objects, written */
  size_t n = bytes / 64; void **v = malloc(n * sizeof *v);
  for (size_t i = 0; i < n; i++) { v[i] = malloc(64); memset(v[i], 1, 64); }
  return v;
}
int main(int argc, char **argv) {
  bool on = argc > 1 && !strcmp(argv[1], "on");
  ctl = (mallctl_fn)dlsym(RTLD_DEFAULT, "mallctl");
  if (!ctl) { puts("no mallctl"); return 1; }
  int bad = 0;
  churn(256 << 10);  /* a quarter of a region: not busy */
  if (running() || starts() != 0 || threads() != 1) bad |= 1;
  churn(8 << 20);    /* busy regions */
  churn(64 << 10);   /* one more slow path after the request */
  if (on != running() || starts() != (on ? 1u : 0u) || threads() != (on ? 2 : 1)) bad |= 2;
  pid_t pid = fork();
  if (pid == 0) {
    int cbad = 0;
    if (running() || threads() != 1) cbad |= 1;
    churn(8 << 20);
    churn(64 << 10);
    if (on != running() || threads() != (on ? 2 : 1)) cbad |= 2;
    exit(cbad);  /* exit() with the helper running: stopped and joined */
  }
  int status = 0;
  if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) bad |= 4 | (status << 4);
  printf("prefault %s: %d\n", on ? "on" : "off", bad);
  return bad != 0;
}
C
if command -v gcc >/dev/null && gcc -O1 -o "$work/prefault" "$work/prefault.c" -ldl 2>"$work/prefault.err"; then
  for mode in on off; do
    conf=; [ "$mode" = on ] && conf=prefault:true
    if out=$(LD_PRELOAD=$lib DUCTILE_CONF=$conf timeout 60 "$work/prefault" "$mode" 2>&1) &&
      [ "$out" = "prefault $mode: 0" ]; then
      pass "prefault helper $mode (starts only when busy, fork, exit)"
    else
      fail "prefault helper $mode" "$out"
    fi
  done
else
  fail prefault "$(cat "$work/prefault.err" 2>/dev/null)"
fi

# fork() while other threads use stdio and allocate: test/unit/core/fork_stdio_test.cc
# built on its own (fork_stdio_plain), run with the library preloaded. Each
# scenario has a watchdog; DUCTILE_STATS=1 shows the library served it.
forkprog=$builddir/test/integration/fork_stdio_plain
if [ -x "$forkprog" ]; then
  if out=$(timeout 120 env LD_PRELOAD=$lib DUCTILE_STATS=1 "$forkprog" 2>&1) &&
    grep -q '^___ End ductile statistics ___' <<<"$out"; then
    pass "fork while threads use stdio and allocate (fork_stdio_plain)"
  else
    fail "fork while threads use stdio and allocate (fork_stdio_plain)" "$(grep -E 'DEATH|FAILED|Failure' <<<"$out")"
  fi
else
  fail "fork_stdio_plain: not built (make check builds it)"
fi

# bin/ductile, the wrapper script: runs the command with the library
# preloaded and --stats prints the summary at exit.
wrapper=$builddir/bin/ductile
if [ -x "$wrapper" ]; then
  if DUCTILE_LIB=$lib "$wrapper" --stats --conf decay_ms:1000 sort "$work/big.txt" >"$work/wrapper.out" 2>"$work/wrapper.err" &&
    sort "$work/big.txt" | cmp -s - "$work/wrapper.out" &&
    grep -q '^___ End ductile statistics ___' "$work/wrapper.err" &&
    grep -q 'decay_ms:1000' "$work/wrapper.err"; then
    pass "bin/ductile (sort under the wrapper, with --stats and --conf)"
  else
    fail bin/ductile "$(cat "$work/wrapper.err")"
  fi
  if DUCTILE_LIB=/nonexistent/libductile.so "$wrapper" true 2>/dev/null; then
    fail "bin/ductile-missing-library (should refuse)"
  else
    pass "bin/ductile-missing-library"
  fi
else
  fail bin/ductile "$wrapper not built"
fi

# DUCTILE_STATS=1 prints every section of the summary at exit; the JSON form
# is checked by the unit tests. Malformed configuration warns once and runs.
LD_PRELOAD=$lib DUCTILE_STATS=1 sort "$work/big.txt" 2>"$work/stats.err" >/dev/null
missing=
for want in 'Bytes by layer' 'Retained:' 'Purged:' 'System calls: mmap' 'Huge growth by path: headroom' \
  '___ End ductile statistics ___'; do
  grep -q "$want" "$work/stats.err" || missing="$missing [$want]"
done
if [ -z "$missing" ]; then pass "DUCTILE_STATS=1 summary"; else fail "DUCTILE_STATS=1 summary: missing$missing" "$(cat "$work/stats.err")"; fi
for conf in 'decay_ms:12x' 'thp' 'nosuch:1' 'huge_threshold:1' ',,,:' 'decay_ms:99999999999999999999999999999'; do
  out=$(LD_PRELOAD=$lib DUCTILE_CONF=$conf sort "$work/big.txt" 2>"$work/conf.err" | cksum)
  warnings=$(grep -c 'ductile: warning' "$work/conf.err")
  if [ "$out" = "$(sort "$work/big.txt" | cksum)" ] && [ "$warnings" -eq 1 ]; then
    pass "DUCTILE_CONF=$conf (one warning, defaults kept)"
  else
    fail "DUCTILE_CONF=$conf ($warnings warnings)" "$(cat "$work/conf.err")"
  fi
done
LD_PRELOAD=$lib DUCTILE_STATS=maybe sort "$work/big.txt" 2>"$work/statsenv.err" >/dev/null
if [ "$(grep -c 'ductile: warning: DUCTILE_STATS' "$work/statsenv.err")" -eq 1 ] &&
  ! grep -q 'End ductile statistics' "$work/statsenv.err"; then
  pass "DUCTILE_STATS=maybe (one warning, no summary)"
else
  fail "DUCTILE_STATS=maybe" "$(cat "$work/statsenv.err")"
fi

# glibc's allocator interface: a preloaded program that asks mallinfo2,
# malloc_info, malloc_stats or mallopt, or allocates through the __libc_
# names, gets ductile's answers about ductile's heap, not glibc's about a
# heap it does not use. mallopt's return values are glibc's, but for
# M_MXFAST, which ductile does not support (0).
cat >"$work/glibcapi.c" <<'C'
#define _GNU_SOURCE
#include <dlfcn.h>
#include <limits.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
extern void *__libc_malloc(size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
extern void __libc_free(void *);
typedef int (*mallctl_fn)(const char *, void *, size_t *, void *, size_t);
typedef size_t (*sallocx_fn)(const void *, int);
static const char *owner(const void *p, size_t size) {
  sallocx_fn sallocx = (sallocx_fn)dlsym(RTLD_DEFAULT, "sallocx");
  return sallocx && sallocx(p, 0) >= size ? "ductile's" : "not ductile's";
}
int main(int argc, char **argv) {
  const char *what = argc > 1 ? argv[1] : "";
  if (!strcmp(what, "mallopt")) {
    int params[] = {M_TRIM_THRESHOLD, M_TOP_PAD, M_MMAP_THRESHOLD, M_MMAP_MAX, M_CHECK_ACTION,
                    M_PERTURB, M_ARENA_TEST, M_ARENA_MAX, 0, 2, 3, 4, 5, -9, 12345, INT_MIN};
    int values[] = {INT_MIN, -1, 0, 1, 64, 160, 161, 4096, 1 << 20, 32 << 20, (32 << 20) + 1, INT_MAX};
    for (unsigned i = 0; i < sizeof params / sizeof *params; i++) {
      printf("%d:", params[i]);
      for (unsigned j = 0; j < sizeof values / sizeof *values; j++) printf(" %d", mallopt(params[i], values[j]));
      printf("\n");
    }
    mallopt(M_PERTURB, 0);
    return 0;
  }
  if (!strcmp(what, "mxfast")) {
    int values[] = {-1, 0, 1, 64, 160, 161};
    printf("M_MXFAST:");
    for (unsigned j = 0; j < sizeof values / sizeof *values; j++) printf(" %d", mallopt(M_MXFAST, values[j]));
    printf("\n");
    return 0;
  }
  if (!strcmp(what, "threshold")) {
    /* M_MMAP_THRESHOLD is ductile's huge threshold: a 100 KiB block is huge. */
    mallctl_fn mallctl = (mallctl_fn)dlsym(RTLD_DEFAULT, "mallctl");
    size_t t = 0, len = sizeof t;
    unsigned long long allocs[2] = {0, 0};
    size_t alen = sizeof allocs[0];
    if (!mallctl) {
      puts("no mallctl");
      return 0;
    }
    int r = mallopt(M_MMAP_THRESHOLD, 64 << 10);
    mallctl("opt.huge_threshold", &t, &len, NULL, 0);
    mallctl("ductile.huge.allocs", &allocs[0], &alen, NULL, 0);
    void *volatile p = malloc(100 << 10);
    mallctl("ductile.huge.allocs", &allocs[1], &alen, NULL, 0);
    printf("mallopt: %d, huge threshold: %zu, a 100 KiB block is %s\n", r, t,
           allocs[1] == allocs[0] + 1 ? "huge" : "not huge");
    free(p);
    return 0;
  }
  if (!strcmp(what, "info")) {
    void *volatile h = malloc(6 << 20);
    int r = malloc_info(0, stdout);
    fprintf(stderr, "malloc_info: %d, with options 1: %d\n", r, malloc_info(1, stdout));
    free(h);
    return r;
  }
  if (!strcmp(what, "stats")) {
    void *volatile p = malloc(100);
    malloc_stats();
    free(p);
    return 0;
  }
  /* mallinfo2's figures, and the same figures by mallctl where there is one. */
  struct mallinfo2 a = mallinfo2();
  void *volatile h = malloc(6 << 20);
  struct mallinfo2 b = mallinfo2();
  void *volatile m = malloc(1 << 20);
  struct mallinfo2 c = mallinfo2();
  size_t huge = 0, len = sizeof huge;
  mallctl_fn mallctl = (mallctl_fn)dlsym(RTLD_DEFAULT, "mallctl");
  int ctl = mallctl ? mallctl("ductile.huge.allocated", &huge, &len, NULL, 0) : -1;
  printf("6 MiB: hblks +%zu, hblkhd +%zu\n", b.hblks - a.hblks, b.hblkhd - a.hblkhd);
  printf("1 MiB: hblks +%zu, uordblks %s\n", c.hblks - b.hblks,
         c.uordblks - b.uordblks >= (1 << 20) ? "+1 MiB or more" : "+less");
  printf("hblkhd and ductile.huge.allocated: %s\n", ctl ? "no mallctl" : huge == c.hblkhd ? "equal" : "differ");
  free(h);
  free(m);
  /* The __libc_ names: blocks of the allocator in use, freed by free(). */
  void *p = __libc_malloc(100);
  printf("__libc_malloc: %s\n", owner(p, 100));
  p = __libc_realloc(p, 5 << 20);
  printf("__libc_realloc: %s\n", owner(p, 5 << 20));
  struct mallinfo2 d = mallinfo2();
  free(p);
  printf("free of it: hblks -%zu\n", d.hblks - mallinfo2().hblks);
  p = __libc_memalign(4096, 3000);
  printf("__libc_memalign: %s\n", owner(p, 3000));
  __libc_free(p);
  /* C23's sized free, where the library has one (glibc 2.36 does not). */
  void (*free_sized)(void *, size_t) = (void (*)(void *, size_t))dlsym(RTLD_DEFAULT, "free_sized");
  if (free_sized) {
    p = malloc(3 << 20);
    d = mallinfo2();
    free_sized(p, 3 << 20);
    printf("free_sized: hblks -%zu\n", d.hblks - mallinfo2().hblks);
  }
  return 0;
}
C
if command -v gcc >/dev/null && gcc -O1 -o "$work/glibcapi" "$work/glibcapi.c" -ldl 2>"$work/glibcapi.err"; then
  # mallinfo2 and the __libc_ names: ductile's figures and blocks.
  expected='6 MiB: hblks +1, hblkhd +6291456
1 MiB: hblks +0, uordblks +1 MiB or more
hblkhd and ductile.huge.allocated: equal
__libc_malloc: ductile'"'"'s
__libc_realloc: ductile'"'"'s
free of it: hblks -1
__libc_memalign: ductile'"'"'s
free_sized: hblks -1'
  out=$(LD_PRELOAD=$lib "$work/glibcapi" 2>&1)
  plain=$("$work/glibcapi" 2>&1)
  if [ "$out" = "$expected" ] && [ "$plain" != "$expected" ]; then
    pass "mallinfo2 and the __libc_ names answer for ductile's heap"
  else
    fail "mallinfo2 and the __libc_ names" "under ductile:" "$out" "under glibc:" "$plain"
  fi
  # mallopt: glibc's return value for every parameter but M_MXFAST (0).
  # ductile's mallopt, too: M_MMAP_THRESHOLD moved the huge threshold.
  threshold=$(LD_PRELOAD=$lib "$work/glibcapi" threshold 2>&1)
  mxfast=$(LD_PRELOAD=$lib "$work/glibcapi" mxfast 2>&1)
  if cmp -s <("$work/glibcapi" mallopt) <(LD_PRELOAD=$lib "$work/glibcapi" mallopt) &&
    [ "$("$work/glibcapi" mallopt | wc -l)" -eq 16 ] &&
    [ "$threshold" = "mallopt: 1, huge threshold: 65536, a 100 KiB block is huge" ] &&
    [ "$mxfast" = "M_MXFAST: 0 0 0 0 0 0" ]; then
    pass "mallopt returns what glibc returns, M_MMAP_THRESHOLD sets the huge threshold, M_MXFAST is refused"
  else
    fail mallopt "$(diff <("$work/glibcapi" mallopt) <(LD_PRELOAD=$lib "$work/glibcapi" mallopt))" "$threshold" \
      "$mxfast"
  fi
  # malloc_stats: ductile's summary, the one DUCTILE_STATS=1 prints.
  LD_PRELOAD=$lib "$work/glibcapi" stats 2>"$work/malloc_stats.err" >/dev/null
  if grep -q '^___ Begin ductile statistics ___' "$work/malloc_stats.err" &&
    grep -q '^Small classes:' "$work/malloc_stats.err" && grep -q '^___ End ductile statistics ___' "$work/malloc_stats.err" &&
    ! grep -q '^Arena 0:' "$work/malloc_stats.err" && "$work/glibcapi" stats 2>&1 | grep -q '^Arena 0:'; then
    pass "malloc_stats prints ductile's summary"
  else
    fail malloc_stats "$(head -5 "$work/malloc_stats.err")"
  fi
  # malloc_info: well-formed XML (python's parser) with ductile's figures; the
  # same return values as glibc's.
  LD_PRELOAD=$lib "$work/glibcapi" info >"$work/info.xml" 2>"$work/info.err"
  "$work/glibcapi" info >"$work/info.plain.xml" 2>"$work/info.plain.err"
  check_xml='
import sys, xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
mmap = [t for t in root.findall("total") if t.get("type") == "mmap"]
d = root.find("ductile")
print(root.tag, root.get("version"), "ductile" if d is not None else "no ductile element",
      "mmap" if mmap and int(mmap[0].get("count")) >= 1 and int(mmap[0].get("size")) >= 6 << 20 else "no mmap")
'
  if command -v python3 >/dev/null; then
    verdict=$(python3 -c "$check_xml" "$work/info.xml" 2>&1)
    plain_verdict=$(python3 -c "$check_xml" "$work/info.plain.xml" 2>&1)
  else  # no parser: the root and ductile's element at least
    verdict=$(head -1 "$work/info.xml")$(grep -c '^<ductile ' "$work/info.xml")$(tail -1 "$work/info.xml")
    plain_verdict=$(head -1 "$work/info.plain.xml")$(grep -c '^<ductile ' "$work/info.plain.xml")
    [ "$verdict" = '<malloc version="1">1</malloc>' ] && verdict="malloc 1 ductile mmap"
    [ "$plain_verdict" = '<malloc version="1">0' ] && plain_verdict="malloc 1 no ductile element mmap"
  fi
  if [ "$verdict" = "malloc 1 ductile mmap" ] && [ "$plain_verdict" = "malloc 1 no ductile element mmap" ] &&
    cmp -s "$work/info.err" "$work/info.plain.err"; then
    pass "malloc_info writes well-formed XML with ductile's figures"
  else
    fail malloc_info "$verdict" "$plain_verdict" "$(cat "$work/info.err" "$work/info.plain.err")" "$(head -20 "$work/info.xml")"
  fi
else
  fail glibcapi "$(cat "$work/glibcapi.err" 2>/dev/null)"
fi

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
