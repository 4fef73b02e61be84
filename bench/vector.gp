# SPDX-License-Identifier: BSD-2-Clause
# The vector-doubling chart, drawn by bench/compare-vector.sh and by
# `make vector-chart` (docs/vector-doubling.png from docs/vector-doubling.dat):
#   gnuplot -e "datafile='v.dat'; outfile='v.png'" bench/vector.gp
# Data: one row per allocator or limit: "name" seconds peak_rss_mib colour,
# and a comment line "# subtitle: ..." (a subtitle='...' given wins).
# Time is on a log scale, as in docs/workloads.png: the allocators span
# more than an order of magnitude, and the fast ones and the limits would be
# hairlines on a linear axis. Each bar carries its value.
if (!exists("datafile")) datafile = 'vector.dat'
if (!exists("outfile")) outfile = 'vector-doubling.png'
if (!exists("subtitle")) subtitle = system("sed -n 's/^# subtitle: //p' '".datafile."'")

set terminal pngcairo size 1200,500 font "sans,10"
set output outfile
set datafile separator whitespace
set datafile commentschars "#"
stats datafile using 2 name "T" nooutput
set multiplot layout 1,2 title "Vector doubling: realloc to twice the size, memset the new half\n".subtitle font "sans,12"
set style fill solid 0.85 border -1
set boxwidth 0.7
set xtics rotate by -30 nomirror
set key off
set offsets 0.5, 0.5, 0, 0
set bmargin 8

set title "time (s, log scale) -- lower is better"
set logscale y 10
set grid ytics mytics
set mytics 10
# From a power of ten below the fastest to room above the slowest's label
# (a run too short for the clock reads 0: a floor of 0.1 ms).
t_lo = T_min > 1e-4 ? T_min : 1e-4
t_hi = T_max > t_lo ? T_max : t_lo
set yrange [10 ** floor(log10(t_lo) - 0.3) : t_hi * 3]
set format y "%g"
plot datafile using 0:2:4:xtic(1) with boxes lc rgb variable, \
     '' using 0:2:(sprintf("%.2f", $2)) with labels offset 0,0.8

set title "peak RSS (MiB)"
unset logscale y
set mytics default
set grid ytics nomytics
set yrange [0:*]
set offsets 0.5, 0.5, graph 0.08, 0
set format y "%g"
plot datafile using 0:3:4:xtic(1) with boxes lc rgb variable, \
     '' using 0:3:(sprintf("%.0f", $3)) with labels offset 0,0.8

unset multiplot
