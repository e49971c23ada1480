//! The nightly's state machine on a fake robot and a real SQLite history.

use std::cell::RefCell;
use std::path::{Path, PathBuf};

use anyhow::{bail, Result};
use rusqlite::Connection;

use super::*;

/// A robot whose measurements, changes and bisections are scripted.
#[derive(Default)]
struct Fake {
    measured: Vec<String>,
    changes: Vec<KeyChange>,
    /// Key series tested tonight (1 when 0).
    tested: usize,
    started: Vec<(String, String)>,
    runs: Vec<PathBuf>,
    /// What the next `run_bisect` calls do: Some(true) interrupted, Some(false) fail; None (or none left) end.
    script: Vec<Option<bool>>,
    measure_fails: bool,
    root: PathBuf,
    /// Skipped commits next to the culprit the bisections name.
    maybe: Vec<String>,
    /// The bisections end undecided (no culprit).
    undecided: bool,
    /// The history database, whose nightly lock `run_bisect` tries.
    history: PathBuf,
    /// Whether the nightly lock was free during each `run_bisect`.
    lock_free: Vec<bool>,
    /// The night whose commit carries the change: a bisection whose range
    /// holds it names it, any other ends with ends that do not differ.
    step_at: Option<String>,
    /// The ranges each `run_bisect` bisected.
    ranges: Vec<(String, String)>,
    /// Each `widen` call's range.
    widens: Vec<(String, String)>,
}

impl Robot for Fake {
    fn measure(&mut self, commit: &str, _runs_dir: &Path) -> Result<String> {
        self.measured.push(commit.into());
        if self.measure_fails {
            bail!("build the kernel: make failed");
        }
        Ok(format!("run-{commit}"))
    }
    fn changes(&mut self, _db: &Connection, _run_id: &str) -> Result<KeyChanges> {
        Ok(KeyChanges {
            tested: self.tested.max(1),
            changes: self.changes.clone(),
        })
    }
    fn start_bisect(&mut self, b: &Bisection) -> Result<PathBuf> {
        self.started.push((b.good_commit.clone(), b.bad_commit.clone()));
        Ok(self.root.join(format!("bisect-{}", self.started.len())))
    }
    fn widen(&mut self, _dir: &Path, b: &Bisection) -> Result<()> {
        self.widens.push((b.good_commit.clone(), b.bad_commit.clone()));
        Ok(())
    }
    fn run_bisect(&mut self, dir: &Path, b: &Bisection) -> Result<Bisected> {
        self.runs.push(dir.to_path_buf());
        self.ranges.push((b.good_commit.clone(), b.bad_commit.clone()));
        match (!self.script.is_empty()).then(|| self.script.remove(0)).flatten() {
            Some(true) => return Err(crate::proc::Interrupted.into()),
            Some(false) => bail!("build the kernel of c2: no space left on device"),
            None => {}
        }
        if let Some(at) = &self.step_at {
            let (g, e) = (&b.good_commit, &b.bad_commit);
            return Ok(if g < at && at <= e {
                Bisected {
                    culprits: vec![Named {
                        commit: at.clone(),
                        subject: format!("{at} exec: one more check"),
                        share: 0.98,
                        maybe: vec![],
                    }],
                    steps: vec![format!("{g}..{e}: first bad commit {at}")],
                    ..Default::default()
                }
            } else {
                Bisected {
                    open: vec![format!("{g}..{e}: the ends do not differ in 40 blocks")],
                    steps: vec![format!("{g}..{e}: the ends do not differ")],
                    flat: true,
                    ..Default::default()
                }
            });
        }
        // what the next cron nightly would find: the measuring lock free
        self.lock_free.push(lock(&self.history).is_ok());
        match () {
            _ if self.undecided => Ok(Bisected {
                open: vec!["c0..c1: the ends do not differ".into()],
                ..Default::default()
            }),
            _ => Ok(Bisected {
                culprits: vec![Named {
                    commit: "c2".into(),
                    subject: "c2 exec: one more check".into(),
                    share: 0.97,
                    maybe: self.maybe.clone(),
                }],
                steps: vec!["step 1: c2 like bad".into()],
                profile: Some("* bprm_execve +2003".into()),
                ..Default::default()
            }),
        }
    }
}

