//! `harness bisect`: "which commit did it?" A performance bisection over a
//! git history, above the pipeline. The two ends are measured first (k boots
//! each); then at each step the midpoint is built (the kernel cache keys on
//! the commit), booted in batches, and judged by a sequential rule over the
//! boot values (Mann-Whitney against each end, [`judge`]): like good, like
//! bad, more boots, or undecided — an undecided step stops the bisection; it
//! is never guessed. Every measurement is an ordinary run directory under
//! the bisection's own directory (`<runs>/bisect-<time>/m<i>/`), listed in
//! its `state.json`; the steps are replayed from those runs, so `--resume`
//! finishes an interrupted measurement and goes on where it stopped.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

use crate::config::{Matrix, Variant};
use crate::pipeline::{self, Options};
use crate::proc::Cmd;
use crate::stats;
use crate::store::Run;

/// The sequential rule's parameters.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
pub struct Rule {
    /// Boots of each end.
    pub end_boots: u32,
    /// Boots added to a midpoint per look.
    pub batch: u32,
    /// Most boots a midpoint gets.
    pub max_boots: u32,
    /// Overall level; each look tests at `alpha / looks`.
    pub alpha: f64,
}

impl Rule {
    /// Looks a midpoint can get.
    pub fn looks(&self) -> u32 {
        self.max_boots.div_ceil(self.batch).max(1)
    }

    /// The level of each test at each look (Bonferroni over the looks).
    pub fn level(&self) -> f64 {
        self.alpha / self.looks() as f64
    }

    /// The rule in words, printed with every bisection.
    pub fn text(&self) -> String {
        format!(
            "rule: good and bad are measured with {e} boots each and must differ (two-sided Mann-Whitney p <= {l:.4}); \
             a midpoint gets boots in batches of {b}, at most {m}; after each batch it is like bad when it differs from good \
             (p <= {l:.4}), not from bad (p > {l:.4}) and its median is nearer bad's, like good the other way round; \
             differing from both, or neither after {m} boots, is undecided and stops the bisection \
             ({l:.4} = alpha {a} / {k} looks)",
            e = self.end_boots,
            b = self.batch,
            m = self.max_boots,
            l = self.level(),
            a = self.alpha,
            k = self.looks()
        )
    }
}

/// What a midpoint looks like.
#[derive(Debug, Clone, PartialEq)]
pub enum Call {
    /// Like the good end.
    Good,
    /// Like the bad end.
    Bad,
    /// Needs another batch of boots.
    More,
    /// Cannot be decided (why).
    Undecided(String),
}

/// The evidence of one look: the midpoint's median and its p against each end.
#[derive(Debug, Clone, PartialEq)]
pub struct Evidence {
    /// Boots of the midpoint.
    pub n: usize,
    /// Its median.
    pub median: f64,
    /// Mann-Whitney p against good.
    pub p_good: f64,
    /// Mann-Whitney p against bad.
    pub p_bad: f64,
}

fn median(x: &[f64]) -> f64 {
    stats::median(x).unwrap_or(f64::NAN)
}

/// The sequential rule at one look (see [`Rule::text`]).
pub fn judge(good: &[f64], bad: &[f64], mid: &[f64], rule: &Rule) -> (Call, Evidence) {
    let p = |a: &[f64], b: &[f64]| stats::mann_whitney_u(a, b).map(|m| m.p).unwrap_or(1.0);
    let ev = Evidence { n: mid.len(), median: median(mid), p_good: p(mid, good), p_bad: p(mid, bad) };
    let l = rule.level();
    let nearer_bad = (ev.median - median(bad)).abs() < (ev.median - median(good)).abs();
    let call = match (ev.p_good <= l, ev.p_bad <= l) {
        (true, false) if nearer_bad => Call::Bad,
        (false, true) if !nearer_bad => Call::Good,
        (true, true) => Call::Undecided(format!("it differs from both ends (p {:.4} against good, {:.4} against bad): more than one change, or a change in between", ev.p_good, ev.p_bad)),
        _ if mid.len() as u32 >= rule.max_boots => Call::Undecided(format!("after {} boots it is distinguishable from neither end", mid.len())),
        _ => Call::More,
    };
    (call, ev)
}

/// One measurement: a pipeline run of some commits, `m<i>/` in the bisection directory.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Measurement {
    /// (variant name, commit id) per arm.
    pub arms: Vec<(String, String)>,
    /// Boots per arm.
    pub boots: u32,
}

/// A bisection's `state.json`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct State {
    /// The git tree.
    pub git: PathBuf,
    /// The good commit id.
    pub good: String,
    /// The bad commit id.
    pub bad: String,
    /// The commits after good up to bad (bad last), oldest first.
    pub commits: Vec<String>,
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

