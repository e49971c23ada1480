//! The harness's own copy of the kernel source, under the work directory.
//! It is made from a tarball, a git tree (`git archive HEAD`) or a plain
//! directory, and the user's tree is only ever read. Patches applied to the
//! copy are recorded in a stack file before they land, so an interrupted run
//! is rolled back to the pristine tree at the next start.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::patch::{self, PatchFailure, Series};
use super::stack::{Stack, Undone};
use crate::proc::Cmd;
use crate::workdir::WorkDir;

/// One patch applied to the work tree.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Applied {
    /// The patch file.
    pub patch: PathBuf,
    /// Reverse-applied.
    pub reverse: bool,
}

impl Applied {
    /// The patch at `p` (its path resolved), applied forwards or reversed.
    pub fn new(p: &Path, reverse: bool) -> Result<Applied> {
        Ok(Applied {
            patch: std::fs::canonicalize(p).with_context(|| format!("resolve {}", p.display()))?,
            reverse,
        })
    }

    /// Every patch of a series in its order, each applied as `reverse` says:
    /// what a variant's kernel is made of, for its cache key.
    pub fn series(s: &Series, reverse: bool) -> Result<Vec<Applied>> {
        s.patches.iter().map(|p| Applied::new(p, reverse)).collect()
    }
}

/// The work tree.
pub struct Tree {
    /// The source directory (in-tree build).
    pub dir: PathBuf,
    /// Identity of the source it came from.
    pub key: String,
    stack: Stack,
    origin: Origin,
}

/// What a work tree is made from again when its state is in doubt.
enum Origin {
    /// A copy of this source (tarball, git tree's HEAD, directory).
    Copy(PathBuf),
    /// A clone checked out at a commit: `git reset --hard` restores it.
    Clone,
}

/// Identity of a source. A tarball: its path, size and mtime. A git tree:
/// its path and HEAD; uncommitted changes to tracked files are refused,
/// since only HEAD is exported. A plain directory: its path and every entry
/// below it (relative path, type, size, mtime in ns, symlink target), so an
/// edit anywhere in it makes a new identity.
pub fn source_key(source: &Path) -> Result<String> {
    let meta = std::fs::metadata(source).with_context(|| {
        format!(
            "find the kernel source {} (install linux-source-6.12 or set kernel.source)",
            source.display()
        )
    })?;
    let mut h = Sha256::new();
    h.update(source.to_string_lossy().as_bytes());
    if meta.is_dir() && source.join(".git").exists() {
        let git = || Cmd::new("git").arg("-C").arg(source).capture();
        let dirty = git().args(["status", "--porcelain", "--untracked-files=no"]).run_ok()?;
        if !dirty.output.trim().is_empty() {
            let files: Vec<&str> = dirty.output.lines().take(5).map(str::trim).collect();
            bail!(
                "use the git tree {}: it has uncommitted changes ({}); the harness builds HEAD, so commit or stash them",
                source.display(),
                files.join(", ")
            );
        }
        let f = git().args(["rev-parse", "HEAD"]).run_ok()?;
        h.update(f.output.trim().as_bytes());
    } else if meta.is_dir() {
        hash_dir(source, Path::new(""), &mut h)?;
    } else {
        h.update(meta.len().to_le_bytes());
        if let Ok(m) = meta.modified() {
            h.update(format!("{m:?}").as_bytes());
        }
    }
    Ok(crate::util::hex(&h.finalize()[..8]))
}

