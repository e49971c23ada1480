//! The scaling view of a variant against base on one benchmark across a
//! run's vCPU counts: per row — the whole kernel's instructions per op,
//! the functions whose growth differs most between the two, every shared
//! lock's acquisitions per op and instructions held per acquisition, every
//! shared line's RMWs per op — each side's median over boots at each
//! count (the boot is the unit) and its growth from the smallest count to
//! the largest; and a verdict of its own, **scales worse**, **scales
//! better** or **≈**, never mixed into the rate's or the contention
//! verdict.
//!
//! The rule ([`Scaling::rule`]) takes each side's growth at its extremes:
//! the variant scales worse on a row when its growth at its least (its
//! lowest boot at the largest count minus its highest at the smallest)
//! exceeds base's at its most (its highest boot at the largest count minus
//! its lowest at the smallest) by more than the row's threshold. The
//! scheduler's and the clock's functions ([`classify`]) are shown with
//! their share of the interaction but never carry a cell's verdict, nor
//! does the whole kernel's row alone.

use std::collections::BTreeSet;

use serde::Serialize;

use super::contention::{self, Key};
use super::diff::{Pair, Stat};
use super::PerOp;

mod aa;
mod classify;
mod rows;
#[cfg(test)]
mod tests;

use rows::contention_rows;

pub use aa::{aa_false_calls, ScalingAaCalls};
pub use classify::{scheduler_function, scheduler_row, SCHEDULER_DATA, SCHEDULER_FUNCTIONS};

/// One vCPU count's boots: one [`PerOp`] a boot, each side.
#[derive(Debug, Clone)]
pub struct Count<'a> {
    /// vCPUs.
    pub vcpus: u32,
    /// Base's boots.
    pub base: Vec<&'a PerOp>,
    /// The variant's boots.
    pub variant: Vec<&'a PerOp>,
}

impl<'a> Count<'a> {
    /// Base's and the variant's boots at `vcpus`.
    pub fn of(vcpus: u32, base: &'a [PerOp], variant: &'a [PerOp]) -> Count<'a> {
        Count {
            vcpus,
            base: base.iter().collect(),
            variant: variant.iter().collect(),
        }
    }
}

/// The scaling rule's constants.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ScalingOptions {
    /// The instruction threshold: this fraction of base's whole-kernel
    /// instructions per op at the largest count (the run's threshold of
    /// `kernel_insns_per_op`, 2% unless the matrix says otherwise). The
    /// whole kernel's row is held to it; a function's also to the
    /// contention rule's `rel_floor` (10%) of its own value in base at the
    /// largest count: a function with modes a boot (`clear_page_erms` at
    /// about 124k or 129k instructions per fork-exec) fooled the rule in 2
    /// of 400 A/A draws of 3 boots a side without it (docs/profiles.md).
    pub threshold: f64,
    /// A hold row's least threshold, instructions held per acquisition:
    /// below it a hold's change is a branch or two. A hold must also move
    /// by 10% of base's and by the instruction threshold over base's
    /// acquisitions per op (the instructions held per op by the
    /// threshold): a lock taken once in a hundred ops, held for thousands
    /// of instructions that vary from boot to boot (the zone lock), fooled
    /// the rule in 46 of 400 A/A draws without it.
    pub hold_floor: f64,
    /// Functions shown besides those the rule calls: the most |interaction|.
    pub top_functions: usize,
    /// Boots an arm at the smallest and the largest count before anything
    /// is called. 3, as the instruction and contention rules.
    pub min_boots: usize,
    /// The contention rule whose floors an events row's growth must beat
    /// (0.75 per op and 10% of base's at the largest count), and whose
    /// boots a heap row needs before it is called (5 an arm).
    pub contention: contention::Options,
}

impl Default for ScalingOptions {
    fn default() -> Self {
        ScalingOptions {
            threshold: crate::config::DEFAULT_THRESHOLD,
            hold_floor: 10.0,
            top_functions: 8,
            min_boots: 3,
            contention: contention::Options::default(),
        }
    }
}

/// What a row measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Measure {
    /// The kernel's instructions per op (every kernel function).
    Kernel,
    /// A function's instructions per op.
    Function,
    /// A shared lock's acquisitions per op.
    Acquisitions,
    /// A shared lock's instructions held per measured acquisition.
    Hold,
    /// A shared line's atomic RMWs per op.
    Rmws,
}