/// Sets up a new bisection directory under `runs` and returns it.
pub fn start(req: &Request, runs: &Path, work: &Path) -> Result<PathBuf> {
    let tree = std::path::absolute(&req.git).context("resolve --git")?;
    let good = crate::kernel::tree::resolve_ref(&tree, &req.good)?;
    let bad = crate::kernel::tree::resolve_ref(&tree, &req.bad)?;
    let list = git(&tree).args(["rev-list", "--reverse", "--ancestry-path", &format!("{good}..{bad}")]).run_ok().context("list the commits from good to bad")?;
    let commits: Vec<String> = list.output.lines().map(str::to_string).collect();
    if commits.last() != Some(&bad) {
        bail!("the bad commit {} does not descend from the good one {}", req.bad, req.good);
    }
    if req.trial.vcpus.len() != 1 || req.trial.bench.len() != 1 {
        bail!("bisect needs one --bench and one --vcpus count");
    }
    let mut m = crate::trial::base_matrix(&req.trial, work)?;
    m.kernel.source = tree.clone();
    m.profile = Some("bisect".into());
    let state = State {
        git: tree,
        good,
        bad,
        commits,
        bench: req.trial.bench[0].clone(),
        metric: req.metric.clone(),
        vcpus: req.trial.vcpus[0],
        rule: req.rule,
        matrix: m,
        measurements: vec![],
    };
    let dir = runs.join(format!("bisect-{}", crate::util::stamp()));
    std::fs::create_dir_all(&dir).with_context(|| format!("create {}", dir.display()))?;
    save(&dir, &state)?;
    Ok(dir)
}

fn save(dir: &Path, s: &State) -> Result<()> {
    let p = dir.join("state.json");
    let tmp = p.with_extension("tmp");
    std::fs::write(&tmp, serde_json::to_vec_pretty(s)?).with_context(|| format!("write {}", tmp.display()))?;
    std::fs::rename(&tmp, &p).with_context(|| format!("write {}", p.display()))
}

fn load(dir: &Path) -> Result<State> {
    let p = dir.join("state.json");
    serde_json::from_slice(&std::fs::read(&p).with_context(|| format!("read {}", p.display()))?).with_context(|| format!("read {}", p.display()))
}

/// How a bisection ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// The first bad commit.
    FirstBad(String),
    /// Stopped at an undecided step (why).
    Undecided(String),
}

/// Runs (or resumes) the bisection in `dir` to its end, printing each
/// step's evidence.
pub fn run(dir: &Path, opts: &Options, say: &dyn Fn(&str)) -> Result<Outcome> {
    let mut st = load(dir)?;
    say(&st.rule.text());
    loop {
        // finish every measurement listed (an interrupted one is resumed)
        for i in 0..st.measurements.len() {
            measure(dir, i, &st, opts)?;
        }
        let values = evidence(dir, &st)?;
        match next(&st, &values, say)? {
            Next::Done(o) => return Ok(o),
            Next::Measure(m) => {
                st.measurements.push(m);
                save(dir, &st)?;
            }
        }
    }
}

enum Next {
    Done(Outcome),
    Measure(Measurement),
}

/// Replays the bisection over the evidence so far: the outcome, or the
/// measurement it needs next.
fn next(st: &State, values: &BTreeMap<String, Vec<f64>>, say: &dyn Fn(&str)) -> Result<Next> {
    let get = |c: &String| values.get(c).cloned().unwrap_or_default();
    let (good, bad) = (get(&st.good), get(&st.bad));
    if good.is_empty() || bad.is_empty() {
        let arms = vec![("base".to_string(), st.good.clone()), ("bad".to_string(), st.bad.clone())];
        return Ok(Next::Measure(Measurement { arms, boots: st.rule.end_boots }));
    }
    let p_ends = stats::mann_whitney_u(&good, &bad).map(|m| m.p).unwrap_or(1.0);
    say(&ends_line(st, &good, &bad, p_ends));
    if p_ends > st.rule.level() {
        return Ok(Next::Done(Outcome::Undecided(format!("good and bad are not distinguishable (p {p_ends:.4} > {:.4}): nothing to bisect at this clock and boot count", st.rule.level()))));
    }
    let (mut lo, mut hi) = (-1i64, st.commits.len() as i64 - 1);
    let mut step = 0u32;
    while hi - lo > 1 {
        step += 1;
        let mid = ((lo + hi) / 2) as usize;
        let c = &st.commits[mid];
        let v = get(c);
        let left = hi - lo - 1;
        if v.is_empty() {
            return Ok(Next::Measure(Measurement { arms: vec![("base".into(), c.clone())], boots: st.rule.batch }));
        }
        let (call, ev) = judge(&good, &bad, &v, &st.rule);
        say(&step_line(step, c, left, &ev, &call));
        match call {
            Call::Good => lo = mid as i64,
            Call::Bad => hi = mid as i64,
            Call::More => return Ok(Next::Measure(Measurement { arms: vec![("base".into(), c.clone())], boots: st.rule.batch })),
            Call::Undecided(why) => return Ok(Next::Done(Outcome::Undecided(format!("step {step} at {}: {why}", short(c))))),
        }
    }
    Ok(Next::Done(Outcome::FirstBad(st.commits[hi as usize].clone())))
}

