//! Names and paths as the matrix gives them: the names of variants,
//! benchmarks, metrics and profiles, and files relative to the matrix.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Lowercase letters, digits, '.', '_' or '-', not starting with '.' or
/// '-', at most 64 characters.
pub(super) fn valid_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 64
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "._-".contains(c))
        && !s.starts_with(['.', '-'])
}

/// Paths in the matrix are relative to the matrix file's directory.
pub(super) struct Rel(PathBuf);

impl Rel {
    pub(super) fn of(path: &Path) -> Rel {
        let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
        Rel(if dir.as_os_str().is_empty() {
            PathBuf::from(".")
        } else {
            dir
        })
    }
    pub(super) fn path(&self, s: &str) -> PathBuf {
        let q = PathBuf::from(s);
        if q.is_absolute() {
            q
        } else {
            self.0.join(q)
        }
    }
}

/// Files named relative to the matrix; each missing one is a problem at `at[i]`.
pub(super) fn files(names: &[String], at: &str, rel: &Rel, p: &mut Vec<String>) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for (i, f) in names.iter().enumerate() {
        let fp = rel.path(f);
        if !fp.is_file() {
            p.push(format!("{at}[{i}]: no file `{}`", fp.display()));
        }
        out.push(fp);
    }
    out
}

/// A name that is valid and not yet in `seen`, or a problem at `at.name`.
pub(super) fn check_name(name: &str, at: &str, seen: &mut BTreeSet<String>, p: &mut Vec<String>) {
    if !valid_name(name) {
        p.push(format!(
            "{at}.name: `{name}` must be lowercase letters, digits, '.', '_' or '-'"
        ));
    }
    if !seen.insert(name.to_string()) {
        p.push(format!("{at}.name: `{name}` is defined twice"));
    }
}
