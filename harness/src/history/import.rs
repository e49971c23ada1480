//! Adding one run directory to the history: its identity (which series its
//! cells belong to, and which tree and builds it measured) and per cell the
//! boot values and their summary, exactly as the run's report computes them
//! ([`crate::report::build_from`]). Keyed by run id and a hash of the run's
//! records, so adding the same run again changes nothing.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{bail, Context, Result};
use rusqlite::{params, Connection, OptionalExtension, Transaction};
use sha2::{Digest, Sha256};

use crate::config::Matrix;
use crate::proc::Cmd;
use crate::records::{Event, RunMeta};
use crate::report::{self, Floors, Report};
use crate::store::Run;
use crate::workdir::WorkDir;

/// What adding a run did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum Added {
    /// The run was not in the history.
    New,
    /// The run was there with the same records: nothing was written.
    Unchanged,
    /// The run was there with other records (it was resumed since): replaced.
    Replaced,
}

impl Added {
    /// Its word in the CLI's output (`new`, `unchanged`, `replaced`).
    pub fn word(self) -> &'static str {
        match self {
            Added::New => "new",
            Added::Unchanged => "unchanged",
            Added::Replaced => "replaced",
        }
    }
}

/// Where the tree identity comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sources {
    /// The run just finished: its kernel source and series are read now
    /// (tarball hash or git commit and describe, series hashes).
    Live,
    /// A backfill: only what the run's records say (build keys, kernel
    /// releases, `.config` hashes of cached kernels); the sources may have
    /// changed since, so they are not read.
    Records,
}

