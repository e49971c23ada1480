//! The contention profile: what the profiler plugin counts with
//! `contention=on` (its README, "Contention"): the cache lines that two or
//! more vCPUs wrote with atomic read-modify-writes (RMWs) in a window, or
//! that lie in the kernel image's static data, and the locks two or more
//! vCPUs took, or static ones, each named (`tasklist_lock+0x0`, or a heap
//! object by the function that wrote or took it); then per op, and base
//! against a variant over several boots with a verdict of its own:
//! **more contention**, **less contention** or **≈**.
//!
//! The counts are exact and deterministic under the instruction-counting
//! clock given the guest's path (one vCPU runs at a time; a line's class is
//! decided from the set of its writers, not from who wrote it last), but a
//! guest's path differs between boots (which CPU a task runs on, timer
//! work), so a row is called only beyond its spread across boots of one
//! kernel, as the instruction profile's functions are.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use super::diff::{med, Pair, Stat};

/// What a row counts.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Object {
    /// Cache lines: RMWs on them.
    Line,
    /// Locks of a kind (`spin`, `read`, `write`, `rwsem_read`,
    /// `rwsem_write`, `mutex`): acquisitions.
    Lock(String),
}

/// Why a row's lines or locks are shared.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Class {
    /// In the kernel image's static data (whatever this run's writers).
    Static,
    /// Elsewhere, written or taken by two or more vCPUs in the window.
    Heap,
}

/// A row's identity: what, why shared, and its name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct Key {
    /// Lines or locks.
    pub object: Object,
    /// Static or heap.
    pub class: Class,
    /// `symbol+0xOFF` (static) or the function that wrote or took it (heap).
    pub name: String,
}

impl Key {
    /// The row in words: `line counter_x+0x0`, `write lock tasklist_lock+0x0`,
    /// `heap line via copy_process`, `heap rwsem_write lock via unlink_file_vma_batch_process`.
    pub fn text(&self) -> String {
        let what = match &self.object {
            Object::Line => "line".to_string(),
            Object::Lock(k) => format!("{k} lock"),
        };
        match self.class {
            Class::Static => format!("{what} {}", self.name),
            Class::Heap => format!("heap {what} via {}", self.name),
        }
    }

    /// What one event of the row is, per op: `shared-line RMW` or
    /// `shared-lock acquisition`.
    pub fn event(&self) -> &'static str {
        match self.object {
            Object::Line => "shared-line RMW",
            Object::Lock(_) => "shared-lock acquisition",
        }
    }
}

/// One row of a window's contention counts.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ContentionRow {
    /// Distinct lines or locks folded into it.
    pub objects: u64,
    /// Most vCPUs that wrote or took one of them.
    pub writers: u32,
    /// RMWs (lines) or acquisitions (locks).
    pub events: u64,
    /// Holds measured (locks whose release function is watched).
    pub holds: u64,
    /// Their instructions.
    pub hold_insns: u64,
    /// The functions that did the RMWs or took the lock.
    pub funcs: BTreeMap<String, u64>,
}

/// A profile's contention counts (`x` lines).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Contention {
    /// Lock functions watched: acquire, release, and the kinds whose hold
    /// is measured.
    pub watch: (u64, u64, String),
    /// vCPUs that did an RMW or took a lock in the window (the most over
    /// summed windows).
    pub vcpus: u32,
    /// RMWs, of which on shared lines.
    pub rmws: (u64, u64),
    /// Lines written by RMWs, of which shared.
    pub lines: (u64, u64),
    /// Acquisitions, of which of shared locks.
    pub acqs: (u64, u64),
    /// Locks taken, of which shared.
    pub locks: (u64, u64),
    /// Holds measured, and not measured (another vCPU ran in between).
    pub holds: (u64, u64),
    /// Rows by key.
    pub rows: BTreeMap<Key, ContentionRow>,
    /// The row the last `xf` line belongs to.
    last: Option<Key>,
}

