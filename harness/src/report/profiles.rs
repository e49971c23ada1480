//! The differential kernel profile of a cell: base's and a variant's
//! boots' profiles (each boot's measured repetitions' windows summed, so a
//! boot is one value as everywhere in the report), compared function by
//! function with [`crate::profile::diff`] and its per-function noise
//! threshold. Every called cell of a report gets one (under the cell in
//! the text, in `report.json`); `harness explain` asks for any cell.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use anyhow::{bail, Result};
use serde::Serialize;

use super::Report;
use crate::profile::{self, contention, diff, PerOp};
use crate::records::Event;
use crate::stats::{model, Verdict};
use crate::store::{Run, PROFILE_BOOTS_DIR};

/// What a profile taken in a run's profile boots says of where it is from.
pub const FROM_PROFILE_BOOTS: &str = "the profile boots under TCG's instruction-counting clock";

/// Rows of a cell's differential profile shown under it in the text report.
pub const TEXT_ROWS: usize = 8;

/// The differential profile of one cell: a variant against base on one
/// benchmark at one vCPU count.
#[derive(Debug, Clone, Serialize)]
pub struct CellProfile {
    /// Benchmark.
    pub benchmark: String,
    /// vCPUs.
    pub vcpus: u32,
    /// Variant.
    pub variant: String,
    /// Base against the variant, every function.
    pub diff: diff::Diff,
    /// Where the profiles are from when not the cell's own boots: a
    /// wall-clock run's profile boots ([`FROM_PROFILE_BOOTS`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
}

impl CellProfile {
    /// `, from …` when the profiles are not the cell's own boots', else
    /// nothing: what a heading of the profile appends.
    pub fn from_clause(&self) -> String {
        self.from.as_ref().map(|f| format!(", from {f}")).unwrap_or_default()
    }
}

/// Where a run's kernel profiles are: its own boots' (the directory and
/// `events` given back), or, when those carry none, its profile boots'
/// (`profile-boots/`, said in the third value).
pub fn source(run: &Run, events: Vec<Event>) -> Result<(PathBuf, Vec<Event>, Option<String>)> {
    let own = events.iter().any(|e| matches!(e, Event::Profile { .. }));
    match run.profile_boots()? {
        Some(sub) if !own => Ok((
            sub.dir.clone(),
            sub.events()?,
            Some(format!("{FROM_PROFILE_BOOTS} ({PROFILE_BOOTS_DIR}/)")),
        )),
        _ => Ok((run.dir.clone(), events, None)),
    }
}

/// Each ended boot's measured windows of `benchmark` for `variant` at
/// `vcpus`: boot id → profile paths (relative to the run directory).
/// Warm-up windows, unusable ones and boots that never ended are left out.
pub fn windows(events: &[Event], variant: &str, vcpus: u32, benchmark: &str) -> BTreeMap<String, Vec<String>> {
    let ended: BTreeSet<&String> = events
        .iter()
        .filter_map(|e| match e {
            Event::BootEnd { boot_id: Some(id), .. } => Some(id),
            _ => None,
        })
        .collect();
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for e in events {
        if let Event::Profile {
            variant: v,
            vcpus: n,
            benchmark: b,
            boot_id,
            warmup: false,
            path,
            ops: Some(_),
            error: None,
            ..
        } = e
        {
            if v == variant && *n == vcpus && b == benchmark && ended.contains(boot_id) {
                out.entry(boot_id.clone()).or_default().push(path.clone());
            }
        }
    }
    out
}

/// One [`PerOp`] per boot of the cell (its windows summed), read from the
/// run directory `dir`; a boot whose profiles cannot be read is left out
/// and said in `notes`.
pub fn boots(
    dir: &Path,
    events: &[Event],
    variant: &str,
    vcpus: u32,
    benchmark: &str,
    notes: &mut Vec<String>,
) -> Vec<PerOp> {
    let mut out = Vec::new();
    for (boot_id, paths) in windows(events, variant, vcpus, benchmark) {
        let read: Result<Vec<_>> = paths
            .iter()
            .map(|p| crate::util::inside(dir, p).and_then(|p| profile::read(&p)))
            .collect();
        match read.and_then(|ps| profile::sum(&ps).map_or_else(|| bail!("no window"), |p| p.per_op(None))) {
            Ok(p) => out.push(p),
            Err(e) => notes.push(format!("{boot_id} {benchmark}: its kernel profile is left out: {e:#}")),
        }
    }
    out
}

/// The differential profile of `variant` against base for `benchmark` at
/// `vcpus`, from the run directory `dir`'s events.
pub fn cell(
    dir: &Path,
    events: &[Event],
    variant: &str,
    vcpus: u32,
    benchmark: &str,
    notes: &mut Vec<String>,
) -> Result<diff::Diff> {
    let base = boots(dir, events, "base", vcpus, benchmark, notes);
    let var = boots(dir, events, variant, vcpus, benchmark, notes);
    for (arm, b) in [("base", &base), (variant, &var)] {
        if b.is_empty() {
            bail!("{arm} has no kernel profile of {benchmark} at {vcpus} vCPUs (profiles are taken under the instruction-counting clock with the profiler plugin built; a wall-clock run takes them in profile boots, `guest: {{kernel_profile: true}}`)");
        }
    }
    Ok(diff::diff(&base, &var, None, &diff::Options::default()))
}

/// Whether a cell's verdict says its measurements changed (or that its
/// arms' work per op did).
fn called(v: Verdict) -> bool {
    matches!(
        v,
        Verdict::Regressed | Verdict::Improved | Verdict::Unsure | Verdict::WorkDiffers
    )
}

