//! `harness report` and `harness compare`, and the report every measuring
//! command ends with: built with the floors of the calibration that fits,
//! annotated from the history, written as `report.{json,csv,html}` into the
//! run, printed, and gated. With `--json` `report` (and `run`, `try`)
//! prints the report as one object (the `report.json` record); `compare`
//! prints one array of compared cells.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use super::{print_json, Exit, Global};
use crate::{history, report, store};

/// `harness report`'s arguments.
#[derive(clap::Args, Debug)]
pub(super) struct Args {
    /// The run directory.
    run_dir: PathBuf,
    #[command(flatten)]
    gating: Gating,
    /// Also write the key cells against base as JUnit XML into FILE (for CI),
    /// after the report files.
    #[arg(long, value_name = "FILE")]
    junit: Option<PathBuf>,
}

/// `harness compare`'s arguments.
#[derive(clap::Args, Debug)]
pub(super) struct CompareArgs {
    /// The earlier run.
    run_a: PathBuf,
    /// The later run.
    run_b: PathBuf,
    #[command(flatten)]
    gating: Gating,
}

/// `--gate` and `--strict`, shared by every command that reports.
#[derive(clap::Args, Clone, Copy, Debug, Default)]
pub(super) struct Gating {
    /// Exit 1 when a key metric regressed (pre-merge gate).
    #[arg(long)]
    gate: bool,
    /// With --gate, also exit 1 on its warnings (unsure, fails more without significance).
    #[arg(long, requires = "gate")]
    strict: bool,
}

impl Gating {
    /// `--gate` was given.
    pub(super) fn asked(self) -> bool {
        self.gate
    }

    /// The gate's outcome: [`Exit::Regressed`] when it is asked for and fails.
    pub(super) fn exit(self, g: &report::Gate) -> Exit {
        if self.gate && g.fails(self.strict) {
            Exit::Regressed
        } else {
            Exit::Done
        }
    }

    /// Prints the gate's findings (when asked for) and gives its outcome.
    pub(super) fn apply(self, g: &report::Gate) -> Exit {
        if !self.gate {
            return Exit::Done;
        }
        for f in &g.failures {
            eprintln!("gate: fails: {f}");
        }
        let tag = if self.strict {
            "fails (--strict)"
        } else {
            "warning (fatal with --strict)"
        };
        for w in &g.warnings {
            eprintln!("gate: {tag}: {w}");
        }
        self.exit(g)
    }
}

/// The report as text at the terminal's width: compact, or every cell's
/// full text with `--verbose`.
pub(super) fn table(r: &report::Report, g: &Global) -> String {
    report::table_as(r, report::compact::terminal_width(), g.verbose)
}

/// Tabulates the run again and writes its report files.
pub(super) fn run(a: Args, g: &Global) -> Result<Exit> {
    finish_report(&a.run_dir, g, a.gating, a.junit.as_deref())
}

/// A run's report with the floors of the stored calibration that fits it.
fn build_report(run: &store::Run, work_dir: &Path) -> Result<report::Report> {
    let floors = crate::calibrate::floors_for_run(work_dir, &run.meta()?, &run.events()?);
    report::build(run, &floors)
}

/// The same cells of two runs, B against A, gated on B's key metrics.
pub(super) fn compare(a: CompareArgs, g: &Global) -> Result<Exit> {
    let (ra, rb) = (store::Run::open(&a.run_a)?, store::Run::open(&a.run_b)?);
    let (ma, mb) = (build_report(&ra, &g.work_dir)?, build_report(&rb, &g.work_dir)?);
    report::compare::same_clock(&ma, &mb)?;
    let rows = report::compare::compare(&ma, &mb, &mb.rule);
    if g.json {
        print_json(&rows)?;
    } else {
        print!("{}", report::compare::table(&ma.run_id, &mb.run_id, &rows));
        let floors = format!("floors: A {}; B {}", ma.floor_source, mb.floor_source);
        print!(
            "{}",
            report::compact::wrap(&floors, report::compact::terminal_width(), 2)
        );
        if let Some(line) = report::compare::host_differs(&ra.meta()?, &rb.meta()?) {
            println!("{line}");
        }
    }
    let key = rb.meta()?.matrix.key_metrics;
    let mut gate = report::gate(rows.iter().map(|r| r.gate_item()), &key);
    let compared = rows.iter().map(|r| (r.benchmark.as_str(), r.metric.as_str()));
    gate.failures
        .extend(report::unmatched_keys(&key, compared).into_iter().map(|(_, t)| t));
    Ok(a.gating.apply(&gate))
}

/// Adds a finished run to the history; a failure is a notice, never a failed run.
pub(super) fn add_to_history(g: &Global, run_dir: &Path) {
    let path = g.history_path();
    let added =
        history::open(&path).and_then(|mut db| history::add(&mut db, run_dir, &g.work_dir, history::Sources::Live));
    match added {
        Ok(a) => eprintln!("history: {} {} ({})", path.display(), run_dir.display(), a.word()),
        Err(e) => crate::ui::notice(&format!("the run is not in the history: {e:#}")),
    }
}

