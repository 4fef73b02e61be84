#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
"""Tables for bench/compare-small.sh.

Reads the raw results that compare-small.sh leaves in its output directory
and prints one Markdown table per metric: the median over repetitions for
each allocator, each peer's value as a ratio to ductile's, the best peer and
ductile against it.

  ratios.py DIR

DIR layout (written by compare-small.sh):
  allocs.tsv                  name <TAB> status <TAB> path-or-reason
  meta.tsv                    key <TAB> value
  mb/NAME.REP.json            malloc_bench --benchmark_out (JSON): batch and
                              producer/consumer (and, in older results, the pairs)
  pair/NAME.REP.json          malloc_bench's pairs alone, shorter and more runs
  rss/NAME.SIZE.REP.txt       rss_per_block output (key=value)
  sys/NAME.SIZE.ITERS.txt     syscall counts of BM_Pair/SIZE run for ITERS
                              iterations (perf stat -x, or strace -c output)
  sys/NAME.SIZE.ITERS.json    the benchmark's JSON for that run
"""
import glob
import json
import math
import os
import re
import statistics
import sys

MEMORY_SYSCALLS = ("mmap", "munmap", "mremap", "mprotect", "madvise",
                   "process_madvise", "brk")
PAIR_SIZES = (16, 64, 4096, 65536, 1048576)
RSS_SIZES = (8, 24, 72, 200)


def fmt_size(n):
    if n >= 1 << 20 and n % (1 << 20) == 0:
        return "%d MiB" % (n >> 20)
    if n >= 1 << 10 and n % (1 << 10) == 0:
        return "%d KiB" % (n >> 10)
    return "%d B" % n


def pair_label(size):
    return "%s pair" % fmt_size(size)


BATCH_LABEL = "64 B batch of 1000"
PC_LABEL = "producer/consumer"
# The rows that are times: the paired table's.
TIME_ROWS = [pair_label(s) for s in PAIR_SIZES] + [BATCH_LABEL, PC_LABEL]


def fmt_num(v):
    if v is None:
        return "n/a"
    if v == 0:
        return "0"
    a = abs(v)
    if a >= 100:
        return "%.0f" % v
    if a >= 10:
        return "%.1f" % v
    if a >= 0.1:
        return "%.2f" % v
    return "%.2g" % v


def quantile(sorted_values, q):
    """The q-quantile of sorted values, interpolated between neighbours."""
    x = q * (len(sorted_values) - 1)
    i = int(x)
    j = min(i + 1, len(sorted_values) - 1)
    return sorted_values[i] + (sorted_values[j] - sorted_values[i]) * (x - i)


def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def read_tsv(path):
    rows = []
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                line = line.rstrip("\n")
                if line:
                    rows.append(line.split("\t"))
    return rows


