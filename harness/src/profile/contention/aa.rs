//! The contention rule's A/A false calls: disjoint sides of boots of one
//! kernel compared as base and variant, as the instruction profile's are
//! ([`crate::profile::diff::aa_false_calls`]).

use std::collections::BTreeMap;

use super::{Call, Class, Key, Options, PerOp};
use crate::profile::diff::{disjoint_sides, Stat};

/// How often the contention rule calls a row between boots of one kernel.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct AaCalls {
    /// A/A comparisons made.
    pub trials: usize,
    /// Boots a side in each.
    pub per_side: usize,
    /// Comparisons whose verdict was not `≈`: the cell's false-verdict rate.
    pub calling: usize,
    /// Comparisons that called a static row (a line or lock of the image).
    pub static_calling: usize,
    /// Comparisons that called a heap row.
    pub heap_calling: usize,
    /// Per row ([`super::Key::text`]), the comparisons that called it.
    pub by_row: BTreeMap<String, usize>,
}

/// The rule's A/A false calls: `trials` times, two disjoint sides of
/// `per_side` boots drawn at random from `boots` (all of one kernel, one
/// benchmark, one vCPU count) are compared as base and variant, seeded.
/// None when there are fewer than `2 × per_side` boots.
pub fn aa_false_calls(boots: &[PerOp], per_side: usize, trials: usize, seed: u64, o: &Options) -> Option<AaCalls> {
    let mut out = AaCalls {
        trials,
        per_side,
        calling: 0,
        static_calling: 0,
        heap_calling: 0,
        by_row: BTreeMap::new(),
    };
    // each row's events per op in every boot, read once
    let keys: std::collections::BTreeSet<&Key> = boots.iter().flat_map(|b| b.rows.keys()).collect();
    let rows: Vec<(&Key, Vec<f64>)> = keys
        .into_iter()
        .map(|k| {
            (
                k,
                boots.iter().map(|b| b.rows.get(k).map_or(0.0, |r| r.events)).collect(),
            )
        })
        .collect();
    for (b, v) in disjoint_sides(boots.len(), per_side, trials, seed)? {
        let mut class = (false, false);
        for (k, events) in &rows {
            let side = |ix: &[usize]| Stat::of(&ix.iter().map(|&i| events[i]).collect::<Vec<_>>());
            if o.calls(k.class, &side(&b), &side(&v), per_side).1 != Call::Called {
                continue;
            }
            *out.by_row.entry(k.text()).or_default() += 1;
            match k.class {
                Class::Static => class.0 = true,
                Class::Heap => class.1 = true,
            }
        }
        out.calling += usize::from(class.0 || class.1);
        out.static_calling += usize::from(class.0);
        out.heap_calling += usize::from(class.1);
    }
    Some(out)
}
