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

/// A patch file's text as `patch(1)` and `git apply` take it: a patch
/// saved from a mail has its quoted-printable or base64 body decoded and
/// its ISO-8859-1 made UTF-8 ([`super::mail::as_patch`]); any other file
/// is kept byte for byte. Errors name the file.
pub fn read(p: &Path) -> Result<Vec<u8>> {
    let raw = std::fs::read(p).with_context(|| format!("read {}", p.display()))?;
    super::mail::as_patch(&raw).map_err(|e| anyhow::anyhow!("read {}: {e}", p.display()))
}

/// The files patch `p` touches, its bytes decoded as [`read`] does.
pub fn files_of(p: &Path) -> Result<Vec<String>> {
    files_in(&read(p)?, p)
}

/// The files the patch bytes `data`, read from `p`, touch.
pub fn files_in(data: &[u8], p: &Path) -> Result<Vec<String>> {
    touched_files(&String::from_utf8_lossy(data)).with_context(|| format!("check {}", p.display()))
}

/// Files a unified diff touches (`-p1` stripped), checked to stay inside
/// the tree; a file a `GIT binary patch` changes is named by its
/// `diff --git` line, which is all such a section has.
pub fn touched_files(diff: &str) -> Result<Vec<String>> {
    let mut out: Vec<String> = Vec::new();
    let mut git_header: Option<&str> = None;
    for line in diff.lines() {
        let held: String;
        let name = if let Some(r) = line.strip_prefix("diff --git ") {
            git_header = r.rsplit_once(" b/").map(|(_, b)| b);
            continue;
        } else if line == "GIT binary patch" {
            let Some(b) = git_header else {
                bail!("a `GIT binary patch` without its `diff --git` line: not a git diff");
            };
            // the b/ name with its prefix back on, for the checks below
            held = format!("b/{b}");
            &held
        } else if let Some(r) = line.strip_prefix("+++ ") {
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

/// Whether `diff` holds a `GIT binary patch` section, which only `git
/// apply` applies.
fn has_binary(diff: &str) -> bool {
    diff.lines().any(|l| l == "GIT binary patch")
}

pub use crate::vocab::PatchFailure;

impl std::fmt::Display for PatchFailure {
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

/// Applies `patch` (as [`read`] gives it) to `tree` with GNU patch,
/// strict (`--fuzz=0`), never asking, no backup or reject files; a patch
/// with a `GIT binary patch` section goes to `git apply`, which alone
/// applies those. `Ok(Err(failure))` when the patch does not apply.
pub fn run_patch(
    tree: &Path,
    patch: &Path,
    reverse: bool,
    dry_run: bool,
    log: Option<&Path>,
) -> Result<Result<(), PatchFailure>> {
    let bytes = read(patch)?;
    files_in(&bytes, patch)?;
    let text = String::from_utf8_lossy(&bytes);
    let tool = Tool::for_diff(&text);
    let mut cmd = tool.cmd(
        tree,
        reverse,
        if dry_run { Check::DryRun } else { Check::Apply },
        &bytes,
    )?;
    if let Some(l) = log {
        cmd = cmd.log(l);
    }
    let f = cmd.run()?;
    if f.success() {
        return Ok(Ok(()));
    }
    // a patch Ctrl-C stopped is an interruption; one the disk or a signal stopped is the host's, not a conflict
    crate::proc::check_interrupted()?;
    if let Some(why) = super::fault::host_fault(tool.name(), f.code, f.signal, &f.output) {
        let log = log.map_or_else(
            || format!("what {} said: {}", tool.name(), f.output.trim()),
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
    let v = tool.cmd(tree, reverse, Check::Explain, &bytes)?.run()?;
    Ok(Err(PatchFailure {
        patch: patch.to_path_buf(),
        files: match tool {
            Tool::Patch => parse_failures(&v.output),
            Tool::GitApply => Vec::new(),
        },
        output: v.output.trim().to_string(),
    }))
}

/// What applies a patch.
#[derive(Clone, Copy)]
enum Tool {
    /// GNU patch: every text patch.
    Patch,
    /// `git apply`: a patch with binary sections.
    GitApply,
}

/// How far a run of the tool goes.
#[derive(Clone, Copy, PartialEq)]
enum Check {
    /// Apply it, quietly.
    Apply,
    /// Only check that it would apply, quietly.
    DryRun,
    /// Check again, saying where it fails.
    Explain,
}

impl Tool {
    fn for_diff(text: &str) -> Tool {
        if has_binary(text) {
            Tool::GitApply
        } else {
            Tool::Patch
        }
    }

    fn name(self) -> &'static str {
        match self {
            Tool::Patch => "patch",
            Tool::GitApply => "git apply",
        }
    }

    /// The command, the patch on its standard input.
    fn cmd(self, tree: &Path, reverse: bool, check: Check, bytes: &[u8]) -> Result<Cmd> {
        let mut c = match self {
            Tool::Patch => {
                let c = Cmd::new("patch")
                    .args(["-p1", "-f", "--fuzz=0", "--no-backup-if-mismatch", "-r", "-"])
                    .arg("-d")
                    .arg(tree);
                match check {
                    Check::Apply => c.arg("-s"),
                    Check::DryRun => c.args(["-s", "--dry-run"]),
                    Check::Explain => c.arg("--dry-run"),
                }
            }
            Tool::GitApply => {
                let tree = std::fs::canonicalize(tree).with_context(|| format!("resolve {}", tree.display()))?;
                // a tree inside another repository (a work directory in a checkout) stays its own root
                let ceiling = tree.parent().unwrap_or(&tree).to_path_buf();
                let c = Cmd::new("git")
                    .args(["apply", "-p1", "--whitespace=nowarn"])
                    .dir(&tree)
                    .env("GIT_CEILING_DIRECTORIES", ceiling);
                match check {
                    Check::Apply => c,
                    Check::DryRun | Check::Explain => c.arg("--check"),
                }
            }
        };
        if reverse {
            c = c.arg("-R");
        }
        Ok(c.stdin_bytes(bytes.to_vec()).capture())
    }
}

pub use crate::vocab::SeriesState;

impl std::fmt::Display for SeriesState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SeriesState::Applies => f.write_str("applies (not in the base)"),
            SeriesState::Contained => f.write_str("already contained (reverse-applies)"),
            SeriesState::Conflicts { forward, .. } => write!(f, "conflicts: {forward}"),
        }
    }
}

/// Tries the whole series, in order, forward and in reverse, on a scratch
/// copy of just the files it touches. The tree is not modified.
pub fn classify(tree: &Path, series: &Series, scratch: &Path) -> Result<SeriesState> {
    let forward = trial(tree, series, scratch, false)?;
    if forward.is_none() {
        return Ok(SeriesState::Applies);
    }
    let reverse = trial(tree, series, scratch, true)?;
    match (forward, reverse) {
        (_, None) => Ok(SeriesState::Contained),
        (Some(forward), Some(reverse)) => Ok(SeriesState::Conflicts { forward, reverse }),
        (None, _) => unreachable!(),
    }
}

fn trial(tree: &Path, series: &Series, scratch: &Path, reverse: bool) -> Result<Option<PatchFailure>> {
    if scratch.exists() {
        std::fs::remove_dir_all(scratch).with_context(|| format!("clear {}", scratch.display()))?;
    }
    std::fs::create_dir_all(scratch).with_context(|| format!("create {}", scratch.display()))?;
    for p in &series.patches {
        for f in files_of(p)? {
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
    fn a_binary_section_is_named_by_its_diff_git_line() {
        let d = "diff --git a/fw/blob.bin b/fw/blob.bin\nnew file mode 100644\nindex 0000000..e69de29\nGIT binary patch\nliteral 4\nLcmZ?d00001\n\n\
                 diff --git a/f.c b/f.c\n--- a/f.c\n+++ b/f.c\n@@ -1 +1 @@\n";
        assert_eq!(touched_files(d).unwrap(), vec!["fw/blob.bin", "f.c"]);
        let e = touched_files("diff --git a/x b/../x\nGIT binary patch\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("leaves the tree"), "{e}");
    }

    fn git(dir: &Path, args: &[&str]) -> String {
        let f = Cmd::new("git")
            .args(["-c", "user.name=t", "-c", "user.email=t@t"])
            .args(args.iter().copied())
            .dir(dir)
            .capture()
            .run_ok()
            .unwrap();
        f.output
    }

    #[test]
    fn a_binary_patch_applies_through_git_apply_even_in_a_tree_inside_a_repository() {
        let tmp = tempfile::tempdir().unwrap();
        let repo = tmp.path().join("repo");
        write(&repo.join("f.c"), "one\ntwo\n");
        std::fs::create_dir_all(repo.join("fw")).unwrap();
        std::fs::write(repo.join("fw/blob.bin"), [0u8, 1, 2, 3, 0, 255]).unwrap();
        git(&repo, &["init", "-q"]);
        git(&repo, &["add", "."]);
        git(&repo, &["commit", "-qm", "base"]);
        // the tree: a copy of base, untracked inside the repository (as a work directory in a checkout is)
        let tree = repo.join("work/tree");
        write(&tree.join("f.c"), "one\ntwo\n");
        std::fs::create_dir_all(tree.join("fw")).unwrap();
        std::fs::write(tree.join("fw/blob.bin"), [0u8, 1, 2, 3, 0, 255]).unwrap();
        std::fs::write(repo.join("fw/blob.bin"), [9u8, 0, 8, 0, 7]).unwrap();
        write(&repo.join("f.c"), "one\nTWO\n");
        git(&repo, &["commit", "-qam", "change"]);
        let p = tmp.path().join("0001-change.patch");
        std::fs::write(&p, git(&repo, &["format-patch", "--binary", "--stdout", "-1"])).unwrap();

        assert_eq!(run_patch(&tree, &p, false, true, None).unwrap(), Ok(()));
        assert_eq!(
            std::fs::read(tree.join("fw/blob.bin")).unwrap(),
            [0u8, 1, 2, 3, 0, 255],
            "a dry run"
        );
        assert_eq!(run_patch(&tree, &p, false, false, None).unwrap(), Ok(()));
        assert_eq!(std::fs::read(tree.join("fw/blob.bin")).unwrap(), [9u8, 0, 8, 0, 7]);
        assert_eq!(std::fs::read_to_string(tree.join("f.c")).unwrap(), "one\nTWO\n");
        // applied twice: git's words, naming the file
        let f = run_patch(&tree, &p, false, true, None).unwrap().unwrap_err();
        assert!(
            f.to_string()
                .starts_with(&format!("{} does not apply: error: ", p.display())),
            "{f}"
        );
        assert_eq!(run_patch(&tree, &p, true, false, None).unwrap(), Ok(()));
        assert_eq!(std::fs::read(tree.join("fw/blob.bin")).unwrap(), [0u8, 1, 2, 3, 0, 255]);
        assert_eq!(std::fs::read_to_string(tree.join("f.c")).unwrap(), "one\ntwo\n");
    }

    #[test]
    fn a_patch_saved_from_a_quoted_printable_mail_applies_decoded() {
        let tmp = tempfile::tempdir().unwrap();
        let tree = tmp.path().join("tree");
        write(&tree.join("f.c"), "a = 1;\nb  = 2;\n");
        let mail = "From x\nSubject: [PATCH] t\nContent-Type: text/plain; charset=iso-8859-1\n\
                    Content-Transfer-Encoding: quoted-printable\n\n---\n--- a/f.c\n+++ b/f.c\n\
                    @@ -1,2 +1,2 @@\n a =3D 1;\n-b  =3D 2;\n+b  =3D 3; /* Gr=FC=DFe */\n";
        let p = tmp.path().join("0001-t.patch");
        std::fs::write(&p, mail).unwrap();
        assert_eq!(run_patch(&tree, &p, false, false, None).unwrap(), Ok(()));
        assert_eq!(
            std::fs::read_to_string(tree.join("f.c")).unwrap(),
            "a = 1;\nb  = 3; /* Grüße */\n"
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
        let f = PatchFailure {
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
        assert_eq!(
            classify(&tree, &s, &root.join("scratch")).unwrap(),
            SeriesState::Applies
        );
        write(&tree.join("f.c"), "one\nTWO\nthree\n");
        assert_eq!(
            classify(&tree, &s, &root.join("scratch")).unwrap(),
            SeriesState::Contained
        );
        write(&tree.join("f.c"), "one\nzwei\nthree\n");
        match classify(&tree, &s, &root.join("scratch")).unwrap() {
            SeriesState::Conflicts { forward, .. } => assert_eq!(forward.files, vec![("f.c".to_string(), vec![1])]),
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
