//! The stack of patches applied to a work tree, kept beside it so a run
//! that died is undone at the next start: each entry holds a copy of the
//! patch's own bytes (the file at the series path may have been edited or
//! split since) and the hash each file it touches had before it landed.
//! Undoing reverses those copies newest first, each dry-run before it lands,
//! then checks every touched file is back as it was; on any doubt (a copy
//! missing, a reversal that does not apply, a file that differs) the caller
//! makes the tree afresh.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::patch;

/// One patch as it was applied.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Landed {
    /// The patch file as the series names it.
    pub patch: PathBuf,
    /// Reverse-applied.
    pub reverse: bool,
    /// The copy of the bytes that were applied (absent in a stack an older
    /// harness wrote: that stack is undone by making the tree afresh).
    #[serde(default)]
    pub copy: Option<PathBuf>,
    /// Each touched file's SHA-256 before the patch landed (`None`: absent).
    #[serde(default)]
    pub before: BTreeMap<String, Option<String>>,
}

/// The stack file and the directory of copies of one tree.
pub struct Stack {
    /// `<tree>.applied.json`.
    pub file: PathBuf,
    /// `<tree>.applied/`: the copies.
    pub copies: PathBuf,
}

/// Whether undoing left the tree as it was before the first patch.
#[derive(Debug, PartialEq)]
pub enum Undone {
    /// Every patch reversed and every touched file as it was.
    Pristine,
    /// Something did not reverse or verify: the tree must be made afresh.
    /// The words say what.
    Doubt(String),
}

fn file_hash(p: &Path) -> Result<Option<String>> {
    match std::fs::read(p) {
        Ok(d) => Ok(Some(crate::util::hex(&Sha256::digest(d)))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e).with_context(|| format!("read {}", p.display())),
    }
}

impl Stack {
    /// The stack saved at `file`, its copies in `file` without `.json`.
    pub fn at(file: PathBuf) -> Stack {
        let copies = file.with_extension("");
        Stack { file, copies }
    }

