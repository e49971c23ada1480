//! `harness gc` and the disk-use figures of `harness check`: what the work
//! directory (`kernels/<key>` and their key locks, `tree/<key>` copies and
//! the companions of copies gone, the run and shard images
//! `keys/<run-id>/[shard-K-of-N/]*.cpio`, `try/<hash>` series, `builtin/<hash>`
//! of other harness versions) and the runs directory hold, when each kernel and tree was last used,
//! and which of them a policy lets go. Deciding is separate from deleting,
//! so a dry run prints exactly what `--yes` removes.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use anyhow::{Context, Result};
use serde::Serialize;

use crate::workdir::{WorkDir, LAST_USED};

/// What to keep: the `keep` most recently used of each kind, and everything
/// used within `days`.
#[derive(Debug, Clone, Copy)]
pub struct Policy {
    /// How many kernels, trees and run images to keep, newest use first.
    pub keep: usize,
    /// Also keep what was used within this many days.
    pub days: Option<u64>,
}

/// What runs not finished yet still need (a run with planned jobs that
/// never ended, its shards counted: a build whose shards have not run, a
/// run that died): gc keeps these whatever the policy. The run store
/// (its `pending` module) fills it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Needed {
    /// Kernel cache keys, each with the unfinished runs that need it.
    pub kernels: BTreeMap<String, BTreeSet<String>>,
    /// Run ids (`work/keys/<run-id>/`) whose images stay.
    pub runs: BTreeSet<String>,
}

/// Something gc would delete.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Victim {
    /// File or directory.
    pub path: PathBuf,
    /// Bytes on disk.
    pub bytes: u64,
    /// Why it goes.
    pub why: String,
}

/// Bytes on disk under `p` (allocated blocks; symlinks are not followed).
pub fn disk_usage(p: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    let Ok(m) = std::fs::symlink_metadata(p) else { return 0 };
    let mut n = m.blocks() * 512;
    if m.is_dir() {
        if let Ok(rd) = std::fs::read_dir(p) {
            n += rd.flatten().map(|e| disk_usage(&e.path())).sum::<u64>();
        }
    }
    n
}

pub use crate::util::human;

fn mtime(p: &Path) -> Option<SystemTime> {
    std::fs::symlink_metadata(p).ok()?.modified().ok()
}

/// One kept-or-deleted unit: its files, its last use.
struct Unit {
    name: String,
    paths: Vec<PathBuf>,
    used: SystemTime,
}

fn entries(dir: &Path) -> Vec<(String, PathBuf)> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut v: Vec<(String, PathBuf)> = rd
        .flatten()
        .map(|e| (e.file_name().to_string_lossy().into_owned(), e.path()))
        .collect();
    v.sort();
    v
}

/// Kernels: `kernels/<key>/` (last use: its `last-used` file, else the
/// directory); `<key>.partial` is an interrupted build.
fn kernels(work: &WorkDir, needed: &Needed, out: &mut Vec<Victim>) -> Vec<Unit> {
    let mut units = Vec::new();
    for (name, p) in entries(&work.kernels()) {
        if needed.kernels.contains_key(&name) {
            continue;
        }
        if name.ends_with(".partial") {
            out.push(Victim {
                bytes: disk_usage(&p),
                path: p,
                why: "an interrupted build".into(),
            });
        } else if p.is_dir() {
            let used = mtime(&p.join(LAST_USED))
                .or_else(|| mtime(&p))
                .unwrap_or(SystemTime::UNIX_EPOCH);
            units.push(Unit {
                name,
                paths: vec![p],
                used,
            });
        }
    }
    units
}

