//! The real [`Robot`]: a night's commit checked out in the nightly's own
//! clone of the tree (`<dir>/tree/`, `git clone --shared`: nothing is
//! written into the user's repository), that clone made the matrix's kernel
//! source, the run started or resumed through the pipeline and added to the
//! history; change points read from the history; bisections made and run by
//! [`crate::bisect`], each culprit's cell profiled against the good end.

use std::cell::RefCell;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use rusqlite::Connection;

use super::{Bisected, Bisection, KeyChange, Named, Robot, Tonight};
use crate::config::Matrix;
use crate::pipeline::{self, Options};
use crate::proc::Cmd;
use crate::{bisect, history, stats, store};

/// What the real robot measures with.
pub struct Real {
    /// The user's git tree (only read).
    pub tree: PathBuf,
    /// The matrix file.
    pub matrix: PathBuf,
    /// Its profile.
    pub profile: Option<String>,
    /// The nightly's directory.
    pub dir: PathBuf,
    /// The history database.
    pub history: PathBuf,
    /// Where the pipeline works (its `runs_dir` is replaced per night).
    pub opts: Options,
    /// How change points are found (`--min-change`, `--change-alpha`).
    pub changepoints: stats::changepoint::Params,
}

/// Tonight's commit: the tip of `branch` in `tree`, with its subject.
pub fn tonight(tree: &Path, branch: &str) -> Result<Tonight> {
    let commit = crate::kernel::tree::resolve_ref(tree, branch)?;
    Ok(Tonight {
        subject: subject(tree, &commit),
        commit,
    })
}

/// A commit's subject (empty when git cannot say).
pub fn subject(tree: &Path, commit: &str) -> String {
    Cmd::new("git")
        .arg("-C")
        .arg(tree)
        .args(["log", "-1", "--format=%s", commit])
        .capture()
        .run_ok()
        .map(|f| f.output.trim().to_string())
        .unwrap_or_default()
}

impl Real {
    /// The matrix with its profile, as every night runs it on this host (a
    /// profile's `without_kvm:` where KVM is not usable), before its source is set.
    pub fn load(&self) -> Result<Matrix> {
        let m = crate::config::load(&self.matrix, self.profile.as_deref()).context("load the matrix")?;
        pipeline::for_this_host(m, &self.opts.work_dir)
    }
}

/// The run directory under `runs` (a night makes one), if made.
fn run_dir(runs: &Path) -> Option<PathBuf> {
    std::fs::read_dir(runs)
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.join("run.json").is_file())
}

/// Every planned boot of the run in `d` ended.
fn complete(d: &Path) -> Result<bool> {
    let run = store::Run::open(d)?;
    let m = run.meta()?.matrix;
    let ended = run
        .events()?
        .iter()
        .filter(|e| matches!(e, crate::records::Event::BootEnd { .. }))
        .count();
    Ok(ended >= crate::plan::boot_jobs(&m).len())
}

impl Robot for Real {
    fn measure(&mut self, commit: &str, runs_dir: &Path) -> Result<String> {
        std::fs::create_dir_all(runs_dir).with_context(|| format!("create {}", runs_dir.display()))?;
        let log = runs_dir.join("tree.log");
        let clone =
            crate::kernel::tree::Tree::prepare_ref(&self.tree, commit, &crate::workdir::WorkDir::at(&self.dir), &log)
                .with_context(|| format!("check out {commit}"))?;
        let o = Options {
            runs_dir: runs_dir.to_path_buf(),
            ..self.opts.clone()
        };
        let run = match run_dir(runs_dir) {
            Some(d) if complete(&d)? => d,
            Some(d) => {
                eprintln!("nightly: resuming {}", d.display());
                pipeline::resume(&d, &o)?
            }
            None => {
                let mut m = self.load()?;
                m.kernel.source = clone.dir.clone();
                pipeline::start_fixed(m, &o)?
            }
        };
        let mut db = history::open(&self.history)?;
        history::add(&mut db, &run, &self.opts.work_dir, history::Sources::Live)
            .with_context(|| format!("add {} to the history", run.display()))?;
        Ok(store::Run::open(&run)?.meta()?.id)
    }