/// Feeds every entry under `root/rel` into `h`, in name order, without
/// following symlinks.
fn hash_dir(root: &Path, rel: &Path, h: &mut Sha256) -> Result<()> {
    use std::os::unix::fs::MetadataExt;
    let dir = root.join(rel);
    let mut entries: Vec<std::fs::DirEntry> = std::fs::read_dir(&dir)
        .with_context(|| format!("read {}", dir.display()))?
        .collect::<std::io::Result<_>>()
        .with_context(|| format!("read {}", dir.display()))?;
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let r = rel.join(e.file_name());
        let m = e
            .metadata()
            .with_context(|| format!("stat {}", root.join(&r).display()))?;
        h.update(r.as_os_str().as_encoded_bytes());
        h.update([0]);
        h.update(m.mode().to_le_bytes());
        h.update(m.size().to_le_bytes());
        h.update(m.mtime().to_le_bytes());
        h.update(m.mtime_nsec().to_le_bytes());
        if m.file_type().is_symlink() {
            let t = std::fs::read_link(root.join(&r))
                .with_context(|| format!("read the link {}", root.join(&r).display()))?;
            h.update(t.as_os_str().as_encoded_bytes());
        } else if m.is_dir() {
            hash_dir(root, &r, h)?;
        }
    }
    Ok(())
}

/// Copies `files` (paths relative to the tree's top) as the source holds
/// them into `dest`, without the work tree: what `harness check` classifies
/// series against while a run has the work tree patched. Files the source
/// lacks are left out (a patch may create them).
pub fn pristine_files(source: &Path, files: &[String], dest: &Path, log: &Path) -> Result<()> {
    std::fs::create_dir_all(dest).with_context(|| format!("create {}", dest.display()))?;
    let meta = std::fs::metadata(source).with_context(|| format!("stat {}", source.display()))?;
    if meta.is_file() {
        pristine_from_tarball(source, files, dest, log)
    } else if source.join(".git").exists() {
        pristine_from_git(source, files, dest, log)
    } else {
        for f in files {
            let (src, dst) = (source.join(f), dest.join(f));
            if src.is_file() {
                std::fs::create_dir_all(dst.parent().unwrap_or(dest))
                    .with_context(|| format!("create {}", dst.display()))?;
                std::fs::copy(&src, &dst).with_context(|| format!("copy {}", src.display()))?;
            }
        }
        Ok(())
    }
}

/// The kernel source `source` (a tarball, a git tree's HEAD or a
/// directory) unpacked into `tmp`.
fn unpack(source: &Path, tmp: &Path, log: &Path) -> Result<()> {
    let meta = std::fs::metadata(source).with_context(|| format!("stat {}", source.display()))?;
    if meta.is_file() {
        Cmd::new("tar")
            .arg("-xf")
            .arg(source)
            .arg("-C")
            .arg(tmp)
            .arg("--strip-components=1")
            .log(log)
            .run_ok()
            .context("unpack the kernel source")?;
    } else if source.join(".git").exists() {
        let tar = tmp.with_extension("tar");
        Cmd::new("git")
            .arg("-C")
            .arg(source)
            .args(["archive", "--format=tar", "-o"])
            .arg(&tar)
            .arg("HEAD")
            .log(log)
            .run_ok()
            .context("export the git tree")?;
        Cmd::new("tar")
            .arg("-xf")
            .arg(&tar)
            .arg("-C")
            .arg(tmp)
            .log(log)
            .run_ok()?;
        std::fs::remove_file(&tar).ok();
    } else {
        Cmd::new("cp")
            .arg("-a")
            .arg(source.join("."))
            .arg(tmp)
            .log(log)
            .run_ok()
            .context("copy the source tree")?;
    }
    Ok(())
}

/// `e` with the filesystem named when a tool ran out of space writing
/// under `dir` (tar's "Cannot write: No space left on device";
/// [`super::fault::out_of_space`], as the build's host faults are told).
fn full_named(e: anyhow::Error, dir: &Path) -> anyhow::Error {
    let full = super::fault::out_of_space(&format!("{e:#}"))
        || e.chain().any(|c| {
            c.downcast_ref::<std::io::Error>()
                .is_some_and(|io| matches!(io.raw_os_error(), Some(libc::ENOSPC | libc::EDQUOT)))
        });
    if !full {
        return e;
    }
    let at = dir.parent().unwrap_or(dir);
    e.context(format!(
        "the filesystem holding {} is full while unpacking the kernel source (the partial tree was removed): free space there, or set HARNESS_WORK_DIR to a larger one",
        at.display()
    ))
}