/// Trees: `tree/<key>/` with its companions `tree/<key>.*` (patch stack,
/// cached base configs, `last-used`); `<key>.partial` is an interrupted copy.
fn trees(work: &WorkDir, out: &mut Vec<Victim>) -> Vec<Unit> {
    let all = entries(&work.trees());
    let mut units = Vec::new();
    for (name, p) in &all {
        if name.ends_with(".partial") {
            out.push(Victim {
                bytes: disk_usage(p),
                path: p.clone(),
                why: "an interrupted copy".into(),
            });
        } else if p.is_dir() {
            let prefix = format!("{name}.");
            let mut paths = vec![p.clone()];
            paths.extend(
                all.iter()
                    .filter(|(n, _)| n.starts_with(&prefix) && !n.ends_with(".partial"))
                    .map(|(_, q)| q.clone()),
            );
            let marker = p.with_file_name(format!("{name}.{LAST_USED}"));
            let used = mtime(&marker).or_else(|| mtime(p)).unwrap_or(SystemTime::UNIX_EPOCH);
            units.push(Unit {
                name: name.clone(),
                paths,
                used,
            });
        }
    }
    units
}

/// The `.cpio` files in `dir`.
fn cpios(dir: &Path) -> impl Iterator<Item = PathBuf> {
    entries(dir)
        .into_iter()
        .filter(|(n, _)| n.ends_with(".cpio"))
        .map(|(_, q)| q)
}

/// Whether run `id` (or one of its shards) wrote an event within the hour:
/// it may still be booting from its images. A time in the future (a clock
/// skewed against the file server's) is fresh.
fn busy(runs: &Path, id: &str) -> bool {
    let young = |p: &Path| mtime(p).is_some_and(|t| age(t, SystemTime::now()) < Duration::from_secs(3600));
    let run = runs.join(id);
    young(&run.join("events.jsonl"))
        || entries(&run.join("shards"))
            .iter()
            .any(|(_, p)| young(&p.join("events.jsonl")))
}

/// Run images: the `work/keys/<run-id>/*.cpio` files of each run and of
/// its shards (`shard-K-of-N/*.cpio`; they carry its host key; remade by
/// `--resume`). The keys themselves stay.
fn run_images(work: &WorkDir, runs: &Path, needed: &Needed) -> Vec<Unit> {
    let mut units = Vec::new();
    for (name, p) in entries(&work.keys()) {
        let mut cpios: Vec<PathBuf> = cpios(&p).collect();
        for (_, shard) in entries(&p)
            .into_iter()
            .filter(|(n, q)| n.starts_with("shard-") && q.is_dir())
        {
            cpios.extend(self::cpios(&shard));
        }
        if cpios.is_empty() || busy(runs, &name) || needed.runs.contains(&name) {
            continue;
        }
        let used = cpios
            .iter()
            .filter_map(|c| mtime(c))
            .max()
            .unwrap_or(SystemTime::UNIX_EPOCH);
        units.push(Unit {
            name,
            paths: cpios,
            used,
        });
    }
    units
}

/// How long before `now` a thing was last used at `used`: zero for a time
/// after `now` (a clock skewed against the file server's), which is fresh,
/// never idle.
fn age(used: SystemTime, now: SystemTime) -> Duration {
    now.duration_since(used).unwrap_or(Duration::ZERO)
}

fn select(mut units: Vec<Unit>, what: &str, policy: Policy, now: SystemTime, out: &mut Vec<Victim>) {
    units.sort_by(|a, b| b.used.cmp(&a.used).then_with(|| a.name.cmp(&b.name)));
    for (i, u) in units.into_iter().enumerate() {
        let age = age(u.used, now);
        let young = policy.days.is_some_and(|d| age < Duration::from_secs(d * 86_400));
        if i < policy.keep || young {
            continue;
        }
        let days = age.as_secs() / 86_400;
        for p in u.paths {
            let why = format!(
                "{what} {} last used {days} day(s) ago, not among the {} newest",
                u.name, policy.keep
            );
            out.push(Victim {
                bytes: disk_usage(&p),
                path: p,
                why,
            });
        }
    }
}

/// Directories of `dir` as units, last used when last modified (`try`'s
/// series, the embedded files of each harness version), but `except`.
fn dirs(dir: &Path, except: Option<&Path>) -> Vec<Unit> {
    entries(dir)
        .into_iter()
        .filter(|(_, p)| p.is_dir() && Some(p.as_path()) != except)
        .map(|(name, p)| Unit {
            name,
            used: mtime(&p).unwrap_or(SystemTime::UNIX_EPOCH),
            paths: vec![p],
        })
        .collect()
}

