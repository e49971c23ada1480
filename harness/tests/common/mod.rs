//! Helpers shared by the integration test binaries: where the checkout is,
//! fresh scratch directories, and running the harness expecting success.
#![allow(dead_code)] // each test binary uses its own subset

use std::path::{Path, PathBuf};
use std::process::Command;

/// The repository checkout.
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

/// A fresh, empty scratch directory for one test.
pub fn scratch(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Runs `c`, prints its output, asserts it succeeded, returns its stdout.
pub fn run_ok(mut c: Command) -> String {
    let out = c.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    eprintln!("{stderr}\n{stdout}");
    assert!(out.status.success(), "harness failed: {:?}\n{stderr}", out.status);
    stdout
}
