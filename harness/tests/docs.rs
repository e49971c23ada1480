//! The product's documentation stands on its own: every relative link
//! resolves to a file inside the repository (and its anchor to a heading),
//! and no link leaves the repository.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().canonicalize().unwrap()
}

/// The documents checked: the top-level ones and every Markdown file under `docs/`.
fn documents() -> Vec<PathBuf> {
    let repo = repo();
    let mut docs: Vec<PathBuf> =
        ["README.md", "ARCHITECTURE.md", "patches/README.md"].iter().map(|d| repo.join(d)).filter(|p| p.is_file()).collect();
    assert!(repo.join("docs").is_dir(), "docs/ is missing");
    walk(&repo.join("docs"), &mut docs);
    docs
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            walk(&p, out);
        } else if p.extension().is_some_and(|e| e == "md") {
            out.push(p);
        }
    }
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_else(|e| panic!("read {}: {e}", p.display()))
}

/// The lines outside fenced code blocks, with their line numbers (from 1).
fn prose(text: &str) -> Vec<(usize, &str)> {
    let mut fenced = false;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        } else if !fenced {
            out.push((i + 1, line));
        }
    }
    out
}

/// A heading's anchor as GitHub makes it: lowercase, punctuation dropped,
/// spaces to hyphens.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// The anchors of a Markdown file's headings (a repeated heading gets `-1`, `-2`, …).
fn anchors(text: &str) -> BTreeSet<String> {
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut out = BTreeSet::new();
    for (_, line) in prose(text) {
        let Some(h) = line.strip_prefix('#') else { continue };
        let h = h.trim_start_matches('#');
        if !h.starts_with(' ') {
            continue;
        }
        let s = slug(h);
        let n = seen.entry(s.clone()).or_insert(0);
        out.insert(if *n == 0 { s } else { format!("{s}-{n}") });
        *n += 1;
    }
    out
}

/// The targets of the inline links `[text](target)` in a line.
fn link_targets(line: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = line;
    while let Some(i) = rest.find("](") {
        let after = &rest[i + 2..];
        let Some(j) = after.find(')') else { break };
        out.push(&after[..j]);
        rest = &after[j + 1..];
    }
    out
}

/// Where a link of `doc` leads, or why it does not lead anywhere in the repository.
fn resolve(repo: &Path, doc: &Path, target: &str) -> Result<(), String> {
    if target.contains("://") || target.starts_with("mailto:") || target.starts_with('/') {
        return Err("leaves the repository".into());
    }
    let (path, anchor) = target.split_once('#').unwrap_or((target, ""));
    let file = if path.is_empty() { doc.to_path_buf() } else { doc.parent().unwrap().join(path) };
    let file = file.canonicalize().map_err(|_| format!("{path}: no such file"))?;
    if !file.starts_with(repo) {
        return Err(format!("{path}: outside the repository"));
    }
    if !anchor.is_empty() {
        if file.extension().is_none_or(|e| e != "md") || !anchors(&read(&file)).contains(anchor) {
            return Err(format!("#{anchor}: no such heading in {}", file.strip_prefix(repo).unwrap().display()));
        }
    }
    Ok(())
}

#[test]
fn docs_point_only_inside_the_repository() {
    let repo = repo();
    let mut bad = Vec::new();
    for doc in documents() {
        let name = doc.strip_prefix(&repo).unwrap().display().to_string();
        let text = read(&doc);
        for (i, line) in text.lines().enumerate() {
            let mut rest = line.to_string();
            for target in link_targets(line) {
                match resolve(&repo, &doc, target) {
                    Ok(()) => rest = rest.replacen(&format!("]({target})"), "]()", 1),
                    Err(e) => bad.push(format!("{name}:{}: link ({target}) {e}", i + 1)),
                }
            }
            // `../` only inside a link that resolved inside the repository
            if rest.contains("../") || rest.contains("shared/design") {
                bad.push(format!("{name}:{}: points outside the repository: {line}", i + 1));
            }
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}
