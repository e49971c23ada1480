//! End-to-end test of `harness nightly` over a handful of nights: real
//! kernels built from commits of a git history made from the 6.12 tree,
//! real icount guests, the history database, the change point and the
//! bisection the nightly starts by itself.

use crate::common::{git, repo, scratch};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// The history: the 6.12 tree as shipped (`good`), notes n1–n3, then x1 (a
/// note), `slow` (the slow-exec fixture: ~0.75% fewer execs per 10^9
/// instructions), x2 (a note), then notes n5–n7. Made once and reused.
fn history() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("nightly-history");
    if dir.join(".git/refs/tags/n7").exists() {
        return dir;
    }
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let tar = Command::new("tar")
        .args(["-xf", "/usr/src/linux-source-6.12.tar.xz", "--strip-components=1", "-C"])
        .arg(&dir)
        .status()
        .unwrap();
    assert!(tar.success());
    git(&dir, &["init", "-q"]);
    // Debian's tarball ignores its own top level (`/*` in .gitignore): add by force
    git(&dir, &["add", "-A", "-f"]);
    git(&dir, &["commit", "-qm", "linux 6.12 as shipped"]);
    git(&dir, &["tag", "good"]);
    let note = |tag: &str| {
        std::fs::write(dir.join("Documentation/harness-note.txt"), format!("{tag}\n")).unwrap();
        git(&dir, &["add", "-f", "Documentation/harness-note.txt"]);
        git(&dir, &["commit", "-qm", &format!("docs: harness note {tag}")]);
        git(&dir, &["tag", tag]);
    };
    for t in ["n1", "n2", "n3", "x1"] {
        note(t);
    }
    let p = repo().join("harness/tests/fixtures/series/slow-exec/0001-exec-a-fixed-cost-per-exec.patch");
    assert!(Command::new("patch")
        .args(["-p1", "-s", "-d"])
        .arg(&dir)
        .arg("-i")
        .arg(&p)
        .status()
        .unwrap()
        .success());
    git(&dir, &["commit", "-qam", "exec: a fixed cost per exec (test fixture)"]);
    git(&dir, &["tag", "slow"]);
    for t in ["x2", "n5", "n6", "n7"] {
        note(t);
    }
    dir
}

/// A matrix of base alone, static doexec under icount at 2 vCPUs, 4 boots a night.
fn matrix(dir: &Path) -> PathBuf {
    let m = dir.join("matrix.yaml");
    let yaml = format!(
        "kernel:\n  source: /usr/src/linux-source-6.12.tar.xz\n  base_config: tinyconfig\n  fragments: [{r}/kconfigs/base.config, {r}/kconfigs/bench.config]\n\
         variants:\n  - name: base\nguest: {{memory_mib: 1024, clock: icount}}\nvcpus: [2]\n\
         benchmarks:\n  - {{name: static-doexec, kind: doexec, duration_s: 1, warmup_s: 1, timeout_s: 60}}\n\
         sampling: {{boots: 4, repetitions: 1, warmup_repetitions: 0}}\nstatistics: {{floor: 0.003}}\nkey_metrics: [static-doexec]\n",
        r = repo().display()
    );
    std::fs::write(&m, yaml).unwrap();
    m
}

/// One nightly on the tip of the branch `nightly`.
fn nightly(dir: &Path, tree: &Path, m: &Path) -> Output {
    let out = Command::new(env!("CARGO_BIN_EXE_harness"))
        .current_dir(dir)
        .env("HARNESS_WORK_DIR", crate::common::e2e_work())
        .env("HARNESS_RUNS_DIR", dir.join("runs"))
        .env("HARNESS_HISTORY_DB", dir.join("history.sqlite"))
        .env("HARNESS_IMAGES_DIR", repo().join("images"))
        .env("HARNESS_NO_PROGRESS", "1")
        .stdin(Stdio::null())
        .arg("nightly")
        .arg(m)
        .arg("--git")
        .arg(tree)
        .args([
            "--branch",
            "nightly",
            "--min-change",
            "0.005",
            "--change-alpha",
            "0.05",
            "--json",
        ])
        .output()
        .unwrap();
    eprintln!("{}", String::from_utf8_lossy(&out.stderr));
    // 0: nothing new for the worse; 1: a regression found or a culprit told
    assert!(
        matches!(out.status.code(), Some(0 | 1)),
        "nightly failed: {:?}",
        out.status
    );
    out
}

