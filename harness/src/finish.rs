//! How every measuring command ends, once: the gate's second stage, the
//! history, and the report — built with the floors of the calibration that
//! fits the run and the history's standings, written as
//! `report.{json,csv,html}` into the run, judged by the gate, written as
//! JUnit XML when asked. `run`, `try`, `report`, the nightly and `compare`
//! end here; the second stage picks its cells from the report the gate
//! will judge (the same floors). Returns what happened as values; the
//! caller prints them.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use crate::pipeline::{self, Options};
use crate::plan::CellKey;
use crate::records::RunMeta;
use crate::report::{self, Floors, Report};
use crate::workdir::WorkDir;
use crate::{calibrate, history, store};

/// How the gate judges a report: not at all, on its failures, or on its
/// warnings too (`--gate`, `--gate --strict`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum GateMode {
    /// No gate: the exit code says nothing of the verdicts.
    #[default]
    Off,
    /// A key metric that regressed fails.
    On,
    /// Its warnings (unsure, fails more without significance) fail too.
    Strict,
}

impl GateMode {
    /// Whether a gate was asked for.
    pub fn asked(self) -> bool {
        self != GateMode::Off
    }

    /// Whether the gate's findings fail the command.
    pub fn fails(self, g: &report::Gate) -> bool {
        self.asked() && g.fails(self == GateMode::Strict)
    }
}

/// Where a run ends: the work directory (calibrations, the kernel cache)
/// and the history database, and what the caller asked of the end.
#[derive(Debug, Clone)]
pub struct Ending {
    /// The work directory.
    pub work_dir: WorkDir,
    /// The history database.
    pub history_db: PathBuf,
    /// The gate.
    pub gate: GateMode,
    /// Where to write the key cells as JUnit XML, if anywhere.
    pub junit: Option<PathBuf>,
}

/// A run's report and what it was made from.
pub struct Reported {
    /// The run.
    pub run: store::Run,
    /// Its `run.json`.
    pub meta: RunMeta,
    /// The report: floors of the calibration that fits, the history's standings.
    pub report: Report,
}

/// How a report ended: the report, whether its files were written, the
/// gate's findings, the JUnit file.
pub struct Finished {
    /// The report and its run.
    pub reported: Reported,
    /// `report.{json,csv,html}` written into the run, or why not (the
    /// report stands as returned: a read-only run directory loses nothing).
    pub files: Result<(), String>,
    /// The gate's findings, judged by [`Ending::gate`].
    pub gate: report::Gate,
    /// The JUnit XML written (its path), or why not; None when not asked.
    pub junit: Option<Result<PathBuf>>,
}

/// The floors of the stored calibration that fits `run` (none when none fits).
pub fn floors(run: &store::Run, work_dir: &WorkDir) -> Result<Floors> {
    Ok(calibrate::floors_for_run(work_dir, &run.meta()?, &run.events()?))
}

/// A run's report with the floors of the calibration that fits it.
pub fn with_floors(run: &store::Run, work_dir: &WorkDir) -> Result<Report> {
    report::build(run, &floors(run, work_dir)?)
}

/// A run's report: calibrated floors, and each key cell's standing in the
/// history when one exists (a history that cannot be read is a note on
/// the report, never a failed report).
pub fn report_of(run_dir: &Path, e: &Ending) -> Result<Reported> {
    let run = store::Run::open(run_dir)?;
    let meta = run.meta()?;
    let mut report = with_floors(&run, &e.work_dir)?;
    let done = history::open_existing(&e.history_db).and_then(|db| match db {
        Some(db) => history::annotate(&mut report, &db, &meta, &run.events()?),
        None => Ok(()),
    });
    if let Err(err) = done {
        report.notes.push(format!("history not consulted: {err:#}"));
    }
    Ok(Reported { run, meta, report })
}

