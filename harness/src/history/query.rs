//! Reading the history back: each series' nights (one per run, the cell's
//! median of boot values with its interval) and their change points, and
//! what a new report's key cells look like against their series.

use std::collections::BTreeMap;

use anyhow::Result;
use rusqlite::{params, Connection};
use serde::Serialize;

use super::import::{run_key, RunKey};
use crate::records::{Event, RunMeta};
use crate::report::Report;
use crate::stats::changepoint::{self, Params};

/// Which series to read.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    /// Only this benchmark.
    pub bench: Option<String>,
    /// Only this vCPU count.
    pub vcpus: Option<u32>,
    /// Only this variant.
    pub variant: Option<String>,
    /// Only the last N nights of each series.
    pub last: Option<usize>,
}

/// A series: one cell of one experiment, never across clocks, accelerators,
/// hosts, matrices or profiles.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct SeriesKey {
    /// The run side of the key.
    pub run: RunKey,
    /// Benchmark.
    pub benchmark: String,
    /// Metric.
    pub metric: String,
    /// vCPUs.
    pub vcpus: u32,
    /// Variant.
    pub variant: String,
}

/// One run of a series. Nights are in the order their runs joined the
/// history (`runs.seq`), never by their own clock's text.
#[derive(Debug, Clone, Serialize)]
pub struct Night {
    /// Run id.
    pub run_id: String,
    /// When the run started (RFC 3339).
    pub started: String,
    /// The run directory.
    pub run_dir: String,
    /// Median of the boot values.
    pub median: f64,
    /// Interval low (95% CI, or the range under 6 boots).
    pub lo: f64,
    /// Interval high.
    pub hi: f64,
    /// The interval is a 95% CI.
    pub ci_exact: bool,
    /// Boots.
    pub n: usize,
}

/// A change point of a series, with the runs on either side.
#[derive(Debug, Clone, Serialize)]
pub struct Change {
    /// Index of the first night after the change.
    pub index: usize,
    /// Date of that night (`YYYY-MM-DD`).
    pub date: String,
    /// The last run before the change (where `bisect` starts).
    pub run_before: String,
    /// The first run after it.
    pub run_after: String,
    /// `after / before − 1` of the segment medians.
    pub change: f64,
    /// Permutation p of the split.
    pub p: f64,
}

/// A series with its nights and change points.
#[derive(Debug, Clone, Serialize)]
pub struct Series {
    /// Identity.
    pub key: SeriesKey,
    /// Unit.
    pub unit: String,
    /// Direction.
    pub higher_is_better: bool,
    /// Nights, oldest first.
    pub nights: Vec<Night>,
    /// Change points, oldest first.
    pub changes: Vec<Change>,
}

/// The change points of `nights`.
pub fn changes(nights: &[Night], p: &Params) -> Vec<Change> {
    let x: Vec<f64> = nights.iter().map(|n| n.median).collect();
    changepoint::e_divisive(&x, p)
        .into_iter()
        .map(|c| Change {
            index: c.index,
            date: nights[c.index].started.chars().take(10).collect(),
            run_before: nights[c.index - 1].run_id.clone(),
            run_after: nights[c.index].run_id.clone(),
            change: c.change,
            p: c.p,
        })
        .collect()
}

const SELECT: &str = "SELECT r.matrix_id, r.matrix_name, r.profile, r.host, r.clock, r.accel, c.benchmark, c.metric, c.vcpus, c.variant,
    c.unit, c.higher_is_better, r.run_id, r.started, r.run_dir, c.median, c.lo, c.hi, c.ci_exact, c.n
    FROM cells c JOIN runs r ON r.run_id = c.run_id
    WHERE c.median IS NOT NULL AND (?1 IS NULL OR c.benchmark = ?1) AND (?2 IS NULL OR c.vcpus = ?2) AND (?3 IS NULL OR c.variant = ?3)
    ORDER BY r.seq, r.run_id";

