//! `check`'s series: each series the matrix names, classified against the
//! base (applies, already contained, conflicts), on the work tree under
//! the work-directory lock, or on a private copy of the files they touch
//! while a run holds it.

use std::path::Path;

use super::{item, Item, Level};
use crate::config::Matrix;
use crate::kernel::patch::{self, SeriesState};
use crate::kernel::tree::{pristine_files, Tree};
use crate::workdir::{WorkDir, WorkLock};

/// Series states against the base tree. The work tree is used under the
/// work-directory lock; while a run holds the lock, its tree (patched
/// mid-build) and `work/scratch` are left alone and the series are tried
/// on a private copy of the files they touch, taken from the source itself.
pub(super) fn checks(m: &Matrix, work: &WorkDir) -> Vec<Item> {
    let mut out = Vec::new();
    let names = every_series(m);
    let lock = match WorkLock::try_acquire(work, "check") {
        Err(e) => return vec![item(Level::Error, "work directory", format!("{e:#}"))],
        Ok(l) => l,
    };
    let log = work.log("check");
    let (tree_dir, scratch, private) = match &lock {
        Ok(_) => match Tree::prepare(&m.kernel.source, work, &log) {
            Err(e) => return vec![item(Level::Error, "kernel tree", format!("{e:#}"))],
            Ok(tree) => {
                out.push(item(
                    Level::Ok,
                    "kernel tree",
                    format!(
                        "{} ({}) at {}",
                        tree.version().unwrap_or_default(),
                        m.kernel.source.display(),
                        tree.dir.display()
                    ),
                ));
                (tree.dir, work.scratch(), None)
            }
        },
        Err(holder) => {
            let private = std::env::temp_dir().join(format!("harness-check-{}", std::process::id()));
            let files = touched_by(&m.series_dir, &names);
            let _ = std::fs::remove_dir_all(&private);
            if let Err(e) = pristine_files(
                &m.kernel.source,
                &files,
                &private.join("tree"),
                &private.join("check.log"),
            ) {
                return vec![item(Level::Error, "kernel tree", format!("{e:#}"))];
            }
            out.push(item(
                Level::Ok,
                "kernel tree",
                format!("a run holds the work directory ({holder}); its tree is left alone and the series are tried on the {} files they touch, from {}", files.len(), m.kernel.source.display()),
            ));
            (private.join("tree"), private.join("scratch"), Some(private))
        }
    };
    out.extend(classify_all(m, &names, &tree_dir, &scratch));
    if let Some(p) = private {
        let _ = std::fs::remove_dir_all(p);
    }
    drop(lock);
    out
}

/// The matrix's series, then every other series directory (sorted), so a
/// maintainer sees all of them.
fn every_series(m: &Matrix) -> Vec<String> {
    let mut names: Vec<String> = m.series_names();
    if let Ok(rd) = std::fs::read_dir(&m.series_dir) {
        let mut extra: Vec<String> = rd
            .filter_map(|e| e.ok())
            .filter(|e| e.path().join("series").is_file())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| !names.contains(n))
            .collect();
        extra.sort();
        names.extend(extra);
    }
    names
}

/// Every file the named series touch (unreadable series are reported by
/// [`classify_all`]).
fn touched_by(series_dir: &Path, names: &[String]) -> Vec<String> {
    let mut files: Vec<String> = Vec::new();
    for s in names {
        let Ok(ser) = patch::load_series(series_dir, s) else {
            continue;
        };
        for p in &ser.patches {
            for f in patch::files_of(p).unwrap_or_default() {
                if !files.contains(&f) {
                    files.push(f);
                }
            }
        }
    }
    files
}

/// Classifies each series against `tree` and checks that every variant can
/// apply or revert what it names.
fn classify_all(m: &Matrix, names: &[String], tree: &Path, scratch: &Path) -> Vec<Item> {
    let mut out = Vec::new();
    let mut states = std::collections::BTreeMap::new();
    let used = m.series_names();
    for s in names {
        let what = format!("series {s}");
        match patch::load_series(&m.series_dir, s).and_then(|ser| {
            let exp = ser.experimental;
            patch::classify(tree, &ser, scratch).map(|st| (st, exp))
        }) {
            Err(e) if used.contains(s) => out.push(item(Level::Error, &what, format!("{e:#}"))),
            // a broken series no variant uses stops no run
            Err(e) => out.push(item(
                Level::Warn,
                &what,
                format!("{e:#} (no variant of this matrix uses it)"),
            )),
            Ok((st, exp)) => {
                let lvl = if matches!(st, SeriesState::Conflicts { .. }) {
                    Level::Warn
                } else {
                    Level::Ok
                };
                let tag = if exp { " [experimental]" } else { "" };
                out.push(item(lvl, &what, format!("{st}{tag}")));
                states.insert(s.clone(), st);
            }
        }
    }
    for (i, v) in m.variants.iter().enumerate() {
        for (key, list, want) in [("revert", &v.revert, "contained"), ("apply", &v.apply, "applies")] {
            for (j, s) in list.iter().enumerate() {
                let Some(st) = states.get(s) else { continue };
                let good = matches!(
                    (st, want),
                    (SeriesState::Contained, "contained") | (SeriesState::Applies, "applies")
                );
                if !good {
                    out.push(item(
                        Level::Error,
                        format!("variants[{}].{key}[{j}]", i),
                        format!("variant {} cannot {key} {s}: {st}", v.name),
                    ));
                }
            }
        }
    }
    out
}
