//! A run directory (`runs/<id>/`): `run.json` (what was asked, with seed,
//! host and revision), `samples.jsonl` (one line per measured value, written
//! the moment it exists) and `events.jsonl` (every step's outcome: series
//! states, patches, configs, builds, boots, benchmark failures), plus `logs/`.
//! A line is written with one `write` on an `O_APPEND` file and synced, so it
//! is whole or absent; a torn last line (power loss) is ignored on reading
//! and cut off before a resume appends. A shard (`run --shard K/N`) writes
//! the same files under `shards/<K>-of-<N>/` with its own lock, so shards on
//! several hosts never write one file; the run's readers merge them.

mod jsonl;
pub mod pending;
mod shard;

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde::de::DeserializeOwned;

use crate::plan::Shard;
use crate::records::{Event, RunMeta, Sample, FORMAT_VERSION};
use crate::util::Flock;

use jsonl::truncate_torn;
pub use jsonl::{append_line, read_lines, read_lines_skipping};

/// An open run directory: read-only when opened with [`Run::open`], the
/// writer's when made by [`Run::create`] or [`Run::open_to_write`] (then
/// it holds the run's lock for its whole life).
pub struct Run {
    /// The directory.
    pub dir: PathBuf,
    /// Its id.
    pub id: String,
    /// The shard this handle writes, if it is a shard's.
    pub shard: Option<Shard>,
    /// Where this handle's records and logs are: `dir`, or the shard's directory.
    records: PathBuf,
    _lock: Option<Flock>,
}

/// `<run>/profile-boots/`: a wall-clock run's profile boots, a run of
/// their own under the instruction-counting clock (`guest.profile_boots`).
pub const PROFILE_BOOTS_DIR: &str = "profile-boots";

/// A shard's directory in a run, as a reader finds it.
pub struct ShardDir {
    /// Which shard.
    pub shard: Shard,
    /// Who writes it now (`pid N, harness run --shard K/N`), if anyone.
    pub writer: Option<String>,
    /// Its records, read-only.
    pub run: Run,
}

/// `<run>/shards/<k>-of-<n>`.
pub fn shard_dir(run_dir: &Path, shard: Shard) -> PathBuf {
    run_dir.join("shards").join(format!("{}-of-{}", shard.k, shard.n))
}

/// A run directory under `runs_dir` that did not exist, made now (claimed
/// by `mkdir`, so two runs started in the same second never share one):
/// `<UTC stamp>-<label>`, with `.N` added when that is taken.
pub fn fresh_run_dir(runs_dir: &Path, label: &str) -> Result<PathBuf> {
    let stamp = crate::util::stamp();
    std::fs::create_dir_all(runs_dir).with_context(|| format!("create {}", runs_dir.display()))?;
    for n in 0..100 {
        let id = if n == 0 {
            format!("{stamp}-{label}")
        } else {
            format!("{stamp}-{label}.{n}")
        };
        let dir = runs_dir.join(&id);
        match std::fs::create_dir(&dir) {
            Ok(()) => return Ok(dir),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e).with_context(|| format!("create {}", dir.display())),
        }
    }
    bail!("find a free run id under {}", runs_dir.display())
}

impl Run {
    /// Creates `runs_dir/<id>` with a fresh id.
    pub fn create(runs_dir: &Path, label: &str) -> Result<Run> {
        let dir = fresh_run_dir(runs_dir, label)?;
        std::fs::create_dir_all(dir.join("logs")).with_context(|| format!("create {}", dir.display()))?;
        let lock = lock_run(&dir)?;
        let id = dir
            .file_name()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        Ok(Run {
            records: dir.clone(),
            dir,
            id,
            shard: None,
            _lock: Some(lock),
        })
    }

