//! The differential profile: base against a variant, several boots each,
//! every function's instructions per op ranked by how much they changed,
//! with its calls, atomics and pauses per op, its share of the op, and a
//! noise threshold of its own under which a change is not called.

use std::collections::BTreeSet;

mod aa;
#[cfg(test)]
mod tests;
mod text;

pub use aa::{aa_false_calls, disjoint_sides, AaCalls};

use super::{FnPerOp, PerOp};
use crate::stats::median;

/// How the noise threshold is made.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Options {
    /// A function's change is called only if |Δ insns/op| exceeds this many
    /// times its noise (the larger per-side max−min across boots, or the
    /// A/A change and spreads when an A/A pair is given). 3 because a range
    /// of 2 or 3 boots underestimates the boot-to-boot spread of
    /// allocator- and timing-dependent functions (see the A/A check in
    /// harness/profiler/README.md).
    pub spread_factor: f64,
    /// ... and this fraction of base's whole op (instructions per op).
    /// 5e-4: the percpu allocator's free-area search sits at one of a few
    /// levels a boot (up to 0.026% of an exec apart), which 3 boots a side
    /// can take for a change; at 1e-4, 3% of A/A comparisons called one,
    /// at 5e-4 none of 2,000 (docs/profiles.md, `qemu::aa_profile`).
    pub rel_floor: f64,
    /// ... and this many instructions per op.
    pub abs_floor: f64,
    /// Boots a side needs before anything is called. 3: with 2 boots a side
    /// an A/A fork+exec profile still called 8 allocator, slab and RCU
    /// functions (README).
    pub min_boots: usize,
    /// Also require every variant boot beyond every base boot (the two
    /// sides' ranges do not overlap).
    pub separated: bool,
    /// Callers shown per function (most changed first).
    pub callers_per_row: usize,
    /// The counts rule, of its own: a function's calls, atomics or pauses
    /// per op moved (`#`) when |Δ| of the medians is at least this many per
    /// op and above `spread_factor` × that count's noise, with the boot
    /// ranges apart (if `separated`) and `min_boots` a side, whatever its
    /// instruction share. 2: a mechanism the seeds describe moves by 3 or
    /// more per op (docs/profiles.md); a count's noise between boots of one
    /// kernel is a fraction of one per op.
    pub count_floor: f64,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            spread_factor: 3.0,
            rel_floor: 5e-4,
            abs_floor: 1.0,
            min_boots: 3,
            separated: true,
            callers_per_row: 4,
            count_floor: 2.0,
        }
    }
}

/// A value across boots.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize)]
pub struct Stat {
    /// Median over boots.
    pub median: f64,
    /// Smallest boot.
    pub min: f64,
    /// Largest boot.
    pub max: f64,
}

impl Stat {
    pub(crate) fn of(xs: &[f64]) -> Stat {
        if xs.is_empty() {
            return Stat::default();
        }
        Stat {
            median: median(xs).unwrap_or(0.0),
            min: xs.iter().copied().fold(f64::INFINITY, f64::min),
            max: xs.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        }
    }

    /// max − min.
    pub fn range(&self) -> f64 {
        self.max - self.min
    }
}

/// Base and variant medians of one per-op quantity.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize)]
pub struct Pair {
    /// Base median.
    pub base: f64,
    /// Variant median.
    pub variant: f64,
}

/// One caller of a function, calls per op.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct CallerRow {
    /// Caller function or pseudo-caller.
    pub name: String,
    /// Calls per op from it.
    pub calls: Pair,
}

/// One function of the differential profile.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct DiffRow {
    /// Function or bucket.
    pub name: String,
    /// Base instructions per op across boots.
    pub base: Stat,
    /// Variant instructions per op across boots.
    pub variant: Stat,
    /// variant − base (medians), instructions per op.
    pub delta: f64,
    /// `delta` as a fraction of base's whole op.
    pub delta_of_op: f64,
    /// Share of the op's instructions (median function / median total).
    pub share: Pair,
    /// Calls per op.
    pub calls: Pair,
    /// Atomic read-modify-write instructions per op.
    pub locks: Pair,
    /// `pause` instructions per op.
    pub pauses: Pair,
    /// The noise this function's change is measured against.
    pub noise: f64,
    /// |delta| must exceed this to be called.
    pub threshold: f64,
    /// |delta| > threshold, enough boots on both sides, and (if asked) the
    /// two sides' ranges apart.
    pub called: bool,
    /// The counts that moved by the counts rule ([`Options::count_floor`]):
    /// some of `calls`, `locks`, `pauses`.
    pub moved: Vec<&'static str>,
    /// Callers, most changed first.
    pub callers: Vec<CallerRow>,
}

