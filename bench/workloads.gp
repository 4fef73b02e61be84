# SPDX-License-Identifier: BSD-2-Clause
# The workload-suite chart, drawn by bench/compare-workloads.sh:
#   gnuplot -e "datadir='OUT/chart'; outfile='w.png'; subtitle='...'" bench/workloads.gp
# datadir holds ratios.dat (one block per allocator: x, time / ductile's,
# peak RSS / ductile's) and setup.gp (names, colours, x tics), both written
# by bench/workloads.py.
if (!exists("datadir")) datadir = 'chart'
if (!exists("outfile")) outfile = 'workloads.png'
if (!exists("subtitle")) subtitle = ''
datafile = datadir.'/ratios.dat'
load datadir.'/setup.gp'

set terminal pngcairo size 1400,900 font "sans,10"
set output outfile
set multiplot layout 2,1 title "Workload suite: each allocator relative to ductile (1 = ductile; log scale)\n".subtitle font "sans,12"
set style fill solid 0.85 border -1
set boxwidth 0.9
set xtics rotate by -20 nomirror
set grid ytics
set logscale y 2
set key outside right top
set ytics ("1/64" 0.015625, "1/32" 0.03125, "1/16" 0.0625, "1/8" 0.125, "1/4" 0.25, "1/2" 0.5, "1" 1, "2" 2, "4" 4, "8" 8, "16" 16, "32" 32, "64" 64, "128" 128, "256" 256)

set yrange [ymin_t:ymax_t]
set title "time / ductile's time -- above 1: slower than ductile"
plot for [j=1:nallocs] datafile index (j-1) using 1:2 with boxes lc rgb word(colours, j) title word(names, j), \
     1 with lines lc rgb "black" dt 2 notitle

set yrange [ymin_m:ymax_m]
set title "peak RSS / ductile's peak RSS -- above 1: more memory than ductile"
plot for [j=1:nallocs] datafile index (j-1) using 1:3 with boxes lc rgb word(colours, j) title word(names, j), \
     1 with lines lc rgb "black" dt 2 notitle

unset multiplot
