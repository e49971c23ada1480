#!/bin/bash
# icount-run.sh NAME -- boots the harness's icount guest (2 vCPUs), waits for
# the ready line, runs doexec-static over SSH, and prints QEMU's CPU seconds
# (utime+stime from /proc/PID/stat) per guest second for boot and benchmark.
# Knobs (env): ACCEL ICOUNT CPU MACHINE EXTRA_APPEND KERNEL INITRD SMP MEM BENCH PERF QEMU_EXTRA
set -u
name=$1
out=/work/speed-logs/icount/$name; mkdir -p $out; rm -f $out/*
K=/work/main/target/e2e-work/kernels/4b95effc4a6de430
KEYS=/work/main/target/e2e-work/keys/20261201-154645-quick
KERNEL=${KERNEL:-$K/vmlinux}
INITRD=${INITRD:-$KEYS/base.cpio}
ACCEL=${ACCEL:-tcg}
ICOUNT=${ICOUNT:-shift=0,sleep=off}
CPU=${CPU:-max}
MACHINE=${MACHINE:-q35}
SMP=${SMP:-2}
MEM=${MEM:-1024}
BENCH=${BENCH:-/bench/run 120 /bench/doexec-static -w 2 -d 4 -W 1}
APPEND="console=ttyS0 panic=-1 oops=panic quiet loglevel=5 lpj=4000000 tsc=reliable rdinit=/init norandmaps cpu_init_udelay=0 acpi_pm_good nolapic_timer ${EXTRA_APPEND:-}"
port=$((40000 + RANDOM % 20000))
icount_args=(); [ "$ICOUNT" != none ] && icount_args=(-icount "$ICOUNT")
cmd=(qemu-system-x86_64 -nodefaults -no-user-config -display none -machine "$MACHINE" -accel "$ACCEL" "${icount_args[@]}" -cpu "$CPU"
  -smp $SMP,sockets=1,cores=$SMP,threads=1,maxcpus=$SMP -m ${MEM}M -kernel $KERNEL -initrd $INITRD -append "$APPEND"
  -serial file:$out/console -monitor none -no-reboot -netdev user,id=net0,hostfwd=tcp:127.0.0.1:$port-:22 -device virtio-net-pci,netdev=net0 -monitor unix:$out/mon,server,nowait ${QEMU_EXTRA:-})
printf '%q ' "${cmd[@]}" > $out/cmdline; echo >> $out/cmdline
t0=$(date +%s.%N)
"${cmd[@]}" > $out/qemu.out 2>&1 &
pid=$!
mon() { python3 -c "
import socket,time,sys
s=socket.socket(socket.AF_UNIX); s.connect('$out/mon'); time.sleep(0.3); s.recv(65536)
s.send(b'info jit\\n'); time.sleep(1); sys.stdout.write(s.recv(1<<20).decode(errors='replace'))" 2>&1; }
cpu() { awk '{printf "%.2f\n", ($14+$15)/100}' /proc/$pid/stat; }
until grep -q 'harness: guest ready' $out/console 2>/dev/null; do
  kill -0 $pid 2>/dev/null || { echo "$name: qemu died"; cat $out/qemu.out; exit 1; }
  sleep 0.5
done
t1=$(date +%s.%N); c1=$(cpu)
ready_up=$(grep 'harness: uptime' $out/console | tail -1 | awk '{print $3}')
ssh_opts=(-i $KEYS/id_ed25519 -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR -p $port root@127.0.0.1)
for i in $(seq 1 60); do ssh "${ssh_opts[@]}" true 2>/dev/null && break; sleep 1; done
mon > $out/info-jit-before
c2=$(cpu); t2=$(date +%s.%N)
if [ -n "${PERF:-}" ]; then perf record -F 499 -g -p $pid -o $out/perf.data -- sleep $PERF > $out/perf.log 2>&1 & fi
ssh "${ssh_opts[@]}" "$BENCH" > $out/bench.out 2>&1
c3=$(cpu); t3=$(date +%s.%N)
wait_perf=$(jobs -p | grep -v "^$pid$"); [ -n "$wait_perf" ] && wait $wait_perf 2>/dev/null
mon > $out/info-jit-after
ssh "${ssh_opts[@]}" 'poweroff -f' >/dev/null 2>&1
sleep 2; kill $pid 2>/dev/null; wait $pid 2>/dev/null
g0=$(awk '/^uptime0/{print $2}' $out/bench.out); g1=$(awk '/^uptime1/{print $2}' $out/bench.out)
val=$(grep -o 'execs_per_s=[0-9.]*\|^sample.*' $out/bench.out | tail -1)
awk -v n=$name -v ru=$ready_up -v c1=$c1 -v c2=$c2 -v c3=$c3 -v g0=$g0 -v g1=$g1 -v t0=$t0 -v t1=$t1 -v t2=$t2 -v t3=$t3 'BEGIN{
 gs=g1-g0; printf "%s boot: guest %.2fs cpu %.1fs (%.2f cpu/guest-s) wall %.0fs | bench: guest %.3fs cpu %.1fs => %.2f cpu-s/guest-s, wall %.1f/guest-s\n", n, ru, c1, c1/ru, t1-t0, gs, c3-c2, (c3-c2)/gs, (t3-t2)/gs}' | tee $out/summary
grep '^sample' $out/bench.out | tail -2 >> $out/summary
