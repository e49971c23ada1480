//! `harness history`: every matching series of the history database with
//! its change points, as a table (with `--json`, one array of series) and,
//! with `--html`, a page; `history import` adds run directories (with
//! `--json`, one JSON line per run directory as it is added:
//! `{"run_dir": …, "added": "new" | "unchanged" | "replaced"}`).

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde::Serialize;

use super::{print_json, print_json_line, Exit, Global};
use crate::{history, report};

/// `harness history`'s arguments.
#[derive(clap::Args, Debug)]
pub(super) struct Args {
    #[command(subcommand)]
    action: Option<Action>,
    /// Only this benchmark.
    #[arg(long)]
    bench: Option<String>,
    /// Only this vCPU count.
    #[arg(long)]
    vcpus: Option<u32>,
    /// Only this variant.
    #[arg(long)]
    variant: Option<String>,
    /// Only the last N nights of each series.
    #[arg(long)]
    last: Option<usize>,
    /// Also write the trends as an HTML page.
    #[arg(long, value_name = "FILE")]
    html: Option<PathBuf>,
}

#[derive(clap::Subcommand, Debug)]
enum Action {
    /// Add run directories to the history (runs already there with the same records are left alone).
    Import {
        /// Run directories.
        #[arg(required = true)]
        run_dirs: Vec<PathBuf>,
    },
}

/// Shows the trends, or imports runs.
pub(super) fn run(a: Args, g: &Global) -> Result<Exit> {
    match a.action {
        Some(Action::Import { run_dirs }) => import(g, &run_dirs),
        None => show(
            g,
            &history::Filter {
                bench: a.bench,
                vcpus: a.vcpus,
                variant: a.variant,
                last: a.last,
            },
            a.html.as_deref(),
        ),
    }
}

/// `harness history import --json`: one line per run directory.
#[derive(Serialize)]
struct Imported<'a> {
    /// The run directory.
    run_dir: &'a Path,
    /// What adding it did: `new`, `unchanged` or `replaced`.
    added: String,
}

/// `harness history import`: adds each run directory.
fn import(g: &Global, run_dirs: &[PathBuf]) -> Result<Exit> {
    let path = g.history_path();
    let mut db = history::open(&path)?;
    for dir in run_dirs {
        let a = history::add(&mut db, dir, &g.work(), history::Sources::Records)
            .with_context(|| format!("add {} to the history", dir.display()))?;
        let added = a.word().to_string();
        if g.json {
            print_json_line(&Imported { run_dir: dir, added })?;
        } else {
            println!("{}: {added}", dir.display());
        }
    }
    if g.json {
        eprintln!("history: {}", path.display());
    } else {
        println!("history: {}", path.display());
    }
    Ok(Exit::Done)
}

/// `harness history`: every matching series with its change points, as a
/// table (or JSON) and, with `--html`, a page.
fn show(g: &Global, f: &history::Filter, html: Option<&Path>) -> Result<Exit> {
    let path = g.history_path();
    let Some(db) = history::open_existing(&path)? else {
        anyhow::bail!("read the history {}: it does not exist yet (a finished `harness run` or `harness history import RUN_DIR...` makes it)", path.display());
    };
    let p = crate::stats::changepoint::Params::default();
    let series = history::series(&db, f, &p)?;
    if g.json {
        print_json(&series)?;
    } else {
        print!("{}", report::render::trend::table(&history::trends(&series, None)));
        println!("{} series; {}", series.len(), history::method_text(&p));
    }
    if let Some(file) = html {
        let file = std::path::absolute(file).context("resolve --html")?;
        let page = report::render::trend::render(&history::trends(&series, file.parent()), &history::method_text(&p))?;
        std::fs::write(&file, page).with_context(|| format!("write {}", file.display()))?;
        eprintln!("trends: {}", file.display());
    }
    Ok(Exit::Done)
}