impl Measure {
    /// Its unit in words.
    pub fn unit(self) -> &'static str {
        match self {
            Measure::Kernel | Measure::Function => "instructions per op",
            Measure::Acquisitions => "acquisitions per op",
            Measure::Hold => "instructions held per acquisition",
            Measure::Rmws => "RMWs per op",
        }
    }
}

/// What the rule makes of a row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Mark {
    /// The variant's growth beyond base's by more than the threshold.
    Worse,
    /// Base's growth beyond the variant's by more than the threshold.
    Better,
    /// Neither.
    Within,
    /// Too few boots to judge (a hold measured in too few of them).
    Unjudged,
}

/// A row at one vCPU count.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct At {
    /// vCPUs.
    pub vcpus: u32,
    /// Boots with a value, base and variant.
    pub boots: (usize, usize),
    /// Base's boots.
    pub base: Stat,
    /// The variant's.
    pub variant: Stat,
    /// Most vCPUs that wrote or took one of the row's objects in a boot,
    /// base and variant (contention rows).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub writers: Option<(u32, u32)>,
}

/// One row of the scaling view.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Row {
    /// What it measures.
    pub measure: Measure,
    /// `whole kernel`, a function, or a contention row's words ([`Key::text`]).
    pub name: String,
    /// A contention row's identity.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key: Option<Key>,
    /// Of the scheduler and timing class ([`classify`]): never carries a
    /// cell's verdict.
    pub scheduler: bool,
    /// At each vCPU count, smallest first.
    pub at: Vec<At>,
    /// Growth of the medians from the smallest count to the largest, each side.
    pub growth: Pair,
    /// The variant's growth minus base's (medians).
    pub interaction: f64,
    /// The variant's growth at its least minus base's at its most.
    pub worse_by: f64,
    /// Base's growth at its least minus the variant's at its most.
    pub better_by: f64,
    /// `worse_by` or `better_by` must exceed it.
    pub threshold: f64,
    /// What the rule makes of it.
    pub mark: Mark,
    /// A heap contention row that moved but has fewer boots an arm than a
    /// heap row is called from: shown, not called.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub held_back: bool,
}

impl Row {
    /// Whether the row may carry the cell's verdict: neither the whole
    /// kernel nor the scheduler's.
    pub fn carries(&self) -> bool {
        self.measure != Measure::Kernel && !self.scheduler
    }

    /// `harness_cpu_walk (instructions per op)`.
    pub fn text(&self) -> String {
        format!("{} ({})", self.name, self.measure.unit())
    }

    /// Its mark in text: `*` scales worse or better, `?` held back, `-`
    /// unjudged, else a space.
    pub fn symbol(&self) -> char {
        match (self.mark, self.held_back) {
            (Mark::Worse | Mark::Better, _) => '*',
            (_, true) => '?',
            (Mark::Unjudged, _) => '-',
            _ => ' ',
        }
    }
}

/// A cell's scaling verdict, of its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ScalingVerdict {
    /// A row outside the scheduler's grew beyond base's growth.
    Worse,
    /// None did and one grew less than base's.
    Better,
    /// No such row.
    Same,
    /// No verdict ([`Scaling::why`]).
    None,
}

impl ScalingVerdict {
    /// Its words in the report.
    pub fn text(self) -> &'static str {
        match self {
            ScalingVerdict::Worse => "scales worse",
            ScalingVerdict::Better => "scales better",
            ScalingVerdict::Same => "≈",
            ScalingVerdict::None => "no verdict",
        }
    }
}

/// How much of the whole kernel's interaction sits in the scheduler's and
/// the clock's functions.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct SchedulerShare {
    /// Their interactions summed, instructions per op.
    pub interaction: f64,
    /// The whole kernel's interaction.
    pub kernel: f64,
    /// The one over the other (None when the kernel's is 0).
    pub share: Option<f64>,
}

/// A cell's scaling view and verdict.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Scaling {
    /// The vCPU counts, smallest first.
    pub vcpus: Vec<u32>,
    /// The verdict.
    pub verdict: ScalingVerdict,
    /// Why there is none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
    /// The scheduler's share of the interaction.
    pub scheduler: SchedulerShare,
    /// The whole kernel, then the functions (the most |interaction| and
    /// those called), then every contention row; each part the marked first.
    pub rows: Vec<Row>,
    /// The rule in words.
    pub rule: String,
    /// Its constants.
    pub options: ScalingOptions,
}

