//! `harness bisect`: runs or resumes a bisection; prints the rule, each
//! step's evidence and every commit that carries a share of the change,
//! with its share (exit 0), or why none could be placed (exit 3); a
//! culprit next to a skipped commit is not named the first bad commit: the
//! first bad commit is one of them (exit 4). With `--json` the rule and the
//! steps go to stderr and stdout gets one object: `{"bisect_dir": DIR,
//! "first_bad": ID, "subject": "<id> <subject>", "culprits": [{"commit":
//! ID, "subject": "<id> <subject>", "share": 0.98, "maybe": [ID...], "via":
//! [MERGE...]}], "open": [WHY...]}`; `first_bad` and `subject` are null
//! unless one commit carries the change, no skipped commit could be it
//! instead and nothing is left open; when a skipped commit could,
//! `candidates` lists every commit that could be the first bad one, oldest
//! first.

use std::path::{Path, PathBuf};

use anyhow::Result;
use serde::Serialize;

use super::{print_json, run_options, Exit, Global};
use crate::{bisect, config, trial};

/// `harness bisect`'s arguments.
#[derive(clap::Args, Debug)]
pub(super) struct Args {
    /// The git tree.
    #[arg(long, value_name = "TREE", required_unless_present = "resume")]
    git: Option<PathBuf>,
    /// A commit-ish that performs well.
    #[arg(long, required_unless_present = "resume")]
    good: Option<String>,
    /// A later commit-ish that performs worse.
    #[arg(long, required_unless_present = "resume")]
    bad: Option<String>,
    /// The benchmark.
    #[arg(long, required_unless_present = "resume")]
    bench: Option<String>,
    /// The vCPU count.
    #[arg(long, required_unless_present = "resume")]
    vcpus: Option<u32>,
    /// The metric (default: the benchmark's first).
    #[arg(long)]
    metric: Option<String>,
    /// The guest clock: wall or icount.
    #[arg(long, value_parser = trial::parse_clock)]
    clock: Option<config::Clock>,
    /// The matrix whose kernel config, guest and benchmarks are used (default: the built-in one).
    #[arg(long)]
    matrix: Option<PathBuf>,
    /// The matrix profile (`none` for none). Default: `bisect`, which in the
    /// built-in matrix is the top level, or `exact` where KVM is not usable;
    /// a matrix without a `bisect` profile runs its top level.
    #[arg(long)]
    profile: Option<String>,
    /// Rounds per look at a candidate (a round boots it and both ends once).
    #[arg(long, default_value_t = bisect::Rule::default().batch)]
    batch: u32,
    /// Most rounds at a candidate.
    #[arg(long, default_value_t = bisect::Rule::default().max_rounds)]
    max_rounds: u32,
    /// Overall level of each step's interval (split over its looks).
    #[arg(long, default_value_t = bisect::Rule::default().alpha)]
    alpha: f64,
    /// Runs without a value after which a candidate is skipped.
    #[arg(long, default_value_t = bisect::Rule::default().skip_after)]
    skip_after: u32,
    /// Finish an interrupted bisection.
    #[arg(long, value_name = "BISECT_DIR")]
    resume: Option<PathBuf>,
    /// No progress output.
    #[arg(long, short)]
    quiet: bool,
}

impl Args {
    /// The request of a new bisection (without `--resume`, clap requires
    /// the tree, both ends, the benchmark and the vCPU count).
    fn request(self) -> bisect::Request {
        let trial = trial::Request {
            matrix: self.matrix,
            profile_is_default: self.profile.is_none(),
            profile: self.profile.unwrap_or_else(|| "bisect".into()),
            vcpus: self.vcpus.into_iter().collect(),
            bench: self.bench.into_iter().collect(),
            clock: self.clock,
            ..Default::default()
        };
        let rule = bisect::Rule {
            batch: self.batch,
            max_rounds: self.max_rounds,
            alpha: self.alpha,
            skip_after: self.skip_after,
            ..Default::default()
        };
        bisect::Request {
            git: self.git.unwrap_or_default(),
            good: self.good.unwrap_or_default(),
            bad: self.bad.unwrap_or_default(),
            trial,
            metric: self.metric,
            rule,
        }
    }
}

/// One commit of `harness bisect --json`'s `culprits`.
#[derive(Serialize, Debug, PartialEq)]
struct Named {
    /// Its id.
    commit: String,
    /// `<short id> <subject>`.
    subject: String,
    /// Its share of the change.
    share: f64,
    /// Skipped commits that could carry the share instead.
    maybe: Vec<String>,
    /// The path through the graph: the merges whose branches were opened
    /// to reach it, outermost first (empty: on the first-parent line).
    via: Vec<String>,
    /// Its differential kernel profile against the good end (the top
    /// functions, as text), or why there is none.
    profile: String,
    /// `maybe` as printed: each one's `<short id> <subject>`.
    #[serde(skip)]
    skipped: Vec<String>,
}

