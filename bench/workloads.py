#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
"""Tables for bench/compare-workloads.sh (the workload suite).

    workloads.py OUTDIR [--md PATH] [--chart-data DIR]

Reads OUTDIR/results.tsv (workload, allocator, rep, seconds, peak RSS KiB,
status), OUTDIR/allocs.tsv and OUTDIR/meta.tsv; prints per workload the
median time and peak RSS of each allocator with ratios to ductile, then the
geometric means over the workloads every allocator completed, and the
suite's goals. --md writes the same as Markdown; --chart-data writes the
ratios for bench/workloads.gp.
"""
import argparse
import math
import os
import statistics
import sys

PEERS = ["glibc", "jemalloc", "mimalloc", "tcmalloc"]
# "before": another ductile build, measured in the same run (--before).
ORDER = PEERS + ["before", "ductile"]
COLOURS = {"glibc": "#999999", "jemalloc": "#4477aa", "mimalloc": "#66ccee",
           "tcmalloc": "#228833", "before": "#ee7733", "ductile": "#cc3311"}


def geomean(xs):
    xs = [x for x in xs if x and x > 0]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def fmt_ratio(a, b):
    return "n/a" if a is None or not b else "%.2f" % (a / b)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("outdir")
    ap.add_argument("--md")
    ap.add_argument("--chart-data")
    opt = ap.parse_args()

    meta, args = {}, {}
    with open(os.path.join(opt.outdir, "meta.tsv")) as f:
        for line in f:
            p = line.rstrip("\n").split("\t")
            if p[0] == "args":
                args[p[1]] = p[2]
            elif len(p) > 1:
                meta[p[0]] = p[1]
    allocs = []
    with open(os.path.join(opt.outdir, "allocs.tsv")) as f:
        for line in f:
            p = line.rstrip("\n").split("\t")
            if p[1] == "ok":
                allocs.append(p[0])
    allocs = [a for a in ORDER if a in allocs]

    secs, rss, fails, workloads = {}, {}, {}, []
    with open(os.path.join(opt.outdir, "results.tsv")) as f:
        for line in f:
            w, a, _r, s, k, st = line.rstrip("\n").split("\t")
            if w not in workloads:
                workloads.append(w)
            if st == "ok":
                secs.setdefault((w, a), []).append(float(s))
                rss.setdefault((w, a), []).append(int(k) / 1024.0)
            else:
                fails.setdefault((w, a), []).append(st)

    med_t = {k: statistics.median(v) for k, v in secs.items()}
    med_m = {k: statistics.median(v) for k, v in rss.items()}
    out, md = [], []

    def p(s=""):
        out.append(s)

    p("workload suite: %s mode, %s repetition(s), medians; %s; kernel %s, THP %s"
      % (meta.get("mode"), meta.get("reps"), meta.get("machine"), meta.get("kernel"),
         meta.get("thp")))
    md.append("Measured %s: %s mode, medians of %s interleaved repetitions; %s; "
              "Linux %s, THP `%s`." % (meta.get("date"), meta.get("mode"), meta.get("reps"),
                                       meta.get("machine"), meta.get("kernel"), meta.get("thp")))
    if meta.get("other_load"):
        p("other processes during the timed runs: %s" % meta["other_load"])
        md[-1] += " Other processes used %s during the runs." % meta["other_load"]
    md.append("")
    for w in workloads:
        p()
        p("== %s  (%s)" % (w, args.get(w, "")))
        p("%-9s %10s %9s %13s %9s" % ("allocator", "seconds", "x ductile", "peak RSS MiB",
                                     "x ductile"))
        dt, dm = med_t.get((w, "ductile")), med_m.get((w, "ductile"))
        for a in allocs:
            t, m = med_t.get((w, a)), med_m.get((w, a))
            if t is None:
                p("%-9s %10s   (%s)" % (a, "FAILED", ", ".join(fails.get((w, a), ["no data"]))))
                continue
            p("%-9s %10.3f %9s %13.1f %9s" % (a, t, fmt_ratio(t, dt), m, fmt_ratio(m, dm)))
            if fails.get((w, a)):
                p("          (also %d failed run(s): %s)" % (len(fails[(w, a)]),
                                                          ", ".join(fails[(w, a)])))

    complete = [w for w in workloads if all((w, a) in med_t for a in allocs)]
    gt = {a: geomean([med_t[(w, a)] for w in complete]) for a in allocs}
    gm = {a: geomean([med_m[(w, a)] for w in complete]) for a in allocs}
    p()
    p("== geometric means over %d workload(s)%s" % (
        len(complete), "" if len(complete) == len(workloads) else
        " (left out, some allocator failed: %s)" % ", ".join(
            w for w in workloads if w not in complete)))
    p("%-9s %10s %9s %13s %9s" % ("allocator", "seconds", "x ductile", "peak RSS MiB",
                                 "x ductile"))
    for a in allocs:
        if gt[a] is None:
            continue
        p("%-9s %10.3f %9s %13.1f %9s" % (a, gt[a], fmt_ratio(gt[a], gt.get("ductile")), gm[a],
                                         fmt_ratio(gm[a], gm.get("ductile"))))

    # Markdown: two matrices, value and (ratio to ductile).
    for title, med, unit in (("Time (seconds; in brackets: × ductile, above 1 means "
                              "slower than ductile)", med_t, "%.3f"),
                             ("Peak RSS (MiB; in brackets: × ductile)", med_m, "%.1f")):
        md.append("**%s**" % title)
        md.append("")
        md.append("| workload | " + " | ".join(allocs) + " |")
        md.append("|---|" + "---:|" * len(allocs))
        rows = [(w, {a: med.get((w, a)) for a in allocs}) for w in workloads]
        g = gt if med is med_t else gm
        rows.append(("**geometric mean**", g))
        for w, vals in rows:
            cells = []
            d = vals.get("ductile")
            for a in allocs:
                v = vals.get(a)
                if v is None:
                    cells.append("failed")
                elif a == "ductile":
                    cells.append(unit % v)
                else:
                    cells.append((unit % v) + " (" + fmt_ratio(v, d) + ")")
            md.append("| %s | %s |" % (w, " | ".join(cells)))
        md.append("")

    # The suite's goals.
    goals = []
    if "ductile" in allocs:
        peers = [a for a in PEERS if a in allocs and gt.get(a)]
        if peers and gt.get("ductile"):
            best = min(peers, key=lambda a: gt[a])
            goals.append("geomean time, ductile / best peer (%s): %s   (goal <= 0.95)"
                         % (best, fmt_ratio(gt["ductile"], gt[best])))
        if gm.get("glibc") and gm.get("ductile"):
            goals.append("geomean peak RSS, ductile / glibc: %s   (goal <= 1.10)"
                         % fmt_ratio(gm["ductile"], gm["glibc"]))
        if gm.get("jemalloc") and gm.get("ductile"):
            goals.append("geomean peak RSS, ductile / jemalloc: %s   (goal <= 1.00)"
                         % fmt_ratio(gm["ductile"], gm["jemalloc"]))
        for w in workloads:
            d = med_t.get((w, "ductile"))
            pt = [(med_t[(w, a)], a) for a in PEERS if (w, a) in med_t]
            if d is None or not pt:
                goals.append("%s: ductile failed" % w)
                continue
            bt, ba = min(pt)
            r = d / bt
            flag = "  ** above 1.25" if r > 1.25 else ("  (slower than the best)"
                                                      if r > 1.0 else "")
            goals.append("%-16s ductile / best peer (%s) time %.2f%s" % (w, ba, r, flag))
    p()
    p("== goals")
    for g in goals:
        p("  " + g)
    md.append("Goals, from this run:")
    md.append("")
    md.extend("    " + g for g in goals)
    md.append("")
    md.append("Arguments: " + "; ".join("%s: `%s`" % (w, args[w]) for w in workloads if w in args)
              + ".")
    if any(fails.values()):
        p()
        p("failed runs:")
        for (w, a), v in sorted(fails.items()):
            p("  %s under %s: %s" % (w, a, ", ".join(v)))
    print("\n".join(out))

    if opt.md:
        with open(opt.md, "w") as f:
            f.write("\n".join(md) + "\n")
    if opt.chart_data:
        os.makedirs(opt.chart_data, exist_ok=True)
        groups = workloads + ["geomean"]
        n = len(allocs)
        lo = {"t": 1.0, "m": 1.0}
        hi = {"t": 1.0, "m": 1.0}
        with open(os.path.join(opt.chart_data, "ratios.dat"), "w") as f:
            for j, a in enumerate(allocs):
                f.write("# %s\n" % a)
                for i, w in enumerate(groups):
                    if w == "geomean":
                        t, m = gt.get(a), gm.get(a)
                        dt, dm = gt.get("ductile"), gm.get("ductile")
                    else:
                        t, m = med_t.get((w, a)), med_m.get((w, a))
                        dt, dm = med_t.get((w, "ductile")), med_m.get((w, "ductile"))
                    if t is None or not dt:
                        continue
                    f.write("%g %g %g\n" % (i * (n + 1) + j, t / dt, m / dm))
                    for key, v in (("t", t / dt), ("m", m / dm)):
                        lo[key] = min(lo[key], v)
                        hi[key] = max(hi[key], v)
                f.write("\n\n")
        with open(os.path.join(opt.chart_data, "setup.gp"), "w") as f:
            f.write("nallocs = %d\n" % n)
            f.write("names = \"%s\"\n" % " ".join(allocs))
            f.write("colours = \"%s\"\n" % " ".join(COLOURS[a] for a in allocs))
            f.write("set xtics (%s)\n" % ", ".join(
                "\"%s\" %g" % (w, i * (n + 1) + (n - 1) / 2.0) for i, w in enumerate(groups)))
            f.write("set xrange [-1:%g]\n" % (len(groups) * (n + 1) - 1))
            for key in ("t", "m"):
                f.write("ymin_%s = %g\nymax_%s = %g\n" % (key, lo[key] / 1.25, key, hi[key] * 1.25))
    return 0


if __name__ == "__main__":
    sys.exit(main())
