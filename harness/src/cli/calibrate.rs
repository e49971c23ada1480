//! `harness calibrate`: an A/A run of base against itself, and the floors
//! it gives, stored for later runs of the same matrix and profile on this
//! host. With `--json` it prints the stored calibration as one object.

use anyhow::{Context, Result};

use super::{print_json, run_options, Exit, Global, MatrixArgs};
use crate::{config, pipeline, report, store};

/// `harness calibrate`'s arguments.
#[derive(clap::Args, Debug)]
pub(super) struct Args {
    #[command(flatten)]
    m: MatrixArgs,
    /// No progress output.
    #[arg(long, short)]
    quiet: bool,
}

/// Runs the A/A matrix, computes and stores the floors, prints them.
pub(super) fn run(a: Args, g: &Global) -> Result<Exit> {
    crate::proc::install_signal_handler()?;
    let (matrix, profile) = a.m.resolve()?;
    let m = config::load(&matrix, profile.as_deref()).context("load the matrix")?;
    let opts = run_options(g, &matrix, a.quiet)?;
    let mut aa = crate::calibrate::aa_matrix(&m);
    aa.profile = Some(format!(
        "calibrate{}",
        m.profile.as_ref().map(|p| format!("-{p}")).unwrap_or_default()
    ));
    let dir = pipeline::start_fixed(aa, &opts)?;
    let run = store::Run::open(&dir)?;
    let (meta, events) = (run.meta()?, run.events()?);
    let r = report::build_from(
        &meta,
        &run.samples()?,
        &events,
        &report::Floors::none("none (this is the A/A run)"),
    );
    let cal = crate::calibrate::compute(&r, &meta, &events, m.profile.clone());
    if let Some(kept) = crate::calibrate::save(&g.work(), &cal)? {
        eprintln!(
            "note: the calibration store could not be read; it is kept at {} and a new one was begun",
            kept.display()
        );
    }
    if g.json {
        print_json(&cal)?;
        return Ok(Exit::Done);
    }
    print!("{}", super::report::table(&r, g));
    print_floors(&cal, &m.statistics);
    println!(
        "stored in {} for runs of this matrix and profile on this host",
        crate::calibrate::path(&g.work()).display()
    );
    Ok(Exit::Done)
}

/// Each floor, the threshold reports will judge against, and the A/A
/// false-positive rate.
fn print_floors(cal: &crate::calibrate::Calibration, stats: &crate::config::Statistics) {
    for f in &cal.floors {
        let used = stats.threshold_for(&f.benchmark, &f.metric);
        println!(
            "floor {}.{} at {} vCPUs ({}): {:.2}% from {}+{} boots (seen {:.2}%, boot spread {:.2}%); reports judge against the declared threshold {:.2}% (the interval carries the noise)",
            f.benchmark, f.metric, f.vcpus, f.clock, f.floor * 100.0, f.boots.0, f.boots.1, f.observed * 100.0, f.spread * 100.0, used * 100.0
        );
    }
    println!(
        "A/A cells called regressed or improved: {} of {} ({:.1}%)",
        (cal.false_positive_rate * cal.cells as f64).round(),
        cal.cells,
        cal.false_positive_rate * 100.0
    );
}