class Results:
    def __init__(self, d):
        self.dir = d
        self.allocs = []       # names in column order
        self.status = {}       # name -> (status, detail)
        for row in read_tsv(os.path.join(d, "allocs.tsv")):
            name, status = row[0], row[1]
            detail = row[2] if len(row) > 2 else ""
            self.allocs.append(name)
            self.status[name] = (status, detail)
        self.meta = dict((r[0], r[1] if len(r) > 1 else "")
                         for r in read_tsv(os.path.join(d, "meta.tsv")))

    # -- malloc_bench --------------------------------------------------------
    def runs_by_rep(self, name, sub="mb"):
        """[(repetition, run)] in the order of the files' names."""
        runs = []
        for path in sorted(glob.glob(os.path.join(self.dir, sub,
                                                  name + ".*.json"))):
            try:
                with open(path) as f:
                    run = json.load(f)
            except (OSError, ValueError):
                continue  # a crashed run leaves no or partial JSON
            runs.append((os.path.basename(path)[len(name) + 1:-len(".json")], run))
        return runs

    def bench_runs(self, name, sub="mb"):
        return [run for _, run in self.runs_by_rep(name, sub)]

    def pair_runs_by_rep(self, name):
        # The pairs' own runs where there are any (older results kept the
        # pairs in mb/ with the rest).
        return self.runs_by_rep(name, "pair") or self.runs_by_rep(name)

    @staticmethod
    def find(run, prefix):
        for b in run.get("benchmarks", []):
            if b.get("run_type", "iteration") != "iteration":
                continue
            if b["name"] == prefix or b["name"].startswith(prefix + "/"):
                if b.get("error_occurred"):
                    return None
                return b
        return None

    @staticmethod
    def ns_per_iter(b):
        scale = {"ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9}[b.get("time_unit",
                                                                  "ns")]
        return b["real_time"] * scale

    @classmethod
    def pair_ns_of(cls, run, size):
        b = cls.find(run, "BM_Pair/%d" % size)
        return cls.ns_per_iter(b) if b is not None else None

    @classmethod
    def items_per_second(cls, run, prefix):
        b = cls.find(run, prefix)
        return b["items_per_second"] if b is not None and b.get("items_per_second") else None

    def pair_all(self, name, size):
        vals = (self.pair_ns_of(run, size) for _, run in self.pair_runs_by_rep(name))
        return [v for v in vals if v is not None]

    def pair_ns(self, name, size):
        return median(self.pair_all(name, size))

    def batch_ns(self, name):
        vals = (self.items_per_second(run, "BM_Batch64") for run in self.bench_runs(name))
        return median([1e9 / v for v in vals if v is not None])

    def pc_all(self, name):
        vals = (self.items_per_second(run, "BM_ProducerConsumer") for run in self.bench_runs(name))
        return [v / 1e6 for v in vals if v is not None]

    def pc_mops(self, name):
        return median(self.pc_all(name))

    # -- per repetition, for paired ratios -----------------------------------
    def times_by_rep(self, name):
        """{row label: {rep: ns}} for TIME_ROWS: every pair size, the batch
        (ns per pair) and producer/consumer (ns per block)."""
        out = {label: {} for label in TIME_ROWS}
        for rep, run in self.pair_runs_by_rep(name):
            for s in PAIR_SIZES:
                v = self.pair_ns_of(run, s)
                if v is not None:
                    out[pair_label(s)][rep] = v
        for rep, run in self.runs_by_rep(name):
            for prefix, label in (("BM_Batch64", BATCH_LABEL),
                                  ("BM_ProducerConsumer", PC_LABEL)):
                v = self.items_per_second(run, prefix)
                if v is not None:
                    out[label][rep] = 1e9 / v
        return out

    # -- rss_per_block -------------------------------------------------------
    def rss(self, name, size):
        vals, usable = [], None
        for path in glob.glob(os.path.join(self.dir, "rss",
                                           "%s.%d.*.txt" % (name, size))):
            with open(path) as f:
                kv = dict(re.findall(r"(\w+)=([-\d.]+)", f.read()))
            if "bytes_per_block" in kv:
                vals.append(float(kv["bytes_per_block"]))
                usable = int(kv["usable"])
        return median(vals), usable

    # -- syscalls ------------------------------------------------------------
    def syscall_counts(self, path):
        """(memory syscalls, all syscalls) from a perf or strace file."""
        mem, total = 0, None
        with open(path) as f:
            text = f.read()
        if self.meta.get("syscall_method") == "perf":
            for line in text.splitlines():
                parts = line.split(",")
                if len(parts) < 3 or line.startswith("#"):
                    continue
                try:
                    value = int(parts[0])
                except ValueError:
                    return None
                event = parts[2]
                if event == "raw_syscalls:sys_enter":
                    total = value
                elif event.startswith("syscalls:sys_enter_"):
                    mem += value
            return mem, total
        # strace -c table: "% time seconds usecs/call calls [errors] syscall"
        for line in text.splitlines():
            parts = line.split()
            if len(parts) < 5 or not parts[3].isdigit():
                continue
            if parts[-1] == "total":
                total = int(parts[3])
            elif parts[-1] in MEMORY_SYSCALLS:
                mem += int(parts[3])
        return mem, total

    def syscalls_per_pair(self, name, size):
        pts = []
        for path in glob.glob(os.path.join(self.dir, "sys",
                                           "%s.%d.*.txt" % (name, size))):
            jpath = path[:-4] + ".json"
            try:
                with open(jpath) as f:
                    b = self.find(json.load(f), "BM_Pair/%d" % size)
                counts = self.syscall_counts(path)
            except (OSError, ValueError):
                continue
            if b is None or counts is None:
                continue
            pts.append((b["iterations"], counts))
        if len(pts) < 2:
            return None, None
        pts.sort()
        (i1, (m1, t1)), (i2, (m2, t2)) = pts[0], pts[-1]
        if i2 == i1:
            return None, None
        mem = (m2 - m1) / (i2 - i1)
        tot = max((t2 - t1) / (i2 - i1), 0.0) \
            if t1 is not None and t2 is not None else None
        # A stray call in the shorter run (a timer, a futex) can make the
        # difference slightly negative: clamp.
        return max(mem, 0.0), tot


