//! The bisection replayed from its evidence (pure): segments of the history
//! with their ends, each narrowed on the commit graph by the step rule, an
//! "in between" candidate splitting its segment in two, a candidate that
//! gives no value skipped; the end is every commit that carries a share of
//! the change, with its share, and every segment that could not be placed.

use std::collections::BTreeMap;

use anyhow::Result;
use serde::{Deserialize, Serialize};

use super::graph::{Graph, Mid};
use super::rule::{judge, Block, Call, Rule, Share};

/// What one measurement boots: a segment's two ends and the candidate (none
/// when only the ends are measured).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq, PartialOrd, Ord, schemars::JsonSchema)]
pub struct Arms {
    /// The good end.
    pub good: String,
    /// The bad end.
    pub bad: String,
    /// The candidate.
    pub cand: Option<String>,
}

/// What the measurements of one [`Arms`] gave so far.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Seen {
    /// Complete blocks (a value of every arm in one round).
    pub blocks: Vec<Block>,
    /// Complete blocks each run gave, in order (the runs of `blocks`).
    pub runs: Vec<usize>,
    /// Rounds asked for.
    pub rounds: u32,
    /// Runs in a row, latest last, in which the candidate gave no value.
    pub dry: u32,
    /// Why it gave none (the first failure of the latest such run), or
    /// which end gave none.
    pub why: Option<String>,
    /// Runs in a row, latest last, in which an end gave no value.
    pub end_dry: u32,
}

/// A commit that carries a share of the change.
#[derive(Debug, Clone, PartialEq)]
pub struct Culprit {
    /// The commit.
    pub commit: String,
    /// Its share of the good → bad change (1 for all of it).
    pub share: f64,
    /// Skipped commits just before it that could carry the share instead.
    pub maybe: Vec<String>,
    /// The merges whose branches were opened to reach it, outermost first
    /// (empty: on the first-parent line of `good..bad`).
    pub via: Vec<String>,
}

impl Culprit {
    /// Every commit that could be the first bad one, oldest first: the
    /// skipped ones next to it, then the one named.
    pub fn candidates(&self) -> Vec<String> {
        self.maybe.iter().chain([&self.commit]).cloned().collect()
    }
}

/// How a bisection ended.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Found {
    /// The commits that carry a share, oldest segment first.
    pub culprits: Vec<Culprit>,
    /// Segments that could not be placed, and why.
    pub open: Vec<String>,
    /// The ends of `good..bad` itself were measured and do not differ: the
    /// change is not in this range (a caller may widen it).
    pub flat: bool,
}

/// The replay's answer.
#[derive(Debug, Clone, PartialEq)]
pub enum Next {
    /// The end.
    Done(Found),
    /// The measurement it needs next.
    Measure(Arms),
}

/// A stretch of history between two measured ends, narrowed step by step.
#[derive(Debug, Clone)]
struct Segment {
    good: String,
    bad: String,
    /// Shares of the whole change at the ends.
    at: (f64, f64),
    goods: Vec<String>,
    bad_now: String,
    /// The share estimates (of this segment's change) of the latest like-good
    /// and like-bad candidates, with whether each carries a share beyond its end.
    last_good: (f64, bool),
    last_bad: (f64, bool),
    skip: Vec<String>,
    /// The ends are known to differ.
    confirmed: bool,
    /// The merges whose branches were opened to reach this segment, outermost first.
    via: Vec<String>,
}

impl Segment {
    fn new(good: &str, bad: &str, at: (f64, f64), confirmed: bool) -> Segment {
        Segment {
            good: good.into(),
            bad: bad.into(),
            at,
            goods: vec![good.into()],
            bad_now: bad.into(),
            last_good: (0.0, false),
            last_bad: (1.0, false),
            skip: vec![],
            confirmed,
            via: vec![],
        }
    }

    /// A half of this segment (on its line, so reached the same way).
    fn half(&self, good: &str, bad: &str, at: (f64, f64)) -> Segment {
        Segment {
            via: self.via.clone(),
            ..Segment::new(good, bad, at, true)
        }
    }