/// [`pristine_files`] from a tarball with one top directory, whatever its
/// name: the files it lacks are left out.
fn pristine_from_tarball(source: &Path, files: &[String], dest: &Path, log: &Path) -> Result<()> {
    let escape = |f: &String| {
        f.chars()
            .flat_map(|c| if "*?[\\".contains(c) { vec!['\\', c] } else { vec![c] })
            .collect::<String>()
    };
    let f = Cmd::new("tar")
        .arg("-xf")
        .arg(source)
        .arg("-C")
        .arg(dest)
        .args(["--strip-components=1", "--wildcards", "--no-wildcards-match-slash"])
        .args(files.iter().map(|f| format!("*/{}", escape(f))))
        .capture()
        .log(log)
        .run()?;
    let real_errors = f
        .output
        .lines()
        .any(|l| !l.contains("Not found in archive") && !l.contains("Exiting with failure status"));
    if !f.success() && real_errors {
        bail!(
            "unpack {} files of {}: {}",
            files.len(),
            source.display(),
            f.output.trim()
        );
    }
    Ok(())
}

/// [`pristine_files`] from a git tree's `HEAD`: the files it tracks.
fn pristine_from_git(source: &Path, files: &[String], dest: &Path, log: &Path) -> Result<()> {
    let git = || Cmd::new("git").arg("-C").arg(source).capture();
    let known = git()
        .args(["ls-tree", "-r", "--name-only", "HEAD", "--"])
        .args(files)
        .run_ok()?;
    let known: Vec<&str> = known.output.lines().filter(|l| !l.is_empty()).collect();
    if known.is_empty() {
        return Ok(());
    }
    let tar = dest.join("pristine.tar");
    git()
        .args(["archive", "--format=tar", "-o"])
        .arg(&tar)
        .args(["HEAD", "--"])
        .args(&known)
        .log(log)
        .run_ok()?;
    Cmd::new("tar")
        .arg("-xf")
        .arg(&tar)
        .arg("-C")
        .arg(dest)
        .log(log)
        .run_ok()?;
    std::fs::remove_file(&tar).with_context(|| format!("remove {}", tar.display()))
}

/// Deletes the directory `dir` by renaming it aside first
/// (`<dir>.gone-<pid>-<n>.partial`, which `gc` deletes if it is left) and
/// removing it there: a kill during the removal never leaves a half-deleted
/// tree under the tree's own name. A `dir` that is not there is no error.
fn remove_aside(dir: &Path) -> Result<()> {
    static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let name = dir
        .file_name()
        .map(|f| f.to_string_lossy().into_owned())
        .unwrap_or_default();
    let aside = dir.with_file_name(format!("{name}.gone-{}-{n}.partial", std::process::id()));
    match std::fs::rename(dir, &aside) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e).with_context(|| format!("move {} aside", dir.display())),
    }
    std::fs::remove_dir_all(&aside).with_context(|| format!("remove {}", aside.display()))
}

/// The commit id a commit-ish (`v6.12`, a branch, an abbreviated id) of the
/// git tree `source` names. Reads the tree only.
pub fn resolve_ref(source: &Path, r: &str) -> Result<String> {
    if !source.join(".git").exists() {
        bail!("find `{r}`: {} is not a git tree", source.display());
    }
    let f = Cmd::new("git")
        .arg("-C")
        .arg(source)
        .args(["rev-parse", "--verify", "--quiet", "--end-of-options"])
        .arg(format!("{r}^{{commit}}"))
        .capture()
        .run()?;
    if !f.success() {
        bail!("find `{r}` in {}: it names no commit there", source.display());
    }
    Ok(f.output.trim().to_string())
}

