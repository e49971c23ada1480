//! Patch series (quilt convention: a directory of format-patch files and a
//! `series` file giving their order), their application state against a tree,
//! and applying or reversing them with GNU patch, strictly (no fuzz).
//! Refuses patches whose paths leave the tree.

use std::path::{Component, Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

use crate::proc::Cmd;

/// A series: ordered patch files.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Series {
    /// Directory name.
    pub name: String,
    /// Patch files in order.
    pub patches: Vec<PathBuf>,
    /// Comment lines of the `series` file that start with `experimental`.
    pub experimental: bool,
}

/// Reads `dir/<name>/series`; errors name the series file and line.
pub fn load_series(dir: &Path, name: &str) -> Result<Series> {
    let sdir = dir.join(name);
    let sfile = sdir.join("series");
    let text = std::fs::read_to_string(&sfile).with_context(|| format!("read {}", sfile.display()))?;
    let mut patches = Vec::new();
    let mut experimental = false;
    for (i, line) in text.lines().enumerate() {
        let t = line.trim();
        if let Some(c) = t.strip_prefix('#') {
            if c.trim_start().to_ascii_lowercase().starts_with("experimental") {
                experimental = true;
            }
            continue;
        }
        if t.is_empty() {
            continue;
        }
        let mut words = t.split_whitespace();
        let file = words.next().unwrap_or_default();
        if let Some(extra) = words.next() {
            if extra != "-p1" {
                bail!(
                    "{}:{}: only `-p1` may follow a patch name, found `{extra}`",
                    sfile.display(),
                    i + 1
                );
            }
        }
        if file.contains('/') || file.starts_with('.') {
            bail!(
                "{}:{}: `{file}` must be a file name in {}",
                sfile.display(),
                i + 1,
                sdir.display()
            );
        }
        let p = sdir.join(file);
        if !p.is_file() {
            bail!("{}:{}: patch file `{file}` does not exist", sfile.display(), i + 1);
        }
        patches.push(p);
    }
    if patches.is_empty() {
        bail!("{}: lists no patch", sfile.display());
    }
    Ok(Series {
        name: name.into(),
        patches,
        experimental,
    })
}

/// Files a unified diff touches (`-p1` stripped), checked to stay inside the tree.
pub fn touched_files(diff: &str) -> Result<Vec<String>> {
    if let Some(file) = binary_hunk(diff) {
        bail!(
            "{file} changes as a binary patch (git format-patch --binary): patch(1), which applies series here, \
             cannot apply it; leave the binary file out of the series"
        );
    }
    let mut out: Vec<String> = Vec::new();
    for line in diff.lines() {
        let name = if let Some(r) = line.strip_prefix("+++ ") {
            r
        } else if let Some(r) = line.strip_prefix("--- ") {
            r
        } else {
            continue;
        };
        let name = name.split('\t').next().unwrap_or("").trim();
        if name == "/dev/null" {
            continue;
        }
        let stripped = match name.split_once('/') {
            Some((_, rest)) => rest,
            None => bail!("diff path `{name}` has no leading directory to strip (-p1)"),
        };
        let p = Path::new(stripped);
        if p.is_absolute() || p.components().any(|c| !matches!(c, Component::Normal(_))) {
            bail!("diff path `{name}` leaves the tree; refusing the patch");
        }
        if !out.iter().any(|o| o == stripped) {
            out.push(stripped.to_string());
        }
    }
    if out.is_empty() {
        bail!("no file names found: not a unified diff");
    }
    Ok(out)
}

/// The file of the first `GIT binary patch` hunk in `diff`, if any.
fn binary_hunk(diff: &str) -> Option<&str> {
    let mut file = "a file";
    for line in diff.lines() {
        if let Some(r) = line.strip_prefix("diff --git ") {
            file = r.rsplit(" b/").next().unwrap_or(r);
        } else if line == "GIT binary patch" {
            return Some(file);
        }
    }
    None
}

/// Where a patch did not apply.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct Failure {
    /// The patch file.
    pub patch: PathBuf,
    /// `(file, failed hunk numbers)` pairs, from patch's output.
    pub files: Vec<(String, Vec<u32>)>,
    /// patch's own words, trimmed.
    pub output: String,
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} does not apply", self.patch.display())?;
        if self.files.is_empty() {
            write!(f, ": {}", self.output.lines().last().unwrap_or(""))?;
        }
        for (file, hunks) in &self.files {
            let h: Vec<String> = hunks.iter().map(|h| format!("#{h}")).collect();
            if h.is_empty() {
                write!(f, "; {file}: missing or unreadable")?;
            } else {
                write!(f, "; {file}: hunk {} failed", h.join(", "))?;
            }
        }
        Ok(())
    }
}

