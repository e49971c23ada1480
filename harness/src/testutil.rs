//! Helpers shared by the unit tests: scratch directories and files.

use std::path::{Path, PathBuf};

/// Writes `s` to `p`, making its parent directories.
pub fn write(p: &Path, s: &str) {
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, s).unwrap();
}

/// A fresh, empty directory under the system temp dir, unique per test name
/// and process.
pub fn scratch(name: &str) -> PathBuf {
    let root = std::env::temp_dir().join(format!("harness-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(&root).unwrap();
    root
}