    fn arms(&self, cand: Option<&str>) -> Arms {
        Arms {
            good: self.good.clone(),
            bad: self.bad.clone(),
            cand: cand.map(str::to_string),
        }
    }

    /// The whole change's share at a fraction `f` of this segment.
    fn scale(&self, f: f64) -> f64 {
        self.at.0 + f * (self.at.1 - self.at.0)
    }
}

/// Replays the bisection of `good..bad`: the end, or the measurement it
/// needs next; `lines` gets each step's evidence.
pub fn next(
    g: &dyn Graph,
    good: &str,
    bad: &str,
    ev: &BTreeMap<Arms, Seen>,
    rule: &Rule,
    lines: &mut Vec<String>,
) -> Result<Next> {
    let mut todo = vec![Segment::new(good, bad, (0.0, 1.0), false)];
    let mut found = Found::default();
    let mut top = true;
    while let Some(mut s) = todo.pop() {
        let walked = walk(g, &mut s, ev, rule, lines)?;
        match walked {
            Walk::Measure(a) => return Ok(Next::Measure(a)),
            Walk::Found(c) => found.culprits.push(c),
            Walk::Open(why) => found.open.push(why),
            Walk::Flat(why) => {
                found.flat |= top;
                found.open.push(why);
            }
            Walk::Branch(b) => todo.push(b),
            Walk::Split(c, f) => {
                // the later half first on the stack, so the earlier one is bisected first;
                // a half that carries less than min_share of the whole change is told, not bisected
                let fc = s.scale(f);
                for half in [s.half(&c, &s.bad, (fc, s.at.1)), s.half(&s.good, &c, (s.at.0, fc))] {
                    if half.at.1 - half.at.0 >= rule.min_share {
                        todo.push(half);
                    } else {
                        let why = format!(
                            "{}..{}: carries {:.0}% of the change, less than the {:.0}% a segment needs to be bisected",
                            short(&half.good),
                            short(&half.bad),
                            (half.at.1 - half.at.0) * 100.0,
                            rule.min_share * 100.0
                        );
                        lines.push(why.clone());
                        found.open.push(why);
                    }
                }
            }
        }
        top = false;
    }
    Ok(Next::Done(found))
}

enum Walk {
    Measure(Arms),
    Found(Culprit),
    Open(String),
    /// Open: the segment's ends, never yet found to differ, do not differ.
    Flat(String),
    Split(String, f64),
    /// A merge carries the share: its branch, to bisect next.
    Branch(Segment),
}

/// Narrows one segment as far as the evidence goes.
fn walk(
    g: &dyn Graph,
    s: &mut Segment,
    ev: &BTreeMap<Arms, Seen>,
    rule: &Rule,
    lines: &mut Vec<String>,
) -> Result<Walk> {
    let seg = format!("{}..{}", short(&s.good), short(&s.bad));
    let rule = &rule.for_share(s.at.1 - s.at.0);
    loop {
        let c = match g.midpoint(&s.bad_now, &s.goods, &s.skip)? {
            Mid::Found { first_bad, maybe } if s.confirmed => {
                return Ok(match g.branch(&first_bad)? {
                    Some((base, tip)) if maybe.is_empty() => open_branch(s, &seg, &first_bad, &base, &tip, lines),
                    _ => found(s, &seg, first_bad, maybe, lines),
                })
            }
            // nothing in between, and the ends not yet compared: compare them
            Mid::Found { .. } => None,
            Mid::Test(c) => Some(c),
        };
        let arms = s.arms(c.as_deref());
        let seen = ev.get(&arms).cloned().unwrap_or_default();
        if seen.end_dry >= rule.skip_after {
            return Ok(Walk::Open(format!(
                "{seg}: an end gave no value in {} runs: {}",
                seen.end_dry,
                seen.why.unwrap_or_default()
            )));
        }
        if let (Some(c), true) = (&c, seen.dry >= rule.skip_after) {
            lines.push(format!(
                "{seg}: skip {} after {} runs without a value: {}",
                short(c),
                seen.dry,
                seen.why.as_deref().unwrap_or("no value")
            ));
            s.skip.push(c.clone());
            continue;
        }
        let blocks = blocks_of(&seen, c.is_some());
        let (call, share) = judge(&blocks, &seen.runs, seen.rounds, rule);
        s.confirmed |= share.is_some();
        if let Some(w) = flat(s, &seg, c.as_deref(), &call, share.as_ref(), blocks.len(), lines) {
            return Ok(w);
        }
        let Some(c) = c else {
            match call {
                Call::More => return Ok(Walk::Measure(arms)),
                Call::Undecided(why) => return Ok(Walk::Open(format!("{seg}: {why}"))),
                _ => continue,
            }
        };
        if let Some(w) = step(s, &seg, c, call, share, arms, lines) {
            return Ok(w);
        }
    }
}