impl Scaling {
    /// The rows that carry the verdict.
    pub fn carried(&self) -> impl Iterator<Item = &Row> {
        let want = match self.verdict {
            ScalingVerdict::Worse => Some(Mark::Worse),
            ScalingVerdict::Better => Some(Mark::Better),
            _ => None,
        };
        self.rows.iter().filter(move |r| r.carries() && Some(r.mark) == want)
    }

    /// The whole kernel's row.
    pub fn kernel(&self) -> &Row {
        &self.rows[0]
    }
}

/// The rule in words, with its constants.
pub fn rule_text(o: &ScalingOptions) -> String {
    let c = &o.contention;
    let (t, r) = (o.threshold * 100.0, c.rel_floor * 100.0);
    format!(
        "with N0 the smallest and N1 the largest vCPU count, a row scales worse when the variant's growth at its least (its lowest boot at N1 minus its highest at N0) exceeds base's growth at its most (base's highest boot at N1 minus its lowest at N0) by more than the row's threshold, and better symmetrically; thresholds: the whole kernel's instructions per op {t}% of base's at N1 (the run's threshold), a function's that and {r}% of the function's own in base at N1, acquisitions and RMWs per op {} and {r}% of base's at N1, instructions held per acquisition {} instructions, {r}% of base's at N1 and the instruction threshold over base's acquisitions per op at N1; {} boots an arm at N0 and N1, {} for a heap row; the cell's verdict is carried by a function or contention row outside the scheduler's and the clock's, never by the whole kernel alone",
        c.abs_floor,
        o.hold_floor,
        o.min_boots,
        c.heap_min_boots.max(o.min_boots)
    )
}

/// What a row is and how its value is read from a boot (None: the boot
/// has none, as a lock whose hold it did not measure).
struct Spec<'a> {
    measure: Measure,
    name: String,
    key: Option<Key>,
    scheduler: bool,
    heap: bool,
    pick: &'a dyn Fn(&PerOp) -> Option<f64>,
}

/// The row's stats at one count.
fn at(c: &Count, pick: &dyn Fn(&PerOp) -> Option<f64>) -> At {
    let side = |boots: &[&PerOp]| -> (usize, Stat) {
        let xs: Vec<f64> = boots.iter().filter_map(|p| pick(p)).collect();
        (xs.len(), Stat::of(&xs))
    };
    let ((nb, base), (nv, variant)) = (side(&c.base), side(&c.variant));
    At {
        vcpus: c.vcpus,
        boots: (nb, nv),
        base,
        variant,
        writers: None,
    }
}

/// One row: its stats at every count, its growth and its mark;
/// `threshold` from base's median at the largest count; `enough`: the
/// cell has its boots.
fn row(s: Spec, counts: &[Count], threshold: &dyn Fn(f64) -> f64, enough: bool, o: &ScalingOptions) -> Row {
    let at: Vec<At> = counts.iter().map(|c| at(c, s.pick)).collect();
    let (a, z) = (&at[0], &at[at.len() - 1]);
    let growth = Pair {
        base: z.base.median - a.base.median,
        variant: z.variant.median - a.variant.median,
    };
    let worse_by = (z.variant.min - a.variant.max) - (z.base.max - a.base.min);
    let better_by = (z.base.min - a.base.max) - (z.variant.max - a.variant.min);
    let threshold = threshold(z.base.median);
    let fewest = [a.boots.0, a.boots.1, z.boots.0, z.boots.1]
        .into_iter()
        .min()
        .unwrap_or(0);
    let (mark, held_back) = mark(worse_by, better_by, threshold, fewest, s.heap, enough, o);
    Row {
        measure: s.measure,
        name: s.name,
        key: s.key,
        scheduler: s.scheduler,
        growth,
        interaction: growth.variant - growth.base,
        worse_by,
        better_by,
        threshold,
        mark,
        held_back,
        at,
    }
}

/// The rule on one row: its mark, and whether it is held back (a heap row
/// that moved with fewer boots an arm than a heap row is called from).
fn mark(
    worse_by: f64,
    better_by: f64,
    thr: f64,
    fewest: usize,
    heap: bool,
    enough: bool,
    o: &ScalingOptions,
) -> (Mark, bool) {
    if !enough || fewest < o.min_boots {
        return (Mark::Unjudged, false);
    }
    let moved = match (worse_by > thr, better_by > thr) {
        (true, _) => Mark::Worse,
        (false, true) => Mark::Better,
        _ => return (Mark::Within, false),
    };
    match heap && fewest < o.contention.heap_min_boots.max(o.min_boots) {
        true => (Mark::Within, true),
        false => (moved, false),
    }
}

