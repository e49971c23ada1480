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
/// the tree and out of version-control metadata ([`check_path`]): the
/// `---`/`+++` names, the `diff --git` names, `rename`/`copy` targets, git's
/// quoted names decoded; a file a `GIT binary patch` changes is named by
/// its `diff --git` line, which is all such a section has. A symlink the
/// diff creates must point inside the tree.
pub fn touched_files(diff: &str) -> Result<Vec<String>> {
    let mut out: Vec<String> = Vec::new();
    let mut add = |name: String| {
        if !out.contains(&name) {
            out.push(name);
        }
    };
    // the current `diff --git` section: its b/ name, and whether it makes a symlink
    let mut git_b: Option<String> = None;
    let mut symlink: Option<String> = None;
    let mut in_hunk = false;
    for line in diff.lines() {
        if let Some(r) = line.strip_prefix("diff --git ") {
            let (a, b) = git_names(r)?;
            check_path(strip_one(&a)?)?;
            let b = strip_one(&b)?.to_string();
            check_path(&b)?;
            git_b = Some(b);
            symlink = None;
            in_hunk = false;
        } else if line == "GIT binary patch" {
            let Some(b) = git_b.clone() else {
                bail!("a `GIT binary patch` without its `diff --git` line: not a git diff");
            };
            add(b);
        } else if let Some(r) = ["rename from ", "rename to ", "copy from ", "copy to "]
            .iter()
            .find_map(|k| line.strip_prefix(k))
        {
            let name = unquote(r.trim())?;
            check_path(&name)?;
            add(name);
        } else if line.ends_with(" 120000") && (line.starts_with("new file mode ") || line.starts_with("new mode ")) {
            symlink = git_b.clone();
        } else if let Some(r) = line.strip_prefix("+++ ").or_else(|| line.strip_prefix("--- ")) {
            let name = unquote(r.split('\t').next().unwrap_or("").trim())?;
            in_hunk = false;
            if name != "/dev/null" {
                let stripped = strip_one(&name)?.to_string();
                check_path(&stripped)?;
                add(stripped);
            }
        } else if line.starts_with("@@") {
            in_hunk = true;
        } else if let (true, Some(link), Some(target)) = (in_hunk, &symlink, line.strip_prefix('+')) {
            check_link(link, target)?;
        }
    }
    if out.is_empty() {
        bail!("no file names found: not a unified diff");
    }
    Ok(out)
}

/// Directories of version-control metadata: a diff writing into one could
/// configure the tool that applies the next patch (a git filter is a
/// command), so no patch may touch them.
const VCS_DIRS: [&str; 5] = [".git", ".hg", ".svn", ".bzr", "_darcs"];

/// Refuses a tree-relative path that is absolute, climbs (`..`), or passes
/// through version-control metadata.
fn check_path(path: &str) -> Result<()> {
    let p = Path::new(path);
    if path.is_empty() || p.is_absolute() || p.components().any(|c| !matches!(c, Component::Normal(_))) {
        bail!("diff path `{path}` leaves the tree; refusing the patch");
    }
    if let Some(d) = p
        .components()
        .find_map(|c| VCS_DIRS.iter().find(|d| c.as_os_str().eq_ignore_ascii_case(d)))
    {
        bail!(
            "diff path `{path}` writes into `{d}` (version-control metadata, which could make the tools that apply \
             the series run a command); refusing the patch"
        );
    }
    Ok(())
}

/// Refuses a symlink at `link` whose `target` leaves the tree or reaches
/// version-control metadata.
fn check_link(link: &str, target: &str) -> Result<()> {
    let mut at: Vec<&str> = link.split('/').collect();
    at.pop();
    let escapes = || {
        anyhow::anyhow!("`{link}` is made a symlink to `{target}`, outside the tree or into version-control metadata; refusing the patch")
    };
    if target.starts_with('/') {
        return Err(escapes());
    }
    for part in target.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                at.pop().ok_or_else(escapes)?;
            }
            p => at.push(p),
        }
    }
    check_path(&at.join("/")).map_err(|_| escapes())
}

/// `name` without its first directory (`-p1`).
fn strip_one(name: &str) -> Result<&str> {
    match name.split_once('/') {
        Some((_, rest)) => Ok(rest),
        None => bail!("diff path `{name}` has no leading directory to strip (-p1)"),
    }
}