fn change(good: &str, bad: &str, pct: f64, worse: bool) -> KeyChange {
    KeyChange {
        bench: "static-doexec".into(),
        metric: "execs/s".into(),
        vcpus: 2,
        good_run: format!("run-{good}"),
        bad_run: format!("run-{bad}"),
        date: "2026-12-03".into(),
        change: pct / 100.0,
        interval: Some((pct / 100.0 - 0.003, pct / 100.0 + 0.003)),
        p: 0.001,
        worse,
        unit: "execs/s".into(),
    }
}

struct World {
    _tmp: tempfile::TempDir,
    history: PathBuf,
    db: Connection,
    dir: PathBuf,
    robot: Fake,
    said: RefCell<Vec<String>>,
}

impl World {
    fn new() -> World {
        let tmp = tempfile::tempdir().unwrap();
        let history = tmp.path().join("history.sqlite");
        let db = crate::history::open(&history).unwrap();
        let dir = tmp.path().join("nightly");
        let robot = Fake {
            root: dir.clone(),
            history: history.clone(),
            ..Default::default()
        };
        World {
            _tmp: tmp,
            history,
            db,
            dir,
            robot,
            said: RefCell::new(vec![]),
        }
    }
    fn night(&mut self, commit: &str) -> Result<Outcome> {
        let t = Tonight {
            commit: commit.into(),
            subject: format!("{commit} subject"),
        };
        let said = &self.said;
        let locks = Locks {
            measuring: lock(&self.history)?,
            history: self.history.clone(),
        };
        let (o, telling) = night(
            &mut self.db,
            "m1:nightly",
            &self.dir,
            &t,
            &mut self.robot,
            locks,
            &|s| said.borrow_mut().push(s.to_string()),
        )?;
        told(&self.db, &o, telling)?;
        Ok(o)
    }
}

/// Issue 29: the night's key series are tested together. A change point
/// at p 0.004 starts a bisection when it is the night's one series, and
/// not among 24 (0.05 / 24 = 0.0021, Bonferroni); at p 0.001 it does.
#[test]
fn a_change_point_must_pass_the_nights_corrected_level() {
    let mut w = World::new();
    for c in ["c0", "c1", "c2"] {
        w.night(c).unwrap();
    }
    let at = |p: f64| KeyChange {
        p,
        ..change("c1", "c2", -3.0, true)
    };
    (w.robot.tested, w.robot.changes) = (24, vec![at(0.004)]);
    let o = w.night("c3").unwrap();
    assert_eq!(
        o.changes[0].action,
        "not bisected: p 0.0040 is above 0.0021, the level for 24 key series at 0.05 family-wise (Bonferroni)"
    );
    assert!(o.changes[0].started.is_none() && w.robot.started.is_empty() && !o.regressed());
    (w.robot.tested, w.robot.changes) = (60, vec![at(0.001)]);
    let o = w.night("c3").unwrap();
    assert!(
        o.changes[0]
            .action
            .ends_with("a matrix with more than 50 key series bisects nothing"),
        "{:?}",
        o.changes[0].action
    );
    (w.robot.tested, w.robot.changes) = (24, vec![at(0.001)]);
    assert_eq!(w.night("c3").unwrap().changes[0].action, "bisection #1 started");
    // the night's one series: 0.004 is under 0.05
    let mut one = World::new();
    for c in ["c0", "c1", "c2"] {
        one.night(c).unwrap();
    }
    (one.robot.tested, one.robot.changes) = (1, vec![at(0.004)]);
    assert_eq!(one.night("c3").unwrap().changes[0].action, "bisection #1 started");
}

#[test]
fn a_change_for_the_worse_between_two_nights_starts_one_bisection_between_their_commits() {
    let mut w = World::new();
    for c in ["c0", "c1", "c2", "c3"] {
        w.night(c).unwrap();
    }
    assert_eq!(w.robot.measured, ["c0", "c1", "c2", "c3"]);
    w.robot.changes = vec![
        change("c1", "c2", -1.1, true),
        change("c0", "c1", 2.0, false),
        change("x", "c2", -3.0, true),
    ];
    let o = w.night("c4").unwrap();
    let actions: Vec<&str> = o.changes.iter().map(|s| s.action.as_str()).collect();
    // the largest change first
    assert_eq!(
        actions,
        [
            "not bisected: run run-x is not a night of this nightly",
            "not bisected: for the better",
            "bisection #1 started"
        ]
    );
    assert_eq!(w.robot.started, [("c1".to_string(), "c2".to_string())]);
    assert_eq!(o.bisections.len(), 1);
    assert_eq!(o.bisections[0].status, Status::Done);
    assert_eq!(o.bisections[0].result.as_ref().unwrap().culprits[0].commit, "c2");
}

