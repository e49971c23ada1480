#!/bin/bash
# the README's first command from a fresh clone, timed per step
unset CARGO_TARGET_DIR HARNESS_WORK_DIR HARNESS_RUNS_DIR HARNESS_E2E_WORK HARNESS_HISTORY_DB
# usage: first-run.sh REPO (a clone of this repository is made in /tmp/first-run-clone)
rm -rf /tmp/first-run-clone && git clone -q "${1:?repository}" /tmp/first-run-clone && cd /tmp/first-run-clone || exit 1
git log --oneline -1
t0=$(date +%s.%N)
harness/scripts/setup-host.sh > /tmp/first-run-fresh-setup.log 2>&1 || exit 1
t1=$(date +%s.%N)
cargo build --release --workspace > /tmp/first-run-fresh-cargo.log 2>&1 || exit 1
t2=$(date +%s.%N)
target/release/harness run --quick > /tmp/first-run-fresh-run.out 2> /tmp/first-run-fresh-run.err
rc=$?
t3=$(date +%s.%N)
echo "setup $(echo "$t1-$t0"|bc) s, cargo $(echo "$t2-$t1"|bc) s, run $(echo "$t3-$t2"|bc) s, total $(echo "$t3-$t0"|bc) s, run exit $rc"