/// `harness bisect --json`: how the bisection ended.
#[derive(Serialize)]
struct Ended<'a> {
    /// The bisection's directory.
    bisect_dir: &'a Path,
    /// The one commit that carries the change, when one does, no skipped
    /// commit could instead, and nothing is left open (else null).
    first_bad: Option<String>,
    /// Its `<short id> <subject>`.
    subject: Option<String>,
    /// When one segment carries the change and skipped commits next to its
    /// first bad commit could be it instead: every commit that could be the
    /// first bad one, oldest first.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    candidates: Vec<String>,
    /// Every commit that carries a share.
    culprits: Vec<Named>,
    /// Segments that could not be placed, and why.
    open: Vec<String>,
}

/// The one culprit, when nothing else is left open.
fn sole<'a>(c: &'a [Named], open: &[String]) -> Option<&'a Named> {
    match c {
        [one] if open.is_empty() => Some(one),
        _ => None,
    }
}

/// What the end prints, one line each.
fn lines(e: &Ended) -> Vec<String> {
    let mut out = vec![];
    let one = sole(&e.culprits, &e.open).is_some();
    for c in &e.culprits {
        out.push(bisect::culprit_line(&c.subject, c.share, &c.skipped, one));
        // the path through the graph, under the culprit it led to
        out.extend(c.via.iter().map(|m| format!("  (inside the branch merged by {m})")));
    }
    out.extend(e.open.iter().map(|o| format!("not placed: {o}")));
    if e.culprits.is_empty() && e.open.is_empty() {
        out.push("undecided: no commit carries the change".into());
    }
    for c in &e.culprits {
        out.push(format!("why: {}", c.profile));
    }
    out
}

/// Starts (or with `--resume` goes on with) the bisection and runs it to its end.
pub(super) fn run(a: Args, g: &Global) -> Result<Exit> {
    crate::proc::install_signal_handler()?;
    let quiet = a.quiet;
    let dir = match a.resume.clone() {
        Some(d) => d,
        None => bisect::start(&a.request(), &g.runs_dir, &g.work())?,
    };
    finish(&dir, g, quiet)
}

/// Runs the bisection in `dir` to its end and prints it (also `try --per-patch`'s end).
pub(super) fn finish(dir: &Path, g: &Global, quiet: bool) -> Result<Exit> {
    eprintln!(
        "bisect: {} (resume with `harness bisect --resume {}`)",
        dir.display(),
        dir.display()
    );
    let opts = run_options(g, &bisect::matrix_of(dir)?, quiet)?;
    let json = g.json;
    let say = move |s: &str| if json { eprintln!("{s}") } else { println!("{s}") };
    let found = bisect::run(dir, &opts, &say)?;
    let culprits: Vec<Named> = found.culprits.iter().map(|c| named(dir, c)).collect();
    let ended = ended(dir, &found, culprits);
    if json {
        print_json(&ended)?;
    } else {
        lines(&ended).iter().for_each(|l| println!("{l}"));
    }
    Ok(exit(&found))
}

/// The end as printed: `first_bad` only when one commit carries the change
/// exactly (no skipped commit could instead) and nothing is left open.
fn ended<'a>(dir: &'a Path, found: &bisect::Found, culprits: Vec<Named>) -> Ended<'a> {
    let one = sole(&culprits, &found.open);
    let candidates = match one {
        Some(_) => found.culprits[0].candidates(),
        None => vec![],
    };
    let one = one
        .filter(|c| c.maybe.is_empty())
        .map(|c| (c.commit.clone(), c.subject.clone()));
    Ended {
        bisect_dir: dir,
        first_bad: one.as_ref().map(|o| o.0.clone()),
        subject: one.map(|o| o.1),
        candidates: if candidates.len() > 1 { candidates } else { vec![] },
        culprits,
        open: found.open.clone(),
    }
}

/// A culprit as printed, with its evidence.
fn named(dir: &Path, c: &bisect::search::Culprit) -> Named {
    let profile = bisect::profile_or_why(dir, &c.commit, TOP);
    Named {
        commit: c.commit.clone(),
        subject: bisect::describe(dir, &c.commit),
        share: c.share,
        maybe: c.maybe.clone(),
        via: c.via.clone(),
        profile,
        skipped: c.maybe.iter().map(|m| bisect::describe(dir, m)).collect(),
    }
}

/// The functions of a culprit's profile printed.
const TOP: usize = 8;