/// The part of a series' identity that comes from its run.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
pub struct RunKey {
    /// Hash of the matrix without its paths, profile, kernel source and decision rule.
    pub matrix_id: String,
    /// The matrix file's stem, for people.
    pub matrix_name: String,
    /// Profile, or empty.
    pub profile: String,
    /// Host name.
    pub host: String,
    /// Measurement clock (`kvm-wall`, `tcg-wall`, `tcg-icount`), or empty.
    pub clock: String,
    /// Accelerator of the boots (`kvm`, `tcg`), or empty.
    pub accel: String,
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// The identity of an experiment: the matrix with the nightly-changing
/// kernel source, its own paths, the profile (kept apart) and the decision
/// rule (which does not change what is measured) left out.
pub fn matrix_id(m: &Matrix) -> String {
    let mut v = serde_json::to_value(m).unwrap_or_default();
    if let Some(o) = v.as_object_mut() {
        for k in ["path", "profile", "series_dir", "statistics", "key_metrics"] {
            o.remove(k);
        }
        if let Some(k) = o.get_mut("kernel").and_then(|k| k.as_object_mut()) {
            k.remove("source");
        }
    }
    hex(&Sha256::digest(v.to_string().as_bytes())[..8])
}

/// The series identity of a run's cells.
pub fn run_key(meta: &RunMeta, events: &[Event]) -> RunKey {
    let accel = events.iter().find_map(|e| match e {
        Event::Boot { accel, .. } => Some(format!("{accel:?}").to_lowercase()),
        _ => None,
    });
    RunKey {
        matrix_id: matrix_id(&meta.matrix),
        matrix_name: meta
            .matrix
            .path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default(),
        profile: meta.matrix.profile.clone().unwrap_or_default(),
        host: meta.host.hostname.clone(),
        clock: report::run_clock(meta, events)
            .map(|c| c.name().to_string())
            .unwrap_or_default(),
        accel: accel.unwrap_or_default(),
    }
}

/// Hash of the run's records: `run.json`, its samples and events, and
/// every shard's, with whether the shard is still running (a shard that
/// finishes, or dies, changes the run's cells).
fn content_hash(run: &Run) -> Result<String> {
    let mut h = Sha256::new();
    let mut feed = |p: &Path| -> Result<()> {
        let data = if p.exists() {
            std::fs::read(p).with_context(|| format!("read {}", p.display()))?
        } else {
            Vec::new()
        };
        h.update((data.len() as u64).to_le_bytes());
        h.update(data);
        Ok(())
    };
    for f in ["run.json", "samples.jsonl", "events.jsonl"] {
        feed(&run.dir.join(f))?;
    }
    let shards = run.shard_dirs()?;
    for s in &shards {
        for f in ["samples.jsonl", "events.jsonl"] {
            feed(&s.run.records().join(f))?;
        }
    }
    for s in &shards {
        h.update(
            format!(
                "{} {}\n",
                s.shard,
                if s.writer.is_some() { "running" } else { "stopped" }
            )
            .as_bytes(),
        );
    }
    Ok(hex(&h.finalize()[..16]))
}

/// Adds the run in `run_dir` to the history. `work_dir` holds the kernel
/// cache, whose stored `.config`s give the config hashes. The run is known
/// by the id its `run.json` holds, wherever its directory is now (a copy
/// or a renamed directory is the same run); its cells are its report's,
/// shards merged and the jobs a failed shard owes counted as failed. The
/// write transaction is taken at once (`BEGIN IMMEDIATE`), so a busy
/// database makes it wait rather than fail midway.
pub fn add(db: &mut Connection, run_dir: &Path, work_dir: &WorkDir, sources: Sources) -> Result<Added> {
    let run = Run::open(run_dir)?;
    let dir = std::fs::canonicalize(&run.dir).with_context(|| format!("resolve {}", run.dir.display()))?;
    let meta = run.meta()?;
    let hash = content_hash(&run)?;
    let tx = db.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
    let had = stored(&tx, &meta.id)?;
    if had.as_ref().is_some_and(|s| s.hash == hash) {
        return Ok(Added::Unchanged);
    }
    let events = run.events()?;
    let r = report::build(&run, &Floors::none("none (history)"))?;
    let this = Stored {
        hash: hash.clone(),
        dir: dir.display().to_string(),
        uid: meta.uid.clone(),
        boots: Some(r.boots.len() as i64),
        complete: r.complete,
    };
    if let Some(old) = &had {
        if let Some(why) = refuse_replacing(old, &this) {
            bail!(
                "import {}: the history holds run {} from {}, and {why}: kept as it is; import the complete copy, or remove the stored one with the database's own tools",
                this.dir,
                meta.id,
                old.dir
            );
        }
    }
    // its place among the nights: kept when it is replaced, else after every stored run
    let seq: i64 = tx.query_row(
        "SELECT COALESCE((SELECT seq FROM runs WHERE run_id = ?1), (SELECT COALESCE(MAX(seq), 0) + 1 FROM runs))",
        [&meta.id],
        |r| r.get(0),
    )?;
    for t in ["runs", "cells", "boots", "variants"] {
        tx.execute(&format!("DELETE FROM {t} WHERE run_id = ?1"), [&meta.id])?;
    }
    insert_run(&tx, &meta, &events, &r, &dir, &hash, sources)?;
    tx.execute("UPDATE runs SET seq = ?1 WHERE run_id = ?2", params![seq, meta.id])?;
    insert_variants(&tx, &meta, &events, work_dir, sources)?;
    insert_cells(&tx, &r)?;
    tx.commit()?;
    Ok(if had.is_some() { Added::Replaced } else { Added::New })
}

/// What the history holds of one run: enough to tell whether new records
/// extend it.
#[derive(Debug, Clone, PartialEq)]
struct Stored {
    hash: String,
    dir: String,
    uid: Option<String>,
    /// Boots in its report (None: stored by a harness before this was).
    boots: Option<i64>,
    complete: bool,
}

fn stored(tx: &Transaction, id: &str) -> Result<Option<Stored>> {
    Ok(tx
        .query_row(
            "SELECT content_hash, run_dir, uid, boots, complete FROM runs WHERE run_id = ?1",
            [id],
            |r| {
                Ok(Stored {
                    hash: r.get(0)?,
                    dir: r.get(1)?,
                    uid: r.get(2)?,
                    boots: r.get(3)?,
                    complete: r.get(4)?,
                })
            },
        )
        .optional()?)
}

/// Why the records `new` may not replace the stored `old` of the same run
/// id, if they may not: another run (its uid differs), or a copy with less
/// in it (the stored run is complete and this is not, or it has fewer boots).
fn refuse_replacing(old: &Stored, new: &Stored) -> Option<String> {
    if let (Some(a), Some(b)) = (&old.uid, &new.uid) {
        if a != b {
            return Some(format!(
                "this is another run with the same id (uid {b}, the stored one's {a})"
            ));
        }
    }
    if old.complete && !new.complete {
        return Some("the stored run is complete and this copy is not".into());
    }
    match (old.boots, new.boots) {
        (Some(o), Some(n)) if n < o => Some(format!("this copy has {n} boots, the stored run {o}")),
        _ => None,
    }
}

/// Tree identity read from the kernel source: (tree id, git commit, git describe).
fn tree_identity(source: &Path) -> (Option<String>, Option<String>, Option<String>) {
    if source.join(".git").exists() {
        let git = |args: &[&str]| {
            let f = Cmd::new("git")
                .arg("-C")
                .arg(source)
                .args(args.iter().copied())
                .capture()
                .run()
                .ok()?;
            f.success().then(|| f.output.trim().to_string())
        };
        let commit = git(&["rev-parse", "HEAD"]);
        return (commit.clone(), commit, git(&["describe", "--always", "--tags"]));
    }
    if source.is_file() {
        let id = std::fs::read(source).ok().map(|d| hex(&Sha256::digest(d)[..16]));
        return (id, None, None);
    }
    (crate::kernel::tree::source_key(source).ok(), None, None)
}

fn insert_run(
    tx: &Transaction,
    meta: &RunMeta,
    events: &[Event],
    r: &Report,
    dir: &Path,
    hash: &str,
    sources: Sources,
) -> Result<()> {
    let k = run_key(meta, events);
    let source = &meta.matrix.kernel.source;
    let (tree_id, commit, describe) = if sources == Sources::Live {
        tree_identity(source)
    } else {
        (None, None, None)
    };
    tx.execute(
        "INSERT INTO runs (run_id, content_hash, started, run_dir, matrix_id, matrix_name, profile, host, accel, clock, qemu,
            harness_version, harness_revision, kernel_source, complete, tree_id, git_commit, git_describe, uid, boots)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20)",
        params![
            meta.id,
            hash,
            meta.started,
            dir.to_string_lossy(),
            k.matrix_id,
            k.matrix_name,
            k.profile,
            k.host,
            k.accel,
            k.clock,
            meta.host.qemu,
            env!("CARGO_PKG_VERSION"),
            meta.harness_revision,
            source.to_string_lossy(),
            r.complete,
            tree_id,
            commit,
            describe,
            meta.uid,
            r.boots.len() as i64
        ],
    )?;
    Ok(())
}

