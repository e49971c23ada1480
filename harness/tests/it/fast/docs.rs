//! The product's documentation stands on its own and agrees with the binary:
//! every relative link resolves to a file inside the repository (and its
//! anchor to a heading), no link leaves the repository, and the command
//! reference names exactly the commands and options `--help` prints.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .canonicalize()
        .unwrap()
}

/// The documents checked: the top-level ones and every Markdown file under `docs/`.
fn documents() -> Vec<PathBuf> {
    let repo = repo();
    let mut docs: Vec<PathBuf> = ["README.md", "ARCHITECTURE.md", "patches/README.md"]
        .iter()
        .map(|d| repo.join(d))
        .filter(|p| p.is_file())
        .collect();
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
    let file = if path.is_empty() {
        doc.to_path_buf()
    } else {
        doc.parent().unwrap().join(path)
    };
    let file = file.canonicalize().map_err(|_| format!("{path}: no such file"))?;
    if !file.starts_with(repo) {
        return Err(format!("{path}: outside the repository"));
    }
    if !anchor.is_empty() && (file.extension().is_none_or(|e| e != "md") || !anchors(&read(&file)).contains(anchor)) {
        return Err(format!(
            "#{anchor}: no such heading in {}",
            file.strip_prefix(repo).unwrap().display()
        ));
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

/// `harness ARGS --help`.
fn help(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_harness"))
        .args(args)
        .arg("--help")
        .output()
        .unwrap();
    assert!(out.status.success(), "harness {} --help: {out:?}", args.join(" "));
    String::from_utf8(out.stdout).unwrap()
}

/// The lines of a clap help section (`Commands:`, `Options:`), up to the next blank line.
fn help_section<'a>(help: &'a str, title: &str) -> Vec<&'a str> {
    help.lines()
        .skip_while(|l| *l != title)
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .collect()
}

/// The subcommands a help lists, `help` left out.
fn subcommands(help: &str) -> Vec<String> {
    help_section(help, "Commands:")
        .iter()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .map(String::from)
        .collect()
}

/// The long options a help lists (`--work-dir`, …).
fn long_options(help: &str) -> BTreeSet<String> {
    help_section(help, "Options:")
        .iter()
        .filter(|l| l.trim_start().starts_with('-'))
        .filter_map(|l| l.split_whitespace().find(|t| t.starts_with("--")))
        .map(|t| t.trim_end_matches(',').to_string())
        .collect()
}

/// Every command, nested ones too (`history import`), as its words.
fn commands(prefix: &[String], out: &mut Vec<Vec<String>>) {
    let args: Vec<&str> = prefix.iter().map(String::as_str).collect();
    for sub in subcommands(&help(&args)) {
        let mut cmd = prefix.to_vec();
        cmd.push(sub);
        out.push(cmd.clone());
        commands(&cmd, out);
    }
}

/// The long options a text names: `--` then a lowercase letter, not inside a longer run of dashes or a word.
fn named_options(text: &str) -> BTreeSet<String> {
    let b = text.as_bytes();
    let mut out = BTreeSet::new();
    let mut i = 0;
    while i + 2 < b.len() {
        let starts = b[i] == b'-' && b[i + 1] == b'-' && b[i + 2].is_ascii_lowercase();
        if starts && (i == 0 || !(b[i - 1] == b'-' || b[i - 1].is_ascii_alphanumeric())) {
            let mut j = i + 2;
            while j < b.len() && (b[j].is_ascii_lowercase() || b[j].is_ascii_digit() || b[j] == b'-') {
                j += 1;
            }
            out.insert(text[i..j].trim_end_matches('-').to_string());
            i = j;
        } else {
            i += 1;
        }
    }
    out
}

/// A Markdown file's `## ` sections by heading (text before the first under "").
fn sections(text: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut heading = String::new();
    let mut body = String::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        }
        if let Some(h) = line.strip_prefix("## ").filter(|_| !fenced) {
            out.insert(
                std::mem::replace(&mut heading, h.trim().to_string()),
                std::mem::take(&mut body),
            );
        } else {
            body.push_str(line);
            body.push('\n');
        }
    }
    out.insert(heading, body);
    out
}

fn differences(what: &str, want: &BTreeSet<String>, have: &BTreeSet<String>, bad: &mut Vec<String>) {
    for w in want.difference(have) {
        bad.push(format!("{what}: {w} is missing"));
    }
    for h in have.difference(want) {
        bad.push(format!("{what}: {h} does not exist"));
    }
}

