//! `harness run`: a matrix from the start, `--resume` of an interrupted
//! run, or `--shard K/N` of a run `harness build` made. With `--json` it
//! prints the report (one object, as `harness report --json`), or for a
//! shard one object `{"shard": "K/N", "run_dir": …}`.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde::Serialize;

use super::report::{ending, print_finished, Gating};
use super::{print_json, run_options, Exit, Global, MatrixArgs};
use crate::{finish, pipeline, plan, store};

/// `harness run`'s arguments.
#[derive(clap::Args, Debug)]
pub(super) struct Args {
    #[command(flatten)]
    m: MatrixArgs,
    /// Finish an interrupted run instead of starting one.
    #[arg(long, value_name = "RUN_DIR", conflicts_with = "shard")]
    resume: Option<PathBuf>,
    /// Run only shard K of N of the boot jobs of the run in --run-dir (made
    /// by `harness build`), kernels from the cache; K counts from 0.
    #[arg(long, value_name = "K/N", requires = "run_dir")]
    shard: Option<plan::Shard>,
    /// The shared run directory a shard writes into.
    #[arg(long, value_name = "DIR", requires = "shard")]
    run_dir: Option<PathBuf>,
    /// Boot jobs at once. Default: under icount as many as the host's CPUs
    /// and available memory hold guests; under a wall clock 1.
    #[arg(long, value_name = "N")]
    jobs: Option<u32>,
    /// Allow --jobs above 1 under a wall clock (guests then share the
    /// host's CPUs; the report says so).
    #[arg(long)]
    allow_concurrent_wall: bool,
    #[command(flatten)]
    gating: Gating,
    /// Also write the key cells against base as JUnit XML into FILE (for CI),
    /// after the report files.
    #[arg(long, value_name = "FILE", conflicts_with = "shard")]
    junit: Option<PathBuf>,
    /// No progress output.
    #[arg(long, short)]
    quiet: bool,
}

/// Runs (or resumes) the matrix, adds the finished run to the history and
/// prints its report.
pub(super) fn run(a: Args, g: &Global) -> Result<Exit> {
    let at_once = |mut o: pipeline::Options| {
        (o.jobs, o.allow_concurrent_wall) = (a.jobs, a.allow_concurrent_wall);
        o
    };
    if let (Some(shard), Some(dir)) = (a.shard, &a.run_dir) {
        return run_shard(
            g,
            dir,
            shard,
            at_once(run_options(g, &store::Run::open(dir)?.meta()?.matrix.path, a.quiet)?),
        );
    }
    let (matrix, profile) = a.m.resolve()?;
    crate::proc::install_signal_handler()?;
    let (start, opts) = match a.resume {
        Some(dir) => {
            let meta = store::Run::open(&dir)?.meta()?;
            (
                finish::Start::Resume(dir),
                at_once(run_options(g, &meta.matrix.path, a.quiet)?),
            )
        }
        None => {
            let opts = at_once(run_options(g, &matrix, a.quiet)?);
            (finish::Start::Matrix { path: matrix, profile }, opts)
        }
    };
    let e = ending(g, a.gating, a.junit.as_deref());
    let done = finish::run(start, &opts, &e, &|line| eprintln!("{line}"))?;
    print_finished(&done, g, e.gate)
}

/// `harness run --shard K/N --json`: the shard that finished.
#[derive(Serialize)]
struct ShardDone<'a> {
    /// `K/N`.
    shard: String,
    /// The shared run directory.
    run_dir: &'a Path,
}

/// `harness run --shard K/N --run-dir DIR`: the shard's boot jobs; the
/// report is the report job's (`harness report DIR`).
fn run_shard(g: &Global, dir: &Path, shard: plan::Shard, opts: pipeline::Options) -> Result<Exit> {
    crate::proc::install_signal_handler()?;
    let dir = std::path::absolute(dir).context("resolve --run-dir")?;
    pipeline::shard(&dir, shard, &opts)?;
    if g.json {
        print_json(&ShardDone {
            shard: shard.to_string(),
            run_dir: &dir,
        })?;
    } else {
        println!(
            "shard {shard} of {} done; the merged report: harness report {}",
            dir.display(),
            dir.display()
        );
    }
    Ok(Exit::Done)
}