#[test]
fn a_second_nightly_measures_nothing_and_starts_no_second_bisection() {
    let mut w = World::new();
    for c in ["c0", "c1", "c2"] {
        w.night(c).unwrap();
    }
    w.robot.changes = vec![change("c1", "c2", -1.1, true)];
    w.night("c2").unwrap();
    assert_eq!(
        w.robot.measured,
        ["c0", "c1", "c2"],
        "tonight's commit was measured already"
    );
    assert_eq!(w.robot.started.len(), 1);
    let again = w.night("c2").unwrap();
    assert!(again.already);
    assert_eq!(w.robot.started.len(), 1);
}

/// docs/nightly.md: a change point that moves by a night as later nights
/// arrive is not bisected twice; one that still stands beside a new one
/// is a second change; a move after an undecided bisection is bisected again.
#[test]
fn a_change_point_that_moves_by_a_night_is_not_bisected_twice() {
    let mut w = World::new();
    for c in ["c0", "c1", "c2", "c3"] {
        w.night(c).unwrap();
    }
    let actions = |o: &Outcome| o.changes.iter().map(|s| s.action.clone()).collect::<Vec<_>>();
    w.robot.changes = vec![change("c1", "c2", -1.1, true)];
    assert_eq!(actions(&w.night("c3").unwrap()), ["bisection #1 started"]);
    // moved a night later, a night earlier, or widened: the same change
    for (g, b) in [("c2", "c3"), ("c0", "c1"), ("c0", "c2")] {
        w.robot.changes = vec![change(g, b, -1.1, true)];
        assert_eq!(
            actions(&w.night("c3").unwrap()),
            ["covered by bisection #1"],
            "{g}..{b}"
        );
    }
    // the first change point still there beside the next one: a second change
    w.robot.changes = vec![change("c1", "c2", -1.1, true), change("c2", "c3", -1.0, true)];
    assert_eq!(
        actions(&w.night("c3").unwrap()),
        ["covered by bisection #1", "bisection #2 started"]
    );
    assert_eq!(
        w.robot.started,
        [
            ("c1".to_string(), "c2".to_string()),
            ("c2".to_string(), "c3".to_string())
        ]
    );
    assert_eq!(w.robot.runs.len(), 2, "a finished bisection is not run again");
    // after an undecided bisection, the moved change is bisected again
    let mut w = World::new();
    for c in ["c0", "c1", "c2", "c3"] {
        w.night(c).unwrap();
    }
    w.robot.undecided = true;
    w.robot.changes = vec![change("c1", "c2", -1.1, true)];
    w.night("c3").unwrap();
    w.robot.changes = vec![change("c2", "c3", -1.1, true)];
    assert_eq!(actions(&w.night("c3").unwrap()), ["bisection #2 started"]);
}

#[test]
fn an_interrupted_bisection_is_resumed_in_its_directory_not_started_again() {
    let mut w = World::new();
    for c in ["c0", "c1"] {
        w.night(c).unwrap();
    }
    w.robot.changes = vec![change("c0", "c1", -1.1, true)];
    w.robot.script = vec![Some(true)];
    let e = w.night("c1").unwrap_err();
    assert!(e.downcast_ref::<crate::proc::Interrupted>().is_some(), "{e:#}");
    let b = &state::bisections(&w.db, "m1:nightly").unwrap()[0];
    assert_eq!(
        (b.status, b.dir.clone()),
        (Status::Running, Some(w.dir.join("bisect-1")))
    );
    let o = w.night("c1").unwrap();
    assert_eq!(w.robot.started.len(), 1);
    assert_eq!(w.robot.runs, [w.dir.join("bisect-1"), w.dir.join("bisect-1")]);
    assert!(
        w.said
            .borrow()
            .iter()
            .any(|s| s.starts_with("nightly: resuming bisection #1 in ")),
        "{:?}",
        w.said.borrow()
    );
    assert_eq!(o.bisections[0].status, Status::Done);
}