/// The companions `tree/<key>.*` of a tree copy no longer there.
fn orphans(work: &WorkDir, out: &mut Vec<Victim>) {
    for (name, p) in &entries(&work.trees()) {
        let Some((key, _)) = name.split_once('.') else { continue };
        if !name.ends_with(".partial") && !work.tree(key).is_dir() {
            out.push(Victim {
                bytes: disk_usage(p),
                path: p.clone(),
                why: format!("belongs to tree copy gone {key}"),
            });
        }
    }
}

/// Everything `policy` lets go under `work` and `runs`, as of `now`, but
/// what unfinished runs still need.
pub fn plan(work: &WorkDir, runs: &Path, policy: Policy, now: SystemTime, needed: &Needed) -> Vec<Victim> {
    let mut out = Vec::new();
    let k = kernels(work, needed, &mut out);
    let before = out.len();
    select(k, "kernel", policy, now, &mut out);
    // a deleted kernel's key lock goes with it (gc holds the work directory: no run holds a key)
    let locks: Vec<PathBuf> = out[before..]
        .iter()
        .filter_map(|v| v.path.file_name())
        .map(|n| crate::workdir::lock_path(work, &format!("kernel-{}", n.to_string_lossy())))
        .filter(|p| p.is_file())
        .collect();
    out.extend(locks.into_iter().map(|path| Victim {
        bytes: disk_usage(&path),
        path,
        why: "the lock of a deleted kernel".into(),
    }));
    let t = trees(work, &mut out);
    select(t, "tree", policy, now, &mut out);
    orphans(work, &mut out);
    select(run_images(work, runs, needed), "image of run", policy, now, &mut out);
    select(dirs(&work.try_series(), None), "try series", policy, now, &mut out);
    let current = crate::builtin::dir(work);
    select(
        dirs(&work.builtin(), Some(&current)),
        "embedded files of another harness",
        policy,
        now,
        &mut out,
    );
    out
}

/// Deletes the victims; the caller holds the work-directory lock.
pub fn delete(victims: &[Victim]) -> Result<()> {
    for v in victims {
        let r = if std::fs::symlink_metadata(&v.path).map(|m| m.is_dir()).unwrap_or(false) {
            std::fs::remove_dir_all(&v.path)
        } else {
            std::fs::remove_file(&v.path)
        };
        match r {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(e).with_context(|| format!("delete {}", v.path.display()))
            }
            _ => {}
        }
    }
    Ok(())
}