/// Whether a metric is judged per op of its benchmark, so that a change in
/// the work per op makes it incomparable: every metric but a per-call one.
fn per_op(metric: &str) -> bool {
    !metric.ends_with("_per_call")
}

/// Labels every compared cell of `r` whose arms did different amounts of
/// their benchmark's unit of work per op ([`profile::work`], from the run's
/// own boots' profiles): its per-op verdicts become
/// [`Verdict::WorkDiffers`]. Profiles of profile boots (`from`) measure other
/// boots than the cells', so they label nothing.
pub fn mark_work(
    dir: &Path,
    events: &[Event],
    from: Option<&str>,
    m: &crate::config::Matrix,
    r: &mut Report,
    notes: &mut Vec<String>,
) {
    if from.is_some() || !events.iter().any(|e| matches!(e, Event::Profile { .. })) {
        return;
    }
    let mut seen: BTreeMap<(String, u32, String), Option<crate::stats::WorkCalls>> = BTreeMap::new();
    for row in r.rows.iter_mut().filter(|row| per_op(&row.metric)) {
        let Some(unit) = m.benchmark(&row.benchmark).map(crate::bench::unit_of_work) else {
            continue;
        };
        for c in row.cells.iter_mut().filter(|c| c.variant != "base" && !unit.is_empty()) {
            let Some(d) = c.decision.as_mut() else { continue };
            let key = (row.benchmark.clone(), row.vcpus, c.variant.clone());
            let work = *seen.entry(key).or_insert_with(|| {
                let base = boots(dir, events, "base", row.vcpus, &row.benchmark, notes);
                let var = boots(dir, events, &c.variant, row.vcpus, &row.benchmark, notes);
                profile::work::work_per_op(&base, &var, None, &unit, &diff::Options::default())
                    .filter(|w| w.differs)
                    .map(|w| crate::stats::WorkCalls {
                        base: w.base.median,
                        new: w.variant.median,
                    })
            });
            if let Some(w) = work {
                d.work_differs(w);
            }
        }
    }
}

/// The contention profile of one cell: the plugin's counts of shared cache
/// lines and locks per op, base against a variant, with a verdict of its
/// own ([`contention::Verdict`]), never mixed into the rate's.
#[derive(Debug, Clone, Serialize)]
pub struct CellContention {
    /// Benchmark.
    pub benchmark: String,
    /// vCPUs.
    pub vcpus: u32,
    /// Variant.
    pub variant: String,
    /// Base against the variant.
    pub diff: contention::Diff,
    /// What the counts imply at many CPUs: a model, not a measurement.
    pub model: CellModel,
    /// Where the profiles are from when not the cell's own boots.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
}

/// The CPU counts a cell's contention is modelled at: the mission's.
pub const MODEL_CPUS: [u32; 3] = [26, 256, 448];

/// Of a run's measured vCPU counts `measured`, the one whose counts feed
/// the model at `cpus`: `cpus` itself when measured, else the largest
/// count below it, else the smallest (counts taken nearest the predicted
/// count, never extrapolated downward when they need not be).
pub fn model_source(cpus: u32, measured: &[u32]) -> Option<u32> {
    if measured.contains(&cpus) {
        return Some(cpus);
    }
    measured
        .iter()
        .copied()
        .filter(|&m| m < cpus)
        .max()
        .or_else(|| measured.iter().copied().min())
}

/// A cell's throughput at [`MODEL_CPUS`] from its per-op demands
/// ([`crate::stats::model`]), base against the variant. Labelled: a model,
/// not measured, with its constants.
#[derive(Debug, Clone, Serialize)]
pub struct CellModel {
    /// `model, not measured: IPC … at … GHz, …–… ns a cache-line transfer`.
    pub label: String,
    /// The constants.
    pub constants: model::Constants,
    /// Instructions per op, base and variant (the private work).
    pub insns: (f64, f64),
    /// The vCPU count the counts it is fed were measured at.
    pub counts_at: u32,
    /// The bands and their ratio at each CPU count these counts stand for
    /// (in a run measured at several counts, each CPU count is modelled
    /// from the cell measured nearest it: [`model_source`]).
    pub at: Vec<model::Compared>,
}

impl CellModel {
    /// Where the model's figures at `cpus` come from: `counts at N vCPUs`
    /// when measured at the count it predicts, else `extrapolated from M
    /// vCPUs`.
    pub fn source(&self, cpus: u32) -> String {
        if cpus == self.counts_at {
            format!("counts at {cpus} vCPUs")
        } else {
            format!("extrapolated from {} vCPUs", self.counts_at)
        }
    }
}

/// The demands of one side of a contention profile: every row a serial
/// resource whose per-op events are spread evenly over the distinct lines
/// or locks it folds (a heap row of a thousand page refcounts is a thousand
/// resources, the busiest of which carries a thousandth), and `insns` the
/// private work; a static lock's own line is not a second resource. A row
/// whose change is not called has the same demand on
/// both sides, its median over both sides' boots: by the contention rule
/// its difference is noise (a hash bucket some boots hit and others do
/// not), and the model must not turn noise into a verdict.
fn demands(d: &contention::Diff, insns: f64, variant: bool) -> model::Demands {
    // a static spinlock's word is also a line its acquisitions write: one resource
    let locks: BTreeSet<&str> = d
        .rows
        .iter()
        .filter(|r| matches!(r.key.object, contention::Object::Lock(_)) && r.key.class == contention::Class::Static)
        .map(|r| r.key.name.as_str())
        .collect();
    let resources = d
        .rows
        .iter()
        .filter(|r| {
            !(r.key.object == contention::Object::Line
                && r.key.class == contention::Class::Static
                && locks.contains(r.key.name.as_str()))
        })
        .filter_map(|r| {
            let side = match (r.called, variant) {
                (false, _) => r.pooled,
                (true, false) => r.base.median,
                (true, true) => r.variant.median,
            };
            let events = side / r.objects.max(1) as f64;
            (events > 0.0).then(|| match &r.key.object {
                contention::Object::Line => model::Resource::Line {
                    name: r.text.clone(),
                    rmws: events,
                },
                contention::Object::Lock(_) => model::Resource::Lock {
                    name: r.text.clone(),
                    acqs: events,
                    hold_insns: r.hold.map_or(0.0, |h| match (r.called, variant) {
                        (false, _) => h.base.max(h.variant),
                        (true, false) => h.base,
                        (true, true) => h.variant,
                    }),
                },
            })
        })
        .collect();
    model::Demands { insns, resources }
}