/// The blocks of a measurement; of the ends alone (no candidate), the bad
/// end stands as the candidate.
fn blocks_of(seen: &Seen, cand: bool) -> Vec<Block> {
    match cand {
        true => seen.blocks.clone(),
        false => seen.blocks.iter().map(|b| Block { cand: b.bad, ..*b }).collect(),
    }
}

/// A segment whose ends were never found to differ and, at the last look,
/// still do not ([`Walk::Flat`]); None otherwise.
fn flat(
    s: &Segment,
    seg: &str,
    c: Option<&str>,
    call: &Call,
    share: Option<&Share>,
    blocks: usize,
    lines: &mut Vec<String>,
) -> Option<Walk> {
    let Call::Undecided(why) = call else { return None };
    if share.is_some() || s.confirmed || blocks < 3 {
        return None;
    }
    let at = c.map(|c| format!("at {}: ", short(c))).unwrap_or_default();
    if let Some(c) = c {
        lines.push(step_line(seg, c, call, None));
    }
    Some(Walk::Flat(format!("{seg}: {at}{why}")))
}

/// The call on candidate `c` applied to its segment: the walk's end, or
/// `None` to walk on.
fn step(
    s: &mut Segment,
    seg: &str,
    c: String,
    call: Call,
    share: Option<Share>,
    arms: Arms,
    lines: &mut Vec<String>,
) -> Option<Walk> {
    if call != Call::More {
        lines.push(step_line(seg, &c, &call, share.as_ref()));
    }
    match call {
        Call::Good => {
            s.goods.push(c);
            s.last_good = share.map_or((0.0, false), |x| (x.est, x.lo > 0.0));
            None
        }
        Call::Bad => {
            s.bad_now = c;
            s.last_bad = share.map_or((1.0, false), |x| (x.est, x.hi < 1.0));
            None
        }
        Call::Between => Some(Walk::Split(c, share.map_or(0.5, |x| x.est))),
        Call::More => Some(Walk::Measure(arms)),
        Call::Undecided(why) => Some(Walk::Open(format!("{seg}: at {}: {why}", short(&c)))),
    }
}

/// A merge on the line carries the segment's share: its branch (the
/// commits its second parent brings), bisected against its merge base with
/// the line, carrying the merge's share of the whole change.
fn open_branch(s: &Segment, seg: &str, merge: &str, base: &str, tip: &str, lines: &mut Vec<String>) -> Walk {
    let at = (s.scale(s.last_good.0), s.scale(s.last_bad.0));
    lines.push(format!(
        "{seg}: merge {} carries {:.0}% of the change: its branch {}..{} (merge base..second parent) is bisected",
        short(merge),
        (at.1 - at.0) * 100.0,
        short(base),
        short(tip)
    ));
    let mut b = Segment::new(base, tip, at, false);
    b.via = s.via.iter().cloned().chain([merge.to_string()]).collect();
    Walk::Branch(b)
}

