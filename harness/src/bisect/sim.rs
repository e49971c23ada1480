//! Seeded simulations of the bisection (tests only): a history (16 commits
//! after good on one line, or a graph with a merged branch), boot values
//! with a boot spread `σ`, a change between good and bad, a run-to-run
//! offset common to a run's boots, an offset per arm and run (each arm's
//! boots of one run share it: it does not cancel within a block), a commit
//! that cannot be built, and where the change lies (one culprit, two, a
//! gradual change, culprits on two branches). The table in
//! docs/reproduce.md comes from `bisection_error_rates` in `sim_table.rs`
//! (see its comment for the command).

use std::collections::{BTreeMap, BTreeSet};

use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::graph::{Dag, Graph, Linear};
use super::rule::{Block, Rule};
use super::search::{next, Arms, Found, Next, Seen};

/// Commits after good on a line; the last is bad.
pub const COMMITS: usize = 16;

/// The noise of a simulated clock (all relative).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Clock {
    /// Boot-to-boot spread (sd).
    pub sigma: f64,
    /// The change from good to bad.
    pub step: f64,
    /// An offset common to every boot of a run (sd).
    pub run_sd: f64,
    /// An offset of each arm in each run, shared by that arm's boots of the run (sd).
    pub arm_sd: f64,
}

/// A wall clock: 1% boot spread, a 3σ change.
pub const WALL: Clock = Clock {
    sigma: 0.01,
    step: 0.03,
    run_sd: 0.0,
    arm_sd: 0.0,
};

/// The instruction-counting clock: 0.05% boot spread (docs/clocks.md), a
/// 1.7% change (the exec cost of the recorded merge bisection).
pub const ICOUNT: Clock = Clock {
    sigma: 0.0005,
    step: 0.017,
    run_sd: 0.0,
    arm_sd: 0.0,
};

impl Clock {
    /// This clock with a run offset common to a run's boots of `run` σ.
    pub fn run(self, run: f64) -> Clock {
        Clock {
            run_sd: run * self.sigma,
            ..self
        }
    }

    /// This clock with a per-arm run offset of `arm` (relative sd).
    pub fn arm(self, arm: f64) -> Clock {
        Clock { arm_sd: arm, ..self }
    }
}

fn normal(rng: &mut ChaCha8Rng) -> f64 {
    let u1: f64 = 1.0 - rng.random::<f64>();
    let u2: f64 = rng.random::<f64>();
    (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
}

fn index(c: &str) -> usize {
    c[1..].parse().unwrap()
}

/// Where the change lies on a line: the share of it commit `i` (0 good .. 16 bad) carries in all.
pub type Profile = dyn Fn(usize) -> f64;

/// A simulated history: its graph, its ends, the share of the good → bad
/// change each commit shows, and the commits that carry a share.
pub struct History {
    graph: Box<dyn Graph>,
    /// The good end.
    pub good: String,
    /// The bad end.
    pub bad: String,
    share: Box<dyn Fn(&str) -> f64>,
    /// The commits of good..bad that carry a share.
    pub culprits: BTreeSet<String>,
}

impl History {
    /// c0 (good) .. c16 (bad) on one line; commit `i` shows `frac(i)` of the change.
    pub fn linear(frac: Box<Profile>) -> History {
        let culprits = (1..=COMMITS)
            .filter(|&i| frac(i) != frac(i - 1))
            .map(|i| format!("c{i}"))
            .collect();
        History {
            graph: Box::new(Linear((0..=COMMITS).map(|i| format!("c{i}")).collect())),
            good: "c0".into(),
            bad: format!("c{COMMITS}"),
            share: Box::new(move |c| frac(index(c))),
            culprits,
        }
    }

    /// A commit graph: each of `shares` (commit, share) is shown by the
    /// commit and every commit that descends from it; one that good
    /// descends from moves good too, and is no culprit of good..bad.
    pub fn graph(dag: Dag, good: &str, bad: &str, shares: &[(&str, f64)]) -> History {
        let ancestors: BTreeMap<String, BTreeSet<String>> =
            dag.0.keys().map(|c| (c.clone(), dag.ancestors(c))).collect();
        let of_good = &ancestors[good];
        let culprits = shares
            .iter()
            .map(|(c, _)| c.to_string())
            .filter(|c| !of_good.contains(c))
            .collect();
        let shares: Vec<(String, f64)> = shares.iter().map(|(c, f)| (c.to_string(), *f)).collect();
        let share = move |c: &str| -> f64 {
            let a = &ancestors[c];
            shares.iter().filter(|(x, _)| a.contains(x)).map(|(_, f)| f).sum()
        };
        History {
            graph: Box::new(dag),
            good: good.into(),
            bad: bad.into(),
            share: Box::new(share),
            culprits,
        }
    }
}

/// What is simulated: the history, the clock, a commit that cannot be built.
pub struct Case<'a> {
    /// The history and where the change lies in it.
    pub history: &'a History,
    /// The clock's noise.
    pub clock: Clock,
    /// A commit whose build fails: it gives no value.
    pub unbuildable: Option<&'a str>,
}

