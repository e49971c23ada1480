//! Cells from samples with the boot as the unit (each boot's value the
//! median of its measured repetitions; boots that never ended not counted),
//! failure counts, and every comparison with `base` decided in one
//! Benjamini-Hochberg pass over the whole report.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use super::rule::rule_text;
use super::scan::{scan, Scan};
use super::{BootRow, Cell, Floors, Report, Row};
use crate::config::Matrix;
use crate::plan::CellKey;
use crate::records::MeasureClock;
use crate::records::{Event, RunMeta, Sample};
use crate::stats::{self, Comparison, Failures, Rule};

/// Every (benchmark, metric, unit, direction) seen or expected, primary metric first.
fn metrics_of(m: &Matrix, samples: &Indexed) -> Vec<(String, String, String, bool)> {
    let mut metrics = Vec::new();
    // a benchmark no variant runs (one only a profile picks) has no row
    let runs = |b: &&crate::config::Benchmark| m.variants.iter().any(|v| v.benchmarks.contains(&b.name));
    for b in m.benchmarks.iter().filter(runs) {
        let mut uniq: Vec<(String, String, bool)> = Vec::new();
        let mut seen: HashSet<&str> = HashSet::new();
        for s in samples.of_bench(&b.name) {
            if seen.insert(&s.metric) {
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
        metrics.extend(
            uniq.into_iter()
                .map(|(metric, unit, hib)| (b.name.clone(), metric, unit, hib)),
        );
    }
    metrics
}

/// Counted samples indexed once, each list in the samples' order: by
/// benchmark, by (benchmark, metric), and the measured repetitions of each
/// (boot, benchmark). A cell reads its lists instead of scanning every
/// sample: with one scan per cell the run's end was quadratic in metric
/// names (20,000 names from one guest program took 14 minutes).
struct Indexed<'a> {
    by_bench: HashMap<&'a str, Vec<&'a Sample>>,
    by_metric: HashMap<&'a str, HashMap<&'a str, Vec<&'a Sample>>>,
    /// By boot id, then benchmark.
    reps: HashMap<&'a str, HashMap<&'a str, BTreeSet<u32>>>,
}

impl<'a> Indexed<'a> {
    fn new(samples: &[&'a Sample]) -> Self {
        let mut ix = Indexed {
            by_bench: HashMap::new(),
            by_metric: HashMap::new(),
            reps: HashMap::new(),
        };
        for &s in samples {
            ix.by_bench.entry(&s.benchmark).or_default().push(s);
            let of_bench = ix.by_metric.entry(&s.benchmark).or_default();
            of_bench.entry(&s.metric).or_default().push(s);
            if !s.warmup {
                let of_boot = ix.reps.entry(&s.boot_id).or_default();
                of_boot.entry(&s.benchmark).or_default().insert(s.repetition);
            }
        }
        ix
    }

    fn of_bench(&self, bench: &str) -> &[&'a Sample] {
        self.by_bench.get(bench).map_or(&[], Vec::as_slice)
    }

    fn of_metric(&self, bench: &str, metric: &str) -> &[&'a Sample] {
        let of = self.by_metric.get(bench).and_then(|b| b.get(metric));
        of.map_or(&[], Vec::as_slice)
    }

    /// The measured repetitions of `bench` in boot `id`.
    fn reps(&self, id: &str, bench: &str) -> usize {
        let of = self.reps.get(id).and_then(|b| b.get(bench));
        of.map_or(0, BTreeSet::len)
    }
}

/// Measured values of one cell grouped by boot, in the order boots appear
/// (`samples`: its benchmark's and metric's).
fn by_boot(samples: &[&Sample], variant: &str, vcpus: u32) -> Vec<Vec<f64>> {
    let mut order: Vec<&str> = Vec::new();
    let mut groups: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    for s in samples
        .iter()
        .filter(|s| s.variant == variant && s.vcpus == vcpus && !s.warmup)
    {
        if !groups.contains_key(s.boot_id.as_str()) {
            order.push(&s.boot_id);
        }
        groups.entry(&s.boot_id).or_default().push(s.value);
    }
    order.iter().map(|id| groups.remove(id).unwrap_or_default()).collect()
}

/// Failures of one cell's boots.
struct FailureCounts {
    /// Boots of (variant, vCPUs) that ended.
    ended: usize,
    /// Of those, the ones in which `bench` failed a repetition or measured
    /// fewer repetitions than planned.
    failed: usize,
    /// Of those, the ones whose `bench` timed out (or hung) with no value.
    timed_out: usize,
}

fn failure_counts(
    s: &Scan,
    samples: &Indexed,
    variant: &str,
    vcpus: u32,
    bench: &str,
    planned: usize,
) -> FailureCounts {
    let mut c = FailureCounts {
        ended: 0,
        failed: 0,
        timed_out: 0,
    };
    let cell = CellKey::new(variant, vcpus);
    let not_booted = s.not_booted.iter().filter(|j| j.cell() == cell).count();
    c.ended += not_booted;
    c.failed += not_booted;
    for (id, _) in s.ended.iter().filter(|(_, k)| **k == cell) {
        c.ended += 1;
        let reps = samples.reps(id, bench);
        let key = (id.clone(), bench.to_string());
        if s.bench_failed.contains(&key) || reps < planned {
            c.failed += 1;
        }
        if reps == 0 && s.timed_out.contains(&key) {
            c.timed_out += 1;
        }
    }
    c
}

/// Everything one cell is built from.
#[derive(Clone, Copy)]
struct CellInput<'a> {
    scan: &'a Scan,
    samples: &'a Indexed<'a>,
    vcpus: u32,
    bench: &'a str,
    metric: &'a str,
    planned: usize,
}

fn make_cell(x: &CellInput, variant: &str) -> Cell {
    let mine = x.samples.of_metric(x.bench, x.metric);
    let groups = by_boot(mine, variant, x.vcpus);
    let boots: Vec<f64> = groups.iter().filter_map(|g| stats::median(g)).collect();
    let counts = failure_counts(x.scan, x.samples, variant, x.vcpus, x.bench, x.planned);
    let cell = CellKey::new(variant, x.vcpus);
    let failure = x
        .scan
        .variant_fail
        .get(variant)
        .or_else(|| x.scan.cell_fail.get(&(cell.clone(), x.bench.to_string())))
        .or_else(|| x.scan.boot_fail.get(&cell))
        .cloned();
    let n_warmup = mine
        .iter()
        .filter(|s| s.variant == variant && s.vcpus == x.vcpus && s.warmup)
        .count();
    Cell {
        variant: variant.to_string(),
        second_stage: false,
        n: boots.len(),
        reps_per_boot: groups.iter().map(Vec::len).collect(),
        n_warmup,
        summary: stats::summarize(&boots),
        boots,
        decision: None,
        failure,
        boots_ended: counts.ended,
        boots_failed: counts.failed,
        timed_out: counts.timed_out,
        kernel_faults: x
            .scan
            .faulted
            .get(&(variant.to_string(), x.vcpus))
            .map_or(0, BTreeSet::len),
        values: groups.concat(),
        history: None,
        overcommitted: false,
    }
}

/// Marks the cells of rows whose vCPUs exceed the host's CPUs under a wall
/// clock (under icount one thread runs every vCPU whatever the host has).
fn mark_overcommitted(rows: &mut [Row], host_cpus: u32, clock: Option<MeasureClock>) {
    if clock == Some(MeasureClock::TcgIcount) || host_cpus == 0 {
        return;
    }
    for row in rows.iter_mut().filter(|r| r.vcpus > host_cpus) {
        for c in &mut row.cells {
            c.overcommitted = true;
        }
    }
}

/// The comparison of `cell` against `base` in a row with floor `floor`.
fn comparison(base: &Cell, cell: &Cell, higher_is_better: bool, floor: f64) -> Comparison {
    let failures = (base.boots_ended > 0 && cell.boots_ended > 0).then_some(Failures {
        failed: cell.boots_failed,
        of: cell.boots_ended,
        base_failed: base.boots_failed,
        base_of: base.boots_ended,
    });
    Comparison {
        base: base.boots.clone(),
        new: cell.boots.clone(),
        higher_is_better,
        floor,
        failures,
        worst: (base.timed_out, cell.timed_out),
    }
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
    let rule = rule_of(m);
    let mut s = scan(events);
    let clock = run_clock(meta, events);
    let refused = other_clocks(&mut s, events, clock);
    let counted = counted(&mut s, samples, &refused);
    boot_cpu_windows(&mut s.boots, samples);
    let (mut rows, comparisons) = rows_of(m, &s, &counted, &rule, clock);
    mark_overcommitted(&mut rows, meta.host.cpus, clock);
    let rule_text = rule_text(m, &rule, comparisons, &floors.source);
    let detectable = super::rule::detectable_text(m, &rows, comparisons);
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
        detectable,
        host: format!(
            "{} ({} CPUs, {} MiB, {}; {}); guest.pin {}, hugepages {}",
            meta.host.hostname,
            meta.host.cpus,
            meta.host.memory_mib,
            meta.host.kernel,
            meta.host.qemu,
            m.guest.pin.name(),
            if m.guest.hugepages { "on" } else { "off" }
        ),
        complete: s.jobs_ended >= crate::plan::boot_jobs(m).len(),
        clock,
        clock_text: clock
            .map(|c| format!("{}: {}{}", c.name(), c.describe(), at_once(c, meta.jobs)))
            .unwrap_or_else(|| "clock not recorded (a run from before clocks were recorded, or no boot yet)".into()),
        shards: Vec::new(),
        profiles: Vec::new(),
        contention: Vec::new(),
        contention_missing: Vec::new(),
        scaling: Vec::new(),
        contention_gate: m.statistics.contention,
        coverage: Vec::new(),
        wall_s: super::wall_seconds(&meta.started, samples),
    }
}