impl DiffRow {
    /// Called by the instruction rule or moved by the counts rule.
    pub fn marked(&self) -> bool {
        self.called || !self.moved.is_empty()
    }
}

/// A differential profile.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Diff {
    /// Boots of base.
    pub base_boots: usize,
    /// Boots of the variant.
    pub variant_boots: usize,
    /// Whether an A/A pair set the noise.
    pub aa: bool,
    /// All instructions per op.
    pub total: (Stat, Stat),
    /// Kernel instructions per op.
    pub kernel: (Stat, Stat),
    /// Every function seen on either side: the marked ones ([`DiffRow::marked`])
    /// first, then the rest, each part largest |delta| first.
    pub rows: Vec<DiffRow>,
    /// The options it was made with (the rule).
    pub options: Options,
}

fn values(boots: &[PerOp], name: &str, pick: impl Fn(&FnPerOp) -> f64) -> Vec<f64> {
    boots
        .iter()
        .map(|b| b.functions.get(name).map(&pick).unwrap_or(0.0))
        .collect()
}

pub(super) fn med(xs: &[f64]) -> f64 {
    median(xs).unwrap_or(0.0)
}

/// The differential profile of `variant` against `base` (one [`PerOp`] per
/// boot). `aa` is an optional A/A pair (two arms of boots of one kernel):
/// a function's noise is then also at least its A/A change and the A/A
/// arms' ranges.
pub fn diff(base: &[PerOp], variant: &[PerOp], aa: Option<(&[PerOp], &[PerOp])>, o: &Options) -> Diff {
    let total = |b: &[PerOp]| Stat::of(&b.iter().map(|p| p.total_insns).collect::<Vec<_>>());
    let kernel = |b: &[PerOp]| Stat::of(&b.iter().map(|p| p.kernel_insns).collect::<Vec<_>>());
    let totals = (total(base), total(variant));
    let names: BTreeSet<&String> = base.iter().chain(variant).flat_map(|p| p.functions.keys()).collect();
    let enough = base.len() >= o.min_boots && variant.len() >= o.min_boots;
    let mut rows: Vec<DiffRow> = names
        .into_iter()
        .map(|name| row(name, base, variant, aa, o, totals, enough))
        .collect();
    rows.sort_by(|x, y| {
        (y.marked().cmp(&x.marked()))
            .then(y.delta.abs().total_cmp(&x.delta.abs()))
            .then(x.name.cmp(&y.name))
    });
    Diff {
        base_boots: base.len(),
        variant_boots: variant.len(),
        aa: aa.is_some(),
        total: totals,
        kernel: (kernel(base), kernel(variant)),
        rows,
        options: o.clone(),
    }
}

/// A function's noise in one count (`pick`): the larger spread of its boots
/// on either side, and with an A/A pair also that pair's difference and
/// spreads.
pub(super) fn noise_of(
    name: &str,
    b: &Stat,
    v: &Stat,
    aa: Option<(&[PerOp], &[PerOp])>,
    pick: fn(&FnPerOp) -> f64,
) -> f64 {
    let mut noise = b.range().max(v.range());
    if let Some((a1, a2)) = aa {
        let s1 = Stat::of(&values(a1, name, pick));
        let s2 = Stat::of(&values(a2, name, pick));
        noise = noise.max((s2.median - s1.median).abs()).max(s1.range()).max(s2.range());
    }
    noise
}

/// A function's callers with their calls per op on either side, the most
/// changed first, at most `keep`.
fn callers_of(name: &str, base: &[PerOp], variant: &[PerOp], keep: usize) -> Vec<CallerRow> {
    let names: BTreeSet<&String> = base
        .iter()
        .chain(variant)
        .filter_map(|p| p.functions.get(name))
        .flat_map(|f| f.callers.keys())
        .collect();
    let side = |boots: &[PerOp], c: &str| {
        med(&boots
            .iter()
            .map(|p| {
                p.functions
                    .get(name)
                    .and_then(|f| f.callers.get(c))
                    .copied()
                    .unwrap_or(0.0)
            })
            .collect::<Vec<_>>())
    };
    let mut callers: Vec<CallerRow> = names
        .into_iter()
        .map(|c| CallerRow {
            name: c.clone(),
            calls: Pair {
                base: side(base, c),
                variant: side(variant, c),
            },
        })
        .collect();
    callers.sort_by(|x, y| {
        let d = |r: &CallerRow| (r.calls.variant - r.calls.base).abs();
        d(y).total_cmp(&d(x))
            .then(y.calls.variant.total_cmp(&x.calls.variant))
            .then(x.name.cmp(&y.name))
    });
    callers.truncate(keep);
    callers
}

