//! `harness nightly`: one night of the nightly robot ([`crate::nightly`]):
//! tonight's commit measured (once), the run added to the history and its
//! report files written, bisections of new changes for the worse run (or
//! resumed), and the mail report written to `<dir>/reports/<time>-<commit>.md`
//! ([`nightly::mail::write`]) and printed. With `--json` the progress goes to stderr and stdout gets one
//! object: `{"report": FILE, "run_dir": DIR, "outcome": {"tonight", "night",
//! "already", "changes", "bisections"}}`. Exit 1 when tonight found a
//! regression ([`nightly::Outcome::regressed`]), 2 when a bisection failed
//! ([`nightly::Outcome::failed`], which outranks it), else 0.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde::Serialize;

use super::report::{ending, print_junit, Gating};
use super::{print_json, run_options, Exit, Global, MatrixArgs};
use crate::nightly::{self, real::Real};
use crate::{finish, history};

/// `harness nightly`'s arguments.
#[derive(clap::Args, Debug)]
pub(super) struct Args {
    #[command(flatten)]
    m: MatrixArgs,
    /// The git tree (only read: the nightly checks commits out in its own clone).
    #[arg(long, value_name = "TREE")]
    git: PathBuf,
    /// The branch (or any commit-ish) whose tip is tonight's commit.
    #[arg(long, value_name = "B")]
    branch: String,
    /// The nightly's directory: its clone, nights, bisections and reports
    /// (default: `<runs-dir>/nightly`).
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
    /// The smallest change point that counts: a relative change of the
    /// segment medians (default: `harness history`'s).
    #[arg(long, value_name = "FRACTION", default_value_t = crate::stats::changepoint::Params::default().min_magnitude)]
    min_change: f64,
    /// The level of the change points' permutation test (default: `harness history`'s).
    #[arg(long, value_name = "P", default_value_t = crate::stats::changepoint::Params::default().alpha)]
    change_alpha: f64,
    /// Boot jobs at once, as for `run`.
    #[arg(long, value_name = "N")]
    jobs: Option<u32>,
    /// Allow --jobs above 1 under a wall clock, as for `run`.
    #[arg(long)]
    allow_concurrent_wall: bool,
    /// Also write tonight's key cells against base as JUnit XML into FILE (for CI).
    #[arg(long, value_name = "FILE")]
    junit: Option<PathBuf>,
    /// No progress output.
    #[arg(long, short)]
    quiet: bool,
}

/// `harness nightly --json`.
#[derive(Serialize)]
struct Printed<'a> {
    /// The mail report's file.
    report: &'a Path,
    /// Tonight's run directory.
    run_dir: &'a Path,
    /// What the night did.
    outcome: &'a nightly::Outcome,
}

/// One night; refused while another nightly runs on the same history.
pub(super) fn run(a: Args, g: &Global) -> Result<Exit> {
    crate::proc::install_signal_handler()?;
    let (matrix, profile) = a.m.resolve()?;
    let tree = std::path::absolute(&a.git).context("resolve --git")?;
    let dir = std::path::absolute(a.dir.unwrap_or_else(|| g.runs_dir.join("nightly"))).context("resolve --dir")?;
    let hist = g.history_path();
    let measuring = nightly::lock(&hist)?;
    let tonight = nightly::real::tonight(&tree, &a.branch)?;
    let mut opts = run_options(g, &matrix, a.quiet)?;
    (opts.jobs, opts.allow_concurrent_wall) = (a.jobs, a.allow_concurrent_wall);
    let changepoints = crate::stats::changepoint::Params {
        min_magnitude: a.min_change,
        alpha: a.change_alpha,
        ..Default::default()
    };
    let mut robot = Real {
        tree,
        matrix,
        profile: profile.clone(),
        dir: dir.clone(),
        history: hist.clone(),
        opts,
        changepoints,
    };
    let key = nightly::key(&history::matrix_id(&robot.load()?), profile.as_deref());
    let mut db = history::open(&hist)?;
    let locks = nightly::Locks {
        measuring,
        history: hist.clone(),
    };
    let (o, telling) = nightly::night(&mut db, &key, &dir, &tonight, &mut robot, locks, &|s| eprintln!("{s}"))?;
    let run_dir = nightly::state::run_dir(&db, o.night.run_id.as_deref().unwrap_or_default())?;
    let done = finish::finish(&run_dir, &ending(g, Gating::default(), a.junit.as_deref()))?;
    if let Err(e) = &done.files {
        eprintln!("warning: the report files were not written: {e}");
    }
    let (r, meta) = (&done.reported.report, &done.reported.meta);
    let cells = nightly::mail::key_cells(r, &meta.matrix.key_metrics);
    let (text, file) = nightly::mail::write(&dir, &o, &cells)?;
    nightly::told(&db, &o, telling)?;
    if g.json {
        print_json(&Printed {
            report: &file,
            run_dir: &run_dir,
            outcome: &o,
        })?;
    } else {
        print!("{text}");
        println!("report: {}", file.display());
    }
    print_junit(&done)?;
    Ok(exit(&o))
}

/// The night's exit code: a failed stage outranks a regression, as a
/// variant that could not be made outranks `try`'s gate.
fn exit(o: &nightly::Outcome) -> Exit {
    if o.failed() {
        Exit::NightFailed
    } else if o.regressed() {
        Exit::NightRegressed
    } else {
        Exit::Done
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nightly::{Bisected, Bisection, KeyChange, Night, Outcome, Seen, Status, Tonight};

    fn change() -> KeyChange {
        KeyChange {
            bench: "static-doexec".into(),
            metric: "execs_per_s".into(),
            vcpus: 2,
            good_run: "r1".into(),
            bad_run: "r2".into(),
            date: "2026-12-03".into(),
            change: -0.011,
            interval: None,
            p: 0.001,
            worse: true,
            unit: "execs/s".into(),
        }
    }

    #[test]
    fn a_failed_stage_outranks_a_regression_and_a_quiet_night_is_done() {
        let mut o = Outcome {
            tonight: Tonight {
                commit: "c2".into(),
                subject: "s".into(),
            },
            night: Night {
                id: 3,
                commit: "c2".into(),
                subject: "s".into(),
                runs_dir: "nights/c2".into(),
                run_id: Some("r2".into()),
                finished: true,
            },
            already: false,
            changes: vec![],
            bisections: vec![],
            elsewhere: None,
        };
        assert_eq!(exit(&o), Exit::Done);
        o.changes.push(Seen {
            change: change(),
            action: "bisection #1 started".into(),
            started: Some(1),
        });
        assert_eq!((exit(&o), exit(&o).code()), (Exit::NightRegressed, 1));
        o.bisections.push(Bisection {
            id: 1,
            change: change(),
            good_commit: "c1".into(),
            bad_commit: "c2".into(),
            widened: vec![],
            dir: None,
            status: Status::Pending,
            attempts: 1,
            result: Some(Bisected {
                error: Some("check out c1: no space left on device".into()),
                ..Default::default()
            }),
            reported_night: None,
        });
        assert_eq!((exit(&o), exit(&o).code()), (Exit::NightFailed, 2));
    }
}
