//! Issue 30: `harness report` builds and prints the report before it
//! writes the report files, writes each whole (a temporary file renamed
//! into place), and where it cannot write them still prints, with a warning.

use std::process::Command;

use super::history::{scratch, synthetic_night};

#[test]
fn report_prints_where_it_cannot_write_and_writes_each_file_whole() {
    let work = scratch("report-unwritable");
    let night = synthetic_night(&work.join("runs"), 20);
    // report.html cannot be replaced (a directory is in its place), as in a run directory one cannot write
    std::fs::create_dir_all(night.join("report.html/taken")).unwrap();
    let _ = std::fs::remove_file(night.join("report.json"));
    let out = Command::new(env!("CARGO_BIN_EXE_harness"))
        .env("HARNESS_WORK_DIR", &work)
        .env("HARNESS_HISTORY_DB", work.join("history.sqlite"))
        .args(["report", night.to_str().unwrap()])
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{stdout}{stderr}");
    assert!(
        stdout.contains("execs_per_s") && stdout.contains("regressed"),
        "the table is printed: {stdout}"
    );
    assert!(
        stderr.contains("warning: the report files were not written: write ") && stderr.contains("report.html"),
        "{stderr}"
    );
    assert!(!stdout.contains("report files:"), "{stdout}");
    // the files before it were written whole, and no temporary file is left
    let json: serde_json::Value = serde_json::from_slice(&std::fs::read(night.join("report.json")).unwrap()).unwrap();
    assert_eq!(json["run_id"], "night20");
    let left: Vec<String> = std::fs::read_dir(&night)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".tmp-"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
    // where it can write, it says where the files are
    std::fs::remove_dir_all(night.join("report.html")).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_harness"))
        .env("HARNESS_WORK_DIR", &work)
        .env("HARNESS_HISTORY_DB", work.join("history.sqlite"))
        .args(["report", night.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("report files: "));
    assert!(std::fs::read_to_string(night.join("report.html"))
        .unwrap()
        .contains("<html"));
}

/// Issue 30: `sampling.boots: 4294967295` is a validation error, named by
/// its YAML path, before any run directory exists (it made the run
/// directory, then aborted allocating the plan).
#[test]
fn too_many_boots_is_refused_before_a_run_directory_exists() {
    let work = scratch("too-many-boots");
    let matrix = work.join("matrix.yaml");
    std::fs::write(
        &matrix,
        "variants:\n  - name: base\nvcpus: [2]\nbenchmarks:\n  - {name: d, kind: doexec}\nsampling: {boots: 4294967295}\n",
    )
    .unwrap();
    let runs = work.join("runs");
    let out = Command::new(env!("CARGO_BIN_EXE_harness"))
        .env("HARNESS_WORK_DIR", work.join("work"))
        .env("HARNESS_RUNS_DIR", &runs)
        .args(["run", matrix.to_str().unwrap()])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("sampling.boots: 4294967295 is more than 10000"),
        "{stderr}"
    );
    let made = std::fs::read_dir(&runs).map(|d| d.count()).unwrap_or(0);
    assert_eq!(made, 0, "a run directory was made");
}
