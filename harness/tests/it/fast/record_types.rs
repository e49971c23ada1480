//! Issue 33: the on-disk format is owned by `records`. A type of
//! `harness/src/records/` that derives `Serialize` names no type of `vm`,
//! `bench`, `kernel` or `host` (neither by a `crate::` path nor by a name
//! the file imports from them), and records re-exports none of theirs: an
//! edit of those modules cannot change run.json, events.jsonl or
//! samples.jsonl. Their values become records through `From` at the edge.

use super::layers::outside_tests;
use crate::common::repo;
use std::collections::{BTreeMap, BTreeSet};

/// The modules whose types the run files may not hold.
const LOWER: [&str; 4] = ["vm", "bench", "kernel", "host"];

fn idents(s: &str) -> impl Iterator<Item = &str> {
    s.split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .filter(|w| !w.is_empty())
}

/// The names `code` uses as types or paths: its identifiers outside string
/// literals, less field names (`name: …`, not `name::…`).
fn type_names(code: &str) -> Vec<&str> {
    let (b, mut out, mut i) = (code.as_bytes(), Vec::new(), 0);
    while i < b.len() {
        let c = b[i] as char;
        if c == '"' {
            i += 1 + code[i + 1..].find('"').unwrap_or(code.len() - i - 1) + 1;
            continue;
        }
        if !(c.is_alphanumeric() || c == '_') {
            i += 1;
            continue;
        }
        let start = i;
        while i < b.len() && ((b[i] as char).is_alphanumeric() || b[i] == b'_') {
            i += 1;
        }
        let after = code[i..].trim_start();
        let field = after.starts_with(':') && !after.starts_with("::");
        if !field {
            out.push(&code[start..i]);
        }
    }
    out
}

/// `(root module, name it brings in)` of a use tree (the text after
/// `crate::`): `vm::{self, Accel as A}` → `(vm, vm)`, `(vm, A)`.
fn leaves(tree: &str, root: Option<&str>, parent: Option<&str>, out: &mut Vec<(String, String)>) {
    let tree = tree.trim();
    if let Some(group) = tree.strip_prefix('{').and_then(|g| g.strip_suffix('}')) {
        let (mut depth, mut start) = (0, 0);
        for (i, c) in group.char_indices() {
            match c {
                '{' => depth += 1,
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    leaves(&group[start..i], root, parent, out);
                    start = i + 1;
                }
                _ => {}
            }
        }
        return leaves(&group[start..], root, parent, out);
    }
    if tree.is_empty() {
        return;
    }
    let (path, rest) = match tree.find("::{") {
        Some(i) => (&tree[..i], Some(&tree[i + 2..])),
        None => (tree, None),
    };
    let segs: Vec<&str> = path.split("::").map(str::trim).collect();
    let root = root.unwrap_or(segs[0]);
    match rest {
        Some(group) => leaves(group, Some(root), segs.last().copied(), out),
        None => {
            let last = segs[segs.len() - 1];
            let name = match last.split_once(" as ") {
                Some((_, alias)) => alias.trim(),
                None if last == "self" => parent.unwrap_or(root),
                None => last,
            };
            out.push((root.to_string(), name.to_string()));
        }
    }
}

/// The `use crate::…;` statements of `src`, whole, with whether each is `pub`.
fn uses(src: &str) -> Vec<(bool, String)> {
    let mut out = Vec::new();
    let mut at = 0;
    while let Some(i) = src[at..].find("use crate::") {
        let start = at + i;
        let line_start = src[..start].rfind('\n').map_or(0, |n| n + 1);
        let head = src[line_start..start].trim();
        let end = src[start..].find(';').map_or(src.len(), |e| start + e);
        if head.is_empty() || head.starts_with("pub") {
            out.push((head.starts_with("pub"), src[start + 11..end].to_string()));
        }
        at = end;
    }
    out
}

/// Each item of `src` that derives `Serialize`: its first line and its text
/// (attributes and body), comments left out.
fn serialized_items(src: &str) -> Vec<(usize, String)> {
    let lines: Vec<&str> = src.lines().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let l = lines[i].trim();
        if !(l.starts_with("#[derive(") && idents(l).any(|w| w == "Serialize")) {
            i += 1;
            continue;
        }
        let (first, mut depth, mut text) = (i + 1, 0i32, String::new());
        while i < lines.len() {
            let code = lines[i].split("//").next().unwrap_or("");
            text.push_str(code);
            text.push('\n');
            depth += code.matches('{').count() as i32 - code.matches('}').count() as i32;
            i += 1;
            let opened = text.contains('{');
            if (opened && depth <= 0) || (!opened && code.trim_end().ends_with(';')) {
                break;
            }
        }
        out.push((first, text));
    }
    out
}

