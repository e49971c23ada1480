//! The nightly robot's state in the history database (schema version 3,
//! [`crate::history::schema`]): `nightly_nights`, one row per commit a
//! nightly measured (running until its run is in the history), and
//! `nightly_bisections`, one row per change it bisects, with its status
//! (`pending` → `running` → `done` or `failed`) and the night whose report
//! told it. Every write is one short transaction taken at once
//! (`BEGIN IMMEDIATE`), so two writers never interleave a claim.

use std::path::PathBuf;

use anyhow::{Context, Result};
use rusqlite::{params, Connection, OptionalExtension};
use serde::{Deserialize, Serialize};

/// A bisection's status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Claimed for a change; its directory is not made yet.
    Pending,
    /// Its directory exists; it is measured (or was, when interrupted).
    Running,
    /// It ended (with culprits, or undecided).
    Done,
    /// It failed [`super::MAX_ATTEMPTS`] times.
    Failed,
}

impl Status {
    fn word(self) -> &'static str {
        match self {
            Status::Pending => "pending",
            Status::Running => "running",
            Status::Done => "done",
            Status::Failed => "failed",
        }
    }

    fn parse(s: &str) -> Status {
        match s {
            "pending" => Status::Pending,
            "running" => Status::Running,
            "done" => Status::Done,
            _ => Status::Failed,
        }
    }
}

/// One night: a commit measured by a nightly.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Night {
    /// Row id (nights are numbered in the order they were first started).
    pub id: i64,
    /// The commit.
    pub commit: String,
    /// Its subject.
    pub subject: String,
    /// Where its run directory is made.
    pub runs_dir: PathBuf,
    /// The run's id, once it is in the history.
    pub run_id: Option<String>,
    /// Whether its run finished and is in the history.
    pub finished: bool,
}

/// A change of a key cell of base, between two nights.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KeyChange {
    /// Benchmark.
    pub bench: String,
    /// Metric.
    pub metric: String,
    /// vCPUs.
    pub vcpus: u32,
    /// The last run before the change.
    pub good_run: String,
    /// The first run after it.
    pub bad_run: String,
    /// Date of the first night after it.
    pub date: String,
    /// `after / before − 1` of the segment medians.
    pub change: f64,
    /// 95% bootstrap interval of that change, over the segments' nights.
    pub interval: Option<(f64, f64)>,
    /// Permutation p of the split.
    pub p: f64,
    /// Whether it is for the worse.
    pub worse: bool,
    /// The metric's unit.
    pub unit: String,
}

/// One commit a bisection names.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Named {
    /// Its id.
    pub commit: String,
    /// `<short id> <subject>`.
    pub subject: String,
    /// Its share of the change.
    pub share: f64,
    /// Skipped commits that could carry the share instead.
    pub maybe: Vec<String>,
}

/// How a bisection ended.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Bisected {
    /// Every commit that carries a share.
    pub culprits: Vec<Named>,
    /// Segments that could not be placed, and why.
    pub open: Vec<String>,
    /// The rule and each step, as the bisection printed them.
    pub steps: Vec<String>,
    /// The differential kernel profile of the first culprit's cell, as text.
    pub profile: Option<String>,
    /// Why a bisection failed (status failed).
    pub error: Option<String>,
    /// The ends of the range bisected were measured and do not differ (the
    /// nightly widens it, [`super::MAX_WIDENINGS`] times at most).
    #[serde(default)]
    pub flat: bool,
}

/// A range a bisection tried, whose ends did not differ, before it was widened.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Tried {
    /// Its good commit.
    pub good: String,
    /// Its bad commit.
    pub bad: String,
    /// Why it was not placed, as the bisection said.
    pub open: Vec<String>,
    /// Its steps.
    pub steps: Vec<String>,
}

