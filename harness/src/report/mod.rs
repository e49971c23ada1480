//! Tabulating a run: samples grouped into cells (benchmark × metric × vCPUs
//! × variant) with the boot as the unit (each boot summarised by the median of
//! its repetitions), each variant compared with `base` under the decision rule
//! of [`crate::stats`], failure rates and failed steps shown as cells. Reads
//! the run's records only; never spawns. Text, CSV and the gate live in
//! [`text`] and [`gate`], the HTML page in [`html`], nightly trends in
//! [`trend`]; a sharded run's shards are accounted in [`shards`].

pub mod compare;
pub mod gate;
pub mod html;
pub mod shards;
pub mod svg;
pub mod text;
pub mod trend;

use std::collections::{BTreeMap, BTreeSet};

use anyhow::Result;
use serde::Serialize;

use crate::config::Matrix;
use crate::stats::{self, Comparison, Decision, Failures, Rule, Summary};
use crate::records::{Event, RunMeta, Sample};
use crate::store::Run;
use crate::vm::MeasureClock;

pub use gate::{gate, report_gate, Gate, GateItem};
pub use text::{cell_text, csv, decision_text, num, table};

/// One variant's cell in a row.
#[derive(Debug, Clone, Serialize)]
pub struct Cell {
    /// Variant.
    pub variant: String,
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
    pub failure: Option<String>,
    /// Boots of this variant at this vCPU count that ended.
    pub boots_ended: usize,
    /// Of those, boots in which this benchmark failed or did not finish.
    pub boots_failed: usize,
    /// Every measured repetition (for plots).
    pub values: Vec<f64>,
    /// Against the nightly history, for key cells when a history database
    /// has been consulted: "same as history", "changed on …", "new cell".
    #[serde(skip_serializing_if = "Option::is_none")]
    pub history: Option<String>,
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
    pub accel: String,
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
    /// Builds: variant, seconds, cached, error.
    pub builds: Vec<(String, f64, bool, Option<String>)>,
    /// Notices and failures worth reading.
    pub notes: Vec<String>,
    /// The rule used.
    pub rule: Rule,
    /// The rule in words.
    pub rule_text: String,
    /// Where the floors came from: a calibration, none, or why one was refused.
    pub floor_source: String,
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
        Floors { by_cell: BTreeMap::new(), source: why.to_string() }
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
    Ok(r)
}

/// What the events say about boots and failures.
#[derive(Default)]
struct Scan {
    variant_fail: BTreeMap<String, String>,
    cell_fail: BTreeMap<(String, u32, String), String>,
    boot_fail: BTreeMap<(String, u32), String>,
    /// boot id → (variant, vCPUs) of every boot that ended.
    ended: BTreeMap<String, (String, u32)>,
    /// (boot id, benchmark) with a failed repetition.
    bench_failed: BTreeSet<(String, String)>,
    notes: Vec<String>,
    boots: Vec<BootRow>,
    series: Vec<(String, String)>,
    builds: Vec<(String, f64, bool, Option<String>)>,
    jobs_ended: usize,
}

fn boot_row(e: &Event) -> Option<BootRow> {
    let Event::Boot { variant, vcpus, boot_id, accel, ready_s, env, error, findings, overcommit, image, retried, .. } = e else {
        return None;
    };
    Some(BootRow {
        boot_id: boot_id.clone(),
        variant: variant.clone(),
        vcpus: *vcpus,
        accel: format!("{accel:?}").to_lowercase(),
        image: image.clone(),
        ready_s: *ready_s,
        kernel: env.as_ref().map(|e| e.kernel_release.clone()),
        nproc: env.as_ref().map(|e| e.nproc),
        memory_mib: env.as_ref().map(|e| e.memory_mib),
        aslr: env.as_ref().map(|e| e.aslr),
        overcommit: *overcommit,
        steal: None,
        idle: None,
        findings: findings.iter().map(|f| f.signature.clone()).collect(),
        error: error.as_ref().map(|e| if *retried { format!("{e} (started again)") } else { e.clone() }),
    })
}

fn scan(events: &[Event]) -> Scan {
    let mut s = Scan::default();
    for e in events {
        match e {
            // a step's outcome replaces the variant's earlier failure: a
            // `--resume` that patched, configured and built it repaired it
            Event::Patch { variant, error, .. } => variant_step(&mut s, variant, error),
            Event::Config { variant, lost, error, .. } => {
                variant_step(&mut s, variant, error);
                if !lost.is_empty() {
                    let l: Vec<String> = lost.iter().map(|x| x.to_string()).collect();
                    s.notes.push(format!("{variant}: config symbols not kept: {}", l.join(", ")));
                }
            }
            Event::Build { variant, build_s, cached, error, .. } => {
                variant_step(&mut s, variant, error);
                s.builds.push((variant.clone(), *build_s, *cached, error.clone()));
            }
            Event::Series { series, state } => s.series.push((series.clone(), state.to_string())),
            Event::Boot { variant, vcpus, error, retried, boot_id, .. } => {
                match error {
                    // QEMU's crash, started again: shown, never the kernel's failure
                    Some(err) if *retried => s.notes.push(format!("{boot_id}: {err}; QEMU's failure, the boot was started again")),
                    Some(err) => _ = s.boot_fail.insert((variant.clone(), *vcpus), err.clone()),
                    None => {}
                }
                s.boots.extend(boot_row(e));
            }
            Event::BenchFailed { variant, vcpus, benchmark, repetition, error, boot_id, .. } => {
                s.cell_fail.insert((variant.clone(), *vcpus, benchmark.clone()), error.clone());
                s.bench_failed.insert((boot_id.clone(), benchmark.clone()));
                s.notes.push(format!("{boot_id} {benchmark} rep {repetition}: {error}"));
            }
            Event::BootEnd { .. } => scan_boot_end(&mut s, e),
            Event::Notice { message } => s.notes.push(message.clone()),
        }
    }
    s
}