/// Builds the report of a run and writes its files, gate and JUnit XML
/// (last: an unwritable JUnit path loses nothing the run directory holds).
pub fn finish(run_dir: &Path, e: &Ending) -> Result<Finished> {
    let reported = report_of(run_dir, e)?;
    let files = write_files(&reported);
    let gate = report::report_gate(&reported.report, &reported.meta.matrix.key_metrics);
    let junit = e.junit.as_deref().map(|p| write_junit(&reported, e.gate, p));
    Ok(Finished {
        reported,
        files,
        gate,
        junit,
    })
}

/// Writes `report.{json,csv,html}` into the run, each whole; the error in
/// words.
fn write_files(r: &Reported) -> Result<(), String> {
    report::files(&r.report)
        .and_then(|f| report::write_files(&r.run.dir, &f))
        .map_err(|err| format!("{err:#}"))
}

/// Writes the key cells of `r` as JUnit XML into `path`; the error names it.
fn write_junit(r: &Reported, gate: GateMode, path: &Path) -> Result<PathBuf> {
    let xml = report::render::junit::junit(&r.report, &r.meta.matrix.key_metrics, gate == GateMode::Strict);
    std::fs::write(path, xml).with_context(|| format!("write the junit report {}", path.display()))?;
    Ok(path.to_path_buf())
}

/// The gate's second stage of a finished first stage, when a gate was
/// asked for: the cells the first stage left undecided, picked from the
/// report the gate will judge (the calibrated floors), boot again. The
/// cells sent and the jobs planned; None without a gate.
pub fn second_stage(run_dir: &Path, opts: &Options, e: &Ending) -> Result<Option<(Vec<CellKey>, usize)>> {
    if !e.gate.asked() {
        return Ok(None);
    }
    pipeline::second_stage(run_dir, opts, |run| floors(run, &e.work_dir)).map(Some)
}

/// Adds a finished run to the history.
pub fn add_to_history(run_dir: &Path, e: &Ending) -> Result<history::Added> {
    let mut db = history::open(&e.history_db)?;
    history::add(&mut db, run_dir, &e.work_dir, history::Sources::Live)
}

/// What `harness run` measures: a matrix from the start (its profile made
/// for this host), or an interrupted run to finish.
pub enum Start {
    /// The matrix file and the profile asked for.
    Matrix {
        /// The matrix file (absolute).
        path: PathBuf,
        /// The profile asked for.
        profile: Option<String>,
    },
    /// The run directory of an interrupted run.
    Resume(PathBuf),
}

/// `harness run`: starts (or resumes) the run, boots the gate's second
/// stage when asked, adds the run to the history (a failure there is said,
/// never the run's failure) and finishes its report. `say` gets each line
/// for the user as it happens.
pub fn run(start: Start, opts: &Options, e: &Ending, say: &dyn Fn(&str)) -> Result<Finished> {
    let run_dir = match start {
        Start::Resume(dir) => {
            say(&format!("resuming {}", dir.display()));
            pipeline::resume(&dir, opts)?
        }
        Start::Matrix { path, profile } => {
            let load = || {
                pipeline::for_this_host(
                    crate::config::load(&path, profile.as_deref()).context("load the matrix")?,
                    &opts.work_dir,
                )
            };
            pipeline::start_for_this_host(load()?, load, opts)?
        }
    };
    measured(&run_dir, opts, e, true, say)
}

/// The end of a measured run: the second stage (when a gate was asked
/// for, said), the history (when `remember`), the finished report.
pub fn measured(run_dir: &Path, opts: &Options, e: &Ending, remember: bool, say: &dyn Fn(&str)) -> Result<Finished> {
    if let Some((sent, jobs)) = second_stage(run_dir, opts, e)? {
        if jobs > 0 {
            let what: Vec<String> = sent.iter().map(ToString::to_string).collect();
            say(&format!("gate: second stage: {jobs} boot jobs for {} (their first stage ended unsure or ~ reaching past the threshold)", what.join(", ")));
        }
    }
    if remember {
        match add_to_history(run_dir, e) {
            Ok(a) => say(&format!(
                "history: {} {} ({})",
                e.history_db.display(),
                run_dir.display(),
                a.word()
            )),
            Err(err) => crate::ui::notice(&format!("the run is not in the history: {err:#}")),
        }
    }
    finish(run_dir, e)
}
