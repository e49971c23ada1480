//! The scaling rule's A/A false calls: at every vCPU count, disjoint sides
//! of boots of one kernel compared as base and variant, as the instruction
//! and contention rules' are ([`crate::profile::diff::aa_false_calls`]).
//! An A/A across the same counts should call nothing.

use std::collections::BTreeMap;

use super::{scaling, Count, Mark, ScalingOptions, ScalingVerdict};
use crate::profile::diff::disjoint_sides;
use crate::profile::PerOp;

/// How often the scaling rule calls a cell between boots of one kernel.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ScalingAaCalls {
    /// A/A comparisons made.
    pub trials: usize,
    /// Boots a side at each count.
    pub per_side: usize,
    /// Comparisons whose cell verdict was not `≈`: the false-call rate.
    pub calling: usize,
    /// Comparisons that marked the whole kernel's row (which does not
    /// decide the cell).
    pub kernel_marked: usize,
    /// Comparisons that marked a scheduler row (which does not either).
    pub scheduler_marked: usize,
    /// Per row that carried a false verdict ([`super::Row::text`]), the
    /// comparisons it did.
    pub by_row: BTreeMap<String, usize>,
}

/// The rule's A/A false calls: `trials` times, at every count of `pools`
/// (its vCPUs and boots of one kernel), two disjoint sides of `per_side`
/// boots drawn at random (seeded, each count its own draw) are compared as
/// base and variant. None when a count has fewer than `2 × per_side` boots.
pub fn aa_false_calls(
    pools: &[(u32, &[PerOp])],
    per_side: usize,
    trials: usize,
    seed: u64,
    o: &ScalingOptions,
) -> Option<ScalingAaCalls> {
    let draws: Vec<Vec<(Vec<usize>, Vec<usize>)>> = pools
        .iter()
        .enumerate()
        .map(|(i, (_, boots))| {
            disjoint_sides(boots.len(), per_side, trials, seed.wrapping_add(i as u64)).map(|d| d.collect())
        })
        .collect::<Option<_>>()?;
    let mut out = ScalingAaCalls {
        trials,
        per_side,
        calling: 0,
        kernel_marked: 0,
        scheduler_marked: 0,
        by_row: BTreeMap::new(),
    };
    let moved = |m: Mark| matches!(m, Mark::Worse | Mark::Better);
    for t in 0..trials {
        let counts: Vec<Count> = pools
            .iter()
            .zip(&draws)
            .map(|((vcpus, boots), d)| Count {
                vcpus: *vcpus,
                base: d[t].0.iter().map(|&i| &boots[i]).collect(),
                variant: d[t].1.iter().map(|&i| &boots[i]).collect(),
            })
            .collect();
        let s = scaling(&counts, o);
        out.calling += usize::from(!matches!(s.verdict, ScalingVerdict::Same | ScalingVerdict::None));
        out.kernel_marked += usize::from(moved(s.kernel().mark));
        out.scheduler_marked += usize::from(s.rows.iter().any(|r| r.scheduler && moved(r.mark)));
        for r in s.carried() {
            *out.by_row.entry(r.text()).or_default() += 1;
        }
    }
    Some(out)
}
