#!/bin/bash
# every 2 s: epoch, pid, -smp, QEMU's CPU seconds (utime+stime), RSS KiB
out=${1:-/work/scale/cpu.log}
tck=$(getconf CLK_TCK)
while true; do
  for p in $(pgrep -f qemu-system-x86_64); do
    [ -r /proc/$p/stat ] || continue
    smp=$(tr '\0' ' ' < /proc/$p/cmdline 2>/dev/null | sed -n 's/.*-smp \([^ ]*\).*/\1/p')
    read -r ut st <<< "$(awk '{print $14, $15}' /proc/$p/stat 2>/dev/null)"
    rss=$(awk '/VmRSS/{print $2}' /proc/$p/status 2>/dev/null)
    [ -n "$ut" ] && echo "$(date +%s.%N | cut -c1-14) $p ${smp%%,*} $(( (ut+st) / tck )) $rss"
  done >> "$out"
  sleep 2
done
