//! The kernel functions a series changes, from its hunks: for every added
//! or removed line, the function whose body holds it — found in the hunk's
//! own lines, else in the file as the base holds it, scanning up from the
//! hunk — and every function a hunk defines or deletes whole. Function
//! starts are read in kernel style (a signature at column 0, its `{` at
//! column 0 a few lines below); `SYSCALL_DEFINEn(name, …)` is `__do_sys_name`.
//! Pure: the base files come through a closure.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// How a hunk changes a function.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Change {
    /// Lines inside its body change.
    Modified,
    /// The series adds it.
    Added,
    /// The series deletes it.
    Removed,
}

/// A function a series changes.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Changed {
    /// The function's name as it appears in the symbol table, when it has one.
    pub function: String,
    /// The file, relative to the tree's top.
    pub file: String,
    /// How.
    pub change: Change,
}

/// One line of a hunk: its mark (' ', '+', '-') and text.
type Line<'a> = (char, &'a str);

/// The functions `diff` (a unified diff, one or several files) changes;
/// `base(file)` gives a file's text as the base holds it, or None. With
/// `reverse` the diff is read as reverted (the base holds its new side:
/// a revert adds what the patch removed).
pub fn changed_functions(diff: &str, reverse: bool, base: &dyn Fn(&str) -> Option<String>) -> Vec<Changed> {
    let mut out: BTreeMap<(String, String), Change> = BTreeMap::new();
    for (file, old_start, mut lines) in hunks(diff, reverse) {
        if reverse {
            for l in &mut lines {
                l.0 = match l.0 {
                    '+' => '-',
                    '-' => '+',
                    m => m,
                };
            }
        }
        let text = base(&file);
        let base_lines: Vec<&str> = text.as_deref().map(|t| t.lines().collect()).unwrap_or_default();
        for (function, change) in hunk_functions(&lines, &base_lines, old_start) {
            let e = out.entry((function, file.clone())).or_insert(change);
            // a function both added and removed (moved) or touched is modified
            if *e != change {
                *e = Change::Modified;
            }
        }
    }
    out.into_iter()
        .map(|((function, file), change)| Changed { function, file, change })
        .collect()
}

/// Each hunk of `diff`: the new file's path, the hunk's first line in the
/// base (1-based: the old side's, the new side's when `reverse`) and its
/// lines.
fn hunks(diff: &str, reverse: bool) -> Vec<(String, usize, Vec<Line<'_>>)> {
    let mut out = Vec::new();
    let mut file: Option<String> = None;
    let mut cur: Option<(String, usize, Vec<Line>)> = None;
    let mut left = (0usize, 0usize);
    for l in diff.lines() {
        if left != (0, 0) {
            let (mark, text) = l.split_at(l.len().min(1));
            let mark = mark.chars().next().unwrap_or(' ');
            if let Some(c) = cur.as_mut().filter(|_| matches!(mark, ' ' | '+' | '-')) {
                c.2.push((mark, text));
                left.0 = left.0.saturating_sub((mark != '+') as usize);
                left.1 = left.1.saturating_sub((mark != '-') as usize);
                continue;
            }
            left = (0, 0);
        }
        if let Some(p) = l.strip_prefix("+++ ") {
            file = Some(strip_prefix_dir(p));
        } else if let Some(h) = l.strip_prefix("@@ -") {
            out.extend(cur.take());
            let Some((old, new, f)) = hunk_header(h).zip(file.clone()).map(|((o, n), f)| (o, n, f)) else {
                continue;
            };
            left = (old.1, new.1);
            cur = Some((f, if reverse { new.0 } else { old.0 }, Vec::new()));
        }
    }
    out.extend(cur);
    out
}

/// `a/fs/exec.c\t2026-…` → `fs/exec.c`.
fn strip_prefix_dir(p: &str) -> String {
    let p = p.split('\t').next().unwrap_or(p).trim();
    p.split_once('/').map_or(p, |(_, rest)| rest).to_string()
}