/// The end of a segment: its first bad commit, with the share of the whole
/// change between the latest like-good and like-bad estimates; a share
/// left on either side (an estimate clear of its end, yet under
/// `min_share`) is told, not placed.
fn found(s: &Segment, seg: &str, first_bad: String, maybe: Vec<String>, lines: &mut Vec<String>) -> Walk {
    let share = s.scale(s.last_bad.0) - s.scale(s.last_good.0);
    if maybe.is_empty() {
        lines.push(format!(
            "{seg}: first bad commit {} carries {:.0}% of the change",
            short(&first_bad),
            share * 100.0
        ));
    } else {
        // as `git bisect` with skips: a skipped commit next to it could be it instead
        lines.push(format!(
            "{seg}: the first bad commit is one of: {}, {}; together they carry {:.0}% of the change",
            maybe
                .iter()
                .map(|m| format!("{} (skipped: could not be measured)", short(m)))
                .collect::<Vec<_>>()
                .join(", "),
            short(&first_bad),
            share * 100.0
        ));
    }
    if s.last_good.1 {
        lines.push(format!("{seg}: the last like-good commit already carries {:.0}% of the change: a smaller share before it is not placed", (s.scale(s.last_good.0) - s.at.0) * 100.0));
    }
    if s.last_bad.1 {
        lines.push(format!(
            "{seg}: {} carries {:.0}% less than the bad end: a smaller share after it is not placed",
            short(&s.bad_now),
            (s.at.1 - s.scale(s.last_bad.0)) * 100.0
        ));
    }
    Walk::Found(Culprit {
        commit: first_bad,
        share,
        maybe,
        via: s.via.clone(),
    })
}

/// One decided step, as each bisection prints it.
fn step_line(seg: &str, c: &str, call: &Call, s: Option<&Share>) -> String {
    let said = match call {
        Call::Good => "like good".to_string(),
        Call::Bad => "like bad".to_string(),
        Call::Between => "in between: both halves are bisected".to_string(),
        Call::More => "more rounds".to_string(),
        Call::Undecided(why) => format!("undecided: {why}"),
    };
    match s {
        Some(s) => format!(
            "{seg}: {} carries {:.2} [{:.2}, {:.2}] of the change ({:+.2}% between the ends, {} blocks): {said}",
            short(c),
            s.est,
            s.lo,
            s.hi,
            s.change * 100.0,
            s.n
        ),
        None => format!("{seg}: {}: {said}", short(c)),
    }
}

/// A commit id as printed.
pub fn short(c: &str) -> &str {
    &c[..c.len().min(12)]
}

#[cfg(test)]
mod tests {
    use super::super::graph::{Git, Linear};
    use super::super::io;
    use super::*;
    use crate::proc::Cmd;
    use std::path::Path;

    /// Runs a bisection on simulated measurements: `value(point, round)`
    /// (None: no value, the build failed); returns what it found, the lines
    /// and how often each candidate was measured.
    fn drive(
        g: &dyn Graph,
        good: &str,
        bad: &str,
        value: &dyn Fn(&str, u32) -> Option<f64>,
    ) -> (Found, Vec<String>, BTreeMap<String, usize>) {
        // the search under a near-deterministic clock without run offsets
        let rule = Rule {
            run_offset: 0.0,
            ..Rule::default()
        };
        let mut ev: BTreeMap<Arms, Seen> = BTreeMap::new();
        let mut asked: BTreeMap<String, usize> = BTreeMap::new();
        for _ in 0..200 {
            let mut lines = vec![];
            match next(g, good, bad, &ev, &rule, &mut lines).unwrap() {
                Next::Done(f) => return (f, lines, asked),
                Next::Measure(arms) => {
                    let mut vals: BTreeMap<String, BTreeMap<u32, f64>> = BTreeMap::new();
                    let points = [
                        ("base", Some(&arms.good)),
                        ("bad", Some(&arms.bad)),
                        ("mid", arms.cand.as_ref()),
                    ];
                    for (name, p) in points.iter().filter_map(|(n, p)| p.map(|p| (n, p))) {
                        *asked.entry(p.clone()).or_default() += 1;
                        for r in 0..rule.batch {
                            if let Some(v) = value(p, r) {
                                vals.entry(name.to_string()).or_default().insert(r, v);
                            }
                        }
                    }
                    io::add(ev.entry(arms.clone()).or_default(), &arms, rule.batch, &vals, &|v| {
                        (v == "mid").then(|| "mid: build: error: implicit declaration of function 'x'".to_string())
                    });
                }
            }
        }
        panic!("no end after 200 measurements: {asked:?}");
    }

