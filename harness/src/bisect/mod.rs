//! `harness bisect`: "which commit did it?" A performance bisection over a
//! git history (or over a series' prefixes, [`History::Series`]), above the
//! pipeline. Each step measures a candidate together with both ends of its
//! segment, booted in randomised blocks within one run, and places it by the
//! share of the good → bad change it carries ([`rule`]); the candidates are
//! chosen on the commit graph by git itself ([`graph`]); a candidate that
//! gives no value is skipped, with its reason, after [`Rule::skip_after`]
//! runs; an "in between" candidate splits its segment and both halves are
//! bisected, so the end is every commit that carries a share, with its share
//! ([`search`]). Every measurement is an ordinary run directory under the
//! bisection's own directory (`<runs>/bisect-<time>/m<i>/`), listed in its
//! `state.json`; the steps are replayed from those runs, so `--resume`
//! finishes an interrupted measurement and goes on where it stopped.

mod evidence;
pub mod graph;
mod io;
pub mod rule;
pub mod search;
#[cfg(test)]
mod sim;
#[cfg(test)]
mod sim_table;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

pub use evidence::{profile_of, profile_or_why};

use crate::config::Matrix;
use crate::pipeline::Options;
use crate::proc::Cmd;
use crate::workdir::WorkDir;

pub use rule::Rule;
pub use search::{Arms, Culprit, Found};

/// What is bisected.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub enum History {
    /// A git tree's commits; a point is a commit id.
    Git {
        /// The tree.
        tree: PathBuf,
    },
    /// A series' prefixes on the matrix's source: point `k` applies the
    /// first `k` patches (the quilt series `patches[k - 1]` in the matrix's
    /// `series_dir`, one per prefix, so each applies to the base alone).
    Series {
        /// The prefix series, shortest first.
        patches: Vec<String>,
        /// Each one's patch file name.
        files: Vec<String>,
        /// The base's git ref, when the series is on one.
        base_ref: Option<String>,
    },
}

/// One measurement: a pipeline run of a segment's ends and a candidate, `m<i>/`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct Measurement {
    /// What it boots.
    pub arms: Arms,
    /// Rounds (one boot of each arm, in a seeded order).
    pub rounds: u32,
}

/// A bisection's `state.json`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct Bisection {
    /// What is bisected.
    pub history: History,
    /// The good point.
    pub good: String,
    /// The bad point.
    pub bad: String,
    /// Benchmark.
    pub bench: String,
    /// Metric (the benchmark's first when not given).
    pub metric: Option<String>,
    /// vCPUs.
    pub vcpus: u32,
    /// The rule.
    pub rule: Rule,
    /// The matrix every measurement is made from (its variants replaced).
    pub matrix: Matrix,
    /// Measurements so far, in order.
    pub measurements: Vec<Measurement>,
}

impl Bisection {
    /// The graph the candidates are chosen on.
    fn graph(&self) -> Box<dyn graph::Graph> {
        match &self.history {
            History::Git { tree } => Box::new(graph::Git { tree: tree.clone() }),
            History::Series { patches, .. } => {
                Box::new(graph::Linear((0..=patches.len()).map(|k| k.to_string()).collect()))
            }
        }
    }
}

/// What `harness bisect` was asked.
#[derive(Debug, Clone)]
pub struct Request {
    /// The git tree.
    pub git: PathBuf,
    /// Good commit-ish.
    pub good: String,
    /// Bad commit-ish.
    pub bad: String,
    /// Benchmark, vCPUs, metric, matrix, profile, clock, floor as for `try`.
    pub trial: crate::trial::Request,
    /// Metric.
    pub metric: Option<String>,
    /// The rule.
    pub rule: Rule,
}

fn git(tree: &Path) -> Cmd {
    Cmd::new("git").arg("-C").arg(tree).capture()
}

/// Sets up a new bisection of a git history under `runs` and returns its directory.
pub fn start(req: &Request, runs: &Path, work: &WorkDir) -> Result<PathBuf> {
    let tree = std::path::absolute(&req.git).context("resolve --git")?;
    let good = crate::kernel::tree::resolve_ref(&tree, &req.good)?;
    let bad = crate::kernel::tree::resolve_ref(&tree, &req.bad)?;
    if good == bad
        || !git(&tree)
            .args(["merge-base", "--is-ancestor", &good, &bad])
            .run()?
            .success()
    {
        bail!(
            "the bad commit {} does not descend from the good one {}",
            req.bad,
            req.good
        );
    }
    let mut m = matrix_for(req, work)?;
    m.kernel.source = tree.clone();
    let (bench, vcpus) = (req.trial.bench[0].clone(), req.trial.vcpus[0]);
    create(
        &Bisection {
            history: History::Git { tree },
            good,
            bad,
            bench,
            metric: req.metric.clone(),
            vcpus,
            rule: req.rule,
            matrix: m,
            measurements: vec![],
        },
        runs,
    )
}