/// A function's threshold, and whether its change is called: |Δ| of the
/// medians above the threshold, enough boots a side, and (if asked) the two
/// sides' ranges apart. `op` is base's median instructions per op.
pub(super) fn decide(b: &Stat, v: &Stat, noise: f64, op: f64, o: &Options, enough: bool) -> (f64, bool) {
    let threshold = (o.spread_factor * noise).max(o.rel_floor * op).max(o.abs_floor);
    let delta = v.median - b.median;
    (
        threshold,
        enough && delta.abs() > threshold && (!o.separated || v.min > b.max || v.max < b.min),
    )
}

/// Whether one count moved by the counts rule: |Δ| of the medians at least
/// the count floor and above `spread_factor` × `noise`, enough boots a
/// side, and (if asked) the two sides' ranges apart.
pub(super) fn count_moved(b: &Stat, v: &Stat, noise: f64, o: &Options, enough: bool) -> bool {
    let delta = (v.median - b.median).abs();
    enough
        && delta >= o.count_floor
        && delta > o.spread_factor * noise
        && (!o.separated || v.min > b.max || v.max < b.min)
}

/// The counts a function's boots moved by [`count_moved`].
pub(super) fn moved_counts<'a>(
    name: &str,
    base: impl Fn(fn(&FnPerOp) -> f64) -> Vec<f64> + 'a,
    variant: impl Fn(fn(&FnPerOp) -> f64) -> Vec<f64> + 'a,
    aa: Option<(&[PerOp], &[PerOp])>,
    o: &Options,
    enough: bool,
) -> Vec<&'static str> {
    COUNTS
        .iter()
        .filter(|(_, pick)| {
            let (b, v) = (Stat::of(&base(*pick)), Stat::of(&variant(*pick)));
            count_moved(&b, &v, noise_of(name, &b, &v, aa, *pick), o, enough)
        })
        .map(|(what, _)| *what)
        .collect()
}

/// Reads one count of a function.
type Pick = fn(&FnPerOp) -> f64;

/// The counts the counts rule tests.
const COUNTS: [(&str, Pick); 3] = [("calls", |f| f.calls), ("locks", |f| f.locks), ("pauses", |f| f.pauses)];

/// One function's row: its change per op against its threshold.
fn row(
    name: &str,
    base: &[PerOp],
    variant: &[PerOp],
    aa: Option<(&[PerOp], &[PerOp])>,
    o: &Options,
    (tb, tv): (Stat, Stat),
    enough: bool,
) -> DiffRow {
    let b = Stat::of(&values(base, name, |f| f.insns));
    let v = Stat::of(&values(variant, name, |f| f.insns));
    let noise = noise_of(name, &b, &v, aa, |f| f.insns);
    let (threshold, called) = decide(&b, &v, noise, tb.median, o, enough);
    let moved = moved_counts(
        name,
        |pick| values(base, name, pick),
        |pick| values(variant, name, pick),
        aa,
        o,
        enough,
    );
    let delta = v.median - b.median;
    let pair = |pick: fn(&FnPerOp) -> f64| Pair {
        base: med(&values(base, name, pick)),
        variant: med(&values(variant, name, pick)),
    };
    let share = |x: f64, of: f64| if of > 0.0 { x / of } else { 0.0 };
    DiffRow {
        name: name.to_string(),
        base: b,
        variant: v,
        delta,
        delta_of_op: share(delta, tb.median),
        share: Pair {
            base: share(b.median, tb.median),
            variant: share(v.median, tv.median),
        },
        calls: pair(|f| f.calls),
        locks: pair(|f| f.locks),
        pauses: pair(|f| f.pauses),
        noise,
        threshold,
        called,
        moved,
        callers: callers_of(name, base, variant, o.callers_per_row),
    }
}