/// Parses GNU patch's output into the files and hunks that failed.
pub fn parse_failures(output: &str) -> Vec<(String, Vec<u32>)> {
    let mut out: Vec<(String, Vec<u32>)> = Vec::new();
    let mut current: Option<String> = None;
    for line in output.lines() {
        if let Some(f) = line
            .strip_prefix("patching file ")
            .or_else(|| line.strip_prefix("checking file "))
        {
            current = Some(f.trim().trim_matches(|c| c == '\'' || c == '`').to_string());
        } else if let Some(rest) = line.strip_prefix("Hunk #") {
            if rest.contains("FAILED") {
                let n: u32 = rest.split_whitespace().next().and_then(|w| w.parse().ok()).unwrap_or(0);
                let file = current.clone().unwrap_or_else(|| "?".into());
                match out.iter_mut().find(|(f, _)| *f == file) {
                    Some((_, h)) => h.push(n),
                    None => out.push((file, vec![n])),
                }
            }
        } else if line.contains("can't find file to patch") || line.contains("No such file") {
            let file = current.clone().unwrap_or_else(|| line.trim().to_string());
            if !out.iter().any(|(f, _)| *f == file) {
                out.push((file, vec![]));
            }
        } else if line.starts_with("Reversed (or previously applied) patch detected") {
            let file = current.clone().unwrap_or_else(|| "?".into());
            if !out.iter().any(|(f, _)| *f == file) {
                out.push((file, vec![]));
            }
        }
    }
    out
}

/// Runs GNU patch on `tree`: strict (`--fuzz=0`), never asking, no backup or
/// reject files. `Ok(Err(failure))` when the patch does not apply.
pub fn run_patch(
    tree: &Path,
    patch: &Path,
    reverse: bool,
    dry_run: bool,
    log: Option<&Path>,
) -> Result<Result<(), Failure>> {
    let text = std::fs::read_to_string(patch).with_context(|| format!("read {}", patch.display()))?;
    touched_files(&text).with_context(|| format!("check {}", patch.display()))?;
    let abs = std::fs::canonicalize(patch).with_context(|| format!("resolve {}", patch.display()))?;
    let base = |extra: &[&str]| {
        let mut c = Cmd::new("patch")
            .args(["-p1", "-f", "--fuzz=0", "--no-backup-if-mismatch", "-r", "-"])
            .args(extra.iter().copied())
            .arg("-d")
            .arg(tree)
            .arg("-i")
            .arg(&abs)
            .capture();
        if reverse {
            c = c.arg("-R");
        }
        c
    };
    let mut cmd = base(if dry_run { &["-s", "--dry-run"] } else { &["-s"] });
    if let Some(l) = log {
        cmd = cmd.log(l);
    }
    let f = cmd.run()?;
    if f.success() {
        return Ok(Ok(()));
    }
    // a patch Ctrl-C stopped is an interruption; one the disk or a signal stopped is the host's, not a conflict
    crate::proc::check_interrupted()?;
    if let Some(why) = super::fault::host_fault("patch", f.code, f.signal, &f.output) {
        let log = log.map_or_else(
            || format!("what patch said: {}", f.output.trim()),
            |l| l.display().to_string(),
        );
        return Err(super::fault::HostFault {
            what: format!("apply {}", patch.display()),
            why,
            log,
        }
        .into());
    }
    // -s suppressed the "checking file" lines that say where it failed: ask again
    let v = base(&["--dry-run"]).run()?;
    Ok(Err(Failure {
        patch: patch.to_path_buf(),
        files: parse_failures(&v.output),
        output: v.output.trim().to_string(),
    }))
}

/// A series' state against a tree.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum State {
    /// Applies forward: the tree does not contain it.
    Applies,
    /// Reverse-applies: the tree already contains it.
    Contained,
    /// Neither.
    Conflicts {
        /// Why the forward application failed.
        forward: Failure,
        /// Why the reverse application failed.
        reverse: Failure,
    },
}

impl std::fmt::Display for State {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            State::Applies => f.write_str("applies (not in the base)"),
            State::Contained => f.write_str("already contained (reverse-applies)"),
            State::Conflicts { forward, .. } => write!(f, "conflicts: {forward}"),
        }
    }
}

/// Tries the whole series, in order, forward and in reverse, on a scratch
/// copy of just the files it touches. The tree is not modified.
pub fn classify(tree: &Path, series: &Series, scratch: &Path) -> Result<State> {
    let forward = trial(tree, series, scratch, false)?;
    if forward.is_none() {
        return Ok(State::Applies);
    }
    let reverse = trial(tree, series, scratch, true)?;
    match (forward, reverse) {
        (_, None) => Ok(State::Contained),
        (Some(forward), Some(reverse)) => Ok(State::Conflicts { forward, reverse }),
        (None, _) => unreachable!(),
    }
}

