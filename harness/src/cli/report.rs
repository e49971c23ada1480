//! `harness report` and `harness compare`, and the report every measuring
//! command ends with: built with the floors of the calibration that fits,
//! annotated from the history, written as `report.{json,csv,html}` into the
//! run, printed, and gated. With `--json` `report` (and `run`, `try`)
//! prints the report as one object (the `report.json` record); `compare`
//! prints one array of compared cells.

use std::path::{Path, PathBuf};

use anyhow::Result;

use super::{print_json, Exit, Global};
use crate::finish::{self, Ending, Finished, GateMode};
use crate::{report, store};

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
    /// The gate as the library takes it.
    pub(super) fn mode(self) -> GateMode {
        match (self.gate, self.strict) {
            (false, _) => GateMode::Off,
            (true, false) => GateMode::On,
            (true, true) => GateMode::Strict,
        }
    }
}

/// The end the command asked for: this host's work directory and history,
/// the gate, the JUnit file.
pub(super) fn ending(g: &Global, gating: Gating, junit: Option<&Path>) -> Ending {
    Ending {
        work_dir: g.work(),
        history_db: g.history_path(),
        gate: gating.mode(),
        junit: junit.map(Path::to_path_buf),
    }
}

/// Prints the gate's findings (when asked for) and gives its outcome:
/// [`Exit::Regressed`] when it fails.
fn apply(mode: GateMode, g: &report::Gate) -> Exit {
    if !mode.asked() {
        return Exit::Done;
    }
    for f in &g.failures {
        eprintln!("gate: fails: {f}");
    }
    let tag = if mode == GateMode::Strict {
        "fails (--strict)"
    } else {
        "warning (fatal with --strict)"
    };
    for w in &g.warnings {
        eprintln!("gate: {tag}: {w}");
    }
    if mode.fails(g) {
        Exit::Regressed
    } else {
        Exit::Done
    }
}

/// The report as text at the terminal's width: compact, or every cell's
/// full text with `--verbose`.
pub(super) fn table(r: &report::Report, g: &Global) -> String {
    report::table_as(r, report::render::compact::terminal_width(), g.verbose)
}

/// Tabulates the run again and writes its report files.
pub(super) fn run(a: Args, g: &Global) -> Result<Exit> {
    let e = ending(g, a.gating, a.junit.as_deref());
    print_finished(&finish::finish(&a.run_dir, &e)?, g, e.gate)
}

/// The same cells of two runs, B against A, gated on B's key metrics.
pub(super) fn compare(a: CompareArgs, g: &Global) -> Result<Exit> {
    let (ra, rb) = (store::Run::open(&a.run_a)?, store::Run::open(&a.run_b)?);
    let (ma, mb) = (
        finish::with_floors(&ra, &g.work())?,
        finish::with_floors(&rb, &g.work())?,
    );
    report::compare::same_clock(&ma, &mb)?;
    let rows = report::compare::compare(&ma, &mb, &mb.rule);
    if g.json {
        print_json(&rows)?;
    } else {
        print!("{}", report::compare::table(&ma.run_id, &mb.run_id, &rows));
        let floors = format!("floors: A {}; B {}", ma.floor_source, mb.floor_source);
        print!(
            "{}",
            report::render::compact::wrap(&floors, report::render::compact::terminal_width(), 2)
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
    Ok(apply(a.gating.mode(), &gate))
}

/// Prints a finished report (the table, or the JSON object with
/// `--json`), where its files went, the gate's findings and the JUnit
/// file, and gives the gate's outcome; a JUnit file that could not be
/// written is the error, after all the rest.
pub(super) fn print_finished(f: &Finished, g: &Global, mode: GateMode) -> Result<Exit> {
    let r = &f.reported.report;
    if g.json {
        print_json(r)?;
    } else {
        print!("{}", table(r, g));
    }
    print_files(f, g);
    let exit = apply(mode, &f.gate);
    print_junit(f)?;
    Ok(exit)
}

/// Where the report files went, or the warning that they did not.
pub(super) fn print_files(f: &Finished, g: &Global) {
    match &f.files {
        Ok(()) if !g.json => println!(
            "report files: {}/report.{{json,csv,html}}",
            f.reported.run.dir.display()
        ),
        Ok(()) => {}
        Err(e) => eprintln!("warning: the report files were not written: {e}"),
    }
}

/// The JUnit file written, or the error that it was not.
pub(super) fn print_junit(f: &Finished) -> Result<()> {
    match &f.junit {
        Some(Ok(p)) => eprintln!("junit: {}", p.display()),
        Some(Err(e)) => return Err(anyhow::anyhow!("{e:#}")),
        None => {}
    }
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
        let gating = |gate, strict| Gating { gate, strict }.mode();
        assert_eq!(apply(gating(false, false), &failing), Exit::Done);
        assert_eq!(apply(gating(true, false), &failing), Exit::Regressed);
        assert_eq!(apply(gating(true, false), &warning), Exit::Done);
        assert_eq!(apply(gating(true, true), &warning), Exit::Regressed);
        assert_eq!(Exit::Regressed.code(), 1);
    }
}
