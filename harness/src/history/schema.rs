//! The history database's layout and its migrations. The schema version is
//! SQLite's `PRAGMA user_version`; opening a database applies every
//! migration after its version, in one transaction, so a database written by
//! an older harness is brought up to date and never rewritten otherwise.

use std::path::Path;

use anyhow::{bail, Context, Result};
use rusqlite::Connection;

/// Migration `i` takes a database from version `i` to `i + 1`.
pub const MIGRATIONS: &[&str] = &[
    // v1: runs, their cells and one value per boot
    "CREATE TABLE runs (
        run_id TEXT PRIMARY KEY,
        content_hash TEXT NOT NULL,
        started TEXT NOT NULL,
        run_dir TEXT NOT NULL,
        matrix_id TEXT NOT NULL,
        matrix_name TEXT NOT NULL,
        profile TEXT NOT NULL,
        host TEXT NOT NULL,
        accel TEXT NOT NULL,
        clock TEXT NOT NULL,
        qemu TEXT NOT NULL,
        harness_version TEXT NOT NULL,
        harness_revision TEXT,
        kernel_source TEXT NOT NULL,
        complete INTEGER NOT NULL
    );
    CREATE INDEX runs_series ON runs (matrix_id, profile, host, clock, accel, started);
    CREATE TABLE cells (
        run_id TEXT NOT NULL,
        benchmark TEXT NOT NULL,
        metric TEXT NOT NULL,
        vcpus INTEGER NOT NULL,
        variant TEXT NOT NULL,
        unit TEXT NOT NULL,
        higher_is_better INTEGER NOT NULL,
        n INTEGER NOT NULL,
        median REAL,
        lo REAL,
        hi REAL,
        ci_exact INTEGER,
        boots_ended INTEGER NOT NULL,
        boots_failed INTEGER NOT NULL,
        PRIMARY KEY (run_id, benchmark, metric, vcpus, variant)
    );
    CREATE TABLE boots (
        run_id TEXT NOT NULL,
        benchmark TEXT NOT NULL,
        metric TEXT NOT NULL,
        vcpus INTEGER NOT NULL,
        variant TEXT NOT NULL,
        idx INTEGER NOT NULL,
        value REAL NOT NULL,
        PRIMARY KEY (run_id, benchmark, metric, vcpus, variant, idx)
    );",
    // v2: the tree a run measured, and per variant what was built from it
    "ALTER TABLE runs ADD COLUMN tree_id TEXT;
    ALTER TABLE runs ADD COLUMN git_commit TEXT;
    ALTER TABLE runs ADD COLUMN git_describe TEXT;
    CREATE TABLE variants (
        run_id TEXT NOT NULL,
        variant TEXT NOT NULL,
        build_key TEXT,
        kernel_release TEXT,
        config_hash TEXT,
        series_hashes TEXT,
        PRIMARY KEY (run_id, variant)
    );",
    // v3: the nightly robot's state: each night (a commit measured for a
    // series of nights) and each bisection it started, with its status
    "CREATE TABLE nightly_nights (
        id INTEGER PRIMARY KEY,
        nightly TEXT NOT NULL,
        git_commit TEXT NOT NULL,
        subject TEXT NOT NULL,
        runs_dir TEXT NOT NULL,
        run_id TEXT,
        status TEXT NOT NULL,
        started TEXT NOT NULL,
        finished TEXT,
        UNIQUE (nightly, git_commit)
    );
    CREATE TABLE nightly_bisections (
        id INTEGER PRIMARY KEY,
        nightly TEXT NOT NULL,
        benchmark TEXT NOT NULL,
        metric TEXT NOT NULL,
        vcpus INTEGER NOT NULL,
        good_run TEXT NOT NULL,
        bad_run TEXT NOT NULL,
        good_commit TEXT NOT NULL,
        bad_commit TEXT NOT NULL,
        change TEXT NOT NULL,
        dir TEXT,
        status TEXT NOT NULL,
        attempts INTEGER NOT NULL DEFAULT 0,
        result TEXT,
        reported_night INTEGER,
        created TEXT NOT NULL,
        finished TEXT
    );",
    // a run's identity beyond its id, and how much of it was stored: a
    // re-import replaces it only with records that extend it
    "ALTER TABLE runs ADD COLUMN uid TEXT;
    ALTER TABLE runs ADD COLUMN boots INTEGER;",
    // v5: the order runs joined the history, which orders the nights (a
    // run's own clock text does not: a skewed host's run would land in
    // another night); the runs stored so far keep the order they had
    "ALTER TABLE runs ADD COLUMN seq INTEGER;
    UPDATE runs SET seq = (SELECT count(*) FROM runs r2
        WHERE r2.started < runs.started OR (r2.started = runs.started AND r2.run_id <= runs.run_id));
    CREATE INDEX runs_seq ON runs (seq);",
    // v6: the ranges a nightly's bisection tried before it widened them
    "ALTER TABLE nightly_bisections ADD COLUMN widened TEXT;",
];