fn trial(tree: &Path, series: &Series, scratch: &Path, reverse: bool) -> Result<Option<Failure>> {
    if scratch.exists() {
        std::fs::remove_dir_all(scratch).with_context(|| format!("clear {}", scratch.display()))?;
    }
    std::fs::create_dir_all(scratch).with_context(|| format!("create {}", scratch.display()))?;
    for p in &series.patches {
        let text = std::fs::read_to_string(p).with_context(|| format!("read {}", p.display()))?;
        for f in touched_files(&text).with_context(|| format!("check {}", p.display()))? {
            let src = tree.join(&f);
            let dst = scratch.join(&f);
            if src.is_file() && !dst.exists() {
                std::fs::create_dir_all(dst.parent().unwrap()).ok();
                std::fs::copy(&src, &dst).with_context(|| format!("copy {}", src.display()))?;
            }
        }
    }
    let order: Vec<&PathBuf> = if reverse {
        series.patches.iter().rev().collect()
    } else {
        series.patches.iter().collect()
    };
    for p in order {
        if let Err(f) = run_patch(scratch, p, reverse, false, None)? {
            return Ok(Some(f));
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn touched_files_strip_one_level_and_skip_dev_null() {
        let d = "--- a/mm/memory.c\n+++ b/mm/memory.c\n@@ -1 +1 @@\n--- /dev/null\n+++ b/include/linux/new.h\n";
        assert_eq!(touched_files(d).unwrap(), vec!["mm/memory.c", "include/linux/new.h"]);
    }

    #[test]
    fn a_binary_patch_is_named_with_its_file() {
        let d = "diff --git a/fw/blob.bin b/fw/blob.bin\nnew file mode 100644\nindex 0000000..e69de29\nGIT binary patch\nliteral 4\nLcmZ?d00001\n\n";
        let e = touched_files(d).unwrap_err().to_string();
        assert!(
            e.starts_with("fw/blob.bin changes as a binary patch (git format-patch --binary)"),
            "{e}"
        );
    }

    #[test]
    fn paths_leaving_the_tree_are_refused() {
        for bad in ["--- a/../etc/passwd\n", "+++ b//etc/passwd\n", "+++ b/mm/../../x\n"] {
            let e = touched_files(bad).unwrap_err().to_string();
            assert!(e.contains("leaves the tree"), "{bad}: {e}");
        }
    }

    #[test]
    fn failures_name_file_and_hunks() {
        let out = "checking file kernel/sys.c\nHunk #2 FAILED at 310.\nHunk #4 FAILED at 1701.\n\
                   2 out of 4 hunks FAILED\nchecking file mm/memory.c\n";
        assert_eq!(parse_failures(out), vec![("kernel/sys.c".to_string(), vec![2, 4])]);
        let f = Failure {
            patch: "p/0001.patch".into(),
            files: parse_failures(out),
            output: out.into(),
        };
        assert_eq!(
            f.to_string(),
            "p/0001.patch does not apply; kernel/sys.c: hunk #2, #4 failed"
        );
    }

    fn write(p: &Path, s: &str) {
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, s).unwrap();
    }

    #[test]
    fn classify_applies_contained_conflicts() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().to_path_buf();
        let tree = root.join("tree");
        write(&tree.join("f.c"), "one\ntwo\nthree\n");
        let series_dir = root.join("patches");
        let patch =
            "From x\nSubject: [PATCH] t\n\n---\n--- a/f.c\n+++ b/f.c\n@@ -1,3 +1,3 @@\n one\n-two\n+TWO\n three\n";
        write(&series_dir.join("s/0001-t.patch"), patch);
        write(&series_dir.join("s/series"), "# a comment\n0001-t.patch\n");
        let s = load_series(&series_dir, "s").unwrap();
        assert_eq!(classify(&tree, &s, &root.join("scratch")).unwrap(), State::Applies);
        write(&tree.join("f.c"), "one\nTWO\nthree\n");
        assert_eq!(classify(&tree, &s, &root.join("scratch")).unwrap(), State::Contained);
        write(&tree.join("f.c"), "one\nzwei\nthree\n");
        match classify(&tree, &s, &root.join("scratch")).unwrap() {
            State::Conflicts { forward, .. } => assert_eq!(forward.files, vec![("f.c".to_string(), vec![1])]),
            other => panic!("{other:?}"),
        }
        // the tree itself was never touched by classification
        assert_eq!(std::fs::read_to_string(tree.join("f.c")).unwrap(), "one\nzwei\nthree\n");
    }

    #[test]
    fn series_file_errors_name_file_and_line() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().to_path_buf();
        write(&root.join("s/series"), "0001-a.patch\n0002-missing.patch\n");
        write(&root.join("s/0001-a.patch"), "x");
        let e = load_series(&root, "s").unwrap_err().to_string();
        assert!(
            e.ends_with("s/series:2: patch file `0002-missing.patch` does not exist"),
            "{e}"
        );
    }
}
