//! Tabulating a run: samples grouped into cells (benchmark × metric × vCPUs
//! × variant) with the boot as the unit (each boot summarised by the median of
//! its repetitions), each variant compared with `base` under the decision rule
//! of [`crate::stats`], failure rates and failed steps shown as cells. Reads
//! the run's records only; never spawns. This module and its siblings are
//! the model: what the events say is read in `scan`, cells and the one BH
//! pass are made in `cells`, the gate in [`gate`], differential profiles in
//! [`profiles`], scaling views across vCPU counts in [`scaling`], coverage
//! from [`crate::coverage`], two runs compared in
//! [`compare`], a sharded run's shards accounted in [`shards`], and the
//! rule put in words in `rule`. Everything that draws the model (text,
//! CSV, the terminal table, HTML and SVG, JUnit XML, nightly trends) is in
//! [`render`].

mod cells;
pub mod compare;
pub mod gate;
pub mod profiles;
pub mod render;
mod rule;
pub mod scaling;
mod scan;
pub mod shards;

use std::collections::BTreeMap;

use anyhow::Result;
use serde::Serialize;

use crate::records::{Accel, MeasureClock};
use crate::records::{Event, Failed};
use crate::stats::{Decision, Rule, Summary};
use crate::store::Run;

pub use cells::{build_from, run_clock};
pub use gate::{gate, report_gate, second_stage_cells, unmatched_keys, Gate, GateItem};
pub use render::compact::{table, table_as};
pub use render::text::{cell_text, csv, decision_text, num};
pub use rule::rule_text;

/// One variant's cell in a row.
#[derive(Debug, Clone, Serialize)]
pub struct Cell {
    /// Variant.
    pub variant: String,
    /// Sent to the gate's second stage by its first stage's decision.
    pub second_stage: bool,
    /// Boots measured (the unit of the statistics).
    pub n: usize,
    /// Measured repetitions of each of those boots, in boot order.
    pub reps_per_boot: Vec<usize>,
    /// Warm-up samples kept apart.
    pub n_warmup: usize,
    /// Median of the boot values and its interval.
    pub summary: Option<Summary>,
    /// One value per boot: the median of its measured repetitions.
    pub boots: Vec<f64>,
    /// Comparison with base (None for base itself).
    pub decision: Option<Decision>,
    /// Why there is no value, or why some boots have none: a failed patch,
    /// build, boot or benchmark.
    pub failure: Option<CellFailure>,
    /// Boots of this variant at this vCPU count that ended.
    pub boots_ended: usize,
    /// Of those, boots in which this benchmark failed or did not finish.
    pub boots_failed: usize,
    /// Of those, boots whose benchmark timed out or hung without a value
    /// (they rank worst in the test).
    #[serde(default)]
    pub timed_out: usize,
    /// Boots of this variant at this vCPU count with a kernel fault (a
    /// panic, oops, BUG or hung task on the console; a boot cut by a panic,
    /// a hang or no SSH).
    #[serde(default)]
    pub kernel_faults: usize,
    /// Every measured repetition (for plots).
    pub values: Vec<f64>,
    /// Against the nightly history, for key cells when a history database
    /// has been consulted: "same as history", "changed on …", "new cell".
    #[serde(skip_serializing_if = "Option::is_none")]
    pub history: Option<String>,
    /// Its vCPUs exceed the host's CPUs under a wall clock: a lock
    /// benchmark measures vCPUs waiting for a host CPU as much as the kernel.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub overcommitted: bool,
}

/// A failed step behind a cell: where and why, as the run recorded it
/// (`failed`: None for records from before stages were recorded), and its
/// text. Serialised as the text alone, as report files have always held it.
#[derive(Debug, Clone, PartialEq)]
pub struct CellFailure {
    /// The stage and cause.
    pub failed: Option<Failed>,
    /// What the step said.
    pub text: String,
}

impl CellFailure {
    /// The failure `text` of the event `e`.
    pub fn of(text: &str, e: &Event) -> CellFailure {
        CellFailure {
            failed: e.failed(),
            text: text.to_string(),
        }
    }
}

impl Serialize for CellFailure {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_str(&self.text)
    }
}