/// Hash of a series' patches, in order, or None when it cannot be read.
fn series_hash(m: &Matrix, name: &str) -> Option<String> {
    let s = crate::kernel::patch::load_series(&m.series_dir, name).ok()?;
    let mut h = Sha256::new();
    for p in &s.patches {
        h.update(std::fs::read(p).ok()?);
    }
    Some(hex(&h.finalize()[..8]))
}

fn insert_variants(
    tx: &Transaction,
    meta: &RunMeta,
    events: &[Event],
    work_dir: &WorkDir,
    sources: Sources,
) -> Result<()> {
    let m = &meta.matrix;
    for v in &m.variants {
        let build = events.iter().rev().find_map(|e| match e {
            Event::Build {
                variant, key, release, ..
            } if variant == &v.name => Some((key.clone(), release.clone())),
            _ => None,
        });
        let (key, release) = build.unwrap_or_default();
        let config_hash = key
            .as_ref()
            .and_then(|k| std::fs::read(work_dir.kernel(k).join("config")).ok())
            .map(|c| hex(&Sha256::digest(c)[..8]));
        let series: BTreeMap<String, Option<String>> = match sources {
            Sources::Live => v
                .revert
                .iter()
                .map(|s| (format!("-{s}"), series_hash(m, s)))
                .chain(v.apply.iter().map(|s| (s.clone(), series_hash(m, s))))
                .collect(),
            Sources::Records => BTreeMap::new(),
        };
        let series = (!series.is_empty())
            .then(|| serde_json::to_string(&series))
            .transpose()?;
        tx.execute(
            "INSERT INTO variants (run_id, variant, build_key, kernel_release, config_hash, series_hashes) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            params![meta.id, v.name, key, release, config_hash, series],
        )?;
    }
    Ok(())
}

fn insert_cells(tx: &Transaction, r: &Report) -> Result<()> {
    let mut cell = tx.prepare(
        "INSERT INTO cells (run_id, benchmark, metric, vcpus, variant, unit, higher_is_better, n, median, lo, hi, ci_exact, boots_ended, boots_failed)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)",
    )?;
    let mut boot = tx.prepare(
        "INSERT INTO boots (run_id, benchmark, metric, vcpus, variant, idx, value) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
    )?;
    for row in &r.rows {
        for c in &row.cells {
            let s = c.summary.as_ref();
            cell.execute(params![
                r.run_id,
                row.benchmark,
                row.metric,
                row.vcpus,
                c.variant,
                row.unit,
                row.higher_is_better,
                c.n as i64,
                s.map(|s| s.median),
                s.map(|s| s.ci_lo),
                s.map(|s| s.ci_hi),
                s.map(|s| s.ci_exact),
                c.boots_ended as i64,
                c.boots_failed as i64
            ])?;
            for (i, v) in c.boots.iter().enumerate() {
                boot.execute(params![
                    r.run_id,
                    row.benchmark,
                    row.metric,
                    row.vcpus,
                    c.variant,
                    i as i64,
                    v
                ])?;
            }
        }
    }
    Ok(())
}
