//! A history database that cannot be written: a copy on a read-only mount,
//! an archive, with or without the write-ahead log beside it.

use std::path::{Path, PathBuf};

use super::tests::{records, scratch, write_run};
use super::*;
use crate::stats::changepoint::Params;

/// Makes `path` read-only even for root (tests may run as root): mode
/// bits, then the immutable attribute; false where neither holds.
fn freeze(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    let mode = if path.is_dir() { 0o555 } else { 0o444 };
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    let writable = |p: &Path| {
        if p.is_dir() {
            let probe = p.join(".probe");
            let made = std::fs::File::create(&probe).is_ok();
            let _ = std::fs::remove_file(&probe);
            made
        } else {
            std::fs::OpenOptions::new().write(true).open(p).is_ok()
        }
    };
    if !writable(path) {
        return true;
    }
    chattr("+i", path);
    !writable(path)
}

/// Undoes [`freeze`], so the scratch directory can be removed.
fn thaw(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    chattr("-i", path);
    let _ = std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755));
}

fn chattr(flag: &str, path: &Path) {
    let _ = crate::proc::Cmd::new("chattr").arg(flag).arg(path).capture().run();
}

fn runs(db: &rusqlite::Connection) -> i64 {
    db.query_row("SELECT count(*) FROM runs", [], |r| r.get(0)).unwrap()
}

#[test]
fn a_read_only_copy_of_the_database_can_be_read() {
    let root_dir = scratch("readonly");
    let root = root_dir.path().to_path_buf();
    let path = root.join("h.sqlite");
    {
        let mut db = open(&path).unwrap();
        add(
            &mut db,
            &write_run(&root, &records("r1", 0, 100.0, |_| {})),
            &WorkDir::at(&root),
            Sources::Records,
        )
        .unwrap();
    }
    let copy = root.join("ro/h.sqlite");
    std::fs::create_dir_all(copy.parent().unwrap()).unwrap();
    std::fs::copy(&path, &copy).unwrap();
    if !freeze(&copy) {
        return eprintln!("skipped: {} cannot be made read-only here", copy.display());
    }
    let got = open_existing(&copy)
        .map(|db| db.map(|db| series(&db, &Filter::default(), &Params::default()).map(|s| s.len())));
    thaw(&copy);
    assert_eq!(got.unwrap().unwrap().unwrap(), 2);
}

/// Issue 30: a read-only copy taken while its writer was open holds
/// committed runs only in its `-wal`; immutable opens ignored them. Every
/// way the log can sit there, every run is read.
#[test]
fn a_read_only_copy_with_its_write_ahead_log_reads_every_run() {
    let root_dir = scratch("readonly-wal");
    let root = root_dir.path().to_path_buf();
    let path = root.join("h.sqlite");
    let mut db = open(&path).unwrap();
    for (i, id) in ["r1", "r2", "r3"].into_iter().enumerate() {
        let dir = write_run(&root, &records(id, i as u64, 100.0, |_| {}));
        add(&mut db, &dir, &WorkDir::at(&root), Sources::Records).unwrap();
    }
    let wal = |p: &Path| PathBuf::from(format!("{}-wal", p.display()));
    let shm = |p: &Path| PathBuf::from(format!("{}-shm", p.display()));
    assert!(
        std::fs::metadata(wal(&path)).unwrap().len() > 0,
        "the writer is open: its log holds the runs"
    );
    // (case, copy the -shm too, make the directory read-only)
    let cases = [
        ("directory writable, no -shm", false, false),
        ("read-only -shm in a read-only directory", true, true),
        ("no -shm in a read-only directory", false, true),
    ];
    for (i, (case, with_shm, frozen_dir)) in cases.into_iter().enumerate() {
        let dir = root.join(format!("ro{i}"));
        std::fs::create_dir_all(&dir).unwrap();
        let copy = dir.join("h.sqlite");
        std::fs::copy(&path, &copy).unwrap();
        std::fs::copy(wal(&path), wal(&copy)).unwrap();
        let mut frozen = vec![copy.clone(), wal(&copy)];
        if with_shm {
            std::fs::copy(shm(&path), shm(&copy)).unwrap();
            frozen.push(shm(&copy));
        }
        if frozen_dir {
            frozen.push(dir.clone());
        }
        let all = frozen.iter().filter(|p| !freeze(p)).count() == 0; // every one tried
        let got = all.then(|| open_existing(&copy).map(|db| runs(&db.unwrap())));
        frozen.iter().for_each(|p| thaw(p));
        match got {
            None => eprintln!("skipped {case}: cannot make the copy read-only here"),
            Some(got) => assert_eq!(got.unwrap(), 3, "{case}"),
        }
        assert!(wal(&copy).exists(), "{case}: the copy's log is left as it was");
    }
    drop(db);
}