impl Tree {
    /// Makes (or reuses) the work copy of `source` under `work`, and rolls
    /// back whatever an interrupted run left applied.
    pub fn prepare(source: &Path, work: &WorkDir, log: &Path) -> Result<Tree> {
        let key = source_key(source)?;
        let dir = work.tree(&key);
        let stack = Stack::at(work.tree_companion(&key, "applied.json"));
        let tree = Tree {
            dir: dir.clone(),
            key,
            stack,
            origin: Origin::Copy(source.to_path_buf()),
        };
        if !dir.join("Makefile").is_file() {
            tree.extract(source, log)?;
        }
        crate::workdir::touch(&work.tree_companion(&tree.key, crate::workdir::LAST_USED));
        tree.rollback(log)?;
        Ok(tree)
    }

    /// The work copy of commit `r` of the git tree `source`: one clone per
    /// source (`git clone --shared`, which reads the user's objects and
    /// writes nothing into the user's repository) under `work/tree/git-<id>`,
    /// checked out at the commit. Switching commits rewrites only the files
    /// that differ, so the next build is incremental. The tree's key, and so
    /// every kernel's cache key, takes the commit id.
    pub fn prepare_ref(source: &Path, r: &str, work: &WorkDir, log: &Path) -> Result<Tree> {
        let commit = resolve_ref(source, r)?;
        let id = crate::util::hex(&Sha256::digest(source.as_os_str().as_encoded_bytes())[..8]);
        let mut h = Sha256::new();
        h.update(source.as_os_str().as_encoded_bytes());
        h.update(commit.as_bytes());
        let name = format!("git-{id}");
        let tree = Tree {
            dir: work.tree(&name),
            key: crate::util::hex(&h.finalize()[..8]),
            stack: Stack::at(work.tree_companion(&name, "applied.json")),
            origin: Origin::Clone,
        };
        if !tree.dir.join(".git").exists() {
            let tmp = tree.dir.with_extension("partial");
            let _ = remove_aside(&tmp);
            std::fs::create_dir_all(work.trees()).with_context(|| format!("create {}", work.trees().display()))?;
            Cmd::new("git")
                .args(["clone", "--quiet", "--shared", "--no-checkout"])
                .arg(source)
                .arg(&tmp)
                .log(log)
                .run_ok()
                .context("clone the git tree")?;
            std::fs::rename(&tmp, &tree.dir).with_context(|| format!("move the clone into {}", tree.dir.display()))?;
        }
        crate::workdir::touch(&work.tree_companion(&name, crate::workdir::LAST_USED));
        tree.rollback(log)?;
        let git = || Cmd::new("git").arg("-C").arg(&tree.dir).log(log);
        if !git()
            .args(["cat-file", "-e", &format!("{commit}^{{commit}}")])
            .run()?
            .success()
        {
            // a commit made after the clone and not in the shared objects (a fetch into a new pack)
            git()
                .args(["fetch", "--quiet", "origin", "+refs/*:refs/remotes/source/*"])
                .run_ok()
                .context("fetch new commits into the work clone")?;
        }
        git()
            .args(["checkout", "--quiet", "--force", "--detach", &commit])
            .run_ok()
            .with_context(|| format!("check out {r} ({commit})"))?;
        Ok(tree)
    }

    /// Makes the tree from `source` in a temporary directory renamed into
    /// place. A tree directory there without its top-level Makefile (a
    /// removal or a copy cut short) is moved aside first.
    fn extract(&self, source: &Path, log: &Path) -> Result<()> {
        let tmp = self.clear(log)?;
        std::fs::create_dir_all(&tmp).with_context(|| format!("create {}", tmp.display()))?;
        if let Err(e) = unpack(source, &tmp, log) {
            // a cut-short copy is gigabytes nobody reads: gone, not left for gc
            let _ = std::fs::remove_dir_all(&tmp);
            let _ = std::fs::remove_file(tmp.with_extension("tar"));
            return Err(full_named(e, &tmp));
        }
        if !tmp.join("Makefile").is_file() {
            bail!(
                "{} does not hold a kernel tree (no top-level Makefile)",
                source.display()
            );
        }
        std::fs::rename(&tmp, &self.dir).with_context(|| format!("move the tree into {}", self.dir.display()))?;
        Ok(())
    }

