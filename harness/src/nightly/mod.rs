//! `harness nightly`: the robot a cron job runs every night. It measures
//! tonight's commit (a branch's tip) with a matrix, adds the run to the
//! history, and when a key cell of base shows a change point for the worse
//! it bisects between the last good night's commit and the first bad
//! night's by itself, then writes a report to paste into a mail.
//!
//! Safe to run every night, or twice a night: its state is in the history
//! database ([`state`]): a commit measured once is not measured again; a
//! night whose run was interrupted is resumed; a change is claimed by one
//! bisection only (changes whose nights overlap are one change); a
//! bisection interrupted is resumed from its directory (its finished
//! measurements kept); a bisection's end is told in one report only. A
//! second nightly on the same database is refused while one measures; the
//! bisections run after the measuring lock is let go, under a lock of
//! their own ([`Locks`]), so a long bisection never costs the next night.
//!
//! [`night`] is the state machine; it works through a [`Robot`] (the real
//! one, [`real::Real`], builds, boots and bisects), so its rules are
//! tested on a fake in milliseconds.

pub mod cover;
pub mod mail;
pub mod real;
pub mod state;
#[cfg(test)]
mod tests;

use std::path::{Path, PathBuf};

use anyhow::{bail, Result};
use rusqlite::Connection;
use serde::Serialize;

pub use state::{Bisected, Bisection, KeyChange, Named, Night, Status, Tried};

/// Failed attempts after which a bisection is given up (status failed).
pub const MAX_ATTEMPTS: u32 = 3;

/// Times a bisection whose ends do not differ is widened at most: the
/// `k`-th widening moves each end `2^(k-1)` nights further out (one night
/// each way, then two more), where such nights exist.
pub const MAX_WIDENINGS: usize = 2;

/// The family-wise level across a night's key series at which a change
/// point starts a bisection: Bonferroni, a change point's p at most
/// `FAMILY_ALPHA / m` for `m` key series tested (docs/nightly.md).
pub const FAMILY_ALPHA: f64 = 0.05;

/// Tonight's change points and the number of key series tested for them.
#[derive(Debug, Clone, Default)]
pub struct KeyChanges {
    /// Key series of base tested tonight (each its own change-point test).
    pub tested: usize,
    /// Their change points.
    pub changes: Vec<KeyChange>,
}

impl KeyChanges {
    /// The level a change point's p must reach to start a bisection.
    pub fn level(&self) -> f64 {
        FAMILY_ALPHA / self.tested.max(1) as f64
    }
}

/// What the state machine does through: measuring, reading changes, bisecting.
pub trait Robot {
    /// Measures `commit` with runs under `runs_dir` (starting a run, resuming
    /// an unfinished one there, or leaving a finished one alone) and adds the
    /// run to the history; gives the run's id.
    fn measure(&mut self, commit: &str, runs_dir: &Path) -> Result<String>;
    /// The change points of the key cells of base in tonight's series (the
    /// run `run_id`'s), oldest first, with how many series were tested.
    fn changes(&mut self, db: &Connection, run_id: &str) -> Result<KeyChanges>;
    /// Makes a bisection's directory for `b` (its commits and cell).
    fn start_bisect(&mut self, b: &Bisection) -> Result<PathBuf>;
    /// Runs (or resumes) the bisection in `dir` to its end.
    fn run_bisect(&mut self, dir: &Path, b: &Bisection) -> Result<Bisected>;
    /// Sets the range of the bisection in `dir` to `b`'s commits (widened),
    /// keeping its measurements; the range it has already changes nothing.
    fn widen(&mut self, dir: &Path, b: &Bisection) -> Result<()>;
}

/// Tonight's commit.
#[derive(Debug, Clone, Serialize)]
pub struct Tonight {
    /// Its id.
    pub commit: String,
    /// Its subject.
    pub subject: String,
}

/// A change tonight's series shows, and what the nightly made of it.
#[derive(Debug, Clone, Serialize)]
pub struct Seen {
    /// The change.
    pub change: KeyChange,
    /// `bisection #N`, `covered by bisection #N`, or why it is not bisected.
    pub action: String,
    /// The bisection this nightly started for it (a change for the worse
    /// that no earlier bisection answers: a regression found tonight).
    pub started: Option<i64>,
}

/// What one nightly invocation did.
#[derive(Debug, Clone, Serialize)]
pub struct Outcome {
    /// Tonight's commit.
    pub tonight: Tonight,
    /// Its night.
    pub night: Night,
    /// Whether tonight's commit was measured already (nothing was measured now).
    pub already: bool,
    /// Every change point of tonight's key cells.
    pub changes: Vec<Seen>,
    /// Bisections whose end this report tells (told once), and those still open.
    pub bisections: Vec<Bisection>,
    /// When another nightly runs the bisections (it holds their lock): who.
    pub elsewhere: Option<String>,
}

