//! The pre-merge gate: which verdicts in key metrics fail it, which only warn.
//!
//! Fails: `regressed` (also on the finished boots of a `fails more` cell),
//! `fails more` with a one-sided Fisher p ≤ alpha, and a kernel fault (a
//! panic, oops, BUG, hung task, a hang or no SSH) in the variant's boots when
//! base's boots at that vCPU count have none — one panic is evidence enough,
//! whatever a rate test says. Warns (fatal with `--strict`): `unsure` when
//! the change's interval reaches beyond the threshold on the worse side,
//! `fails more?` (a larger failure share with a larger p), and `work per op
//! differs` (the clock cannot judge the cell: `profile::work`).
//!
//! Contention has its own call: a key benchmark's `more contention` (the
//! plugin's shared-line RMWs or shared-lock acquisitions per op rose:
//! `profile::contention`) warns, or fails where the matrix says
//! `statistics: {contention: fail}`.

use super::{decision_text, Report};
use crate::plan::CellKey;
use crate::stats::{Decision, Verdict};

/// One judged cell, from a report or a comparison of two runs.
pub struct GateItem<'a> {
    /// Benchmark.
    pub benchmark: &'a str,
    /// Metric.
    pub metric: &'a str,
    /// vCPUs.
    pub vcpus: u32,
    /// Variant.
    pub variant: &'a str,
    /// Its decision.
    pub decision: &'a Decision,
    /// Boots with a kernel fault: (this variant's, base's), when known.
    pub faults: Option<(usize, usize)>,
}

/// What the gate found in key metrics.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Gate {
    /// Cells that fail the gate.
    pub failures: Vec<String>,
    /// Cells that fail it only with `--strict`.
    pub warnings: Vec<String>,
}

impl Gate {
    /// Whether the gate fails: on any failure, or on any warning when `strict`.
    pub fn fails(&self, strict: bool) -> bool {
        !self.failures.is_empty() || (strict && !self.warnings.is_empty())
    }
}

pub(crate) fn is_key(key_metrics: &[String], benchmark: &str, metric: &str) -> bool {
    key_metrics.is_empty()
        || key_metrics
            .iter()
            .any(|k| k == benchmark || *k == format!("{benchmark}.{metric}"))
}

/// How the gate judges one cell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Call {
    /// The cell fails the gate.
    Fails,
    /// The cell only warns (fails it with `--strict`).
    Warns,
}

/// One cell's call and the gate's text for it; `None` when it passes.
pub fn judge(it: &GateItem) -> Option<(Call, String)> {
    let d = it.decision;
    let what = || {
        format!(
            "{} {} at {} vCPUs ({}): {}",
            it.variant,
            it.metric,
            it.vcpus,
            it.benchmark,
            decision_text(d).replace('\n', "; ")
        )
    };
    let fails_hard = d.failures.is_some_and(|f| f.significant);
    if let Some((k, 0)) = it.faults.filter(|f| f.0 > 0) {
        Some((
            Call::Fails,
            format!(
                "{}; kernel faults (panic, oops, BUG, hang) in {k} of its boots and in none of base's",
                what()
            ),
        ))
    } else if d.verdict == Verdict::Regressed || d.performance == Verdict::Regressed || fails_hard {
        Some((Call::Fails, what()))
    } else if d.failures.is_some()
        || (d.performance == Verdict::Unsure && d.may_regress())
        || d.performance == Verdict::WorkDiffers
    {
        Some((Call::Warns, what()))
    } else {
        None
    }
}

/// Judges cells in key metrics (`bench` or `bench.metric`; every metric when
/// the matrix names none).
pub fn gate<'a>(items: impl IntoIterator<Item = GateItem<'a>>, key_metrics: &[String]) -> Gate {
    let mut g = Gate::default();
    for it in items
        .into_iter()
        .filter(|it| is_key(key_metrics, it.benchmark, it.metric))
    {
        match judge(&it) {
            Some((Call::Fails, t)) => g.failures.push(t),
            Some((Call::Warns, t)) => g.warnings.push(t),
            None => {}
        }
    }
    g
}

/// Every compared cell of a report (a variant's cell with a decision) as a gate item.
pub fn report_items(r: &Report) -> impl Iterator<Item = GateItem<'_>> {
    r.rows.iter().flat_map(|row| {
        let base_faults = row.cells.first().map_or(0, |b| b.kernel_faults);
        row.cells.iter().filter_map(move |c| {
            let faults = Some((c.kernel_faults, base_faults));
            Some(GateItem {
                benchmark: &row.benchmark,
                metric: &row.metric,
                vcpus: row.vcpus,
                variant: &c.variant,
                decision: c.decision.as_ref()?,
                faults,
            })
        })
    })
}