/// What the clock line adds when boots ran at once (`run --jobs`).
fn at_once(clock: crate::records::MeasureClock, jobs: Option<u32>) -> String {
    match jobs.filter(|&n| n > 1) {
        None => String::new(),
        Some(n) if clock == crate::records::MeasureClock::TcgIcount => format!("; {n} boots at once"),
        Some(n) => format!(
            "; {n} boots at once under a wall clock (--allow-concurrent-wall): the guests shared the host's CPUs, so these numbers are not those of one boot at a time"
        ),
    }
}

/// The decision rule of the matrix's statistics section.
fn rule_of(m: &Matrix) -> Rule {
    Rule {
        alpha: m.statistics.alpha,
        // the least declared threshold: each cell's own is its comparison's
        // floor, and the rule takes the larger of the two
        floor: m
            .statistics
            .thresholds
            .values()
            .fold(m.statistics.threshold, |a, &b| a.min(b)),
        min_boots: Rule::default().min_boots,
        resamples: m.statistics.resamples,
        seed: m.statistics.seed,
    }
}

/// The boots measured in another clock than the run's (`clock`; shards on
/// hosts with other accelerators): never merged into a cell, they are taken
/// out of the ended boots and named in a note.
fn other_clocks(s: &mut Scan, events: &[Event], clock: Option<MeasureClock>) -> BTreeSet<String> {
    let Some(clock) = clock else { return BTreeSet::new() };
    let mut by_clock: BTreeMap<MeasureClock, BTreeSet<String>> = BTreeMap::new();
    for e in events {
        if let Event::Boot {
            boot_id,
            clock: Some(c),
            ..
        } = e
        {
            if *c != clock {
                by_clock.entry(*c).or_default().insert(boot_id.clone());
            }
        }
    }
    let mut refused = BTreeSet::new();
    for (c, ids) in by_clock {
        let ended: Vec<String> = ids.into_iter().filter(|id| s.ended.remove(id).is_some()).collect();
        if !ended.is_empty() {
            s.notes.push(format!(
                "not counted: {} boot(s) measured in the {} clock, not the run's {} ({}): numbers of different clocks are never merged into one cell",
                ended.len(),
                c.name(),
                clock.name(),
                ended.join(", ")
            ));
        }
        refused.extend(ended);
    }
    refused
}