impl Outcome {
    /// Tonight found a regression: a change for the worse that no earlier
    /// bisection answers (one was started for it), or a bisection whose
    /// end this report tells named a culprit.
    pub fn regressed(&self) -> bool {
        self.changes.iter().any(|s| s.started.is_some())
            || self
                .bisections
                .iter()
                .any(|b| b.status == Status::Done && b.result.as_ref().is_some_and(|r| !r.culprits.is_empty()))
    }

    /// A stage failed: a bisection failed tonight (tried again by the next
    /// nightly, or given up after [`MAX_ATTEMPTS`]).
    pub fn failed(&self) -> bool {
        self.bisections
            .iter()
            .any(|b| b.status != Status::Done && b.result.as_ref().is_some_and(|r| r.error.is_some()))
    }
}

/// The nightly's identity in the database: its matrix's id and profile.
pub fn key(matrix_id: &str, profile: Option<&str>) -> String {
    format!("{matrix_id}:{}", profile.unwrap_or(""))
}

/// One night: measure tonight (unless done), claim bisections for new
/// changes for the worse, run every bisection not ended, and gather what the
/// report tells. The report's bisections are marked told by [`told`] once
/// it is written.
pub fn night(
    db: &mut Connection,
    nightly: &str,
    dir: &Path,
    tonight: &Tonight,
    robot: &mut dyn Robot,
    locks: Locks,
    say: &dyn Fn(&str),
) -> Result<(Outcome, Telling)> {
    let runs_dir = dir.join("nights").join(&tonight.commit[..tonight.commit.len().min(12)]);
    let mut n = state::night(db, nightly, &tonight.commit, &tonight.subject, &runs_dir)?;
    let already = n.finished;
    if already {
        say(&format!(
            "nightly: {} was measured already ({}); looking at changes and bisections only",
            short(&tonight.commit),
            n.run_id.as_deref().unwrap_or("?")
        ));
    } else {
        let run_id = robot.measure(&tonight.commit, &n.runs_dir)?;
        state::finish_night(db, n.id, &run_id)?;
        (n.run_id, n.finished) = (Some(run_id), true);
    }
    let run_id = n.run_id.clone().unwrap_or_default();
    let changes = claim_changes(db, nightly, &robot.changes(db, &run_id)?)?;
    // tonight is measured and its changes claimed: the next nightly may measure its night
    drop(locks.measuring);
    let bisecting = bisect_lock(&locks.history)?;
    let elsewhere = bisecting.as_ref().err().cloned();
    match &elsewhere {
        None => bisect_open(db, nightly, robot, say)?,
        Some(holder) => say(&format!(
            "nightly: the bisections are run by another nightly ({holder}): their ends are told in its report"
        )),
    }
    // only the nightly that runs the bisections tells their ends, so each is told once
    let bisections = state::bisections(db, nightly)?
        .into_iter()
        .filter(|b| b.reported_night.is_none())
        .filter(|b| elsewhere.is_none() || !matches!(b.status, Status::Done | Status::Failed))
        .collect();
    let o = Outcome {
        tonight: tonight.clone(),
        night: n,
        already,
        changes,
        bisections,
        elsewhere,
    };
    Ok((o, Telling { _held: bisecting.ok() }))
}

/// The nightly's locks: `measuring` ([`lock`]) is held from before
/// tonight is measured until its changes are claimed; the bisections take
/// their own lock beside the history database (`history.bisect.lock`), so a
/// long bisection never keeps the next night from being measured.
pub struct Locks {
    /// The measuring lock, taken by [`lock`].
    pub measuring: crate::util::Flock,
    /// The history database the locks are beside.
    pub history: PathBuf,
}

/// The bisecting lock of a night that runs the bisections, held until
/// [`told`] marks their ends told (none when another nightly runs them).
pub struct Telling {
    _held: Option<crate::util::Flock>,
}

/// Runs every bisection not ended to its end (or its failed attempt), one
/// at a time, including those another nightly claims meanwhile.
fn bisect_open(db: &Connection, nightly: &str, robot: &mut dyn Robot, say: &dyn Fn(&str)) -> Result<()> {
    let mut tried: Vec<i64> = vec![];
    loop {
        let open = state::bisections(db, nightly)?
            .into_iter()
            .find(|b| matches!(b.status, Status::Pending | Status::Running) && !tried.contains(&b.id));
        let Some(b) = open else { return Ok(()) };
        tried.push(b.id);
        bisect_one(db, nightly, b, robot, say)?;
    }
}