/// The schema version this harness writes.
pub const VERSION: u32 = MIGRATIONS.len() as u32;

/// Opens (creating it if missing) the database at `path` and migrates it.
pub fn open(path: &Path) -> Result<Connection> {
    a_file_or_none(path)?;
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("create {}", dir.display()))?;
    }
    let mut db = Connection::open(path).with_context(|| format!("open the history database {}", path.display()))?;
    db.busy_timeout(std::time::Duration::from_secs(30))?;
    // WAL: readers never block the writer, and a finishing run's write waits its turn
    let _mode: String = while_busy(|| db.query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))).map_err(|e| {
        if is_busy(&e) {
            anyhow::anyhow!(
                "the history database {} stayed locked by another harness for 30 s; try again when it has finished",
                path.display()
            )
        } else {
            anyhow::Error::new(e).context(format!(
                "the history database {} cannot be read; {REMEDY}",
                path.display()
            ))
        }
    })?;
    quick_check(&db, path)?;
    migrate(&mut db).with_context(|| format!("migrate the history database {}", path.display()))?;
    Ok(db)
}

/// Whether SQLite said another connection holds the database.
fn is_busy(e: &rusqlite::Error) -> bool {
    matches!(
        e.sqlite_error_code(),
        Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked)
    )
}

/// `f` again while SQLite says the database is busy, for up to 30 s: a
/// change of journal mode takes its lock without the busy handler, so two
/// imports making a new database at once found it "locked" (1 in 30) and
/// were told to move a healthy history away.
fn while_busy<T>(mut f: impl FnMut() -> rusqlite::Result<T>) -> rusqlite::Result<T> {
    let until = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        match f() {
            Err(e) if is_busy(&e) && std::time::Instant::now() < until => {
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            r => return r,
        }
    }
}

/// Refuses a directory (or other non-file) where the database should be.
fn a_file_or_none(path: &Path) -> Result<()> {
    if path.exists() && !path.is_file() {
        bail!("the history database {} is not a file; {REMEDY}", path.display());
    }
    Ok(())
}

/// What to do with a history database that cannot be read, in every error
/// about one: the runs directories hold everything it was made from.
const REMEDY: &str = "move it away, and `harness history import <runs dir>/*` rebuilds it from the run directories";

/// SQLite's `quick_check` (every page and index, in time linear in the
/// file): a database with damaged pages is refused before anything is
/// written to it or read from it, naming the file and the remedy.
fn quick_check(db: &Connection, path: &Path) -> Result<()> {
    let first: String = db
        .query_row("PRAGMA quick_check", [], |r| r.get(0))
        .with_context(|| format!("the history database {} cannot be read; {REMEDY}", path.display()))?;
    if first != "ok" {
        bail!(
            "the history database {} is damaged (SQLite's quick_check: {first}); {REMEDY}",
            path.display()
        );
    }
    Ok(())
}

