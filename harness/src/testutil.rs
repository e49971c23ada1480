//! Helpers shared by the unit tests: scratch directories and files.

use std::path::{Path, PathBuf};

/// Writes `s` to `p`, making its parent directories.
pub fn write(p: &Path, s: &str) {
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, s).unwrap();
}

/// A fresh, empty directory under the system temp dir, unique per test name
/// and process.
pub fn scratch(name: &str) -> PathBuf {
    let root = std::env::temp_dir().join(format!("harness-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(&root).unwrap();
    root
}

/// Asserts that `doc` (a path under the repository's `docs/`) holds the
/// table `header` and each of `rows` as a line of its own, verbatim: a
/// seeded simulation's printed table checked against what the docs say.
/// Each line is printed first, so `--nocapture` shows the table to paste.
pub fn assert_doc_table(doc: &str, header: &str, rows: &[String]) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs").join(doc);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    println!("{header}");
    rows.iter().for_each(|r| println!("{r}"));
    let has = |l: &str| text.lines().any(|d| d.trim_end() == l);
    assert!(has(header), "docs/{doc} lacks the table's header {header:?}");
    let missing: Vec<&String> = rows.iter().filter(|r| !has(r)).collect();
    assert!(missing.is_empty(), "rows not in docs/{doc}: {missing:#?}");
}

/// Asserts that `doc` (under `docs/`) says `phrase`, whitespace and line
/// breaks aside: a seeded figure quoted in prose checked against the code.
pub fn assert_doc_says(doc: &str, phrase: &str) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs").join(doc);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let flat = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
    println!("{phrase}");
    assert!(
        flat(&text).contains(&flat(phrase)),
        "docs/{doc} does not say {phrase:?}"
    );
}