/// Takes the bisecting lock beside the history database, or gives its holder.
fn bisect_lock(history_db: &Path) -> Result<Result<crate::util::Flock, String>> {
    crate::util::Flock::take_patiently(&history_db.with_extension("bisect.lock"), "nightly (bisecting)")
}

/// Marks the bisections that ended in `o` as told (after its report is
/// written), then lets the bisecting lock go.
pub fn told(db: &Connection, o: &Outcome, telling: Telling) -> Result<()> {
    let _held = telling;
    let ids: Vec<i64> = o
        .bisections
        .iter()
        .filter(|b| matches!(b.status, Status::Done | Status::Failed))
        .map(|b| b.id)
        .collect();
    state::reported(db, &ids, o.night.id)
}

/// The first 12 characters of a commit id.
pub fn short(c: &str) -> &str {
    &c[..c.len().min(12)]
}

/// Each change with what is done about it: a change for the worse between
/// two nights of this nightly is claimed for a bisection, unless an earlier
/// one answers it ([`cover`]: overlapping nights, or the change point moved
/// by a night); the largest change first, so of the cells that moved
/// together the one that moved most is bisected.
fn claim_changes(db: &mut Connection, nightly: &str, found: &KeyChanges) -> Result<Vec<Seen>> {
    let changes = &found.changes;
    let mut order: Vec<&KeyChange> = changes.iter().collect();
    order.sort_by(|a, b| b.change.abs().total_cmp(&a.change.abs()));
    let mut out = vec![];
    for c in order {
        let mut started = None;
        let action = if !c.worse {
            "not bisected: for the better".to_string()
        } else if c.p > found.level() {
            above_level(c.p, found)
        } else {
            let good = state::night_of_run(db, nightly, &c.good_run)?;
            let bad = state::night_of_run(db, nightly, &c.bad_run)?;
            match (good, bad) {
                (Some(g), Some(b)) if g.commit != b.commit => {
                    let ids: std::collections::BTreeMap<String, i64> = nights_order(db, nightly)?;
                    match state::claim(
                        db,
                        nightly,
                        c,
                        (&g.commit, &b.commit),
                        &|r| ids.get(r).copied(),
                        changes,
                    )? {
                        Ok(id) => {
                            started = Some(id);
                            format!("bisection #{id} started")
                        }
                        Err(cover::Claim::Covered(id)) => format!("covered by bisection #{id}"),
                        Err(cover::Claim::Repeat(id, failed)) => format!(
                            "not bisected again: bisection #{id} of the same commits {}",
                            if failed { "failed" } else { "ended undecided" }
                        ),
                    }
                }
                (Some(_), Some(_)) => "not bisected: both nights measured the same commit".into(),
                (g, _) => format!(
                    "not bisected: run {} is not a night of this nightly",
                    if g.is_none() { &c.good_run } else { &c.bad_run }
                ),
            }
        };
        out.push(Seen {
            change: c.clone(),
            action,
            started,
        });
    }
    Ok(out)
}

/// Why a change point whose p misses the night's corrected level is not
/// bisected.
fn above_level(p: f64, found: &KeyChanges) -> String {
    format!(
        "not bisected: p {p:.4} is above {:.4}, the level for {} key series at {FAMILY_ALPHA} family-wise (Bonferroni){}",
        found.level(),
        found.tested,
        if found.level() < 0.001 {
            "; the test's 999 draws give no p below 0.001, so a matrix with more than 50 key series bisects nothing"
        } else {
            ""
        }
    )
}

/// Each finished night's run id with its night number.
fn nights_order(db: &Connection, nightly: &str) -> Result<std::collections::BTreeMap<String, i64>> {
    let mut stmt = db.prepare("SELECT run_id, id FROM nightly_nights WHERE nightly = ?1 AND run_id IS NOT NULL")?;
    let rows = stmt
        .query_map([nightly], |r| Ok((r.get(0)?, r.get(1)?)))?
        .collect::<rusqlite::Result<_>>()?;
    Ok(rows)
}

