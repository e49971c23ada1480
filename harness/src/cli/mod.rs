//! Command-line interface: parses arguments (clap), turns each command's
//! arguments into a request for the library, prints the results (tables, or
//! JSON with `--json`), and maps outcomes to exit codes ([`Exit`]). Errors
//! are printed once, as "error: " and the chain of lowercase fragments
//! joined with ": ".
//!
//! One file per command, each with its `Args` (clap) and its `run`:
//! `dispatch` is a table.

mod bisect;
mod build;
mod calibrate;
mod check;
mod exit;
mod explain;
mod gc;
mod history;
mod nightly;
mod report;
mod run;
mod slurm;
mod trial;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};

pub use exit::Exit;

use crate::pipeline;
use crate::workdir::WorkDir;

#[derive(Parser, Debug)]
#[command(
    name = "harness",
    version,
    about = "Does a kernel patch series make Linux faster or slower at scale? Builds, boots and measures variants, and says so with statistics.",
    after_help = Exit::table()
)]
struct Cli {
    #[command(subcommand)]
    cmd: Command,
    #[command(flatten)]
    global: Global,
}

/// Options every command takes.
#[derive(clap::Args, Debug)]
struct Global {
    /// Work directory: the kernel tree copy, the kernel cache, the lock.
    #[arg(long, global = true, env = "HARNESS_WORK_DIR", default_value = "work")]
    work_dir: PathBuf,
    /// Where run directories are created.
    #[arg(long, global = true, env = "HARNESS_RUNS_DIR", default_value = "runs")]
    runs_dir: PathBuf,
    /// Benchmark sources (default: `images/` beside the matrix file, else the ones built into the binary).
    #[arg(long, global = true, env = "HARNESS_IMAGES_DIR")]
    images_dir: Option<PathBuf>,
    /// The nightly history database (default: `<work-dir>/history.sqlite`).
    #[arg(long, global = true, env = "HARNESS_HISTORY_DB")]
    history_db: Option<PathBuf>,
    /// Print machine-readable JSON instead of tables.
    #[arg(long, global = true)]
    json: bool,
    /// Print every cell's full text in the report's table (the default: one line per cell).
    #[arg(long, global = true)]
    verbose: bool,
}

impl Global {
    /// The history database's path.
    fn history_path(&self) -> PathBuf {
        crate::history::path(self.history_db.as_deref(), &self.work())
    }

    /// The work directory (`--work-dir`, made absolute in `dispatch`).
    fn work(&self) -> WorkDir {
        WorkDir::at(&self.work_dir)
    }
}

/// Which matrix, and which of its profiles.
#[derive(clap::Args, Debug)]
struct MatrixArgs {
    /// The matrix file.
    #[arg(default_value = "matrix.yaml")]
    matrix: PathBuf,
    /// Apply a profile of the matrix (its `profiles:` section).
    #[arg(long, conflicts_with = "quick")]
    profile: Option<String>,
    /// Shorthand for `--profile quick`.
    #[arg(long)]
    quick: bool,
}

impl MatrixArgs {
    /// The absolute matrix path and the profile asked for.
    fn resolve(self) -> Result<(PathBuf, Option<String>)> {
        let path = std::path::absolute(&self.matrix).context("resolve the matrix path")?;
        Ok((path, if self.quick { Some("quick".into()) } else { self.profile }))
    }
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run a matrix: patch, build, boot, measure, tabulate.
    Run(run::Args),
    /// Build every variant into the kernel cache and write the run directory,
    /// without booting (shards then run with `run --shard`).
    Build(build::Args),
    /// Write (and with --submit, submit) the matrix as a Slurm job chain:
    /// a build job, a job array of shards, a report job.
    Slurm(slurm::Args),
    /// Check a matrix, the host, QEMU and every series without building.
    Check(check::Args),
    /// Measure this host's noise: run base as two identical arms (A/A).
    Calibrate(calibrate::Args),
    /// Compare the same cells of two runs (B against A).
    Compare(report::CompareArgs),
    /// List (or with --yes delete) old kernels, tree copies and run images.
    Gc(gc::Args),
    /// Nightly trends per cell with change points, from the history database
    /// every finished run is added to; `history import` backfills.
    History(history::Args),
    /// Does a series regress anything? Base against base + the series.
    Try(trial::Args),
    /// Which commit did it? A performance bisection between a good and a bad commit.
    Bisect(bisect::Args),
    /// The nightly robot: measure a branch's tip, add it to the history, bisect
    /// a change point for the worse by itself, write a report to mail.
    Nightly(nightly::Args),
    /// Tabulate a finished or interrupted run again and write report files.
    Report(report::Args),
    /// Why a cell changed: its differential kernel profile (a variant against base).
    Explain(explain::Args),
}

