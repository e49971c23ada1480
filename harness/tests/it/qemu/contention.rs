//! Issue 45: contention seen on a host with none. Two tests read one
//! icount run at 2 vCPUs, five boots an arm of one guest second per
//! benchmark ([`ci_benches`]), real kernels with test
//! patches (made once, by whichever test comes first): a global atomic
//! added to every fork is `more contention` naming its variable at about
//! one shared-line RMW per fork while the instruction verdict stays about
//! the same, and a per-CPU increment in the same place is not flagged; a
//! global spinlock taken by every mmap (stress-ng mmap, 2 workers) is `more
//! contention` naming the lock with its acquisitions per op. Base against
//! base-again moves no row in either benchmark.

use std::path::PathBuf;
use std::sync::OnceLock;

use serde_json::Value;

use super::e2e::{harness, icount_matrix, only_run_dir, report_of};
use crate::common::{build_profiler, run_ok, scratch};

/// The fork-exec and stress-ng mmap benchmarks (a fork-exec op is one
/// fork and exec of a static child; a bogo mmap op maps and unmaps 1 MiB).
pub(super) const BENCHES: &str = "{name: fork-exec, kind: fork_exec, workers: nproc, duration_s: 1, warmup_s: 1, timeout_s: 120}\n  \
     - {name: stress-mmap, kind: program, run: stress-ng, args: [--mmap, \"{workers}\", --mmap-bytes, 1M, --timeout, \"{duration_s}\", --metrics-brief], \
     workers: 2, duration_s: 2, metrics: [{name: bogo_ops_per_s, unit: ops/s, regex: '\\] mmap\\s+\\d+\\s+[\\d.]+\\s+[\\d.]+\\s+[\\d.]+\\s+(?P<value>[\\d.]+)'}], \
     ops: '\\] mmap\\s+(?P<value>\\d+)\\s', timeout_s: 120}";

/// [`BENCHES`] at half the guest time, for this test's run in CI: no
/// warmup second before fork-exec's, one second of stress-ng mmap, not
/// two (the A/A rates below were measured on [`BENCHES`]).
fn ci_benches() -> String {
    let b = BENCHES.replacen("warmup_s: 1", "warmup_s: 0", 1).replacen(
        "workers: 2, duration_s: 2",
        "workers: 2, duration_s: 1",
        1,
    );
    assert_ne!(b, BENCHES);
    b
}

fn cell<'a>(report: &'a Value, variant: &str, bench: &str) -> &'a Value {
    report["contention"]
        .as_array()
        .unwrap_or_else(|| panic!("no contention in the report: {report:#}"))
        .iter()
        .find(|c| c["variant"] == variant && c["benchmark"] == bench)
        .unwrap_or_else(|| panic!("no contention cell {variant} {bench}: {:#}", report["contention"]))
}

fn called(c: &Value) -> Vec<&Value> {
    c["diff"]["rows"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["called"] == true)
        .collect()
}

/// The one called row of cell `c` whose words are `text`.
fn the_called_row<'a>(c: &'a Value, text: &str) -> &'a Value {
    let rows = called(c);
    let named: Vec<&Value> = rows.iter().copied().filter(|r| r["text"] == text).collect();
    assert_eq!(named.len(), 1, "one called row {text}: {rows:#?}");
    named[0]
}

fn rate_verdict(report: &Value, variant: &str, bench: &str, metric: &str) -> String {
    let row = report["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["benchmark"] == bench && r["metric"] == metric)
        .unwrap_or_else(|| panic!("no row {bench} {metric}"));
    let c = row["cells"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["variant"] == variant)
        .unwrap();
    c["decision"]["verdict"].as_str().unwrap().to_string()
}

/// The run both tests read: its runs directory, run directory, printed
/// text and report.
struct Shared {
    runs: PathBuf,
    run: PathBuf,
    text: String,
    report: Value,
}

/// The run, made by the first test that asks (under the e2e lock).
fn the_run() -> &'static Shared {
    static RUN: OnceLock<Shared> = OnceLock::new();
    RUN.get_or_init(|| {
        build_profiler();
        let dir = scratch("contention");
        let variants = "  - name: base\n  - name: base-again\n  \
             - {name: fork-global-atomic, apply: [fork-global-atomic], benchmarks: [fork-exec]}\n  \
             - {name: fork-percpu-count, apply: [fork-percpu-count], benchmarks: [fork-exec]}\n  \
             - {name: mmap-global-lock, apply: [mmap-global-lock], benchmarks: [stress-mmap]}\n";
        let matrix = icount_matrix(
            &dir,
            variants,
            "",
            &ci_benches(),
            "boots: 5, repetitions: 1, warmup_repetitions: 0",
            "",
        );
        let runs = dir.join("runs");
        let mut c = harness(&runs);
        c.arg("run").arg(&matrix);
        let text = run_ok(c);
        let run = only_run_dir(&runs);
        let report = report_of(&run);
        Shared {
            runs,
            run,
            text,
            report,
        }
    })
}