/// `1875,10 +1875,19 @@ …` → ((1875, 10), (1875, 19)).
fn hunk_header(h: &str) -> Option<((usize, usize), (usize, usize))> {
    let (old, rest) = h.split_once(" +")?;
    let new = rest.split_once(" @@")?.0;
    let range = |r: &str| -> Option<(usize, usize)> {
        match r.split_once(',') {
            Some((a, b)) => Some((a.parse().ok()?, b.parse().ok()?)),
            None => Some((r.parse().ok()?, 1)),
        }
    };
    Some((range(old)?, range(new)?))
}

/// The functions one hunk changes.
fn hunk_functions(lines: &[Line], base: &[&str], old_start: usize) -> Vec<(String, Change)> {
    let mut out = Vec::new();
    for side in ['+', '-'] {
        let view: Vec<(usize, Line)> = lines
            .iter()
            .copied()
            .enumerate()
            .filter(|(_, (m, _))| *m == ' ' || *m == side)
            .collect();
        let texts: Vec<&str> = view.iter().map(|(_, (_, t))| *t).collect();
        // functions this side of the hunk defines (or deletes) whole
        let mut whole: Vec<String> = Vec::new();
        for (k, (_, (mark, _))) in view.iter().enumerate() {
            if *mark != side {
                continue;
            }
            if let Some(name) = start_at(&texts, k) {
                out.push((name.clone(), if side == '+' { Change::Added } else { Change::Removed }));
                whole.push(name);
            } else if let Some(name) = enclosing(&texts, k).or_else(|| base_enclosing(&texts[..k], base, old_start)) {
                if !whole.contains(&name) {
                    out.push((name, Change::Modified));
                }
            }
        }
    }
    out
}

/// The function whose body line `lines[k]` is, looking up from it: None
/// when a closing `}` at column 0 comes first (the line is outside).
fn enclosing(lines: &[&str], k: usize) -> Option<String> {
    for i in (0..k).rev() {
        if lines[i].starts_with('}') {
            return None;
        }
        if let Some(name) = start_at(lines, i) {
            return Some(name);
        }
    }
    None
}

/// The hunk's first lines found nothing: go on up in the base file from
/// the line above the hunk, unless the hunk's lines already leave a body.
fn base_enclosing(above: &[&str], base: &[&str], old_start: usize) -> Option<String> {
    if above.iter().any(|l| l.starts_with('}')) || base.is_empty() {
        return None;
    }
    enclosing(base, old_start.saturating_sub(1).min(base.len()))
}

/// The function that starts at `lines[i]`: a signature at column 0 whose
/// `{` stands alone at column 0 within the next few lines, each between
/// them indented (a wrapped parameter list).
fn start_at(lines: &[&str], i: usize) -> Option<String> {
    let sig = lines[i];
    let first = sig.chars().next()?;
    if !(first.is_ascii_alphabetic() || first == '_') || !sig.contains('(') || sig.trim_end().ends_with(';') {
        return None;
    }
    for l in lines.iter().skip(i + 1).take(6) {
        if l.trim_end() == "{" {
            return name_of(sig);
        }
        if !l.starts_with([' ', '\t']) {
            return None;
        }
    }
    None
}