    /// The one culprit, carrying all of the change, and its skipped alternatives.
    fn one(f: &Found) -> (&str, Vec<String>) {
        assert!(
            f.culprits.len() == 1 && (f.culprits[0].share - 1.0).abs() < 0.05,
            "{f:?}"
        );
        (f.culprits[0].commit.as_str(), f.culprits[0].maybe.clone())
    }

    fn noise(p: &str, r: u32) -> f64 {
        // a small spread that differs by point and round, the same every time
        let h = p
            .bytes()
            .fold(r * 7919, |h, b| h.wrapping_mul(31).wrapping_add(u32::from(b)));
        f64::from(h % 97) / 97.0 * 0.004 - 0.002
    }

    /// A tiny history: c0 (good); a topic branch t1 t2 t3 (t2 the slowdown)
    /// and main m1 m2 m3 interleaved in time; the merge; a1 (bad).
    fn merge_repo(dir: &Path) -> BTreeMap<String, String> {
        let mut ids = BTreeMap::new();
        let mut t = 0;
        let mut git = |args: &[&str]| {
            t += 1;
            let date = format!("2026-01-01T00:{t:02}:00Z");
            let c = Cmd::new("git")
                .arg("-C")
                .arg(dir)
                .args(["-c", "user.name=t", "-c", "user.email=t@t.invalid"])
                .args(args);
            c.env("GIT_AUTHOR_DATE", &date)
                .env("GIT_COMMITTER_DATE", &date)
                .capture()
                .run_ok()
                .unwrap()
                .output
        };
        git(&["init", "-q", "-b", "main"]);
        let mut commit = |git: &mut dyn FnMut(&[&str]) -> String, name: &str| {
            std::fs::write(dir.join(name), name).unwrap();
            git(&["add", name]);
            git(&["commit", "-q", "-m", name]);
            ids.insert(name.to_string(), git(&["rev-parse", "HEAD"]).trim().to_string());
        };
        commit(&mut git, "c0");
        git(&["branch", "topic"]);
        for (b, n) in [
            ("topic", "t1"),
            ("main", "m1"),
            ("topic", "t2"),
            ("main", "m2"),
            ("topic", "t3"),
            ("main", "m3"),
        ] {
            git(&["checkout", "-q", b]);
            commit(&mut git, n);
        }
        git(&["checkout", "-q", "main"]);
        git(&["merge", "-q", "--no-ff", "-m", "merge topic", "topic"]);
        let m = git(&["rev-parse", "HEAD"]).trim().to_string();
        commit(&mut git, "a1");
        ids.insert("merge".into(), m);
        ids
    }

    #[test]
    fn fault2_a_merge_containing_history_names_the_branch_commit() {
        let tmp = tempfile::tempdir().unwrap();
        let ids = merge_repo(tmp.path());
        let slow = |c: &str| {
            Cmd::new("git")
                .arg("-C")
                .arg(tmp.path())
                .args(["merge-base", "--is-ancestor", &ids["t2"], c])
                .capture()
                .run()
                .unwrap()
                .success()
        };
        let value = |c: &str, r: u32| Some(if slow(c) { 97.0 } else { 100.0 } * (1.0 + noise(c, r)));
        let (found, lines, asked) = drive(
            &Git {
                tree: tmp.path().into(),
            },
            &ids["c0"],
            &ids["a1"],
            &value,
        );
        let name = |c: &str| {
            ids.iter()
                .find(|(_, v)| *v == c)
                .map(|(k, _)| k.clone())
                .unwrap_or_default()
        };
        let named: Vec<(String, f64)> = found.culprits.iter().map(|c| (name(&c.commit), c.share)).collect();
        println!(
            "fault 2: named {named:?}; tested {:?}",
            asked.keys().map(|c| name(c)).collect::<Vec<_>>()
        );
        assert_eq!(
            named.iter().map(|n| n.0.as_str()).collect::<Vec<_>>(),
            ["t2"],
            "the branch commit, not the merge: {lines:#?}"
        );
        assert!((named[0].1 - 1.0).abs() < 0.05, "{named:?}");
        assert!(found.open.is_empty(), "{:?}", found.open);
    }