/// One variant's build, for the report's build table. Serialised as
/// `[variant, seconds, cached, error]`, as report files have always held it.
#[derive(Debug, Clone, PartialEq)]
pub struct BuildRow {
    /// Variant.
    pub variant: String,
    /// Seconds the build took (0 when cached).
    pub build_s: f64,
    /// Taken from the kernel cache.
    pub cached: bool,
    /// Why it failed.
    pub error: Option<String>,
    /// The stage and cause of that failure.
    pub failed: Option<Failed>,
}

impl Serialize for BuildRow {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        (&self.variant, self.build_s, self.cached, &self.error).serialize(s)
    }
}

/// One row: a metric at a vCPU count.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    /// Benchmark.
    pub benchmark: String,
    /// Metric.
    pub metric: String,
    /// Unit.
    pub unit: String,
    /// Direction.
    pub higher_is_better: bool,
    /// vCPUs.
    pub vcpus: u32,
    /// The effect floor of this row: max of the matrix floor and its calibrated floor.
    pub floor: f64,
    /// A throughput whose worker count follows the vCPU count: a linear-scaling
    /// reference means something for it.
    pub linear_reference: bool,
    /// Cells in variant order (base first).
    pub cells: Vec<Cell>,
}
/// A boot, for the environment table.
#[derive(Debug, Clone, Serialize)]
pub struct BootRow {
    /// Boot id.
    pub boot_id: String,
    /// Variant.
    pub variant: String,
    /// vCPUs.
    pub vcpus: u32,
    /// Accelerator.
    pub accel: Accel,
    /// Kernel image booted.
    pub image: String,
    /// Seconds to SSH.
    pub ready_s: Option<f64>,
    /// Kernel release.
    pub kernel: Option<String>,
    /// Guest nproc.
    pub nproc: Option<u32>,
    /// Guest memory.
    pub memory_mib: Option<u64>,
    /// ASLR setting.
    pub aslr: Option<u32>,
    /// vCPUs per host CPU.
    pub overcommit: f64,
    /// Mean steal fraction over its samples.
    pub steal: Option<f64>,
    /// Mean idle fraction over its samples.
    pub idle: Option<f64>,
    /// Console findings.
    pub findings: Vec<String>,
    /// Failure.
    pub error: Option<String>,
}

/// A whole report.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// Run id.
    pub run_id: String,
    /// Started.
    pub started: String,
    /// Variants in order.
    pub variants: Vec<String>,
    /// Rows.
    pub rows: Vec<Row>,
    /// Boots.
    pub boots: Vec<BootRow>,
    /// Series states.
    pub series: Vec<(String, String)>,
    /// Builds, in the order they were recorded.
    pub builds: Vec<BuildRow>,
    /// Notices and failures worth reading.
    pub notes: Vec<String>,
    /// The rule used.
    pub rule: Rule,
    /// The rule in words.
    pub rule_text: String,
    /// Where the floors came from: a calibration, none, or why one was refused.
    pub floor_source: String,
    /// The change a `regressed` call can detect at this run's sampling, in words.
    pub detectable: String,
    /// Host line.
    pub host: String,
    /// The run finished every boot job.
    pub complete: bool,
    /// The clock every number of the report is in.
    pub clock: Option<MeasureClock>,
    /// What that clock means, in words.
    pub clock_text: String,
    /// The shards of a run split with `run --shard` (empty otherwise).
    pub shards: Vec<shards::ShardState>,
    /// The differential kernel profile of every called cell that has
    /// profiles on both sides (empty without profiles).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub profiles: Vec<profiles::CellProfile>,
    /// The contention profile of every compared cell whose boots carry
    /// contention counts (empty without them).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub contention: Vec<profiles::CellContention>,
    /// Compared cells whose boots carry contention counts on one side only
    /// (the gate says so; empty when every cell is whole).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub contention_missing: Vec<profiles::MissingContention>,
    /// The scaling view of every compared (benchmark, variant) measured at
    /// two or more vCPU counts with kernel profiles on both sides (empty
    /// otherwise).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub scaling: Vec<scaling::CellScaling>,
    /// What `more contention` in a key benchmark does to the gate.
    pub contention_gate: crate::config::ContentionGate,
    /// Which benchmarks execute the functions a series changes (`try`
    /// writes it: `coverage.json`); empty when unknown.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub coverage: Vec<crate::coverage::Coverage>,
    /// Seconds from the run's start to its last sample (the HTML summary
    /// line's wall time; not in `report.json`).
    #[serde(skip)]
    pub wall_s: Option<f64>,
}

