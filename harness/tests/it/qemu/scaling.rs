//! Issue 56, item 3: the scaling view on real kernels. One icount run at 2
//! and 8 vCPUs, three boots an arm, fork-exec with its kernel profiles: a
//! fork that walks every online CPU's per-CPU data (test series
//! `fork-cpu-walk`, ~5,140 instructions a CPU) **scales worse**, carried
//! by `harness_cpu_walk`; a per-CPU increment on every fork
//! (`fork-percpu-count`, flat) and base against base-again are `≈`. The
//! rule's A/A false calls are measured on the run's own boots of one
//! kernel: base's and base-again's pooled at each count, three a side.

use serde_json::Value;

use super::e2e::{harness, icount_matrix_at, only_run_dir, report_of};
use crate::common::{build_profiler, run_ok, scratch};

/// The cell of `variant` in the report's scaling views.
fn cell<'a>(report: &'a Value, variant: &str) -> &'a Value {
    report["scaling"]
        .as_array()
        .unwrap_or_else(|| panic!("no scaling in the report: {:#}", report["notes"]))
        .iter()
        .find(|c| c["variant"] == variant && c["benchmark"] == "fork-exec")
        .unwrap_or_else(|| panic!("no scaling cell of {variant}"))
}

/// The rows of a cell that carry its verdict: marked, neither the whole
/// kernel's nor the scheduler's.
fn carried(c: &Value) -> Vec<&Value> {
    let verdict = c["scaling"]["verdict"].as_str().unwrap();
    c["scaling"]["rows"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["mark"] == verdict && r["measure"] != "kernel" && r["scheduler"] == false)
        .collect()
}

/// `fork-cpu-walk: "worse" (harness_cpu_walk function +30816 against base's growth, threshold 3601); …`.
fn verdict_line(report: &Value, variant: &str) -> String {
    let c = cell(report, variant);
    let rows: Vec<String> = carried(c)
        .iter()
        .map(|r| {
            format!(
                "{} {} {:+.0} against base's growth, threshold {:.0}",
                r["name"].as_str().unwrap(),
                r["measure"].as_str().unwrap(),
                r["interaction"].as_f64().unwrap(),
                r["threshold"].as_f64().unwrap()
            )
        })
        .collect();
    let k = &c["scaling"]["rows"][0];
    format!(
        "{variant}: {} ({}); whole kernel {:+.0} against base's growth, scheduler's share {}",
        c["scaling"]["verdict"],
        rows.join("; "),
        k["interaction"].as_f64().unwrap(),
        c["scaling"]["scheduler"]["share"]
    )
}

/// The rule's A/A false calls on the run's boots of one kernel (base and
/// base-again pooled at each count), three a side.
fn aa_on_the_runs_boots(run: &std::path::Path) -> harness::profile::scaling::ScalingAaCalls {
    use harness::report::profiles;
    let r = harness::store::Run::open(run).unwrap();
    let (dir, events, _) = profiles::source(&r, r.events().unwrap()).unwrap();
    let mut notes = Vec::new();
    let pools: Vec<(u32, Vec<harness::profile::PerOp>)> = [2, 8]
        .map(|n| {
            let mut boots = profiles::boots(&dir, &events, "base", n, "fork-exec", &mut notes);
            boots.extend(profiles::boots(&dir, &events, "base-again", n, "fork-exec", &mut notes));
            (n, boots)
        })
        .into();
    assert!(notes.is_empty(), "{notes:?}");
    let pools: Vec<(u32, &[harness::profile::PerOp])> = pools.iter().map(|(n, b)| (*n, b.as_slice())).collect();
    let o = harness::report::scaling::options(&r.meta().unwrap().matrix, "fork-exec");
    harness::profile::scaling::aa_false_calls(&pools, 3, 400, 56, &o).expect("6 boots of one kernel at each count")
}

#[test]
fn a_walk_over_every_cpu_scales_worse_and_a_flat_cost_does_not() {
    let _g = crate::common::serial();
    build_profiler();
    let dir = scratch("scaling");
    let variants = "  - name: base\n  - name: base-again\n  - {name: fork-cpu-walk, apply: [fork-cpu-walk]}\n  \
         - {name: fork-percpu-count, apply: [fork-percpu-count]}\n";
    // half a guest second a repetition: at 8 vCPUs a guest second costs ~27 s of host time
    let bench = "{name: fork-exec, kind: fork_exec, workers: nproc, duration_s: 1, sample_ms: 500, warmup_s: 0, timeout_s: 120}";
    let sampling = "boots: 3, repetitions: 1, warmup_repetitions: 0";
    let rest = "statistics: {floor: 0.005}\n";
    let matrix = icount_matrix_at(&dir, "[2, 8]", (variants, "", bench, sampling, rest));
    let runs = dir.join("runs");
    let mut c = harness(&runs);
    c.arg("run").arg(&matrix);
    let text = run_ok(c);
    let run = only_run_dir(&runs);
    let report = report_of(&run);
    for v in ["fork-cpu-walk", "fork-percpu-count", "base-again"] {
        eprintln!("scaling verdict: {}", verdict_line(&report, v));
    }

    // the walk: scales worse, carried by the walk's own row, ~6 × 5,140 more
    // (+30,816 on 2026-12-07)
    let walk = cell(&report, "fork-cpu-walk");
    assert_eq!(walk["scaling"]["vcpus"], serde_json::json!([2, 8]));
    assert_eq!(
        walk["scaling"]["verdict"],
        "worse",
        "{}",
        verdict_line(&report, "fork-cpu-walk")
    );
    let named: Vec<&Value> = carried(walk)
        .into_iter()
        .filter(|r| r["name"] == "harness_cpu_walk")
        .collect();
    assert_eq!(named.len(), 1, "{}", verdict_line(&report, "fork-cpu-walk"));
    let grew = named[0]["interaction"].as_f64().unwrap();
    assert!(
        (24_000.0..=40_000.0).contains(&grew),
        "{grew} instructions per op more growth"
    );
    assert!(
        text.contains("fork-exec, fork-cpu-walk, 2 → 8 vCPUs: scales worse: harness_cpu_walk (instructions per op)"),
        "{text}"
    );

    // a flat per-CPU increment and base again: ≈
    for v in ["fork-percpu-count", "base-again"] {
        assert_eq!(
            cell(&report, v)["scaling"]["verdict"],
            "same",
            "{}",
            verdict_line(&report, v)
        );
    }

    // explain prints the view for any of the cell's counts
    let mut c = harness(&runs);
    c.arg("explain").arg(&run).args([
        "--variant",
        "fork-cpu-walk",
        "--bench",
        "fork-exec",
        "--vcpus",
        "2",
        "--top",
        "3",
    ]);
    let out = run_ok(c);
    assert!(
        out.contains("scaling, fork-exec, fork-cpu-walk, 2 → 8 vCPUs: scales worse"),
        "{out}"
    );

    // an A/A across the same counts calls (almost) nothing: 0 of 400 draws
    // on the boots of 2026-12-07; a rate, not a certainty, so a bound
    let aa = aa_on_the_runs_boots(&run);
    eprintln!("scaling A/A on the run's boots of one kernel: {aa:?}");
    assert!(aa.calling <= 8, "over 2% of A/A draws call a cell: {aa:?}");
}