def table(res, title, unit, better, rows, note=None):
    """rows: list of (label, {alloc: value}). better: 'lower' or 'higher'."""
    peers = [a for a in res.allocs if a != "ductile"]
    cols = peers + (["ductile"] if "ductile" in res.allocs else [])
    out = ["### %s" % title, ""]
    out.append("%s; %s is better. Peer cells: value (ratio to ductile = "
               "peer / ductile)." % (unit, better))
    if note:
        out.append(note)
    out.append("")
    head = ["", *cols, "best peer", "ductile vs best"]
    out.append("| " + " | ".join(head) + " |")
    out.append("|" + "|".join(["---"] + ["---:"] * len(cols) + ["---", "---:"])
               + "|")
    for label, values in rows:
        d = values.get("ductile")
        cells = [label]
        for a in cols:
            v = values.get(a)
            if res.status.get(a, ("ok",))[0] != "ok":
                cells.append("unavailable")
            elif v is None:
                cells.append("failed")
            elif a != "ductile" and d:
                cells.append("%s (%.2f)" % (fmt_num(v), v / d))
            else:
                cells.append(fmt_num(v))
        peer_vals = [(values[a], a) for a in peers if values.get(a) is not None]
        if peer_vals:
            pick = min if better == "lower" else max
            bv, ba = pick(peer_vals)
            cells.append("%s (%s)" % (ba, fmt_num(bv)))
            if d is None:
                cells.append("n/a")
            elif bv == 0 and d == 0:
                cells.append("equal")
            elif bv == 0 or d == 0:
                cells.append("%s" % ("better" if (d < bv) == (better == "lower")
                                     else "worse"))
            else:
                r = d / bv
                ok = r <= 1.0 if better == "lower" else r >= 1.0
                cells.append("%.2fx (%s)" % (r, "better" if ok else "worse"))
        else:
            cells += ["n/a", "n/a"]
        out.append("| " + " | ".join(cells) + " |")
    out.append("")
    return "\n".join(out)