#[test]
fn the_docs_name_the_commands_and_options_help_prints() {
    let repo = repo();
    let globals = long_options(&help(&[]));
    assert!(
        globals.contains("--work-dir") && globals.contains("--json"),
        "no global options in harness --help: {globals:?}"
    );
    let mut cmds = Vec::new();
    commands(&[], &mut cmds);
    let names: BTreeSet<String> = cmds.iter().map(|c| c.join(" ")).collect();
    assert!(
        names.contains("run") && names.contains("history import"),
        "commands from harness --help: {names:?}"
    );
    let mut bad = Vec::new();

    // the README's command table: a row per command, naming only options the command has
    let readme = read(&repo.join("README.md"));
    let table = sections(&readme)
        .remove("Commands")
        .expect("README.md has no `## Commands` section");
    let mut rows = BTreeMap::new();
    for line in table.lines().filter(|l| l.starts_with('|')) {
        let cell = line.split('|').nth(1).unwrap_or("");
        let Some(cmd) = cell.split('`').nth(1).and_then(|c| c.strip_prefix("harness ")) else {
            continue;
        };
        rows.insert(cmd.to_string(), line.to_string());
    }
    differences(
        "README.md command table",
        &names,
        &rows.keys().cloned().collect(),
        &mut bad,
    );
    for (cmd, row) in &rows {
        if !names.contains(cmd) {
            continue;
        }
        let args: Vec<&str> = cmd.split(' ').collect();
        for o in named_options(row).difference(&long_options(&help(&args))) {
            bad.push(format!("README.md command table, harness {cmd}: {o} does not exist"));
        }
    }

    // docs/commands.md: a `## harness <command>` section per command, naming
    // every option of its --help and no other; the globals once, in "Global options"
    let reference = sections(&read(&repo.join("docs/commands.md")));
    let documented: BTreeSet<String> = reference
        .keys()
        .filter_map(|h| h.strip_prefix("harness "))
        .map(String::from)
        .collect();
    differences(
        "docs/commands.md `## harness <command>` sections",
        &names,
        &documented,
        &mut bad,
    );
    let mut every = globals.clone();
    for cmd in &cmds {
        let name = cmd.join(" ");
        let args: Vec<&str> = cmd.iter().map(String::as_str).collect();
        let all = long_options(&help(&args));
        every.extend(all.iter().cloned());
        let Some(section) = reference.get(&format!("harness {name}")) else {
            continue;
        };
        let own: BTreeSet<String> = all.difference(&globals).cloned().collect();
        let named = named_options(section);
        for o in own.difference(&named) {
            bad.push(format!(
                "docs/commands.md, harness {name}: {o} (in its --help) is not documented"
            ));
        }
        for o in named.difference(&all) {
            bad.push(format!(
                "docs/commands.md, harness {name}: {o} is not an option of harness {name}"
            ));
        }
    }
    match reference.get("Global options") {
        None => bad.push("docs/commands.md has no `## Global options` section".into()),
        Some(section) => differences(
            "docs/commands.md, Global options (harness --help)",
            &globals,
            &named_options(section),
            &mut bad,
        ),
    }
    for (heading, text) in &reference {
        if heading.starts_with("harness ") || heading == "Global options" {
            continue;
        }
        for o in named_options(text).difference(&every) {
            bad.push(format!(
                "docs/commands.md, {heading:?}: {o} is not an option of any command"
            ));
        }
    }
    assert!(bad.is_empty(), "the docs and --help disagree:\n{}", bad.join("\n"));
}

/// Every exit code `harness --help` lists is in the README's exit-code
/// table, and the table lists no other.
#[test]
fn the_readme_lists_every_exit_code() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_harness"))
        .arg("--help")
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&out.stdout).into_owned();
    let section = help
        .split("Exit codes:")
        .nth(1)
        .expect("harness --help has an exit-code section");
    let mut from_help: Vec<u32> = section
        .lines()
        .filter_map(|l| l.split_whitespace().next()?.parse().ok())
        .collect();
    from_help.dedup();
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    let table = readme
        .split("## Exit codes")
        .nth(1)
        .expect("the README has an Exit codes section");
    let from_readme: Vec<u32> = table
        .lines()
        .take_while(|l| !l.starts_with("## "))
        .filter_map(|l| l.strip_prefix("| `")?.split('`').next()?.parse().ok())
        .collect();
    assert_eq!(
        from_readme, from_help,
        "README.md's exit codes against harness --help's"
    );
}

/// Issue 22 item 12: the README says plainly that `try` runs a series'
/// build as the user, and the guide says how to run it in a throwaway
/// account or container.
#[test]
fn the_docs_say_try_builds_a_series_as_the_user() {
    let repo = repo();
    let readme = read(&repo.join("README.md"));
    assert!(
        readme.contains("as the user who runs it")
            && readme.contains("docs/reproduce.md#a-series-from-a-mailing-list-runs-as-you"),
        "README.md"
    );
    let guide = read(&repo.join("docs/reproduce.md"));
    assert!(
        guide.contains("## A series from a mailing list runs as you"),
        "docs/reproduce.md"
    );
    assert!(
        guide.contains("useradd") && guide.contains("docker run --rm"),
        "a throwaway account and a container, step by step"
    );
}