/// Every breach of the rule in `src` (a file of `harness/src/records/`).
fn breaches(src: &str) -> Vec<String> {
    let code = outside_tests(src);
    let mut borrowed = BTreeSet::new();
    let mut out = Vec::new();
    for (public, tree) in uses(code) {
        let mut l = Vec::new();
        leaves(&tree, None, None, &mut l);
        for (root, name) in l.into_iter().filter(|(r, _)| LOWER.contains(&r.as_str())) {
            if public {
                out.push(format!("re-exports {root}'s `{name}`: define the record's own type"));
            }
            borrowed.insert(name);
        }
    }
    for (line, text) in serialized_items(code) {
        let named: Vec<&str> = type_names(&text)
            .into_iter()
            .filter(|w| borrowed.contains(*w))
            .collect();
        let pathed = LOWER.iter().filter(|m| text.contains(&format!("crate::{m}::")));
        for what in named
            .iter()
            .map(|n| n.to_string())
            .chain(pathed.map(|m| format!("crate::{m}::")))
        {
            out.push(format!(
                "line {line}: a serialised type names `{what}`, a lower module's: define the record's own type"
            ));
        }
    }
    out
}

#[test]
fn record_types_are_owned_by_records() {
    let dir = repo().join("harness/src/records");
    let mut files = BTreeMap::new();
    for e in std::fs::read_dir(&dir).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "rs") {
            files.insert(
                p.file_name().unwrap().to_string_lossy().into_owned(),
                std::fs::read_to_string(&p).unwrap(),
            );
        }
    }
    assert!(files.contains_key("mod.rs") && files.len() > 3, "{:?}", files.keys());
    let found: Vec<String> = files
        .iter()
        .flat_map(|(f, src)| {
            breaches(src)
                .into_iter()
                .map(move |b| format!("harness/src/records/{f}: {b}"))
        })
        .collect();
    assert!(
        found.is_empty(),
        "records borrows lower modules' types:\n{}",
        found.join("\n")
    );
}

/// The check itself: each planted borrowing is found; conversions,
/// functions, comments and tests that name lower types are not.
#[test]
fn a_planted_borrowed_record_type_is_caught() {
    let derive = "#[derive(Debug, Serialize, Deserialize)]\n";
    let cases = [
        (format!("use crate::vm::{{Accel, Finding}};\n{derive}pub struct E {{\n    a: Accel,\n}}\n"), 1),
        (format!("{derive}pub struct E {{\n    a: Option<crate::bench::CpuWindow>,\n}}\n"), 1),
        (format!("use crate::kernel::{{kconfig::Lost, patch}};\n{derive}#[serde(tag = \"event\")]\npub enum E {{\n    C {{ lost: Vec<Lost> }},\n    S {{ s: patch::SeriesState }},\n}}\n"), 2),
        (format!("use crate::{{host::{{self, state}}, util}};\n{derive}pub struct H(Option<state::HostState>);\n"), 1),
        ("pub use crate::host::Host;\n".to_string(), 1),
        ("pub use crate::host::{\n    Host,\n    topology::Topology,\n};\n".to_string(), 2),
        (format!("use crate::vm;\n{derive}pub enum Accel {{\n    /// Like [`vm::Accel::Kvm`].\n    Kvm,\n}}\nimpl From<vm::Accel> for Accel {{\n    fn from(a: vm::Accel) -> Accel {{ todo!() }}\n}}\n"), 0),
        (format!("use crate::config::Matrix;\nuse crate::kernel::tree;\n{derive}pub struct M {{\n    m: Matrix,\n}}\nfn pin() {{ tree::source_key(); }}\n"), 0),
        (format!("{derive}pub struct M {{ m: u32 }}\n#[cfg(test)]\nmod tests {{\n    use crate::vm::Accel;\n    {derive}struct T {{ a: Accel }}\n}}\n"), 0),
    ];
    for (src, want) in cases {
        let got = breaches(&src);
        assert_eq!(got.len(), want, "{src}\n→ {got:?}");
    }
}