/// Records a patch, config or build outcome of `variant`: a failure, or a
/// success that clears the failure of an earlier attempt.
fn variant_step(s: &mut Scan, variant: &str, error: &Option<String>) {
    match error {
        Some(err) => s.variant_fail.insert(variant.to_string(), err.clone()),
        None => s.variant_fail.remove(variant),
    };
}

fn scan_boot_end(s: &mut Scan, e: &Event) {
    let Event::BootEnd { boot_id, findings, error, variant, vcpus, .. } = e else { return };
    s.jobs_ended += 1;
    if let Some(id) = boot_id {
        s.ended.insert(id.clone(), (variant.clone(), *vcpus));
    }
    if let Some(b) = boot_id.as_ref().and_then(|id| s.boots.iter_mut().find(|b| &b.boot_id == id)) {
        for f in findings {
            if !b.findings.contains(&f.signature) {
                b.findings.push(f.signature.clone());
            }
        }
    }
    if let Some(err) = error {
        s.boot_fail.entry((variant.clone(), *vcpus)).or_insert(err.clone());
    }
    for f in findings {
        s.notes.push(format!("{}: console: {} — {}", boot_id.clone().unwrap_or_default(), f.signature, f.line));
    }
}

/// Every (benchmark, metric, unit, direction) seen or expected, primary metric first.
fn metrics_of(m: &Matrix, samples: &[&Sample]) -> Vec<(String, String, String, bool)> {
    let mut metrics = Vec::new();
    for b in &m.benchmarks {
        let mut uniq: Vec<(String, String, bool)> = Vec::new();
        for s in samples.iter().filter(|s| s.benchmark == b.name) {
            if !uniq.iter().any(|u| u.0 == s.metric) {
                uniq.push((s.metric.clone(), s.unit.clone(), s.higher_is_better));
            }
        }
        if uniq.is_empty() {
            match crate::bench::primary_metric(b) {
                Some(p) => uniq.push((p.to_string(), String::new(), true)),
                None => uniq.push(("(no summary)".into(), String::new(), false)),
            }
        }
        if let Some(p) = crate::bench::primary_metric(b) {
            uniq.sort_by_key(|u| u.0 != p);
        }
        metrics.extend(uniq.into_iter().map(|(metric, unit, hib)| (b.name.clone(), metric, unit, hib)));
    }
    metrics
}

/// Measured values of one cell grouped by boot, in the order boots appear.
fn by_boot(samples: &[&Sample], variant: &str, vcpus: u32, bench: &str, metric: &str) -> Vec<Vec<f64>> {
    let mut order: Vec<&str> = Vec::new();
    let mut groups: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    for s in samples.iter().filter(|s| s.variant == variant && s.vcpus == vcpus && s.benchmark == bench && s.metric == metric && !s.warmup) {
        if !groups.contains_key(s.boot_id.as_str()) {
            order.push(&s.boot_id);
        }
        groups.entry(&s.boot_id).or_default().push(s.value);
    }
    order.iter().map(|id| groups.remove(id).unwrap_or_default()).collect()
}

/// Boots of (variant, vCPUs) that ended, and of those the ones in which
/// `bench` failed a repetition or measured fewer repetitions than planned.
fn failure_counts(s: &Scan, samples: &[&Sample], variant: &str, vcpus: u32, bench: &str, planned: usize) -> (usize, usize) {
    let mut ended = 0;
    let mut failed = 0;
    for (id, _) in s.ended.iter().filter(|(_, (v, c))| v == variant && *c == vcpus) {
        ended += 1;
        let reps: BTreeSet<u32> = samples.iter().filter(|x| &x.boot_id == id && x.benchmark == bench && !x.warmup).map(|x| x.repetition).collect();
        if s.bench_failed.contains(&(id.clone(), bench.to_string())) || reps.len() < planned {
            failed += 1;
        }
    }
    (ended, failed)
}

/// Everything one cell is built from.
struct CellInput<'a> {
    scan: &'a Scan,
    counted: &'a [&'a Sample],
    vcpus: u32,
    bench: &'a str,
    metric: &'a str,
    planned: usize,
}