#[test]
fn a_finished_bisection_is_reported_once() {
    let mut w = World::new();
    for c in ["c0", "c1"] {
        w.night(c).unwrap();
    }
    w.robot.changes = vec![change("c0", "c1", -1.1, true)];
    let first = w.night("c1").unwrap();
    let text = mail::text(
        &first,
        &["static-doexec execs/s at 2 vCPUs: 2510 (same as history (5 nights))".into()],
    );
    for want in [
        "# Nightly: c1 c1 subject",
        "- static-doexec execs/s at 2 vCPUs: -1.10% (worse; 95% interval -1.40% to -0.80%; p=0.001), first\n  night after it 2026-12-03, between runs run-c0 and run-c1: bisection #1 started",
        "## Bisection #1: c0..c1",
        "    first bad commit: c2 exec: one more check (carries 97% of the change)",
        "    step 1: c2 like bad",
        "    * bprm_execve +2003",
    ] {
        assert!(text.contains(want), "{want:?} not in\n{text}");
    }
    assert!(
        text.lines().all(|l| l.chars().count() <= 100),
        "a mail's 100 columns:\n{text}"
    );
    let second = w.night("c1").unwrap();
    assert!(second.bisections.is_empty(), "{:?}", second.bisections);
    assert!(mail::text(&second, &[]).contains("No bisection ended since the last report."));
    let third = w.night("c2").unwrap();
    assert!(third.bisections.is_empty());
}

#[test]
fn a_night_says_whether_it_found_a_regression_or_a_stage_failed() {
    let mut w = World::new();
    for c in ["c0", "c1"] {
        let o = w.night(c).unwrap();
        assert!(!o.regressed() && !o.failed());
    }
    // for the better: reported, not a regression
    w.robot.changes = vec![change("c0", "c1", 2.0, false)];
    assert!(!w.night("c1").unwrap().regressed());
    // a new change for the worse, bisected to a culprit tonight
    w.robot.changes = vec![change("c0", "c1", -1.1, true)];
    let o = w.night("c1").unwrap();
    assert_eq!(o.changes[0].started, Some(1));
    assert!(o.regressed() && !o.failed());
    // the next night: the change is covered and its end was told already
    let o = w.night("c2").unwrap();
    assert_eq!(o.changes[0].action, "covered by bisection #1");
    assert!(!o.regressed() && !o.failed(), "{:?}", o.changes);
    // a bisection that fails tonight is a failed stage, whatever else was found
    w.night("c3").unwrap();
    w.robot.changes = vec![change("c2", "c3", -3.0, true)];
    w.robot.script = vec![Some(false)];
    let o = w.night("c3").unwrap();
    assert!(o.failed() && o.regressed());
}

#[test]
fn only_a_bisection_that_answered_covers_a_change() {
    let mut w = World::new();
    for c in ["c0", "c1", "c2", "c3"] {
        w.night(c).unwrap();
    }
    w.robot.undecided = true;
    w.robot.changes = vec![change("c1", "c2", -1.1, true)];
    assert_eq!(w.night("c3").unwrap().changes[0].action, "bisection #1 started");
    // the same two commits again: bisecting them again would end the same way
    let o = w.night("c3").unwrap();
    assert_eq!(
        o.changes[0].action,
        "not bisected again: bisection #1 of the same commits ended undecided"
    );
    assert!(!o.regressed());
    // the change seen over other nights: the undecided #1 does not cover it
    w.robot.undecided = false;
    w.robot.changes = vec![change("c0", "c2", -1.2, true)];
    assert_eq!(w.night("c3").unwrap().changes[0].action, "bisection #2 started");
    w.robot.changes = vec![change("c1", "c2", -1.1, true)];
    assert_eq!(w.night("c3").unwrap().changes[0].action, "covered by bisection #2");
    // a bisection given up after its attempts covers nothing either
    let mut w = World::new();
    for c in ["c0", "c1", "c2"] {
        w.night(c).unwrap();
    }
    w.robot.changes = vec![change("c1", "c2", -1.1, true)];
    w.robot.script = vec![Some(false); 3];
    for _ in 0..3 {
        w.night("c2").unwrap();
    }
    assert_eq!(
        state::bisections(&w.db, "m1:nightly").unwrap()[0].status,
        Status::Failed
    );
    assert_eq!(
        w.night("c2").unwrap().changes[0].action,
        "not bisected again: bisection #1 of the same commits failed"
    );
    w.robot.changes = vec![change("c0", "c2", -1.2, true)];
    assert_eq!(w.night("c2").unwrap().changes[0].action, "bisection #2 started");
}