/// Every series matching `f`, with its change points.
pub fn series(db: &Connection, f: &Filter, p: &Params) -> Result<Vec<Series>> {
    let mut stmt = db.prepare(SELECT)?;
    let mut by: BTreeMap<SeriesKey, Series> = BTreeMap::new();
    let mut rows = stmt.query(params![f.bench, f.vcpus, f.variant])?;
    while let Some(r) = rows.next()? {
        let key = SeriesKey {
            run: RunKey {
                matrix_id: r.get(0)?,
                matrix_name: r.get(1)?,
                profile: r.get(2)?,
                host: r.get(3)?,
                clock: r.get(4)?,
                accel: r.get(5)?,
            },
            benchmark: r.get(6)?,
            metric: r.get(7)?,
            vcpus: r.get(8)?,
            variant: r.get(9)?,
        };
        let night = Night {
            run_id: r.get(12)?,
            started: r.get(13)?,
            run_dir: r.get(14)?,
            median: r.get(15)?,
            lo: r.get(16)?,
            hi: r.get(17)?,
            ci_exact: r.get(18)?,
            n: r.get::<_, i64>(19)? as usize,
        };
        let (unit, higher_is_better): (String, bool) = (r.get(10)?, r.get(11)?);
        let s = by.entry(key.clone()).or_insert_with(|| Series {
            key,
            unit: String::new(),
            higher_is_better,
            nights: vec![],
            changes: vec![],
        });
        s.unit = unit;
        s.nights.push(night);
    }
    let mut out: Vec<Series> = by.into_values().collect();
    for s in &mut out {
        if let Some(n) = f.last {
            let cut = s.nights.len().saturating_sub(n);
            s.nights.drain(..cut);
        }
        s.changes = changes(&s.nights, p);
    }
    Ok(out)
}

/// Fewest nights in the last segment before tonight is tested against them.
pub const TONIGHT_MIN_NIGHTS: usize = 5;

/// Where a new run's cell stands against its series.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub enum Standing {
    /// No earlier night of this series.
    New,
    /// Tonight cannot be tested yet: the last segment before it has fewer
    /// than [`TONIGHT_MIN_NIGHTS`] nights (a change point needs nights on
    /// both sides, so tonight alone never shows as one).
    NotYetTestable {
        /// Nights in the last segment before tonight.
        nights: usize,
    },
    /// Tonight lies inside the last segment's 95% prediction interval (or
    /// within the minimum magnitude of its median), and no change point.
    Same {
        /// Nights compared, this run included.
        nights: usize,
    },
    /// Tonight lies outside the last segment's 95% prediction interval,
    /// by at least the minimum magnitude: a change point shows once enough
    /// nights follow it.
    Tonight {
        /// Tonight against the segment's median, relative.
        change: f64,
        /// Whether it is for the worse.
        worse: bool,
        /// Nights in the segment.
        nights: usize,
    },
    /// The latest change point up to this run.
    Changed {
        /// Date of the first night after it.
        date: String,
        /// Relative change of the medians.
        change: f64,
        /// Whether the change is for the worse.
        worse: bool,
    },
}

/// Tonight's `value` against the nights `before` it (no change point up
/// to tonight): their last segment (after their own latest change point)
/// gives a 95% prediction interval for one more night
/// ([`prediction_interval`]); outside it and at least `p.min_magnitude`
/// away from the segment's mean, tonight is a change in the making.
pub fn tonight(before: &[f64], value: f64, p: &changepoint::Params, higher_is_better: bool) -> Standing {
    let start = changepoint::e_divisive(before, p).last().map_or(0, |c| c.index);
    let seg = &before[start..];
    if seg.len() < TONIGHT_MIN_NIGHTS {
        return Standing::NotYetTestable { nights: seg.len() };
    }
    let (mean, half) = prediction_interval(seg, 0.95);
    let outside = (value - mean).abs() > half;
    let change = value / mean - 1.0;
    if outside && change.abs() >= p.min_magnitude {
        Standing::Tonight {
            change,
            worse: (change < 0.0) == higher_is_better,
            nights: seg.len(),
        }
    } else {
        Standing::Same {
            nights: before.len() + 1,
        }
    }
}

/// The prediction interval for one more night of `nights` (at least 2):
/// (centre, half-width) of `mean ± t(n−1)·s·√(1 + 1/n)`, `s` the sample
/// standard deviation (at least 1e-12 of the mean). For independent normal
/// nights its coverage is exactly `level`; the median with 1.4826 × MAD in
/// its place missed 14.9 / 9.9 / 6.8% of flat nights at 5 / 10 / 30 nights
/// (issue 29), this misses 5% (`history::tests::prediction_interval_covers`).
pub fn prediction_interval(nights: &[f64], level: f64) -> (f64, f64) {
    let n = nights.len() as f64;
    let mean = nights.iter().sum::<f64>() / n;
    let var = nights.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / (n - 1.0);
    let s = var.sqrt().max(mean.abs() * 1e-12);
    let t = statrs::distribution::StudentsT::new(0.0, 1.0, n - 1.0)
        .map(|d| statrs::distribution::ContinuousCDF::inverse_cdf(&d, 0.5 + level / 2.0))
        .unwrap_or(f64::INFINITY);
    (mean, t * s * (1.0 + 1.0 / n).sqrt())
}