/// The samples of boots that ended (not `refused`); the others are named in a note. A
/// rate of 0 (a higher-is-better metric: no progress, as harnesses before
/// the `no_progress` rule recorded it) is no measurement: its repetition
/// counts as failed, with a note.
fn counted<'a>(s: &mut Scan, samples: &'a [Sample], refused: &BTreeSet<String>) -> Vec<&'a Sample> {
    let stuck: Vec<&Sample> = samples
        .iter()
        .filter(|x| x.higher_is_better && x.value == 0.0 && s.ended.contains_key(&x.boot_id))
        .collect();
    for x in &stuck {
        s.bench_failed.insert((x.boot_id.clone(), x.benchmark.clone()));
        s.notes.push(format!(
            "{}: {} repetition {}: {} of 0 is no progress, not a measurement: the repetition counts as failed",
            x.boot_id, x.benchmark, x.repetition, x.metric
        ));
    }
    let counted: Vec<&Sample> = samples
        .iter()
        .filter(|x| s.ended.contains_key(&x.boot_id) && !(x.higher_is_better && x.value == 0.0))
        .collect();
    let cut: BTreeSet<&str> = samples
        .iter()
        .filter(|x| !s.ended.contains_key(&x.boot_id) && !refused.contains(&x.boot_id))
        .map(|x| x.boot_id.as_str())
        .collect();
    if !cut.is_empty() {
        let ids: Vec<&str> = cut.into_iter().collect();
        s.notes.push(format!(
            "not counted: samples of {} boot(s) that never ended ({})",
            ids.len(),
            ids.join(", ")
        ));
    }
    counted
}

