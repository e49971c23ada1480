//! The nightly history: one SQLite database (`<work-dir>/history.sqlite`)
//! remembering every finished run — its identity and per cell the boot
//! values — so a series of nights can be drawn and its change points found.
//! [`schema`] owns the layout and its migrations, [`import`] adds a run,
//! [`query`] reads series back and judges a new report against them. The
//! statistics are [`crate::stats::changepoint`]; the pictures are drawn by
//! [`crate::report::render::trend`]. Never spawns anything but `git` (through
//! [`crate::proc`]) to name a finished run's tree.

pub mod import;
pub mod query;
pub mod schema;

use crate::workdir::WorkDir;
use std::path::{Path, PathBuf};

use anyhow::Result;
use rusqlite::Connection;

pub use import::{add, matrix_id, run_key, Added, RunKey, Sources};
pub use query::{changes, series, standings, Change, Filter, Night, Series, SeriesKey, Standing};

/// File name of the database under the work directory.
pub const FILE: &str = "history.sqlite";

/// Nights before a run that its report's standing looks at (Otava's window).
pub const WINDOW: usize = 50;

/// The database path: `--history-db` if given, else `<work-dir>/history.sqlite`.
pub fn path(flag: Option<&Path>, work_dir: &WorkDir) -> PathBuf {
    flag.map(Path::to_path_buf).unwrap_or_else(|| work_dir.history_db())
}

/// Opens the database, creating and migrating it as needed.
pub fn open(path: &Path) -> Result<Connection> {
    schema::open(path)
}

/// Opens the database to read it, only when it exists (read-only when
/// it cannot be written: [`schema::open_to_read`]).
pub fn open_existing(path: &Path) -> Result<Option<Connection>> {
    if !path.exists() {
        return Ok(None);
    }
    schema::open_to_read(path).map(Some)
}

/// How change points are found, in words (printed with every trend).
pub fn method_text(p: &crate::stats::changepoint::Params) -> String {
    format!(
        "E-divisive means over each series' nightly medians (one run = one night; series never mix matrices, \
         profiles, hosts, clocks or accelerators): the best split is tested against {} seeded null draws \
         (seed {}; a segment of fewer than {} nights by shuffling them, a longer one by an AR(1) bootstrap \
         that allows for autocorrelated nights) and kept at p ≤ {}, then both halves are searched again; at least {} nights on each side; \
         changes below {:.0}% between neighbouring segment medians are dropped. The date is the first night \
         after the change; `bisect` starts from the runs on either side.",
        p.permutations,
        p.seed,
        crate::stats::changepoint::BOOTSTRAP_FROM,
        p.alpha,
        p.min_size,
        p.min_magnitude * 100.0
    )
}

/// `to` relative to the directory `from` (both absolute).
fn relative(from: &Path, to: &Path) -> PathBuf {
    let (f, t): (Vec<_>, Vec<_>) = (from.components().collect(), to.components().collect());
    let common = f.iter().zip(&t).take_while(|(a, b)| a == b).count();
    let mut out = PathBuf::new();
    for _ in common..f.len() {
        out.push("..");
    }
    out.extend(&t[common..]);
    out
}

/// The link of a night: its report.html (else its directory), relative to
/// `page_dir` when given, else a `file://` URL.
fn night_link(run_dir: &str, page_dir: Option<&Path>) -> String {
    let dir = Path::new(run_dir);
    let target = if dir.join("report.html").is_file() {
        dir.join("report.html")
    } else {
        dir.to_path_buf()
    };
    match page_dir.and_then(|d| std::fs::canonicalize(d).ok()) {
        Some(d) => relative(&d, &target).to_string_lossy().into_owned(),
        None => format!("file://{}", target.display()),
    }
}

/// A change in words, with the runs on either side.
pub fn change_text(c: &Change, higher_is_better: bool) -> String {
    let word = if (c.change < 0.0) == higher_is_better {
        "worse"
    } else {
        "better"
    };
    format!(
        "changed on {} by {:+.1}% ({word}; p={:.3}): between {} and {}",
        c.date,
        c.change * 100.0,
        c.p,
        c.run_before,
        c.run_after
    )
}

/// The series as trends to draw, links relative to `page_dir` when given.
pub fn trends(series: &[Series], page_dir: Option<&Path>) -> Vec<crate::report::render::trend::Trend> {
    use crate::report::render::trend::{Trend, TrendMark, TrendPoint};
    series
        .iter()
        .map(|s| {
            let k = &s.key;
            let r = &k.run;
            let profile = if r.profile.is_empty() {
                String::new()
            } else {
                format!(" --profile {}", r.profile)
            };
            Trend {
                title: format!("{} {} at {} vCPUs, {}", k.benchmark, k.metric, k.vcpus, k.variant),
                key: format!(
                    "matrix {} ({}){profile}, host {}, clock {}, accel {}",
                    r.matrix_name, r.matrix_id, r.host, r.clock, r.accel
                ),
                unit: format!(
                    "{}, {} is better",
                    s.unit,
                    if s.higher_is_better { "higher" } else { "lower" }
                ),
                points: s
                    .nights
                    .iter()
                    .map(|n| TrendPoint {
                        date: n.started.chars().take(10).collect(),
                        run_id: n.run_id.clone(),
                        link: night_link(&n.run_dir, page_dir),
                        y: n.median,
                        lo: n.lo,
                        hi: n.hi,
                        ci: n.ci_exact,
                        n: n.n,
                    })
                    .collect(),
                marks: s
                    .changes
                    .iter()
                    .map(|c| TrendMark {
                        index: c.index,
                        text: change_text(c, s.higher_is_better),
                    })
                    .collect(),
            }
        })
        .collect()
}

/// Writes each key cell's standing against the history into the report.
pub fn annotate(
    r: &mut crate::report::Report,
    db: &Connection,
    meta: &crate::records::RunMeta,
    events: &[crate::records::Event],
) -> Result<()> {
    let p = crate::stats::changepoint::Params::default();
    for (ri, ci, s) in standings(db, meta, events, r, WINDOW, &p)? {
        r.rows[ri].cells[ci].history = Some(s.text());
    }
    Ok(())
}

#[cfg(test)]
mod read_only_tests;
#[cfg(test)]
mod tests;