/// Why the counts give no verdict: fewer than two, or too few boots an
/// arm at the smallest or the largest.
fn too_few(counts: &[Count], o: &ScalingOptions) -> Option<String> {
    if counts.len() < 2 {
        return Some("one vCPU count: a scaling view needs two or more".into());
    }
    let mut short = Vec::new();
    for c in [&counts[0], &counts[counts.len() - 1]] {
        for (arm, n) in [("base", c.base.len()), ("the variant", c.variant.len())] {
            if n < o.min_boots {
                short.push(format!("{arm} has {n} at {} vCPUs", c.vcpus));
            }
        }
    }
    (!short.is_empty()).then(|| {
        format!(
            "too few boots: {} ({} an arm at the smallest and the largest count)",
            short.join(", "),
            o.min_boots
        )
    })
}

/// The scaling view of the variant against base over `counts` (any order).
pub fn scaling(counts: &[Count], o: &ScalingOptions) -> Scaling {
    let mut counts = counts.to_vec();
    counts.sort_by_key(|c| c.vcpus);
    let why = too_few(&counts, o);
    let enough = why.is_none();
    let op = counts.last().map_or(0.0, |c| {
        Stat::of(&c.base.iter().map(|p| p.kernel_insns).collect::<Vec<_>>()).median
    });
    let insns = o.threshold * op;
    let own = |base: f64| insns.max(o.contention.rel_floor * base);
    let kernel = Spec {
        measure: Measure::Kernel,
        name: "whole kernel".into(),
        key: None,
        scheduler: false,
        heap: false,
        pick: &|p: &PerOp| Some(p.kernel_insns),
    };
    let kernel = row(kernel, &counts, &|_| insns, enough, o);
    let functions = function_rows(&counts, &own, enough, o);
    let sched: f64 = functions.iter().filter(|r| r.scheduler).map(|r| r.interaction).sum();
    let mut rows = vec![kernel];
    rows.extend(shown_functions(functions, o.top_functions));
    rows.extend(contention_rows(&counts, insns, enough, o));
    let any = |m: Mark| rows.iter().any(|r| r.carries() && r.mark == m);
    let verdict = match (enough, any(Mark::Worse), any(Mark::Better)) {
        (false, _, _) => ScalingVerdict::None,
        (true, true, _) => ScalingVerdict::Worse,
        (true, false, true) => ScalingVerdict::Better,
        _ => ScalingVerdict::Same,
    };
    let k = rows[0].interaction;
    Scaling {
        vcpus: counts.iter().map(|c| c.vcpus).collect(),
        verdict,
        why,
        scheduler: SchedulerShare {
            interaction: sched,
            kernel: k,
            share: (k != 0.0).then(|| sched / k),
        },
        rows,
        rule: rule_text(o),
        options: o.clone(),
    }
}

/// Every kernel function's row (buckets such as `[user]` left out).
fn function_rows(counts: &[Count], threshold: &dyn Fn(f64) -> f64, enough: bool, o: &ScalingOptions) -> Vec<Row> {
    let names: BTreeSet<&String> = counts
        .iter()
        .flat_map(|c| c.base.iter().chain(&c.variant))
        .flat_map(|p| p.functions.keys())
        .filter(|n| !n.starts_with('['))
        .collect();
    names
        .into_iter()
        .map(|name| {
            let pick = |p: &PerOp| Some(p.functions.get(name).map_or(0.0, |f| f.insns));
            let s = Spec {
                measure: Measure::Function,
                name: name.clone(),
                key: None,
                scheduler: scheduler_function(name),
                heap: false,
                pick: &pick,
            };
            row(s, counts, threshold, enough, o)
        })
        .collect()
}

/// The functions shown: the `top` of most |interaction| and every one the
/// rule marked; the marked first, then by |interaction|.
fn shown_functions(mut rows: Vec<Row>, top: usize) -> Vec<Row> {
    rows.sort_by(|x, y| {
        y.interaction
            .abs()
            .total_cmp(&x.interaction.abs())
            .then(x.name.cmp(&y.name))
    });
    let marked = |r: &Row| matches!(r.mark, Mark::Worse | Mark::Better) || r.held_back;
    let mut kept: Vec<Row> = rows
        .into_iter()
        .enumerate()
        .filter(|(i, r)| *i < top || marked(r))
        .map(|(_, r)| r)
        .collect();
    kept.sort_by_key(|r| !marked(r));
    kept
}