/// Writes each key cell's standing against the history (when one exists)
/// into the report; a failure is a note, never a failed report.
fn annotate_history(r: &mut report::Report, g: &Global, run: &store::Run) {
    let done = history::open_existing(&g.history_path()).and_then(|db| match db {
        Some(db) => history::annotate(r, &db, &run.meta()?, &run.events()?),
        None => Ok(()),
    });
    if let Err(e) = done {
        r.notes.push(format!("history not consulted: {e:#}"));
    }
}

/// With `--gate`, the matrix's second stage for the cells the first stage
/// left undecided (said on stderr); nothing without `--gate`.
pub(super) fn second_stage(run_dir: &Path, opts: &crate::pipeline::Options, gating: Gating) -> Result<()> {
    if !gating.asked() {
        return Ok(());
    }
    let (sent, jobs) = crate::pipeline::second_stage(run_dir, opts)?;
    if jobs > 0 {
        let what: Vec<String> = sent.iter().map(ToString::to_string).collect();
        eprintln!("gate: second stage: {jobs} boot jobs for {} (their first stage ended unsure or ~ reaching past the threshold)", what.join(", "));
    }
    Ok(())
}

/// Builds the report of a run, prints it, then writes
/// report.json/report.csv/report.html into it (a warning where it cannot),
/// applies the gate, and writes the JUnit XML when asked (last: an
/// unwritable path loses nothing the run directory holds).
pub(super) fn finish_report(run_dir: &Path, g: &Global, gating: Gating, junit: Option<&Path>) -> Result<Exit> {
    let (run, meta, r) = report_of(run_dir, g)?;
    if g.json {
        print_json(&r)?;
    } else {
        print!("{}", table(&r, g));
    }
    if write_or_warn(&run, &r) && !g.json {
        println!("report files: {}/report.{{json,csv,html}}", run.dir.display());
    }
    let exit = gating.apply(&report::report_gate(&r, &meta.matrix.key_metrics));
    if let Some(p) = junit {
        write_junit(&r, &meta.matrix.key_metrics, gating, p)?;
    }
    Ok(exit)
}

/// Builds the report of a run: the floors of the calibration that fits,
/// the history's standings.
fn report_of(run_dir: &Path, g: &Global) -> Result<(store::Run, crate::records::RunMeta, report::Report)> {
    let run = store::Run::open(run_dir)?;
    let meta = run.meta()?;
    let mut r = build_report(&run, &g.work_dir)?;
    annotate_history(&mut r, g, &run);
    Ok((run, meta, r))
}

/// Writes report.json/report.csv/report.html into the run (each whole,
/// through a temporary file); where they cannot be written (a read-only
/// run directory) a warning says so and the report stands as printed.
/// Whether they were written.
fn write_or_warn(run: &store::Run, r: &report::Report) -> bool {
    match report::files(r).and_then(|f| report::write_files(&run.dir, &f)) {
        Ok(()) => true,
        Err(e) => {
            eprintln!("warning: the report files were not written: {e:#}");
            false
        }
    }
}

/// Builds the report of a run (floors of the calibration that fits, the
/// history's standings) and writes report.json/report.csv/report.html into
/// it, or warns that it cannot.
pub(super) fn write_report_files(
    run_dir: &Path,
    g: &Global,
) -> Result<(store::Run, crate::records::RunMeta, report::Report)> {
    let (run, meta, r) = report_of(run_dir, g)?;
    write_or_warn(&run, &r);
    Ok((run, meta, r))
}

/// Writes the JUnit XML of a report into `path`; the error names the path.
pub(super) fn write_junit(r: &report::Report, key_metrics: &[String], gating: Gating, path: &Path) -> Result<()> {
    let xml = report::junit::junit(r, key_metrics, gating.strict);
    std::fs::write(path, xml).with_context(|| format!("write the junit report {}", path.display()))?;
    eprintln!("junit: {}", path.display());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_gate_fails_only_when_asked_for() {
        let failing = crate::report::Gate {
            failures: vec!["static-doexec regressed".into()],
            warnings: vec![],
        };
        let warning = crate::report::Gate {
            failures: vec![],
            warnings: vec!["static-doexec unsure".into()],
        };
        let gating = |gate, strict| Gating { gate, strict };
        assert_eq!(gating(false, false).exit(&failing), Exit::Done);
        assert_eq!(gating(true, false).exit(&failing), Exit::Regressed);
        assert_eq!(gating(true, false).exit(&warning), Exit::Done);
        assert_eq!(gating(true, true).exit(&warning), Exit::Regressed);
        assert_eq!(Exit::Regressed.code(), 1);
    }
}