/// The model of a contention profile measured at `counts_at` vCPUs whose
/// sides run `insns` instructions per op, at every [`MODEL_CPUS`].
pub fn model_of(d: &contention::Diff, insns: (f64, f64), counts_at: u32) -> CellModel {
    let c = model::Constants::default();
    CellModel {
        label: c.text(),
        constants: c,
        insns,
        counts_at,
        at: model::compare(&demands(d, insns.0, false), &demands(d, insns.1, true), &c, &MODEL_CPUS),
    }
}

/// Keeps in each cell's model only the CPU counts its counts are the
/// nearest measured ones for ([`model_source`]), among the cells of the
/// same benchmark and variant: a run measured at 2, 8 and 256 vCPUs models
/// 256 and 448 CPUs from its 256-vCPU counts and 26 from its 8-vCPU ones.
fn keep_nearest(cells: &mut [CellContention]) {
    let measured: BTreeMap<(String, String), Vec<u32>> = cells.iter().fold(BTreeMap::new(), |mut m, c| {
        m.entry((c.benchmark.clone(), c.variant.clone()))
            .or_insert_with(Vec::new)
            .push(c.vcpus);
        m
    });
    for c in cells.iter_mut() {
        let counts = &measured[&(c.benchmark.clone(), c.variant.clone())];
        c.model.at.retain(|a| model_source(a.cpus, counts) == Some(c.vcpus));
    }
}

impl CellContention {
    /// `bench at N vCPUs, variant`.
    pub fn title(&self) -> String {
        format!("{} at {} vCPUs, {}", self.benchmark, self.vcpus, self.variant)
    }
}

/// A compared cell that should have a contention profile and has none:
/// one side's boots carry contention counts and the other's do not (their
/// profiles refused or cut before their contention lines). The gate never
/// passes such a cell unseen.
#[derive(Debug, Clone, Serialize)]
pub struct MissingContention {
    /// Benchmark.
    pub benchmark: String,
    /// vCPUs.
    pub vcpus: u32,
    /// Variant.
    pub variant: String,
    /// Which side lacks the counts, in words.
    pub why: String,
}

/// The contention side of a report: every cell's profile, and the cells
/// that should have one and do not.
#[derive(Debug, Default)]
pub struct ContentionCells {
    /// Cells with contention counts on both sides.
    pub cells: Vec<CellContention>,
    /// Cells with counts on one side only.
    pub missing: Vec<MissingContention>,
}

/// The contention profile of every compared (benchmark, vCPUs, variant) of
/// `r` whose boots carry contention counts (the plugin ran with
/// `contention=on`), whatever the cell's verdict: contention is what the
/// instruction counts do not show. A boot without counts among boots with
/// them is left out with a note; a side without any, against a side with
/// them, makes the cell [`MissingContention`].
pub fn contention_cells(
    dir: &Path,
    events: &[Event],
    from: Option<&str>,
    r: &Report,
    notes: &mut Vec<String>,
) -> ContentionCells {
    let mut out = ContentionCells::default();
    // base's boots serve every variant of a (benchmark, vCPUs): read once
    let mut bases: BTreeMap<(String, u32), Vec<PerOp>> = BTreeMap::new();
    for (benchmark, vcpus, variant) in compared(events, r, |_| true) {
        let base = bases
            .entry((benchmark.clone(), vcpus))
            .or_insert_with(|| boots(dir, events, "base", vcpus, &benchmark, notes));
        let var = boots(dir, events, &variant, vcpus, &benchmark, notes);
        let at = format!("{variant} {benchmark} at {vcpus} vCPUs");
        match contention_of((base, &var), vcpus, &at, notes) {
            Sides::Both(diff, model) => out.cells.push(CellContention {
                benchmark,
                vcpus,
                variant,
                diff: *diff,
                model,
                from: from.map(str::to_string),
            }),
            Sides::One(why) => out.missing.push(MissingContention {
                benchmark,
                vcpus,
                variant,
                why,
            }),
            Sides::Neither => {}
        }
    }
    keep_nearest(&mut out.cells);
    out
}

/// Each (benchmark, vCPUs, variant) of `r` once whose cell has a decision
/// that `keep` accepts (whichever of its metrics); none when the run's
/// events hold no profile.
pub(super) fn compared(
    events: &[Event],
    r: &Report,
    keep: impl Fn(&crate::stats::Decision) -> bool,
) -> Vec<(String, u32, String)> {
    if !events.iter().any(|e| matches!(e, Event::Profile { .. })) {
        return Vec::new();
    }
    let mut out = Vec::new();
    for row in &r.rows {
        for c in &row.cells {
            let key = (row.benchmark.clone(), row.vcpus, c.variant.clone());
            if c.decision.as_ref().is_some_and(&keep) && !out.contains(&key) {
                out.push(key);
            }
        }
    }
    out
}