/// Base-again's cell of `bench`: no row called, `≈`. At 5 boots an arm
/// the rule calls a heap row between arms of one kernel in 0.2% (fork-exec)
/// and 0.55% (stress-ng mmap) of A/A draws, no static row in any
/// (`qemu::aa_profile::aa_contention_rarely_calls_a_row`).
fn aa_moves_nothing(report: &Value, bench: &str) {
    let c = cell(report, "base-again", bench);
    assert!(called(c).is_empty(), "base-again {bench}: {:#?}", called(c));
    assert_eq!(c["diff"]["verdict"], "same", "base-again {bench}");
}

#[test]
fn a_global_atomic_on_every_fork_is_more_contention_and_a_per_cpu_count_is_not() {
    let _g = crate::common::serial();
    let Shared {
        runs,
        run,
        text,
        report,
    } = the_run();

    // the global atomic: more contention, its variable named, ~1 RMW a fork
    let atomic = cell(report, "fork-global-atomic", "fork-exec");
    assert_eq!(atomic["diff"]["verdict"], "more", "{:#}", atomic["diff"]["rows"][0]);
    let named = the_called_row(atomic, "line harness_fork_count+0x0");
    let delta = named["delta"].as_f64().unwrap();
    assert!(
        (0.9..=1.2).contains(&delta),
        "{delta} shared-line RMWs per fork-exec, one added"
    );
    assert_eq!(named["funcs"][0][0], "copy_process", "{named:#}");
    // ... while the instructions per op do not move beyond the threshold
    let insns = rate_verdict(report, "fork-global-atomic", "fork-exec", "kernel_insns_per_op");
    assert!(
        !matches!(insns.as_str(), "regressed" | "improved" | "unsure"),
        "kernel instructions per op: {insns}"
    );
    assert!(
        text.contains("fork-exec at 2 vCPUs, fork-global-atomic: more contention"),
        "{text}"
    );
    assert!(text.contains("line harness_fork_count+0x0"), "{text}");

    // the per-CPU increment and base-again: nothing
    let percpu = cell(report, "fork-percpu-count", "fork-exec");
    assert!(called(percpu).is_empty(), "fork-percpu-count: {:#?}", called(percpu));
    assert_eq!(percpu["diff"]["verdict"], "same");
    aa_moves_nothing(report, "fork-exec");

    // the gate warns, and fails with --strict
    let gate = |strict: bool| {
        let mut c = harness(runs);
        c.arg("report").arg(run).arg("--gate");
        if strict {
            c.arg("--strict");
        }
        let o = c.output().unwrap();
        (o.status.code(), String::from_utf8_lossy(&o.stderr).to_string())
    };
    let (code, err) = gate(false);
    assert_eq!(code, Some(0), "{err}");
    assert!(
        err.contains("gate: warning (fatal with --strict): fork-global-atomic at 2 vCPUs (fork-exec): more contention"),
        "{err}"
    );
    assert_eq!(gate(true).0, Some(1));
}

#[test]
fn a_global_lock_in_do_mmap_is_more_contention_naming_the_lock() {
    let _g = crate::common::serial();
    let Shared {
        runs,
        run,
        text,
        report,
    } = the_run();

    let lock = cell(report, "mmap-global-lock", "stress-mmap");
    assert_eq!(lock["diff"]["verdict"], "more");
    let named = the_called_row(lock, "spin lock harness_mmap_lock+0x0");
    let acqs = named["delta"].as_f64().unwrap();
    assert!(acqs >= 1.0, "{acqs} acquisitions of the lock per mmap op");
    assert_eq!(named["funcs"][0][0], "do_mmap", "{named:#}");
    assert!(
        text.contains("stress-mmap at 2 vCPUs, mmap-global-lock: more contention"),
        "{text}"
    );
    aa_moves_nothing(report, "stress-mmap");

    // explain prints the rows
    let mut c = harness(runs);
    c.arg("explain").arg(run).args([
        "--variant",
        "mmap-global-lock",
        "--bench",
        "stress-mmap",
        "--vcpus",
        "2",
        "--top",
        "5",
    ]);
    let out = run_ok(c);
    assert!(
        out.lines().any(|l| l.starts_with("* spin lock harness_mmap_lock+0x0")),
        "{out}"
    );
}