/// The exit code of a bisection's end: done when a commit carries a share
/// and each such commit is named exactly; one of several when a skipped
/// commit next to one could carry it instead.
fn exit(f: &bisect::Found) -> Exit {
    if f.culprits.is_empty() {
        Exit::Undecided
    } else if f.culprits.iter().any(|c| !c.maybe.is_empty()) {
        Exit::OneOf
    } else {
        Exit::Done
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn undecided_has_its_own_code() {
        let c = bisect::Culprit {
            commit: "c4".into(),
            share: 1.0,
            maybe: vec![],
            via: vec![],
        };
        assert_eq!(
            exit(&bisect::Found {
                culprits: vec![c],
                ..Default::default()
            }),
            Exit::Done
        );
        assert_eq!(
            exit(&bisect::Found {
                culprits: vec![],
                open: vec!["c0..c6: the ends do not differ".into()],
                flat: true,
            })
            .code(),
            3
        );
    }

    /// The commit that carries the change could not be built: the end is
    /// "one of" it and the next, with no `first_bad` and its own code.
    #[test]
    fn a_culprit_next_to_a_skipped_commit_is_not_named_first_bad() {
        let dir = Path::new("/runs/bisect-1");
        let c = bisect::Culprit {
            commit: "c5".into(),
            share: 1.0,
            maybe: vec!["c4".into()],
            via: vec![],
        };
        let found = bisect::Found {
            culprits: vec![c.clone()],
            ..Default::default()
        };
        let n = Named {
            commit: "c5".into(),
            subject: "c5 exec: slower".into(),
            share: 1.0,
            maybe: vec!["c4".into()],
            via: vec![],
            profile: "none".into(),
            skipped: vec!["c4 exec: does not build".into()],
        };
        let e = ended(dir, &found, vec![n]);
        let json = serde_json::to_value(&e).unwrap();
        assert_eq!(json["first_bad"], serde_json::Value::Null, "{json}");
        assert_eq!(json["subject"], serde_json::Value::Null, "{json}");
        assert_eq!(json["candidates"], serde_json::json!(["c4", "c5"]), "{json}");
        assert_eq!(
            lines(&e)[0],
            "the first bad commit is one of: c4 exec: does not build (skipped: could not be measured), c5 exec: slower (together they carry 100% of the change)"
        );
        assert!(!lines(&e).iter().any(|l| l.starts_with("first bad commit")));
        assert_eq!(exit(&found), Exit::OneOf);
        assert_eq!(Exit::OneOf.code(), 4);
        // a second culprit does not make the skipped one's answer exact
        let exact = bisect::Culprit {
            commit: "c9".into(),
            maybe: vec![],
            share: 0.5,
            ..c
        };
        let two = bisect::Found {
            culprits: vec![exact.clone(), found.culprits[0].clone()],
            ..Default::default()
        };
        assert_eq!(exit(&two), Exit::OneOf);
        let clean = bisect::Found {
            culprits: vec![exact],
            ..Default::default()
        };
        assert_eq!(exit(&clean), Exit::Done);
    }

    #[test]
    fn the_json_record_and_the_lines_are_as_documented() {
        let dir = Path::new("/runs/bisect-1");
        let n = |c: &str, share| Named {
            commit: c.into(),
            subject: format!("{c} exec: slower"),
            share,
            maybe: vec![],
            via: vec![],
            profile: format!("{c} against the good end:\n* pcpu_alloc_noprof 377 1473"),
            skipped: vec![],
        };
        let found = Ended {
            bisect_dir: dir,
            first_bad: Some("abc".into()),
            subject: Some("abc exec: slower".into()),
            candidates: vec![],
            culprits: vec![n("abc", 1.0)],
            open: vec![],
        };
        assert_eq!(
            serde_json::to_string(&found).unwrap(),
            r#"{"bisect_dir":"/runs/bisect-1","first_bad":"abc","subject":"abc exec: slower","culprits":[{"commit":"abc","subject":"abc exec: slower","share":1.0,"maybe":[],"via":[],"profile":"abc against the good end:\n* pcpu_alloc_noprof 377 1473"}],"open":[]}"#
        );
        assert_eq!(
            lines(&found),
            [
                "first bad commit: abc exec: slower (carries 100% of the change)",
                "why: abc against the good end:\n* pcpu_alloc_noprof 377 1473"
            ]
        );
        let two = Ended {
            bisect_dir: dir,
            first_bad: None,
            subject: None,
            candidates: vec![],
            culprits: vec![n("a", 0.52), n("b", 0.48)],
            open: vec!["a..b: why".into()],
        };
        assert_eq!(
            lines(&two)[..3],
            [
                "carries 52% of the change: a exec: slower",
                "carries 48% of the change: b exec: slower",
                "not placed: a..b: why"
            ]
        );
        assert_eq!(
            lines(&two)[3..],
            [
                "why: a against the good end:\n* pcpu_alloc_noprof 377 1473",
                "why: b against the good end:\n* pcpu_alloc_noprof 377 1473"
            ]
        );
        // the path through the graph, under the culprit it led to
        let mut t = n("t2", 0.5);
        t.via = vec!["M".into()];
        let branched = Ended {
            culprits: vec![t, n("m2", 0.5)],
            open: vec![],
            ..two
        };
        assert_eq!(
            lines(&branched)[..3],
            [
                "carries 50% of the change: t2 exec: slower",
                "  (inside the branch merged by M)",
                "carries 50% of the change: m2 exec: slower"
            ]
        );
    }
}