    #[test]
    fn fault3_a_candidate_that_gives_no_value_is_skipped_with_a_bound_and_its_reason() {
        let h = Linear((0..=6).map(|i| format!("c{i}")).collect());
        // c3 never builds; c4 is the slowdown
        let value = |c: &str, r: u32| (c != "c3").then(|| if c >= "c4" { 97.0 } else { 100.0 } * (1.0 + noise(c, r)));
        let (found, lines, asked) = drive(&h, "c0", "c6", &value);
        println!(
            "fault 3: c3 measured {} times; {found:?}",
            asked.get("c3").copied().unwrap_or(0)
        );
        assert_eq!(
            asked.get("c3").copied(),
            Some(Rule::default().skip_after as usize),
            "{asked:?}"
        );
        assert!(
            lines
                .iter()
                .any(|l| l.contains("skip c3 after 2 runs without a value: mid: build: error: implicit declaration")),
            "{lines:#?}"
        );
        // c4 is the first bad commit, unless the untested c3 is (as `git bisect skip` says)
        assert_eq!(one(&found), ("c4", vec!["c3".to_string()]));
        // c4 itself untestable: not named the first bad commit; the end is c4 or c5
        let value = |c: &str, r: u32| (c != "c4").then(|| if c >= "c4" { 97.0 } else { 100.0 } * (1.0 + noise(c, r)));
        let (found, lines, _) = drive(&h, "c0", "c6", &value);
        assert_eq!(one(&found), ("c5", vec!["c4".to_string()]));
        assert_eq!(found.culprits[0].candidates(), ["c4", "c5"]);
        assert!(
            lines.iter().any(|l| l.starts_with(
                "c0..c6: the first bad commit is one of: c4 (skipped: could not be measured), c5; together they carry "
            )),
            "{lines:#?}"
        );
        assert!(!lines.iter().any(|l| l.contains("first bad commit c5")), "{lines:#?}");
    }

    /// Ends that do not differ are told as such (the nightly widens such a
    /// range); a change in the range is not.
    #[test]
    fn a_range_whose_ends_do_not_differ_is_flat() {
        let h = Linear((0..=6).map(|i| format!("c{i}")).collect());
        // every commit alike in each round (a round's noise shared): no change anywhere
        let flat = |_: &str, r: u32| Some(100.0 * (1.0 + noise("c0", r)));
        let (found, _, _) = drive(&h, "c0", "c6", &flat);
        assert!(found.flat && found.culprits.is_empty(), "{found:?}");
        assert!(found.open[0].contains("the ends do not differ"), "{found:?}");
        let (found, _, _) = drive(&h, "c0", "c1", &flat);
        assert_eq!((found.flat, found.open.len()), (true, 1), "{found:?}");
        let step = |c: &str, r: u32| Some(if c >= "c4" { 97.0 } else { 100.0 } * (1.0 + noise(c, r)));
        let (found, _, _) = drive(&h, "c0", "c6", &step);
        assert!(!found.flat && found.culprits.len() == 1, "{found:?}");
    }
}

#[cfg(test)]
mod merge_tests {
    use super::super::graph::Dag;
    use super::*;