impl Standing {
    /// In words, for the report.
    pub fn text(&self) -> String {
        match self {
            Standing::New => "new cell".into(),
            Standing::NotYetTestable { nights } => {
                format!("not yet testable ({nights} night(s) since the last change; tonight is tested against {TONIGHT_MIN_NIGHTS})")
            }
            Standing::Same { nights } => format!("same as history ({nights} nights)"),
            Standing::Tonight { change, worse, nights } => format!(
                "tonight {:+.1}% ({}) against the last {nights} nights, outside their 95% prediction interval; a change point shows once {} nights follow",
                change * 100.0,
                if *worse { "worse" } else { "better" },
                changepoint::Params::default().min_size
            ),
            Standing::Changed { date, change, worse } => {
                format!("changed on {date} by {:+.1}% ({})", change * 100.0, if *worse { "worse" } else { "better" })
            }
        }
    }
}

/// The standing of every key cell of `r` (a report of the run `meta`)
/// against the nights before it in the history's order (the order runs
/// joined it; a run not in it yet comes after every stored one), this
/// run's own median last; `window` earlier nights at most. Cells without a
/// value are left out.
pub fn standings(
    db: &Connection,
    meta: &RunMeta,
    events: &[Event],
    r: &Report,
    window: usize,
    p: &Params,
) -> Result<Vec<(usize, usize, Standing)>> {
    let k = run_key(meta, events);
    let mut stmt = db.prepare(
        "SELECT r.run_id, r.started, r.run_dir, c.median, c.lo, c.hi, c.ci_exact, c.n FROM cells c JOIN runs r ON r.run_id = c.run_id
         WHERE r.matrix_id = ?1 AND r.profile = ?2 AND r.host = ?3 AND r.clock = ?4 AND r.accel = ?5
           AND c.benchmark = ?6 AND c.metric = ?7 AND c.vcpus = ?8 AND c.variant = ?9
           AND c.median IS NOT NULL AND r.run_id != ?10
           AND r.seq < COALESCE((SELECT seq FROM runs WHERE run_id = ?10), 9223372036854775807)
         ORDER BY r.seq DESC, r.run_id DESC LIMIT ?11",
    )?;
    let mut out = Vec::new();
    for (ri, row) in r.rows.iter().enumerate() {
        if !crate::report::gate::is_key(&meta.matrix.key_metrics, &row.benchmark, &row.metric) {
            continue;
        }
        for (ci, c) in row.cells.iter().enumerate() {
            let Some(s) = &c.summary else { continue };
            let args = params![
                k.matrix_id,
                k.profile,
                k.host,
                k.clock,
                k.accel,
                row.benchmark,
                row.metric,
                row.vcpus,
                c.variant,
                meta.id,
                window as i64
            ];
            let nights: Vec<Night> = stmt.query_map(args, night)?.collect::<rusqlite::Result<_>>()?;
            if nights.is_empty() {
                out.push((ri, ci, Standing::New));
                continue;
            }
            let this = Night {
                run_id: meta.id.clone(),
                started: meta.started.clone(),
                run_dir: String::new(),
                median: s.median,
                lo: s.ci_lo,
                hi: s.ci_hi,
                ci_exact: s.ci_exact,
                n: c.n,
            };
            let standing = against(nights, this, row.higher_is_better, p);
            out.push((ri, ci, standing));
        }
    }
    Ok(out)
}

/// A night as `standings` selects it.
fn night(x: &rusqlite::Row) -> rusqlite::Result<Night> {
    Ok(Night {
        run_id: x.get(0)?,
        started: x.get(1)?,
        run_dir: x.get(2)?,
        median: x.get(3)?,
        lo: x.get(4)?,
        hi: x.get(5)?,
        ci_exact: x.get(6)?,
        n: x.get::<_, i64>(7)? as usize,
    })
}

/// The standing of `this` night after the nights before it (`newest_first`,
/// as selected).
fn against(newest_first: Vec<Night>, this: Night, higher_is_better: bool, p: &Params) -> Standing {
    let mut nights = newest_first;
    nights.reverse();
    let before: Vec<f64> = nights.iter().map(|n| n.median).collect();
    let value = this.median;
    nights.push(this);
    match changes(&nights, p).pop() {
        Some(ch) => Standing::Changed {
            date: ch.date,
            change: ch.change,
            worse: (ch.change < 0.0) == higher_is_better,
        },
        None => tonight(&before, value, p, higher_is_better),
    }
}
