//! The work directory's shared state (L2): its lock, and the last-use
//! markers of the kernels and tree copies it caches (what `gc` reads).

use std::path::Path;

use anyhow::{bail, Context, Result};

use crate::util::Flock;

/// File beside (trees) or inside (kernels) an entry whose mtime is its last use.
pub const LAST_USED: &str = "last-used";

/// Records that a kernel directory or tree was used now.
pub fn touch(marker: &Path) {
    // best effort: a read-only cache is still a cache
    let _ = std::fs::write(marker, crate::util::now_rfc3339());
}

/// An exclusive lock on the work directory, held for the process lifetime.
pub struct WorkLock {
    _lock: Flock,
}

/// How long `run` waits for a `check` or `gc --yes` to release the work
/// directory.
pub const BRIEF_HOLDER_WAIT: std::time::Duration = std::time::Duration::from_secs(600);

impl WorkLock {
    /// Takes the lock for the command `what` or explains who holds it.
    pub fn acquire(work: &Path, what: &str) -> Result<WorkLock> {
        match WorkLock::try_acquire(work, what)? {
            Ok(l) => Ok(l),
            Err(holder) => bail!(
                "lock the work directory {}: another harness ({holder}) is using it; wait for it or pass a different --work-dir",
                work.display()
            ),
        }
    }

    /// Like [`WorkLock::acquire`], but while a `check` or `gc` (which hold
    /// the lock for seconds to minutes) has it, waits up to `limit`, saying
    /// so once through `notice`. Another run is refused at once.
    pub fn acquire_waiting(work: &Path, what: &str, limit: std::time::Duration, notice: impl Fn(&str)) -> Result<WorkLock> {
        let until = std::time::Instant::now() + limit;
        let mut told = false;
        loop {
            let holder = match WorkLock::try_acquire(work, what)? {
                Ok(l) => return Ok(l),
                Err(h) => h,
            };
            let brief = holder.ends_with("harness check") || holder.ends_with("harness gc");
            if !brief || std::time::Instant::now() > until {
                return WorkLock::acquire(work, what);
            }
            if !told {
                notice(&format!("waiting for the work directory {} ({holder} holds it; up to {} min)", work.display(), limit.as_secs() / 60));
                told = true;
            }
            crate::proc::check_interrupted()?;
            std::thread::sleep(std::time::Duration::from_millis(500));
        }
    }

    /// Takes the lock if it is free; `Ok(Err(holder))` names who holds it.
    pub fn try_acquire(work: &Path, what: &str) -> Result<std::result::Result<WorkLock, String>> {
        std::fs::create_dir_all(work).with_context(|| format!("create {}", work.display()))?;
        Ok(Flock::try_take(&work.join("lock"), what)?.map(|l| WorkLock { _lock: l }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn second_lock_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().to_path_buf();
        let _a = WorkLock::acquire(&dir, "run").unwrap();
        // flock locks belong to the open file description: a second open conflicts
        let e = WorkLock::acquire(&dir, "run").err().expect("second lock must fail").to_string();
        assert!(e.contains("another harness (pid"), "{e}");
        std::fs::remove_dir_all(dir).ok();
    }

    /// `run` waits for a `check` or `gc` holding the work directory, and is
    /// refused at once by another run.
    #[test]
    fn run_waits_for_check_but_not_for_another_run() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().to_path_buf();
        let check = WorkLock::acquire(&dir, "check").unwrap();
        let release = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(700));
            drop(check);
        });
        let told = std::cell::RefCell::new(Vec::new());
        let t = std::time::Instant::now();
        let run = WorkLock::acquire_waiting(&dir, "run", std::time::Duration::from_secs(30), |m| told.borrow_mut().push(m.to_string())).unwrap();
        assert!(t.elapsed() >= std::time::Duration::from_millis(500), "did not wait");
        assert_eq!(told.borrow().len(), 1, "{told:?}");
        assert!(told.borrow()[0].contains("harness check holds it"), "{told:?}");
        release.join().unwrap();
        let t = std::time::Instant::now();
        let e = WorkLock::acquire_waiting(&dir, "run", std::time::Duration::from_secs(30), |_| {}).err().expect("another run refuses");
        assert!(t.elapsed() < std::time::Duration::from_secs(2) && e.to_string().contains("harness run) is using it"), "{e}");
        drop(run);
        std::fs::remove_dir_all(dir).ok();
    }
}