fn make_cell(x: &CellInput, variant: &str) -> Cell {
    let groups = by_boot(x.counted, variant, x.vcpus, x.bench, x.metric);
    let boots: Vec<f64> = groups.iter().filter_map(|g| stats::median(g)).collect();
    let (boots_ended, boots_failed) = failure_counts(x.scan, x.counted, variant, x.vcpus, x.bench, x.planned);
    let failure = x
        .scan
        .variant_fail
        .get(variant)
        .or_else(|| x.scan.cell_fail.get(&(variant.to_string(), x.vcpus, x.bench.to_string())))
        .or_else(|| x.scan.boot_fail.get(&(variant.to_string(), x.vcpus)))
        .cloned();
    let n_warmup = x
        .counted
        .iter()
        .filter(|s| s.variant == variant && s.vcpus == x.vcpus && s.benchmark == x.bench && s.metric == x.metric && s.warmup)
        .count();
    Cell {
        variant: variant.to_string(),
        n: boots.len(),
        reps_per_boot: groups.iter().map(Vec::len).collect(),
        n_warmup,
        summary: stats::summarize(&boots),
        boots,
        decision: None,
        failure,
        boots_ended,
        boots_failed,
        values: groups.concat(),
        history: None,
    }
}

/// The comparison of `cell` against `base` in a row with floor `floor`.
pub(crate) fn comparison(base: &Cell, cell: &Cell, higher_is_better: bool, floor: f64) -> Comparison {
    let failures = (base.boots_ended > 0 && cell.boots_ended > 0).then_some(Failures {
        failed: cell.boots_failed,
        of: cell.boots_ended,
        base_failed: base.boots_failed,
        base_of: base.boots_ended,
    });
    Comparison { base: base.boots.clone(), new: cell.boots.clone(), higher_is_better, floor, failures }
}

/// A throughput (higher is better) of a benchmark whose workers follow the vCPU count.
fn linear_reference(m: &Matrix, bench: &str, higher_is_better: bool) -> bool {
    higher_is_better && m.benchmark(bench).is_some_and(crate::bench::workers_follow_vcpus)
}

/// Builds a report from loaded records.
///
/// Samples count only when their boot ended (a `boot_end` event with their
/// boot id): after `--resume` the cut-off boot's repetitions are dropped and
/// its re-run counts once. A boot that ended with an error keeps the
/// repetitions it completed; its failure is counted in the cell's failure rate.
pub fn build_from(meta: &RunMeta, samples: &[Sample], events: &[Event], floors: &Floors) -> Report {
    let m = &meta.matrix;
    let rule = Rule {
        alpha: m.statistics.alpha,
        // the matrix's floor (2% unless it says otherwise: an instruction-
        // counting profile can afford less), raised per row by calibration
        floor: m.statistics.floor,
        min_boots: Rule::default().min_boots,
        resamples: m.statistics.resamples,
        seed: m.statistics.seed,
    };
    let mut s = scan(events);
    let counted: Vec<&Sample> = samples.iter().filter(|x| s.ended.contains_key(&x.boot_id)).collect();
    let cut: BTreeSet<&str> = samples.iter().filter(|x| !s.ended.contains_key(&x.boot_id)).map(|x| x.boot_id.as_str()).collect();
    if !cut.is_empty() {
        let ids: Vec<&str> = cut.into_iter().collect();
        s.notes.push(format!("not counted: samples of {} boot(s) that never ended ({})", ids.len(), ids.join(", ")));
    }
    boot_cpu_windows(&mut s.boots, samples);

    let clock = run_clock(meta, events);
    let mut rows = Vec::new();
    let mut pairs: Vec<Comparison> = Vec::new();
    let mut pair_at: Vec<(usize, usize)> = Vec::new();
    for (bench, metric, unit, hib) in metrics_of(m, &counted) {
        for &vcpus in &m.vcpus {
            let x = CellInput { scan: &s, counted: &counted, vcpus, bench: &bench, metric: &metric, planned: m.sampling.repetitions as usize };
            let cells: Vec<Cell> = m.variants.iter().filter(|v| v.benchmarks.contains(&bench)).map(|v| make_cell(&x, &v.name)).collect();
            if cells.is_empty() {
                continue;
            }
            let calibrated = floors.by_cell.get(&(bench.clone(), metric.clone(), vcpus)).copied();
            let floor = calibrated.unwrap_or(0.0).max(rule.floor);
            let ri = rows.len();
            if cells[0].variant == "base" {
                for ci in 1..cells.len() {
                    pairs.push(comparison(&cells[0], &cells[ci], hib, floor));
                    pair_at.push((ri, ci));
                }
            }
            let linear_reference = linear_reference(m, &bench, hib);
            let unit = clock.map_or_else(|| unit.clone(), |c| c.unit(&unit));
            rows.push(Row { benchmark: bench.clone(), metric: metric.clone(), unit, higher_is_better: hib, vcpus, floor, linear_reference, cells });
        }
    }
    // one decision pass over the whole report: BH across every comparison
    for ((ri, ci), d) in pair_at.into_iter().zip(stats::decide_all(&pairs, &rule)) {
        rows[ri].cells[ci].decision = Some(d);
    }
    let rule_text = rule_text(m, &rule, pairs.len(), &floors.source);
    Report {
        run_id: meta.id.clone(),
        started: meta.started.clone(),
        variants: m.variants.iter().map(|v| v.name.clone()).collect(),
        rows,
        boots: s.boots,
        series: s.series,
        builds: s.builds,
        notes: s.notes,
        rule,
        rule_text,
        floor_source: floors.source.clone(),
        host: format!("{} ({} CPUs, {} MiB, {}; {})", meta.host.hostname, meta.host.cpus, meta.host.memory_mib, meta.host.kernel, meta.host.qemu),
        complete: s.jobs_ended >= crate::plan::boot_jobs(m).len(),
        clock,
        clock_text: clock.map(|c| format!("{}: {}", c.name(), c.describe())).unwrap_or_else(|| {
            "clock not recorded (a run from before clocks were recorded, or no boot yet)".into()
        }),
        shards: Vec::new(),
    }
}