/// A change point placed one night off (the change is in c2..c3, the
/// change point says c1..c2): the ends do not differ, the range is widened
/// one night each way, and the wider range names the commit.
#[test]
fn a_change_one_night_off_is_placed_after_one_widening() {
    let mut w = World::new();
    for c in ["c0", "c1", "c2", "c3", "c4"] {
        w.night(c).unwrap();
    }
    w.robot.step_at = Some("c3".into());
    w.robot.changes = vec![change("c1", "c2", -1.1, true)];
    let o = w.night("c4").unwrap();
    assert_eq!(
        w.robot.ranges,
        [("c1".to_string(), "c2".to_string()), ("c0".into(), "c3".into())]
    );
    assert_eq!(w.robot.widens, [("c0".to_string(), "c3".to_string())]);
    let b = &o.bisections[0];
    assert_eq!(
        (b.status, b.good_commit.as_str(), b.bad_commit.as_str()),
        (Status::Done, "c0", "c3")
    );
    assert_eq!(b.result.as_ref().unwrap().culprits[0].commit, "c3");
    assert_eq!(
        (b.widened.len(), b.widened[0].good.as_str(), b.widened[0].bad.as_str()),
        (1, "c1", "c2")
    );
    assert!(o.regressed());
    let text = mail::text(&o, &[]);
    assert!(text.contains("## Bisection #1: c0..c3\n"), "{text}");
    assert!(
        text.contains("Widened: the ends of c1..c2 do not differ (c1..c2: the ends do not differ in 40 blocks).\n"),
        "{text}"
    );
    assert!(
        text.contains("first bad commit: c3 exec: one more check (carries 98% of the change)"),
        "{text}"
    );
    assert_eq!(
        w.robot.started.len(),
        1,
        "one bisection directory, its measurements kept"
    );
}

/// A flat pair (no change anywhere near): widened one night each way, then
/// two more, then "not placed" names the widest range tried; a resumed
/// nightly does not widen it again.
#[test]
fn a_flat_pair_widens_to_the_cap_then_is_not_placed_with_its_range() {
    let mut w = World::new();
    for c in ["c0", "c1", "c2", "c3", "c4", "c5", "c6", "c7", "c8"] {
        w.night(c).unwrap();
    }
    w.robot.step_at = Some("none".into());
    w.robot.changes = vec![change("c4", "c5", -1.1, true)];
    let o = w.night("c8").unwrap();
    let r = |a: &str, b: &str| (a.to_string(), b.to_string());
    assert_eq!(w.robot.ranges, [r("c4", "c5"), r("c3", "c6"), r("c1", "c8")]);
    let b = &o.bisections[0];
    assert_eq!((b.status, b.widened.len()), (Status::Done, MAX_WIDENINGS));
    assert_eq!(
        mail::ended_lines(b),
        [
            "not placed: c1..c8: the ends do not differ in 40 blocks",
            "not placed in c1..c8, the widest range tried (widened 2 time(s) from c4..c5, at most 2)"
        ]
    );
    w.night("c8").unwrap();
    assert_eq!(w.robot.ranges.len(), 3, "an ended bisection is not widened again");
    // at the first and last nights nothing is left to widen to: the range is told as it is
    let mut w = World::new();
    for c in ["c0", "c1"] {
        w.night(c).unwrap();
    }
    w.robot.step_at = Some("none".into());
    w.robot.changes = vec![change("c0", "c1", -1.1, true)];
    let o = w.night("c1").unwrap();
    assert_eq!(w.robot.ranges, [r("c0", "c1")]);
    assert_eq!(
        mail::ended_lines(&o.bisections[0]),
        ["not placed: c0..c1: the ends do not differ in 40 blocks"]
    );
}

/// A nightly interrupted in a widened bisection resumes it in the widened
/// range (the range is set again from the database before it runs).
#[test]
fn a_widened_bisection_interrupted_resumes_in_its_wider_range() {
    let mut w = World::new();
    for c in ["c0", "c1", "c2", "c3", "c4"] {
        w.night(c).unwrap();
    }
    w.robot.step_at = Some("c3".into());
    w.robot.script = vec![None, Some(true)];
    w.robot.changes = vec![change("c1", "c2", -1.1, true)];
    assert!(w.night("c4").is_err(), "interrupted in the wider range");
    let b = state::bisections(&w.db, "m1:nightly").unwrap()[0].clone();
    assert_eq!(
        (b.status, b.good_commit.as_str(), b.widened.len()),
        (Status::Running, "c0", 1)
    );
    w.robot.widens.clear();
    let o = w.night("c4").unwrap();
    assert_eq!(
        w.robot.widens,
        [("c0".to_string(), "c3".to_string())],
        "the range set again"
    );
    assert_eq!(o.bisections[0].result.as_ref().unwrap().culprits[0].commit, "c3");
}