/// One bisection a nightly started.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Bisection {
    /// Row id.
    pub id: i64,
    /// The change it bisects.
    pub change: KeyChange,
    /// The last good night's commit.
    pub good_commit: String,
    /// The first bad night's commit.
    pub bad_commit: String,
    /// The ranges tried before `good_commit..bad_commit`, narrowest first
    /// (each widened because its ends did not differ).
    pub widened: Vec<Tried>,
    /// Its directory, once made.
    pub dir: Option<PathBuf>,
    /// Status.
    pub status: Status,
    /// Failed attempts so far.
    pub attempts: u32,
    /// How it ended.
    pub result: Option<Bisected>,
    /// The night whose report told its end.
    pub reported_night: Option<i64>,
}

fn night_of(r: &rusqlite::Row) -> rusqlite::Result<Night> {
    Ok(Night {
        id: r.get(0)?,
        commit: r.get(1)?,
        subject: r.get(2)?,
        runs_dir: PathBuf::from(r.get::<_, String>(3)?),
        run_id: r.get(4)?,
        finished: r.get::<_, String>(5)? == "finished",
    })
}

const NIGHT: &str = "SELECT id, git_commit, subject, runs_dir, run_id, status FROM nightly_nights";

/// The night of `commit`, made (running, no run yet) when there is none.
pub fn night(
    db: &mut Connection,
    nightly: &str,
    commit: &str,
    subject: &str,
    runs_dir: &std::path::Path,
) -> Result<Night> {
    let tx = db.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
    tx.execute(
        "INSERT OR IGNORE INTO nightly_nights (nightly, git_commit, subject, runs_dir, status, started) VALUES (?1, ?2, ?3, ?4, 'running', ?5)",
        params![nightly, commit, subject, runs_dir.to_string_lossy(), crate::util::now_rfc3339()],
    )?;
    let n = tx.query_row(
        &format!("{NIGHT} WHERE nightly = ?1 AND git_commit = ?2"),
        params![nightly, commit],
        night_of,
    )?;
    tx.commit()?;
    Ok(n)
}

/// Marks a night finished: its run `run_id` is in the history.
pub fn finish_night(db: &Connection, id: i64, run_id: &str) -> Result<()> {
    db.execute(
        "UPDATE nightly_nights SET status = 'finished', run_id = ?2, finished = ?3 WHERE id = ?1",
        params![id, run_id, crate::util::now_rfc3339()],
    )?;
    Ok(())
}