/// Entry point used by the binary.
pub fn main() -> ExitCode {
    // first, while the process has one thread: the watchdog is a fork
    if let Err(e) = crate::proc::start_watchdog() {
        crate::ui::notice(&format!("children may outlive a killed harness: {e:#}"));
    }
    let cli = Cli::parse();
    match dispatch(cli) {
        Ok(exit) => exit.into(),
        Err(e) => {
            if e.downcast_ref::<crate::proc::Interrupted>().is_some() || crate::proc::interrupted() {
                eprintln!("interrupted: results so far are saved; finish with `harness run --resume <run dir>`");
                return Exit::Interrupted.into();
            }
            eprintln!("{}", error_text(&e));
            Exit::Error.into()
        }
    }
}

/// An error as printed: "error: " and its chain of fragments, outermost
/// first, each once, joined with ": ".
fn error_text(e: &anyhow::Error) -> String {
    let chain: Vec<String> = e.chain().map(|c| c.to_string()).collect();
    // a fragment may quote the user's bytes (a name with U+202E in it)
    format!("error: {}", crate::ui::printable_lines(&chain.join(": ")))
}

/// One line per command: its arguments to its `run`.
fn dispatch(mut cli: Cli) -> Result<Exit> {
    // children run in other directories (make -C): every path is made absolute once, here
    cli.global.work_dir = std::path::absolute(&cli.global.work_dir).context("resolve --work-dir")?;
    cli.global.runs_dir = std::path::absolute(&cli.global.runs_dir).context("resolve --runs-dir")?;
    let g = &cli.global;
    match cli.cmd {
        Command::Run(a) => run::run(a, g),
        Command::Build(a) => build::run(a, g),
        Command::Slurm(a) => slurm::run(a, g),
        Command::Check(a) => check::run(a, g),
        Command::Calibrate(a) => calibrate::run(a, g),
        Command::Compare(a) => report::compare(a, g),
        Command::Gc(a) => gc::run(a, g),
        Command::History(a) => history::run(a, g),
        Command::Try(a) => trial::run(a, g),
        Command::Bisect(a) => bisect::run(a, g),
        Command::Nightly(a) => nightly::run(a, g),
        Command::Report(a) => report::run(a, g),
        Command::Explain(a) => explain::run(a, g),
    }
}

/// Where a run of the matrix at `matrix` works, stores and finds its benchmarks.
/// The benchmark sources are `--images-dir`, `images/` beside the matrix,
/// or the copy embedded in the binary ([`crate::builtin`]).
fn run_options(g: &Global, matrix: &Path, quiet: bool) -> Result<pipeline::Options> {
    Ok(pipeline::Options {
        work_dir: g.work(),
        runs_dir: g.runs_dir.clone(),
        images_dir: crate::builtin::images_dir(g.images_dir.as_deref(), matrix, &g.work())?,
        quiet,
        jobs: None,
        allow_concurrent_wall: false,
    })
}

/// Prints `value` as one pretty JSON object (the `--json` output of a
/// command that ends with one record).
fn print_json<T: serde::Serialize>(value: &T) -> Result<()> {
    println!("{}", serde_json::to_string_pretty(value)?);
    Ok(())
}

/// Prints `value` as one JSON line (the `--json` output of a command that
/// writes a record per item as it goes).
fn print_json_line<T: serde::Serialize>(value: &T) -> Result<()> {
    println!("{}", serde_json::to_string(value)?);
    Ok(())
}

#[cfg(test)]
mod tests;
