//! The layering rule of ARCHITECTURE.md, checked against the code: a module
//! of `harness/src` refers (`crate::…`, `super::…`, in code or doc links,
//! outside its `#[cfg(test)] mod tests`) only to modules of layers below its
//! own, or to its own top-level module.

use crate::common::repo;
use std::collections::BTreeMap;
use std::path::Path;

/// `module → layer` from ARCHITECTURE.md's table rows `| L<n> | `a` `b` … |`.
fn layers(architecture: &str) -> BTreeMap<String, u32> {
    let mut out = BTreeMap::new();
    for line in architecture.lines() {
        let Some(rest) = line.strip_prefix("| L") else { continue };
        let Some((n, mods)) = rest.split_once('|') else {
            continue;
        };
        let Ok(n) = n.trim().parse::<u32>() else { continue };
        let mods = mods.split('|').next().unwrap_or("");
        for m in mods.split('`').skip(1).step_by(2) {
            out.insert(m.to_string(), n);
        }
    }
    out
}

/// The code of a file that counts: everything before `#[cfg(test)] mod tests`.
pub(super) fn outside_tests(src: &str) -> &str {
    let mut at = 0;
    while let Some(i) = src[at..].find("#[cfg(test)]\n") {
        let start = at + i;
        let next = src[start..].lines().nth(1).unwrap_or("");
        if next.trim_start_matches("pub(crate) ").starts_with("mod tests") {
            return &src[..start];
        }
        at = start + 1;
    }
    src
}

fn ident(s: &str) -> &str {
    let end = s.find(|c: char| !(c.is_alphanumeric() || c == '_')).unwrap_or(s.len());
    &s[..end]
}

/// The first segments named after `crate::` at the start of `s`: one, or
/// each item of a `{…}` group.
fn heads(s: &str) -> Vec<String> {
    let Some(group) = s.strip_prefix('{') else {
        return vec![ident(s).to_string()];
    };
    let (mut depth, mut item_start, mut out) = (0, true, Vec::new());
    for (i, c) in group.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => break,
            '}' => depth -= 1,
            ',' if depth == 0 => item_start = true,
            c if item_start && !c.is_whitespace() => {
                out.push(ident(&group[i..]).to_string());
                item_start = false;
            }
            _ => {}
        }
    }
    out
}

/// Top-level modules that `src` (the file of module path `path`, e.g.
/// `["kernel", "tree"]`) refers to, with line numbers.
fn references(path: &[String], src: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for (ln, line) in outside_tests(src).lines().enumerate() {
        let mut rest = line;
        while let Some(i) = rest.find(['c', 's']) {
            let tail = &rest[i..];
            let boundary = i == 0 || !rest[..i].ends_with(|c: char| c.is_alphanumeric() || c == '_');
            if boundary && tail.starts_with("crate::") {
                out.extend(heads(&tail[7..]).into_iter().map(|h| (ln + 1, h)));
            } else if boundary && tail.starts_with("super::") {
                let (mut up, mut t) = (0, tail);
                while let Some(r) = t.strip_prefix("super::") {
                    up += 1;
                    t = r;
                }
                // a file's module path minus `up` levels; at the root, the named module
                let base = &path[..path.len().saturating_sub(up)];
                match base.first() {
                    Some(top) => out.push((ln + 1, top.clone())),
                    None => out.extend(heads(t).into_iter().map(|h| (ln + 1, h))),
                }
            }
            rest = &rest[i + 1..];
        }
    }
    out
}

/// Every breach of the rule among `files` (path under src → text).
fn breaches(table: &BTreeMap<String, u32>, files: &BTreeMap<String, String>) -> Vec<String> {
    let mut out = Vec::new();
    for (rel, src) in files {
        let mut path: Vec<String> = rel.trim_end_matches(".rs").split('/').map(String::from).collect();
        if path.last().is_some_and(|l| l == "mod") {
            path.pop();
        }
        let own = &path[0];
        let Some(&mine) = table.get(own) else {
            out.push(format!(
                "harness/src/{rel}: module `{own}` is in no layer of ARCHITECTURE.md: add it to the table"
            ));
            continue;
        };
        for (ln, target) in references(&path, src) {
            if &target == own || target == "self" {
                continue;
            }
            match table.get(&target) {
                Some(&theirs) if theirs < mine => {}
                Some(&theirs) => out.push(format!("harness/src/{rel}:{ln}: `{own}` (L{mine}) refers to `{target}` (L{theirs}): a module uses only layers below its own")),
                None => out.push(format!("harness/src/{rel}:{ln}: `{own}` refers to `{target}`, which is in no layer of ARCHITECTURE.md")),
            }
        }
    }
    out
}

fn source_files(dir: &Path, root: &Path, out: &mut BTreeMap<String, String>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            source_files(&p, root, out);
            continue;
        }
        let rel = p.strip_prefix(root).unwrap().to_string_lossy().into_owned();
        let skip = ["lib.rs", "main.rs", "testutil.rs"].contains(&rel.as_str())
            || rel.ends_with("/tests.rs")
            || rel == "tests.rs";
        if rel.ends_with(".rs") && !skip {
            out.insert(rel, std::fs::read_to_string(&p).unwrap());
        }
    }
}

#[test]
fn every_module_uses_only_layers_below_its_own() {
    let table = layers(&std::fs::read_to_string(repo().join("ARCHITECTURE.md")).unwrap());
    assert!(table.len() > 10, "ARCHITECTURE.md has no layer table: {table:?}");
    let root = repo().join("harness/src");
    let mut files = BTreeMap::new();
    source_files(&root, &root, &mut files);
    let found = breaches(&table, &files);
    assert!(
        found.is_empty(),
        "{} breach(es) of the layering rule:\n{}",
        found.len(),
        found.join("\n")
    );
}

