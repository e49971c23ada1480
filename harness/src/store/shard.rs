//! Opening a shard of a run to write it (`harness run --shard K/N
//! --run-dir R`): decided under the run's own lock, so two shards starting
//! at once, a `--resume` and a whole `run` cannot each find the run free
//! and plan the same jobs; the shard's own lock taken with a moment's
//! patience, so a reader's momentary probe of it (report, import) never
//! refuses a starting shard.

use std::path::Path;

use anyhow::{bail, Context, Result};

use super::jsonl::truncate_torn;
use super::{shard_dir, Run};
use crate::plan::Shard;
use crate::records::Event;
use crate::util::Flock;

impl Run {
    /// Opens shard `shard` of the run in `dir` to write it: its own
    /// directory, lock and records; a shard run again goes on where it
    /// stopped. Refused while another harness writes the run whole, when
    /// the run is split another way, or when the run's own records hold
    /// boots (it was run whole: its jobs would be planned again under the
    /// same boot ids).
    pub fn open_shard(dir: &Path, shard: Shard) -> Result<Run> {
        if !dir.join("run.json").is_file() {
            bail!(
                "open {} for shard {shard}: it has no run.json yet (run `harness build --run-dir {}` first)",
                dir.display(),
                dir.display()
            );
        }
        let _deciding = match Flock::take_patiently(&dir.join("lock"), &format!("run --shard {shard} (starting)"))? {
            Ok(l) => l,
            Err(holder) => bail!(
                "open shard {shard} of {}: another harness ({holder}) is writing the run; a shard starts on a built run \
                 that nothing else writes",
                dir.display()
            ),
        };
        let reader = Run::open(dir)?;
        if let Some(other) = reader.shard_dirs()?.iter().find(|s| s.shard.n != shard.n) {
            bail!(
                "open shard {shard} of {}: the run is split into {} shards (shards/{}-of-{}); a run is split one way (shard ids and boot ids would collide)",
                dir.display(),
                other.shard.n,
                other.shard.k,
                other.shard.n
            );
        }
        let boots = reader
            .own_events()?
            .iter()
            .filter(|e| matches!(e, Event::Boot { .. } | Event::BootEnd { .. }))
            .count();
        if boots > 0 {
            bail!(
                "open shard {shard} of {}: the run's own records hold {boots} boot record(s), so it was run whole, not \
                 split (its jobs would be planned again under the same boot ids); continue it with `harness run --resume {}`",
                dir.display(),
                dir.display()
            );
        }
        let records = shard_dir(dir, shard);
        std::fs::create_dir_all(records.join("logs")).with_context(|| format!("create {}", records.display()))?;
        let lock = match Flock::take_patiently(&records.join("lock"), &format!("run --shard {shard}"))? {
            Ok(l) => l,
            Err(holder) => bail!(
                "lock shard {shard} of {}: another harness ({holder}) is running it",
                dir.display()
            ),
        };
        for f in ["samples.jsonl", "events.jsonl"] {
            truncate_torn(&records.join(f))?;
        }
        let mut run = Run::open(dir)?;
        (run.records, run.shard, run._lock) = (records, Some(shard), Some(lock));
        Ok(run)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn built(tmp: &tempfile::TempDir) -> std::path::PathBuf {
        let dir = tmp.path().join("r");
        drop(Run::create_at(&dir).unwrap());
        std::fs::write(dir.join("run.json"), "{}").unwrap();
        crate::util::wait_until_released(&dir.join("lock"));
        dir
    }

    /// Issue 30: `--shard 0/1` on a run that was run whole planned all its
    /// jobs again under the same boot ids, and the report merged two boots
    /// into one.
    #[test]
    fn a_shard_of_a_run_that_was_run_whole_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = built(&tmp);
        let line = r#"{"event":"boot_end","variant":"base","vcpus":2,"boot":0,"boot_id":"base-2cpu-b0","findings":[],"error":null}"#;
        std::fs::write(dir.join("events.jsonl"), format!("{line}\n")).unwrap();
        let e = format!(
            "{:#}",
            Run::open_shard(&dir, Shard { k: 0, n: 1 }).err().expect("refused")
        );
        assert!(e.contains("the run's own records hold 1 boot record(s)"), "{e}");
        assert!(e.contains("harness run --resume"), "{e}");
        assert!(!dir.join("shards").exists(), "nothing made");
    }

    /// Issue 30: the shard decision is taken under the run's lock, so a
    /// run being written whole (or resumed) refuses a shard.
    #[test]
    fn a_shard_waits_for_nothing_but_a_moment_and_refuses_a_writer() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = built(&tmp);
        let writer = Run::open_to_write(&dir).unwrap();
        let e = format!(
            "{:#}",
            Run::open_shard(&dir, Shard { k: 0, n: 2 }).err().expect("refused")
        );
        assert!(e.contains("is writing the run"), "{e}");
        assert!(e.contains("harness run)"), "names the holder: {e}");
        drop(writer);
        crate::util::wait_until_released(&dir.join("lock"));
        // a reader's momentary hold of the shard lock delays, never refuses
        let lock = shard_dir(&dir, Shard { k: 0, n: 2 }).join("lock");
        std::fs::create_dir_all(lock.parent().unwrap()).unwrap();
        let reader = Flock::try_share(&lock).unwrap().unwrap();
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(300));
            drop(reader);
        });
        let s = Run::open_shard(&dir, Shard { k: 0, n: 2 });
        t.join().unwrap();
        assert!(s.is_ok(), "{:?}", s.err());
    }

    /// Issue 30: shards starting together each decide alone; all of one
    /// split open, and the run's lock is free again after.
    #[test]
    fn shards_starting_together_all_open() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = built(&tmp);
        let opened: Vec<bool> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..4)
                .map(|k| {
                    let dir = &dir;
                    s.spawn(move || Run::open_shard(dir, Shard { k, n: 4 }).map(drop).is_ok())
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert_eq!(opened, [true; 4]);
        crate::util::wait_until_released(&dir.join("lock"));
        assert!(Flock::try_take(&dir.join("lock"), "t").unwrap().is_ok());
    }
}