/// Eight nights — good, n1, n2, n3, then x2 (two commits after n3, the
/// slow-exec commit between them), n5, n6, n7 — each measured by the
/// nightly on the tip of a branch moved to it: the change point between n3
/// and x2 is found, the bisection it starts names the slow-exec commit, the
/// report says so; a ninth nightly on the same tip measures nothing and
/// starts no second bisection. By hand (eight night builds and the
/// bisection's boots: 968 s on 2 idle cores with the nights' kernels
/// cached, 2026-12-01; docs/nightly.md):
/// `cargo test --test it qemu::nightly::nightly_finds_and_bisects -- --ignored --nocapture`.
#[test]
#[ignore = "16 minutes with the kernels cached, over half an hour cold: eight night builds, ~40 icount boots, a bisection"]
fn nightly_finds_and_bisects_the_slow_exec_commit() {
    let _g = crate::common::serial();
    let tree = history();
    let dir = scratch("nightly");
    let m = matrix(&dir);
    let slow = git(&tree, &["rev-parse", "slow"]);
    let t = std::time::Instant::now();
    let mut ended: Vec<(serde_json::Value, String)> = vec![];
    for night in ["good", "n1", "n2", "n3", "x2", "n5", "n6", "n7"] {
        git(&tree, &["branch", "-f", "nightly", night]);
        let n = std::time::Instant::now();
        let run = nightly(&dir, &tree, &m);
        let out: serde_json::Value = serde_json::from_slice(&run.stdout).unwrap();
        let news = out["outcome"]["changes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| !c["started"].is_null());
        assert_eq!(run.status.code(), Some(i32::from(news)), "exit 1 only with news: {out}");
        eprintln!(
            "night {night}: {:.0} s (total {:.0} s)",
            n.elapsed().as_secs_f64(),
            t.elapsed().as_secs_f64()
        );
        if night == "x2" || night == "n5" {
            assert!(
                out["outcome"]["bisections"].as_array().unwrap().is_empty(),
                "no change point before 4 + 3 nights: {out}"
            );
        }
        let report = std::fs::read_to_string(out["report"].as_str().unwrap()).unwrap();
        for b in out["outcome"]["bisections"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|b| b["status"] == "done")
        {
            ended.push((b.clone(), report.clone()));
        }
    }
    // one bisection, told once, naming the slow-exec commit
    assert_eq!(ended.len(), 1, "{ended:?}");
    let (b, report) = &ended[0];
    assert_eq!(b["result"]["culprits"][0]["commit"], slow.as_str(), "{b}");
    let named = report
        .lines()
        .find(|l| l.trim_start().starts_with("first bad commit: "))
        .unwrap_or_default();
    assert!(
        named.contains(&slow[..7]) && named.contains("exec: a fixed cost per exec"),
        "{report}"
    );
    assert!(
        report.contains("static-doexec") && report.contains("95% interval"),
        "{report}"
    );
    eprintln!(
        "{report}\neight nights and the bisection in {:.0} s",
        t.elapsed().as_secs_f64()
    );
    // a ninth nightly on the same tip: measured already, no second bisection, nothing told again
    let n = std::time::Instant::now();
    let run = nightly(&dir, &tree, &m);
    assert_eq!(run.status.code(), Some(0), "nothing new on the ninth night");
    let again: serde_json::Value = serde_json::from_slice(&run.stdout).unwrap();
    assert_eq!(again["outcome"]["already"], true, "{again}");
    assert!(again["outcome"]["bisections"].as_array().unwrap().is_empty(), "{again}");
    let actions: Vec<&str> = again["outcome"]["changes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["action"].as_str())
        .collect();
    assert!(actions.iter().all(|a| !a.ends_with("started")), "{actions:?}");
    eprintln!("the ninth nightly in {:.0} s", n.elapsed().as_secs_f64());
}