/// The contention profile of `variant` against base for `benchmark` at
/// `vcpus`, and its model; `None` unless both sides have boots with
/// contention counts (boots without them are left out with a note).
pub fn cell_contention(
    dir: &Path,
    events: &[Event],
    variant: &str,
    vcpus: u32,
    benchmark: &str,
    notes: &mut Vec<String>,
) -> Option<(contention::Diff, CellModel)> {
    let base = boots(dir, events, "base", vcpus, benchmark, notes);
    let var = boots(dir, events, variant, vcpus, benchmark, notes);
    let at = format!("{variant} {benchmark} at {vcpus} vCPUs");
    match contention_of((&base, &var), vcpus, &at, notes) {
        Sides::Both(diff, model) => Some((*diff, model)),
        Sides::One(why) => {
            notes.push(format!("{at}: no contention profile: {why}"));
            None
        }
        Sides::Neither => None,
    }
}

/// Which sides of a cell carry contention counts.
enum Sides {
    /// Both: their profile and its model.
    Both(Box<contention::Diff>, CellModel),
    /// One: why the other has none, in words.
    One(String),
    /// Neither (the plugin ran without `contention=on`).
    Neither,
}

/// The contention profile of a variant's boots against base's at `vcpus`,
/// and its model, from the boots that carry contention counts; a boot
/// without them among boots with them is left out with a note naming the
/// cell `at`.
fn contention_of((base, variant): (&[PerOp], &[PerOp]), vcpus: u32, at: &str, notes: &mut Vec<String>) -> Sides {
    let mut counts = |boots: &[PerOp], side: &str| -> Option<(Vec<contention::PerOp>, f64)> {
        let with: Vec<&PerOp> = boots.iter().filter(|b| b.contention.is_some()).collect();
        if with.is_empty() {
            return None;
        }
        if with.len() < boots.len() {
            notes.push(format!(
                "{at}: {} of {side}'s {} boot profiles carry no contention counts and are left out of its contention profile",
                boots.len() - with.len(),
                boots.len()
            ));
        }
        let insns: Vec<f64> = with.iter().map(|b| b.total_insns).collect();
        let c = with.iter().filter_map(|b| b.contention.clone()).collect();
        Some((c, crate::stats::median(&insns).unwrap_or(0.0)))
    };
    let lacks = |side: &str, n: usize| {
        format!("{side}'s {n} boot profiles carry no contention counts (left out or cut before their contention lines), the other side's do")
    };
    match (counts(base, "base"), counts(variant, "the variant")) {
        (Some((base, bi)), Some((var, vi))) => {
            let diff = contention::diff(&base, &var, &contention::Options::default());
            let model = model_of(&diff, (bi, vi), vcpus);
            Sides::Both(Box::new(diff), model)
        }
        (Some(_), None) => Sides::One(lacks("the variant", variant.len())),
        (None, Some(_)) => Sides::One(lacks("base", base.len())),
        (None, None) => Sides::Neither,
    }
}

