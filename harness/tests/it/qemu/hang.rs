//! Issue 30: a kernel that hangs silently in a late initcall costs minutes
//! whatever the boot order. A two-variant icount matrix (base and the `hang`
//! fixture, `boot_timeout_s: 60`, 3 boots, 2 vCPUs) ends with hang's cell
//! failed and base's measured in under 10 minutes from the run's start, the
//! kernels in the cache: with the seed that put hang's boot first in the
//! seeded shuffle (it waited on beyond 1200 s before the plan booted base
//! first at each vCPU count and the first boot had a bound of its own), and
//! with the seed that boots hang after base in every round.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::e2e::{events, harness, icount_doexec_matrix, only_run_dir, qemus_of};
use crate::common::{run_ok, scratch};

/// Seed 0 shuffles every round to [hang, base] (the plan before issue 30
/// booted hang first), seed 5 every round to [base, hang].
const HANG_FIRST_SEED: u64 = 0;
const HANG_LAST_SEED: u64 = 5;

fn hang_run(name: &str, seed: u64) -> (std::path::PathBuf, Duration) {
    let dir = scratch(name);
    let matrix = icount_doexec_matrix(
        &dir,
        "  - name: base\n  - name: hang\n    apply: [hang]\n",
        ", boot_timeout_s: 60",
        &format!("boots: 3, repetitions: 1, warmup_repetitions: 0, seed: {seed}"),
        "",
    );
    let runs = dir.join("runs");
    // the kernels into the cache first: the bound is on the boots, not on a build
    let mut b = harness(&dir.join("build-runs"));
    b.arg("build").arg(&matrix);
    run_ok(b);
    let mut c = harness(&runs);
    c.arg("run").arg(&matrix).args(["--jobs", "1"]);
    let t0 = Instant::now();
    run_ok(c);
    let took = t0.elapsed();
    eprintln!("{name}: the run took {took:?}");
    (only_run_dir(&runs), took)
}

fn check(run: &Path, took: Duration) {
    let ends = events(run, "boot_end");
    let of = |v: &str| -> Vec<&Value> { ends.iter().filter(|e| e["variant"] == v).collect() };
    let (hang, base) = (of("hang"), of("base"));
    assert_eq!(hang.len(), 3, "{hang:?}");
    assert!(hang.iter().all(|e| e["failed"].is_object()), "{hang:?}");
    assert_eq!(base.len(), 3, "{base:?}");
    assert!(base.iter().all(|e| e["error"].is_null()), "{base:?}");
    let first = &events(run, "boot")[0];
    assert_eq!(first["variant"], "base", "the first boot is base's: {first}");
    assert!(took < Duration::from_secs(10 * 60), "the run took {took:?}");
    assert!(qemus_of(run).is_empty());
}

/// The seed that scheduled hang's boot first.
#[test]
fn a_hung_variant_scheduled_first_costs_minutes() {
    let _g = crate::common::serial();
    let (run, took) = hang_run("hang-first", HANG_FIRST_SEED);
    check(&run, took);
}

/// The seed that boots hang after base in every round.
#[test]
fn a_hung_variant_booted_last_costs_minutes() {
    let _g = crate::common::serial();
    let (run, took) = hang_run("hang-last", HANG_LAST_SEED);
    let ends = events(&run, "boot_end");
    assert_eq!(ends.last().unwrap()["variant"], "hang", "{ends:?}");
    check(&run, took);
}
