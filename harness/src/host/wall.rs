//! One wall-clock measurement per host at a time. The work directory's lock
//! is shared by runs (and the work directory may sit on a shared file
//! system), so two `harness run`s on one host would boot wall-clock guests
//! side by side and each change the other's numbers. A wall-clock boot
//! holds this host-wide lock, outside the work directory: `$HARNESS_WALL_LOCK`,
//! else [`DEFAULT_PATH`] (`/tmp` is the host's own). Icount boots take it
//! shared: their own numbers count instructions, not time, so they may run
//! beside each other, but a wall-clock boot waits until none runs, and they
//! wait while a wall-clock boot runs.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use std::os::unix::fs::PermissionsExt;

use anyhow::{Context, Result};

use crate::util::Flock;

/// Where the lock is when `HARNESS_WALL_LOCK` is not set.
pub const DEFAULT_PATH: &str = "/tmp/harness-wall-clock.lock";

/// The host-wide wall-clock lock file.
pub fn lock_path() -> PathBuf {
    path_from(std::env::var_os("HARNESS_WALL_LOCK"))
}

/// The lock file `HARNESS_WALL_LOCK` (when set and not empty) names.
fn path_from(env: Option<std::ffi::OsString>) -> PathBuf {
    match env {
        Some(p) if !p.is_empty() => PathBuf::from(p),
        _ => PathBuf::from(DEFAULT_PATH),
    }
}

/// The held lock; released when dropped (or when the process dies).
pub struct WallLock {
    _lock: Flock,
}

/// A wait for another holder: who held the lock when the wait began, and
/// for how long (seconds of the host's monotonic clock).
#[derive(Debug, Clone, PartialEq)]
pub struct Waited {
    /// The holder as its lock file names it (`pid N, harness run <id>`).
    pub holder: String,
    /// Seconds waited.
    pub secs: f64,
}

/// Takes the lock at `p` as `what` (e.g. `run <id>`), waiting for another
/// holder: `on_wait` is told the holder once, when the wait begins, and the
/// lock is tried again every `poll`. An interrupt (Ctrl-C) ends the wait.
/// With `shared` (an icount boot) the lock is taken shared: it waits only
/// for a wall-clock holder.
pub fn take(
    p: &Path,
    what: &str,
    shared: bool,
    poll: Duration,
    mut on_wait: impl FnMut(&str) -> Result<()>,
) -> Result<(WallLock, Option<Waited>)> {
    let mut waited: Option<(String, Instant)> = None;
    loop {
        let took = try_take(p, what, shared).context(
            "take the host-wide wall-clock lock: set HARNESS_WALL_LOCK to a file every user of this host can write",
        )?;
        match took {
            Ok(lock) => {
                // every user's runs take turns at it: best effort, the file may be another user's
                let _ = std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o666));
                let w = waited.map(|(holder, t)| Waited {
                    holder,
                    secs: t.elapsed().as_secs_f64(),
                });
                return Ok((WallLock { _lock: lock }, w));
            }
            Err(holder) => {
                if waited.is_none() {
                    on_wait(&holder)?;
                    waited = Some((holder, Instant::now()));
                }
            }
        }
        crate::proc::check_interrupted()?;
        std::thread::sleep(poll);
    }
}

/// One try: the lock, or who holds it (an exclusive holder names itself in
/// the file; shared holders write nothing).
fn try_take(p: &Path, what: &str, shared: bool) -> Result<std::result::Result<Flock, String>> {
    if shared {
        return Ok(Flock::try_share(p)?.ok_or_else(|| Flock::holder(p).unwrap_or_else(|| "a wall-clock boot".into())));
    }
    Ok(Flock::try_take(p, what)?.map_err(|named| match Flock::holder(p) {
        Some(_) => named,
        None => "instruction-counting boots (shared)".into(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 30 item 2: a second holder waits for the first, is told who
    /// holds the lock, takes it once the first drops it, and says how long
    /// it waited; a free lock is taken with no wait.
    #[test]
    fn a_second_holder_waits_for_the_first_and_names_it() {
        let tmp = tempfile::tempdir().unwrap();
        let p = tmp.path().join("wall.lock");
        let (first, w) = take(&p, "run r1", false, Duration::from_millis(5), |_| panic!("free")).unwrap();
        assert_eq!(w, None);
        let held_for = Duration::from_millis(300);
        let (tx, rx) = std::sync::mpsc::channel();
        let p2 = p.clone();
        let second = std::thread::spawn(move || {
            take(&p2, "run r2", false, Duration::from_millis(5), |h| {
                tx.send(h.to_string()).unwrap();
                Ok(())
            })
            .map(|(lock, w)| (lock, w.unwrap()))
            .unwrap()
        });
        let told = rx.recv_timeout(Duration::from_secs(10)).unwrap();
        assert_eq!(told, format!("pid {}, harness run r1", std::process::id()));
        std::thread::sleep(held_for);
        assert!(!second.is_finished(), "the second holder waits while the first holds");
        drop(first);
        let (_lock, w) = second.join().unwrap();
        assert_eq!(w.holder, told);
        assert!(w.secs >= held_for.as_secs_f64(), "{w:?}");
        assert_eq!(
            Flock::holder(&p),
            Some(format!("pid {}, harness run r2", std::process::id()))
        );
    }

    /// Issue 30: icount boots share the lock: they run beside each other,
    /// a wall-clock boot waits for them (told so) and they for it.
    #[test]
    fn icount_boots_share_it_and_a_wall_clock_boot_waits_for_them() {
        let tmp = tempfile::tempdir().unwrap();
        let p = tmp.path().join("wall.lock");
        let never = |_: &str| -> Result<()> { panic!("no wait") };
        let (a, _) = take(&p, "run i1", true, Duration::from_millis(5), never).unwrap();
        let (b, _) = take(&p, "run i2", true, Duration::from_millis(5), never).unwrap();
        let p2 = p.clone();
        let (tx, rx) = std::sync::mpsc::channel();
        let wall = std::thread::spawn(move || {
            take(&p2, "run w", false, Duration::from_millis(5), |h| {
                tx.send(h.to_string()).unwrap();
                Ok(())
            })
            .unwrap()
        });
        let told = rx.recv_timeout(Duration::from_secs(10)).unwrap();
        assert_eq!(told, "instruction-counting boots (shared)");
        drop(a);
        std::thread::sleep(Duration::from_millis(100));
        assert!(!wall.is_finished(), "one icount boot still runs");
        drop(b);
        let (held, w) = wall.join().unwrap();
        assert!(w.is_some());
        let mut waited_for = None;
        let p3 = p.clone();
        let icount = std::thread::spawn(move || {
            take(&p3, "run i3", true, Duration::from_millis(5), |h| {
                waited_for = Some(h.to_string());
                Ok(())
            })
            .map(|(l, w)| (l, w.map(|w| w.holder)))
            .unwrap()
        });
        std::thread::sleep(Duration::from_millis(100));
        assert!(!icount.is_finished(), "an icount boot waits for the wall-clock boot");
        drop(held);
        let (_l, holder) = icount.join().unwrap();
        assert_eq!(holder, Some(format!("pid {}, harness run w", std::process::id())));
    }

    #[test]
    fn the_path_is_overridden_by_the_environment() {
        for (env, want) in [
            (None, DEFAULT_PATH),
            (Some(""), DEFAULT_PATH),
            (Some("/run/lock/harness-wall"), "/run/lock/harness-wall"),
        ] {
            assert_eq!(path_from(env.map(Into::into)), PathBuf::from(want), "{env:?}");
        }
    }
}