/// The two names of a `diff --git` line (after its prefix), quoted or not:
/// `a/x b/x`, `"a/x y" "b/x y"`.
fn git_names(r: &str) -> Result<(String, String)> {
    if r.starts_with('"') {
        let end = quoted_end(r).ok_or_else(|| anyhow::anyhow!("`diff --git {r}`: an unterminated quoted name"))?;
        let (a, rest) = r.split_at(end);
        return Ok((unquote(a)?, unquote(rest.trim_start())?));
    }
    if let Some(i) = r.find(" \"b/") {
        return Ok((r[..i].to_string(), unquote(&r[i + 1..])?));
    }
    match r.rsplit_once(" b/") {
        Some((a, b)) => Ok((a.to_string(), format!("b/{b}"))),
        None => bail!("`diff --git {r}`: no b/ name"),
    }
}

/// Where the quoted name at the start of `s` ends (just past its quote).
fn quoted_end(s: &str) -> Option<usize> {
    let mut escaped = false;
    for (i, c) in s.char_indices().skip(1) {
        match (escaped, c) {
            (true, _) => escaped = false,
            (false, '\\') => escaped = true,
            (false, '"') => return Some(i + 1),
            _ => {}
        }
    }
    None
}

/// A path as git writes it: in double quotes with C escapes (`\t`, `\"`,
/// octal bytes) when it holds unusual characters, else as is.
fn unquote(s: &str) -> Result<String> {
    let Some(inner) = s.strip_prefix('"') else {
        return Ok(s.to_string());
    };
    let bad = || anyhow::anyhow!("diff path `{s}`: a malformed quoted name");
    let inner = inner.strip_suffix('"').ok_or_else(bad)?;
    let mut bytes = Vec::new();
    let mut it = inner.bytes().peekable();
    while let Some(b) = it.next() {
        if b != b'\\' {
            bytes.push(b);
            continue;
        }
        let e = it.next().ok_or_else(bad)?;
        bytes.push(match e {
            b'n' => b'\n',
            b't' => b'\t',
            b'a' => 7,
            b'b' => 8,
            b'f' => 12,
            b'r' => b'\r',
            b'v' => 11,
            b'0'..=b'3' => {
                let mut v = u32::from(e - b'0');
                for _ in 0..2 {
                    let d = it.next().filter(u8::is_ascii_digit).ok_or_else(bad)?;
                    v = v * 8 + u32::from(d - b'0');
                }
                u8::try_from(v).map_err(|_| bad())?
            }
            other => other,
        });
    }
    Ok(String::from_utf8_lossy(&bytes).into_owned())
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
    let git_dir = EmptyDir::beside(tree)?;
    // a real apply goes through a dry run first: GNU patch applies every hunk it can, so a failed
    // apply would leave the tree half-patched, and the explaining run would blame every file
    let steps: &[Check] = if dry_run {
        &[Check::DryRun]
    } else {
        &[Check::DryRun, Check::Apply]
    };
    let mut failed = None;
    for &check in steps {
        let mut cmd = tool.cmd(tree, reverse, check, &bytes, git_dir.path())?;
        if let Some(l) = log {
            cmd = cmd.log(l);
        }
        let f = cmd.run()?;
        if !f.success() {
            failed = Some(f);
            break;
        }
    }
    let Some(f) = failed else {
        return Ok(Ok(()));
    };
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
    let v = tool.cmd(tree, reverse, Check::Explain, &bytes, git_dir.path())?.run()?;
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

    /// The command, the patch on its standard input; `git_dir` is an empty
    /// directory of the caller's, git's only repository ([`quiet_git`]).
    fn cmd(self, tree: &Path, reverse: bool, check: Check, bytes: &[u8], git_dir: &Path) -> Result<Cmd> {
        let mut c = match self {
            Tool::Patch => {
                // -u: a unified diff only (never an ed script, which patch pipes to ed); -g0: never
                // check a file out of RCS, SCCS, Perforce or ClearCase
                let c = Cmd::new("patch")
                    .args([
                        "-p1",
                        "-u",
                        "-g0",
                        "-f",
                        "--fuzz=0",
                        "--no-backup-if-mismatch",
                        "-r",
                        "-",
                    ])
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
                let c = quiet_git(Cmd::new("git"), git_dir)
                    .args(["apply", "-p1", "--whitespace=nowarn"])
                    .dir(&tree);
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

/// An empty directory beside a tree, removed when dropped: git's
/// repository while it applies a patch.
struct EmptyDir(PathBuf);

impl EmptyDir {
    fn beside(tree: &Path) -> Result<EmptyDir> {
        let name = tree.file_name().unwrap_or_default().to_string_lossy();
        let d = tree.with_file_name(format!(".{name}.git-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).with_context(|| format!("create {}", d.display()))?;
        Ok(EmptyDir(d))
    }

    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for EmptyDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `git` configured by nothing a series can write: `git_dir` (an empty
/// directory the harness made) as its repository, so the tree's own `.git`
/// (its config, hooks and `info/attributes`) is never read; no system or
/// global config or attributes; no config or repository from the
/// environment. A filter or diff driver is a command in config, so with
/// none configured no file of the tree can make git run one.
fn quiet_git(c: Cmd, git_dir: &Path) -> Cmd {
    let mut c = c
        .env("GIT_DIR", git_dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_ATTR_NOSYSTEM", "1");
    for k in [
        "GIT_WORK_TREE",
        "GIT_INDEX_FILE",
        "GIT_CONFIG",
        "GIT_CONFIG_PARAMETERS",
        "GIT_CONFIG_COUNT",
        "GIT_OBJECT_DIRECTORY",
        "GIT_ALTERNATE_OBJECT_DIRECTORIES",
        "GIT_CEILING_DIRECTORIES",
        "GIT_EXTERNAL_DIFF",
        "XDG_CONFIG_HOME",
    ] {
        c = c.env_remove(k);
    }
    c.env("HOME", git_dir)
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
    fn a_tree_whose_git_config_names_a_filter_cannot_make_git_apply_run_it() {
        let tmp = tempfile::tempdir().unwrap();
        let repo = tmp.path().join("repo");
        std::fs::create_dir_all(repo.join("fw")).unwrap();
        std::fs::write(repo.join("fw/blob.bin"), [0u8, 1, 2]).unwrap();
        git(&repo, &["init", "-q"]);
        git(&repo, &["add", "."]);
        git(&repo, &["commit", "-qm", "base"]);
        std::fs::write(repo.join("fw/blob.bin"), [9u8, 0, 8]).unwrap();
        git(&repo, &["commit", "-qam", "change"]);
        let p = tmp.path().join("0002-blob.patch");
        std::fs::write(&p, git(&repo, &["format-patch", "--binary", "--stdout", "-1"])).unwrap();
        // what patch 1 of a hostile series left in the tree: a git repository whose filter is a command
        let tree = tmp.path().join("tree");
        std::fs::create_dir_all(tree.join("fw")).unwrap();
        std::fs::write(tree.join("fw/blob.bin"), [0u8, 1, 2]).unwrap();
        git(&tree, &["init", "-q"]);
        let ran = tmp.path().join("ran");
        write(
            &tree.join(".git/config"),
            &format!(
                "[filter \"x\"]\n\tclean = touch {0}\n\tsmudge = touch {0}\n",
                ran.display()
            ),
        );
        write(&tree.join(".git/info/attributes"), "* filter=x\n");
        write(&tree.join(".gitattributes"), "* filter=x\n");
        assert_eq!(run_patch(&tree, &p, false, false, None).unwrap(), Ok(()));
        assert_eq!(std::fs::read(tree.join("fw/blob.bin")).unwrap(), [9u8, 0, 8]);
        assert!(!ran.exists(), "git ran the tree's filter");
        let leftovers: Vec<_> = std::fs::read_dir(tmp.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .filter(|n| n.to_string_lossy().contains(".git-"))
            .collect();
        assert!(leftovers.is_empty(), "{leftovers:?}");
    }

    #[test]
    fn no_patch_may_touch_version_control_metadata() {
        for (bad, named) in [
            ("--- /dev/null\n+++ b/.git/config\n", ".git/config"),
            ("--- a/x/.GIT/hooks/post\n+++ b/x/.GIT/hooks/post\n", ".GIT"),
            ("diff --git a/.hg/hgrc b/.hg/hgrc\nGIT binary patch\n", ".hg/hgrc"),
            (
                "diff --git a/f b/f\nrename from f\nrename to .git/info/attributes\n",
                ".git/info/attributes",
            ),
            (
                "diff --git a/f b/g\ncopy from f\ncopy to \".git/con\\146ig\"\n",
                ".git/config",
            ),
            ("--- /dev/null\n+++ \"b/.git/hooks/pre\\tx\"\n", ".git/hooks/pre\tx"),
            ("diff --git \"a/.svn/x y\" \"b/.svn/x y\"\n", ".svn/x y"),
        ] {
            let e = touched_files(bad).unwrap_err().to_string();
            assert!(
                e.contains(named) && e.contains("version-control metadata"),
                "{bad}: {e}"
            );
        }
        let fine = "--- a/.gitignore\n+++ b/.gitignore\n--- a/tools/.gitattributes\n+++ b/tools/.gitattributes\n";
        assert_eq!(touched_files(fine).unwrap(), vec![".gitignore", "tools/.gitattributes"]);
    }

    #[test]
    fn renames_copies_and_quoted_names_are_checked_and_listed() {
        let d = "diff --git a/mm/old.c b/mm/new.c\nsimilarity index 90%\nrename from mm/old.c\nrename to mm/new.c\n\
                 diff --git \"a/doc/a b.txt\" \"b/doc/a b.txt\"\n--- \"a/doc/a b.txt\"\n+++ \"b/doc/a b.txt\"\n";
        assert_eq!(touched_files(d).unwrap(), vec!["mm/old.c", "mm/new.c", "doc/a b.txt"]);
        for bad in [
            "diff --git a/f b/f\nrename from f\nrename to ../../etc/cron.d/x\n",
            "diff --git a/f b/g\ncopy from f\ncopy to /etc/passwd\n",
            "--- \"a/..\\057x\"\n",
        ] {
            let e = touched_files(bad).unwrap_err().to_string();
            assert!(e.contains("leaves the tree"), "{bad}: {e}");
        }
    }

    #[test]
    fn a_symlink_may_point_only_inside_the_tree() {
        let link = |path: &str, target: &str| {
            format!(
                "diff --git a/{path} b/{path}\nnew file mode 120000\nindex 0000000..1111111\n--- /dev/null\n\
                 +++ b/{path}\n@@ -0,0 +1 @@\n+{target}\n\\ No newline at end of file\n"
            )
        };
        assert_eq!(
            touched_files(&link("include/linux/x.h", "../../arch/x86/x.h")).unwrap(),
            vec!["include/linux/x.h"]
        );
        for (path, target) in [
            ("include/x", "/etc/passwd"),
            ("include/x", "../../.."),
            ("x", "../root/.ssh"),
            ("tools/x", "../.git"),
        ] {
            let e = touched_files(&link(path, target)).unwrap_err().to_string();
            assert!(
                e.contains("symlink") && e.contains("outside the tree"),
                "{path} -> {target}: {e}"
            );
        }
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

    /// Issue 58: a patch of two files, one of which conflicts, names that
    /// file only and leaves the tree as it was (GNU patch would apply the
    /// other file's hunks, and the explaining run would then blame both).
    #[test]
    fn a_conflict_in_one_file_names_that_file_and_patches_nothing() {
        let tmp = tempfile::tempdir().unwrap();
        let tree = tmp.path().join("tree");
        write(&tree.join("a.c"), "one\ntwo\n");
        write(&tree.join("b.c"), "uno\nzwei\n");
        let p = tmp.path().join("0001-two.patch");
        std::fs::write(
            &p,
            "--- a/a.c\n+++ b/a.c\n@@ -1,2 +1,2 @@\n one\n-two\n+TWO\n--- a/b.c\n+++ b/b.c\n@@ -1,2 +1,2 @@\n uno\n-dos\n+DOS\n",
        )
        .unwrap();
        let f = run_patch(&tree, &p, false, false, None).unwrap().unwrap_err();
        assert_eq!(f.files, vec![("b.c".to_string(), vec![1])], "{f}");
        assert_eq!(std::fs::read_to_string(tree.join("a.c")).unwrap(), "one\ntwo\n");
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