/// Every row (metric × vCPUs) with its cells, each variant's cell decided
/// against base in one decision pass over the whole report (BH across every
/// comparison); with the number of comparisons.
fn rows_of(m: &Matrix, s: &Scan, counted: &[&Sample], rule: &Rule, clock: Option<MeasureClock>) -> (Vec<Row>, usize) {
    let mut rows = Vec::new();
    let mut pairs: Vec<Comparison> = Vec::new();
    let mut first_pairs: Vec<Comparison> = Vec::new();
    let mut pair_at: Vec<(usize, usize)> = Vec::new();
    let first: Vec<&Sample> = counted
        .iter()
        .copied()
        .filter(|x| crate::plan::boot_index(&x.boot_id).is_none_or(|k| k < m.sampling.boots))
        .collect();
    let (all, first) = (Indexed::new(counted), Indexed::new(&first));
    for (bench, metric, unit, hib) in metrics_of(m, &all) {
        for &vcpus in &m.vcpus {
            let x = CellInput {
                scan: s,
                samples: &all,
                vcpus,
                bench: &bench,
                metric: &metric,
                planned: m.sampling.repetitions as usize,
            };
            let Some((row, compared)) = row_of(m, x, &first, rule, (&unit, hib), clock) else {
                continue;
            };
            for (ci, (both, first_stage)) in compared.into_iter().enumerate() {
                pairs.push(both);
                first_pairs.push(first_stage);
                pair_at.push((rows.len(), ci + 1));
            }
            rows.push(row);
        }
    }
    let keys: Vec<bool> = pair_at
        .iter()
        .map(|&(ri, _)| super::gate::is_key(&m.key_metrics, &rows[ri].benchmark, &rows[ri].metric))
        .collect();
    let (decisions, sent) = staged(m, rule, (&first_pairs, &pairs), &keys);
    for (((ri, ci), d), s) in pair_at.into_iter().zip(decisions).zip(sent) {
        rows[ri].cells[ci].decision = Some(d);
        rows[ri].cells[ci].second_stage = s;
    }
    (rows, pairs.len())
}

/// The row of `x`'s benchmark and metric at its vCPU count (None when no
/// variant runs the benchmark), and each variant's comparison against base
/// in cell order: over all its boots, and over the first stage's (`first`).
fn row_of(
    m: &Matrix,
    x: CellInput,
    first: &Indexed,
    rule: &Rule,
    (unit, hib): (&str, bool),
    clock: Option<MeasureClock>,
) -> Option<(Row, Vec<(Comparison, Comparison)>)> {
    let cells: Vec<Cell> = m
        .variants
        .iter()
        .filter(|v| v.benchmarks.iter().any(|b| b == x.bench))
        .map(|v| make_cell(&x, &v.name))
        .collect();
    if cells.is_empty() {
        return None;
    }
    // the declared threshold alone: the interval carries the noise,
    // so a calibrated A/A floor (itself a noise band) is not added
    let floor = m.statistics.threshold_for(x.bench, x.metric).max(rule.floor);
    let mut compared = Vec::new();
    if cells[0].variant == "base" {
        let x1 = CellInput { samples: first, ..x };
        let first_base = make_cell(&x1, "base");
        for c in &cells[1..] {
            compared.push((
                comparison(&cells[0], c, hib, floor),
                comparison(&first_base, &make_cell(&x1, &c.variant), hib, floor),
            ));
        }
    }
    let row = Row {
        benchmark: x.bench.to_string(),
        metric: x.metric.to_string(),
        unit: clock.map_or_else(|| unit.to_string(), |c| c.unit(unit)),
        higher_is_better: hib,
        vcpus: x.vcpus,
        floor,
        linear_reference: linear_reference(m, x.bench, hib),
        cells,
    };
    Some((row, compared))
}

/// The decisions of every comparison and the cells sent to the gate's
/// second stage ([`stats::stages::decide_staged`]).
fn staged(
    m: &Matrix,
    rule: &Rule,
    (first, both): (&[Comparison], &[Comparison]),
    keys: &[bool],
) -> (Vec<stats::Decision>, Vec<bool>) {
    let plan = (m.sampling.boots as usize, m.statistics.second_stage_boots as usize);
    stats::stages::decide_staged(first, both, keys, rule, plan)
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
        let mine: Vec<&Sample> = samples
            .iter()
            .filter(|s| s.boot_id == b.boot_id && s.cpu.is_some())
            .collect();
        if !mine.is_empty() {
            b.steal = Some(mine.iter().map(|s| s.cpu.unwrap().steal).sum::<f64>() / mine.len() as f64);
            b.idle = Some(mine.iter().map(|s| s.cpu.unwrap().idle).sum::<f64>() / mine.len() as f64);
        }
    }
}
