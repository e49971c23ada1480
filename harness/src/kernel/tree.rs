//! The harness's own copy of the kernel source, under the work directory.
//! It is made from a tarball, a git tree (`git archive HEAD`) or a plain
//! directory, and the user's tree is only ever read. Patches applied to the
//! copy are recorded in a stack file before they land, so an interrupted run
//! is rolled back to the pristine tree at the next start.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::patch::{self, Failure, Series};
use crate::proc::Cmd;

/// One patch applied to the work tree.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Applied {
    /// The patch file.
    pub patch: PathBuf,
    /// Reverse-applied.
    pub reverse: bool,
}

/// The work tree.
pub struct Tree {
    /// The source directory (in-tree build).
    pub dir: PathBuf,
    /// Identity of the source it came from.
    pub key: String,
    stack_file: PathBuf,
}

/// Identity of a source: path plus size and mtime for files, HEAD for git.
pub fn source_key(source: &Path) -> Result<String> {
    let meta = std::fs::metadata(source).with_context(|| {
        format!("find the kernel source {} (install linux-source-6.12 or set kernel.source)", source.display())
    })?;
    let mut h = Sha256::new();
    h.update(source.to_string_lossy().as_bytes());
    if meta.is_dir() && source.join(".git").exists() {
        let f = Cmd::new("git").arg("-C").arg(source).args(["rev-parse", "HEAD"]).capture().run_ok()?;
        h.update(f.output.trim().as_bytes());
    } else {
        h.update(meta.len().to_le_bytes());
        if let Ok(m) = meta.modified() {
            h.update(format!("{m:?}").as_bytes());
        }
    }
    Ok(hex(&h.finalize()[..8]))
}

/// Lowercase hex of bytes.
pub fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

impl Tree {
    /// Makes (or reuses) the work copy of `source` under `work`, and rolls
    /// back whatever an interrupted run left applied.
    pub fn prepare(source: &Path, work: &Path, log: &Path) -> Result<Tree> {
        let key = source_key(source)?;
        let dir = work.join("tree").join(&key);
        let stack_file = work.join("tree").join(format!("{key}.applied.json"));
        let tree = Tree { dir: dir.clone(), key, stack_file };
        if !dir.join("Makefile").is_file() {
            tree.extract(source, log)?;
        }
        tree.rollback(log)?;
        Ok(tree)
    }

    fn extract(&self, source: &Path, log: &Path) -> Result<()> {
        let tmp = self.dir.with_extension("partial");
        if tmp.exists() {
            std::fs::remove_dir_all(&tmp).with_context(|| format!("remove {}", tmp.display()))?;
        }
        std::fs::create_dir_all(&tmp).with_context(|| format!("create {}", tmp.display()))?;
        let meta = std::fs::metadata(source)?;
        if meta.is_file() {
            Cmd::new("tar")
                .arg("-xf")
                .arg(source)
                .arg("-C")
                .arg(&tmp)
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
            Cmd::new("tar").arg("-xf").arg(&tar).arg("-C").arg(&tmp).log(log).run_ok()?;
            std::fs::remove_file(&tar).ok();
        } else {
            Cmd::new("cp").arg("-a").arg(source.join(".")).arg(&tmp).log(log).run_ok().context("copy the source tree")?;
        }
        if !tmp.join("Makefile").is_file() {
            bail!("{} does not hold a kernel tree (no top-level Makefile)", source.display());
        }
        std::fs::rename(&tmp, &self.dir).with_context(|| format!("move the tree into {}", self.dir.display()))?;
        Ok(())
    }

    fn stack(&self) -> Result<Vec<Applied>> {
        match std::fs::read_to_string(&self.stack_file) {
            Ok(s) => serde_json::from_str(&s).with_context(|| format!("read {}", self.stack_file.display())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
            Err(e) => Err(e).with_context(|| format!("read {}", self.stack_file.display())),
        }
    }

    fn set_stack(&self, s: &[Applied]) -> Result<()> {
        let tmp = self.stack_file.with_extension("tmp");
        std::fs::write(&tmp, serde_json::to_vec(s)?)?;
        std::fs::rename(&tmp, &self.stack_file).with_context(|| format!("write {}", self.stack_file.display()))
    }

    /// Undoes every applied patch, newest first.
    pub fn rollback(&self, log: &Path) -> Result<()> {
        let mut stack = self.stack()?;
        while let Some(top) = stack.last().cloned() {
            if let Err(f) = patch::run_patch(&self.dir, &top.patch, !top.reverse, false, Some(log))? {
                bail!(
                    "roll the work tree back ({f}); delete {} to start from a fresh copy",
                    self.dir.display()
                );
            }
            stack.pop();
            self.set_stack(&stack)?;
        }
        Ok(())
    }

    /// Applies (or reverses) a whole series. Each patch is dry-run first, so
    /// a failure leaves no half-applied patch; earlier patches of the series
    /// are rolled back by the caller's next [`Tree::rollback`].
    pub fn apply_series(&self, s: &Series, reverse: bool, log: &Path) -> Result<Result<(), Failure>> {
        let order: Vec<&PathBuf> = if reverse { s.patches.iter().rev().collect() } else { s.patches.iter().collect() };
        for p in order {
            if let Err(f) = patch::run_patch(&self.dir, p, reverse, true, Some(log))? {
                return Ok(Err(f));
            }
            let mut stack = self.stack()?;
            stack.push(Applied { patch: std::fs::canonicalize(p)?, reverse });
            self.set_stack(&stack)?;
            if let Err(f) = patch::run_patch(&self.dir, p, reverse, false, Some(log))? {
                // a dry run passed; a real failure here means the tree changed under us
                stack.pop();
                self.set_stack(&stack)?;
                bail!("apply {} after a clean dry run: {f}", p.display());
            }
        }
        Ok(Ok(()))
    }

    /// The kernel version of the tree (`6.12.117`).
    pub fn version(&self) -> Result<String> {
        let mk = std::fs::read_to_string(self.dir.join("Makefile"))?;
        let get = |k: &str| {
            mk.lines()
                .find_map(|l| l.strip_prefix(k).map(|r| r.trim_start_matches([' ', '=']).trim().to_string()))
                .unwrap_or_default()
        };
        Ok(format!("{}.{}.{}{}", get("VERSION"), get("PATCHLEVEL"), get("SUBLEVEL"), get("EXTRAVERSION")))
    }
}
