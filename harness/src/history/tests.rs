use std::path::{Path, PathBuf};

use rusqlite::Connection;

use super::*;
use crate::records::MeasureClock;
use crate::records::{Event, RunMeta, Sample};
use crate::report::tests::{boots, meta_with};
use crate::report::{build_from, Floors};
use crate::stats::changepoint::Params;

/// A directory of its own for a test, removed when dropped.
pub(super) fn scratch(name: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(&format!("harness-history-{name}-"))
        .tempdir()
        .unwrap()
}

/// A run of base and v on `day` (days after 2026-01-01), 5 boots each at `level`.
pub(super) fn records(
    id: &str,
    day: u64,
    level: f64,
    tweak: impl Fn(&mut RunMeta),
) -> (RunMeta, Vec<Sample>, Vec<Event>) {
    let mut meta = meta_with(&["base", "v"], "{boots: 5, repetitions: 2}");
    meta.id = id.into();
    meta.started = crate::util::rfc3339(1_767_225_600 + day * 86_400 + 7_200);
    meta.clock = Some(MeasureClock::TcgIcount);
    meta.matrix.key_metrics = vec!["d".into()];
    tweak(&mut meta);
    let mut rec = (Vec::new(), Vec::new());
    boots("base", 5, level, &mut rec);
    boots("v", 5, level * 0.99, &mut rec);
    (meta, rec.0, rec.1)
}

pub(super) fn write_run(root: &Path, (meta, samples, events): &(RunMeta, Vec<Sample>, Vec<Event>)) -> PathBuf {
    let dir = root.join(&meta.id);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("run.json"), serde_json::to_vec_pretty(meta).unwrap()).unwrap();
    let lines = |v: Vec<String>| v.into_iter().map(|l| l + "\n").collect::<String>();
    std::fs::write(
        dir.join("samples.jsonl"),
        lines(samples.iter().map(|s| serde_json::to_string(s).unwrap()).collect()),
    )
    .unwrap();
    std::fs::write(
        dir.join("events.jsonl"),
        lines(events.iter().map(|e| serde_json::to_string(e).unwrap()).collect()),
    )
    .unwrap();
    dir
}

/// Every row of every table, in order: what "changes nothing" compares.
fn dump(db: &Connection) -> Vec<String> {
    let mut out = Vec::new();
    for t in ["runs", "cells", "boots", "variants"] {
        let mut stmt = db
            .prepare(&format!("SELECT * FROM {t} ORDER BY 1, 2, 3, 4, 5"))
            .unwrap();
        let n = stmt.column_count();
        let rows = stmt
            .query_map([], |r| {
                Ok((0..n)
                    .map(|i| format!("{:?}", r.get_ref(i).unwrap()))
                    .collect::<Vec<_>>()
                    .join("|"))
            })
            .unwrap();
        out.extend(rows.map(|r| format!("{t}: {}", r.unwrap())));
    }
    out
}

/// Level of night `i` of a history with `step` from night `at` on, ±0.5% wiggle.
fn level(i: u64, at: u64, step: f64) -> f64 {
    let wiggle = [0.0, 0.004, -0.003, 0.002, -0.005, 0.003, -0.001][(i % 7) as usize];
    100.0 * (1.0 + wiggle) * if i >= at { 1.0 + step } else { 1.0 }
}

#[test]
fn adding_a_run_again_changes_nothing() {
    let root_dir = scratch("reimport");
    let root = root_dir.path().to_path_buf();
    let mut db = open(&root.join("h.sqlite")).unwrap();
    let dir = write_run(&root, &records("n1", 0, 100.0, |_| {}));
    assert_eq!(
        add(&mut db, &dir, &WorkDir::at(&root), Sources::Records).unwrap(),
        Added::New
    );
    let before = dump(&db);
    assert_eq!(
        before.iter().filter(|l| l.starts_with("boots:")).count(),
        10,
        "one value per boot and cell"
    );
    assert_eq!(
        add(&mut db, &dir, &WorkDir::at(&root), Sources::Records).unwrap(),
        Added::Unchanged
    );
    assert_eq!(
        add(&mut db, &dir, &WorkDir::at(&root), Sources::Live).unwrap(),
        Added::Unchanged,
        "same records: nothing is rewritten"
    );
    assert_eq!(dump(&db), before, "re-import changes nothing");
    // the run was resumed since: its records changed, its rows are replaced, not doubled
    std::fs::write(
        dir.join("events.jsonl"),
        std::fs::read_to_string(dir.join("events.jsonl")).unwrap() + "{\"event\":\"notice\",\"message\":\"x\"}\n",
    )
    .unwrap();
    assert_eq!(
        add(&mut db, &dir, &WorkDir::at(&root), Sources::Records).unwrap(),
        Added::Replaced
    );
    assert_eq!(dump(&db).len(), before.len());
}

