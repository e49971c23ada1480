//! The differential profile: base against a variant, several boots each,
//! every function's instructions per op ranked by how much they changed,
//! with its calls, atomics and pauses per op, its share of the op, and a
//! noise threshold of its own under which a change is not called.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

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
pub struct Row {
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
    /// Callers, most changed first.
    pub callers: Vec<CallerRow>,
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
    /// Every function seen on either side, largest |delta| first.
    pub rows: Vec<Row>,
    /// The options it was made with (the rule).
    pub options: Options,
}

fn values(boots: &[PerOp], name: &str, pick: impl Fn(&FnPerOp) -> f64) -> Vec<f64> {
    boots
        .iter()
        .map(|b| b.functions.get(name).map(&pick).unwrap_or(0.0))
        .collect()
}

fn med(xs: &[f64]) -> f64 {
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
    let mut rows: Vec<Row> = names
        .into_iter()
        .map(|name| row(name, base, variant, aa, o, totals, enough))
        .collect();
    rows.sort_by(|x, y| y.delta.abs().total_cmp(&x.delta.abs()).then(x.name.cmp(&y.name)));
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

/// A function's noise: the larger spread of its boots on either side, and
/// with an A/A pair also that pair's difference and spreads.
fn noise_of(name: &str, b: &Stat, v: &Stat, aa: Option<(&[PerOp], &[PerOp])>) -> f64 {
    let mut noise = b.range().max(v.range());
    if let Some((a1, a2)) = aa {
        let s1 = Stat::of(&values(a1, name, |f| f.insns));
        let s2 = Stat::of(&values(a2, name, |f| f.insns));
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
fn decide(b: &Stat, v: &Stat, noise: f64, op: f64, o: &Options, enough: bool) -> (f64, bool) {
    let threshold = (o.spread_factor * noise).max(o.rel_floor * op).max(o.abs_floor);
    let delta = v.median - b.median;
    (
        threshold,
        enough && delta.abs() > threshold && (!o.separated || v.min > b.max || v.max < b.min),
    )
}

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
}

/// The rule's A/A false calls: `trials` times, two disjoint sides of
/// `per_side` boots drawn at random from `boots` (all of one kernel, one
/// benchmark, one vCPU count) are compared as base and variant, seeded.
/// None when there are fewer than `2 × per_side` boots.
pub fn aa_false_calls(boots: &[PerOp], per_side: usize, trials: usize, seed: u64, o: &Options) -> Option<AaCalls> {
    use rand::{RngExt, SeedableRng};
    if per_side == 0 || boots.len() < 2 * per_side {
        return None;
    }
    let names: BTreeSet<&String> = boots.iter().flat_map(|p| p.functions.keys()).collect();
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let mut order: Vec<usize> = (0..boots.len()).collect();
    let mut out = AaCalls {
        trials,
        per_side,
        calling: 0,
        by_function: BTreeMap::new(),
    };
    for _ in 0..trials {
        for i in 0..2 * per_side {
            let j = rng.random_range(i..order.len());
            order.swap(i, j);
        }
        let (b, v): (Vec<&PerOp>, Vec<&PerOp>) = (
            order[..per_side].iter().map(|&i| &boots[i]).collect(),
            order[per_side..2 * per_side].iter().map(|&i| &boots[i]).collect(),
        );
        let op = med(&b.iter().map(|p| p.total_insns).collect::<Vec<_>>());
        let of = |side: &[&PerOp], name: &str| {
            Stat::of(
                &side
                    .iter()
                    .map(|p| p.functions.get(name).map_or(0.0, |f| f.insns))
                    .collect::<Vec<_>>(),
            )
        };
        let mut any = false;
        for name in &names {
            let (sb, sv) = (of(&b, name), of(&v, name));
            if decide(&sb, &sv, noise_of(name, &sb, &sv, None), op, o, per_side >= o.min_boots).1 {
                *out.by_function.entry(name.to_string()).or_default() += 1;
                any = true;
            }
        }
        out.calling += usize::from(any);
    }
    Some(out)
}

/// One function's row: its change per op against its threshold.
fn row(
    name: &str,
    base: &[PerOp],
    variant: &[PerOp],
    aa: Option<(&[PerOp], &[PerOp])>,
    o: &Options,
    (tb, tv): (Stat, Stat),
    enough: bool,
) -> Row {
    let b = Stat::of(&values(base, name, |f| f.insns));
    let v = Stat::of(&values(variant, name, |f| f.insns));
    let noise = noise_of(name, &b, &v, aa);
    let (threshold, called) = decide(&b, &v, noise, tb.median, o, enough);
    let delta = v.median - b.median;
    let pair = |pick: fn(&FnPerOp) -> f64| Pair {
        base: med(&values(base, name, pick)),
        variant: med(&values(variant, name, pick)),
    };
    let share = |x: f64, of: f64| if of > 0.0 { x / of } else { 0.0 };
    Row {
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
        callers: callers_of(name, base, variant, o.callers_per_row),
    }
}

fn short(x: f64) -> String {
    let a = x.abs();
    if a == 0.0 {
        "0".into()
    } else if a >= 100.0 {
        format!("{x:.0}")
    } else if a >= 1.0 {
        format!("{x:.2}")
    } else {
        format!("{x:.4}")
    }
}

impl Diff {
    /// A plain-text table of the first `limit` rows (called rows marked `*`),
    /// each followed by its changed callers.
    pub fn text(&self, limit: usize) -> String {
        let mut out = self.heading();
        for r in self.rows.iter().take(limit) {
            row_text(&mut out, r);
        }
        out
    }

    /// The whole op's line, the rule's line and the column names.
    fn heading(&self) -> String {
        let (tb, tv) = self.total;
        let (kb, kv) = self.kernel;
        let o = &self.options;
        let mut out = format!(
            "instructions per op: total {} -> {} ({:+.3}%), kernel {} -> {}; boots {} base, {} variant; noise from {}\n",
            short(tb.median),
            short(tv.median),
            if tb.median > 0.0 { (tv.median / tb.median - 1.0) * 100.0 } else { 0.0 },
            short(kb.median),
            short(kv.median),
            self.base_boots,
            self.variant_boots,
            if self.aa { "A/A and boot ranges" } else { "boot ranges (max-min)" }
        );
        let _ = writeln!(
            out,
            "* called: |delta| > max({} x noise, {} x base op, {} insn/op){}, >= {} boots a side",
            o.spread_factor,
            o.rel_floor,
            o.abs_floor,
            if o.separated { ", boot ranges apart" } else { "" },
            o.min_boots
        );
        let _ = writeln!(
            out,
            "  {:<40} {:>12} {:>12} {:>11} {:>8} {:>15} {:>19} {:>15} {:>15} {:>9}",
            "function",
            "base ins/op",
            "var ins/op",
            "delta",
            "d%op",
            "share",
            "calls/op",
            "locks/op",
            "pauses/op",
            "threshold"
        );
        out
    }
}

/// One function's line of [`Diff::text`] and its changed callers' lines.
fn row_text(out: &mut String, r: &Row) {
    let pair = |p: &Pair| format!("{}>{}", short(p.base), short(p.variant));
    let _ = writeln!(
        out,
        "{} {:<40} {:>12} {:>12} {:>11} {:>7.3}% {:>15} {:>19} {:>15} {:>15} {:>9}",
        if r.called { '*' } else { ' ' },
        r.name,
        short(r.base.median),
        short(r.variant.median),
        format!("{:+}", short(r.delta)).replace("+-", "-"),
        r.delta_of_op * 100.0,
        format!("{:.2}%>{:.2}%", r.share.base * 100.0, r.share.variant * 100.0),
        pair(&r.calls),
        pair(&r.locks),
        pair(&r.pauses),
        short(r.threshold)
    );
    for c in r.callers.iter().filter(|c| c.calls.base != c.calls.variant) {
        let _ = writeln!(out, "      from {:<34} calls/op {}", c.name, pair(&c.calls));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (name, insns/op, calls/op, callers) of one function in a test boot.
    type FnRow<'a> = (&'a str, f64, f64, &'a [(&'a str, f64)]);
    /// base boots, variant boots, A/A arms, options, expected threshold, expected called.
    type Case = (Vec<f64>, Vec<f64>, Option<(Vec<f64>, Vec<f64>)>, Options, f64, bool);

    /// A boot: total insns/op and its function rows.
    fn boot(total: f64, fs: &[FnRow]) -> PerOp {
        let functions: BTreeMap<String, FnPerOp> = fs
            .iter()
            .map(|(n, i, c, callers)| {
                let callers = callers.iter().map(|(k, v)| (k.to_string(), *v)).collect();
                (
                    n.to_string(),
                    FnPerOp {
                        insns: *i,
                        calls: *c,
                        locks: 0.0,
                        pauses: 0.0,
                        callers,
                    },
                )
            })
            .collect();
        let kernel = fs.iter().filter(|f| !f.0.starts_with('[')).map(|f| f.1).sum();
        PerOp {
            ops: 1000.0,
            total_insns: total,
            kernel_insns: kernel,
            functions,
        }
    }

    #[test]
    fn ranks_and_calls_only_above_each_functions_threshold() {
        // f_big: large and noisy (range 300), changes by +200: not called
        // f_small: quiet (range 2), changes by +60: called
        // f_new: only in the variant, +80: called
        // f_same: identical: not called
        let base = vec![
            boot(
                100_000.0,
                &[
                    ("f_big", 50_000.0, 10.0, &[]),
                    ("f_small", 100.0, 2.0, &[("g", 2.0)]),
                    ("f_same", 10.0, 1.0, &[]),
                ],
            ),
            boot(
                100_100.0,
                &[
                    ("f_big", 50_300.0, 10.0, &[]),
                    ("f_small", 102.0, 2.0, &[("g", 2.0)]),
                    ("f_same", 10.0, 1.0, &[]),
                ],
            ),
            boot(
                100_050.0,
                &[
                    ("f_big", 50_150.0, 10.0, &[]),
                    ("f_small", 101.0, 2.0, &[("g", 2.0)]),
                    ("f_same", 10.0, 1.0, &[]),
                ],
            ),
        ];
        let variant = vec![
            boot(
                100_300.0,
                &[
                    ("f_big", 50_350.0, 10.0, &[]),
                    ("f_small", 161.0, 3.0, &[("g", 2.0), ("h", 1.0)]),
                    ("f_new", 80.0, 1.0, &[]),
                    ("f_same", 10.0, 1.0, &[]),
                ],
            ),
            boot(
                100_280.0,
                &[
                    ("f_big", 50_200.0, 10.0, &[]),
                    ("f_small", 160.0, 3.0, &[("g", 2.0), ("h", 1.0)]),
                    ("f_new", 80.0, 1.0, &[]),
                    ("f_same", 10.0, 1.0, &[]),
                ],
            ),
            boot(
                100_310.0,
                &[
                    ("f_big", 50_500.0, 10.0, &[]),
                    ("f_small", 162.0, 3.0, &[("g", 2.0), ("h", 1.0)]),
                    ("f_new", 80.0, 1.0, &[]),
                    ("f_same", 10.0, 1.0, &[]),
                ],
            ),
        ];
        let d = diff(&base, &variant, None, &Options::default());
        let got: Vec<(&str, f64, bool)> = d.rows.iter().map(|r| (r.name.as_str(), r.delta, r.called)).collect();
        assert_eq!(
            got,
            vec![
                ("f_big", 200.0, false),
                ("f_new", 80.0, true),
                ("f_small", 60.0, true),
                ("f_same", 0.0, false)
            ]
        );
        let small = &d.rows[2];
        assert_eq!(small.noise, 2.0);
        assert!((small.threshold - 50.025).abs() < 1e-9, "{}", small.threshold); // the 5e-4 floor of the op (100050 insns) beats 3 x 2
        assert_eq!(
            small.calls,
            Pair {
                base: 2.0,
                variant: 3.0
            }
        );
        assert_eq!(
            small.callers[0],
            CallerRow {
                name: "h".into(),
                calls: Pair {
                    base: 0.0,
                    variant: 1.0
                }
            }
        );
        assert!((small.delta_of_op - 60.0 / 100_050.0).abs() < 1e-12);
        assert!((small.share.base - 101.0 / 100_050.0).abs() < 1e-12);
        let big = &d.rows[0];
        assert_eq!(big.noise, 300.0);
        assert_eq!(d.total.0.median, 100_050.0);
        let text = d.text(10);
        assert!(text.contains("* f_small"), "{text}");
        assert!(text.contains("from h"), "{text}");
        assert!(!text.contains("* f_big"), "{text}");
    }

    #[test]
    fn thresholds_table() {
        // (base boots, variant boots, aa (arm1, arm2) values, options) -> (threshold, called)
        let one = |x: f64| boot(10_000.0, &[("f", x, 1.0, &[])]);
        let two = Options {
            min_boots: 2,
            ..Options::default()
        };
        let cases: Vec<Case> = vec![
            // identical boots: only the floors: max(5e-4*10000=5, 1) = 5
            (vec![100.0, 100.0], vec![106.0, 106.0], None, two.clone(), 5.0, true),
            (vec![100.0, 100.0], vec![104.0, 104.0], None, two.clone(), 5.0, false),
            (
                vec![100.0, 100.0],
                vec![102.0, 102.0],
                None,
                Options {
                    rel_floor: 1e-4,
                    ..two.clone()
                },
                1.0,
                true,
            ),
            // ... but not with fewer boots than the default asks
            (
                vec![100.0, 100.0],
                vec![106.0, 106.0],
                None,
                Options::default(),
                5.0,
                false,
            ),
            (
                vec![100.0, 100.0, 100.0],
                vec![106.0, 106.0, 106.0],
                None,
                Options::default(),
                5.0,
                true,
            ),
            // a single boot per side is never called
            (
                vec![100.0],
                vec![200.0],
                None,
                Options {
                    min_boots: 1,
                    ..two.clone()
                },
                5.0,
                true,
            ),
            (vec![100.0], vec![200.0], None, two.clone(), 5.0, false),
            // variant spread counts as noise too (3 x 8)
            (vec![100.0, 100.0], vec![102.0, 110.0], None, two.clone(), 24.0, false),
            // an A/A pair that moved by 5 raises the threshold (3 x 5)
            (
                vec![100.0, 100.0],
                vec![116.0, 116.0],
                Some((vec![100.0, 100.0], vec![105.0, 105.0])),
                two.clone(),
                15.0,
                true,
            ),
            (
                vec![100.0, 100.0],
                vec![114.0, 114.0],
                Some((vec![100.0, 100.0], vec![105.0, 105.0])),
                two.clone(),
                15.0,
                false,
            ),
            // a factor of 1
            (
                vec![100.0, 108.0],
                vec![113.0, 113.0],
                None,
                Options {
                    spread_factor: 1.0,
                    ..two.clone()
                },
                8.0,
                true,
            ),
            // above the threshold, but the ranges overlap
            (
                vec![100.0, 110.0],
                vec![108.0, 125.0],
                None,
                Options {
                    spread_factor: 0.5,
                    ..two.clone()
                },
                8.5,
                false,
            ),
            (
                vec![100.0, 110.0],
                vec![108.0, 125.0],
                None,
                Options {
                    spread_factor: 0.5,
                    separated: false,
                    ..two.clone()
                },
                8.5,
                true,
            ),
        ];
        for (b, v, aa, o, threshold, called) in cases {
            let b: Vec<PerOp> = b.into_iter().map(one).collect();
            let v: Vec<PerOp> = v.into_iter().map(one).collect();
            let aa: Option<(Vec<PerOp>, Vec<PerOp>)> =
                aa.map(|(x, y)| (x.into_iter().map(one).collect(), y.into_iter().map(one).collect()));
            let d = diff(&b, &v, aa.as_ref().map(|(x, y)| (x.as_slice(), y.as_slice())), &o);
            let r = &d.rows[0];
            assert_eq!((r.threshold, r.called), (threshold, called), "{b:?} {v:?}");
        }
    }

    /// Boots of one kernel whose `bits` function sits in one of two modes
    /// (100 or 160 insns/op, as a bitmap search does by where the last
    /// allocations left it), boot `i` in the high mode when bit `i` of
    /// `modes` is set, and a `steady` function that never moves.
    fn two_mode_boots(n: usize, modes: u64) -> Vec<PerOp> {
        (0..n)
            .map(|i| {
                boot(
                    400_000.0,
                    &[
                        ("bits", if modes >> i & 1 == 1 { 160.0 } else { 100.0 }, 5.0, &[]),
                        ("steady", 2000.0, 1.0, &[]),
                    ],
                )
            })
            .collect()
    }

    /// A mode jump looks like a change to 3 boots a side: the rule calls it
    /// in the A/A comparisons that put each side in one mode, unless the
    /// floor of the op is above the jump; the steady function is never
    /// called, and the draws repeat with the seed.
    #[test]
    fn aa_false_calls_count_the_comparisons_a_mode_jump_fools() {
        let boots = two_mode_boots(12, 0b1010_0110_1001);
        let low = Options {
            rel_floor: 1e-4,
            ..Options::default()
        };
        let a = aa_false_calls(&boots, 3, 500, 7, &low).unwrap();
        // P(one side all low, the other all high) ≈ 2 · (6/12·5/11·4/10) · (6/9·5/8·4/7) ≈ 0.04
        assert!((5..=50).contains(&a.calling), "{a:?}");
        assert_eq!(a.by_function.keys().collect::<Vec<_>>(), vec!["bits"], "{a:?}");
        assert_eq!(a, aa_false_calls(&boots, 3, 500, 7, &low).unwrap());
        // 60 insns is 0.015% of the op: a floor of 0.02% calls nothing
        let floor = aa_false_calls(
            &boots,
            3,
            500,
            7,
            &Options {
                rel_floor: 2e-4,
                ..Options::default()
            },
        )
        .unwrap();
        assert_eq!(floor.calling, 0, "{floor:?}");
        assert_eq!(
            aa_false_calls(&boots, 2, 100, 7, &low).unwrap().calling,
            0,
            "under min_boots nothing is called"
        );
        assert!(
            aa_false_calls(&boots, 7, 10, 7, &low).is_none(),
            "12 boots cannot make two sides of 7"
        );
    }

    #[test]
    fn from_profile_files_end_to_end() {
        let text = |insns: u64| {
            format!(
                "harness-profile 1\nmode marker\nwindows 1\nunclosed 0\nops 0 missing 1\nvcpus 2\ncallers static top 8\n\
                 total {} 0 0 0\nkernel {insns} 100 0 0\nf do_x {insns} 100 0 0\nc [indirect] 100\nf [user] 1000 0 0 0\n",
                insns + 1000
            )
        };
        let per = |insns| super::super::parse(&text(insns)).unwrap().per_op(Some(100)).unwrap();
        let d = diff(
            &[per(5000), per(5002), per(5001)],
            &[per(6000), per(6004), per(6002)],
            None,
            &Options::default(),
        );
        assert_eq!(d.rows[0].name, "do_x");
        assert!((d.rows[0].delta - 10.01).abs() < 1e-9, "{}", d.rows[0].delta);
        assert!(d.rows[0].called);
        assert_eq!(
            d.rows[0].calls,
            Pair {
                base: 1.0,
                variant: 1.0
            }
        );
        assert_eq!(d.rows[1].name, "[user]");
        assert!(!d.rows[1].called);
    }
}