/// The ends' evidence, as each bisection prints it.
fn ends_line(st: &State, good: &[f64], bad: &[f64], p_ends: f64) -> String {
    format!(
        "ends: good {} median {:.4} ({} boots), bad {} median {:.4} ({} boots), change {:+.2}%, p {:.4}",
        short(&st.good),
        median(good),
        good.len(),
        short(&st.bad),
        median(bad),
        bad.len(),
        (median(bad) / median(good) - 1.0) * 100.0,
        p_ends
    )
}

/// One look at a midpoint, as each bisection prints it.
fn step_line(step: u32, c: &str, left: i64, ev: &Evidence, call: &Call) -> String {
    let said = match call {
        Call::Good => "like good".to_string(),
        Call::Bad => "like bad".to_string(),
        Call::More => "more boots".to_string(),
        Call::Undecided(why) => format!("undecided: {why}"),
    };
    format!(
        "step {step}: {} ({left} commit(s) left) {} boots, median {:.4}, p {:.4} against good, {:.4} against bad: {said}",
        short(c),
        ev.n,
        ev.median,
        ev.p_good,
        ev.p_bad
    )
}

fn short(c: &str) -> &str {
    &c[..c.len().min(12)]
}

/// Finishes measurement `i` (`m<i>/`): starts its run, or resumes it.
fn measure(dir: &Path, i: usize, st: &State, opts: &Options) -> Result<()> {
    let runs = dir.join(format!("m{i}"));
    let existing = run_dir(&runs);
    let o = Options { runs_dir: runs.clone(), ..opts.clone() };
    let ms = &st.measurements[i];
    match existing {
        Some(d) if complete(&d)? => Ok(()),
        Some(d) => pipeline::resume(&d, &o).map(|_| ()),
        None => {
            let mut m = st.matrix.clone();
            m.sampling.boots = ms.boots;
            m.sampling.seed = m.sampling.seed.wrapping_add(i as u64);
            let b = m.benchmarks.iter().map(|b| b.name.clone()).collect::<Vec<_>>();
            m.variants = ms
                .arms
                .iter()
                .map(|(name, c)| Variant { name: name.clone(), apply: vec![], revert: vec![], fragments: vec![], benchmarks: b.clone(), git_ref: Some(c.clone()) })
                .collect();
            pipeline::start(m, &o).map(|_| ())
        }
    }
}

fn run_dir(runs: &Path) -> Option<PathBuf> {
    std::fs::read_dir(runs).ok()?.filter_map(|e| e.ok().map(|e| e.path())).find(|p| p.join("run.json").is_file())
}

/// Every planned boot ended.
fn complete(d: &Path) -> Result<bool> {
    let run = Run::open(d)?;
    let m = run.meta()?.matrix;
    let ended = run.events()?.iter().filter(|e| matches!(e, crate::records::Event::BootEnd { .. })).count();
    Ok(ended >= crate::plan::boot_jobs(&m).len())
}

/// Boot values per commit over every finished measurement.
fn evidence(dir: &Path, st: &State) -> Result<BTreeMap<String, Vec<f64>>> {
    let mut out: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for (i, ms) in st.measurements.iter().enumerate() {
        let Some(d) = run_dir(&dir.join(format!("m{i}"))) else { continue };
        let run = Run::open(&d)?;
        let r = crate::report::build_from(&run.meta()?, &run.samples()?, &run.events()?, &crate::report::Floors::none("bisect"));
        let row = r
            .rows
            .iter()
            .find(|row| row.benchmark == st.bench && row.vcpus == st.vcpus && st.metric.as_ref().is_none_or(|m| *m == row.metric))
            .with_context(|| format!("find {} at {} vCPUs in {}", st.bench, st.vcpus, d.display()))?;
        for (name, commit) in &ms.arms {
            if let Some(cell) = row.cells.iter().find(|c| &c.variant == name) {
                out.entry(commit.clone()).or_default().extend(&cell.boots);
            }
        }
    }
    Ok(out)
}

/// `<id> <subject>` of a commit.
pub fn describe(tree: &Path, commit: &str) -> String {
    git(tree).args(["log", "-1", "--format=%h %s", commit]).run().map(|f| f.output.trim().to_string()).unwrap_or_else(|_| commit.to_string())
}