    /// Opens an existing run directory to read it. A run that may still be
    /// writing is left as it is: readers skip a torn last line.
    pub fn open(dir: &Path) -> Result<Run> {
        if !dir.join("run.json").is_file() {
            bail!("{} is not a run directory (no run.json)", dir.display());
        }
        Ok(Run::at(dir, None))
    }

    /// The run in `dir` (its id the directory's name), holding `lock`.
    fn at(dir: &Path, lock: Option<Flock>) -> Run {
        let id = dir
            .file_name()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        Run {
            dir: dir.to_path_buf(),
            id,
            shard: None,
            records: dir.to_path_buf(),
            _lock: lock,
        }
    }

    /// Creates a run directory at a path chosen beforehand (`harness build
    /// --run-dir`, a Slurm script): it may exist, but not as a run yet.
    pub fn create_at(dir: &Path) -> Result<Run> {
        if dir.join("run.json").exists() {
            bail!(
                "create the run {}: it exists already (pass it to `harness run --resume`, or name a new directory)",
                dir.display()
            );
        }
        std::fs::create_dir_all(dir.join("logs")).with_context(|| format!("create {}", dir.display()))?;
        Ok(Run::at(dir, Some(lock_run(dir)?)))
    }

    /// The shards that have written into this run, by shard.
    pub fn shard_dirs(&self) -> Result<Vec<ShardDir>> {
        let root = self.dir.join("shards");
        let Ok(entries) = std::fs::read_dir(&root) else {
            return Ok(Vec::new());
        };
        let mut out = Vec::new();
        for e in entries {
            let e = e.with_context(|| format!("read {}", root.display()))?;
            let name = e.file_name().to_string_lossy().replace("-of-", "/");
            let Ok(shard) = name.parse::<Shard>() else { continue };
            let records = e.path();
            let writer = Flock::holder(&records.join("lock"));
            out.push(ShardDir {
                shard,
                writer,
                run: Run {
                    dir: self.dir.clone(),
                    id: self.id.clone(),
                    shard: Some(shard),
                    records,
                    _lock: None,
                },
            });
        }
        out.sort_by_key(|s| (s.shard.n, s.shard.k));
        Ok(out)
    }

    /// The run's profile boots ([`PROFILE_BOOTS_DIR`]), read-only, if it
    /// has them.
    pub fn profile_boots(&self) -> Result<Option<Run>> {
        let dir = self.dir.join(PROFILE_BOOTS_DIR);
        if dir.join("run.json").is_file() {
            Ok(Some(Run::open(&dir)?))
        } else {
            Ok(None)
        }
    }

    /// This handle's own directory: the run's, or its shard's.
    pub fn records(&self) -> &Path {
        &self.records
    }

    /// Opens an existing run directory to append to it (`--resume`): takes
    /// the run's lock (refused while another harness holds it), then cuts a
    /// torn last line off its JSON-lines files.
    pub fn open_to_write(dir: &Path) -> Result<Run> {
        let mut run = Run::open(dir)?;
        run._lock = Some(lock_run(dir)?);
        for f in ["samples.jsonl", "events.jsonl"] {
            truncate_torn(&dir.join(f))?;
        }
        Ok(run)
    }

    /// Reads `run.json`.
    pub fn meta(&self) -> Result<RunMeta> {
        let p = self.dir.join("run.json");
        let m: RunMeta = serde_json::from_slice(&std::fs::read(&p).with_context(|| format!("read {}", p.display()))?)
            .with_context(|| format!("parse {}", p.display()))?;
        if m.format_version != FORMAT_VERSION {
            bail!(
                "{}: format version {} (this harness reads {FORMAT_VERSION})",
                p.display(),
                m.format_version
            );
        }
        Ok(m)
    }

    /// Writes `run.json`.
    pub fn write_meta(&self, m: &RunMeta) -> Result<()> {
        crate::util::write_whole(&self.dir.join("run.json"), &serde_json::to_vec_pretty(m)?)
    }

