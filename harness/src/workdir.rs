//! The work directory's shared state (L2): its layout ([`WorkDir`], every
//! path under it named once), its lock, and the last-use markers of the
//! kernels and tree copies it caches (what `gc` reads).

mod layout;

use std::path::Path;

pub use layout::{entry_of, Entry, Keep, WorkDir, ENTRIES};

use anyhow::{bail, Context, Result};

use crate::util::Flock;

/// File beside (trees) or inside (kernels) an entry whose mtime is its last use.
pub const LAST_USED: &str = "last-used";

/// Records that a kernel directory or tree was used now.
pub fn touch(marker: &Path) {
    // best effort: a read-only cache is still a cache
    let _ = std::fs::write(marker, crate::util::now_rfc3339());
}

/// A lock on the work directory, held for the process lifetime: shared by
/// the runs, builds and shards that use its tree and kernels (any number at
/// once), exclusive for `check` and `gc --yes`, which wait for none of them.
pub struct WorkLock {
    _lock: Flock,
}

/// How `run` waits for a `check` or `gc --yes` to release the work
/// directory.
pub const BRIEF_HOLDER_WAIT: std::time::Duration = std::time::Duration::from_secs(600);

/// Who holds the work directory when only shared holders do.
pub const SHARED_HOLDERS: &str = "runs or shards are using its tree and kernels";

impl WorkLock {
    /// Takes the lock exclusively for the command `what` or explains who holds it.
    pub fn acquire(work: &WorkDir, what: &str) -> Result<WorkLock> {
        match WorkLock::try_acquire(work, what)? {
            Ok(l) => Ok(l),
            Err(holder) if holder == SHARED_HOLDERS => {
                bail!("lock the work directory {}: {holder}; run it again when they have ended", work.display())
            }
            Err(holder) => bail!(
                "lock the work directory {}: another harness ({holder}) is using it; wait for it or pass a different --work-dir",
                work.display()
            ),
        }
    }

    /// Takes a shared lock for a run, build or shard (`what`), which other
    /// runs share; while a `check` or `gc --yes` (which hold it for
    /// seconds to minutes) has it exclusively, waits up to `limit`, saying
    /// so once through `notice`.
    pub fn share_waiting(
        work: &WorkDir,
        what: &str,
        limit: std::time::Duration,
        notice: impl Fn(&str),
    ) -> Result<WorkLock> {
        work.create()?;
        let p = work.lock_file();
        let until = std::time::Instant::now() + limit;
        let mut told = false;
        loop {
            if let Some(l) = Flock::try_share(&p)? {
                return Ok(WorkLock { _lock: l });
            }
            let holder = Flock::holder(&p).unwrap_or_else(|| "another harness".into());
            if std::time::Instant::now() > until {
                bail!("lock the work directory {} for {what}: {holder} has held it for {} min; wait for it or pass a different --work-dir", work.display(), limit.as_secs() / 60);
            }
            if !told {
                notice(&format!(
                    "waiting for the work directory {} ({holder} holds it; up to {} min)",
                    work.display(),
                    limit.as_secs() / 60
                ));
                told = true;
            }
            crate::proc::check_interrupted()?;
            std::thread::sleep(std::time::Duration::from_millis(500));
        }
    }

    /// Takes the lock exclusively if it is free; `Ok(Err(holder))` names
    /// who holds it ([`SHARED_HOLDERS`] when runs do).
    pub fn try_acquire(work: &WorkDir, what: &str) -> Result<std::result::Result<WorkLock, String>> {
        work.create()?;
        let p = work.lock_file();
        Ok(match Flock::try_take(&p, what)? {
            Ok(l) => Ok(WorkLock { _lock: l }),
            // a shared lock is to be had: only runs hold it (they write no name)
            Err(_) if Flock::try_share(&p)?.is_some() => Err(SHARED_HOLDERS.to_string()),
            Err(holder) => Err(holder),
        })
    }
}

/// `work/locks/<name>`: the lock files of steps runs take turns at.
pub fn lock_path(work: &WorkDir, name: &str) -> std::path::PathBuf {
    work.locks().join(name)
}

