//! `harness slurm`: writes the job chain's scripts (build, shard array,
//! report), and with `--submit` submits them. With `--json` it prints one
//! object: `{"scripts": DIR, "run_dir": DIR, "shards": N, "submitted":
//! {"build": ID, "shards": ID, "report": ID}}` (`submitted` only with
//! `--submit`).

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde::Serialize;

use super::{print_json, Exit, Global, MatrixArgs};
use crate::{config, pipeline, plan, slurm, store};

/// `harness slurm`'s arguments.
#[derive(clap::Args, Debug)]
pub(super) struct Args {
    #[command(flatten)]
    m: MatrixArgs,
    /// Shards: tasks of the job array.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=1000))]
    shards: u32,
    /// Slurm partition.
    #[arg(long)]
    partition: Option<String>,
    /// Time limit of each job (`--time`).
    #[arg(long)]
    time: Option<String>,
    /// The run directory (default: a new one under --runs-dir).
    #[arg(long, value_name = "DIR")]
    run_dir: Option<PathBuf>,
    /// Submit the chain with sbatch and print the job ids.
    #[arg(long)]
    submit: bool,
}

/// `harness slurm --json`: where the scripts are and what was submitted.
#[derive(Serialize)]
struct Written<'a> {
    /// The directory of the scripts (`<run>/slurm/`).
    scripts: &'a Path,
    /// The run directory the chain fills.
    run_dir: &'a Path,
    /// Tasks of the shard array.
    shards: u32,
    /// The job ids, with `--submit`.
    #[serde(skip_serializing_if = "Option::is_none")]
    submitted: Option<slurm::Submitted>,
}

/// Writes the scripts, and with `--submit` submits them.
pub(super) fn run(a: Args, g: &Global) -> Result<Exit> {
    let shards = a.shards;
    let submit = a.submit;
    let job = job(a, g)?;
    let dir = slurm::write(&job)?;
    if !g.json {
        println!(
            "slurm scripts: {} (submit with {}/submit.sh)",
            dir.display(),
            dir.display()
        );
    }
    let submitted = if submit { Some(slurm::submit(&dir)?) } else { None };
    if g.json {
        print_json(&Written {
            scripts: &dir,
            run_dir: &job.run_dir,
            shards,
            submitted,
        })?;
    } else if let Some(ids) = submitted {
        println!(
            "submitted: build {}, shards {} (array 0-{}), report {}",
            ids.build,
            ids.shards,
            shards - 1,
            ids.report
        );
        println!("run directory: {}", job.run_dir.display());
    }
    Ok(Exit::Done)
}

/// The job chain the arguments ask for.
fn job(a: Args, g: &Global) -> Result<slurm::Job> {
    let (matrix, profile) = a.m.resolve()?;
    let mx = config::load(&matrix, profile.as_deref()).context("load the matrix")?;
    let run_dir = match a.run_dir {
        Some(d) => std::path::absolute(d).context("resolve --run-dir")?,
        None => store::fresh_run_dir(&g.runs_dir, &pipeline::run_label(&mx))?,
    };
    let blocks = plan::block_count(&mx);
    if a.shards as usize > blocks {
        crate::ui::notice(&format!("{} shards for {blocks} blocks of boot jobs (one boot of every variant at one vCPU count): {} shard(s) will have nothing to do", a.shards, a.shards as usize - blocks));
    }
    let (cpus, mem_mib) = slurm::resources(&mx);
    Ok(slurm::Job {
        harness: std::env::current_exe().context("find the harness binary")?,
        matrix,
        profile,
        work_dir: g.work_dir.clone(),
        runs_dir: g.runs_dir.clone(),
        images_dir: g
            .images_dir
            .as_ref()
            .map(std::path::absolute)
            .transpose()
            .context("resolve --images-dir")?,
        run_dir,
        shards: a.shards,
        partition: a.partition,
        time: a.time,
        cpus,
        mem_mib,
    })
}