/// The function's name in a signature line.
fn name_of(sig: &str) -> Option<String> {
    let head = &sig[..sig.find('(')?];
    if let Some(n) = head.strip_prefix("SYSCALL_DEFINE") {
        let rest = &sig[head.len() + 1..];
        let name = rest.split([',', ')']).next()?.trim();
        return (n.chars().all(|c| c.is_ascii_digit()) && !name.is_empty()).then(|| format!("__do_sys_{name}"));
    }
    let name = head.trim_end().rsplit([' ', '*', '\t']).next()?;
    (!name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')).then(|| name.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    const EXEC_BASE: &str = "\
static int other(void)
{
\treturn 0;
}

static int bprm_execve(struct linux_binprm *bprm,
\t\t       int flags)
{
\tint retval;

\tretval = prepare_bprm_creds(bprm);
\tif (retval)
\t\treturn retval;
\treturn 0;
}
";

    fn changed(diff: &str) -> Vec<(String, Change)> {
        let base = |f: &str| (f == "fs/exec.c").then(|| EXEC_BASE.to_string());
        changed_functions(diff, false, &base)
            .into_iter()
            .map(|c| {
                assert_eq!(c.file, "fs/exec.c");
                (c.function, c.change)
            })
            .collect()
    }

    #[test]
    fn a_new_function_and_a_call_in_an_old_one() {
        // the exec-cost fixture's shape: a function defined above the one it is called from
        let diff = [
            "--- a/fs/exec.c\t2026",
            "+++ b/fs/exec.c\t2026",
            "@@ -4,5 +4,12 @@",
            " ",
            "+static noinline void harness_cost(void)",
            "+{",
            "+\tasm volatile(\"nop\");",
            "+}",
            "+",
            " static int bprm_execve(struct linux_binprm *bprm,",
            " \t\t       int flags)",
            " {",
            " \tint retval;",
            "+\tharness_cost();",
            "",
        ]
        .join("\n");
        let diff = diff.as_str();
        assert_eq!(
            changed(diff),
            [
                ("bprm_execve".into(), Change::Modified),
                ("harness_cost".into(), Change::Added)
            ]
        );
    }

    #[test]
    fn a_hunk_inside_a_body_finds_its_function_in_the_base_file() {
        // no function start in the hunk: the base file above line 11 has it
        let diff = "--- a/fs/exec.c\n+++ b/fs/exec.c\n@@ -11,3 +11,4 @@ static int bprm_execve(\n \tretval = prepare_bprm_creds(bprm);\n+\tretval = 0;\n \tif (retval)\n \t\treturn retval;\n";
        assert_eq!(changed(diff), [("bprm_execve".into(), Change::Modified)]);
        // a line between two functions is in none
        let between = "--- a/fs/exec.c\n+++ b/fs/exec.c\n@@ -4,2 +4,3 @@\n }\n+int counter;\n \n";
        assert_eq!(changed(between), []);
    }

    #[test]
    fn syscalls_and_removed_functions() {
        let diff = [
            "--- a/kernel/sys.c",
            "+++ b/kernel/sys.c",
            "@@ -1,7 +1,4 @@",
            "-static void gone(void)",
            "-{",
            "-}",
            "-",
            " SYSCALL_DEFINE4(prlimit64, pid_t, pid, unsigned int, resource,",
            " \t\tconst struct rlimit64 __user *, new_rlim)",
            " {",
            "+\tread_lock(&tasklist_lock);",
        ]
        .join("\n");
        let diff = diff.as_str();
        let got = changed_functions(diff, false, &|_| None);
        let names: Vec<(&str, Change)> = got.iter().map(|c| (c.function.as_str(), c.change)).collect();
        assert_eq!(
            names,
            [("__do_sys_prlimit64", Change::Modified), ("gone", Change::Removed)]
        );
        // reverted (the base holds the patch): the revert adds `gone` back
        let got = changed_functions(diff, true, &|_| None);
        let names: Vec<(&str, Change)> = got.iter().map(|c| (c.function.as_str(), c.change)).collect();
        assert_eq!(
            names,
            [("__do_sys_prlimit64", Change::Modified), ("gone", Change::Added)]
        );
    }

    #[test]
    fn signatures_are_told_from_calls_and_declarations() {
        let table = [
            (["static int f(int a)", "{"], Some("f")),
            (["static inline struct page *alloc_x(gfp_t g)", "{"], Some("alloc_x")),
            (["int f(int a);", "{"], None),
            (["\tf(a)", "{"], None),
            (["#define F(x) (x)", "{"], None),
            (["int f(int a)", "int g;"], None),
        ];
        for (lines, want) in table {
            assert_eq!(start_at(&lines, 0).as_deref(), want, "{lines:?}");
        }
    }
}