/// One run of `arms`: `rule.batch` rounds with the run's offsets, added to `seen`.
fn run_once(case: &Case, arms: &Arms, seen: &mut Seen, rule: &Rule, rng: &mut ChaCha8Rng) {
    let k = case.clock;
    let off = k.run_sd * normal(rng);
    // drawn only when asked for, so the rows without them keep their seeded figures
    let arm_off = if k.arm_sd > 0.0 {
        [k.arm_sd * normal(rng), k.arm_sd * normal(rng), k.arm_sd * normal(rng)]
    } else {
        [0.0; 3]
    };
    let share = &case.history.share;
    let mut value =
        |c: &str, arm: usize| 100.0 * (1.0 - k.step * share(c)) * (1.0 + off + arm_off[arm] + k.sigma * normal(rng));
    let dry = arms.cand.is_some() && arms.cand.as_deref() == case.unbuildable;
    let before = seen.blocks.len();
    for _ in 0..rule.batch {
        let (g, b) = (value(&arms.good, 0), value(&arms.bad, 1));
        let c = match arms.cand.as_deref() {
            Some(c) if !dry => value(c, 2),
            Some(_) => continue,
            None => b,
        };
        seen.blocks.push(Block {
            good: g,
            bad: b,
            cand: c,
        });
    }
    seen.runs.push(seen.blocks.len() - before);
    seen.rounds += rule.batch;
    if dry {
        seen.dry += 1;
        seen.why = Some("mid: build: error".into());
    } else if arms.cand.is_some() {
        seen.dry = 0;
    }
}

/// One simulated bisection: what it found and the boots it took.
pub fn bisect_once(case: &Case, rule: &Rule, rng: &mut ChaCha8Rng) -> (Found, u32) {
    let h = case.history;
    let mut ev: BTreeMap<Arms, Seen> = BTreeMap::new();
    let mut boots = 0;
    loop {
        match next(&*h.graph, &h.good, &h.bad, &ev, rule, &mut vec![]).unwrap() {
            Next::Done(f) => return (f, boots),
            Next::Measure(arms) => {
                run_once(case, &arms, ev.entry(arms.clone()).or_default(), rule, rng);
                let built = arms.cand.is_some() && arms.cand.as_deref() != case.unbuildable;
                boots += rule.batch * if built { 3 } else { 2 };
            }
        }
    }
}

/// Rates over `n` bisections.
#[derive(Debug, Default, Clone, Copy)]
pub struct Rates {
    /// A commit named that carries no share (and no skipped commit given
    /// beside it carries one).
    pub wrong: f64,
    /// Every culprit named (or given as a skipped commit beside the one
    /// named) and nothing else.
    pub all: f64,
    /// Some of the culprits named, nothing wrong.
    pub some: f64,
    /// Nothing named.
    pub none: f64,
    /// One "first bad commit" named, nothing else and nothing left open.
    pub single: f64,
    /// A named commit with a skipped commit beside it that carries the share
    /// (the honest range "one of: X (skipped), Y").
    pub range: f64,
    /// Mean boots per bisection.
    pub boots: f64,
}

/// The rates of `n` seeded bisections.
pub fn rates(case: &Case, rule: &Rule, n: usize, seed: u64) -> Rates {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let culprits = &case.history.culprits;
    let mut r = Rates::default();
    let one = |b: bool| f64::from(u8::from(b));
    for _ in 0..n {
        let (f, boots) = bisect_once(case, rule, &mut rng);
        // each named commit, as the culprit it stands for (itself, or a skipped one beside it)
        let named: Vec<Option<&String>> = f
            .culprits
            .iter()
            .map(|c| {
                std::iter::once(&c.commit)
                    .chain(&c.maybe)
                    .find(|x| culprits.contains(*x))
            })
            .collect();
        let wrong = named.iter().any(Option::is_none);
        let ranged = f
            .culprits
            .iter()
            .any(|c| !culprits.contains(&c.commit) && c.maybe.iter().any(|m| culprits.contains(m)));
        r.wrong += one(wrong);
        r.all += one(!wrong && named.len() == culprits.len());
        r.some += one(!wrong && !named.is_empty() && named.len() < culprits.len());
        r.none += one(named.is_empty());
        r.single += one(f.culprits.len() == 1 && f.culprits[0].maybe.is_empty() && f.open.is_empty());
        r.range += one(ranged && !wrong);
        r.boots += f64::from(boots);
    }
    let k = n as f64;
    Rates {
        wrong: r.wrong / k,
        all: r.all / k,
        some: r.some / k,
        none: r.none / k,
        single: r.single / k,
        range: r.range / k,
        boots: r.boots / k,
    }
}