/// The commits of a nightly's finished nights, in night order.
pub fn finished_commits(db: &Connection, nightly: &str) -> Result<Vec<String>> {
    let mut stmt =
        db.prepare("SELECT git_commit FROM nightly_nights WHERE nightly = ?1 AND status = 'finished' ORDER BY id")?;
    let commits = stmt
        .query_map([nightly], |r| r.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    Ok(commits)
}

/// The directory of run `run_id` as the history recorded it.
pub fn run_dir(db: &Connection, run_id: &str) -> Result<PathBuf> {
    let dir: String = db
        .query_row("SELECT run_dir FROM runs WHERE run_id = ?1", [run_id], |r| r.get(0))
        .with_context(|| format!("find run {run_id} in the history"))?;
    Ok(PathBuf::from(dir))
}

/// The finished night whose run is `run_id`.
pub fn night_of_run(db: &Connection, nightly: &str, run_id: &str) -> Result<Option<Night>> {
    Ok(db
        .query_row(
            &format!("{NIGHT} WHERE nightly = ?1 AND run_id = ?2 AND status = 'finished'"),
            params![nightly, run_id],
            night_of,
        )
        .optional()?)
}

type Row = (Bisection, String, Option<String>, Option<String>);

fn bisection_of(r: &rusqlite::Row) -> rusqlite::Result<Row> {
    let b = Bisection {
        id: r.get(0)?,
        change: KeyChange {
            bench: String::new(),
            metric: String::new(),
            vcpus: 0,
            good_run: String::new(),
            bad_run: String::new(),
            date: String::new(),
            change: 0.0,
            interval: None,
            p: 1.0,
            worse: true,
            unit: String::new(),
        },
        good_commit: r.get(1)?,
        bad_commit: r.get(2)?,
        widened: vec![],
        dir: r.get::<_, Option<String>>(4)?.map(PathBuf::from),
        status: Status::parse(&r.get::<_, String>(5)?),
        attempts: r.get(6)?,
        result: None,
        reported_night: r.get(8)?,
    };
    Ok((b, r.get(3)?, r.get(7)?, r.get(9)?))
}

/// Every bisection of a nightly, oldest first.
pub fn bisections(db: &Connection, nightly: &str) -> Result<Vec<Bisection>> {
    let mut stmt = db.prepare("SELECT id, good_commit, bad_commit, change, dir, status, attempts, result, reported_night, widened FROM nightly_bisections WHERE nightly = ?1 ORDER BY id")?;
    let rows = stmt
        .query_map([nightly], bisection_of)?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    rows.into_iter()
        .map(|(mut b, change, result, widened)| {
            b.change = serde_json::from_str(&change)?;
            b.widened = widened
                .map(|w| serde_json::from_str(&w))
                .transpose()?
                .unwrap_or_default();
            b.result = result.map(|r| serde_json::from_str(&r)).transpose()?;
            Ok(b)
        })
        .collect()
}

/// Claims a bisection of `c` between the two commits (its id), unless an
/// earlier bisection of this nightly answers it already
/// ([`super::cover::decide`]; `order` gives a run's night number,
/// `tonight` every change point tonight's series show): then why not.
/// Checked and written in one transaction, so a change is never claimed
/// twice.
pub fn claim(
    db: &mut Connection,
    nightly: &str,
    c: &KeyChange,
    commits: (&str, &str),
    order: &dyn Fn(&str) -> Option<i64>,
    tonight: &[KeyChange],
) -> Result<Result<i64, super::cover::Claim>> {
    let tx = db.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
    let earlier = bisections(&tx, nightly)?;
    if let Some(not) = super::cover::decide(c, commits, &earlier, order, tonight) {
        return Ok(Err(not));
    }
    tx.execute(
        "INSERT INTO nightly_bisections (nightly, benchmark, metric, vcpus, good_run, bad_run, good_commit, bad_commit, change, status, created)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, 'pending', ?10)",
        params![nightly, c.bench, c.metric, c.vcpus, c.good_run, c.bad_run, commits.0, commits.1, serde_json::to_string(c)?, crate::util::now_rfc3339()],
    )?;
    let id = tx.last_insert_rowid();
    tx.commit()?;
    Ok(Ok(id))
}

/// Records a bisection's directory: it is running.
pub fn started(db: &Connection, id: i64, dir: &std::path::Path) -> Result<()> {
    db.execute(
        "UPDATE nightly_bisections SET dir = ?2, status = 'running' WHERE id = ?1",
        params![id, dir.to_string_lossy()],
    )?;
    Ok(())
}

/// Records a bisection widened to `good..bad`, `widened` the ranges it
/// tried before (still running: it goes on in the wider range).
pub fn widen(db: &Connection, id: i64, widened: &[Tried], good: &str, bad: &str) -> Result<()> {
    db.execute(
        "UPDATE nightly_bisections SET good_commit = ?2, bad_commit = ?3, widened = ?4 WHERE id = ?1",
        params![id, good, bad, serde_json::to_string(widened)?],
    )?;
    Ok(())
}

/// Records how a bisection ended (`done`, or `failed` with its error).
pub fn ended(db: &Connection, id: i64, status: Status, attempts: u32, result: &Bisected) -> Result<()> {
    let finished = matches!(status, Status::Done | Status::Failed).then(crate::util::now_rfc3339);
    db.execute(
        "UPDATE nightly_bisections SET status = ?2, attempts = ?3, result = ?4, finished = ?5 WHERE id = ?1",
        params![id, status.word(), attempts, serde_json::to_string(result)?, finished],
    )?;
    Ok(())
}

/// Marks bisections as told in night `night`'s report.
pub fn reported(db: &Connection, ids: &[i64], night: i64) -> Result<()> {
    for id in ids {
        db.execute(
            "UPDATE nightly_bisections SET reported_night = ?2 WHERE id = ?1 AND reported_night IS NULL",
            params![id, night],
        )?;
    }
    Ok(())
}
