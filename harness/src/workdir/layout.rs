//! `WorkDir`: every path under the work directory, named once. Modules ask
//! it for their paths instead of joining names onto the root, so `gc` and
//! `check` can list what the directory holds from one table ([`ENTRIES`]),
//! and a name no table row covers is shown, never guessed at.

use std::path::{Path, PathBuf};

/// What `gc` may do with an entry of the work directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Keep {
    /// Caches `gc` ages out by last use (kernels, tree copies, run images,
    /// `try` series, other versions' built-in files).
    Aged,
    /// Kept: state that is small or that a later run needs (locks, the
    /// history, calibration, the remembered KVM probe, the compiler cache).
    Always,
    /// Logs and scratch space, rewritten by the step that writes them.
    Scratch,
}

/// One entry of the work directory.
#[derive(Debug, Clone, Copy)]
pub struct Entry {
    /// Its name under the work directory (a prefix when it ends with `-`).
    pub name: &'static str,
    /// What it holds.
    pub holds: &'static str,
    /// What gc does with it.
    pub keep: Keep,
}

/// Every entry a harness writes under the work directory.
pub const ENTRIES: &[Entry] = &[
    entry(
        "lock",
        "the work directory's lock (runs share it; check, gc take it alone)",
        Keep::Always,
    ),
    entry(
        "locks",
        "step locks: the kernel tree, one kernel's cache key",
        Keep::Always,
    ),
    entry(
        "tree",
        "tree copies by source and patch stack, with their companions",
        Keep::Aged,
    ),
    entry("kernels", "built kernels by content key", Keep::Aged),
    entry("keys", "each run's and shard's SSH key and guest images", Keep::Aged),
    entry("try", "the series `try` was given, by content", Keep::Aged),
    entry(
        "builtin",
        "the built-in matrix and files, by harness version: builtin/<version>/",
        Keep::Aged,
    ),
    entry(
        "coverage",
        "the coverage cache: coverage/<base kernel>/<benchmark>.json and symbols, coverage/source/<source>/",
        Keep::Always,
    ),
    entry("ccache", "the compiler cache, when ccache is installed", Keep::Always),
    entry(
        "kvm-probe",
        "a failed KVM probe per host, remembered for a day: kvm-probe/<host>.json",
        Keep::Always,
    ),
    entry(
        "calibration.json",
        "the A/A floors of `harness calibrate`",
        Keep::Always,
    ),
    entry(
        "history.sqlite",
        "the nightly history (and its -wal, -shm files)",
        Keep::Always,
    ),
    entry("scratch", "patch dry runs", Keep::Scratch),
    entry(
        "try-preflight-",
        "a `try` pre-flight's scratch tree, by pid",
        Keep::Scratch,
    ),
    entry("check.log", "the last `harness check`", Keep::Scratch),
    entry("coverage.log", "the last coverage step", Keep::Scratch),
    entry("kvm-firmware-probe.log", "the last KVM firmware probe", Keep::Scratch),
    entry("try-format-patch.log", "the last `try` of a git range", Keep::Scratch),
];

const fn entry(name: &'static str, holds: &'static str, keep: Keep) -> Entry {
    Entry { name, holds, keep }
}

/// The entry a file name under the work directory belongs to, if any.
pub fn entry_of(name: &str) -> Option<&'static Entry> {
    ENTRIES.iter().find(|e| {
        if e.name.ends_with('-') {
            return name.starts_with(e.name) && name.len() > e.name.len();
        }
        // a SQLite database's companions are its own
        let companion =
            e.name.ends_with(".sqlite") && name.strip_prefix(e.name).is_some_and(|r| r == "-wal" || r == "-shm");
        name == e.name || companion
    })
}

/// The work directory (`--work-dir`): the one place that knows its layout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkDir {
    root: PathBuf,
}

impl WorkDir {
    /// The work directory at `root`.
    pub fn at(root: &Path) -> WorkDir {
        WorkDir {
            root: root.to_path_buf(),
        }
    }

    /// Its root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Makes its root, if it is not there yet.
    pub fn create(&self) -> anyhow::Result<()> {
        use anyhow::Context;
        std::fs::create_dir_all(&self.root).with_context(|| format!("create {}", self.root.display()))
    }

