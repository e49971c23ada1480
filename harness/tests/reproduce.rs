//! End-to-end tests of the maintainer's two commands, `harness try` and
//! `harness bisect`, with real kernels and real QEMU guests, run the way a
//! maintainer runs them: from a directory outside the checkout, without
//! `--images-dir` (the benchmarks and the default matrix come from the
//! binary). They share `target/e2e-work` with `e2e.rs`, so kernels built
//! there are cache hits here.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::Mutex;

static SERIAL: Mutex<()> = Mutex::new(());

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

fn scratch(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// The harness binary, run in `cwd` (outside the checkout) with no images directory.
fn harness(cwd: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_harness"));
    c.current_dir(cwd)
        .env("HARNESS_WORK_DIR", repo().join("target/e2e-work"))
        .env("HARNESS_RUNS_DIR", cwd.join("runs"))
        .env_remove("HARNESS_IMAGES_DIR")
        .env("HARNESS_NO_PROGRESS", "1")
        .stdin(Stdio::null());
    c
}

fn show(out: &Output) -> (String, String) {
    let (o, e) = (String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned());
    eprintln!("{e}\n{o}");
    (o, e)
}

/// The slow-exec fixture's patch: ~1% more instructions per exec.
fn slow_exec_patch() -> String {
    std::fs::read_to_string(repo().join("harness/tests/fixtures/series/slow-exec/0001-exec-a-fixed-cost-per-exec.patch")).unwrap()
}

/// `harness try` on a one-patch mbox (as `git format-patch --stdout` writes
/// it) that slows exec by ~1%, with the built-in matrix's `exact` profile
/// (instruction-counting clock, 2 vCPUs, 5 boots per arm, floor 0.5%):
/// regressed, and `--gate` exits 1.
#[test]
fn try_calls_a_one_patch_mbox_regressed() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = scratch("try-mbox");
    std::fs::write(dir.join("slow.mbox"), format!("From 0123456789abcdef0123456789abcdef01234567 Mon Sep 17 00:00:00 2001\n{}", slow_exec_patch())).unwrap();
    let out = harness(&dir).args(["try", "slow.mbox", "--profile", "exact", "--gate"]).output().unwrap();
    let (stdout, stderr) = show(&out);
    assert_eq!(out.status.code(), Some(1), "--gate must fail on the regression\n{stderr}");
    assert!(stderr.contains("gate: fails: ") && stderr.contains("static-doexec"), "{stderr}");
    assert!(stdout.contains("regressed") && stdout.contains("series") && stdout.contains("clock: tcg-icount"), "{stdout}");
    let runs: Vec<PathBuf> = std::fs::read_dir(dir.join("runs")).unwrap().map(|e| e.unwrap().path()).collect();
    assert_eq!(runs.len(), 1);
    let report: serde_json::Value = serde_json::from_slice(&std::fs::read(runs[0].join("report.json")).unwrap()).unwrap();
    let cell = report["rows"][0]["cells"].as_array().unwrap().iter().find(|c| c["variant"] == "series").unwrap().clone();
    assert_eq!(cell["decision"]["verdict"], "regressed", "{stdout}");
}

/// A series that does not apply is refused before anything is built, naming
/// the patch and the hunk.
#[test]
fn try_names_the_patch_and_hunk_that_do_not_apply() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = scratch("try-conflict");
    std::fs::create_dir_all(dir.join("series")).unwrap();
    let p = slow_exec_patch().replace(" static int bprm_execve(struct linux_binprm *bprm)\n", " static int bprm_execve(struct linux_binprm *bprm, int x)\n");
    std::fs::write(dir.join("series/0001-exec-does-not-apply.patch"), p).unwrap();
    let t = std::time::Instant::now();
    let out = harness(&dir).args(["try", "series", "--profile", "exact"]).output().unwrap();
    let (_, stderr) = show(&out);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("try: the series does not apply to /usr/src/linux-source-6.12.tar.xz: "), "{stderr}");
    assert!(stderr.contains("0001-exec-does-not-apply.patch does not apply; fs/exec.c: hunk #1 failed"), "{stderr}");
    assert!(!dir.join("runs").exists(), "nothing was run");
    eprintln!("refused in {:.1} s", t.elapsed().as_secs_f64());
}
