//! Issue 14 end to end: a small matrix (two variants, 2 vCPUs) as a Slurm
//! job chain on a single-node cluster on this machine — build, a two-task
//! shard array, report — against one plain `run` of the same plan. Uses the
//! e2e kernel cache (`target/e2e-work`), so run it after the e2e tests or
//! with their kernels copied in.

use crate::common::{repo, run_ok, scratch};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

const SLURM_DIR: &str = "/tmp/harness-slurm-test";

fn slurm_conf() -> PathBuf {
    Path::new(SLURM_DIR).join("slurm.conf")
}

/// The local cluster, stopped when the test ends however it ends.
struct Cluster;

impl Cluster {
    fn start() -> Cluster {
        let st = Command::new(repo().join("harness/scripts/slurm-local.sh"))
            .arg("start")
            .env("HARNESS_SLURM_DIR", SLURM_DIR)
            .status()
            .unwrap();
        assert!(st.success(), "slurm-local.sh start failed");
        Cluster
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = Command::new(repo().join("harness/scripts/slurm-local.sh"))
            .arg("stop")
            .env("HARNESS_SLURM_DIR", SLURM_DIR)
            .status();
    }
}

fn harness(runs: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_harness"));
    c.env("HARNESS_WORK_DIR", crate::common::e2e_work())
        .env("HARNESS_RUNS_DIR", runs)
        .env("HARNESS_IMAGES_DIR", repo().join("images"))
        .env("SLURM_CONF", slurm_conf())
        .stdin(Stdio::null());
    c
}

/// Two variants, 2 vCPUs, 2 boots each (two blocks: one per shard).
fn matrix(dir: &Path) -> PathBuf {
    let m = dir.join("sharded.yaml");
    std::fs::write(
        &m,
        format!(
            "kernel:\n  source: /usr/src/linux-source-6.12.tar.xz\n  base_config: tinyconfig\n  \
             fragments: [{r}/kconfigs/base.config, {r}/kconfigs/bench.config]\nseries_dir: {r}/patches\n\
             variants:\n  - name: base\n  - name: no-pcpcntr-grouping\n    revert: [pcpcntr-grouping]\n\
             guest: {{memory_mib: 1024, accel: tcg}}\nvcpus: [2]\n\
             benchmarks:\n  - {{name: static-doexec, kind: doexec, link: static, duration_s: 1, warmup_s: 1}}\n\
             sampling: {{boots: 2, repetitions: 1, warmup_repetitions: 1, seed: 14}}\n",
            r = repo().display()
        ),
    )
    .unwrap();
    m
}

/// Per cell: benchmark, metric, vCPUs, variant, boots, repetitions per boot,
/// warm-ups, boots ended, boots failed.
fn cells(report: &Value) -> Vec<String> {
    let mut out = Vec::new();
    for row in report["rows"].as_array().unwrap() {
        for c in row["cells"].as_array().unwrap() {
            out.push(format!(
                "{} {} {} {} n={} reps={} warmup={} ended={} failed={} failure={}",
                row["benchmark"],
                row["metric"],
                row["vcpus"],
                c["variant"],
                c["n"],
                c["reps_per_boot"],
                c["n_warmup"],
                c["boots_ended"],
                c["boots_failed"],
                c["failure"]
            ));
        }
    }
    out
}

fn wait_for_jobs(ids: &[&str], limit: Duration) {
    let t = Instant::now();
    loop {
        let out = Command::new("squeue")
            .args(["-h", "-o", "%i %T %r", "-j", &ids.join(",")])
            .env("SLURM_CONF", slurm_conf())
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        if text.trim().is_empty() {
            return;
        }
        assert!(!text.contains("DependencyNeverSatisfied"), "{text}");
        assert!(t.elapsed() < limit, "jobs still queued after {limit:?}:\n{text}");
        std::thread::sleep(Duration::from_secs(5));
    }
}

#[test]
#[ignore = "installs and starts a Slurm cluster on this machine (root, apt, ~5 min of TCG boots); run with --ignored"]
fn a_sharded_matrix_under_slurm_reports_what_one_run_would() {
    let t = Instant::now();
    let dir = scratch("slurm");
    let m = matrix(&dir);
    let _cluster = Cluster::start();
    let mut c = harness(&dir.join("runs"));
    c.arg("slurm")
        .arg(&m)
        .args(["--shards", "2", "--partition", "harness", "--submit"]);
    let out = run_ok(c);
    // "submitted: build 2, shards 3 (array 0-1), report 4"
    let line = out.lines().find(|l| l.starts_with("submitted:")).expect("job ids");
    let words: Vec<&str> = line.split([' ', ',']).filter(|w| !w.is_empty()).collect();
    let id = |what: &str| words[words.iter().position(|w| *w == what).unwrap() + 1];
    let ids = [id("build"), id("shards"), id("report")];
    let run_dir = PathBuf::from(
        out.lines()
            .find_map(|l| l.strip_prefix("run directory: "))
            .expect("run directory"),
    );
    let script = std::fs::read_to_string(run_dir.join("slurm/shards.sbatch")).unwrap();
    assert!(
        script.contains("#SBATCH --array=0-1")
            && script.contains("#SBATCH --cpus-per-task=2")
            && script.contains("#SBATCH --mem=2056M"),
        "{script}"
    );
    wait_for_jobs(&ids, Duration::from_secs(40 * 60));
    eprintln!("slurm chain done after {:?}", t.elapsed());
    for f in std::fs::read_dir(run_dir.join("slurm")).unwrap() {
        let p = f.unwrap().path();
        if p.extension().is_some_and(|e| e == "out") {
            eprintln!("--- {}\n{}", p.display(), std::fs::read_to_string(&p).unwrap());
        }
    }
    let sharded: Value =
        serde_json::from_slice(&std::fs::read(run_dir.join("report.json")).expect("the report job wrote report.json"))
            .unwrap();
    let states: Vec<(&str, &str)> = sharded["shards"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["shard"].as_str().unwrap(), s["state"].as_str().unwrap()))
        .collect();
    assert_eq!(states, vec![("0/2", "done"), ("1/2", "done")]);
    assert!(sharded["complete"].as_bool().unwrap());
    for k in 0..2 {
        assert!(
            run_dir.join(format!("shards/{k}-of-2/samples.jsonl")).is_file(),
            "shard {k} wrote no samples"
        );
    }
    let builds = std::fs::read_to_string(run_dir.join("events.jsonl")).unwrap();
    assert!(
        !std::fs::read_to_string(run_dir.join("shards/0-of-2/events.jsonl"))
            .unwrap()
            .contains("\"event\":\"build\""),
        "a shard built"
    );
    assert_eq!(builds.matches("\"event\":\"build\"").count(), 2, "{builds}");

    // one plain run of the same plan
    let runs = dir.join("single");
    let mut c = harness(&runs);
    c.arg("run").arg(&m).arg("--quiet");
    run_ok(c);
    let single_dir = std::fs::read_dir(&runs).unwrap().next().unwrap().unwrap().path();
    let single: Value = super::e2e::report_of(&single_dir);
    assert!(single["complete"].as_bool().unwrap());
    let (a, b) = (cells(&sharded), cells(&single));
    assert_eq!(a, b, "the sharded report's cells differ from one run's");
    assert_eq!(a.len(), 2);
    assert!(
        a.iter()
            .all(|c| c.contains("n=2 reps=[1,1] warmup=2 ended=2 failed=0 failure=null")),
        "{a:?}"
    );
    eprintln!("whole test took {:?}", t.elapsed());
}