/// The clock of a run: from `run.json`, else from its boot records.
pub fn run_clock(meta: &RunMeta, events: &[Event]) -> Option<MeasureClock> {
    meta.clock.or_else(|| {
        events.iter().find_map(|e| match e {
            Event::Boot { clock, .. } => *clock,
            _ => None,
        })
    })
}

fn boot_cpu_windows(boots: &mut [BootRow], samples: &[Sample]) {
    for b in boots {
        let mine: Vec<&Sample> = samples.iter().filter(|s| s.boot_id == b.boot_id && s.cpu.is_some()).collect();
        if !mine.is_empty() {
            b.steal = Some(mine.iter().map(|s| s.cpu.unwrap().steal).sum::<f64>() / mine.len() as f64);
            b.idle = Some(mine.iter().map(|s| s.cpu.unwrap().idle).sum::<f64>() / mine.len() as f64);
        }
    }
}

/// The decision rule in words, as printed with every report.
pub fn rule_text(m: &Matrix, rule: &Rule, comparisons: usize, floor_source: &str) -> String {
    format!(
        "unit: the boot; each boot's value is the median of its measured repetitions (the {} warm-up repetition(s) \
         per boot excluded; boots that never ended, e.g. cut off by an interruption, not counted; a boot that ended \
         with an error keeps the repetitions it completed). cell: median of the boot values with a distribution-free \
         95% CI, or the range where fewer than 6 boots allow no such interval; n = boots × repetitions. change: ratio \
         of medians (variant/base) over boots with a bootstrap 95% CI ({} resamples, seed {}), shown as worse by / \
         better by whatever the metric's direction, the ± being that interval. test: two-sided Mann-Whitney U over \
         boots; Benjamini-Hochberg q across the {} comparisons of this report; alpha {}; p and q both printed. floor: \
         per benchmark, metric and vCPUs, the larger of {:.1}% and the calibrated A/A floor ({}). regressed / improved \
         = q ≤ alpha and the whole CI beyond the floor; small = q ≤ alpha and the CI inside the floor; unsure = q ≤ \
         alpha and the CI straddles the floor (needs more boots); ≈ = q > alpha and the CI inside the floor; ~ = q > \
         alpha (mde = smallest change detectable with 80% power at the level the cell had to pass BH, never below the \
         floor); fails more = the variant failed (a failed or timed-out repetition, a failed or hung boot) in a larger \
         share of its boots than base (one-sided Fisher exact p); ? = fewer than {} boots per side. gate: fails on \
         regressed in a key metric and on fails more with Fisher p ≤ alpha; unsure with an interval reaching beyond \
         the floor on the worse side, and fails more with a larger p, are warnings, fatal with --strict. Boot order \
         seed {}.",
        m.sampling.warmup_repetitions,
        rule.resamples,
        rule.seed,
        comparisons,
        rule.alpha,
        rule.floor * 100.0,
        floor_source,
        rule.min_boots,
        m.sampling.seed
    )
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::stats::Verdict;
    use crate::records::{Host, RunMeta, Sample};

    pub(crate) fn meta_with(variants: &[&str], sampling: &str) -> RunMeta {
        let vs: String = variants.iter().map(|v| format!("  - name: {v}\n")).collect();
        let y = format!("variants:\n{vs}vcpus: [2]\nbenchmarks:\n  - {{name: d, kind: doexec}}\nsampling: {sampling}\nkey_metrics: [d]\n");
        RunMeta {
            format_version: crate::records::FORMAT_VERSION,
            id: "r".into(),
            started: "t".into(),
            matrix: crate::config::parse(&y, std::path::Path::new("/x/m.yaml"), None).unwrap(),
            host: Host { hostname: "h".into(), cpus: 2, ..Host::default() },
            harness_revision: None,
            clock: None,
            inputs: None,
        }
    }

    pub(crate) fn sample(variant: &str, boot_id: &str, rep: u32, value: f64, warmup: bool) -> Sample {
        Sample {
            variant: variant.into(),
            vcpus: 2,
            benchmark: "d".into(),
            params: serde_json::json!({}),
            metric: "execs_per_s".into(),
            unit: "execs/s".into(),
            higher_is_better: true,
            boot_id: boot_id.into(),
            boot: 0,
            repetition: rep,
            warmup,
            value,
            series: vec![],
            cpu: None,
            clock: None,
            timestamp: "t".into(),
        }
    }

    pub(crate) fn boot(variant: &str, boot_id: &str, error: Option<&str>) -> Event {
        Event::Boot {
            variant: variant.into(),
            vcpus: 2,
            boot: 0,
            boot_id: boot_id.into(),
            accel: crate::vm::Accel::Tcg,
            clock: None,
            wall_per_guest_s: None,
            cmdline: String::new(),
            image: "vmlinux".into(),
            overcommit: 1.0,
            ready_s: Some(1.0),
            env: None,
            error: error.map(str::to_string),
            findings: vec![],
            retried: false,
            failed: None,
        }
    }

    pub(crate) fn boot_end(variant: &str, boot_id: &str, error: Option<&str>) -> Event {
        Event::BootEnd { variant: variant.into(), vcpus: 2, boot: 0, boot_id: Some(boot_id.into()), findings: vec![], error: error.map(str::to_string), busy_wall_per_guest_s: None, failed: None }
    }

    /// `boots` ended boots of `variant`, 1 warm-up and 2 measured repetitions
    /// each, boot `b` at `level * (1 + spread(b))`.
    pub(crate) fn boots(variant: &str, n: u32, level: f64, out: &mut (Vec<Sample>, Vec<Event>)) {
        for b in 0..n {
            let id = format!("{variant}-2cpu-b{b}");
            let v = level * (1.0 + 0.004 * b as f64);
            out.1.push(boot(variant, &id, None));
            out.0.push(sample(variant, &id, 0, 1.0, true));
            out.0.push(sample(variant, &id, 1, v * 0.999, false));
            out.0.push(sample(variant, &id, 2, v * 1.001, false));
            out.1.push(boot_end(variant, &id, None));
        }
    }

    fn verdict_of(r: &Report, ci: usize) -> Decision {
        r.rows[0].cells[ci].decision.unwrap()
    }

    #[test]
    fn cells_are_boots_with_verdicts_failures_and_gate() {
        let meta = meta_with(&["base", "slow", "broken"], "{boots: 5, repetitions: 2}");
        let mut rec = (Vec::new(), Vec::new());
        boots("base", 5, 100.0, &mut rec);
        boots("slow", 5, 80.0, &mut rec);
        rec.1.push(Event::Build {
            variant: "broken".into(),
            key: None,
            build_s: 0.0,
            cached: false,
            release: None,
            errors: vec!["x.c:1: error: y".into()],
            error: Some("build failed: x.c:1: error: y".into()),
            failed: None,
        });
        for boot in 0..5 {
            // what the pipeline records for the boots of a variant that never built
            rec.1.push(Event::BootEnd { variant: "broken".into(), vcpus: 2, boot, boot_id: None, findings: vec![], error: Some("build failed".into()), busy_wall_per_guest_s: None, failed: None });
        }
        let r = build_from(&meta, &rec.0, &rec.1, &Floors::none("none"));
        let base = &r.rows[0].cells[0];
        assert_eq!((base.n, base.reps_per_boot.clone(), base.n_warmup), (5, vec![2; 5], 5), "5 boots × 2, warm-up kept apart");
        assert_eq!((base.values.len(), base.boots.len()), (10, 5), "raw values kept for plots, one value per boot for the test");
        assert!((base.boots[1] - 100.4).abs() < 1e-9, "a boot's value is its median repetition");
        let slow = verdict_of(&r, 1);
        assert_eq!((slow.verdict, slow.n_base, slow.n_new), (Verdict::Regressed, 5, 5));
        assert!((slow.p.unwrap() - 2.0 / 252.0).abs() < 1e-9, "the test counts boots");
        let text = cell_text(&r.rows[0].cells[1]);
        assert!(text.contains("n=5 boots×2") && text.contains("worse by 20.0% +0.9/−1.0") && text.contains("regressed (p=0.008 q=0.008"), "{text}");
        assert!(text.contains("range [") && text.contains("<6 boots: no 95% CI"), "{text}");
        let broken = &r.rows[0].cells[2];
        assert!(cell_text(broken).starts_with("FAILED: build failed: x.c:1: error: y"), "{}", cell_text(broken));
        assert_eq!(broken.decision.unwrap().verdict, Verdict::Insufficient, "a variant that never built is FAILED, not a failure rate");
        assert_eq!(broken.boots_ended, 0);
        let g = report_gate(&r, &["d".to_string()]);
        assert_eq!((g.failures.len(), g.warnings.len()), (1, 0));
        assert!(g.failures[0].starts_with("slow execs_per_s at 2 vCPUs (d): worse by 20.0%"), "{g:?}");
        assert!(report_gate(&r, &["other".to_string()]).failures.is_empty());
        let c = csv(&r);
        assert_eq!(c.lines().count(), 4);
        assert!(c.lines().nth(2).unwrap().contains(",regressed,0,5,"), "{c}");
        assert!(table(&r).contains("regressed") && r.rule_text.contains("unit: the boot"));
        assert!(r.complete, "every planned boot job ended");
    }

    #[test]
    fn resumed_boots_count_once() {
        let meta = meta_with(&["base", "v"], "{boots: 5, repetitions: 2}");
        let mut rec = (Vec::new(), Vec::new());
        boots("base", 5, 100.0, &mut rec);
        boots("v", 5, 100.0, &mut rec);
        // v's boot 0 ran as v-2cpu-b0.2 after --resume ...
        for x in rec.0.iter_mut().filter(|x| x.boot_id == "v-2cpu-b0") {
            x.boot_id = "v-2cpu-b0.2".into();
        }
        for ev in rec.1.iter_mut() {
            match ev {
                Event::Boot { boot_id, .. } if boot_id == "v-2cpu-b0" => *boot_id = "v-2cpu-b0.2".into(),
                Event::BootEnd { boot_id: Some(id), .. } if id == "v-2cpu-b0" => *id = "v-2cpu-b0.2".into(),
                _ => {}
            }
        }
        // ... because the first attempt was cut off after one repetition (no boot_end)
        rec.1.insert(0, boot("v", "v-2cpu-b0", None));
        rec.0.splice(0..0, [sample("v", "v-2cpu-b0", 0, 1.0, true), sample("v", "v-2cpu-b0", 1, 50.0, false)]);
        let r = build_from(&meta, &rec.0, &rec.1, &Floors::none("none"));
        let v = &r.rows[0].cells[1];
        assert_eq!((v.n, v.values.len()), (5, 10), "the cut-off boot's repetition is not counted");
        assert!(!v.values.contains(&50.0));
        assert_eq!((v.boots_ended, v.boots_failed), (5, 0), "the cut-off boot is neither a unit nor a failure");
        assert_eq!(verdict_of(&r, 1).failures, None);
        assert!(r.notes.iter().any(|n| n.contains("not counted") && n.contains("v-2cpu-b0")), "{:?}", r.notes);
    }

    /// A boot whose QEMU crashed before SSH and was started again is shown
    /// (note, boots table) but is no failure of the kernel's cell; a boot
    /// that failed for good still is.
    #[test]
    fn a_qemu_crash_that_was_retried_is_not_the_kernels_failure() {
        let meta = meta_with(&["base", "v"], "{boots: 5, repetitions: 2}");
        let mut rec = (Vec::new(), Vec::new());
        boots("base", 5, 100.0, &mut rec);
        let crash = "QEMU died from signal 6 (SIGABRT) before SSH came up: qemu-system-x86_64: system/physmem.c:2678: iotlb_to_section: Assertion failed.";
        let mut crashed = boot("v", "v-2cpu-b0", Some(crash));
        if let Event::Boot { retried, .. } = &mut crashed {
            *retried = true;
        }
        rec.1.push(crashed.clone());
        boots("v", 5, 100.0, &mut rec);
        let r = build_from(&meta, &rec.0, &rec.1, &Floors::none("none"));
        let v = &r.rows[0].cells[1];
        assert_eq!((v.n, v.boots_ended, v.boots_failed, v.failure.clone()), (5, 5, 0, None));
        assert!(!cell_text(v).contains("failed"), "{}", cell_text(v));
        assert!(r.notes.iter().any(|n| n.contains("v-2cpu-b0: QEMU died from signal 6") && n.contains("started again")), "{:?}", r.notes);
        let shown: Vec<_> = r.boots.iter().filter_map(|b| b.error.as_deref()).collect();
        assert!(shown.len() == 1 && shown[0].ends_with("(started again)"), "the crashed attempt stays in the boots table: {shown:?}");
        // the same crash, not retried (attempts used up), is the cell's failure
        if let Event::Boot { retried, .. } = &mut crashed {
            *retried = false;
        }
        rec.1.retain(|e| !matches!(e, Event::Boot { error: Some(_), .. }));
        rec.1.push(crashed);
        let r = build_from(&meta, &rec.0, &rec.1, &Floors::none("none"));
        assert_eq!(r.rows[0].cells[1].failure.as_deref(), Some(crash));
    }

    /// Issue 11 item 8: a build that failed (an interrupted `make` recorded
    /// as a failure by an older harness) and was built by `--resume` leaves
    /// no failure on the variant's cells.
    #[test]
    fn a_failure_repaired_by_resume_is_not_shown() {
        let meta = meta_with(&["base", "v"], "{boots: 5, repetitions: 2}");
        let mut rec = (Vec::new(), Vec::new());
        let build = |error: Option<&str>| Event::Build {
            variant: "v".into(),
            key: None,
            build_s: 0.0,
            cached: false,
            release: None,
            errors: vec![],
            error: error.map(String::from),
            failed: None,
        };
        rec.1.push(Event::Config { variant: "v".into(), lost: vec![], error: None, failed: None });
        rec.1.push(build(Some("build failed: make: *** [Makefile:224: __sub-make] Interrupt")));
        // --resume: configured and built again
        rec.1.push(Event::Config { variant: "v".into(), lost: vec![], error: None, failed: None });
        rec.1.push(build(None));
        boots("base", 5, 100.0, &mut rec);
        boots("v", 5, 100.0, &mut rec);
        // one boot of v lost a repetition: its failure text is its own
        rec.0.retain(|x| !(x.boot_id == "v-2cpu-b3" && x.repetition == 2));
        rec.1.push(Event::BenchFailed { variant: "v".into(), vcpus: 2, benchmark: "d".into(), boot_id: "v-2cpu-b3".into(), repetition: 2, error: "killed at its 60 s timeout".into(), failed: None });
        let r = build_from(&meta, &rec.0, &rec.1, &Floors::none("none"));
        let v = &r.rows[0].cells[1];
        assert_eq!(v.failure.as_deref(), Some("killed at its 60 s timeout"));
        let text = cell_text(v);
        assert!(!text.contains("build failed") && text.contains("(failed in 1/5 boots: killed at"), "{text}");
        // the same run without the failed boot shows no failure at all
        rec.1.retain(|e| !matches!(e, Event::BenchFailed { .. }));
        rec.0.push(sample("v", "v-2cpu-b3", 2, 100.0, false));
        let r = build_from(&meta, &rec.0, &rec.1, &Floors::none("none"));
        let v = &r.rows[0].cells[1];
        assert_eq!((v.failure.clone(), v.boots_failed), (None, 0), "{}", cell_text(v));
        assert!(!cell_text(v).contains("fail"), "{}", cell_text(v));
    }

    #[test]
    fn unsure_warns_and_fails_the_gate_only_when_strict() {
        let meta = meta_with(&["base", "v"], "{boots: 5, repetitions: 2}");
        let mut rec = (Vec::new(), Vec::new());
        boots("base", 5, 100.0, &mut rec);
        boots("v", 5, 97.9, &mut rec); // 2.1% slower, every boot below every base boot
        let r = build_from(&meta, &rec.0, &rec.1, &Floors::none("none"));
        let d = verdict_of(&r, 1);
        let ci = d.ratio.unwrap();
        assert_eq!(d.verdict, Verdict::Unsure, "{d:?}");
        assert!(ci.lo < 0.98 && ci.hi > 0.98 && d.may_regress(), "{ci:?}");
        assert!(decision_text(&d).contains("unsure: needs more boots (p=0.008 q=0.008, floor 2.0%)"), "{}", decision_text(&d));
        let g = report_gate(&r, &[]);
        assert!(g.failures.is_empty() && g.warnings.len() == 1, "{g:?}");
        assert!(!g.fails(false) && g.fails(true));
    }

    #[test]
    fn failing_more_often_is_reported_not_thinned() {
        let meta = meta_with(&["base", "flaky", "hangs"], "{boots: 5, repetitions: 2}");
        let mut rec = (Vec::new(), Vec::new());
        boots("base", 5, 100.0, &mut rec);
        boots("flaky", 5, 100.0, &mut rec);
        // flaky: the second repetition of 3 boots timed out
        let timed_out = ["flaky-2cpu-b0", "flaky-2cpu-b1", "flaky-2cpu-b2"];
        rec.0.retain(|s| !(s.repetition == 2 && timed_out.contains(&s.boot_id.as_str())));
        for boot_id in timed_out.map(String::from) {
            rec.1.push(Event::BenchFailed { variant: "flaky".into(), vcpus: 2, benchmark: "d".into(), boot_id, repetition: 2, error: "killed at its 60 s timeout".into(), failed: None });
        }
        // hangs: no boot ever comes up
        for b in 0..5 {
            let id = format!("hangs-2cpu-b{b}");
            rec.1.push(boot("hangs", &id, Some("no SSH within 300 s")));
            rec.1.push(boot_end("hangs", &id, Some("boot failed: no SSH within 300 s")));
        }
        let r = build_from(&meta, &rec.0, &rec.1, &Floors::none("none"));
        let flaky = &r.rows[0].cells[1];
        assert_eq!((flaky.n, flaky.boots_failed, flaky.boots_ended), (5, 3, 5), "boots that failed keep what they measured");
        let d = flaky.decision.unwrap();
        let f = d.failures.unwrap();
        assert_eq!((d.verdict, f.counts.failed, f.counts.base_failed, f.significant), (Verdict::FailsMore, 3, 0, false));
        assert!(cell_text(flaky).contains("fails more: 3/5 boots failed vs base 0/5 (Fisher p=0.083)"), "{}", cell_text(flaky));
        assert!(cell_text(flaky).contains("finished boots: "), "the measurements are still shown");
        let hangs = r.rows[0].cells[2].decision.unwrap();
        assert_eq!((hangs.verdict, hangs.performance), (Verdict::FailsMore, Verdict::Insufficient));
        assert!(hangs.failures.unwrap().significant);
        let g = report_gate(&r, &[]);
        assert_eq!((g.failures.len(), g.warnings.len()), (1, 1), "{g:?}");
        assert!(g.failures[0].starts_with("hangs") && g.warnings[0].starts_with("flaky"));
        assert!(csv(&r).lines().nth(2).unwrap().contains(",fails more,3,5,"), "{}", csv(&r));
    }

    #[test]
    fn floors_apply_per_metric() {
        let meta = meta_with(&["base", "slow"], "{boots: 5, repetitions: 2}");
        let mut rec = (Vec::new(), Vec::new());
        boots("base", 5, 100.0, &mut rec);
        boots("slow", 5, 80.0, &mut rec);
        let wall: Vec<Sample> = rec.0.iter().map(|s| Sample { metric: "wall_s".into(), unit: "s".into(), higher_is_better: false, ..s.clone() }).collect();
        rec.0.extend(wall);
        let mut floors = Floors::none("test floors");
        floors.by_cell.insert(("d".into(), "execs_per_s".into(), 2), 0.25);
        let r = build_from(&meta, &rec.0, &rec.1, &floors);
        let row = |m: &str| r.rows.iter().find(|x| x.metric == m).unwrap();
        assert_eq!((row("execs_per_s").floor, row("wall_s").floor), (0.25, 0.02));
        let execs = row("execs_per_s").cells[1].decision.unwrap();
        let wall = row("wall_s").cells[1].decision.unwrap();
        assert_eq!((execs.verdict, execs.floor), (Verdict::Small, 0.25), "a 20% drop inside a 25% floor");
        assert_eq!((wall.verdict, wall.floor), (Verdict::Improved, 0.02), "the other metric keeps 2%");
        assert!(r.rule_text.contains("test floors") && table(&r).contains("floors: test floors"));
    }

    #[test]
    fn csv_quotes_guest_text() {
        use super::text::csv;
        let meta = meta_with(&["base", "broken"], "{boots: 1, repetitions: 1}");
        let events = vec![
            Event::Build {
                variant: "broken".into(),
                key: None,
                build_s: 0.0,
                cached: false,
                release: None,
                errors: vec![],
                error: Some("exited with 1: \"x\", then\nline 2".into()),
                failed: None,
            },
            boot("base", "b0", None),
            boot_end("base", "b0", None),
        ];
        let mut samples = vec![sample("base", "b0", 1, 1.0, false)];
        samples[0].unit = "ops,\"s\"".into();
        let c = csv(&build_from(&meta, &samples, &events, &Floors::none("none")));
        // a strict RFC 4180 reader: every row has the header's fields, the failure intact
        let rows = parse_csv(&c);
        let header = "benchmark,metric,unit,higher_is_better,vcpus,variant,boots,reps,median,ci_lo,ci_hi,ci_exact,\
                      ratio,ratio_lo,ratio_hi,worse_by,worse_lo,worse_hi,p,q,floor,mde,verdict,boots_failed,boots_ended,failure";
        assert_eq!(c.lines().next(), Some(header), "the header is the record's fields, in order");
        let width = header.split(',').count();
        assert!(rows.iter().all(|r| r.len() == width), "{rows:?}");
        let broken = rows.iter().find(|r| r[5] == "broken").unwrap();
        assert!(broken[width - 1].ends_with("exited with 1: \"x\", then\nline 2"), "{broken:?}");
        assert_eq!(broken[2], "ops,\"s\"");
        let base = rows.iter().find(|r| r[5] == "base").unwrap();
        assert_eq!((base[3].as_str(), base[6].as_str(), base[8].as_str(), base[20].as_str()), ("true", "1", "1", "0.02"), "numbers as Rust prints them");
        assert!(csv(&Report { rows: vec![], ..build_from(&meta, &samples, &events, &Floors::none("none")) }) == format!("{header}\n"), "no cells: the header alone");
    }

    fn parse_csv(text: &str) -> Vec<Vec<String>> {
        let (mut rows, mut row, mut field, mut quoted, mut chars) = (vec![], vec![], String::new(), false, text.chars().peekable());
        while let Some(c) = chars.next() {
            match (quoted, c) {
                (true, '"') if chars.peek() == Some(&'"') => {
                    chars.next();
                    field.push('"');
                }
                (true, '"') => quoted = false,
                (true, c) => field.push(c),
                (false, '"') => quoted = true,
                (false, ',') => row.push(std::mem::take(&mut field)),
                (false, '\n') => {
                    row.push(std::mem::take(&mut field));
                    rows.push(std::mem::take(&mut row));
                }
                (false, c) => field.push(c),
            }
        }
        rows
    }
}
