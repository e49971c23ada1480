//! `harness nightly`: one night of the nightly robot ([`crate::nightly`]):
//! tonight's commit measured (once), the run added to the history and its
//! report files written, bisections of new changes for the worse run (or
//! resumed), and the mail report written to `<dir>/reports/<time>-<commit>.md`
//! and printed. With `--json` the progress goes to stderr and stdout gets one
//! object: `{"report": FILE, "run_dir": DIR, "outcome": {"tonight", "night",
//! "already", "changes", "bisections"}}`.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde::Serialize;

use super::report::{write_junit, write_report_files, Gating};
use super::{print_json, run_options, Exit, Global, MatrixArgs};
use crate::nightly::{self, real::Real};
use crate::{history, report};

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
    let _lock = nightly::lock(&hist)?;
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
    let o = nightly::night(&mut db, &key, &dir, &tonight, &mut robot, &|s| eprintln!("{s}"))?;
    let run_id = o.night.run_id.clone().unwrap_or_default();
    let run_dir: String = db
        .query_row("SELECT run_dir FROM runs WHERE run_id = ?1", [&run_id], |r| r.get(0))
        .with_context(|| format!("find run {run_id} in the history"))?;
    let (_, meta, r) = write_report_files(Path::new(&run_dir), g)?;
    let text = nightly::mail::text(&o, &cells(&r, &meta.matrix.key_metrics));
    let reports = dir.join("reports");
    std::fs::create_dir_all(&reports).with_context(|| format!("create {}", reports.display()))?;
    let file = reports.join(format!(
        "{}-{}.md",
        crate::util::stamp(),
        nightly::short(&o.tonight.commit)
    ));
    std::fs::write(&file, &text).with_context(|| format!("write {}", file.display()))?;
    nightly::told(&db, &o)?;
    if g.json {
        print_json(&Printed {
            report: &file,
            run_dir: Path::new(&run_dir),
            outcome: &o,
        })?;
    } else {
        print!("{text}");
        println!("report: {}", file.display());
    }
    if let Some(p) = &a.junit {
        write_junit(&r, &meta.matrix.key_metrics, Gating::default(), p)?;
    }
    Ok(Exit::Done)
}

/// Tonight's key cells of base: median, interval and standing against history.
fn cells(r: &report::Report, key: &[String]) -> Vec<String> {
    let mut out = vec![];
    for row in r
        .rows
        .iter()
        .filter(|row| report::gate::is_key(key, &row.benchmark, &row.metric))
    {
        for c in row.cells.iter().filter(|c| c.variant == "base") {
            let value = match (&c.summary, &c.failure) {
                (Some(s), _) => format!(
                    "median {:.6} {} ({:.6} to {:.6}, {} boots)",
                    s.median, row.unit, s.ci_lo, s.ci_hi, c.n
                ),
                (None, Some(f)) => format!("no value: {f}"),
                (None, None) => "no value".into(),
            };
            let standing = c
                .history
                .as_deref()
                .map(|h| format!("; history: {h}"))
                .unwrap_or_default();
            out.push(format!(
                "{} {} at {} vCPUs: {value}{standing}",
                row.benchmark, row.metric, row.vcpus
            ));
        }
    }
    out
}
