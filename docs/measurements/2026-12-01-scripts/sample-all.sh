#!/bin/bash
L=/work/speed-logs/sample-results.txt; : > $L
run() { local name=$1; shift; env "$@" /usr/bin/time -f "$name user %U sys %S wall %e" -a -o $L /work/speed-tools/sample-run.sh > /work/speed-logs/sample-$name.out 2>&1; }
export CCACHE_MAXSIZE=8G CCACHE_BASEDIR=/work/speed-tree/nocc
rm -rf /work/speed-cc-default /work/speed-cc-depend; mkdir -p /work/speed-cc-default /work/speed-cc-depend
run plain SCC=gcc
run ccache-default-cold SCC="/usr/bin/ccache gcc" CCACHE_DIR=/work/speed-cc-default
run ccache-depend-cold SCC="/usr/bin/ccache gcc" CCACHE_DIR=/work/speed-cc-depend CCACHE_DEPEND=1
run plain2 SCC=gcc
run ccache-default-warm SCC="/usr/bin/ccache gcc" CCACHE_DIR=/work/speed-cc-default
run ccache-depend-warm SCC="/usr/bin/ccache gcc" CCACHE_DIR=/work/speed-cc-depend CCACHE_DEPEND=1
CCACHE_DIR=/work/speed-cc-default ccache -s >> $L; CCACHE_DIR=/work/speed-cc-depend ccache -s >> $L