/// The bisection runs outside the measuring lock: a cron nightly started
/// while it runs measures its night; the bisections, under their own lock,
/// are left to the nightly that runs them, which alone tells their ends.
#[test]
fn a_bisection_leaves_the_next_night_free_to_be_measured() {
    let mut w = World::new();
    for c in ["c0", "c1"] {
        w.night(c).unwrap();
    }
    w.robot.changes = vec![change("c0", "c1", -1.1, true)];
    w.night("c2").unwrap();
    assert_eq!(w.robot.lock_free, [true], "the measuring lock is free while bisecting");
    // another nightly is bisecting (it holds the bisecting lock)
    // patiently: the last nightly's dropped lock may be held a moment by a child another test forks
    let other = crate::util::Flock::take_patiently(&w.history.with_extension("bisect.lock"), "nightly (bisecting)")
        .unwrap()
        .unwrap();
    w.robot.changes = vec![change("c2", "c3", -3.0, true)];
    w.night("c3").unwrap_or_else(|e| panic!("{e:#}"));
    let b2 = state::bisections(&w.db, "m1:nightly").unwrap()[1].clone();
    assert_eq!((b2.id, b2.status), (2, Status::Pending));
    // it ends #2 while this nightly measures c4: this one does not tell that end
    state::ended(&w.db, 2, Status::Done, 0, &Bisected::default()).unwrap();
    let o = w.night("c4").unwrap();
    assert_eq!(w.robot.measured, ["c0", "c1", "c2", "c3", "c4"], "every night measured");
    assert_eq!(w.robot.runs.len(), 1, "no bisection run beside the other nightly's");
    assert!(o.elsewhere.as_deref().unwrap().starts_with("pid "), "{:?}", o.elsewhere);
    assert!(o.bisections.is_empty(), "{:?}", o.bisections);
    assert!(mail::text(&o, &[]).contains("The bisections are run by another nightly (pid "));
    drop(other);
    let o = w.night("c4").unwrap();
    assert_eq!(
        o.bisections.iter().map(|b| b.id).collect::<Vec<_>>(),
        [2],
        "told by the next"
    );
    assert!(o.elsewhere.is_none());
}

#[test]
fn a_culprit_next_to_a_skipped_commit_is_reported_as_one_of_them() {
    let mut w = World::new();
    for c in ["c0", "c1"] {
        w.night(c).unwrap();
    }
    w.robot.changes = vec![change("c0", "c1", -1.1, true)];
    w.robot.maybe = vec!["0123456789abcdef".into()];
    let o = w.night("c1").unwrap();
    assert_eq!(
        mail::ended_lines(&o.bisections[0]),
        ["the first bad commit is one of: 0123456789ab (skipped: could not be measured), c2 exec: one more check (together they carry 97% of the change)"]
    );
}

#[test]
fn a_failing_bisection_is_tried_again_and_given_up_after_its_attempts() {
    let mut w = World::new();
    for c in ["c0", "c1"] {
        w.night(c).unwrap();
    }
    w.robot.changes = vec![change("c0", "c1", -1.1, true)];
    w.robot.script = vec![Some(false), Some(false), Some(false)];
    let o = w.night("c1").unwrap();
    assert_eq!(o.bisections[0].status, Status::Running, "still open after one failure");
    assert_eq!(
        mail::ended_lines(&o.bisections[0]),
        ["running after 1 attempt(s): build the kernel of c2: no space left on device"]
    );
    w.night("c1").unwrap();
    let o = w.night("c1").unwrap();
    assert_eq!((o.bisections[0].status, o.bisections[0].attempts), (Status::Failed, 3));
    assert_eq!(w.robot.started.len(), 1);
    w.night("c1").unwrap();
    assert_eq!(w.robot.runs.len(), 3, "a failed bisection is not run again");
}