/// Opens the database at `path` to read it: as [`open`] does when the file
/// can be written, else read-only as it is (a copy on a read-only mount, an
/// archive), which must then be of this harness's schema version. A
/// read-only database with a non-empty write-ahead log beside it (`-wal`:
/// committed runs not yet checkpointed) is read with its log: in place
/// where SQLite can use the log's `-shm` index (it exists or can be made),
/// else from a private copy of both files read into memory. Without a log
/// it is opened `immutable` (no lock or `-shm` file, which a read-only
/// place cannot hold).
pub fn open_to_read(path: &Path) -> Result<Connection> {
    a_file_or_none(path)?;
    if std::fs::OpenOptions::new().write(true).open(path).is_ok() {
        return open(path);
    }
    let wal = companion(path, "-wal");
    let logged = std::fs::metadata(&wal).is_ok_and(|m| m.len() > 0);
    let db = if !logged {
        open_read_only(path, "immutable=1")?
    } else {
        match open_read_only(path, "mode=ro").and_then(|db| readable(&db, path).map(|()| db)) {
            Ok(db) => db,
            Err(in_place) => read_copy(path, &wal).with_context(|| {
                format!(
                    "read the history database {} with its log {} (in place: {in_place:#}); copy both files to a writable directory and read the copy",
                    path.display(),
                    wal.display()
                )
            })?,
        }
    };
    readable(&db, path)?;
    quick_check(&db, path)?;
    let have: u32 = db
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .with_context(|| format!("read {}", path.display()))?;
    if have != VERSION {
        bail!(
            "read the history database {}: it is read-only and of schema version {have}, this harness reads {VERSION}; copy it somewhere writable",
            path.display()
        );
    }
    Ok(db)
}

/// `path` with `suffix` appended to its file name (`-wal`, `-shm`).
fn companion(path: &Path, suffix: &str) -> std::path::PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    name.into()
}

/// Opens `path` read-only through a URI with the query `query`.
fn open_read_only(path: &Path, query: &str) -> Result<Connection> {
    use rusqlite::OpenFlags;
    let escaped = path
        .to_string_lossy()
        .replace('%', "%25")
        .replace('?', "%3f")
        .replace('#', "%23");
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_URI | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    Connection::open_with_flags(format!("file:{escaped}?{query}"), flags)
        .with_context(|| format!("open the history database {} read-only", path.display()))
}

/// Reads the schema, which is where a log that cannot be used shows.
fn readable(db: &Connection, path: &Path) -> Result<()> {
    db.query_row("SELECT count(*) FROM sqlite_master", [], |r| r.get::<_, i64>(0))
        .with_context(|| format!("read {}", path.display()))?;
    Ok(())
}

/// The database and its log copied to a fresh private directory, opened
/// there (SQLite replays the log), read into memory; the copy is removed.
fn read_copy(path: &Path, wal: &Path) -> Result<Connection> {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let dir = std::env::temp_dir().join(format!("harness-history-{}-{nanos}", std::process::id()));
    std::fs::create_dir(&dir).with_context(|| format!("create {}", dir.display()))?;
    let copied = (|| -> Result<Connection> {
        let copy = dir.join("history.sqlite");
        std::fs::copy(path, &copy).with_context(|| format!("copy {} to {}", path.display(), copy.display()))?;
        std::fs::copy(wal, companion(&copy, "-wal")).with_context(|| format!("copy {}", wal.display()))?;
        let mut db = Connection::open_in_memory()?;
        db.restore(rusqlite::MAIN_DB, &copy, None::<fn(rusqlite::backup::Progress)>)
            .with_context(|| format!("read the copy {}", copy.display()))?;
        Ok(db)
    })();
    let _ = std::fs::remove_dir_all(&dir);
    copied
}

/// Applies every migration after the database's version.
pub fn migrate(db: &mut Connection) -> Result<()> {
    let tx = db.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
    let have: u32 = tx.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    if have > VERSION {
        bail!("read schema version {have}: this harness knows up to {VERSION}; use a newer harness");
    }
    for (i, sql) in MIGRATIONS.iter().enumerate().skip(have as usize) {
        tx.execute_batch(sql)
            .with_context(|| format!("apply migration to version {}", i + 1))?;
    }
    tx.execute_batch(&format!("PRAGMA user_version = {VERSION}"))?;
    tx.commit()?;
    Ok(())
}
