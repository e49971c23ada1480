//! Issue 21's gate second stage with real guests: a cell the first stage
//! could not decide boots the planned second stage, and the gate judges it
//! on the boots of both stages.

use super::e2e::{events, harness, icount_doexec_matrix, only_run_dir};
use crate::common::scratch;
use serde_json::Value;

/// Under icount at 2 vCPUs, base against the `slow-exec` fixture (~0.8%
/// fewer execs per 10^9 instructions) with 3 boots an arm, a 0.5%
/// threshold and a second stage of 3 boots: 3 against 3 boots cannot reach
/// the stage's level (the exact Mann-Whitney p is at least 0.1), and the
/// interval reaches past the threshold, so the cell is sent; `run --gate`
/// boots 3 more of base and of the variant (boot indices 3–5), and on 6
/// against 6 the cell is regressed and the gate fails.
#[test]
fn the_gate_boots_the_second_stage_for_an_undecided_cell_and_decides_it() {
    let _g = crate::common::serial();
    let dir = scratch("second-stage");
    let variants = "  - name: base\n  - name: slow-exec\n    apply: [slow-exec]\n";
    let sampling = "boots: 3, repetitions: 1, warmup_repetitions: 0";
    let matrix = icount_doexec_matrix(
        &dir,
        variants,
        ", kernel_profile: false",
        sampling,
        "statistics: {threshold: 0.005, second_stage: {boots: 3}}\n",
    );
    let runs = dir.join("runs");
    let out = harness(&runs).arg("run").arg(&matrix).arg("--gate").output().unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    eprintln!("{stderr}\n{stdout}");
    assert_eq!(
        out.status.code(),
        Some(1),
        "the gate must fail on the regression the second stage shows"
    );
    let run = only_run_dir(&runs);
    let ends = events(&run, "boot_end");
    for (arm, want) in [("base", 6), ("slow-exec", 6)] {
        let mut boots: Vec<u64> = ends
            .iter()
            .filter(|e| e["variant"] == arm && e["error"].is_null())
            .map(|e| e["boot"].as_u64().unwrap())
            .collect();
        boots.sort();
        assert_eq!(
            boots,
            (0..want).collect::<Vec<u64>>(),
            "{arm}: the boots of both stages, the second's after the first's"
        );
    }
    let report: Value = super::e2e::report_of(&run);
    let row = report["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["metric"] == "execs_per_s")
        .unwrap();
    let cell = row["cells"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["variant"] == "slow-exec")
        .unwrap();
    assert_eq!(cell["second_stage"], true, "{cell}");
    assert_eq!(cell["n"], 6, "{cell}");
    assert_eq!(cell["decision"]["verdict"], "regressed", "{stdout}");
}