    /// Moves aside what is where the tree and its temporary copy go (a tree
    /// without its Makefile, an interrupted copy); gives the temporary
    /// copy's path.
    fn clear(&self, log: &Path) -> Result<PathBuf> {
        if self.dir.exists() {
            let why = format!(
                "the work tree {} has no top-level Makefile: moving it aside\n",
                self.dir.display()
            );
            append_log(log, &why);
            remove_aside(&self.dir)?;
        }
        let tmp = self.dir.with_extension("partial");
        remove_aside(&tmp)?;
        Ok(tmp)
    }

    /// Undoes every applied patch, newest first, from the copies of the
    /// bytes that were applied; the tree is made afresh when any patch does
    /// not reverse or any touched file is not as it was (a patch cut halfway,
    /// a hand edit).
    pub fn rollback(&self, log: &Path) -> Result<()> {
        if self.stack.read()?.is_empty() {
            return Ok(());
        }
        if let Undone::Doubt(why) = self.stack.undo(&self.dir, log)? {
            append_log(
                log,
                &format!(
                    "the work tree {} is in doubt ({why}): making it afresh\n",
                    self.dir.display()
                ),
            );
            self.afresh(log)
                .with_context(|| format!("make the work tree afresh ({why})"))?;
        }
        self.stack.clear()
    }

    /// Makes the tree as its origin has it, whatever patches did to it.
    fn afresh(&self, log: &Path) -> Result<()> {
        match &self.origin {
            Origin::Copy(source) => {
                remove_aside(&self.dir)?;
                self.extract(source, log)
            }
            Origin::Clone => {
                let git = || Cmd::new("git").arg("-C").arg(&self.dir).log(log);
                git()
                    .args(["reset", "--quiet", "--hard"])
                    .run_ok()
                    .context("reset the work clone")?;
                // files a patch created are untracked: remove those only (build products stay)
                let touched = self.stack.touched()?;
                if !touched.is_empty() {
                    git()
                        .args(["clean", "-fdq", "--"])
                        .args(touched)
                        .run_ok()
                        .context("clean the work clone")?;
                }
                Ok(())
            }
        }
    }

    /// Applies (or reverses) a whole series. Each patch is dry-run first, so
    /// a failure leaves no half-applied patch; its bytes and the touched
    /// files' hashes are recorded before it lands, and what lands is that
    /// copy. Earlier patches of the series are rolled back by the caller's
    /// next [`Tree::rollback`].
    pub fn apply_series(&self, s: &Series, reverse: bool, log: &Path) -> Result<Result<(), PatchFailure>> {
        let order: Vec<&PathBuf> = if reverse {
            s.patches.iter().rev().collect()
        } else {
            s.patches.iter().collect()
        };
        for p in order {
            if let Err(f) = patch::run_patch(&self.dir, p, reverse, true, Some(log))? {
                return Ok(Err(f));
            }
            let copy = self.stack.push(&self.dir, p, reverse)?;
            if let Err(f) = patch::run_patch(&self.dir, &copy, reverse, false, Some(log))? {
                // a dry run passed; the entry stays, so the next rollback judges the tree
                bail!("apply {} after a clean dry run: {f}", p.display());
            }
        }
        Ok(Ok(()))
    }

    /// The kernel version of the tree (`6.12.117`).
    pub fn version(&self) -> Result<String> {
        let makefile = self.dir.join("Makefile");
        let mk = std::fs::read_to_string(&makefile).with_context(|| format!("read {}", makefile.display()))?;
        let get = |k: &str| {
            mk.lines()
                .find_map(|l| {
                    l.strip_prefix(k)
                        .map(|r| r.trim_start_matches([' ', '=']).trim().to_string())
                })
                .unwrap_or_default()
        };
        Ok(format!(
            "{}.{}.{}{}",
            get("VERSION"),
            get("PATCHLEVEL"),
            get("SUBLEVEL"),
            get("EXTRAVERSION")
        ))
    }
}

