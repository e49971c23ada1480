//! The rule's A/A false calls: disjoint sides of boots of one kernel
//! compared as base and variant.

use std::collections::{BTreeMap, BTreeSet};

use super::{decide, med, moved_counts, noise_of, Options, Stat};
use crate::profile::{FnPerOp, PerOp};

/// How often the rule calls a change between boots of one kernel.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct AaCalls {
    /// A/A comparisons made.
    pub trials: usize,
    /// Boots a side in each.
    pub per_side: usize,
    /// Comparisons in which at least one function was called.
    pub calling: usize,
    /// Per function, the comparisons that called it.
    pub by_function: BTreeMap<String, usize>,
    /// Comparisons in which the counts rule moved at least one function.
    pub counts_calling: usize,
    /// Per function, the comparisons in which its counts moved.
    pub counts_by_function: BTreeMap<String, usize>,
    /// Comparisons in which either rule marked at least one function: the
    /// profile's family-wise false-mark rate over every function it shows.
    pub marking: usize,
}

/// The rule's A/A false calls: `trials` times, two disjoint sides of
/// `per_side` boots drawn at random from `boots` (all of one kernel, one
/// benchmark, one vCPU count) are compared as base and variant, seeded.
/// None when there are fewer than `2 × per_side` boots.
pub fn aa_false_calls(boots: &[PerOp], per_side: usize, trials: usize, seed: u64, o: &Options) -> Option<AaCalls> {
    let sides = disjoint_sides(boots.len(), per_side, trials, seed)?;
    let names: BTreeSet<&String> = boots.iter().flat_map(|p| p.functions.keys()).collect();
    let mut out = AaCalls {
        trials,
        per_side,
        calling: 0,
        by_function: BTreeMap::new(),
        counts_calling: 0,
        counts_by_function: BTreeMap::new(),
        marking: 0,
    };
    for (b, v) in sides {
        let (b, v): (Vec<&PerOp>, Vec<&PerOp>) = (
            b.iter().map(|&i| &boots[i]).collect(),
            v.iter().map(|&i| &boots[i]).collect(),
        );
        let op = med(&b.iter().map(|p| p.total_insns).collect::<Vec<_>>());
        let vals = |side: &[&PerOp], name: &str, pick: fn(&FnPerOp) -> f64| -> Vec<f64> {
            side.iter().map(|p| p.functions.get(name).map_or(0.0, pick)).collect()
        };
        let enough = per_side >= o.min_boots;
        let (mut any, mut any_count) = (false, false);
        for name in &names {
            let (sb, sv) = (
                Stat::of(&vals(&b, name, |f| f.insns)),
                Stat::of(&vals(&v, name, |f| f.insns)),
            );
            if decide(&sb, &sv, noise_of(name, &sb, &sv, None, |f| f.insns), op, o, enough).1 {
                *out.by_function.entry(name.to_string()).or_default() += 1;
                any = true;
            }
            let moved = moved_counts(
                name,
                |pick| vals(&b, name, pick),
                |pick| vals(&v, name, pick),
                None,
                o,
                enough,
            );
            if !moved.is_empty() {
                *out.counts_by_function.entry(name.to_string()).or_default() += 1;
                any_count = true;
            }
        }
        out.calling += usize::from(any);
        out.counts_calling += usize::from(any_count);
        out.marking += usize::from(any || any_count);
    }
    Some(out)
}

/// `trials` pairs of disjoint sides of `per_side` indices each, drawn at
/// random (seeded) from `0..n`: the A/A comparisons of `n` boots of one
/// kernel. None when `n < 2 × per_side` or `per_side` is 0.
pub fn disjoint_sides(
    n: usize,
    per_side: usize,
    trials: usize,
    seed: u64,
) -> Option<impl Iterator<Item = (Vec<usize>, Vec<usize>)>> {
    use rand::{RngExt, SeedableRng};
    if per_side == 0 || n < 2 * per_side {
        return None;
    }
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let mut order: Vec<usize> = (0..n).collect();
    Some((0..trials).map(move |_| {
        for i in 0..2 * per_side {
            let j = rng.random_range(i..order.len());
            order.swap(i, j);
        }
        (order[..per_side].to_vec(), order[per_side..2 * per_side].to_vec())
    }))
}