/// Takes the exclusive lock `work/locks/<name>` on `what` (the shared
/// kernel tree, one kernel's cache key) for `by` (the holder's name in the
/// lock file: `run <id>`), waiting for as long as another run holds it,
/// saying so once through `notice`; an interruption ends the wait.
pub fn lock_waiting(work: &WorkDir, name: &str, what: &str, by: &str, notice: impl Fn(&str)) -> Result<Flock> {
    let p = lock_path(work, name);
    std::fs::create_dir_all(p.parent().unwrap_or(work.root()))
        .with_context(|| format!("create {}", work.locks().display()))?;
    let mut told = false;
    loop {
        match Flock::try_take(&p, by)? {
            Ok(l) => return Ok(l),
            Err(holder) if !told => {
                notice(&format!("waiting for {what} ({holder} holds it)"));
                told = true;
            }
            Err(_) => {}
        }
        crate::proc::check_interrupted()?;
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs share the work directory; `check` and `gc --yes` take it
    /// exclusively, refused while runs hold it, naming them.
    #[test]
    fn runs_share_the_work_directory_and_gc_is_refused_while_they_do() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().to_path_buf();
        let wait = std::time::Duration::from_secs(5);
        let a = WorkLock::share_waiting(&WorkDir::at(&dir), "run", wait, |_| {}).unwrap();
        let t = std::time::Instant::now();
        let b = WorkLock::share_waiting(&WorkDir::at(&dir), "run", wait, |_| {})
            .expect("a second run shares the work directory");
        assert!(t.elapsed() < std::time::Duration::from_secs(1), "the second run waited");
        let e = WorkLock::acquire(&WorkDir::at(&dir), "gc")
            .err()
            .expect("gc --yes while runs live")
            .to_string();
        assert!(e.contains("runs or shards are using its tree and kernels"), "{e}");
        drop(a);
        assert!(
            WorkLock::try_acquire(&WorkDir::at(&dir), "gc").unwrap().is_err(),
            "one run still holds it"
        );
        drop(b);
        let gc = WorkLock::acquire(&WorkDir::at(&dir), "gc").unwrap();
        let e = WorkLock::acquire(&WorkDir::at(&dir), "check")
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("another harness (pid") && e.contains("harness gc"), "{e}");
        drop(gc);
    }

    /// `run` waits for a `check` or `gc` holding the work directory.
    #[test]
    fn run_waits_for_check() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().to_path_buf();
        let check = WorkLock::acquire(&WorkDir::at(&dir), "check").unwrap();
        let release = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(700));
            drop(check);
        });
        let told = std::cell::RefCell::new(Vec::new());
        let t = std::time::Instant::now();
        let _run = WorkLock::share_waiting(&WorkDir::at(&dir), "run", std::time::Duration::from_secs(30), |m| {
            told.borrow_mut().push(m.to_string())
        })
        .unwrap();
        assert!(t.elapsed() >= std::time::Duration::from_millis(500), "did not wait");
        assert_eq!(told.borrow().len(), 1, "{told:?}");
        assert!(told.borrow()[0].contains("harness check holds it"), "{told:?}");
        release.join().unwrap();
    }

    /// A step lock waits for its holder and is had once it lets go.
    #[test]
    fn a_step_lock_waits_for_its_holder() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().to_path_buf();
        let held = lock_waiting(&WorkDir::at(&dir), "tree", "the kernel tree", "run a", |_| {}).unwrap();
        let d = dir.clone();
        let other = std::thread::spawn(move || {
            let told = std::cell::RefCell::new(Vec::new());
            let t = std::time::Instant::now();
            let _l = lock_waiting(&WorkDir::at(&d), "tree", "the kernel tree", "run b", |m| {
                told.borrow_mut().push(m.to_string())
            })
            .unwrap();
            (t.elapsed(), told.into_inner())
        });
        std::thread::sleep(std::time::Duration::from_millis(600));
        drop(held);
        let (waited, told) = other.join().unwrap();
        assert!(waited >= std::time::Duration::from_millis(500), "{waited:?}");
        assert_eq!(told.len(), 1, "{told:?}");
        assert_eq!(
            told[0],
            format!(
                "waiting for the kernel tree (pid {}, harness run a holds it)",
                std::process::id()
            )
        );
    }
}