    fn changes(&mut self, db: &Connection, run_id: &str) -> Result<super::KeyChanges> {
        let dir: String = db
            .query_row("SELECT run_dir FROM runs WHERE run_id = ?1", [run_id], |r| r.get(0))
            .with_context(|| format!("find run {run_id} in the history"))?;
        let run = store::Run::open(Path::new(&dir))?;
        let meta = run.meta()?;
        let key = history::run_key(&meta, &run.events()?);
        let all = history::series(
            db,
            &history::Filter {
                variant: Some("base".into()),
                ..Default::default()
            },
            &self.changepoints,
        )?;
        let ours: Vec<&history::Series> = all
            .iter()
            .filter(|s| {
                s.key.run == key
                    && crate::report::gate::is_key(&meta.matrix.key_metrics, &s.key.benchmark, &s.key.metric)
            })
            .collect();
        Ok(super::KeyChanges {
            tested: ours.len(),
            changes: ours.into_iter().flat_map(key_changes).collect(),
        })
    }

    fn start_bisect(&mut self, b: &Bisection) -> Result<PathBuf> {
        // the profile and clock the nights ran in, so that its ends compare
        let nights = self.load()?;
        let trial = crate::trial::Request {
            matrix: Some(self.matrix.clone()),
            profile: nights.profile.clone().unwrap_or_else(|| "none".into()),
            clock: Some(nights.guest.clock),
            vcpus: vec![b.change.vcpus],
            bench: vec![b.change.bench.clone()],
            ..Default::default()
        };
        let req = bisect::Request {
            git: self.tree.clone(),
            good: b.good_commit.clone(),
            bad: b.bad_commit.clone(),
            trial,
            metric: Some(b.change.metric.clone()),
            rule: bisect::Rule::default(),
        };
        bisect::start(&req, &self.dir, &self.opts.work_dir)
    }

    fn run_bisect(&mut self, dir: &Path, _b: &Bisection) -> Result<Bisected> {
        let steps = RefCell::new(Vec::new());
        let say = |s: &str| {
            eprintln!("{s}");
            steps.borrow_mut().push(s.to_string());
        };
        let found = bisect::run(dir, &self.opts, &say)?;
        let culprits: Vec<Named> = found
            .culprits
            .iter()
            .map(|c| Named {
                commit: c.commit.clone(),
                subject: bisect::describe(dir, &c.commit),
                share: c.share,
                maybe: c.maybe.clone(),
            })
            .collect();
        // the first culprit's differential profile (top 12 functions), or why there is none
        let profile = culprits.first().map(|c| bisect::profile_or_why(dir, &c.commit, 12));
        Ok(Bisected {
            culprits,
            open: found.open,
            steps: steps.into_inner(),
            profile,
            error: None,
            flat: found.flat,
        })
    }

    fn widen(&mut self, dir: &Path, b: &Bisection) -> Result<()> {
        bisect::widen(dir, &b.good_commit, &b.bad_commit)
    }
}

/// A series' change points as key changes, each with a 95% bootstrap
/// interval of the ratio of its two segments' medians over their nights.
pub fn key_changes(s: &history::Series) -> Vec<KeyChange> {
    let x: Vec<f64> = s.nights.iter().map(|n| n.median).collect();
    let cuts: Vec<usize> = s.changes.iter().map(|c| c.index).collect();
    s.changes
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let from = if i == 0 { 0 } else { cuts[i - 1] };
            let to = cuts.get(i + 1).copied().unwrap_or(x.len());
            let ci = stats::bootstrap_ratio_of_medians(&x[from..c.index], &x[c.index..to], 2000, 1);
            KeyChange {
                bench: s.key.benchmark.clone(),
                metric: s.key.metric.clone(),
                vcpus: s.key.vcpus,
                good_run: c.run_before.clone(),
                bad_run: c.run_after.clone(),
                date: c.date.clone(),
                change: c.change,
                interval: ci.map(|r| (r.lo - 1.0, r.hi - 1.0)),
                p: c.p,
                worse: (c.change < 0.0) == s.higher_is_better,
                unit: s.unit.clone(),
            }
        })
        .collect()
}
