#!/usr/bin/env bash
# A single-node Slurm cluster on this machine (localhost, loopback only), for
# trying `harness slurm` and for the `slurm` integration test.
#
#   harness/scripts/slurm-local.sh start   # installs slurm-wlm + munge if missing, starts munged, slurmctld, slurmd
#   harness/scripts/slurm-local.sh stop    # cancels every job, stops what `start` started
#
# Everything lives in $HARNESS_SLURM_DIR (default /tmp/harness-slurm); clients
# need `export SLURM_CONF=$HARNESS_SLURM_DIR/slurm.conf` (printed by start).
# No cgroup plugins (proctrack/linuxproc, task/none): works in containers.
# Needs root.
set -euo pipefail
STATE=${HARNESS_SLURM_DIR:-/tmp/harness-slurm}
CONF=$STATE/slurm.conf
export SLURM_CONF=$CONF

install() {
    command -v slurmctld >/dev/null && command -v munged >/dev/null && return
    apt-get update -q
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q slurm-wlm munge
}

write_conf() {
    local cpus mem
    cpus=$(nproc)
    # what slurmd sees, less 512 MiB for the daemons themselves
    mem=$(( $(awk '/MemTotal/ {print int($2 / 1024)}' /proc/meminfo) - 512 ))
    mkdir -p "$STATE/ctld" "$STATE/d"
    cat >"$CONF" <<CONF
ClusterName=harness
SlurmctldHost=localhost(127.0.0.1)
AuthType=auth/munge
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$STATE/ctld
SlurmdSpoolDir=$STATE/d
SlurmctldPidFile=$STATE/slurmctld.pid
SlurmdPidFile=$STATE/slurmd.pid
SlurmctldLogFile=$STATE/slurmctld.log
SlurmdLogFile=$STATE/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
SchedulerType=sched/backfill
ReturnToService=2
MpiDefault=none
NodeName=localhost NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$mem State=UNKNOWN
PartitionName=harness Nodes=localhost Default=YES MaxTime=INFINITE State=UP
CONF
}

start_munge() {
    [ -s /etc/munge/munge.key ] || { /usr/sbin/mungekey --create 2>/dev/null || dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 2>/dev/null; }
    chown munge:munge /etc/munge/munge.key && chmod 400 /etc/munge/munge.key
    mkdir -p /run/munge /var/log/munge /var/lib/munge && chown munge:munge /run/munge /var/log/munge /var/lib/munge
    if ! munge -n </dev/null >/dev/null 2>&1; then
        runuser -u munge -- /usr/sbin/munged
        echo started >"$STATE/munged.ours"
    fi
}

start() {
    install
    mkdir -p "$STATE"
    write_conf
    start_munge
    /usr/sbin/slurmctld -f "$CONF"
    /usr/sbin/slurmd -f "$CONF" -N localhost
    for _ in $(seq 60); do
        if sinfo -h -N -o '%T' 2>/dev/null | grep -qE '^(idle|mixed|allocated)'; then
            echo "slurm up on localhost; export SLURM_CONF=$CONF"
            return
        fi
        sleep 1
    done
    echo "slurm did not come up; see $STATE/slurmctld.log and $STATE/slurmd.log" >&2
    exit 1
}

stop_pid() {
    local f=$1
    [ -s "$f" ] || return 0
    local pid; pid=$(cat "$f")
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 20); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
    rm -f "$f"
}

stop() {
    scancel --user="$(id -un)" 2>/dev/null || true
    stop_pid "$STATE/slurmd.pid"
    stop_pid "$STATE/slurmctld.pid"
    if [ -e "$STATE/munged.ours" ]; then
        stop_pid /run/munge/munged.pid
        rm -f "$STATE/munged.ours"
    fi
}

case "${1:-}" in
    start) start ;;
    stop) stop ;;
    *) echo "usage: $0 start|stop" >&2; exit 2 ;;
esac