def paired_table(res):
    """Each peer's time over ductile's within one repetition (where the
    allocators ran one after the other), the median over the repetitions,
    and the geometric mean over the time rows: a drift of the machine's
    speed that outlasts a repetition cancels, where the medians of the
    tables above compare runs minutes apart. With other builds of ductile
    in the peers' slots this is how their costs are measured (docs/
    measurements/small-objects.md)."""
    if "ductile" not in res.allocs or res.status["ductile"][0] != "ok":
        return
    base = res.times_by_rep("ductile")
    peers = [a for a in res.allocs if a != "ductile" and res.status[a][0] == "ok"]
    labels = TIME_ROWS
    ratios = {}
    for a in peers:
        t = res.times_by_rep(a)
        for label in labels:
            rs = [v / base[label][k] for k, v in t[label].items()
                  if base[label].get(k, 0) > 0]
            ratios[(a, label)] = median(rs) if rs else None
    print("### Paired time ratios to ductile")
    print()
    print("Each peer's time over ductile's in the same repetition, the median "
          "over the repetitions; above 1 the peer is slower. Producer/consumer "
          "as time per block.")
    print()
    print("|  | " + " | ".join(peers) + " |")
    print("|---|" + "---:|" * len(peers))
    for label in labels:
        print("| %s | " % label + " | ".join(
            fmt_num(ratios[(a, label)]) if ratios[(a, label)] is not None else "—"
            for a in peers) + " |")
    cells = []
    for a in peers:
        vs = [ratios[(a, label)] for label in labels]
        cells.append(fmt_num(math.exp(sum(math.log(v) for v in vs) / len(vs)))
                     if all(v is not None and v > 0 for v in vs) else "—")
    print("| geometric mean | " + " | ".join(cells) + " |")
    print()


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: ratios.py RESULT-DIR")
    res = Results(sys.argv[1])
    if not res.allocs:
        sys.exit("ratios.py: no allocs.tsv in %s" % sys.argv[1])

    print("## Results (%s)" % res.meta.get("date", ""))
    print()
    for k in ("machine", "kernel", "thp", "reps", "min_time", "pair_reps",
              "pair_min_time", "mode", "other_load"):
        if k in res.meta:
            print("* %s: %s" % (k, res.meta[k]))
    m = re.search(r"\(([\d.]+) %\)", res.meta.get("other_load", ""))
    if m and float(m.group(1)) > 5.0:
        print("* **WARNING: other processes used %s %% of the machine during "
              "the timed runs; these figures are unreliable.**" % m.group(1))
    for a in res.allocs:
        st, detail = res.status[a]
        print("* %s: %s%s" % (a, st, (" — " + detail) if detail else ""))
    print()

    rows = [(pair_label(s),
             {a: res.pair_ns(a, s) for a in res.allocs}) for s in PAIR_SIZES]
    rows.append((BATCH_LABEL,
                 {a: res.batch_ns(a) for a in res.allocs}))
    print(table(res, "malloc+free pair", "ns per pair (median)", "lower",
                rows, "BM_Pair/N: malloc(N), touch 1 byte, free. Batch: "
                "malloc 1000 x 64 B then free them, time per pair."))
    print("Pair time, 25th to 75th percentile of the runs (ns):")
    print()
    for s in PAIR_SIZES:
        cells = []
        for a in res.allocs:
            v = sorted(res.pair_all(a, s))
            if v:
                cells.append("%s %s–%s" % (a, fmt_num(quantile(v, 0.25)),
                                           fmt_num(quantile(v, 0.75))))
        print("* %s: %s" % (fmt_size(s), "; ".join(cells)))
    print()

    rows = [("16..512 B, 2 threads",
             {a: res.pc_mops(a) for a in res.allocs})]
    spread = "; ".join(
        "%s %s–%s" % (a, fmt_num(min(v)), fmt_num(max(v)))
        for a in res.allocs for v in [res.pc_all(a)] if v)
    print(table(res, "Producer/consumer", "million blocks per second "
                "(median)", "higher", rows,
                "Thread 0 mallocs, passes blocks through an SPSC ring, "
                "thread 1 reads each block's first byte and frees it. Range over the repetitions (cross-core "
                "traffic on 2 vCPUs is noisy): %s." % spread))

    paired_table(res)

    rows, usable_rows = [], []
    for s in RSS_SIZES:
        vals, usable = {}, {}
        for a in res.allocs:
            vals[a], usable[a] = res.rss(a, s)
        rows.append(("%d B" % s, vals))
        usable_rows.append((s, usable))
    note = "1,000,000 live blocks, one byte written in each. malloc_usable_size " \
        "(the size class) per allocator: " + "; ".join(
            "%d B → " % s + ", ".join("%s %s" % (a, u[a]) for a in res.allocs
                                      if u.get(a) is not None)
            for s, u in usable_rows)
    print(table(res, "RSS per live block", "bytes (median)", "lower", rows,
                note))
    if "ductile" in res.allocs and res.status["ductile"][0] == "ok":
        lines = []
        for (label, vals), (s, usable) in zip(rows, usable_rows):
            d, u = vals.get("ductile"), usable.get("ductile")
            if d is not None and u:
                lines.append("%s: %.2f B for a %d B class = %+.1f %% (goal "
                             "≤ +2 %%)" % (label, d, u, 100.0 * (d - u) / u))
        if lines:
            print("ductile against its size class: " + "; ".join(lines) + ".")
            print()

    method = res.meta.get("syscall_method", "none")
    if method != "none":
        mem_rows, all_rows = [], []
        for s in PAIR_SIZES:
            m, t = {}, {}
            for a in res.allocs:
                m[a], t[a] = res.syscalls_per_pair(a, s)
            mem_rows.append((pair_label(s), m))
            all_rows.append((pair_label(s), t))
        note = ("Counted with %s over two runs of BM_Pair/N with fixed "
                "iteration counts (%s); per pair = difference in calls / "
                "difference in iterations, so start-up and warm-up cancel. "
                "Memory syscalls: %s." % (method, res.meta.get("sys_iters", "?"),
                                          ", ".join(MEMORY_SYSCALLS)))
        print(table(res, "Memory syscalls per pair (steady state)",
                    "calls per pair", "lower", mem_rows, note))
        if any(v is not None for _, r in all_rows for v in r.values()):
            print(table(res, "All syscalls per pair (steady state)",
                        "calls per pair", "lower", all_rows))


if __name__ == "__main__":
    main()
