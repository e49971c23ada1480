//! Round five: a key metric names a metric its benchmark produces. `check`
//! refuses a misspelt one before anything runs; `report --gate` fails where
//! a key metric matched no cell of the run (a key recorded before the check,
//! or a metric known only from a program's output).

use std::path::Path;
use std::process::{Command, Output};

use super::history::{scratch, synthetic_night};

fn harness(work: &Path, args: &[&str]) -> (Output, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_harness"))
        .env("HARNESS_WORK_DIR", work.join("work"))
        .env("HARNESS_HISTORY_DB", work.join("history.sqlite"))
        .args(args)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    (out, stdout, stderr)
}

#[test]
fn check_refuses_a_key_metric_its_benchmark_cannot_produce() {
    let work = scratch("keys-check");
    let matrix = work.join("matrix.yaml");
    let yaml = "variants:\n  - name: base\n  - name: v\nvcpus: [2]\nguest: {clock: icount, accel: tcg}\n\
                benchmarks:\n  - {name: static-doexec, kind: doexec}\nkey_metrics: [static-doexec.execs_per_sec]\n";
    std::fs::write(&matrix, yaml).unwrap();
    let (out, stdout, stderr) = harness(&work, &["check", matrix.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2), "{stdout}{stderr}");
    assert!(
        stderr.contains("key_metrics[0]: `static-doexec.execs_per_sec` names no metric of static-doexec (its metrics: execs_per_s, insns_per_op, kernel_insns_per_op, user_insns_per_op)"),
        "{stderr}"
    );
    std::fs::write(&matrix, yaml.replace("execs_per_sec", "execs_per_s")).unwrap();
    let (_, stdout, stderr) = harness(&work, &["check", matrix.to_str().unwrap()]);
    assert!(!stderr.contains("load the matrix"), "{stdout}{stderr}");
}

/// Night 20's v is 5% slower: `--gate` fails on `d` and `d.execs_per_s`,
/// and on `d.execs_per_sec` too, saying the key matched no cell.
#[test]
fn the_gate_fails_where_a_key_metric_matched_no_cell() {
    let work = scratch("keys-gate");
    let night = synthetic_night(&work.join("runs"), 20);
    let with_key = |key: &str| {
        let path = night.join("run.json");
        let mut meta: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        meta["matrix"]["key_metrics"] = serde_json::json!([key]);
        std::fs::write(&path, serde_json::to_vec_pretty(&meta).unwrap()).unwrap();
        harness(&work, &["report", night.to_str().unwrap(), "--gate"])
    };
    for key in ["d", "d.execs_per_s"] {
        let (out, stdout, stderr) = with_key(key);
        assert_eq!(out.status.code(), Some(1), "{key}: {stdout}{stderr}");
        assert!(
            stderr.contains("gate: fails: v execs_per_s at 2 vCPUs (d)"),
            "{key}: {stderr}"
        );
    }
    let (out, stdout, stderr) = with_key("d.execs_per_sec");
    assert_eq!(out.status.code(), Some(1), "{stdout}{stderr}");
    assert!(stdout.contains("regressed"), "{stdout}");
    let gate: Vec<&str> = stderr.lines().filter(|l| l.starts_with("gate:")).collect();
    assert_eq!(
        gate,
        ["gate: fails: key metric `d.execs_per_sec` matched no cell: d reported execs_per_s in this run"]
    );
}
