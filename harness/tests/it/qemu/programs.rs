//! Issue 28: a real suite from a Debian package as a `program` benchmark.
//! `perf bench sched pipe` (linux-perf 6.12) runs in an icount guest with
//! the libraries ldd names; its ops/sec lands as samples, base against
//! base-again is not called, a fixed cost in `pipe_write` is called
//! regressed with the function named by the profile and the benchmark
//! listed for it in the coverage table, and a cost in a syscall no
//! benchmark makes gets "not measured by any benchmark here".

use std::path::Path;

use serde_json::Value;

use super::e2e::{harness, jsonl, kernel_yaml, only_run_dir};
use crate::common::{build_profiler, run_ok, scratch};

fn matrix(dir: &Path) -> std::path::PathBuf {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/series");
    let m = dir.join("matrix.yaml");
    let yaml = format!(
        "{}variants:\n  - name: base\n  - name: base-again\n  - name: pipe-cost\n    apply: [pipe-cost]\n  \
         - name: hostname-cost\n    apply: [hostname-cost]\n\
         guest: {{memory_mib: 1024, clock: icount}}\nvcpus: [2]\nbenchmarks:\n\
         \x20 - name: perf-pipe\n    kind: program\n    run: perf\n\
         \x20   args: [bench, sched, pipe, --loop, \"4000\"]\n\
         \x20   metrics: [{{name: ops_per_s, unit: ops/s, regex: '(?P<value>\\d+) ops/sec'}}]\n\
         \x20   ops: 'Executed (?P<value>\\d+) pipe operations'\n    work: [pipe_write]\n    timeout_s: 120\n\
         sampling: {{boots: 5, repetitions: 1, warmup_repetitions: 0}}\nstatistics: {{floor: 0.005}}\n",
        kernel_yaml(&fixtures)
    );
    std::fs::write(&m, yaml).unwrap();
    m
}

/// The verdict of (variant, metric) in report.json.
fn verdict(report: &Value, variant: &str, metric: &str) -> String {
    let row = report["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["metric"] == metric)
        .unwrap_or_else(|| panic!("no row {metric}"));
    let cell = row["cells"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["variant"] == variant)
        .unwrap_or_else(|| panic!("no cell {variant} in {row}"));
    cell["decision"]["verdict"].as_str().unwrap_or("none").to_string()
}

#[test]
fn a_perf_bench_program_measures_profiles_and_covers_a_pipe_patch() {
    let _g = crate::common::serial();
    build_profiler();
    let dir = scratch("programs");
    let matrix = matrix(&dir);
    let runs = dir.join("runs");
    let mut c = harness(&runs);
    c.arg("run").arg(&matrix);
    let out = run_ok(c);
    let run = only_run_dir(&runs);

    // every boot's repetition gives ops/sec, and a profile divided by perf's own op count
    let samples = jsonl(&run.join("samples.jsonl"));
    let rates: Vec<f64> = samples
        .iter()
        .filter(|s| s["variant"] == "base" && s["metric"] == "ops_per_s")
        .map(|s| s["value"].as_f64().unwrap())
        .collect();
    assert_eq!(rates.len(), 5, "{rates:?}");
    assert!(rates.iter().all(|r| *r > 0.0), "{rates:?}");
    let profiles = super::e2e::events(&run, "profile");
    assert!(profiles.iter().all(|p| p["ops"] == 4000), "{profiles:?}");

    let report: Value = super::e2e::report_of(&run);
    for metric in ["ops_per_s", "kernel_insns_per_op"] {
        assert_ne!(verdict(&report, "base-again", metric), "regressed", "{metric}: {out}");
        assert_ne!(verdict(&report, "base-again", metric), "improved", "{metric}: {out}");
        assert_eq!(verdict(&report, "pipe-cost", metric), "regressed", "{metric}: {out}");
    }

    // the profile names the function the patch added, two calls per op (a write each way)
    let mut c = harness(&runs);
    c.args(["--json", "explain"])
        .arg(&run)
        .args(["--variant", "pipe-cost", "--bench", "perf-pipe", "--vcpus", "2"]);
    let explain: Value = serde_json::from_str(&run_ok(c)).unwrap();
    let top = &explain["diff"]["rows"][0];
    assert_eq!(top["name"], "harness_pipe_counted_cost", "{top:#}");
    assert_eq!(top["called"], true, "{top}");

    // coverage: the pipe patch is measured by perf-pipe, the hostname patch by nothing
    let cov: Vec<Value> = serde_json::from_slice(&std::fs::read(run.join("coverage.json")).unwrap()).unwrap();
    let of = |series: &str, function: &str| -> Value {
        let c = cov.iter().find(|c| c["series"] == series).unwrap();
        c["rows"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["changed"]["function"] == function)
            .unwrap_or_else(|| panic!("{series}: no row {function}: {c:#}"))
            .clone()
    };
    let calls = of("pipe-cost", "pipe_write")["benchmarks"]["perf-pipe"]
        .as_f64()
        .unwrap();
    assert!((calls - 2.0).abs() < 0.1, "pipe_write calls per op: {calls}");
    assert!(of("pipe-cost", "harness_pipe_counted_cost")["benchmarks"]["perf-pipe"]
        .as_f64()
        .is_some());
    let unrun = of("hostname-cost", "__do_sys_sethostname");
    assert_eq!(unrun["benchmarks"], serde_json::json!({}), "{unrun}");
    assert!(
        out.contains("warning: not measured by any benchmark here") && out.contains("hostname-cost"),
        "{out}"
    );
    let html = std::fs::read_to_string(run.join("report.html")).unwrap();
    assert!(
        html.contains("Not measured by any benchmark here"),
        "the HTML report shows the coverage"
    );

    // check, without booting, from the calls per op the run kept for this base kernel
    let mut c = harness(&runs);
    c.arg("check").arg(&matrix);
    let out = c.output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let line = |what: &str| {
        text.lines()
            .find(|l| l.contains(what))
            .unwrap_or_else(|| panic!("{what}: {text}"))
    };
    assert!(line("coverage pipe-cost").starts_with("ok"), "{text}");
    assert!(
        text.contains("pipe_write (fs/pipe.c)") && text.contains("perf-pipe 2.0"),
        "{text}"
    );
    assert!(line("coverage hostname-cost").starts_with("warn"), "{text}");
}