    /// A log path under `logs/` (of the shard, for a shard's handle).
    pub fn log(&self, rel: &str) -> PathBuf {
        self.records.join("logs").join(rel)
    }

    /// Appends a sample; a non-finite number is refused (JSON would store
    /// it as `null`, which no reader can use).
    pub fn sample(&self, s: &Sample) -> Result<()> {
        s.check_finite()
            .with_context(|| format!("write a sample of {} {} at {} vCPUs", s.variant, s.metric, s.vcpus))?;
        append_line(&self.records.join("samples.jsonl"), s)
    }

    /// Appends an event.
    pub fn event(&self, e: &Event) -> Result<()> {
        append_line(&self.records.join("events.jsonl"), e)
    }

    /// A notice worth reading: shown on `ui` and recorded as an
    /// [`Event::Notice`].
    pub fn notice(&self, ui: &crate::ui::Ui, message: String) -> Result<()> {
        ui.notice(&message);
        self.event(&Event::Notice { message })
    }

    /// All samples: a run's own, then every shard's; a shard's handle reads its own.
    pub fn samples(&self) -> Result<Vec<Sample>> {
        self.merged("samples.jsonl")
    }

    /// All events: a run's own, then every shard's; a shard's handle reads its own.
    pub fn events(&self) -> Result<Vec<Event>> {
        self.merged("events.jsonl")
    }

    /// The events in this handle's own directory only (the build's, for a run).
    pub fn own_events(&self) -> Result<Vec<Event>> {
        read_lines(&self.records.join("events.jsonl"))
    }

    fn merged<T: DeserializeOwned>(&self, file: &str) -> Result<Vec<T>> {
        let mut all = read_lines(&self.records.join(file))?;
        if self.shard.is_none() {
            for s in self.shard_dirs()? {
                all.extend(read_lines(&s.run.records.join(file))?);
            }
        }
        Ok(all)
    }
}