#[test]
fn a_night_whose_run_failed_is_measured_again_then_only_once() {
    let mut w = World::new();
    w.robot.measure_fails = true;
    assert!(w.night("c0").is_err());
    w.robot.measure_fails = false;
    w.night("c0").unwrap();
    w.night("c0").unwrap();
    assert_eq!(w.robot.measured, ["c0", "c0"]);
}

#[test]
fn a_second_nightly_on_the_same_history_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("history.sqlite");
    let _held = lock(&db).unwrap();
    let e = format!("{:#}", lock(&db).err().unwrap());
    assert!(
        e.starts_with(&format!(
            "another nightly is running on the history {} (pid {}, harness nightly; lock ",
            db.display(),
            std::process::id()
        )),
        "{e}"
    );
    assert!(
        e.ends_with("this one does nothing; run it again when that one has finished"),
        "{e}"
    );
}

#[test]
fn a_series_change_point_becomes_a_key_change_with_its_interval() {
    use crate::history::{Night as HNight, RunKey, Series, SeriesKey};
    let values = [2560.0, 2561.5, 2559.0, 2560.5, 2541.0, 2540.0, 2542.5, 2540.5];
    let nights: Vec<HNight> = values
        .iter()
        .enumerate()
        .map(|(i, v)| HNight {
            run_id: format!("r{i}"),
            started: format!("2026-12-0{}T01:30:00Z", i + 1),
            run_dir: String::new(),
            median: *v,
            lo: v - 1.0,
            hi: v + 1.0,
            ci_exact: false,
            n: 4,
        })
        .collect();
    let p = crate::stats::changepoint::Params {
        alpha: 0.05,
        min_magnitude: 0.005,
        ..Default::default()
    };
    let run = RunKey {
        matrix_id: "m".into(),
        matrix_name: "matrix".into(),
        profile: String::new(),
        host: "h".into(),
        clock: "tcg-icount".into(),
        accel: "tcg".into(),
    };
    let key = SeriesKey {
        run,
        benchmark: "static-doexec".into(),
        metric: "execs/Ginsn".into(),
        vcpus: 2,
        variant: "base".into(),
    };
    let changes = crate::history::changes(&nights, &p);
    let s = Series {
        key,
        unit: "execs/Ginsn".into(),
        higher_is_better: true,
        nights,
        changes,
    };
    let k = real::key_changes(&s);
    assert_eq!(k.len(), 1, "{k:?}");
    let c = &k[0];
    assert_eq!(
        (
            c.good_run.as_str(),
            c.bad_run.as_str(),
            c.date.as_str(),
            c.worse,
            c.vcpus
        ),
        ("r3", "r4", "2026-12-05", true, 2)
    );
    assert!((c.change - (2540.75 / 2560.25 - 1.0)).abs() < 1e-9, "{c:?}");
    let (lo, hi) = c.interval.unwrap();
    assert!(lo <= c.change && c.change <= hi && hi < 0.0, "{c:?}");
    assert!(
        mail::change_line(c).starts_with("static-doexec execs/Ginsn at 2 vCPUs: -0.76% (worse; 95% interval "),
        "{}",
        mail::change_line(c)
    );
}

/// The mail report is written under `<dir>/reports/`, named by the time
/// and tonight's commit, and a run the history lacks is named in the error.
#[test]
fn the_mail_report_is_written_under_reports_and_a_missing_run_is_named() {
    let mut w = World::new();
    let o = w.night("c1").unwrap();
    let cells = [
        "base s m at 2 vCPUs: no value".into(),
        "base s m in \x1b[2Jops at 4 vCPUs: 1".into(),
    ];
    let (text, file) = mail::write(&w.dir, &o, &cells).unwrap();
    assert!(
        !text.contains('\x1b') && text.contains("in \\x1b[2Jops"),
        "guest text is escaped in the mail: {text}"
    );
    assert_eq!(file.parent().unwrap(), w.dir.join("reports"));
    assert!(
        file.to_string_lossy()
            .ends_with(&format!("-{}.md", short(&o.tonight.commit))),
        "{}",
        file.display()
    );
    assert_eq!(std::fs::read_to_string(&file).unwrap(), text);
    assert!(
        text.contains("## Key cells\n\n- base s m at 2 vCPUs: no value\n"),
        "{text}"
    );
    let e = format!("{:#}", state::run_dir(&w.db, "nowhere").unwrap_err());
    assert!(e.starts_with("find run nowhere in the history"), "{e}");
}