/// Seconds from `started` to the latest sample's timestamp (None when
/// either is not a time stamp).
pub fn wall_seconds(started: &str, samples: &[crate::records::Sample]) -> Option<f64> {
    let start: jiff::Timestamp = started.parse().ok()?;
    let last = samples
        .iter()
        .filter_map(|s| s.timestamp.parse::<jiff::Timestamp>().ok())
        .max()?;
    Some((last.as_millisecond() - start.as_millisecond()) as f64 / 1000.0)
}

/// Calibrated floors for a run: `(benchmark, metric, vCPUs)` → floor, and
/// where they came from (shown in the rule text).
#[derive(Debug, Clone, Default)]
pub struct Floors {
    /// The floors.
    pub by_cell: BTreeMap<(String, String, u32), f64>,
    /// `calibration <run> (<date>)`, `none`, or why a calibration was refused.
    pub source: String,
}

impl Floors {
    /// No calibrated floor, for the reason given.
    pub fn none(why: &str) -> Floors {
        Floors {
            by_cell: BTreeMap::new(),
            source: why.to_string(),
        }
    }
}

/// Builds the report of a run with the given calibrated floors: the run's
/// records merged with its shards', the jobs of a failed or missing shard
/// counted as failed boots.
pub fn build(run: &Run, floors: &Floors) -> Result<Report> {
    let meta = run.meta()?;
    let samples = run.samples()?;
    let mut events = run.events()?;
    let dirs: Vec<_> = run.shard_dirs()?.into_iter().map(|d| (d.shard, d.writer)).collect();
    let acc = shards::account(&meta.matrix, &dirs, &events);
    events.extend(acc.failures);
    let mut r = build_from(&meta, &samples, &events, floors);
    r.notes.splice(0..0, acc.notes);
    r.complete &= acc.all_done;
    r.shards = acc.shards;
    let mut notes = Vec::new();
    let (dir, events, from) = profiles::source(run, events)?;
    profiles::mark_work(&dir, &events, from.as_deref(), &meta.matrix, &mut r, &mut Vec::new());
    r.profiles = profiles::called_cells(&dir, &events, from.as_deref(), &r, &mut notes);
    let contention = profiles::contention_cells(&dir, &events, from.as_deref(), &r, &mut notes);
    (r.contention, r.contention_missing) = (contention.cells, contention.missing);
    r.scaling = scaling::scaling_cells(&dir, &events, from.as_deref(), &meta.matrix, &r, &mut notes);
    r.notes.extend(notes);
    // the same boot's profile is read for several cells: say each note once
    let mut seen = std::collections::HashSet::new();
    r.notes.retain(|n| seen.insert(n.clone()));
    r.coverage = crate::coverage::read(&run.dir)?;
    Ok(r)
}

/// A report's files, rendered whole before any is written: `report.json`,
/// `report.csv`, `report.html`.
pub fn files(r: &Report) -> Result<Vec<(&'static str, Vec<u8>)>> {
    Ok(vec![
        ("report.json", serde_json::to_vec_pretty(r)?),
        ("report.csv", csv(r).into_bytes()),
        ("report.html", render::html::render(r)?.into_bytes()),
    ])
}

/// Writes `files` into `dir`, each through a private temporary file beside
/// it (written, synced, renamed into place): a reader, or a report racing
/// the run's own, sees the old file or the new one whole, never a torn one.
/// The first file that cannot be written is the error (its temporary file
/// removed).
pub fn write_files(dir: &std::path::Path, files: &[(&str, Vec<u8>)]) -> Result<()> {
    for (name, data) in files {
        crate::util::write_whole(&dir.join(name), data)?;
    }
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests;