impl Contention {
    /// Adds another window's counts.
    pub fn add(&mut self, o: &Contention) {
        let add2 = |a: &mut (u64, u64), b: (u64, u64)| {
            a.0 += b.0;
            a.1 += b.1;
        };
        self.watch = o.watch.clone();
        self.vcpus = self.vcpus.max(o.vcpus);
        add2(&mut self.rmws, o.rmws);
        add2(&mut self.lines, o.lines);
        add2(&mut self.acqs, o.acqs);
        add2(&mut self.locks, o.locks);
        add2(&mut self.holds, o.holds);
        for (k, r) in &o.rows {
            let e = self.rows.entry(k.clone()).or_default();
            e.objects = e.objects.max(r.objects);
            e.writers = e.writers.max(r.writers);
            e.events += r.events;
            e.holds += r.holds;
            e.hold_insns += r.hold_insns;
            for (f, c) in &r.funcs {
                *e.funcs.entry(f.clone()).or_insert(0) += c;
            }
        }
    }

    /// Per op of `ops` operations.
    pub fn per_op(&self, ops: f64) -> PerOp {
        PerOp {
            vcpus: self.vcpus,
            shared_rmws: self.rmws.1 as f64 / ops,
            shared_acqs: self.acqs.1 as f64 / ops,
            rows: self
                .rows
                .iter()
                .map(|(k, r)| {
                    let per = RowPerOp {
                        events: r.events as f64 / ops,
                        objects: r.objects,
                        writers: r.writers,
                        hold: (r.holds > 0).then(|| r.hold_insns as f64 / r.holds as f64),
                        funcs: r.funcs.iter().map(|(f, c)| (f.clone(), *c as f64 / ops)).collect(),
                    };
                    (k.clone(), per)
                })
                .collect(),
        }
    }
}

/// One row per op.
#[derive(Debug, Clone, PartialEq)]
pub struct RowPerOp {
    /// RMWs or acquisitions per op.
    pub events: f64,
    /// Distinct lines or locks folded into the row.
    pub objects: u64,
    /// Most vCPUs that wrote or took one of its objects.
    pub writers: u32,
    /// Instructions held per measured hold.
    pub hold: Option<f64>,
    /// Per op by function.
    pub funcs: BTreeMap<String, f64>,
}

/// One boot's contention counts per op.
#[derive(Debug, Clone, PartialEq)]
pub struct PerOp {
    /// vCPUs that did an RMW or took a lock in its windows.
    pub vcpus: u32,
    /// RMWs on shared lines per op.
    pub shared_rmws: f64,
    /// Acquisitions of shared locks per op.
    pub shared_acqs: f64,
    /// Rows.
    pub rows: BTreeMap<Key, RowPerOp>,
}

/// The contention verdict of a cell, of its own: never mixed into the
/// rate's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// A row rose beyond its noise: more RMWs on shared lines or more
    /// acquisitions of shared locks per op.
    More,
    /// None rose and one fell.
    Less,
    /// No row moved beyond its noise.
    Same,
}

impl Verdict {
    /// Its words in the report.
    pub fn text(self) -> &'static str {
        match self {
            Verdict::More => "more contention",
            Verdict::Less => "less contention",
            Verdict::Same => "≈",
        }
    }
}

/// One row of the differential contention profile.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DiffRow {
    /// The row.
    pub key: Key,
    /// In words ([`Key::text`]).
    pub text: String,
    /// Base's events per op across boots.
    pub base: Stat,
    /// The variant's.
    pub variant: Stat,
    /// variant − base (medians).
    pub delta: f64,
    /// The median of both sides' boots together: the row's value where its
    /// change is not called (the model takes it for both sides).
    pub pooled: f64,
    /// |delta| must exceed it.
    pub threshold: f64,
    /// Moved beyond its noise.
    pub called: bool,
    /// A heap row that moved beyond its noise, shown but not called: too
    /// few boots a side for a heap row ([`Options::heap_min_boots`]).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub held_back: bool,
    /// Most vCPUs that wrote or took one of its objects, either side.
    pub writers: u32,
    /// Most distinct lines or locks folded into the row in a boot, either
    /// side (a heap row folds every object its function wrote or took).
    pub objects: u64,
    /// Instructions held per acquisition (medians of boots that measured
    /// one), locks only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hold: Option<Pair>,
    /// Per op by function, the most changed first (at most 4).
    pub funcs: Vec<(String, Pair)>,
}

