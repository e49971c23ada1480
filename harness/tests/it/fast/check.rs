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

/// Issue 47: a profile no run selected yet is validated by `check` too,
/// each problem an error naming the profile, so the nightly that first
/// asks for it does not find it broken; the shipped matrix's profiles all
/// validate.
#[test]
fn check_validates_every_profile_not_only_the_one_asked() {
    let dir = scratch("check-profiles");
    // a two-file kernel source: check copies it instead of unpacking 1.8 GB
    let src = dir.join("src");
    std::fs::create_dir_all(&src).unwrap();
    std::fs::write(src.join("Makefile"), "VERSION = 6\nPATCHLEVEL = 12\nSUBLEVEL = 0\n").unwrap();
    let matrix = dir.join("matrix.yaml");
    std::fs::write(
        &matrix,
        format!(
            "kernel: {{source: {}}}\nvariants: [{{name: base}}]\nvcpus: [2]\n\
             benchmarks: [{{name: s, kind: doexec}}]\nprofiles:\n  good: {{vcpus: [4]}}\n  broken: {{benchmarks: [nope]}}\n",
            src.display()
        ),
    )
    .unwrap();
    let check = |m: &std::path::Path, profile: Option<&str>| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_harness"));
        c.arg("--work-dir")
            .arg(dir.join("work"))
            .arg("--json")
            .arg("check")
            .arg(m);
        if let Some(p) = profile {
            c.args(["--profile", p]);
        }
        let out = c.output().unwrap();
        let items: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        items
            .as_array()
            .unwrap()
            .iter()
            .filter(|i| i["what"] == "profile" && i["level"] == "error")
            .map(|i| i["message"].as_str().unwrap().to_string())
            .collect::<Vec<_>>()
    };
    let want = "broken (--profile broken would refuse it): profiles.broken.benchmarks[0]: no benchmark `nope`";
    for profile in [None, Some("good")] {
        let errors = check(&matrix, profile);
        assert!(errors.iter().any(|e| e == want), "{profile:?}: {errors:?}");
    }
    let shipped = harness::config::other_profiles_problems(&repo().join("matrix.yaml"), None).unwrap();
    assert!(shipped.is_empty(), "{shipped:?}");
}
