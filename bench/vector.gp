# The vector-doubling chart, drawn by bench/compare-vector.sh:
#   gnuplot -e "datafile='v.dat'; outfile='v.png'; subtitle='...'" bench/vector.gp
# Data: one row per allocator or limit: "name" seconds peak_rss_mib colour
if (!exists("datafile")) datafile = 'vector.dat'
if (!exists("outfile")) outfile = 'vector-doubling.png'
if (!exists("subtitle")) subtitle = ''

set terminal pngcairo size 1200,500 font "sans,10"
set output outfile
set datafile separator whitespace
set multiplot layout 1,2 title "Vector doubling: realloc to twice the size, memset the new half\n".subtitle font "sans,12"
set style fill solid 0.85 border -1
set boxwidth 0.7
set xtics rotate by -30 nomirror
set grid ytics
set key off
set yrange [0:*]
set offsets 0.5, 0.5, graph 0.08, 0
set bmargin 8

set title "time (s) -- lower is better"
plot datafile using 0:2:4:xtic(1) with boxes lc rgb variable, \
     '' using 0:2:(sprintf("%.2f", $2)) with labels offset 0,0.8

set title "peak RSS (MiB)"
plot datafile using 0:3:4:xtic(1) with boxes lc rgb variable, \
     '' using 0:3:(sprintf("%.0f", $3)) with labels offset 0,0.8

unset multiplot
