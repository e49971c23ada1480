//! `harness check` where what runs here cannot be known.

use std::process::Command;

use crate::common::{repo, scratch};

/// Without QEMU the KVM question has no answer: `check` says first that it
/// checks the profile as written and why, instead of passing over it, and
/// the QEMU item still names what is missing.
#[test]
fn check_says_when_it_cannot_tell_what_runs_here() {
    let dir = scratch("check-no-qemu");
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_harness"))
        .args(["--work-dir"])
        .arg(dir.join("work"))
        .arg("check")
        .arg(repo().join("matrix.yaml"))
        .args(["--profile", "quick"])
        .env("PATH", &bin)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let first = stdout.lines().next().unwrap_or_default();
    assert!(
        first.starts_with(
            "warn  profile here: checked as written: whether KVM is usable here is not known (find qemu-system-x86_64"
        ),
        "{stdout}"
    );
    assert!(
        stdout.lines().any(|l| l.contains("qemu") && l.starts_with("ERROR")),
        "{stdout}"
    );
}