/// The differential profile of every called cell of `r` that has profiles
/// on both sides, once per (benchmark, vCPUs, variant) whichever of its
/// metrics was called; `from` as [`source`] gave it.
pub fn called_cells(
    dir: &Path,
    events: &[Event],
    from: Option<&str>,
    r: &Report,
    notes: &mut Vec<String>,
) -> Vec<CellProfile> {
    let mut out = Vec::new();
    for (benchmark, vcpus, variant) in compared(events, r, |d| called(d.performance)) {
        if let Ok(diff) = cell(dir, events, &variant, vcpus, &benchmark, notes) {
            out.push(CellProfile {
                benchmark,
                vcpus,
                variant,
                diff,
                from: from.map(str::to_string),
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn profile_event(variant: &str, boot_id: &str, warmup: bool, n: u32, ops: Option<u64>) -> Event {
        profile_of("s", variant, boot_id, warmup, n, ops)
    }

    fn profile_of(benchmark: &str, variant: &str, boot_id: &str, warmup: bool, n: u32, ops: Option<u64>) -> Event {
        Event::Profile {
            variant: variant.into(),
            vcpus: 2,
            boot: 0,
            boot_id: boot_id.into(),
            benchmark: benchmark.into(),
            repetition: n,
            warmup,
            path: format!("profiles/{boot_id}.profile.{n}"),
            ops,
            error: None,
        }
    }

    fn end(boot_id: &str) -> Event {
        Event::BootEnd {
            variant: String::new(),
            vcpus: 2,
            boot: 0,
            boot_id: Some(boot_id.into()),
            findings: vec![],
            error: None,
            busy_wall_per_guest_s: None,
            failed: None,
        }
    }

    fn window(f_insns: u64, ops: u64) -> String {
        format!("harness-profile 1\nmode marker\nwindows 1\nunclosed 0\nops {ops} missing 0\nvcpus 2\ntotal {t} 1 0 0\nkernel {f_insns} 1 0 0\nf f {f_insns} 1 0 0\nf [user] 100 0 0 0\n", t = f_insns + 100)
    }

    /// A doexec run, base at 1000 execs/s and `v` at 1200 (improved), whose
    /// boots' profiles call `bprm_execve` `calls[arm]` times in 10 ops.
    fn work_run(calls: [u64; 2]) -> (tempfile::TempDir, crate::records::RunMeta, Vec<Event>, Report) {
        use crate::report::tests::{boots as run_boots, meta_with};
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("profiles")).unwrap();
        let meta = meta_with(&["base", "v"], "{boots: 5, repetitions: 2, warmup_repetitions: 1}");
        let mut rec = (vec![], vec![]);
        run_boots("base", 5, 1000.0, &mut rec);
        run_boots("v", 5, 1200.0, &mut rec);
        for (arm, n) in [("base", calls[0]), ("v", calls[1])] {
            for b in 0..5 {
                let id = format!("{arm}-2cpu-b{b}");
                rec.1.push(profile_of("d", arm, &id, false, 1, Some(10)));
                let text = format!("{}f bprm_execve {} {n} 0 0\n", window(1000, 10), 50 * n);
                std::fs::write(d.path().join(format!("profiles/{id}.profile.1")), text).unwrap();
            }
        }
        let r = crate::report::build_from(&meta, &rec.0, &rec.1, &crate::report::Floors::none("none"));
        (d, meta, rec.1, r)
    }

    #[test]
    fn a_cell_whose_unit_of_work_per_op_differs_is_labelled_not_called() {
        let (d, meta, events, mut r) = work_run([10, 7]);
        assert_eq!(
            r.rows[0].cells[1].decision.unwrap().verdict,
            Verdict::Improved,
            "before the check"
        );
        mark_work(d.path(), &events, None, &meta.matrix, &mut r, &mut vec![]);
        let dec = r.rows[0].cells[1].decision.unwrap();
        assert_eq!(
            (dec.verdict, dec.performance),
            (Verdict::WorkDiffers, Verdict::WorkDiffers)
        );
        let w = dec.work.unwrap();
        assert_eq!((w.base, w.new), (1.0, 0.7));
        let text = crate::report::decision_text(&dec);
        assert!(
            text.starts_with("work per op differs (1.00 → 0.70 calls/op): not comparable under this clock (p="),
            "{text}"
        );
        let table = crate::report::table(&r);
        assert!(
            table.contains("work per op differs (1.00 → 0.70 calls/op)")
                && !table
                    .lines()
                    .any(|l| l.starts_with("d ") && (l.contains("better") || l.contains("improved"))),
            "{table}"
        );
        let json = serde_json::to_value(&r).unwrap();
        let cell = &json["rows"][0]["cells"][1]["decision"];
        assert_eq!(
            (cell["verdict"].as_str(), cell["work"]["new"].as_f64()),
            (Some("work_differs"), Some(0.7))
        );
        let g = crate::report::report_gate(&r, &meta.matrix.key_metrics);
        assert!(g.failures.is_empty() && g.warnings.len() == 1, "{g:?}");
        assert!(g.warnings[0].contains("not comparable under this clock"), "{g:?}");
        let x = crate::report::render::junit::junit(&r, &meta.matrix.key_metrics, false);
        assert!(x.contains("work per op differs") && x.contains("failures=\"0\""), "{x}");
        let html = crate::report::render::html::render(&r).unwrap();
        assert!(html.contains("class=\"num workdiffers\""), "the HTML cell is marked");
        assert!(html.contains("work per op differs"), "and labelled");
    }

    #[test]
    fn the_same_work_per_op_or_profile_boots_keep_the_verdict() {
        let (d, meta, events, mut r) = work_run([10, 10]);
        mark_work(d.path(), &events, None, &meta.matrix, &mut r, &mut vec![]);
        assert_eq!(r.rows[0].cells[1].decision.unwrap().verdict, Verdict::Improved);
        let (d, meta, events, mut r) = work_run([10, 7]);
        mark_work(
            d.path(),
            &events,
            Some(FROM_PROFILE_BOOTS),
            &meta.matrix,
            &mut r,
            &mut vec![],
        );
        assert_eq!(
            r.rows[0].cells[1].decision.unwrap().verdict,
            Verdict::Improved,
            "profile boots are other boots than the cell's"
        );
    }

    #[test]
    fn a_run_without_profiles_of_its_own_takes_its_profile_boots() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("run.json"), "{}").unwrap();
        let run = Run::open(d.path()).unwrap();
        let (dir, ev, from) = source(&run, vec![]).unwrap();
        assert_eq!(
            (dir, ev.len(), from),
            (d.path().to_path_buf(), 0, None),
            "no profile boots: the run itself"
        );
        let sub = d.path().join(PROFILE_BOOTS_DIR);
        std::fs::create_dir_all(&sub).unwrap();
        std::fs::write(sub.join("run.json"), "{}").unwrap();
        let line = serde_json::to_string(&profile_event("base", "base-2cpu-b0", false, 1, Some(10))).unwrap();
        std::fs::write(sub.join("events.jsonl"), format!("{line}\n")).unwrap();
        let (dir, ev, from) = source(&run, vec![]).unwrap();
        assert_eq!((dir, ev.len()), (sub, 1));
        assert_eq!(from.unwrap(), format!("{FROM_PROFILE_BOOTS} (profile-boots/)"));
        let own = vec![profile_event("base", "base-2cpu-b1", false, 1, Some(10))];
        let (dir, ev, from) = source(&run, own).unwrap();
        assert_eq!(
            (dir, ev.len(), from),
            (d.path().to_path_buf(), 1, None),
            "its own profiles first"
        );
    }

    #[test]
    fn a_cell_diffs_ended_boots_measured_windows() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("profiles")).unwrap();
        let mut events = Vec::new();
        for (arm, f) in [("base", 1000), ("v", 3000)] {
            for b in 0..3 {
                let id = format!("{arm}-2cpu-b{b}");
                events.push(profile_event(arm, &id, true, 1, Some(10)));
                std::fs::write(d.path().join(format!("profiles/{id}.profile.1")), window(99999, 10)).unwrap();
                for n in [2, 3] {
                    events.push(profile_event(arm, &id, false, n, Some(10)));
                    std::fs::write(d.path().join(format!("profiles/{id}.profile.{n}")), window(f + b, 10)).unwrap();
                }
                events.push(end(&id));
            }
        }
        // a boot that never ended and a window closed with no count count for nothing
        events.push(profile_event("v", "v-2cpu-b9", false, 2, Some(10)));
        events.push(profile_event("v", "v-2cpu-b0", false, 4, None));
        let w = windows(&events, "v", 2, "s");
        assert_eq!(w.keys().collect::<Vec<_>>(), ["v-2cpu-b0", "v-2cpu-b1", "v-2cpu-b2"]);
        assert_eq!(
            w["v-2cpu-b0"],
            ["profiles/v-2cpu-b0.profile.2", "profiles/v-2cpu-b0.profile.3"]
        );
        let mut notes = vec![];
        let diff = cell(d.path(), &events, "v", 2, "s", &mut notes).unwrap();
        assert!(notes.is_empty(), "{notes:?}");
        let top = &diff.rows[0];
        assert_eq!(
            (top.name.as_str(), top.base.median, top.variant.median, top.called),
            ("f", 100.1, 300.1, true)
        );
        let e = cell(d.path(), &events, "gone", 2, "s", &mut notes).unwrap_err();
        assert!(
            format!("{e:#}").starts_with("gone has no kernel profile of s at 2 vCPUs"),
            "{e:#}"
        );
        std::fs::write(d.path().join("profiles/v-2cpu-b1.profile.2"), "garbage").unwrap();
        let diff = cell(d.path(), &events, "v", 2, "s", &mut notes).unwrap();
        assert_eq!(diff.variant_boots, 2);
        assert!(
            notes[0].starts_with("v-2cpu-b1 s: its kernel profile is left out"),
            "{notes:?}"
        );
    }

    #[test]
    fn a_called_cell_gets_its_profile_under_it_in_the_text_and_json() {
        use crate::report::tests::{boots as boot_rows, meta_with};
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("profiles")).unwrap();
        let meta = meta_with(&["base", "slow", "same"], "{boots: 5, repetitions: 2}");
        let mut rec = (Vec::new(), Vec::new());
        for (arm, level, f) in [("base", 100.0, 1000), ("slow", 80.0, 3000), ("same", 100.0, 1000)] {
            boot_rows(arm, 5, level, &mut rec);
            for b in 0..5 {
                let id = format!("{arm}-2cpu-b{b}");
                rec.1.push(profile_of("d", arm, &id, false, 1, Some(10)));
                std::fs::write(d.path().join(format!("profiles/{id}.profile.1")), window(f + b, 10)).unwrap();
            }
        }
        let r = crate::report::build_from(&meta, &rec.0, &rec.1, &crate::report::Floors::none("none"));
        let mut notes = vec![];
        let got = called_cells(d.path(), &rec.1, None, &r, &mut notes);
        assert_eq!(
            got.iter()
                .map(|c| (c.variant.as_str(), c.benchmark.as_str(), c.vcpus))
                .collect::<Vec<_>>(),
            [("slow", "d", 2)],
            "only the called cell"
        );
        assert_eq!(got[0].diff.rows[0].name, "f");
        let r = Report { profiles: got, ..r };
        let text = crate::report::table_as(&r, 100, false);
        assert!(
            text.contains("why slow changed: d at 2 vCPUs, kernel profile against base (top 8)\n"),
            "{text}"
        );
        assert!(
            text.contains("\n  all: harness explain r --variant slow --bench d --vcpus 2\n"),
            "{text}"
        );
        assert!(
            text.contains("calls/op") && text.lines().all(|l| l.chars().count() <= 100),
            "{text}"
        );
        assert!(text.lines().any(|l| l.starts_with("* f ")), "{text}");
        let text = crate::report::table_as(&r, 100, true);
        assert!(text.contains("why slow changed: d at 2 vCPUs, kernel profile against base (top 8; all: harness explain r --variant slow --bench d --vcpus 2)"), "{text}");
        assert!(text.lines().any(|l| l.starts_with("* f ")), "{text}");
        let html = crate::report::render::html::render(&r).unwrap();
        assert!(
            html.contains("Why cells changed: kernel profiles") && html.contains(r#"<rect class="delta""#),
            "a bar chart of the top functions"
        );
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(json["profiles"][0]["diff"]["rows"][0]["name"], "f");
        // no profiles in the run: nothing, and report.json has no key
        let plain = crate::report::build_from(&meta, &rec.0, &[], &crate::report::Floors::none("none"));
        assert!(called_cells(d.path(), &[], None, &plain, &mut notes).is_empty());
        assert!(serde_json::to_value(&plain).unwrap().get("profiles").is_none());
    }

    /// A window of 10 ops whose contention lines name `counter_x` with
    /// `rmws` RMWs (none when 0) beside a static lock every boot takes.
    fn contended(rmws: u64) -> String {
        let mut x = format!("x summary 2 {rmws} {rmws} 1 1 10 10 1 1 0 0\nx lock static pcpu_lock+0x0 spin 1 2 10 0 0\nxf pcpu_alloc_noprof 10\n");
        if rmws > 0 {
            x += &format!("x line static counter_x+0x0 1 2 {rmws}\nxf copy_process {rmws}\n");
        }
        format!("{}{x}", window(1000, 10))
    }

    /// `text` as the plugin writes format 2: its version, then its trailer.
    fn sealed(text: &str) -> String {
        let t = text.replacen("harness-profile 1", "harness-profile 2", 1);
        format!("{t}end {}\n", t.lines().count())
    }

    /// Issue 58: base's five boots and an atomic variant's, which takes
    /// `counter_x` 10 times in 10 ops; `damage` does what it does to the
    /// variant's profile of each boot it is given.
    fn damaged_run(damage: impl Fn(usize, String) -> String) -> (Report, Vec<String>) {
        use crate::report::tests::{boots as boot_rows, meta_with};
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("profiles")).unwrap();
        let meta = meta_with(&["base", "atomic"], "{boots: 5, repetitions: 2}");
        let mut rec = (Vec::new(), Vec::new());
        for (arm, rmws) in [("base", 0), ("atomic", 10)] {
            boot_rows(arm, 5, 100.0, &mut rec);
            for b in 0..5 {
                let id = format!("{arm}-2cpu-b{b}");
                rec.1.push(profile_of("d", arm, &id, false, 1, Some(10)));
                let text = sealed(&contended(rmws));
                let text = if arm == "atomic" { damage(b, text) } else { text };
                std::fs::write(d.path().join(format!("profiles/{id}.profile.1")), text).unwrap();
            }
        }
        let mut r = crate::report::build_from(&meta, &rec.0, &rec.1, &crate::report::Floors::none("none"));
        let mut notes = vec![];
        let c = contention_cells(d.path(), &rec.1, None, &r, &mut notes);
        (r.contention, r.contention_missing) = (c.cells, c.missing);
        r.contention_gate = crate::config::ContentionGate::Fail;
        (r, notes)
    }

    #[test]
    fn a_damaged_profile_never_passes_the_contention_gate() {
        let gate = |r: &Report| crate::report::gate::report_gate(r, &[]).failures;
        let (whole, notes) = damaged_run(|_, t| t);
        assert!(notes.is_empty(), "{notes:?}");
        assert_eq!(whole.contention[0].diff.verdict, contention::Verdict::More);
        assert_eq!(gate(&whole).len(), 1, "{:?}", gate(&whole));

        // one boot cut before its first `x line`: left out with a note, the other four still call it
        let cut = |t: String| t[..t.find("x line").unwrap()].to_string();
        let (one, notes) = damaged_run(|b, t| if b == 0 { cut(t) } else { t });
        assert!(
            notes
                .iter()
                .any(|n| n.starts_with("atomic-2cpu-b0 d: its kernel profile is left out") && n.contains("cut short")),
            "{notes:?}"
        );
        assert_eq!(one.contention[0].diff.verdict, contention::Verdict::More);
        assert!(gate(&one)[0].contains("more contention"), "{:?}", gate(&one));

        // every boot cut, or its `x` lines dropped (trailer made to match): the gate says so and fails
        let strip = |t: String| {
            let kept: Vec<&str> = t
                .lines()
                .filter(|l| !l.starts_with('x') && !l.starts_with("end"))
                .collect();
            format!("{}\nend {}\n", kept.join("\n"), kept.len())
        };
        for (how, r) in [
            ("cut", damaged_run(|_, t| cut(t)).0),
            ("stripped", damaged_run(|_, t| strip(t)).0),
        ] {
            assert!(r.contention.is_empty(), "{how}");
            let f = gate(&r);
            assert_eq!(f.len(), 1, "{how}: {f:?}");
            assert!(
                f[0].starts_with("atomic at 2 vCPUs (d): no contention profile: the variant's"),
                "{how}: {f:?}"
            );
        }
    }

    #[test]
    fn contention_has_its_verdict_in_the_text_json_html_junit_and_gate() {
        use crate::report::tests::{boots as boot_rows, meta_with};
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("profiles")).unwrap();
        let meta = meta_with(&["base", "atomic", "same"], "{boots: 5, repetitions: 2}");
        let mut rec = (Vec::new(), Vec::new());
        for (arm, rmws) in [("base", 0), ("atomic", 10), ("same", 0)] {
            boot_rows(arm, 5, 100.0, &mut rec);
            for b in 0..5 {
                let id = format!("{arm}-2cpu-b{b}");
                rec.1.push(profile_of("d", arm, &id, false, 1, Some(10)));
                std::fs::write(d.path().join(format!("profiles/{id}.profile.1")), contended(rmws)).unwrap();
            }
        }
        let mut r = crate::report::build_from(&meta, &rec.0, &rec.1, &crate::report::Floors::none("none"));
        r.contention = contention_cells(d.path(), &rec.1, None, &r, &mut vec![]).cells;
        let verdicts: Vec<(&str, contention::Verdict)> = r
            .contention
            .iter()
            .map(|c| (c.variant.as_str(), c.diff.verdict))
            .collect();
        assert_eq!(
            verdicts,
            [
                ("atomic", contention::Verdict::More),
                ("same", contention::Verdict::Same)
            ],
            "every compared cell, whatever its rate's verdict"
        );
        assert!(
            !called(r.rows[0].cells[1].decision.unwrap().performance),
            "the rate's verdict is its own"
        );
        let text = crate::report::table_as(&r, 100, false);
        assert!(text.contains("  d at 2 vCPUs, atomic: more contention\n"), "{text}");
        assert!(
            text.lines()
                .any(|l| l.starts_with("* line counter_x+0x0") && l.contains("+1.00")),
            "{text}"
        );
        assert!(text.contains("≈ (no row moved): d (2 vCPUs, same)"), "{text}");
        assert!(
            text.contains("model, not measured: IPC 1.0 at 2.5 GHz, 50–200 ns a cache-line transfer"),
            "{text}"
        );
        let at448 = &r.contention[0].model.at[2];
        assert_eq!(at448.cpus, 448);
        assert!(
            at448.ratio.1 < 1.0 && at448.ratio.0 > 0.99,
            "a second resource as dear as the one that bounds base: {at448:?}"
        );
        let same448 = &r.contention[1].model.at[2];
        assert_eq!(same448.ratio, (1.0, 1.0), "the same demands, the same band");
        assert!(text.lines().all(|l| l.chars().count() <= 100), "{text}");
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(json["contention"][0]["diff"]["verdict"], "more");
        assert_eq!(json["contention"][0]["diff"]["rows"][0]["key"]["name"], "counter_x+0x0");
        let g = crate::report::report_gate(&r, &[]);
        assert!(g.failures.is_empty(), "{g:?}");
        assert_eq!(
            g.warnings,
            ["atomic at 2 vCPUs (d): more contention: +1.00 shared-line RMW per op on line counter_x+0x0 (copy_process)"]
        );
        assert!(
            crate::report::report_gate(&r, &["other".into()]).warnings.is_empty(),
            "only key benchmarks"
        );
        let x = crate::report::render::junit::junit(&r, &[], false);
        assert!(
            x.contains("classname=\"d.contention\" name=\"atomic at 2 vCPUs\">") && x.contains("gate warning"),
            "{x}"
        );
        let html = crate::report::render::html::render(&r).unwrap();
        assert!(
            html.contains("Contention: shared cache lines and locks per operation"),
            "a section"
        );
        assert!(
            html.contains("<td class=\"regressed\">more contention</td><td>* line counter_x+0x0</td>"),
            "{html}"
        );
        assert!(
            html.contains("contention: 1 more, 0 less, 1 ≈"),
            "the summary line counts them"
        );
        r.contention_gate = crate::config::ContentionGate::Fail;
        let g = crate::report::report_gate(&r, &[]);
        assert_eq!(
            (g.failures.len(), g.warnings.len()),
            (1, 0),
            "statistics.contention: fail"
        );
        let x = crate::report::render::junit::junit(&r, &[], false);
        assert!(x.contains("failures=\"1\""), "{x}");
    }

    #[test]
    fn each_modelled_count_takes_the_counts_measured_nearest_below_it() {
        let run = [2, 8, 256];
        let table = [(26, Some(8)), (256, Some(256)), (448, Some(256))];
        for (cpus, want) in table {
            assert_eq!(model_source(cpus, &run), want, "{cpus} CPUs from {run:?}");
        }
        assert_eq!(model_source(448, &[2]), Some(2), "one count feeds every one");
        assert_eq!(model_source(26, &[64, 448]), Some(64), "only larger: the nearest");
        assert_eq!(model_source(26, &[]), None);
    }

    #[test]
    fn a_run_at_several_counts_models_each_count_from_its_nearest_cell_once() {
        let d = contention::diff(&[], &[], &contention::Options::default());
        let cell = |vcpus: u32| CellContention {
            benchmark: "b".into(),
            vcpus,
            variant: "v".into(),
            diff: d.clone(),
            model: model_of(&d, (1000.0, 1000.0), vcpus),
            from: None,
        };
        let mut cells = vec![cell(2), cell(8), cell(256)];
        keep_nearest(&mut cells);
        let at = |c: &CellContention| c.model.at.iter().map(|a| a.cpus).collect::<Vec<_>>();
        assert_eq!(at(&cells[0]), Vec::<u32>::new(), "2 vCPUs feed nothing");
        assert_eq!(at(&cells[1]), [26], "8 vCPUs feed 26 CPUs");
        assert_eq!(at(&cells[2]), [256, 448]);
        assert_eq!(cells[2].model.source(256), "counts at 256 vCPUs");
        assert_eq!(cells[2].model.source(448), "extrapolated from 256 vCPUs");
        let text = crate::report::render::compact::model_text(&cells[1].model, 100);
        assert!(
            text.contains("at 26 CPUs (extrapolated from 8 vCPUs): variant/base 1.000–1.000"),
            "{text}"
        );
        let none = crate::report::render::compact::model_text(&cells[0].model, 100);
        assert!(
            none.contains("no CPU count modelled from these 2-vCPU counts"),
            "{none}"
        );
    }

    #[test]
    fn the_model_takes_a_rows_noise_for_both_sides_and_a_lock_once() {
        let per_op = |bucket: u64, lock: u64| {
            let x = format!(
                "x summary 2 0 0 0 0 0 0 0 0 0 0\nx line static in_lookup_hashtable+0x50 1 2 {bucket}\nxf hlist_bl_lock {bucket}\n\
                 x lock static pcpu_lock+0x0 spin 1 2 {lock} 0 0\nxf pcpu_alloc_noprof {lock}\n\
                 x line static pcpu_lock+0x0 1 2 {lock}\nxf do_raw_spin_lock {lock}\n"
            );
            profile::parse(&format!("{}{x}", window(100_000, 10)))
                .unwrap()
                .per_op(None)
                .unwrap()
                .contention
                .unwrap()
        };
        // a hash bucket some boots hit (150 RMWs in 10 ops) and others not
        let base = [per_op(150, 10), per_op(150, 10), per_op(0, 10)];
        let noisy = [per_op(0, 10), per_op(0, 10), per_op(150, 10)];
        let d = contention::diff(&base, &noisy, &contention::Options::default());
        assert_eq!(d.verdict, contention::Verdict::Same);
        let m = model_of(&d, (10_010.0, 10_010.0), 2);
        assert!(
            m.at.iter().all(|c| c.ratio == (1.0, 1.0)),
            "noise moves no band: {:?}",
            m.at
        );
        // four times the lock: one resource of 4 acquisitions, not a line beside it
        let more = [per_op(0, 40), per_op(0, 40), per_op(0, 40)];
        let d = contention::diff(
            &[per_op(0, 10), per_op(0, 10), per_op(0, 10)],
            &more,
            &contention::Options::default(),
        );
        let one = demands(&d, 10_010.0, true);
        assert_eq!(
            one.resources.len(),
            1,
            "the lock alone (no bucket RMWs): {:?}",
            one.resources
        );
        assert!(one
            .resources
            .iter()
            .any(|r| matches!(r, model::Resource::Lock { acqs, .. } if *acqs == 4.0)));
    }
}