impl DiffRow {
    /// Its mark in text: `*` called, `?` held back, else a space.
    pub fn mark(&self) -> char {
        match (self.called, self.held_back) {
            (true, _) => '*',
            (false, true) => '?',
            _ => ' ',
        }
    }
}

/// A cell's differential contention profile and verdict.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Diff {
    /// Its verdict.
    pub verdict: Verdict,
    /// Boots a side.
    pub boots: (usize, usize),
    /// Fewest vCPUs that did an RMW or took a lock in a boot's windows, a
    /// side: fewer than the cell's vCPUs means a window too short for every
    /// vCPU to run.
    pub vcpus: (u32, u32),
    /// RMWs on shared lines per op, each side.
    pub shared_rmws: (Stat, Stat),
    /// Acquisitions of shared locks per op, each side.
    pub shared_acqs: (Stat, Stat),
    /// Rows whose counts differ between boots of one kernel (either side).
    pub varying: usize,
    /// Rows: the called ones first, then those held back, then the rest;
    /// each part largest |Δ| first.
    pub rows: Vec<DiffRow>,
    /// The rule.
    pub options: Options,
}

impl Diff {
    /// A note when a boot's windows saw fewer of the cell's `vcpus` do an
    /// RMW or take a lock: a window too short for every vCPU to run, whose
    /// lines may look private that are not.
    pub fn short_of(&self, vcpus: u32) -> Option<String> {
        let fewest = self.vcpus.0.min(self.vcpus.1);
        (fewest < vcpus).then(|| {
            format!(
                "    only {fewest} of {vcpus} vCPUs did an atomic or took a lock in some boot's windows: a window too short for every vCPU to run, whose lines may look private that are not"
            )
        })
    }

    /// A note when heap rows moved beyond their noise but were held back:
    /// fewer boots a side than a heap row is called at.
    pub fn held_back(&self) -> Option<String> {
        let n = self.rows.iter().filter(|r| r.held_back).count();
        (n > 0).then(|| {
            format!(
                "    {n} heap row(s) (marked ?) moved beyond their spread but are not called: a heap row's counts follow where the scheduler puts tasks, and it is called from {} boots a side (this cell has {})",
                self.options.heap_min_boots,
                self.boots.0.min(self.boots.1)
            )
        })
    }

    /// The called rows.
    pub fn called(&self) -> impl Iterator<Item = &DiffRow> {
        self.rows.iter().filter(|r| r.called)
    }

    /// The verdict with the rows that carry it, in a line:
    /// `more contention: +1.00 shared-line RMW per op on line counter_x+0x0 (copy_process)`.
    pub fn summary(&self, rows: usize) -> String {
        let carried: Vec<String> = self
            .called()
            .take(rows)
            .map(|r| {
                let by = r.funcs.first().map(|(f, _)| format!(" ({f})")).unwrap_or_default();
                format!("{:+.2} {} per op on {}{by}", r.delta, r.key.event(), r.text)
            })
            .collect();
        let more = self.called().count().saturating_sub(rows);
        match carried.is_empty() {
            true => self.verdict.text().to_string(),
            false if more > 0 => format!("{}: {}; {more} more", self.verdict.text(), carried.join("; ")),
            false => format!("{}: {}", self.verdict.text(), carried.join("; ")),
        }
    }
}

fn stat(boots: &[PerOp], pick: impl Fn(&PerOp) -> f64) -> Stat {
    Stat::of(&boots.iter().map(pick).collect::<Vec<_>>())
}

fn row_events(boots: &[PerOp], k: &Key) -> Vec<f64> {
    boots.iter().map(|b| b.rows.get(k).map_or(0.0, |r| r.events)).collect()
}