    /// The entries, oldest first.
    pub fn read(&self) -> Result<Vec<Landed>> {
        match std::fs::read_to_string(&self.file) {
            Ok(s) => serde_json::from_str(&s).with_context(|| format!("read {}", self.file.display())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
            Err(e) => Err(e).with_context(|| format!("read {}", self.file.display())),
        }
    }

    fn write(&self, s: &[Landed]) -> Result<()> {
        crate::util::write_whole(&self.file, &serde_json::to_vec(s)?)
    }

    /// Records `p` (its bytes copied, the files it touches in `tree`
    /// hashed) before it lands, and returns the copy to apply.
    pub fn push(&self, tree: &Path, p: &Path, reverse: bool) -> Result<PathBuf> {
        // the copy holds the patch as it applies, decoded when it was saved from a mail
        let data = patch::read(p)?;
        let mut before = BTreeMap::new();
        for f in patch::files_in(&data, p)? {
            before.insert(f.clone(), file_hash(&tree.join(&f))?);
        }
        let mut stack = self.read()?;
        std::fs::create_dir_all(&self.copies).with_context(|| format!("create {}", self.copies.display()))?;
        let name = format!(
            "{:03}-{}",
            stack.len(),
            p.file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default()
        );
        let copy = self.copies.join(name);
        crate::util::write_whole(&copy, &data)?;
        let patch = std::fs::canonicalize(p).with_context(|| format!("resolve {}", p.display()))?;
        stack.push(Landed {
            patch,
            reverse,
            copy: Some(copy.clone()),
            before,
        });
        self.write(&stack)?;
        Ok(copy)
    }

    /// Reverses every entry, newest first, and checks the touched files.
    pub fn undo(&self, tree: &Path, log: &Path) -> Result<Undone> {
        let stack = self.read()?;
        // the earliest entry touching a file saw it as the clean tree had it
        let mut pristine: BTreeMap<&str, &Option<String>> = BTreeMap::new();
        for l in &stack {
            for (f, h) in &l.before {
                pristine.entry(f.as_str()).or_insert(h);
            }
        }
        for l in stack.iter().rev() {
            let Some(copy) = l.copy.as_ref().filter(|c| c.is_file()) else {
                return Ok(Undone::Doubt(format!(
                    "no copy of {} as it was applied",
                    l.patch.display()
                )));
            };
            if let Err(f) = patch::run_patch(tree, copy, !l.reverse, true, Some(log))? {
                return Ok(Undone::Doubt(format!("{} does not reverse ({f})", l.patch.display())));
            }
            if let Err(f) = patch::run_patch(tree, copy, !l.reverse, false, Some(log))? {
                return Ok(Undone::Doubt(format!(
                    "{} did not reverse after a clean dry run ({f})",
                    l.patch.display()
                )));
            }
        }
        for (f, want) in pristine {
            if file_hash(&tree.join(f))? != *want {
                return Ok(Undone::Doubt(format!("{f} is not as it was before the patches")));
            }
        }
        Ok(Undone::Pristine)
    }

    /// Files any entry touched (what a fresh checkout must restore).
    pub fn touched(&self) -> Result<Vec<String>> {
        let mut out: Vec<String> = self.read()?.into_iter().flat_map(|l| l.before.into_keys()).collect();
        out.sort();
        out.dedup();
        Ok(out)
    }

    /// Forgets every entry and its copy (the tree is clean).
    pub fn clear(&self) -> Result<()> {
        self.write(&[])?;
        match std::fs::remove_dir_all(&self.copies) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                Err(e).with_context(|| format!("remove {}", self.copies.display()))
            }
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::patch;
    use super::super::tree::Tree;
    use crate::kernel::patch::Series;
    use crate::workdir::WorkDir;
    use std::path::{Path, PathBuf};

    const TWO_FILES: &str =
        "--- a/mm/vmalloc.c\n+++ b/mm/vmalloc.c\n@@ -1 +1 @@\n-int vmap_lazy_nr;\n+long vmap_lazy_nr;\n\
                             --- a/Makefile\n+++ b/Makefile\n@@ -1 +1 @@\n-VERSION = 6\n+VERSION = 7\n";
    const ONE_FILE: &str =
        "--- a/mm/vmalloc.c\n+++ b/mm/vmalloc.c\n@@ -1 +1 @@\n-int vmap_lazy_nr;\n+long vmap_lazy_nr;\n";

    /// A directory source, a series of one two-file patch, the work tree.
    fn setup(root: &Path) -> (PathBuf, Series, Tree, PathBuf) {
        let src = root.join("linux");
        std::fs::create_dir_all(src.join("mm")).unwrap();
        std::fs::write(
            src.join("Makefile"),
            "VERSION = 6\nPATCHLEVEL = 12\nSUBLEVEL = 117\nEXTRAVERSION =\n",
        )
        .unwrap();
        std::fs::write(src.join("mm/vmalloc.c"), "int vmap_lazy_nr;\n").unwrap();
        std::fs::create_dir_all(root.join("patches/s")).unwrap();
        std::fs::write(root.join("patches/s/0001-x.patch"), TWO_FILES).unwrap();
        std::fs::write(root.join("patches/s/series"), "0001-x.patch\n").unwrap();
        let s = patch::load_series(&root.join("patches"), "s").unwrap();
        let log = root.join("tree.log");
        let tree = Tree::prepare(&src, &WorkDir::at(&root.join("work")), &log).unwrap();
        (src, s, tree, log)
    }

    fn assert_pristine(src: &Path, tree: &Tree) {
        for f in ["Makefile", "mm/vmalloc.c"] {
            assert_eq!(
                std::fs::read_to_string(tree.dir.join(f)).unwrap(),
                std::fs::read_to_string(src.join(f)).unwrap(),
                "{f}"
            );
        }
    }

    #[test]
    fn rollback_reverses_the_patch_that_was_applied_not_the_file_there_now() {
        let tmp = tempfile::tempdir().unwrap();
        let (src, s, tree, log) = setup(tmp.path());
        tree.apply_series(&s, false, &log).unwrap().unwrap();
        // the run dies; the user edits the patch, dropping the Makefile hunk
        std::fs::write(&s.patches[0], ONE_FILE).unwrap();
        let again = Tree::prepare(&src, &WorkDir::at(&tmp.path().join("work")), &log).unwrap();
        assert_pristine(&src, &again);
    }

    #[test]
    fn a_patch_cut_halfway_heals_at_the_next_start() {
        let tmp = tempfile::tempdir().unwrap();
        let (src, s, tree, log) = setup(tmp.path());
        tree.apply_series(&s, false, &log).unwrap().unwrap();
        // as if patch had been killed after its first file: the Makefile is back as it was
        std::fs::write(tree.dir.join("Makefile"), std::fs::read(src.join("Makefile")).unwrap()).unwrap();
        let again = Tree::prepare(&src, &WorkDir::at(&tmp.path().join("work")), &log).unwrap();
        assert_pristine(&src, &again);
        // and a tree changed by hand where a patch went is found and made afresh
        tree.apply_series(&s, false, &log).unwrap().unwrap();
        std::fs::write(tree.dir.join("mm/vmalloc.c"), "long vmap_lazy_nr;\nint stray;\n").unwrap();
        let again = Tree::prepare(&src, &WorkDir::at(&tmp.path().join("work")), &log).unwrap();
        assert_pristine(&src, &again);
        tree.apply_series(&s, false, &log).unwrap().unwrap();
        assert_eq!(
            std::fs::read_to_string(again.dir.join("Makefile"))
                .unwrap()
                .lines()
                .next(),
            Some("VERSION = 7")
        );
    }

    #[test]
    fn a_ref_clone_in_doubt_is_reset_to_its_commit() {
        if crate::proc::which("git").is_none() {
            return;
        }
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        let (src, s, _, log) = setup(root);
        let git = |args: &[&str]| {
            crate::proc::Cmd::new("git")
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
        let work = WorkDir::at(&root.join("work-ref"));
        let tree = Tree::prepare_ref(&src, "HEAD", &work, &log).unwrap();
        // a patch that also creates a file, then the patch is edited before the next start
        let creates = format!("{TWO_FILES}--- /dev/null\n+++ b/mm/new.c\n@@ -0,0 +1 @@\n+int added;\n");
        std::fs::write(&s.patches[0], &creates).unwrap();
        tree.apply_series(&s, false, &log).unwrap().unwrap();
        assert!(tree.dir.join("mm/new.c").is_file());
        std::fs::write(&s.patches[0], ONE_FILE).unwrap();
        let again = Tree::prepare_ref(&src, "HEAD", &work, &log).unwrap();
        assert_pristine(&src, &again);
        assert!(!again.dir.join("mm/new.c").exists(), "a file the patch created is gone");
        // in doubt (a hand edit where the patch went): reset to the commit, the created file cleaned
        std::fs::write(&s.patches[0], &creates).unwrap();
        again.apply_series(&s, false, &log).unwrap().unwrap();
        std::fs::write(again.dir.join("mm/vmalloc.c"), "long vmap_lazy_nr;\nint stray;\n").unwrap();
        std::fs::write(again.dir.join("mm/vmalloc.o"), "a build product").unwrap();
        let third = Tree::prepare_ref(&src, "HEAD", &work, &log).unwrap();
        assert_pristine(&src, &third);
        assert!(
            !third.dir.join("mm/new.c").exists() && third.dir.join("mm/vmalloc.o").is_file(),
            "only what the patches touched is cleaned"
        );
    }
}