/// The git tree and the matrix file of a bisection directory.
pub fn tree_of(dir: &Path) -> Result<(PathBuf, PathBuf)> {
    let s = load(dir)?;
    Ok((s.git, s.matrix.path))
}

#[cfg(test)]
mod tests {
    use super::*;

    const RULE: Rule = Rule { end_boots: 5, batch: 5, max_boots: 15, alpha: 0.05 };

    #[test]
    fn the_rule_calls_good_bad_more_and_undecided() {
        let good = [100.0, 100.2, 99.9, 100.1, 100.05];
        let bad = [99.0, 98.9, 99.1, 99.05, 98.95];
        assert!((RULE.level() - 0.05 / 3.0).abs() < 1e-12);
        assert_eq!(judge(&good, &bad, &[98.97, 99.02, 99.08, 98.92, 99.0], &RULE).0, Call::Bad);
        assert_eq!(judge(&good, &bad, &[100.03, 100.12, 99.95, 100.15, 100.0], &RULE).0, Call::Good);
        // three boots cannot reach the level (smallest p 3 vs 5 is 0.036): more
        assert_eq!(judge(&good, &bad, &[98.97, 99.02, 99.08], &RULE).0, Call::More);
        // halfway: differs from both
        let (call, ev) = judge(&good, &bad, &[99.5, 99.52, 99.48, 99.51, 99.49], &RULE);
        assert!(matches!(call, Call::Undecided(ref w) if w.starts_with("it differs from both ends")), "{call:?} {ev:?}");
        // noise as wide as the change, at the most boots: undecided, never guessed
        let wide: Vec<f64> = (0..15).map(|i| 98.5 + (i % 5) as f64 * 0.4).collect();
        let (call, _) = judge(&good, &bad, &wide, &RULE);
        assert!(matches!(call, Call::Undecided(_) | Call::Bad | Call::Good) && call != Call::More, "{call:?}");
        assert!(RULE.text().contains("at most 15"));
    }

    #[test]
    fn a_step_prints_its_evidence_and_call() {
        let ev = Evidence { n: 5, median: 99.0, p_good: 0.0079, p_bad: 0.55 };
        assert_eq!(
            step_line(2, "0123456789abcdef", 3, &ev, &Call::Bad),
            "step 2: 0123456789ab (3 commit(s) left) 5 boots, median 99.0000, p 0.0079 against good, 0.5500 against bad: like bad"
        );
        assert!(step_line(1, "c", 1, &ev, &Call::Undecided("why".into())).ends_with(": undecided: why"));
    }

    #[test]
    fn the_replay_walks_to_the_first_bad_commit_and_asks_for_what_it_lacks() {
        let m = crate::config::parse("variants:\n  - name: base\nvcpus: [2]\nbenchmarks:\n  - {name: d, kind: doexec}\n", Path::new("/m/matrix.yaml"), None).unwrap();
        let commits: Vec<String> = (1..=6).map(|i| format!("c{i}")).collect();
        let st = State { git: "/g".into(), good: "c0".into(), bad: "c6".into(), commits, bench: "d".into(), metric: None, vcpus: 2, rule: RULE, matrix: m, measurements: vec![] };
        let (good, bad) = (vec![100.0, 100.2, 99.9, 100.1, 100.05], vec![99.0, 98.9, 99.1, 99.05, 98.95]);
        // the regression is c4: c1..c3 like good, c4..c6 like bad
        let mut values: BTreeMap<String, Vec<f64>> = BTreeMap::new();
        let quiet = |_: &str| {};
        match next(&st, &values, &quiet).unwrap() {
            Next::Measure(ms) => assert_eq!(ms.arms, vec![("base".to_string(), "c0".to_string()), ("bad".to_string(), "c6".to_string())]),
            Next::Done(o) => panic!("{o:?}"),
        }
        values.insert("c0".into(), good.clone());
        values.insert("c6".into(), bad.clone());
        let mut asked = vec![];
        loop {
            match next(&st, &values, &quiet).unwrap() {
                Next::Measure(ms) => {
                    let c = ms.arms[0].1.clone();
                    let n: u32 = c[1..].parse().unwrap();
                    values.insert(c.clone(), if n >= 4 { bad.clone() } else { good.clone() });
                    asked.push(c);
                }
                Next::Done(o) => {
                    assert_eq!(o, Outcome::FirstBad("c4".into()));
                    break;
                }
            }
        }
        assert_eq!(asked, ["c3", "c4"], "log2 steps, midpoints only");
        values.insert("c6".into(), good.clone());
        match next(&st, &values, &quiet).unwrap() {
            Next::Done(Outcome::Undecided(w)) => assert!(w.starts_with("good and bad are not distinguishable"), "{w}"),
            _ => panic!("ends that agree must stop the bisection"),
        }
    }
}