/// Starts (when pending) and runs one bisection to its end, widening its
/// range while its ends do not differ ([`MAX_WIDENINGS`]); a failure
/// counts an attempt (given up after [`MAX_ATTEMPTS`]); an interruption
/// leaves it running, to be resumed.
fn bisect_one(
    db: &Connection,
    nightly: &str,
    mut b: Bisection,
    robot: &mut dyn Robot,
    say: &dyn Fn(&str),
) -> Result<()> {
    let ended = (|| -> Result<Bisected> {
        let dir = bisect_dir(db, &mut b, robot, say)?;
        loop {
            // the range the database holds is the one bisected (a crash after widening it included)
            if !b.widened.is_empty() {
                robot.widen(&dir, &b)?;
            }
            let r = robot.run_bisect(&dir, &b)?;
            let wider = (r.flat && b.widened.len() < MAX_WIDENINGS)
                .then(|| wider(db, nightly, &b))
                .transpose()?
                .flatten();
            let Some((good, bad)) = wider else { return Ok(r) };
            say(&format!(
                "nightly: bisection #{}: the ends of {}..{} do not differ: widened to {}..{}",
                b.id,
                short(&b.good_commit),
                short(&b.bad_commit),
                short(&good),
                short(&bad)
            ));
            b.widened.push(Tried {
                good: std::mem::replace(&mut b.good_commit, good),
                bad: std::mem::replace(&mut b.bad_commit, bad),
                open: r.open,
                steps: r.steps,
            });
            state::widen(db, b.id, &b.widened, &b.good_commit, &b.bad_commit)?;
        }
    })();
    match ended {
        Ok(r) => state::ended(db, b.id, Status::Done, b.attempts, &r),
        Err(e) if e.downcast_ref::<crate::proc::Interrupted>().is_some() || crate::proc::interrupted() => Err(e),
        Err(e) => failed(db, &b, &e, say),
    }
}

/// A failed attempt of `b`: counted, and the bisection given up after
/// [`MAX_ATTEMPTS`].
fn failed(db: &Connection, b: &Bisection, e: &anyhow::Error, say: &dyn Fn(&str)) -> Result<()> {
    let attempts = b.attempts + 1;
    let status = if attempts >= MAX_ATTEMPTS {
        Status::Failed
    } else if b.dir.is_some() {
        Status::Running
    } else {
        Status::Pending
    };
    say(&format!(
        "nightly: bisection #{} failed (attempt {attempts} of {MAX_ATTEMPTS}): {e:#}",
        b.id
    ));
    let r = Bisected {
        error: Some(format!("{e:#}")),
        ..Default::default()
    };
    state::ended(db, b.id, status, attempts, &r)
}

/// The bisection's directory: made now when it is pending, else resumed.
fn bisect_dir(db: &Connection, b: &mut Bisection, robot: &mut dyn Robot, say: &dyn Fn(&str)) -> Result<PathBuf> {
    if let Some(d) = &b.dir {
        say(&format!("nightly: resuming bisection #{} in {}", b.id, d.display()));
        return Ok(d.clone());
    }
    let d = robot.start_bisect(b)?;
    state::started(db, b.id, &d)?;
    say(&format!(
        "nightly: bisection #{} of {}..{} in {}",
        b.id,
        short(&b.good_commit),
        short(&b.bad_commit),
        d.display()
    ));
    b.dir = Some(d.clone());
    Ok(d)
}

/// The next wider range of `b`: the `k`-th widening (`k` = its widenings
/// so far + 1) moves the good end `2^(k-1)` of this nightly's nights
/// earlier and the bad end as many later, as far as nights exist; None when
/// neither end can move (or an end is not a night of this nightly).
fn wider(db: &Connection, nightly: &str, b: &Bisection) -> Result<Option<(String, String)>> {
    let commits = state::finished_commits(db, nightly)?;
    let at = |c: &str| commits.iter().position(|x| x == c);
    let (Some(g), Some(e)) = (at(&b.good_commit), at(&b.bad_commit)) else {
        return Ok(None);
    };
    let step = 1usize << b.widened.len();
    let (g2, e2) = (g.saturating_sub(step), (e + step).min(commits.len() - 1));
    Ok(((g2, e2) != (g, e)).then(|| (commits[g2].clone(), commits[e2].clone())))
}

/// Takes the nightly lock beside the history database, or says who holds it.
pub fn lock(history_db: &Path) -> Result<crate::util::Flock> {
    let p = history_db.with_extension("nightly.lock");
    if let Some(d) = p.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(d).map_err(|e| anyhow::anyhow!("create {}: {e}", d.display()))?;
    }
    match crate::util::Flock::take_patiently(&p, "nightly")? {
        Ok(l) => Ok(l),
        Err(holder) => bail!(
            "another nightly is running on the history {} ({holder}; lock {}): this one does nothing; run it again when that one has finished",
            history_db.display(),
            p.display()
        ),
    }
}
