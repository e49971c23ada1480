//! The scaling view of a run: for every compared (benchmark, variant)
//! measured at two or more vCPU counts with kernel profiles on both sides,
//! the variant's growth per op from the smallest count to the largest
//! against base's, row by row, and its verdict of its own
//! ([`crate::profile::scaling`]): never mixed into the rate's verdict nor
//! the contention verdict. Every boot is one value, as everywhere in the
//! report; base's boots of a (benchmark, vCPUs) are read once.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Serialize;

use super::profiles::{boots, compared};
use super::Report;
use crate::profile::{scaling, PerOp};
use crate::records::Event;

/// The metric whose threshold an instruction row's is a fraction of.
pub const THRESHOLD_METRIC: &str = "kernel_insns_per_op";

/// The scaling view of a variant against base on one benchmark.
#[derive(Debug, Clone, Serialize)]
pub struct CellScaling {
    /// Benchmark.
    pub benchmark: String,
    /// Variant.
    pub variant: String,
    /// The view and its verdict.
    pub scaling: scaling::Scaling,
    /// Where the profiles are from when not the cell's own boots.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
}

impl CellScaling {
    /// `fork-exec, fork-cpu-walk, 2 → 8 vCPUs`.
    pub fn title(&self) -> String {
        title(&self.benchmark, &self.variant, &self.scaling.vcpus)
    }
}

/// `bench, variant, 2 → 8 → 26 vCPUs`.
pub fn title(benchmark: &str, variant: &str, vcpus: &[u32]) -> String {
    let counts: Vec<String> = vcpus.iter().map(u32::to_string).collect();
    format!("{benchmark}, {variant}, {} vCPUs", counts.join(" → "))
}

/// The scaling rule's constants for `benchmark` of matrix `m`: its
/// instruction rows' threshold is the run's threshold of
/// [`THRESHOLD_METRIC`].
pub fn options(m: &crate::config::Matrix, benchmark: &str) -> scaling::ScalingOptions {
    scaling::ScalingOptions {
        threshold: m.statistics.threshold_for(benchmark, THRESHOLD_METRIC),
        ..scaling::ScalingOptions::default()
    }
}

/// Base's boots of a (benchmark, vCPUs), read once for every variant.
type Bases = BTreeMap<(String, u32), Vec<PerOp>>;

/// The scaling view of `variant` against base on `benchmark` at those of
/// `vcpus` where both sides have kernel profiles; None with fewer than two.
fn view(
    (dir, events): (&Path, &[Event]),
    benchmark: &str,
    variant: &str,
    vcpus: &[u32],
    o: &scaling::ScalingOptions,
    bases: &mut Bases,
    notes: &mut Vec<String>,
) -> Option<scaling::Scaling> {
    let mut sides: Vec<(u32, Vec<PerOp>)> = Vec::new();
    for &n in vcpus {
        let base = bases
            .entry((benchmark.to_string(), n))
            .or_insert_with(|| boots(dir, events, "base", n, benchmark, notes));
        let var = boots(dir, events, variant, n, benchmark, notes);
        if !base.is_empty() && !var.is_empty() {
            sides.push((n, var));
        }
    }
    if sides.len() < 2 {
        return None;
    }
    let counts: Vec<scaling::Count> = sides
        .iter()
        .map(|(n, var)| scaling::Count::of(*n, &bases[&(benchmark.to_string(), *n)], var))
        .collect();
    Some(scaling::scaling(&counts, o))
}

/// The scaling view of every compared (benchmark, variant) of `r` measured
/// at two or more vCPU counts with kernel profiles on both sides, whatever
/// its cells' verdicts; `from` as [`super::profiles::source`] gave it.
pub fn scaling_cells(
    dir: &Path,
    events: &[Event],
    from: Option<&str>,
    m: &crate::config::Matrix,
    r: &Report,
    notes: &mut Vec<String>,
) -> Vec<CellScaling> {
    let mut pairs: Vec<((String, String), Vec<u32>)> = Vec::new();
    for (benchmark, vcpus, variant) in compared(events, r, |_| true) {
        let key = (benchmark, variant);
        match pairs.iter_mut().find(|(k, _)| *k == key) {
            Some((_, counts)) => counts.push(vcpus),
            None => pairs.push((key, vec![vcpus])),
        }
    }
    let mut bases = Bases::new();
    let mut out = Vec::new();
    for ((benchmark, variant), counts) in pairs.into_iter().filter(|(_, c)| c.len() >= 2) {
        let o = options(m, &benchmark);
        if let Some(s) = view((dir, events), &benchmark, &variant, &counts, &o, &mut bases, notes) {
            out.push(CellScaling {
                benchmark,
                variant,
                scaling: s,
                from: from.map(str::to_string),
            });
        }
    }
    out
}

/// The scaling view of `variant` against base on `benchmark` over every
/// vCPU count at which the run's events hold its profiles (`harness
/// explain`); None with fewer than two.
pub fn cell_scaling(
    dir: &Path,
    events: &[Event],
    m: &crate::config::Matrix,
    variant: &str,
    benchmark: &str,
    notes: &mut Vec<String>,
) -> Option<scaling::Scaling> {
    let mut vcpus: Vec<u32> = events
        .iter()
        .filter_map(|e| match e {
            Event::Profile {
                variant: v,
                benchmark: b,
                vcpus,
                ..
            } if v == variant && b == benchmark => Some(*vcpus),
            _ => None,
        })
        .collect();
    vcpus.sort_unstable();
    vcpus.dedup();
    let o = options(m, benchmark);
    view((dir, events), benchmark, variant, &vcpus, &o, &mut Bases::new(), notes)
}

#[cfg(test)]
mod tests;