/// Issue 30: a half copy of a stored run (a copy taken while it ran), or
/// another run that happens to share its id, never replaces it; the
/// refusal names both directories and the stored rows stay.
#[test]
fn a_reimport_that_does_not_extend_the_stored_run_is_refused() {
    let root_dir = scratch("reimport-refused");
    let root = root_dir.path().to_path_buf();
    let mut db = open(&root.join("h.sqlite")).unwrap();
    let full = write_run(
        &root.join("a"),
        &records("n1", 0, 100.0, |m| m.uid = Some("u-1".into())),
    );
    assert_eq!(
        add(&mut db, &full, &WorkDir::at(&root), Sources::Records).unwrap(),
        Added::New
    );
    let before = dump(&db);
    let copy = |name: &str, keep: f64, uid: &str| {
        let dir = root.join(name).join("n1");
        std::fs::create_dir_all(&dir).unwrap();
        for f in ["samples.jsonl", "events.jsonl"] {
            let text = std::fs::read_to_string(full.join(f)).unwrap();
            let lines: Vec<&str> = text.lines().collect();
            let n = (lines.len() as f64 * keep) as usize;
            std::fs::write(
                dir.join(f),
                lines[..n].iter().map(|l| format!("{l}\n")).collect::<String>(),
            )
            .unwrap();
        }
        let meta = std::fs::read_to_string(full.join("run.json")).unwrap();
        std::fs::write(dir.join("run.json"), meta.replace("\"u-1\"", &format!("\"{uid}\""))).unwrap();
        dir
    };
    let half = copy("b", 0.5, "u-1");
    let e = format!(
        "{:#}",
        add(&mut db, &half, &WorkDir::at(&root), Sources::Records).unwrap_err()
    );
    assert!(
        e.contains(&half.canonicalize().unwrap().display().to_string())
            && e.contains(&full.canonicalize().unwrap().display().to_string())
            && e.contains("the stored run is complete and this copy is not"),
        "{e}"
    );
    let other = copy("c", 1.0, "u-2");
    let e = format!(
        "{:#}",
        add(&mut db, &other, &WorkDir::at(&root), Sources::Records).unwrap_err()
    );
    assert!(
        e.contains("another run with the same id (uid u-2, the stored one's u-1)"),
        "{e}"
    );
    assert_eq!(dump(&db), before, "the stored run is kept as it was");
    // the complete copy elsewhere is the same run: nothing to refuse, nothing to write
    let moved = copy("d", 1.0, "u-1");
    assert_eq!(
        add(&mut db, &moved, &WorkDir::at(&root), Sources::Records).unwrap(),
        Added::Unchanged
    );
}

/// The schema of version 1, written by hand as that harness wrote it.
const V1: &str = "CREATE TABLE runs (run_id TEXT PRIMARY KEY, content_hash TEXT NOT NULL, started TEXT NOT NULL, run_dir TEXT NOT NULL,
        matrix_id TEXT NOT NULL, matrix_name TEXT NOT NULL, profile TEXT NOT NULL, host TEXT NOT NULL, accel TEXT NOT NULL,
        clock TEXT NOT NULL, qemu TEXT NOT NULL, harness_version TEXT NOT NULL, harness_revision TEXT, kernel_source TEXT NOT NULL,
        complete INTEGER NOT NULL);
    CREATE INDEX runs_series ON runs (matrix_id, profile, host, clock, accel, started);
    CREATE TABLE cells (run_id TEXT NOT NULL, benchmark TEXT NOT NULL, metric TEXT NOT NULL, vcpus INTEGER NOT NULL,
        variant TEXT NOT NULL, unit TEXT NOT NULL, higher_is_better INTEGER NOT NULL, n INTEGER NOT NULL, median REAL, lo REAL,
        hi REAL, ci_exact INTEGER, boots_ended INTEGER NOT NULL, boots_failed INTEGER NOT NULL,
        PRIMARY KEY (run_id, benchmark, metric, vcpus, variant));
    CREATE TABLE boots (run_id TEXT NOT NULL, benchmark TEXT NOT NULL, metric TEXT NOT NULL, vcpus INTEGER NOT NULL,
        variant TEXT NOT NULL, idx INTEGER NOT NULL, value REAL NOT NULL, PRIMARY KEY (run_id, benchmark, metric, vcpus, variant, idx));
    PRAGMA user_version = 1;";