    /// Its root, for messages.
    pub fn display(&self) -> std::path::Display<'_> {
        self.root.display()
    }

    fn join(&self, name: &str) -> PathBuf {
        debug_assert!(entry_of(name).is_some(), "{name} is not in workdir::ENTRIES");
        self.root.join(name)
    }

    /// `lock`: the work directory's own lock file.
    pub fn lock_file(&self) -> PathBuf {
        self.join("lock")
    }

    /// `locks/`: step lock files.
    pub fn locks(&self) -> PathBuf {
        self.join("locks")
    }

    /// `tree/`: the tree copies and their companions.
    pub fn trees(&self) -> PathBuf {
        self.join("tree")
    }

    /// `tree/<key>`: one tree copy.
    pub fn tree(&self, key: &str) -> PathBuf {
        self.trees().join(key)
    }

    /// `tree/<key>.<what>`: a companion file of a tree copy (`applied.json`,
    /// `tinyconfig`, `last-used`).
    pub fn tree_companion(&self, key: &str, what: &str) -> PathBuf {
        self.trees().join(format!("{key}.{what}"))
    }

    /// `kernels/`: the kernel cache.
    pub fn kernels(&self) -> PathBuf {
        self.join("kernels")
    }

    /// `kernels/<key>`: one cached kernel.
    pub fn kernel(&self, key: &str) -> PathBuf {
        self.kernels().join(key)
    }

    /// `keys/`: run and shard images.
    pub fn keys(&self) -> PathBuf {
        self.join("keys")
    }

    /// `keys/<run-id>`: one run's key and images.
    pub fn run_keys(&self, run_id: &str) -> PathBuf {
        self.keys().join(run_id)
    }

    /// `try/`: series given to `try`.
    pub fn try_series(&self) -> PathBuf {
        self.join("try")
    }

    /// `builtin/`: built-in files by harness version.
    pub fn builtin(&self) -> PathBuf {
        self.join("builtin")
    }

    /// `builtin/<version>/`: one harness version's embedded files
    /// (`version` a digest of them).
    pub fn builtin_version(&self, version: &str) -> PathBuf {
        self.builtin().join(version)
    }

    /// `coverage/`: the coverage cache.
    pub fn coverage(&self) -> PathBuf {
        self.join("coverage")
    }

    /// `coverage/<base>/<benchmark>.json`: base kernel `base`'s calls per
    /// op in one benchmark, as its last run kept them.
    pub fn coverage_kept(&self, base: &str, benchmark: &str) -> PathBuf {
        self.coverage().join(base).join(format!("{benchmark}.json"))
    }

    /// `coverage/<base>/symbols`: base kernel `base`'s function names.
    pub fn coverage_symbols(&self, base: &str) -> PathBuf {
        self.coverage().join(base).join("symbols")
    }

    /// `coverage/source/<source>/`: pristine copies of the files series
    /// touch, as kernel source `source` holds them.
    pub fn coverage_source(&self, source: &str) -> PathBuf {
        self.coverage().join("source").join(source)
    }

    /// `ccache/`: the compiler cache.
    pub fn ccache(&self) -> PathBuf {
        self.join("ccache")
    }

    /// `kvm-probe/`: remembered KVM probe failures.
    pub fn kvm_probe(&self) -> PathBuf {
        self.join("kvm-probe")
    }

    /// `kvm-probe/<host>.json`: the failed KVM probe of one host, host
    /// kernel and QEMU (`host` a digest of the three).
    pub fn kvm_probe_record(&self, host: &str) -> PathBuf {
        self.kvm_probe().join(format!("{host}.json"))
    }

    /// `calibration.json`.
    pub fn calibration(&self) -> PathBuf {
        self.join("calibration.json")
    }

    /// `history.sqlite`: the default history database.
    pub fn history_db(&self) -> PathBuf {
        self.join("history.sqlite")
    }

    /// `scratch/`: patch dry runs.
    pub fn scratch(&self) -> PathBuf {
        self.join("scratch")
    }

    /// `try-preflight-<pid>`: a `try` pre-flight's scratch tree.
    pub fn try_preflight(&self, pid: u32) -> PathBuf {
        self.root.join(format!("try-preflight-{pid}"))
    }

    /// A step's log: `check`, `coverage`, `kvm-firmware-probe`,
    /// `try-format-patch` (`<step>.log`).
    pub fn log(&self, step: &str) -> PathBuf {
        self.join(&format!("{step}.log"))
    }

    /// What the directory holds that no [`ENTRIES`] row names: left alone
    /// by gc, listed by `check`.
    pub fn unknown_entries(&self) -> Vec<PathBuf> {
        let Ok(rd) = std::fs::read_dir(&self.root) else {
            return Vec::new();
        };
        let mut v: Vec<PathBuf> = rd
            .flatten()
            .filter(|e| entry_of(&e.file_name().to_string_lossy()).is_none())
            .map(|e| e.path())
            .collect();
        v.sort();
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_belongs_to_one_entry() {
        let cases = [
            ("kernels", Some("kernels")),
            ("history.sqlite", Some("history.sqlite")),
            ("history.sqlite-wal", Some("history.sqlite")),
            ("try-preflight-4242", Some("try-preflight-")),
            ("try-preflight-", None),
            ("check.log", Some("check.log")),
            ("kernelsx", None),
            ("tree.bak", None),
        ];
        for (name, want) in cases {
            assert_eq!(entry_of(name).map(|e| e.name), want, "{name}");
        }
        let names: std::collections::BTreeSet<_> = ENTRIES.iter().map(|e| e.name).collect();
        assert_eq!(names.len(), ENTRIES.len(), "a name listed twice");
    }

    #[test]
    fn paths_are_under_the_root_and_unknown_entries_are_listed() {
        let tmp = tempfile::tempdir().unwrap();
        let w = WorkDir::at(tmp.path());
        assert_eq!(w.kernel("k1"), tmp.path().join("kernels/k1"));
        assert_eq!(
            w.tree_companion("t", "applied.json"),
            tmp.path().join("tree/t.applied.json")
        );
        assert_eq!(w.log("check"), tmp.path().join("check.log"));
        for d in ["kernels", "tree", "stray"] {
            std::fs::create_dir(tmp.path().join(d)).unwrap();
        }
        std::fs::write(tmp.path().join("notes.txt"), "x").unwrap();
        assert_eq!(
            w.unknown_entries(),
            vec![tmp.path().join("notes.txt"), tmp.path().join("stray")]
        );
    }
}