    /// Main line c0 m1..m6 M m8 (bad); a topic branch t1..t6 forked at
    /// `fork` (c0, or f0 before it) merged by M; f0 → c0 is main too.
    fn history(fork: &str) -> Dag {
        let mut d = Dag::default();
        d.add("f0", &[]);
        d.add("c0", &["f0"]);
        let mut prev = "c0".to_string();
        for i in 1..=6 {
            let m = format!("m{i}");
            d.add(&m, &[&prev]);
            prev = m;
        }
        let mut t = fork.to_string();
        for i in 1..=6 {
            let n = format!("t{i}");
            d.add(&n, &[&t]);
            t = n;
        }
        d.add("M", &[&prev, &t]);
        d.add("m8", &["M"]);
        d
    }

    fn noise(p: &str, r: u32) -> f64 {
        let h = p
            .bytes()
            .fold(r * 7919 + 13, |h, b| h.wrapping_mul(31).wrapping_add(u32::from(b)));
        f64::from(h % 97) / 97.0 * 0.004 - 0.002
    }

    /// Bisects c0..m8 with `shares` (commit, fraction of a 3% slowdown) and an
    /// extra `before` slowdown carried by c0 (not by f0); returns what it found.
    fn run(d: &Dag, shares: &[(&str, f64)], before: f64) -> (Found, Vec<String>) {
        // the search under a near-deterministic clock without run offsets
        let rule = Rule {
            run_offset: 0.0,
            ..Rule::default()
        };
        let mut ev: BTreeMap<Arms, Seen> = BTreeMap::new();
        let value = |c: &str, r: u32| {
            let a = d.ancestors(c);
            let s: f64 = shares.iter().filter(|(x, _)| a.contains(*x)).map(|x| x.1).sum();
            let b = if a.contains("c0") { before } else { 0.0 };
            100.0 * (1.0 - 0.03 * s - b) * (1.0 + noise(c, r))
        };
        for _ in 0..100 {
            let mut lines = vec![];
            match next(d, "c0", "m8", &ev, &rule, &mut lines).unwrap() {
                Next::Done(f) => return (f, lines),
                Next::Measure(a) => {
                    let seen = ev.entry(a.clone()).or_default();
                    let k = seen.rounds;
                    for r in k..k + rule.batch {
                        let c = a.cand.as_deref().unwrap_or(&a.bad);
                        seen.blocks.push(Block {
                            good: value(&a.good, r),
                            bad: value(&a.bad, r),
                            cand: value(c, r),
                        });
                    }
                    seen.runs.push(rule.batch as usize);
                    seen.rounds += rule.batch;
                }
            }
        }
        panic!("no end after 100 measurements");
    }

    fn named(f: &Found) -> Vec<(&str, f64, Vec<String>)> {
        let mut v: Vec<_> = f
            .culprits
            .iter()
            .map(|c| (c.commit.as_str(), (c.share * 10.0).round() / 10.0, c.via.clone()))
            .collect();
        v.sort_by(|a, b| a.0.cmp(b.0));
        v
    }

    #[test]
    fn two_culprits_on_two_branches_are_both_named_and_the_merge_is_not() {
        let d = history("c0");
        for (t, m) in [(0.5, 0.5), (0.3, 0.7)] {
            let (f, lines) = run(&d, &[("t4", t), ("m3", m)], 0.0);
            assert_eq!(
                named(&f),
                [("m3", m, vec![]), ("t4", t, vec!["M".to_string()])],
                "{t}/{m}: {lines:#?}"
            );
            assert!(f.open.is_empty(), "{:?}", f.open);
            assert!(
                lines
                    .iter()
                    .any(|l| l.contains("merge M carries") && l.contains("its branch c0..t6")),
                "{lines:#?}"
            );
        }
    }

    #[test]
    fn a_branch_forked_before_good_is_bisected_against_its_own_merge_base() {
        // c0 (good) is itself 2% slower than the fork point f0: the branch lacks that
        let d = history("f0");
        let (f, lines) = run(&d, &[("t4", 1.0)], 0.02);
        assert_eq!(named(&f), [("t4", 1.0, vec!["M".to_string()])], "{lines:#?}");
        assert!(lines.iter().any(|l| l.contains("its branch f0..t6")), "{lines:#?}");
    }
}