/// Base against the variant, one [`PerOp`] per boot a side.
pub fn diff(base: &[PerOp], variant: &[PerOp], o: &Options) -> Diff {
    let keys: BTreeSet<&Key> = base.iter().chain(variant).flat_map(|b| b.rows.keys()).collect();
    let fewest = base.len().min(variant.len());
    let mut varying = 0;
    let mut rows: Vec<DiffRow> = keys
        .into_iter()
        .map(|k| {
            let (b, v) = (Stat::of(&row_events(base, k)), Stat::of(&row_events(variant, k)));
            varying += (b.range() > 0.0 || v.range() > 0.0) as usize;
            row(k, base, variant, b, v, o, fewest)
        })
        .collect();
    rows.sort_by(|x, y| {
        (y.called, y.held_back)
            .cmp(&(x.called, x.held_back))
            .then(y.delta.abs().total_cmp(&x.delta.abs()))
            .then(x.key.cmp(&y.key))
    });
    let called = |up: bool| rows.iter().any(|r| r.called && (r.delta > 0.0) == up);
    let verdict = match (called(true), called(false)) {
        (true, _) => Verdict::More,
        (false, true) => Verdict::Less,
        _ => Verdict::Same,
    };
    let fewest = |b: &[PerOp]| b.iter().map(|p| p.vcpus).min().unwrap_or(0);
    Diff {
        verdict,
        boots: (base.len(), variant.len()),
        vcpus: (fewest(base), fewest(variant)),
        shared_rmws: (stat(base, |p| p.shared_rmws), stat(variant, |p| p.shared_rmws)),
        shared_acqs: (stat(base, |p| p.shared_acqs), stat(variant, |p| p.shared_acqs)),
        varying,
        rows,
        options: o.clone(),
    }
}

fn row(k: &Key, base: &[PerOp], variant: &[PerOp], b: Stat, v: Stat, o: &Options, fewest: usize) -> DiffRow {
    let both: Vec<f64> = row_events(base, k).into_iter().chain(row_events(variant, k)).collect();
    let pooled = med(&both);
    let (threshold, call) = o.calls(k.class, &b, &v, fewest);
    let delta = v.median - b.median;
    let most = |pick: fn(&RowPerOp) -> u64| {
        base.iter()
            .chain(variant)
            .filter_map(|p| p.rows.get(k))
            .map(pick)
            .max()
            .unwrap_or(0)
    };
    let (writers, objects) = (most(|r| r.writers as u64) as u32, most(|r| r.objects));
    DiffRow {
        key: k.clone(),
        text: k.text(),
        base: b,
        variant: v,
        delta,
        pooled,
        threshold,
        called: call == Call::Called,
        held_back: call == Call::HeldBack,
        writers,
        objects,
        hold: held(k, base, variant),
        funcs: top_functions(k, base, variant),
    }
}

/// The median instructions row `k`'s lock was held, base against variant
/// (None when neither side held it).
fn held(k: &Key, base: &[PerOp], variant: &[PerOp]) -> Option<Pair> {
    let hold = |boots: &[PerOp]| {
        let xs: Vec<f64> = boots.iter().filter_map(|p| p.rows.get(k)?.hold).collect();
        (!xs.is_empty()).then(|| med(&xs))
    };
    match (hold(base), hold(variant)) {
        (None, None) => None,
        (hb, hv) => Some(Pair {
            base: hb.unwrap_or(0.0),
            variant: hv.unwrap_or(0.0),
        }),
    }
}

/// The four functions whose counts on row `k` changed most, base against
/// variant (ties: the larger variant count, then the name).
fn top_functions(k: &Key, base: &[PerOp], variant: &[PerOp]) -> Vec<(String, Pair)> {
    let fnames: BTreeSet<&String> = base
        .iter()
        .chain(variant)
        .filter_map(|p| p.rows.get(k))
        .flat_map(|r| r.funcs.keys())
        .collect();
    let side = |boots: &[PerOp], f: &str| {
        let xs: Vec<f64> = boots
            .iter()
            .map(|p| p.rows.get(k).and_then(|r| r.funcs.get(f)).copied().unwrap_or(0.0))
            .collect();
        med(&xs)
    };
    let mut funcs: Vec<(String, Pair)> = fnames
        .into_iter()
        .map(|f| {
            let p = Pair {
                base: side(base, f),
                variant: side(variant, f),
            };
            (f.clone(), p)
        })
        .collect();
    funcs.sort_by(|x, y| {
        let d = |p: &Pair| (p.variant - p.base).abs();
        d(&y.1)
            .total_cmp(&d(&x.1))
            .then(y.1.variant.total_cmp(&x.1.variant))
            .then(x.0.cmp(&y.0))
    });
    funcs.truncate(4);
    funcs
}

mod aa;
mod read;
mod rule;
pub use aa::{aa_false_calls, AaCalls};
pub use rule::{Call, Options};

#[cfg(test)]
mod tests;
