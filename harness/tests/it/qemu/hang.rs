//! Issue 30: a kernel that hangs silently in a late initcall costs minutes
//! whatever the boot order. A two-variant icount matrix (base and the `hang`
//! fixture, `boot_timeout_s: 60`, 3 boots, 2 vCPUs, one boot at a time) ends
//! with hang's cell failed and base's measured in under 10 minutes from the
//! run's start, the kernels in the cache. `boot_timeout_s: 60` is 60 guest
//! seconds, which the old backstop and the measured pace made 40–60 host
//! minutes a boot.
//!
//! One run shows both orders the issue names: seed 6 shuffles the first
//! round to [hang, base] (the order that waited on the hung kernel beyond
//! 1200 s before the plan booted base first at each vCPU count) and every
//! later round to [base, hang], so the hung variant is also booted last
//! (`plan::tests::the_hang_test_seed_puts_hang_first_then_last` pins the
//! order). Before this test was one, three runs (seeds 0, 4 and 5) cost
//! 410 + 390 + 372 s of CI.

use std::time::{Duration, Instant};

use serde_json::Value;

use super::e2e::{boots_kept, events, harness, icount_doexec_matrix, only_run_dir, qemus_of};
use crate::common::{run_ok, scratch};

const HANG_FIRST_THEN_LAST_SEED: u64 = 6;

/// Each of hang's boots waits at most 5x the slowest boot to SSH the run
/// measured (at least 120 s), the second failure gives its cell up, the
/// third boot is recorded as failed without booting, and the cell reads
/// failed in 3/3 with the reason; base's cell is whole and booted first.
#[test]
fn a_hung_variant_scheduled_first_or_booted_last_costs_minutes() {
    let _g = crate::common::serial();
    let dir = scratch("hang");
    let matrix = icount_doexec_matrix(
        &dir,
        "  - name: base\n  - name: hang\n    apply: [hang]\n",
        ", boot_timeout_s: 60",
        &format!("boots: 3, repetitions: 1, warmup_repetitions: 0, seed: {HANG_FIRST_THEN_LAST_SEED}"),
        "",
    );
    // the kernels into the cache first: the bound is on the boots, not on a build
    let mut b = harness(&dir.join("build-runs"));
    b.arg("build").arg(&matrix);
    run_ok(b);
    let runs = dir.join("runs");
    let mut c = harness(&runs);
    c.arg("run").arg(&matrix).args(["--jobs", "1"]);
    let t0 = Instant::now();
    let table = run_ok(c);
    let took = t0.elapsed();
    eprintln!("the run took {took:?}");
    let run = only_run_dir(&runs);

    let first = &events(&run, "boot")[0];
    assert_eq!(first["variant"], "base", "the first boot is base's: {first}");
    let all_ends = events(&run, "boot_end");
    assert_eq!(
        all_ends.last().unwrap()["variant"],
        "hang",
        "hang is booted last: {all_ends:?}"
    );
    check_hang_waits(&run);
    check_cells(&run, &table);
    assert!(took < Duration::from_secs(10 * 60), "the run took {took:?}");
    assert!(qemus_of(&run).is_empty());
}

/// Two bounded waits for SSH, then the third boot recorded unbooted.
fn check_hang_waits(run: &std::path::Path) {
    let ends: Vec<Value> = events(run, "boot_end")
        .into_iter()
        .filter(|e| e["variant"] == "hang")
        .collect();
    assert_eq!(ends.len(), 3, "{ends:?}");
    let ready: Vec<f64> = events(run, "boot")
        .iter()
        .filter(|b| b["variant"] == "base")
        .map(|b| b["ready_s"].as_f64().unwrap())
        .collect();
    let bound = (5.0 * ready.iter().cloned().fold(0.0, f64::max)).max(120.0);
    for e in &ends[..2] {
        assert_eq!(e["failed"]["cause"], "boot_timeout", "{e}");
        let why = e["error"].as_str().unwrap();
        assert!(why.contains("no SSH within") && why.contains("host seconds"), "{e}");
        let waited: f64 = why
            .split("no SSH within ")
            .nth(1)
            .unwrap()
            .split_whitespace()
            .next()
            .unwrap()
            .parse()
            .unwrap();
        assert!(
            waited <= bound + 1.0,
            "waited {waited} s, the bound from base's boots is {bound} s: {e}"
        );
    }
    assert_eq!(ends[2]["failed"]["cause"], "not_booted", "{}", ends[2]);
    let why = ends[2]["error"].as_str().unwrap();
    assert!(
        ends[2]["boot_id"].is_null() && why.contains("not booted: the 2 boots of hang at 2 vCPUs"),
        "{}",
        ends[2]
    );
    let hung = boots_kept(run).iter().filter(|b| b["variant"] == "hang").count();
    assert_eq!(hung, 2, "the third boot never started");
}

/// hang's cell failed in 3/3 and shown as such; base's whole.
fn check_cells(run: &std::path::Path, table: &str) {
    let report: Value = super::e2e::report_of(run);
    // the rate's row (a profiled run also has instructions-per-op rows)
    let rows = report["rows"].as_array().unwrap();
    let row = rows.iter().find(|r| r["metric"] == "execs_per_s").unwrap();
    let cell = |v: &str| {
        row["cells"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["variant"] == v)
            .unwrap()
            .clone()
    };
    let count = |c: &Value| (c["boots_ended"].as_u64(), c["boots_failed"].as_u64());
    let hang = cell("hang");
    assert_eq!(count(&hang), (Some(3), Some(3)), "{hang}");
    assert!(table.contains("FAILED"), "{table}");
    let base = cell("base");
    assert_eq!(count(&base), (Some(3), Some(0)), "{base}");
    assert_eq!(base["values"].as_array().unwrap().len(), 3, "{base}");
}
