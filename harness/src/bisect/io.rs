//! A bisection's files: `state.json`, each measurement's run (started or
//! resumed through the pipeline) and the evidence read back from those runs
//! as blocks: per round of a run, the boot value of each arm.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use super::rule::Block;
use super::search::{Arms, Seen};
use super::{Bisection, History};
use crate::config::Variant;
use crate::pipeline::{self, Options};
use crate::records::{Event, Sample};
use crate::store::Run;

/// The variant names of a measurement's arms.
const GOOD: &str = "base";
pub(super) const BAD: &str = "bad";
pub(super) const CAND: &str = "mid";

pub(super) fn save(dir: &Path, s: &Bisection) -> Result<()> {
    crate::util::write_whole(&dir.join("state.json"), &serde_json::to_vec_pretty(s)?)
}

pub(super) fn load(dir: &Path) -> Result<Bisection> {
    let p = dir.join("state.json");
    serde_json::from_slice(&std::fs::read(&p).with_context(|| format!("read {}", p.display()))?)
        .with_context(|| format!("read {}", p.display()))
}

/// The variant that boots `point` under the name `name`.
pub(super) fn variant(st: &Bisection, name: &str, point: &str) -> Variant {
    let benchmarks = st.matrix.benchmarks.iter().map(|b| b.name.clone()).collect();
    let v = Variant {
        name: name.into(),
        apply: vec![],
        revert: vec![],
        fragments: vec![],
        benchmarks,
        git_ref: None,
    };
    match &st.history {
        History::Git { .. } => Variant {
            git_ref: Some(point.into()),
            ..v
        },
        History::Series { patches, base_ref, .. } => {
            let k: usize = point.parse().unwrap_or(0);
            Variant {
                apply: k
                    .checked_sub(1)
                    .and_then(|i| patches.get(i))
                    .cloned()
                    .into_iter()
                    .collect(),
                git_ref: base_ref.clone(),
                ..v
            }
        }
    }
}

/// The arms of a measurement as (variant name, point).
fn named(a: &Arms) -> Vec<(&'static str, &str)> {
    let mut v = vec![(GOOD, a.good.as_str()), (BAD, a.bad.as_str())];
    v.extend(a.cand.as_deref().map(|c| (CAND, c)));
    v
}

/// Finishes measurement `i` (`m<i>/`): starts its run, or resumes it.
pub(super) fn measure(dir: &Path, i: usize, st: &Bisection, opts: &Options) -> Result<()> {
    let runs = dir.join(format!("m{i}"));
    let o = Options {
        runs_dir: runs.clone(),
        ..opts.clone()
    };
    let ms = &st.measurements[i];
    match run_dir(&runs) {
        Some(d) if complete(&d)? => Ok(()),
        Some(d) => pipeline::resume(&d, &o).map(|_| ()),
        None => {
            let mut m = st.matrix.clone();
            m.sampling.boots = ms.rounds;
            m.sampling.seed = m.sampling.seed.wrapping_add(i as u64);
            m.variants = named(&ms.arms)
                .into_iter()
                .map(|(name, p)| variant(st, name, p))
                .collect();
            pipeline::start_fixed(m, &o).map(|_| ())
        }
    }
}

pub(super) fn run_dir(runs: &Path) -> Option<PathBuf> {
    std::fs::read_dir(runs)
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.join("run.json").is_file())
}

/// Every planned boot ended.
fn complete(d: &Path) -> Result<bool> {
    let run = Run::open(d)?;
    let m = run.meta()?.matrix;
    let ended = run
        .events()?
        .iter()
        .filter(|e| matches!(e, Event::BootEnd { .. }))
        .count();
    Ok(ended >= crate::plan::boot_jobs(&m).len())
}

/// Per variant, per round, the boot value (the median of its measured
/// repetitions) of the benchmark's metric, ended boots only.
pub(super) fn by_round(
    samples: &[Sample],
    events: &[Event],
    bench: &str,
    metric: Option<&str>,
    vcpus: u32,
) -> BTreeMap<String, BTreeMap<u32, f64>> {
    let ended: Vec<&str> = events
        .iter()
        .filter_map(|e| {
            if let Event::BootEnd { boot_id: Some(b), .. } = e {
                Some(b.as_str())
            } else {
                None
            }
        })
        .collect();
    let ours =
        |s: &&Sample| s.benchmark == bench && s.vcpus == vcpus && !s.warmup && ended.contains(&s.boot_id.as_str());
    let metric = metric
        .map(str::to_string)
        .or_else(|| samples.iter().find(ours).map(|s| s.metric.clone()));
    let mut reps: BTreeMap<(String, u32), Vec<f64>> = BTreeMap::new();
    for s in samples
        .iter()
        .filter(ours)
        .filter(|s| Some(&s.metric) == metric.as_ref())
    {
        reps.entry((s.variant.clone(), s.boot)).or_default().push(s.value);
    }
    let mut out: BTreeMap<String, BTreeMap<u32, f64>> = BTreeMap::new();
    for ((v, b), x) in reps {
        if let Some(m) = crate::stats::median(&x) {
            out.entry(v).or_default().insert(b, m);
        }
    }
    out
}

/// What one measurement's run adds to the evidence of its arms.
pub(super) fn add(
    seen: &mut Seen,
    arms: &Arms,
    rounds: u32,
    vals: &BTreeMap<String, BTreeMap<u32, f64>>,
    why: &dyn Fn(&str) -> Option<String>,
) {
    seen.rounds += rounds;
    let get = |v: &str, r: u32| vals.get(v).and_then(|m| m.get(&r)).copied();
    let before = seen.blocks.len();
    for r in 0..rounds {
        let (g, b) = (get(GOOD, r), get(BAD, r));
        let c = if arms.cand.is_some() { get(CAND, r) } else { b };
        if let (Some(good), Some(bad), Some(cand)) = (g, b, c) {
            seen.blocks.push(Block { good, bad, cand });
        }
    }
    seen.runs.push(seen.blocks.len() - before);
    let dry = |v: &str| vals.get(v).is_none_or(|m| m.is_empty());
    match [GOOD, BAD].into_iter().find(|v| dry(v)) {
        Some(end) => {
            seen.end_dry += 1;
            seen.why = Some(why(end).unwrap_or_else(|| format!("{end}: no value")));
        }
        None => seen.end_dry = 0,
    }
    if arms.cand.is_some() && dry(CAND) {
        seen.dry += 1;
        seen.why = Some(why(CAND).unwrap_or_else(|| "no value".into()));
    } else if arms.cand.is_some() {
        seen.dry = 0;
    }
}

/// The evidence of every finished measurement, per arms.
pub(super) fn evidence(dir: &Path, st: &Bisection) -> Result<BTreeMap<Arms, Seen>> {
    let mut out: BTreeMap<Arms, Seen> = BTreeMap::new();
    for (i, ms) in st.measurements.iter().enumerate() {
        let Some(d) = run_dir(&dir.join(format!("m{i}"))) else {
            continue;
        };
        let run = Run::open(&d)?;
        let vals = by_round(
            &run.samples()?,
            &run.events()?,
            &st.bench,
            st.metric.as_deref(),
            st.vcpus,
        );
        let failures = crate::trial::failures(&run)?;
        let why = |v: &str| {
            failures
                .iter()
                .find(|f| f.text.starts_with(&format!("{v}:")) || f.text.starts_with(&format!("{v} at ")))
                .map(|f| f.text.clone())
        };
        add(
            out.entry(ms.arms.clone()).or_default(),
            &ms.arms,
            ms.rounds,
            &vals,
            &why,
        );
    }
    Ok(out)
}