/// Adds `text` to the log at `p`, as far as it can.
fn append_log(p: &Path, text: &str) {
    use std::io::Write;
    if let Ok(mut f) = std::fs::OpenOptions::new().create(true).append(true).open(p) {
        let _ = f.write_all(text.as_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fake_tree(root: &Path) {
        std::fs::create_dir_all(root.join("mm")).unwrap();
        std::fs::write(
            root.join("Makefile"),
            "VERSION = 6\nPATCHLEVEL = 12\nSUBLEVEL = 117\nEXTRAVERSION =\n",
        )
        .unwrap();
        std::fs::write(root.join("mm/vmalloc.c"), "int vmap_lazy_nr;\n").unwrap();
    }

    /// Issue 47: an unpack cut short leaves no `.partial` tree, and a full
    /// filesystem is named as such.
    #[test]
    fn a_failed_unpack_removes_its_partial_tree_and_names_a_full_disk() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let src = dir.join("linux.tar.xz");
        std::fs::write(&src, b"not a tarball").unwrap();
        let work = dir.join("work");
        let wd = WorkDir::at(&work);
        let Err(e) = Tree::prepare(&src, &wd, &dir.join("tree.log")) else {
            panic!("a file that is no tarball unpacked");
        };
        let text = format!("{e:#}");
        assert!(
            text.contains("unpack the kernel source") && text.contains("exited with status"),
            "{text}"
        );
        let trees = WorkDir::at(&work).trees();
        let left: Vec<_> = std::fs::read_dir(&trees).unwrap().map(|e| e.unwrap().path()).collect();
        assert!(left.is_empty(), "left behind: {left:?}");
        assert!(!text.contains("is full"), "{text}");
        let full = full_named(
            anyhow::anyhow!("tar: linux/mm/x.c: Cannot write: No space left on device"),
            &trees.join("t.partial"),
        );
        assert!(
            format!("{full:#}").starts_with(&format!(
                "the filesystem holding {} is full while unpacking",
                trees.display()
            )),
            "{full:#}"
        );
        let io = anyhow::Error::new(std::io::Error::from_raw_os_error(libc::ENOSPC));
        assert!(format!("{:#}", full_named(io, &trees.join("t.partial"))).contains("is full"));
    }

    #[test]
    fn an_edited_directory_source_is_a_new_tree() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().to_path_buf();
        let src = dir.join("linux");
        fake_tree(&src);
        let work = WorkDir::at(&dir.join("work"));
        let log = dir.join("tree.log");
        let t1 = Tree::prepare(&src, &work, &log).unwrap();
        assert_eq!(source_key(&src).unwrap(), t1.key, "stable while nothing changes");
        // same size, top-level directory untouched: only the file's content and mtime change
        let top = std::fs::metadata(&src).unwrap().modified().unwrap();
        let f = src.join("mm/vmalloc.c");
        let old = std::fs::metadata(&f).unwrap().modified().unwrap();
        std::fs::write(&f, "int vmap_lazy_nX;\n").unwrap();
        std::fs::File::options()
            .write(true)
            .open(&f)
            .unwrap()
            .set_modified(old + std::time::Duration::from_millis(1))
            .unwrap();
        assert_eq!(std::fs::metadata(&src).unwrap().modified().unwrap(), top);
        let t2 = Tree::prepare(&src, &work, &log).unwrap();
        assert_ne!(t1.key, t2.key, "an edit in mm/ must change the identity");
        assert_eq!(
            std::fs::read_to_string(t2.dir.join("mm/vmalloc.c")).unwrap(),
            "int vmap_lazy_nX;\n"
        );
    }

    /// Issue 30: a tree copy left without its Makefile (a kill during the
    /// removal of a built tree) is moved aside and extracted again, where
    /// every later run failed with "Directory not empty (os error 39)"; a
    /// tree made afresh is renamed aside before it is removed, and nothing
    /// is left aside.
    #[test]
    fn a_tree_without_its_makefile_is_moved_aside_and_made_again() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().to_path_buf();
        let src = dir.join("linux");
        fake_tree(&src);
        let (work, log) = (dir.join("work"), dir.join("tree.log"));
        let wd = WorkDir::at(&work);
        let key = source_key(&src).unwrap();
        let half = work.join("tree").join(&key);
        std::fs::create_dir_all(half.join("mm/deep")).unwrap();
        std::fs::write(half.join("mm/deep/vmalloc.o"), "half-removed").unwrap();
        let t = Tree::prepare(&src, &wd, &log).unwrap();
        assert_eq!(
            std::fs::read_to_string(t.dir.join("mm/vmalloc.c")).unwrap(),
            "int vmap_lazy_nr;\n"
        );
        assert!(!t.dir.join("mm/deep").exists());
        assert!(std::fs::read_to_string(&log)
            .unwrap()
            .contains("has no top-level Makefile: moving it aside"));
        t.afresh(&log).unwrap();
        assert!(t.dir.join("Makefile").is_file());
        let left: Vec<String> = std::fs::read_dir(work.join("tree"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.contains(".gone-") || n.ends_with(".partial"))
            .collect();
        assert!(left.is_empty(), "{left:?}");
        remove_aside(&work.join("tree/none")).unwrap();
    }

    #[test]
    fn pristine_files_come_from_a_tarball_or_a_directory() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().to_path_buf();
        fake_tree(&dir.join("linux-source-6.12"));
        std::fs::write(dir.join("linux-source-6.12/mm/a[1].c"), "odd name\n").unwrap();
        Cmd::new("tar")
            .arg("-cJf")
            .arg(dir.join("src.tar.xz"))
            .arg("-C")
            .arg(&dir)
            .arg("linux-source-6.12")
            .run_ok()
            .unwrap();
        let files: Vec<String> = ["mm/vmalloc.c", "mm/a[1].c", "mm/new.c"].map(String::from).to_vec();
        for (name, source) in [("tar", dir.join("src.tar.xz")), ("dir", dir.join("linux-source-6.12"))] {
            let dest = dir.join(format!("out-{name}"));
            pristine_files(&source, &files, &dest, &dir.join("log")).unwrap();
            assert_eq!(
                std::fs::read_to_string(dest.join("mm/vmalloc.c")).unwrap(),
                "int vmap_lazy_nr;\n",
                "{name}"
            );
            assert_eq!(
                std::fs::read_to_string(dest.join("mm/a[1].c")).unwrap(),
                "odd name\n",
                "{name}"
            );
            assert!(
                !dest.join("mm/new.c").exists() && !dest.join("Makefile").exists(),
                "{name}"
            );
        }
        let e = pristine_files(
            &dir.join("src.tar.xz").with_extension("none"),
            &files,
            &dir.join("x"),
            &dir.join("log"),
        )
        .unwrap_err();
        assert!(format!("{e:#}").contains("stat "), "{e:#}");
    }

    /// Times the directory identity on a real tree:
    /// `HARNESS_TREE=/path/to/linux cargo test --lib -- --ignored directory_identity_time --nocapture`.
    #[test]
    #[ignore = "needs an unpacked kernel tree in HARNESS_TREE"]
    fn directory_identity_time() {
        let Some(t) = std::env::var_os("HARNESS_TREE") else {
            return;
        };
        for _ in 0..2 {
            let start = std::time::Instant::now();
            let k = source_key(Path::new(&t)).unwrap();
            eprintln!("{k}: {:.2} s", start.elapsed().as_secs_f64());
        }
    }

    #[test]
    fn io_errors_name_their_path() {
        let t = Tree {
            dir: PathBuf::from("/nonexistent/harness-tree"),
            key: "k".into(),
            stack: Stack::at(PathBuf::from("/nonexistent/s.json")),
            origin: Origin::Clone,
        };
        let e = format!("{:#}", t.version().unwrap_err());
        assert!(e.starts_with("read /nonexistent/harness-tree/Makefile: "), "{e}");
    }

    #[test]
    fn a_ref_gets_its_commit_checked_out_and_its_own_key() {
        if crate::proc::which("git").is_none() {
            return;
        }
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().to_path_buf();
        let src = dir.join("linux");
        fake_tree(&src);
        let git = |args: &[&str]| {
            Cmd::new("git")
                .arg("-C")
                .arg(&src)
                .args(["-c", "user.name=t", "-c", "user.email=t@t.invalid"])
                .args(args.iter().copied())
                .capture()
                .run_ok()
                .unwrap()
        };
        git(&["init", "-q"]);
        git(&["add", "."]);
        git(&["commit", "-qm", "one"]);
        git(&["tag", "good"]);
        std::fs::write(src.join("mm/vmalloc.c"), "int vmap_lazy_nr = 2;\n").unwrap();
        git(&["commit", "-qam", "two"]);
        // the user's working tree may be dirty: only commits are read
        std::fs::write(src.join("mm/vmalloc.c"), "uncommitted\n").unwrap();
        let (work, log) = (dir.join("work"), dir.join("log"));
        let wd = WorkDir::at(&work);
        let good = Tree::prepare_ref(&src, "good", &wd, &log).unwrap();
        assert_eq!(
            std::fs::read_to_string(good.dir.join("mm/vmalloc.c")).unwrap(),
            "int vmap_lazy_nr;\n"
        );
        let built = good.dir.join("mm/vmalloc.o");
        std::fs::write(&built, "object").unwrap();
        let bad = Tree::prepare_ref(&src, "HEAD", &wd, &log).unwrap();
        assert_eq!(bad.dir, good.dir, "one clone per source");
        assert_ne!(bad.key, good.key, "the key takes the commit");
        assert_eq!(
            std::fs::read_to_string(bad.dir.join("mm/vmalloc.c")).unwrap(),
            "int vmap_lazy_nr = 2;\n"
        );
        assert!(built.is_file(), "build products survive a switch (incremental builds)");
        assert_eq!(Tree::prepare_ref(&src, "good", &wd, &log).unwrap().key, good.key);
        assert_eq!(resolve_ref(&src, "HEAD~1").unwrap(), resolve_ref(&src, "good").unwrap());
        let e = resolve_ref(&src, "nope").unwrap_err().to_string();
        assert!(
            e.contains("find `nope` in ") && e.ends_with("it names no commit there"),
            "{e}"
        );
        let e = resolve_ref(&dir.join("work"), "x").unwrap_err().to_string();
        assert!(e.contains("is not a git tree"), "{e}");
        assert!(
            !src.join(".git/worktrees").exists(),
            "nothing written into the user's repository"
        );
    }

    #[test]
    fn a_dirty_git_source_is_refused() {
        if crate::proc::which("git").is_none() {
            return;
        }
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().to_path_buf();
        fake_tree(&dir);
        let git = |args: &[&str]| {
            Cmd::new("git")
                .arg("-C")
                .arg(&dir)
                .args(["-c", "user.name=t", "-c", "user.email=t@t.invalid"])
                .args(args.iter().copied())
                .capture()
                .run_ok()
                .unwrap()
        };
        git(&["init", "-q"]);
        git(&["add", "."]);
        git(&["commit", "-qm", "x"]);
        let k = source_key(&dir).unwrap();
        std::fs::write(dir.join("untracked.txt"), "x").unwrap();
        assert_eq!(
            source_key(&dir).unwrap(),
            k,
            "untracked files are not exported and do not matter"
        );
        std::fs::write(dir.join("mm/vmalloc.c"), "edited\n").unwrap();
        let e = source_key(&dir).unwrap_err().to_string();
        assert!(
            e.contains("uncommitted changes (M mm/vmalloc.c)") && e.contains("commit or stash"),
            "{e}"
        );
    }
}