/// Moves the ends of the git bisection in `dir` to `good..bad` (a wider
/// range, when the ends did not differ); its measurements stay, and those
/// whose arms are the new range's (the same commits) are reused. Setting
/// the range it has already changes nothing.
pub fn widen(dir: &Path, good: &str, bad: &str) -> Result<()> {
    let mut st = io::load(dir)?;
    let History::Git { tree } = &st.history else {
        bail!("only a git bisection is widened ({} bisects a series)", dir.display());
    };
    let good = crate::kernel::tree::resolve_ref(tree, good)?;
    let bad = crate::kernel::tree::resolve_ref(tree, bad)?;
    if (st.good.as_str(), st.bad.as_str()) == (good.as_str(), bad.as_str()) {
        return Ok(());
    }
    for (from, to) in [(&good, &st.good), (&st.bad, &bad)] {
        if from != to
            && !git(tree)
                .args(["merge-base", "--is-ancestor", from, to])
                .run()?
                .success()
        {
            bail!(
                "widen {} to {good}..{bad}: {to} does not descend from {from}",
                dir.display()
            );
        }
    }
    (st.good, st.bad) = (good, bad);
    io::save(dir, &st)
}

/// Sets up a bisection over the prefixes of a `try` matrix's series (its
/// base and the base with the series, [`crate::trial::matrix`]): the
/// first `k` patches become the series `pNN` (NN = k) beside it.
pub fn start_series(mut m: Matrix, metric: Option<String>, rule: Rule, runs: &Path) -> Result<PathBuf> {
    if m.vcpus.len() != 1 || m.benchmarks.len() != 1 {
        bail!("--per-patch needs one --bench and one --vcpus count");
    }
    let s = crate::kernel::patch::load_series(&m.series_dir, crate::trial::SERIES)?;
    if s.patches.is_empty() {
        bail!("the series has no patches");
    }
    let (mut patches, mut files, mut prefix) = (vec![], vec![], vec![]);
    for (k, p) in s.patches.iter().enumerate() {
        let file = p
            .file_name()
            .map(|f| f.to_string_lossy().into_owned())
            .unwrap_or_default();
        prefix.push((
            file.clone(),
            std::fs::read(p).with_context(|| format!("read {}", p.display()))?,
        ));
        let name = format!("p{:02}", k + 1);
        crate::kernel::series::write_quilt(&prefix, &m.series_dir, &name)?;
        patches.push(name);
        files.push(file);
    }
    let base_ref = m.variants.first().and_then(|v| v.git_ref.clone());
    m.profile = Some(format!("{}-per-patch", m.profile.as_deref().unwrap_or("try")));
    let (bench, vcpus, bad) = (m.benchmarks[0].name.clone(), m.vcpus[0], patches.len().to_string());
    create(
        &Bisection {
            history: History::Series {
                patches,
                files,
                base_ref,
            },
            good: "0".into(),
            bad,
            bench,
            metric,
            vcpus,
            rule,
            matrix: m,
            measurements: vec![],
        },
        runs,
    )
}

/// The matrix of a request (one benchmark, one vCPU count), profile `bisect`.
fn matrix_for(req: &Request, work: &WorkDir) -> Result<Matrix> {
    if req.trial.vcpus.len() != 1 || req.trial.bench.len() != 1 {
        bail!("bisect needs one --bench and one --vcpus count");
    }
    let mut m = crate::trial::base_matrix(&req.trial, work)?;
    if let Some(why) = m.benchmarks.iter().find_map(crate::config::missing_program) {
        bail!("{why}");
    }
    m.profile = Some("bisect".into());
    Ok(m)
}