#[test]
fn a_version_1_database_is_migrated() {
    let root_dir = scratch("migrate");
    let root = root_dir.path().to_path_buf();
    let path = root.join("h.sqlite");
    let (meta, _, events) = records("old", 0, 100.0, |_| {});
    let k = run_key(&meta, &events);
    {
        let db = Connection::open(&path).unwrap();
        db.execute_batch(V1).unwrap();
        db.execute(
            "INSERT INTO runs VALUES ('old', 'h0', ?1, '/gone/old', ?2, 'm', '', 'h', 'tcg', 'tcg-icount', 'qemu 10', '0.1.0', NULL, '/src.tar', 1)",
            rusqlite::params![meta.started, k.matrix_id],
        )
        .unwrap();
        db.execute("INSERT INTO cells VALUES ('old', 'd', 'execs_per_s', 2, 'base', 'execs/s', 1, 5, 100.0, 99.0, 101.0, 0, 5, 0)", []).unwrap();
        db.execute(
            "INSERT INTO boots VALUES ('old', 'd', 'execs_per_s', 2, 'base', 0, 100.0)",
            [],
        )
        .unwrap();
    }
    let mut db = open(&path).unwrap();
    let version: u32 = db.query_row("PRAGMA user_version", [], |r| r.get(0)).unwrap();
    assert_eq!(version, schema::VERSION);
    let (tree, variants): (Option<String>, i64) = db
        .query_row(
            "SELECT tree_id, (SELECT count(*) FROM variants) FROM runs WHERE run_id = 'old'",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!((tree, variants), (None, 0), "new columns and tables, old rows kept");
    let new = write_run(&root, &records("new", 1, 100.0, |_| {}));
    assert_eq!(
        add(&mut db, &new, &WorkDir::at(&root), Sources::Records).unwrap(),
        Added::New
    );
    let s = series(
        &db,
        &Filter {
            variant: Some("base".into()),
            ..Filter::default()
        },
        &Params::default(),
    )
    .unwrap();
    assert_eq!(s.len(), 1, "{s:?}");
    assert_eq!(
        s[0].nights.iter().map(|n| n.run_id.as_str()).collect::<Vec<_>>(),
        ["old", "new"],
        "the migrated run is the first night"
    );
    assert_eq!(
        open(&path).map(|_| ()).ok(),
        Some(()),
        "opening an up-to-date database again is a no-op"
    );
}

#[test]
fn clocks_hosts_accelerators_matrices_and_profiles_never_mix() {
    let root_dir = scratch("mix");
    let root = root_dir.path().to_path_buf();
    let mut db = open(&root.join("h.sqlite")).unwrap();
    type Tweak = Box<dyn Fn(&mut RunMeta)>;
    let kinds: [(&str, Tweak); 5] = [
        ("plain", Box::new(|_| {})),
        ("wall", Box::new(|m| m.clock = Some(MeasureClock::TcgWall))),
        ("host", Box::new(|m| m.host.hostname = "other".into())),
        ("matrix", Box::new(|m| m.matrix.sampling.repetitions = 3)),
        ("profile", Box::new(|m| m.matrix.profile = Some("quick".into()))),
    ];
    for (day, (name, tweak)) in kinds.iter().enumerate() {
        for night in 0..2 {
            let dir = write_run(
                &root,
                &records(&format!("{name}-{night}"), (day * 2 + night) as u64, 100.0, tweak),
            );
            add(&mut db, &dir, &WorkDir::at(&root), Sources::Records).unwrap();
        }
    }
    // accelerator: same clock name, boots under another accelerator
    let mut kvm = records("kvm-0", 20, 100.0, |_| {});
    for e in &mut kvm.2 {
        if let Event::Boot { accel, .. } = e {
            *accel = crate::records::Accel::Kvm;
        }
    }
    add(&mut db, &write_run(&root, &kvm), &WorkDir::at(&root), Sources::Records).unwrap();
    let s = series(
        &db,
        &Filter {
            variant: Some("base".into()),
            ..Filter::default()
        },
        &Params::default(),
    )
    .unwrap();
    assert_eq!(s.len(), 6, "{:?}", s.iter().map(|s| &s.key).collect::<Vec<_>>());
    for x in &s {
        let prefix = x.nights[0].run_id.split('-').next().unwrap();
        assert!(
            x.nights.iter().all(|n| n.run_id.starts_with(prefix)),
            "one kind per series: {:?}",
            x.nights
        );
    }
    let only = series(
        &db,
        &Filter {
            bench: Some("d".into()),
            vcpus: Some(2),
            variant: Some("v".into()),
            last: Some(1),
        },
        &Params::default(),
    )
    .unwrap();
    assert!(only.iter().all(|x| x.nights.len() == 1 && x.key.variant == "v"));
}

#[test]
fn a_step_in_the_nights_is_found_with_the_runs_around_it_and_reported() {
    let root_dir = scratch("step");
    let root = root_dir.path().to_path_buf();
    let mut db = open(&root.join("h.sqlite")).unwrap();
    for i in 0..24u64 {
        let dir = write_run(&root, &records(&format!("night{i:02}"), i, level(i, 14, 0.05), |_| {}));
        add(&mut db, &dir, &WorkDir::at(&root), Sources::Records).unwrap();
    }
    let s = series(
        &db,
        &Filter {
            variant: Some("base".into()),
            ..Filter::default()
        },
        &Params::default(),
    )
    .unwrap();
    let c = &s[0].changes;
    assert_eq!(c.len(), 1, "{c:?}");
    assert_eq!(
        (
            c[0].index,
            c[0].run_before.as_str(),
            c[0].run_after.as_str(),
            c[0].date.as_str()
        ),
        (14, "night13", "night14", "2026-01-15")
    );
    assert!((c[0].change - 0.05).abs() < 0.01 && c[0].p <= 0.001, "{c:?}");
    assert!(change_text(&c[0], true).starts_with("changed on 2026-01-15 by +5.0% (better; p=0.001)"));

    // the report of a later run says so per key cell; a flat series says "same"; a cell it never saw is new
    let (meta, samples, events) = records("night24", 24, level(24, 14, 0.05), |_| {});
    let mut r = build_from(&meta, &samples, &events, &Floors::none("none"));
    annotate(&mut r, &db, &meta, &events).unwrap();
    assert_eq!(
        r.rows[0].cells[0].history.as_deref(),
        Some("changed on 2026-01-15 by +5.0% (better)")
    );
    assert!(crate::report::table(&r).contains("history: changed on 2026-01-15"));
    let flat_root_dir = scratch("flat");
    let flat_root = flat_root_dir.path().to_path_buf();
    let mut flat = open(&flat_root.join("h.sqlite")).unwrap();
    for i in 0..10u64 {
        add(
            &mut flat,
            &write_run(&flat_root, &records(&format!("f{i}"), i, level(i, 99, 0.0), |_| {})),
            &WorkDir::at(&flat_root),
            Sources::Records,
        )
        .unwrap();
    }
    let (meta, samples, events) = records("f10", 10, level(10, 99, 0.0), |_| {});
    let mut r = build_from(&meta, &samples, &events, &Floors::none("none"));
    annotate(&mut r, &flat, &meta, &events).unwrap();
    assert_eq!(
        r.rows[0].cells[0].history.as_deref(),
        Some("same as history (11 nights)")
    );
    let (meta, samples, events) = records("x", 10, 100.0, |m| m.host.hostname = "elsewhere".into());
    let mut r = build_from(&meta, &samples, &events, &Floors::none("none"));
    annotate(&mut r, &flat, &meta, &events).unwrap();
    assert_eq!(r.rows[0].cells[1].history.as_deref(), Some("new cell"));
    // without a history, the report says nothing
    let r = build_from(&meta, &samples, &events, &Floors::none("none"));
    assert!(r.rows[0].cells.iter().all(|c| c.history.is_none()) && !crate::report::table(&r).contains("history:"));
}

#[test]
fn trends_link_to_run_reports_relative_to_the_page() {
    assert_eq!(
        relative(Path::new("/a/b/pages"), Path::new("/a/b/runs/r1/report.html")),
        PathBuf::from("../runs/r1/report.html")
    );
    let root_dir = scratch("links");
    let root = root_dir.path().to_path_buf();
    let mut db = open(&root.join("h.sqlite")).unwrap();
    let dir = write_run(&root.join("runs"), &records("r1", 0, 100.0, |_| {}));
    std::fs::write(dir.join("report.html"), "<html></html>").unwrap();
    add(&mut db, &dir, &WorkDir::at(&root), Sources::Records).unwrap();
    let s = series(&db, &Filter::default(), &Params::default()).unwrap();
    let t = trends(&s, Some(&root));
    assert_eq!(t[0].points[0].link, "runs/r1/report.html");
    assert!(trends(&s, None)[0].points[0].link.starts_with("file:///"));
    let page = crate::report::render::trend::render(&t, &method_text(&Params::default())).unwrap();
    assert!(page.contains("runs/r1/report.html") && page.contains("p ≤ 0.001"));
    assert!(crate::report::render::trend::table(&t).contains("no change point over 1 night(s)"));
}

#[test]
fn a_copied_or_renamed_run_directory_imports_once() {
    let root_dir = scratch("copy");
    let root = root_dir.path().to_path_buf();
    let mut db = open(&root.join("h.sqlite")).unwrap();
    let dir = write_run(&root, &records("n1", 0, 100.0, |_| {}));
    let copy = root.join("archive/n1-copy");
    std::fs::create_dir_all(&copy).unwrap();
    for f in ["run.json", "samples.jsonl", "events.jsonl"] {
        std::fs::copy(dir.join(f), copy.join(f)).unwrap();
    }
    assert_eq!(
        add(&mut db, &copy, &WorkDir::at(&root), Sources::Records).unwrap(),
        Added::New
    );
    assert_eq!(
        add(&mut db, &copy, &WorkDir::at(&root), Sources::Records).unwrap(),
        Added::Unchanged
    );
    assert_eq!(
        add(&mut db, &dir, &WorkDir::at(&root), Sources::Records).unwrap(),
        Added::Unchanged,
        "the original after its copy"
    );
    let runs: i64 = db.query_row("SELECT count(*) FROM runs", [], |r| r.get(0)).unwrap();
    assert_eq!(runs, 1);
}

#[test]
fn a_sharded_run_is_updated_when_its_shards_finish() {
    let root_dir = scratch("shards");
    let root = root_dir.path().to_path_buf();
    let mut db = open(&root.join("h.sqlite")).unwrap();
    let (meta, samples, mut events) = records("sh", 0, 100.0, |_| {});
    for e in &mut events {
        // each boot job's own index, as the plan numbers them
        if let Event::BootEnd {
            boot,
            boot_id: Some(id),
            ..
        } = e
        {
            *boot = id.rsplit('b').next().unwrap().parse().unwrap();
        }
    }
    let dir = write_run(&root, &(meta.clone(), vec![], vec![]));
    let shard = dir.join("shards/0-of-1");
    std::fs::create_dir_all(&shard).unwrap();
    let lines = |v: Vec<String>| v.into_iter().map(|l| l + "\n").collect::<String>();
    let write = |only_base: bool| {
        let keep = |v: &str| !only_base || v == "base";
        let s: Vec<String> = samples
            .iter()
            .filter(|s| keep(&s.variant))
            .map(|s| serde_json::to_string(s).unwrap())
            .collect();
        let e: Vec<String> = events
            .iter()
            .filter(|e| match e {
                Event::Boot { variant, .. } | Event::BootEnd { variant, .. } => keep(variant),
                _ => true,
            })
            .map(|e| serde_json::to_string(e).unwrap())
            .collect();
        std::fs::write(shard.join("samples.jsonl"), lines(s)).unwrap();
        std::fs::write(shard.join("events.jsonl"), lines(e)).unwrap();
    };
    write(true);
    assert_eq!(
        add(&mut db, &dir, &WorkDir::at(&root), Sources::Records).unwrap(),
        Added::New
    );
    let failed = |db: &Connection| -> (i64, i64) {
        db.query_row("SELECT n, boots_failed FROM cells WHERE variant = 'v'", [], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .unwrap()
    };
    assert_eq!(failed(&db), (0, 5), "the jobs a dead shard owes count as failed");
    write(false);
    assert_eq!(
        add(&mut db, &dir, &WorkDir::at(&root), Sources::Records).unwrap(),
        Added::Replaced,
        "the shard's records changed"
    );
    assert_eq!(failed(&db), (5, 0));
}

/// Issue 21: tonight is tested against the last segment's nights, and is
/// "not yet testable" where it cannot be; a change point never shows on
/// tonight alone.
#[test]
fn tonight_is_tested_against_the_last_segment_or_is_not_yet_testable() {
    use super::query::{tonight, Standing};
    let p = crate::stats::changepoint::Params::default();
    let flat: Vec<f64> = (0..12)
        .map(|i| 1000.0 * (1.0 + 0.002 * ((i * 7 % 5) as f64 - 2.0)))
        .collect();
    assert_eq!(
        tonight(&flat[..3], 1000.0, &p, true),
        Standing::NotYetTestable { nights: 3 }
    );
    assert_eq!(tonight(&flat, 1001.0, &p, true), Standing::Same { nights: 13 });
    match tonight(&flat, 950.0, &p, true) {
        Standing::Tonight {
            change,
            worse: true,
            nights: 12,
        } => assert!((change + 0.05).abs() < 0.002, "{change}"),
        other => panic!("a 5% drop tonight: {other:?}"),
    }
    // lower is better: a rise is worse
    assert!(matches!(
        tonight(&flat, 1050.0, &p, false),
        Standing::Tonight { worse: true, .. }
    ));
    // beyond the interval but below the 2% magnitude: same
    assert_eq!(tonight(&flat, 1015.0, &p, true), Standing::Same { nights: 13 });
    // after a step, only the nights since it count
    let mut stepped: Vec<f64> = flat.iter().map(|v| v * 0.9).collect();
    stepped.extend(&flat[..4]);
    assert_eq!(
        tonight(&stepped, 1000.0, &p, true),
        Standing::NotYetTestable { nights: 4 }
    );
    let text = Standing::Tonight {
        change: -0.05,
        worse: true,
        nights: 12,
    }
    .text();
    assert!(
        text.starts_with("tonight -5.0% (worse) against the last 12 nights"),
        "{text}"
    );
}

/// The prediction interval's coverage of one more flat night, seeded: 95%
/// at 5, 10 and 30 nights of history (4,000 series each; the binomial sd of
/// the miss rate is 0.34%).
#[test]
fn prediction_interval_covers() {
    use rand::{RngExt, SeedableRng};
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(29);
    let mut normal = || {
        let (u1, u2): (f64, f64) = (1.0 - rng.random::<f64>(), rng.random::<f64>());
        (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
    };
    for n in [5, 10, 30] {
        let trials = 4000;
        let mut missed = 0;
        for _ in 0..trials {
            let nights: Vec<f64> = (0..n).map(|_| 1000.0 + 10.0 * normal()).collect();
            let tonight = 1000.0 + 10.0 * normal();
            let (c, half) = super::query::prediction_interval(&nights, 0.95);
            missed += usize::from((tonight - c).abs() > half);
        }
        let rate = missed as f64 / trials as f64;
        eprintln!(
            "{n} nights: the 95% prediction interval missed {:.1}% of flat nights",
            rate * 100.0
        );
        assert!((0.04..=0.06).contains(&rate), "{n} nights: missed {rate}");
    }
}

/// Issue 30: nights are in the order their runs joined the history, not
/// by the text of each run's own clock: a run from a host whose clock ran
/// a year behind is tonight's night, the last, and is judged against the
/// nights before it; a run replaced keeps its place.
#[test]
fn a_skewed_clock_does_not_move_a_run_to_another_night() {
    let root_dir = scratch("skew");
    let root = root_dir.path().to_path_buf();
    let mut db = open(&root.join("h.sqlite")).unwrap();
    let mut all = Vec::new();
    for (i, id) in ["n1", "n2", "n3", "n4"].into_iter().enumerate() {
        let rec = records(id, 10 + i as u64, 100.0, |m| {
            if m.id == "n4" {
                m.started = "2025-01-01T02:00:00Z".into(); // a year behind
            }
        });
        let dir = write_run(&root, &rec);
        add(&mut db, &dir, &WorkDir::at(&root), Sources::Records).unwrap();
        all.push((rec, dir));
    }
    let order = |db: &rusqlite::Connection| -> Vec<String> {
        let s = series(
            db,
            &Filter {
                variant: Some("base".into()),
                ..Filter::default()
            },
            &Params::default(),
        )
        .unwrap();
        s[0].nights.iter().map(|n| n.run_id.clone()).collect()
    };
    assert_eq!(order(&db), ["n1", "n2", "n3", "n4"]);
    // the skewed run's report stands against the three nights before it
    let (rec, dir) = &all[3];
    let run = crate::store::Run::open(dir).unwrap();
    let r = crate::report::build(&run, &crate::report::Floors::none("none")).unwrap();
    let st = standings(&db, &rec.0, &rec.2, &r, WINDOW, &Params::default()).unwrap();
    assert!(!st.is_empty());
    for (_, _, s) in &st {
        assert!(!matches!(s, Standing::New), "it has nights before it: {s:?}");
    }
    // n2's records grew (a resume's notice): replaced, in its own place
    let notice = crate::records::Event::Notice {
        message: "resumed".into(),
    };
    let events = all[1].1.join("events.jsonl");
    let mut text = std::fs::read_to_string(&events).unwrap();
    text += &(serde_json::to_string(&notice).unwrap() + "\n");
    std::fs::write(&events, text).unwrap();
    assert_eq!(
        add(&mut db, &all[1].1, &WorkDir::at(&root), Sources::Records).unwrap(),
        Added::Replaced
    );
    assert_eq!(order(&db), ["n1", "n2", "n3", "n4"]);
}

/// Issue 47: a damaged database, or a directory in its place, is refused
/// naming the file and the remedy, before anything is written or read.
#[test]
fn a_damaged_database_is_named_with_its_remedy() {
    use std::io::{Seek, SeekFrom, Write};
    let dir = scratch("damaged");
    let path = dir.path().join("history.sqlite");
    {
        let db = open(&path).unwrap();
        db.execute_batch("CREATE TABLE filler (x BLOB); PRAGMA wal_checkpoint(TRUNCATE);")
            .unwrap();
        for _ in 0..64 {
            db.execute("INSERT INTO filler VALUES (zeroblob(4000))", []).unwrap();
        }
        db.execute_batch("PRAGMA wal_checkpoint(TRUNCATE);").unwrap();
    }
    assert!(open(&path).is_ok(), "a sound database opens");
    let pages = std::fs::metadata(&path).unwrap().len() / 4096;
    assert!(pages > 20, "{pages} pages");
    // three zeroed pages mid-file
    let mut f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    f.seek(SeekFrom::Start(4096 * (pages / 2))).unwrap();
    f.write_all(&[0u8; 3 * 4096]).unwrap();
    drop(f);
    for e in [open(&path).unwrap_err(), open_existing(&path).unwrap_err()] {
        let text = format!("{e:#}");
        assert!(
            text.contains(&format!("the history database {} is damaged", path.display()))
                && text.contains("move it away, and `harness history import <runs dir>/*` rebuilds it"),
            "{text}"
        );
    }
    // a zeroed first page, and a directory in its place
    let mut f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    f.write_all(&[0u8; 4096]).unwrap();
    drop(f);
    let text = format!("{:#}", open(&path).unwrap_err());
    assert!(
        text.contains(&path.display().to_string()) && text.contains("move it away"),
        "{text}"
    );
    let d = dir.path().join("dir.sqlite");
    std::fs::create_dir(&d).unwrap();
    for e in [open(&d).unwrap_err(), open_existing(&d).unwrap_err()] {
        assert!(format!("{e:#}").contains("is not a file; move it away"), "{e:#}");
    }
}

/// Issue 58: processes making a new database at once (two `history
/// import`s) all open it; none is told to move a healthy history away.
#[test]
fn connections_racing_on_a_new_database_all_open_it() {
    let tmp = tempfile::tempdir().unwrap();
    for round in 0..20 {
        let path = tmp.path().join(format!("h{round}.sqlite"));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let path = path.clone();
                std::thread::spawn(move || schema::open(&path).map(|_| ()).map_err(|e| format!("{e:#}")))
            })
            .collect();
        for t in threads {
            assert_eq!(t.join().unwrap(), Ok(()), "round {round}");
        }
    }
}