/// Each key metric (`benchmark.metric`) that names no metric of
/// `reported`, the (benchmark, metric) of the run's rows, with the gate's
/// failure naming the metrics its benchmark did report: a misspelt key
/// judges nothing, and that is never a pass. A key that is a reported
/// benchmark, or has no dot, names a benchmark (all its metrics) and is
/// never unmatched.
pub fn unmatched_keys<'k, 'a>(
    key_metrics: &'k [String],
    reported: impl IntoIterator<Item = (&'a str, &'a str)>,
) -> Vec<(&'k str, String)> {
    let reported: Vec<(&str, &str)> = reported.into_iter().collect();
    let mut out = Vec::new();
    for k in key_metrics {
        let hit = |(b, m): &(&str, &str)| k == b || k.strip_prefix(b).and_then(|r| r.strip_prefix('.')) == Some(m);
        if !k.contains('.') || reported.iter().any(hit) {
            continue;
        }
        // the longest reported benchmark the key starts with, else its part before the dot
        let bench = reported
            .iter()
            .map(|(b, _)| *b)
            .filter(|b| k.strip_prefix(b).is_some_and(|r| r.starts_with('.')))
            .max_by_key(|b| b.len())
            .unwrap_or_else(|| k.split('.').next().unwrap_or_default());
        let mut metrics: Vec<&str> = reported.iter().filter(|(b, _)| *b == bench).map(|(_, m)| *m).collect();
        metrics.sort_unstable();
        metrics.dedup();
        let did = if metrics.is_empty() {
            "no metric".to_string()
        } else {
            metrics.join(", ")
        };
        let text = format!("key metric `{k}` matched no cell: {bench} reported {did} in this run");
        out.push((k.as_str(), text));
    }
    out
}

/// The gate over every compared cell of a report, its contention cells,
/// and each key metric that matched no row.
pub fn report_gate(r: &Report, key_metrics: &[String]) -> Gate {
    let mut g = gate(report_items(r), key_metrics);
    let rows = r.rows.iter().map(|row| (row.benchmark.as_str(), row.metric.as_str()));
    g.failures
        .extend(unmatched_keys(key_metrics, rows).into_iter().map(|(_, t)| t));
    for (_, call) in contention_calls(r, key_metrics) {
        match call {
            Some((Call::Fails, t)) => g.failures.push(t),
            Some((Call::Warns, t)) => g.warnings.push(t),
            None => {}
        }
    }
    for (call, t) in missing_contention_calls(r, key_metrics) {
        match call {
            Call::Fails => g.failures.push(t),
            Call::Warns => g.warnings.push(t),
        }
    }
    g
}

/// What the gate does with a key cell's contention finding:
/// `statistics.contention`.
fn contention_call(r: &Report) -> Call {
    match r.contention_gate {
        crate::config::ContentionGate::Warn => Call::Warns,
        crate::config::ContentionGate::Fail => Call::Fails,
    }
}

/// Each key cell whose contention profile is missing on one side, with
/// the gate's call: it cannot be seen to pass, so it warns, or fails under
/// `statistics.contention: fail`.
pub fn missing_contention_calls(r: &Report, key_metrics: &[String]) -> Vec<(Call, String)> {
    let call = contention_call(r);
    r.contention_missing
        .iter()
        .filter(|m| is_key_benchmark(key_metrics, &m.benchmark))
        .map(|m| {
            let t = format!(
                "{} at {} vCPUs ({}): no contention profile: {}",
                m.variant, m.vcpus, m.benchmark, m.why
            );
            (call, t)
        })
        .collect()
}

/// Whether a benchmark has a key metric (every benchmark when the matrix
/// names none).
pub(crate) fn is_key_benchmark(key_metrics: &[String], benchmark: &str) -> bool {
    key_metrics.is_empty()
        || key_metrics
            .iter()
            .any(|k| k == benchmark || k.strip_prefix(benchmark).is_some_and(|m| m.starts_with('.')))
}

/// Each contention cell of a key benchmark with the gate's call on it:
/// `more contention` warns, or fails under `statistics.contention: fail`.
pub fn contention_calls<'a>(
    r: &'a Report,
    key_metrics: &[String],
) -> Vec<(&'a super::profiles::CellContention, Option<(Call, String)>)> {
    let call = contention_call(r);
    r.contention
        .iter()
        .filter(|c| is_key_benchmark(key_metrics, &c.benchmark))
        .map(|c| {
            let judged = (c.diff.verdict == crate::profile::contention::Verdict::More).then(|| {
                let t = format!(
                    "{} at {} vCPUs ({}): {}",
                    c.variant,
                    c.vcpus,
                    c.benchmark,
                    c.diff.summary(3)
                );
                (call, t)
            });
            (c, judged)
        })
        .collect()
}

/// The (variant, vCPUs) whose key cells the first stage sent to the gate's
/// second stage, each once.
pub fn second_stage_cells(r: &Report) -> Vec<CellKey> {
    let mut out: Vec<CellKey> = Vec::new();
    for row in &r.rows {
        for c in row.cells.iter().filter(|c| c.second_stage) {
            let cell = CellKey::new(&c.variant, row.vcpus);
            if !out.contains(&cell) {
                out.push(cell);
            }
        }
    }
    out
}