/// Writes a new bisection directory for `st`.
fn create(st: &Bisection, runs: &Path) -> Result<PathBuf> {
    let dir = runs.join(format!("bisect-{}", crate::util::stamp()));
    std::fs::create_dir_all(&dir).with_context(|| format!("create {}", dir.display()))?;
    // the per-arm run offset the rule allows for: icount's measured bound, else the wall clock's
    let mut st = st.clone();
    if st.matrix.guest.clock == crate::config::Clock::Icount {
        st.rule.run_offset = rule::ICOUNT_OFFSET;
    }
    io::save(&dir, &st)?;
    Ok(dir)
}

/// Runs (or resumes) the bisection in `dir` to its end, printing the rule
/// and each decided step once.
pub fn run(dir: &Path, opts: &Options, say: &dyn Fn(&str)) -> Result<Found> {
    let mut st = io::load(dir)?;
    say(&st.rule.text());
    let g = st.graph();
    let mut printed: Vec<String> = vec![];
    loop {
        // finish every measurement listed (an interrupted one is resumed)
        for i in 0..st.measurements.len() {
            io::measure(dir, i, &st, opts)?;
        }
        let ev: BTreeMap<Arms, search::Seen> = io::evidence(dir, &st)?;
        let mut lines = vec![];
        let next = search::next(&*g, &st.good, &st.bad, &ev, &st.rule, &mut lines)?;
        for l in lines {
            if !printed.contains(&l) {
                say(&l);
                printed.push(l);
            }
        }
        match next {
            search::Next::Done(f) => return Ok(f),
            search::Next::Measure(arms) => {
                st.measurements.push(Measurement {
                    arms,
                    rounds: st.rule.batch,
                });
                io::save(dir, &st)?;
            }
        }
    }
}

/// How the end names one culprit (`subject`: its `<id> <subject>`;
/// `skipped`: the skipped commits next to it, as printed; `sole`: it alone
/// carries the change and nothing is left open). A first bad commit is
/// named only when no skipped commit could be it instead; otherwise, as
/// `git bisect` says with skips, the first bad commit is one of them.
pub fn culprit_line(subject: &str, share: f64, skipped: &[String], sole: bool) -> String {
    let pct = share * 100.0;
    if !skipped.is_empty() {
        let one_of: Vec<String> = skipped
            .iter()
            .map(|m| format!("{m} (skipped: could not be measured)"))
            .chain([subject.to_string()])
            .collect();
        format!(
            "the first bad commit is one of: {} (together they carry {pct:.0}% of the change)",
            one_of.join(", ")
        )
    } else if sole {
        format!("first bad commit: {subject} (carries {pct:.0}% of the change)")
    } else {
        format!("carries {pct:.0}% of the change: {subject}")
    }
}

/// `<id> <subject>` of a point: a commit's, or a series prefix's last patch.
pub fn describe(dir: &Path, point: &str) -> String {
    match io::load(dir).map(|s| s.history) {
        Ok(History::Git { tree }) => git(&tree)
            .args(["log", "-1", "--format=%h %s", point])
            .run()
            .map(|f| f.output.trim().to_string())
            .unwrap_or_else(|_| point.to_string()),
        Ok(History::Series { files, .. }) => match point.parse::<usize>() {
            Ok(k) if k >= 1 && k <= files.len() => format!("patch {k}/{}: {}", files.len(), files[k - 1]),
            _ => point.to_string(),
        },
        Err(_) => point.to_string(),
    }
}

/// The measurement runs that booted `point` as the candidate or as the bad
/// end, the latest (narrowest segment) first, each with the variant name it
/// had there; the good end is `base`, so a differential profile of that
/// variant against base shows what `point` changed against the good end.
pub fn runs_of(dir: &Path, point: &str) -> Result<Vec<(PathBuf, &'static str)>> {
    let st = io::load(dir)?;
    let arm = |a: &Arms| match (a.cand.as_deref(), a.bad.as_str()) {
        (Some(c), _) if c == point => Some(io::CAND),
        (_, b) if b == point => Some(io::BAD),
        _ => None,
    };
    Ok(st
        .measurements
        .iter()
        .enumerate()
        .rev()
        .filter_map(|(i, ms)| Some((io::run_dir(&dir.join(format!("m{i}")))?, arm(&ms.arms)?)))
        .collect())
}