/// Disk use of the work directory's kernels and trees and of the runs
/// directory: `(what, bytes, entries)`.
pub fn usage(work: &WorkDir, runs: &Path) -> Vec<(String, u64, usize)> {
    let count = |d: &Path| {
        entries(d)
            .iter()
            .filter(|(n, p)| p.is_dir() && !n.ends_with(".partial"))
            .count()
    };
    let (k, t) = (work.kernels(), work.trees());
    let mut v = vec![
        (format!("{} (kernels)", k.display()), disk_usage(&k), count(&k)),
        (format!("{} (tree copies)", t.display()), disk_usage(&t), count(&t)),
        (format!("{} (runs)", runs.display()), disk_usage(runs), count(runs)),
    ];
    // what no harness wrote there: gc leaves it, `check` names it
    v.extend(work.unknown_entries().into_iter().map(|p| {
        (
            format!("{} (not the harness's: gc keeps it)", p.display()),
            disk_usage(&p),
            1,
        )
    }));
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put(p: &Path, bytes: usize) {
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, vec![b'x'; bytes]).unwrap();
    }

    fn age(p: &Path, days: u64) {
        let t = SystemTime::now() - Duration::from_secs(days * 86_400);
        std::fs::File::open(p).unwrap().set_modified(t).unwrap();
    }

    #[test]
    fn keeps_the_newest_and_the_young_and_names_the_rest() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().to_path_buf();
        let (work, runs) = (root.join("work"), root.join("runs"));
        let wd = WorkDir::at(&work);
        for (key, days) in [("k1", 1), ("k2", 10), ("k3", 30)] {
            put(&work.join("kernels").join(key).join("bzImage"), 5000);
            put(&work.join("kernels").join(key).join(LAST_USED), 1);
            age(&work.join("kernels").join(key).join(LAST_USED), days);
        }
        put(&work.join("kernels/k4.partial/bzImage"), 10);
        for (key, days) in [("t1", 2), ("t2", 40)] {
            put(&work.join("tree").join(key).join("Makefile"), 100);
            put(&work.join("tree").join(format!("{key}.applied.json")), 2);
            put(&work.join("tree").join(format!("{key}.tinyconfig")), 2);
            put(&work.join("tree").join(format!("{key}.{LAST_USED}")), 1);
            age(&work.join("tree").join(format!("{key}.{LAST_USED}")), days);
        }
        for (id, days) in [("r1", 0), ("r2", 5)] {
            put(&work.join("keys").join(id).join("base.cpio"), 3000);
            put(&work.join("keys").join(id).join("id_ed25519"), 400);
            put(&runs.join(id).join("samples.jsonl"), 10);
            put(&runs.join(id).join("events.jsonl"), 10);
            age(&runs.join(id).join("events.jsonl"), 1);
            age(&work.join("keys").join(id).join("base.cpio"), days);
        }

        let v = plan(
            &wd,
            &runs,
            Policy { keep: 1, days: None },
            SystemTime::now(),
            &Needed::default(),
        );
        let names: Vec<String> = v
            .iter()
            .map(|v| v.path.strip_prefix(&root).unwrap().display().to_string())
            .collect();
        assert_eq!(
            names,
            [
                "work/kernels/k4.partial",
                "work/kernels/k2",
                "work/kernels/k3",
                "work/tree/t2",
                "work/tree/t2.applied.json",
                "work/tree/t2.last-used",
                "work/tree/t2.tinyconfig",
                "work/keys/r2/base.cpio",
            ]
        );
        assert!(
            v[1].why.contains("kernel k2 last used 10 day(s) ago") && v[1].bytes >= 5000,
            "{:?}",
            v[1]
        );
        // younger than 15 days is kept too
        let v = plan(
            &wd,
            &runs,
            Policy {
                keep: 1,
                days: Some(15),
            },
            SystemTime::now(),
            &Needed::default(),
        );
        assert!(
            !v.iter()
                .any(|v| v.path.ends_with("k2") || v.path.ends_with("r2/base.cpio")),
            "{v:?}"
        );
        assert!(v.iter().any(|v| v.path.ends_with("k3")));

        // a dry run deletes nothing; delete removes exactly the plan
        assert!(work.join("kernels/k3/bzImage").exists());
        delete(&v).unwrap();
        assert!(
            !work.join("kernels/k3").exists()
                && !work.join("tree/t2").exists()
                && !work.join("tree/t2.tinyconfig").exists()
        );
        assert!(
            work.join("kernels/k1/bzImage").exists()
                && work.join("kernels/k2").exists()
                && work.join("tree/t1.applied.json").exists()
        );
        assert!(
            runs.join("r2/samples.jsonl").exists() && work.join("keys/r2/id_ed25519").exists(),
            "only images go"
        );
        assert!(plan(
            &wd,
            &runs,
            Policy {
                keep: 1,
                days: Some(15)
            },
            SystemTime::now(),
            &Needed::default()
        )
        .is_empty());
        // a run still writing events keeps its image whatever the policy
        put(&runs.join("r1/events.jsonl"), 10);
        assert!(plan(
            &wd,
            &runs,
            Policy { keep: 0, days: None },
            SystemTime::now(),
            &Needed::default()
        )
        .iter()
        .all(|v| !v.path.starts_with(work.join("keys/r1"))));

        let u = usage(&wd, &runs);
        assert_eq!((u[0].2, u[1].2, u[2].2), (2, 1, 2), "{u:?}");
        assert!(u[0].1 >= 10_000);
    }

    /// Shard images, `try` series, old embedded files, orphaned tree
    /// companions and the locks of deleted kernels are seen too; a shard
    /// still writing keeps its images, and the embedded files of this
    /// harness always stay.
    #[test]
    fn gc_sees_shard_images_try_series_old_builtins_and_orphans() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().to_path_buf();
        let (work, runs) = (root.join("work"), root.join("runs"));
        let wd = WorkDir::at(&work);
        for (id, days) in [("r1", 9), ("r2", 5), ("r3", 3)] {
            put(&work.join("keys").join(id).join("shard-0-of-2/base.cpio"), 3000);
            put(&work.join("keys").join(id).join("shard-1-of-2/base.cpio"), 3000);
            put(&runs.join(id).join("events.jsonl"), 10);
            age(&runs.join(id).join("events.jsonl"), days);
            for k in 0..2 {
                let e = runs.join(id).join(format!("shards/{k}-of-2/events.jsonl"));
                put(&e, 10);
                age(&e, days);
                age(
                    &work.join("keys").join(id).join(format!("shard-{k}-of-2/base.cpio")),
                    days,
                );
            }
        }
        // shard 1 of r2 still writes: the run keeps its images
        put(&runs.join("r2/shards/1-of-2/events.jsonl"), 10);
        for (h, days) in [("a1", 1), ("a2", 20)] {
            put(&work.join("try").join(h).join("series"), 10);
            age(&work.join("try").join(h), days);
        }
        let current = crate::builtin::dir(&wd);
        put(&current.join("matrix.yaml"), 10);
        age(&current, 50);
        for (h, days) in [("b1", 2), ("b2", 30)] {
            put(&work.join("builtin").join(h).join("matrix.yaml"), 10);
            age(&work.join("builtin").join(h), days);
        }
        put(&work.join("tree/gone.applied.json"), 2);
        put(&work.join("tree/gone.tinyconfig"), 2);
        put(&work.join("tree/gone.applied/0001.patch"), 2);
        for (key, days) in [("k1", 1), ("k2", 10)] {
            put(&work.join("kernels").join(key).join("bzImage"), 5000);
            put(&work.join("kernels").join(key).join(LAST_USED), 1);
            age(&work.join("kernels").join(key).join(LAST_USED), days);
            put(&crate::workdir::lock_path(&wd, &format!("kernel-{key}")), 0);
        }

        let v = plan(
            &wd,
            &runs,
            Policy { keep: 1, days: None },
            SystemTime::now(),
            &Needed::default(),
        );
        let names: Vec<String> = v
            .iter()
            .map(|v| v.path.strip_prefix(&root).unwrap().display().to_string())
            .collect();
        assert_eq!(
            names,
            [
                "work/kernels/k2",
                "work/locks/kernel-k2",
                "work/tree/gone.applied",
                "work/tree/gone.applied.json",
                "work/tree/gone.tinyconfig",
                "work/keys/r1/shard-0-of-2/base.cpio",
                "work/keys/r1/shard-1-of-2/base.cpio",
                "work/try/a2",
                "work/builtin/b2",
            ]
        );
        assert!(v[2].why.contains("tree copy gone"), "{:?}", v[2]);
        // every entry the layout says gc ages is one gc looks at (tree: its orphans here)
        for e in crate::workdir::ENTRIES
            .iter()
            .filter(|e| e.keep == crate::workdir::Keep::Aged)
        {
            let under = format!("work/{}/", e.name);
            assert!(
                names.iter().any(|n| n.starts_with(&under)),
                "gc never ages {under}: {names:?}"
            );
        }
        // what no harness wrote is not touched, and `check` names it
        put(&work.join("my-notes/todo"), 10);
        age(&work.join("my-notes"), 400);
        let again = plan(
            &wd,
            &runs,
            Policy { keep: 0, days: None },
            SystemTime::now(),
            &Needed::default(),
        );
        assert!(again.iter().all(|v| !v.path.starts_with(work.join("my-notes"))));
        assert!(usage(&wd, &runs)
            .iter()
            .any(|(what, _, _)| what.contains("my-notes (not the harness's")));
    }

    /// Issue 30: what an unfinished run needs stays whatever the policy:
    /// the kernels of the jobs it owes (with their locks) and its images.
    #[test]
    fn what_unfinished_runs_need_is_kept() {
        let tmp = tempfile::tempdir().unwrap();
        let (work, runs) = (tmp.path().join("work"), tmp.path().join("runs"));
        let wd = WorkDir::at(&work);
        for (key, days) in [("k1", 1), ("k2", 30)] {
            put(&work.join("kernels").join(key).join(LAST_USED), 1);
            age(&work.join("kernels").join(key).join(LAST_USED), days);
            put(&crate::workdir::lock_path(&wd, &format!("kernel-{key}")), 0);
        }
        for id in ["r1", "r2"] {
            put(&work.join("keys").join(id).join("shard-0-of-2/base.cpio"), 10);
            age(&work.join("keys").join(id).join("shard-0-of-2/base.cpio"), 30);
        }
        let policy = Policy { keep: 0, days: None };
        let gone = |needed: &Needed| -> Vec<String> {
            let mut v: Vec<String> = plan(&wd, &runs, policy, SystemTime::now(), needed)
                .iter()
                .map(|v| v.path.strip_prefix(&work).unwrap().display().to_string())
                .collect();
            v.sort();
            v
        };
        assert_eq!(
            gone(&Needed::default()),
            [
                "kernels/k1",
                "kernels/k2",
                "keys/r1/shard-0-of-2/base.cpio",
                "keys/r2/shard-0-of-2/base.cpio",
                "locks/kernel-k1",
                "locks/kernel-k2",
            ]
        );
        let needed = Needed {
            kernels: [("k2".to_string(), ["r2".to_string()].into())].into(),
            runs: ["r2".to_string()].into(),
        };
        assert_eq!(
            gone(&needed),
            ["kernels/k1", "keys/r1/shard-0-of-2/base.cpio", "locks/kernel-k1"]
        );
    }

    /// Issue 30: a time in the future (clock skew on NFS) is fresh: a run
    /// whose events are stamped ahead keeps its images, and a kernel used
    /// "tomorrow" is the newest and young.
    #[test]
    fn a_future_mtime_is_fresh() {
        let tmp = tempfile::tempdir().unwrap();
        let (work, runs) = (tmp.path().join("work"), tmp.path().join("runs"));
        let wd = WorkDir::at(&work);
        let ahead = |p: &Path| {
            let t = SystemTime::now() + Duration::from_secs(2 * 86_400);
            std::fs::File::open(p).unwrap().set_modified(t).unwrap();
        };
        for (id, days) in [("skewed", 20), ("idle", 30), ("idler", 40)] {
            put(&work.join("keys").join(id).join("base.cpio"), 10);
            age(&work.join("keys").join(id).join("base.cpio"), days);
            put(&runs.join(id).join("events.jsonl"), 10);
            age(&runs.join(id).join("events.jsonl"), days);
        }
        ahead(&runs.join("skewed/events.jsonl"));
        for (key, days) in [("k1", 5), ("k2", 1)] {
            put(&work.join("kernels").join(key).join(LAST_USED), 1);
            age(&work.join("kernels").join(key).join(LAST_USED), days);
        }
        ahead(&work.join("kernels/k1").join(LAST_USED));
        let names = |policy: Policy| -> Vec<String> {
            let mut v: Vec<String> = plan(&wd, &runs, policy, SystemTime::now(), &Needed::default())
                .iter()
                .map(|v| v.path.strip_prefix(&work).unwrap().display().to_string())
                .collect();
            v.sort();
            v
        };
        assert_eq!(
            names(Policy { keep: 1, days: None }),
            ["kernels/k2", "keys/idler/base.cpio"],
            "the skewed run is busy (idle is the newest image left); k1 is the newest kernel"
        );
        assert_eq!(
            names(Policy { keep: 0, days: Some(1) }),
            ["kernels/k2", "keys/idle/base.cpio", "keys/idler/base.cpio"],
            "k1, used in the future, is younger than a day; the skewed run is busy"
        );
    }

    #[test]
    fn sizes_read_well() {
        assert_eq!(human(512), "512 B");
        assert_eq!(human(1536), "1.5 KiB");
        assert_eq!(human(3 * 1024 * 1024 * 1024), "3.0 GiB");
    }
}