/// The check itself: a planted upward reference, in each form the scan
/// reads, is found; references down, inside the module and in tests are not.
#[test]
fn a_planted_upward_reference_is_caught() {
    let table = layers("| L0 | `util` |\n| L3 | `kernel` |\n| L6 | `boot` `report` |\n| L7 | `pipeline` |\n");
    let cases = [
        ("kernel/tree.rs", "use crate::pipeline::Options;\n", 1),
        ("kernel/tree.rs", "use crate::{util::hex, boot::Stage};\n", 1),
        ("kernel/tree.rs", "/// see [`crate::report::num`]\n", 1),
        ("kernel/tree.rs", "fn f() { super::super::boot::x() }\n", 1),
        ("report.rs", "fn f() { super::pipeline::run() }\n", 1),
        ("boot.rs", "use crate::report::x;\n", 1),
        ("boot.rs", "use crate::newthing::x;\n", 1),
        ("newthing.rs", "", 1),
        (
            "kernel/tree.rs",
            "use super::build::Artifact;\nuse crate::util::{hex, now};\n",
            0,
        ),
        ("pipeline.rs", "use crate::{boot, kernel::{tree::Tree, build}};\n", 0),
        (
            "kernel/tree.rs",
            "fn ok() {}\n#[cfg(test)]\nmod tests {\n    use crate::pipeline::x;\n}\n",
            0,
        ),
        (
            "kernel/tree.rs",
            "fn ok() {}\n#[cfg(test)]\npub(crate) mod tests {\n    use crate::boot::x;\n}\n",
            0,
        ),
        ("kernel/tree.rs", "let supercrate = 1; // nocrate::pipeline\n", 0),
    ];
    for (rel, src, want) in cases {
        let files = BTreeMap::from([(rel.to_string(), src.to_string())]);
        let got = breaches(&table, &files);
        assert_eq!(got.len(), want, "{rel}: {src:?} → {got:?}");
    }
}

/// Lines of `src` (outside its tests) that join a name onto a work
/// directory path themselves instead of asking `workdir::WorkDir`.
fn work_joins(src: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for (i, line) in outside_tests(src).lines().enumerate() {
        for var in ["work", "work_dir", "g.work_dir", "opts.work_dir"] {
            let at = format!("{var}.join(");
            let hit = line.match_indices(&at).any(|(j, _)| {
                let before = line[..j].chars().next_back();
                !before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '.')
            });
            if hit {
                out.push((i + 1, line.trim().to_string()));
                break;
            }
        }
    }
    out
}

/// Issue 33: the work directory's layout is spelt out in one place
/// (`workdir::WorkDir`, whose `ENTRIES` gc and check read), not by each module.
#[test]
fn only_workdir_joins_names_onto_the_work_directory() {
    let root = repo().join("harness/src");
    let mut files = BTreeMap::new();
    source_files(&root, &root, &mut files);
    let found: Vec<String> = files
        .iter()
        .filter(|(rel, _)| !rel.starts_with("workdir"))
        .flat_map(|(rel, src)| work_joins(src).into_iter().map(move |(n, l)| format!("{rel}:{n}: {l}")))
        .collect();
    assert!(
        found.is_empty(),
        "paths under the work directory made outside WorkDir:\n{}",
        found.join("\n")
    );
    let planted = "fn f(work: &Path) { let k = work.join(\"kernels\"); }\nfn g(w: &WorkDir) { w.kernels(); let x = network.join(\"a\"); }\n#[cfg(test)]\nmod tests {\n    fn t() { work.join(\"tree\"); }\n}\n";
    assert_eq!(work_joins(planted).len(), 1, "{:?}", work_joins(planted));
}

/// Parameters and fields of `src` (outside its tests) that hold a work
/// directory as a plain path (`work: &Path`, `work_dir: PathBuf`) instead of
/// a `WorkDir`.
fn path_typed_work_dirs(src: &str) -> Vec<(usize, String)> {
    let typed = regex::Regex::new(r"\b(work|work_dir)\s*:\s*&?(?:'\w+\s+)?(?:std::path::)?(?:Path|PathBuf)\b").unwrap();
    outside_tests(src)
        .lines()
        .enumerate()
        .filter(|(_, l)| typed.is_match(l))
        .map(|(i, l)| (i + 1, l.trim().to_string()))
        .collect()
}

/// Issue 46: the work directory is passed as a `WorkDir` from the CLI down;
/// only the edges hold it as a path: the CLI's `--work-dir` argument and
/// the Slurm job's script text.
#[test]
fn the_work_directory_is_passed_as_its_type() {
    let root = repo().join("harness/src");
    let mut files = BTreeMap::new();
    source_files(&root, &root, &mut files);
    let edges = ["cli/mod.rs", "slurm.rs"];
    let found: Vec<String> = files
        .iter()
        .filter(|(rel, _)| !edges.contains(&rel.as_str()))
        .flat_map(|(rel, src)| {
            path_typed_work_dirs(src)
                .into_iter()
                .map(move |(n, l)| format!("{rel}:{n}: {l}"))
        })
        .collect();
    assert!(
        found.is_empty(),
        "work directories typed as paths:\n{}",
        found.join("\n")
    );
    let planted = "fn f(work: &Path) {}\nstruct S { work_dir: PathBuf, network: &Path }\nfn g(work: &WorkDir, w: &'a std::path::Path) {}\n#[cfg(test)]\nmod tests {\n    fn t(work: &Path) {}\n}\n";
    assert_eq!(
        path_typed_work_dirs(planted).len(),
        2,
        "{:?}",
        path_typed_work_dirs(planted)
    );
}