/// The matrix file of a bisection directory.
pub fn matrix_of(dir: &Path) -> Result<PathBuf> {
    Ok(io::load(dir)?.matrix.path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn per_patch_bisects_the_prefixes_and_names_the_middle_patch() {
        let tmp = tempfile::tempdir().unwrap();
        let mut m = crate::config::parse(
            "variants:\n  - name: base\nvcpus: [2]\nbenchmarks:\n  - {name: d, kind: doexec}\n",
            &tmp.path().join("matrix.yaml"),
            None,
        )
        .unwrap();
        m.series_dir = tmp.path().join("patches");
        let p = |n: &str| {
            (
                format!("000{n}-{n}.patch"),
                format!("--- a/f{n}.c\n+++ b/f{n}.c\n@@ -1 +1 @@\n-a\n+b\n").into_bytes(),
            )
        };
        crate::kernel::series::write_quilt(&[p("1"), p("2"), p("3")], &m.series_dir, crate::trial::SERIES).unwrap();
        // simulated values without run offsets: none allowed for
        let rule = Rule {
            run_offset: 0.0,
            ..Rule::default()
        };
        let dir = start_series(m, None, rule, &tmp.path().join("runs")).unwrap();
        let st = io::load(&dir).unwrap();
        assert_eq!(
            (st.good.as_str(), st.bad.as_str(), st.bench.as_str(), st.vcpus),
            ("0", "3", "d", 2)
        );
        // point k applies the prefix of k patches, one series each
        assert_eq!(io::variant(&st, "mid", "2").apply, ["p02"]);
        assert!(io::variant(&st, "base", "0").apply.is_empty());
        let p02 = crate::kernel::patch::load_series(&st.matrix.series_dir, "p02").unwrap();
        assert_eq!(
            p02.patches
                .iter()
                .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
                .collect::<Vec<_>>(),
            ["0001-1.patch", "0002-2.patch"]
        );
        // the middle patch is the slowdown: the prefixes of 2 and 3 patches are slow
        let g = st.graph();
        let mut ev: BTreeMap<Arms, search::Seen> = BTreeMap::new();
        let value = |pt: &str, r: u32| if pt >= "2" { 97.0 } else { 100.0 } * (1.0 + [0.001, -0.002, 0.0015, 0.0, -0.001][r as usize % 5] * if pt == "1" { -1.0 } else { 1.0 });
        let found = loop {
            match search::next(&*g, &st.good, &st.bad, &ev, &st.rule, &mut vec![]).unwrap() {
                search::Next::Done(f) => break f,
                search::Next::Measure(a) => {
                    let seen = ev.entry(a.clone()).or_default();
                    seen.rounds += st.rule.batch;
                    for r in 0..st.rule.batch {
                        let c = a.cand.as_deref().unwrap_or(&a.bad);
                        seen.blocks.push(rule::Block {
                            good: value(&a.good, r),
                            bad: value(&a.bad, r),
                            cand: value(c, r),
                        });
                    }
                }
            }
        };
        assert_eq!(
            found.culprits.iter().map(|c| c.commit.as_str()).collect::<Vec<_>>(),
            ["2"],
            "{found:?}"
        );
        assert_eq!(describe(&dir, "2"), "patch 2/3: 0002-2.patch");
        let mut one = crate::config::parse(
            "variants:\n  - name: base\nvcpus: [2, 4]\nbenchmarks:\n  - {name: d, kind: doexec}\n",
            &tmp.path().join("matrix.yaml"),
            None,
        )
        .unwrap();
        one.series_dir = tmp.path().join("patches");
        let e = format!(
            "{:#}",
            start_series(one, None, Rule::default(), tmp.path()).unwrap_err()
        );
        assert_eq!(e, "--per-patch needs one --bench and one --vcpus count");
    }

    #[test]
    fn a_culprit_next_to_a_skipped_commit_is_one_of_them() {
        let skipped = ["c4 exec: does not build".to_string()];
        for (subject, share, skipped, sole, want) in [
            ("c5 x", 1.0, &[][..], true, "first bad commit: c5 x (carries 100% of the change)"),
            ("c5 x", 0.52, &[][..], false, "carries 52% of the change: c5 x"),
            (
                "c5 x",
                1.0,
                &skipped[..],
                true,
                "the first bad commit is one of: c4 exec: does not build (skipped: could not be measured), c5 x (together they carry 100% of the change)",
            ),
            (
                "c5 x",
                0.5,
                &skipped[..],
                false,
                "the first bad commit is one of: c4 exec: does not build (skipped: could not be measured), c5 x (together they carry 50% of the change)",
            ),
        ] {
            assert_eq!(culprit_line(subject, share, skipped, sole), want);
        }
    }
}