/// Takes `runs/<id>/lock`, held by `run` and `--resume` while they write;
/// a hold of a moment (a shard starting, a dropped lock a forking child
/// still holds) delays the taker, a writer's refuses it.
fn lock_run(dir: &Path) -> Result<Flock> {
    match Flock::take_patiently(&dir.join("lock"), "run")? {
        Ok(l) => Ok(l),
        Err(holder) => bail!(
            "lock the run {}: another harness ({holder}) is writing it; wait for it to end (one writer per run, even from another work directory)",
            dir.display()
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(value: f64) -> Sample {
        Sample {
            variant: "base".into(),
            vcpus: 2,
            benchmark: "b".into(),
            params: serde_json::json!({}),
            metric: "m".into(),
            unit: "u".into(),
            higher_is_better: true,
            boot_id: "x".into(),
            boot: 0,
            repetition: 0,
            warmup: false,
            value,
            series: vec![],
            cpu: None,
            clock: None,
            timestamp: "t".into(),
        }
    }

    #[test]
    fn unusable_lines_are_skipped_with_their_place() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().to_path_buf();
        let p = dir.join("samples.jsonl");
        let good = serde_json::to_string(&sample(1.5)).unwrap();
        // what an old harness wrote for an infinite mean
        let null = serde_json::to_string(&sample(f64::INFINITY)).unwrap();
        assert!(null.contains("\"value\":null"), "{null}");
        let torn_middle = &good[..good.len() / 2];
        std::fs::write(
            &p,
            format!("{good}\n{null}\n{torn_middle}\nnot json\n\n{good}\n{torn_middle}"),
        )
        .unwrap();
        let (v, skipped) = read_lines_skipping::<Sample>(&p).unwrap();
        assert_eq!(v.len(), 2);
        assert_eq!(skipped.len(), 3, "{skipped:?}");
        assert!(
            skipped[0].starts_with(&format!("{}:2: not a valid record (", p.display())),
            "{skipped:?}"
        );
        assert!(
            skipped[1].contains("samples.jsonl:3:") && skipped[2].contains("samples.jsonl:4:"),
            "{skipped:?}"
        );
        // the run's readers (report, resume) get the good lines
        std::fs::write(dir.join("run.json"), "{}").unwrap();
        let run = Run {
            records: dir.clone(),
            dir: dir.clone(),
            id: "r".into(),
            shard: None,
            _lock: None,
        };
        assert_eq!(run.samples().unwrap().len(), 2);
        std::fs::remove_dir_all(dir).ok();
    }

    #[test]
    fn non_finite_samples_are_not_written() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().to_path_buf();
        let run = Run {
            records: dir.clone(),
            dir: dir.clone(),
            id: "r".into(),
            shard: None,
            _lock: None,
        };
        for bad in [f64::INFINITY, f64::NEG_INFINITY, f64::NAN] {
            let e = format!("{:#}", run.sample(&sample(bad)).unwrap_err());
            assert!(
                e.contains("write a sample of base m at 2 vCPUs") && e.contains("not finite"),
                "{e}"
            );
        }
        let mut s = sample(1.0);
        s.series = vec![1.0, f64::NAN];
        assert!(run.sample(&s).is_err());
        assert!(!dir.join("samples.jsonl").exists());
        run.sample(&sample(2.0)).unwrap();
        assert_eq!(run.samples().unwrap(), vec![sample(2.0)]);
        std::fs::remove_dir_all(dir).ok();
    }

    /// Issue 11 item 9: readers never cut a torn line of a run being
    /// written; a second writer is refused naming the holder's pid; only the
    /// lock holder cuts.
    #[test]
    fn a_run_being_written_is_locked_and_read_without_cutting() {
        let tmp = tempfile::tempdir().unwrap();
        let runs = tmp.path().to_path_buf();
        let writer = Run::create(&runs, "t").unwrap();
        std::fs::write(writer.dir.join("run.json"), "{}").unwrap();
        let events = writer.dir.join("events.jsonl");
        std::fs::write(&events, "{\"event\":\"notice\",\"message\":\"a\"}\n{\"event\":\"no").unwrap();
        let before = std::fs::read(&events).unwrap();
        let reader = Run::open(&writer.dir).unwrap();
        assert_eq!(reader.events().unwrap().len(), 1, "the torn line is skipped");
        assert_eq!(
            std::fs::read(&events).unwrap(),
            before,
            "a reader cut the writer's line"
        );
        let e = Run::open_to_write(&writer.dir)
            .err()
            .expect("a second writer must be refused");
        let e = format!("{e:#}");
        assert!(
            e.contains(&format!("another harness (pid {}, harness run)", std::process::id())),
            "{e}"
        );
        assert_eq!(std::fs::read(&events).unwrap(), before);
        let lock = writer.dir.join("lock");
        drop(writer);
        crate::util::wait_until_released(&lock);
        let resumed = Run::open_to_write(&reader.dir).unwrap();
        assert!(
            std::fs::read_to_string(&events).unwrap().ends_with("\"a\"}\n"),
            "the lock holder cuts the torn line"
        );
        drop(resumed);
        std::fs::remove_dir_all(runs).ok();
    }

    /// Runs started at once with one label (two runs on one host in the
    /// same second) each get their own id.
    #[test]
    fn runs_started_at_once_get_their_own_ids() {
        let tmp = tempfile::tempdir().unwrap();
        let start = std::sync::Barrier::new(8);
        let ids: Vec<String> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..8)
                .map(|_| {
                    s.spawn(|| {
                        start.wait();
                        Run::create(tmp.path(), "nightly").map(|r| {
                            let id = r.id.clone();
                            // held until every thread made its run
                            std::thread::sleep(std::time::Duration::from_millis(300));
                            id
                        })
                    })
                })
                .collect();
            hs.into_iter()
                .map(|h| h.join().unwrap().map_err(|e| format!("{e:#}")))
                .collect::<Result<_, _>>()
                .unwrap()
        });
        let distinct: std::collections::BTreeSet<&String> = ids.iter().collect();
        assert_eq!(distinct.len(), 8, "{ids:?}");
    }

    /// A run is split one way: a shard of another count than the shards
    /// already there is refused, naming them; the same count goes on.
    #[test]
    fn a_shard_of_another_count_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("r");
        drop(Run::create_at(&dir).unwrap());
        std::fs::write(dir.join("run.json"), "{}").unwrap();
        drop(Run::open_shard(&dir, Shard { k: 0, n: 2 }).unwrap());
        let e = format!(
            "{:#}",
            Run::open_shard(&dir, Shard { k: 1, n: 3 })
                .err()
                .expect("a shard of 3 beside shards of 2")
        );
        assert!(e.contains("the run is split into 2 shards (shards/0-of-2)"), "{e}");
        assert!(
            !dir.join("shards/1-of-3").exists(),
            "the refused shard made its directory"
        );
        assert!(Run::open_shard(&dir, Shard { k: 1, n: 2 }).is_ok());
    }

    /// Issue 14: shards write their own files under their own lock; the
    /// run's readers merge them, a shard's handle reads only its own.
    #[test]
    fn shards_write_apart_and_are_read_merged() {
        let tmp = tempfile::tempdir().unwrap();
        let runs = tmp.path().to_path_buf();
        let dir = runs.join("r");
        let e = format!(
            "{:#}",
            Run::open_shard(&dir, Shard { k: 0, n: 2 })
                .err()
                .expect("no run.json yet")
        );
        assert!(e.contains("run `harness build --run-dir"), "{e}");
        let build = Run::create_at(&dir).unwrap();
        std::fs::write(dir.join("run.json"), "{}").unwrap();
        build
            .event(&Event::Notice {
                message: "built".into(),
            })
            .unwrap();
        drop(build);
        assert!(Run::create_at(&dir).is_err(), "a run is made once");
        let s0 = Run::open_shard(&dir, Shard { k: 0, n: 2 }).unwrap();
        let s1 = Run::open_shard(&dir, Shard { k: 1, n: 2 }).unwrap();
        s0.event(&Event::Notice { message: "s0".into() }).unwrap();
        s1.event(&Event::Notice { message: "s1".into() }).unwrap();
        assert!(s1.log("boots").starts_with(dir.join("shards/1-of-2/logs")));
        let e = format!(
            "{:#}",
            Run::open_shard(&dir, Shard { k: 1, n: 2 })
                .err()
                .expect("one writer per shard")
        );
        assert!(
            e.contains(&format!(
                "another harness (pid {}, harness run --shard 1/2) is running it",
                std::process::id()
            )),
            "{e}"
        );
        let msgs = |r: &Run| {
            r.events()
                .unwrap()
                .into_iter()
                .map(|e| format!("{e:?}"))
                .collect::<Vec<_>>()
                .join(" ")
        };
        let reader = Run::open(&dir).unwrap();
        let all = msgs(&reader);
        assert!(
            all.contains("built") && all.contains("s0") && all.contains("s1"),
            "{all}"
        );
        assert!(!msgs(&s1).contains("s0") && reader.own_events().unwrap().len() == 1);
        let writers: Vec<bool> = reader
            .shard_dirs()
            .unwrap()
            .iter()
            .map(|d| d.writer.is_some())
            .collect();
        assert_eq!(writers, vec![true, true]);
        drop(s0);
        crate::util::wait_until_released(&dir.join("shards/0-of-2/lock"));
        let writers: Vec<bool> = reader
            .shard_dirs()
            .unwrap()
            .iter()
            .map(|d| d.writer.is_some())
            .collect();
        assert_eq!(writers, vec![false, true], "a finished shard holds no lock");
        drop(s1);
        std::fs::remove_dir_all(runs).ok();
    }
}
