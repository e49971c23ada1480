//! End-to-end tests of the maintainer's two commands, `harness try` and
//! `harness bisect`, with real kernels and real QEMU guests, run the way a
//! maintainer runs them: from a directory outside the checkout, without
//! `--images-dir` (the benchmarks and the default matrix come from the
//! binary). They share `target/e2e-work` with `e2e.rs`, so kernels built
//! there are cache hits here.

use crate::common::{git, repo, scratch};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// The harness binary, run in `cwd` (outside the checkout) with no images directory.
fn harness(cwd: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_harness"));
    c.current_dir(cwd)
        .env("HARNESS_WORK_DIR", crate::common::e2e_work())
        .env("HARNESS_RUNS_DIR", cwd.join("runs"))
        .env_remove("HARNESS_IMAGES_DIR")
        .env("HARNESS_NO_PROGRESS", "1")
        .stdin(Stdio::null());
    c
}

fn show(out: &Output) -> (String, String) {
    let (o, e) = (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    );
    eprintln!("{e}\n{o}");
    (o, e)
}

/// The slow-exec fixture's patch: ~1% more instructions per exec.
fn slow_exec_patch() -> String {
    std::fs::read_to_string(
        repo().join("harness/tests/fixtures/series/slow-exec/0001-exec-a-fixed-cost-per-exec.patch"),
    )
    .unwrap()
}

/// `harness try` on a one-patch mbox (as `git format-patch --stdout` writes
/// it) that slows exec by ~1%, with the built-in matrix's `exact` profile
/// (instruction-counting clock, 2 vCPUs, 5 boots per arm, floor 0.5%):
/// regressed, and `--gate` exits 1.
#[test]
#[ignore = "~15 minutes on 2 cores: a kernel build and 10 icount boots (the e2e test icount_calls_a_one_percent_exec_regression covers the same rule in CI); run with --ignored"]
fn try_calls_a_one_patch_mbox_regressed() {
    let _g = crate::common::serial();
    let dir = scratch("try-mbox");
    std::fs::write(
        dir.join("slow.mbox"),
        format!(
            "From 0123456789abcdef0123456789abcdef01234567 Mon Sep 17 00:00:00 2001\n{}",
            slow_exec_patch()
        ),
    )
    .unwrap();
    let out = harness(&dir)
        .args(["try", "slow.mbox", "--profile", "exact", "--gate"])
        .output()
        .unwrap();
    let (stdout, stderr) = show(&out);
    assert_eq!(
        out.status.code(),
        Some(1),
        "--gate must fail on the regression\n{stderr}"
    );
    assert!(
        stderr.contains("gate: fails: ") && stderr.contains("static-doexec"),
        "{stderr}"
    );
    assert!(
        stdout.contains("regressed") && stdout.contains("series") && stdout.contains("clock: tcg-icount"),
        "{stdout}"
    );
    let runs: Vec<PathBuf> = std::fs::read_dir(dir.join("runs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(runs.len(), 1);
    let report: serde_json::Value = super::e2e::report_of(&runs[0]);
    let cell = report["rows"][0]["cells"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["variant"] == "series")
        .unwrap()
        .clone();
    assert_eq!(cell["decision"]["verdict"], "regressed", "{stdout}");
}

/// A comment-only patch at the top of a 6.12 source file (no change in behaviour).
fn comment_patch(n: u32, file: &str) -> String {
    format!(
        "From: Harness Tests <tests@harness.invalid>\nSubject: [PATCH {n}/3] {file}: a comment (test fixture)\n\n---\n\
         --- a/{file}\n+++ b/{file}\n@@ -1,3 +1,4 @@\n // SPDX-License-Identifier: GPL-2.0-only\n\
         +/* harness test fixture: a comment, no change in behaviour */\n /*\n  *  linux/{file}\n"
    )
}

/// `harness try --per-patch` on a three-patch format-patch directory whose
/// middle patch is the slow-exec fixture (the others add a comment), under
/// the instruction-counting clock at 2 vCPUs: the bisection of its prefixes
/// names patch 2, and only it. Three kernels besides base and ~30 icount
/// boots (two looks of 5 rounds, 3 boots a round): by hand,
/// `cargo test --test it try_per_patch -- --ignored --nocapture`.
#[test]
#[ignore = "~45 minutes on 2 cores: three incremental kernel builds and ~30 icount boots; run with --ignored"]
fn try_per_patch_names_the_middle_patch() {
    let _g = crate::common::serial();
    let dir = scratch("try-per-patch");
    let series = dir.join("series");
    std::fs::create_dir_all(&series).unwrap();
    let slow = slow_exec_patch().replacen("Subject: [PATCH]", "Subject: [PATCH 2/3]", 1);
    std::fs::write(
        series.join("0001-init-version-a-comment.patch"),
        comment_patch(1, "init/version.c"),
    )
    .unwrap();
    std::fs::write(series.join("0002-exec-a-fixed-cost-per-exec.patch"), slow).unwrap();
    std::fs::write(
        series.join("0003-exit-a-comment.patch"),
        comment_patch(3, "kernel/exit.c"),
    )
    .unwrap();
    let t = std::time::Instant::now();
    let out = harness(&dir)
        .args([
            "try",
            "series",
            "--per-patch",
            "--profile",
            "exact",
            "--bench",
            "static-doexec",
            "--vcpus",
            "2",
        ])
        .output()
        .unwrap();
    let (stdout, stderr) = show(&out);
    assert!(out.status.success(), "{stderr}");
    eprintln!("bisected the series in {:.0} s", t.elapsed().as_secs_f64());
    assert!(stdout.contains("rule: ") && stdout.contains("like "), "{stdout}");
    let named: Vec<&str> = stdout
        .lines()
        .filter(|l| l.starts_with("first bad commit: ") || l.starts_with("carries "))
        .collect();
    assert_eq!(named.len(), 1, "{stdout}");
    assert!(
        named[0].starts_with("first bad commit: patch 2/3: 0002-exec-a-fixed-cost-per-exec.patch"),
        "{stdout}"
    );
}

/// A series that does not apply is refused before anything is built, naming
/// the patch and the hunk.
#[test]
fn try_names_the_patch_and_hunk_that_do_not_apply() {
    let _g = crate::common::serial();
    let dir = scratch("try-conflict");
    std::fs::create_dir_all(dir.join("series")).unwrap();
    let p = slow_exec_patch().replace(
        " static int bprm_execve(struct linux_binprm *bprm)\n",
        " static int bprm_execve(struct linux_binprm *bprm, int x)\n",
    );
    std::fs::write(dir.join("series/0001-exec-does-not-apply.patch"), p).unwrap();
    let t = std::time::Instant::now();
    let out = harness(&dir)
        .args(["try", "series", "--profile", "exact"])
        .output()
        .unwrap();
    let (_, stderr) = show(&out);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("try: the series does not apply to /usr/src/linux-source-6.12.tar.xz: "),
        "{stderr}"
    );
    assert!(
        stderr.contains("0001-exec-does-not-apply.patch does not apply; fs/exec.c: hunk #1 failed"),
        "{stderr}"
    );
    assert!(!dir.join("runs").exists(), "nothing was run");
    eprintln!("refused in {:.1} s", t.elapsed().as_secs_f64());
}

/// A small git history made from the 6.12 tree: the tree as shipped, two
/// harmless commits, the slow-exec patch, one more harmless commit. Made once
/// under the test's temporary directory and reused.
fn history() -> (PathBuf, Vec<String>) {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("bisect-history");
    let git = |args: &[&str]| git(&dir, args);
    if !dir.join(".git/refs/tags/c4").exists() {
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let t = std::time::Instant::now();
        let tar = Command::new("tar")
            .args(["-xf", "/usr/src/linux-source-6.12.tar.xz", "--strip-components=1", "-C"])
            .arg(&dir)
            .status()
            .unwrap();
        assert!(tar.success());
        git(&["init", "-q"]);
        // Debian's tarball ignores its own top level (`/*` in .gitignore): add by force
        git(&["add", "-A", "-f"]);
        git(&["commit", "-qm", "linux 6.12 as shipped"]);
        git(&["tag", "good"]);
        eprintln!("history: the 6.12 tree committed in {:.0} s", t.elapsed().as_secs_f64());
        let note = |tag: &str, text: &str| {
            std::fs::write(dir.join("Documentation/harness-note.txt"), text).unwrap();
            git(&["add", "-f", "Documentation/harness-note.txt"]);
            git(&["commit", "-qm", &format!("docs: harness note {tag}")]);
            git(&["tag", tag]);
        };
        note("c1", "one\n");
        note("c2", "two\n");
        let p = repo().join("harness/tests/fixtures/series/slow-exec/0001-exec-a-fixed-cost-per-exec.patch");
        let ok = Command::new("patch")
            .args(["-p1", "-s", "-d"])
            .arg(&dir)
            .arg("-i")
            .arg(&p)
            .status()
            .unwrap();
        assert!(ok.success());
        git(&[
            "commit",
            "-qam",
            "exec: a fixed cost of ~4500 instructions per exec (test fixture)",
        ]);
        git(&["tag", "c3"]);
        note("c4", "four\n");
    }
    let ids = ["good", "c1", "c2", "c3", "c4"]
        .iter()
        .map(|t| git(&["rev-parse", t]))
        .collect();
    (dir, ids)
}

/// `harness bisect` between the shipped tree and a commit two after the
/// slow-exec patch, under the instruction-counting clock at 2 vCPUs, names
/// the slow-exec commit. About 20 icount boots and one full kernel build
/// plus three incremental ones: ~35 minutes on 2 cores, so by hand:
/// `cargo test --test it qemu::reproduce::bisect_names -- --ignored --nocapture`.
#[test]
#[ignore = "~35 minutes: a full kernel build and ~20 icount boots"]
fn bisect_names_the_slow_exec_commit() {
    let _g = crate::common::serial();
    crate::common::build_profiler();
    let (tree, ids) = history();
    let dir = scratch("bisect");
    let t = std::time::Instant::now();
    let out = harness(&dir)
        .args(["bisect", "--git"])
        .arg(&tree)
        .args([
            "--good",
            "good",
            "--bad",
            "c4",
            "--bench",
            "static-doexec",
            "--vcpus",
            "2",
            "--profile",
            "exact",
            "--max-rounds",
            "10",
        ])
        .output()
        .unwrap();
    let (stdout, stderr) = show(&out);
    assert!(out.status.success(), "{stderr}");
    let named = stdout
        .lines()
        .find(|l| l.starts_with("first bad commit: "))
        .unwrap_or_default();
    assert!(
        named.contains(&ids[3][..7]) && named.contains("exec: a fixed cost"),
        "{stdout}"
    );
    assert!(
        stdout.contains("like good") && stdout.contains("like bad") && stdout.contains("rule: "),
        "{stdout}"
    );
    // the evidence: the culprit's differential profile names the function it added
    let why = stdout.split_once("why: ").map(|(_, w)| w).unwrap_or_default();
    assert!(
        why.contains("against the good end") && why.contains("harness_exec_cost"),
        "{stdout}"
    );
    eprintln!("bisected in {:.0} s", t.elapsed().as_secs_f64());
    // a second look resumes from the state: nothing is measured again
    let bisect_dir = std::fs::read_dir(dir.join("runs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.join("state.json").is_file())
        .unwrap();
    let again = harness(&dir)
        .args(["bisect", "--resume"])
        .arg(&bisect_dir)
        .output()
        .unwrap();
    let (stdout2, _) = show(&again);
    assert!(
        stdout2.contains(&format!("first bad commit: {}", &ids[3][..7])),
        "{stdout2}"
    );
}

/// A merge-containing history from the same 6.12 tree: from `good`, main
/// gets m1 and m2 (notes), a topic branch gets t1 (a note) and t2 (the
/// slow-exec patch), the topic is merged into main, then a1 (a note). Made
/// once (a shared clone of [`history`]'s repository) and reused.
fn merge_history() -> (PathBuf, [String; 2]) {
    let (dir, id) = branched_history("bisect-merge-history", false);
    (dir, [id("t2"), id("merge")])
}

/// [`merge_history`]'s shape under `target/tmp/<name>`: with `main_culprit`,
/// m2 on the main line is a second culprit (a fixed cost per exec in
/// `alloc_bprm`, the same loop as the topic's in `bprm_execve`) instead of
/// a note. Returns the tree and a tag's commit id.
fn branched_history(name: &str, main_culprit: bool) -> (PathBuf, impl Fn(&str) -> String) {
    let (base, _) = history();
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let git = {
        let dir = dir.clone();
        move |args: &[&str]| git(&dir, args)
    };
    if !dir.join(".git/refs/tags/a1").exists() {
        let _ = std::fs::remove_dir_all(&dir);
        let ok = Command::new("git")
            .args(["clone", "-q", "--shared", "--branch", "good"])
            .arg(&base)
            .arg(&dir)
            .status()
            .unwrap();
        assert!(ok.success());
        git(&["checkout", "-q", "-b", "main"]);
        let note = |file: &str, tag: &str| {
            std::fs::write(dir.join(format!("Documentation/{file}")), format!("{tag}\n")).unwrap();
            git(&["add", "-f", &format!("Documentation/{file}")]);
            git(&["commit", "-qm", &format!("docs: harness note {tag}")]);
            git(&["tag", tag]);
        };
        git(&["branch", "topic"]);
        note("harness-main.txt", "m1");
        git(&["checkout", "-q", "topic"]);
        note("harness-topic.txt", "t1");
        let p = repo().join("harness/tests/fixtures/series/slow-exec/0001-exec-a-fixed-cost-per-exec.patch");
        let ok = Command::new("patch")
            .args(["-p1", "-s", "-d"])
            .arg(&dir)
            .arg("-i")
            .arg(&p)
            .status()
            .unwrap();
        assert!(ok.success());
        git(&[
            "commit",
            "-qam",
            "exec: a fixed cost per exec, on a topic branch (test fixture)",
        ]);
        git(&["tag", "t2"]);
        git(&["checkout", "-q", "main"]);
        if main_culprit {
            slow_alloc_bprm(&dir.join("fs/exec.c"));
            git(&[
                "commit",
                "-qam",
                "exec: a fixed cost per exec in alloc_bprm, on the main line (test fixture)",
            ]);
            git(&["tag", "m2"]);
        } else {
            note("harness-main.txt", "m2");
        }
        git(&["merge", "-q", "--no-ff", "-m", "Merge branch 'topic'", "topic"]);
        git(&["tag", "merge"]);
        note("harness-main.txt", "a1");
    }
    (dir, move |tag: &str| git(&["rev-parse", tag]))
}

/// Adds to 6.12's `fs/exec.c` the slow-exec fixture's loop (1500
/// iterations of `barrier()`, ~3000 instructions) as a function of its own
/// called at the start of `alloc_bprm`, once per exec: the same cost as
/// the topic's in `bprm_execve`, 300 lines away (the merge is clean).
fn slow_alloc_bprm(exec_c: &Path) {
    let head = "static struct linux_binprm *alloc_bprm(int fd, struct filename *filename, int flags)\n{\n";
    let decl = "\tstruct linux_binprm *bprm;\n\tstruct file *file;\n\tint retval = -ENOMEM;\n\n";
    let src = std::fs::read_to_string(exec_c).unwrap();
    assert_eq!(
        src.matches(&format!("{head}{decl}")).count(),
        1,
        "alloc_bprm as in 6.12"
    );
    let cost = "/* harness test fixture: a fixed number of instructions on every exec, in alloc_bprm */\n\
                static noinline void harness_alloc_cost(void)\n{\n\tunsigned int i;\n\n\
                \tfor (i = 0; i < 1500; i++)\n\t\tbarrier();\n}\n\n";
    let out = src.replacen(
        &format!("{head}{decl}"),
        &format!("{cost}{head}{decl}\tharness_alloc_cost();\n"),
        1,
    );
    std::fs::write(exec_c, out).unwrap();
}

/// `harness bisect` (under `dir`) of `tree`'s good..a1: static doexec at
/// 2 vCPUs, `--profile exact` (icount), at most 10 rounds.
fn bisect_good_to_a1(dir: &Path, tree: &Path) -> Output {
    harness(dir)
        .args(["bisect", "--git"])
        .arg(tree)
        .args([
            "--good",
            "good",
            "--bad",
            "a1",
            "--bench",
            "static-doexec",
            "--vcpus",
            "2",
            "--profile",
            "exact",
            "--max-rounds",
            "10",
        ])
        .output()
        .unwrap()
}

/// `harness bisect` over [`merge_history`] (good..a1: m1, m2, t1, t2, the
/// merge, a1), icount at 2 vCPUs: names t2 on the topic branch, not the
/// merge. Incremental kernel builds and ~45 icount boots (3 per round):
/// `cargo test --test it qemu::reproduce::bisect_over_a_merge -- --ignored --nocapture`.
#[test]
#[ignore = "~60 minutes: incremental kernel builds and ~45 icount boots"]
fn bisect_over_a_merge_names_the_branch_commit() {
    let _g = crate::common::serial();
    let (tree, [t2, merge]) = merge_history();
    let dir = scratch("bisect-merge");
    let t = std::time::Instant::now();
    let out = bisect_good_to_a1(&dir, &tree);
    let (stdout, stderr) = show(&out);
    assert!(out.status.success(), "{stderr}");
    eprintln!("bisected the merge history in {:.0} s", t.elapsed().as_secs_f64());
    let named = stdout
        .lines()
        .find(|l| l.starts_with("first bad commit: "))
        .unwrap_or_default();
    assert!(
        named.contains(&t2[..7]) && named.contains("on a topic branch"),
        "{stdout}"
    );
    assert!(!named.contains(&merge[..7]), "{stdout}");
}

/// Two culprits of the same size on two branches (issue 29): over
/// [`branched_history`] with `main_culprit` (good..a1: m1, m2 the
/// `alloc_bprm` cost on the main line, t1, t2 the `bprm_execve` cost on the
/// topic branch, the merge, a1), icount at 2 vCPUs, `bisect` names m2 and
/// t2, each with about half of the change, and never the merge; the path
/// through the graph is printed (the merge's branch opened, t2 "inside the
/// branch merged by" it; `via` in `--json`); exit 0. Incremental kernel
/// builds and ~60 icount boots (3 per round):
/// `cargo test --test it qemu::reproduce::bisect_names_two_culprits -- --ignored --nocapture`.
#[test]
#[ignore = "~45 minutes: incremental kernel builds and ~60 icount boots"]
fn bisect_names_two_culprits_on_two_branches_never_the_merge() {
    let _g = crate::common::serial();
    let (tree, id) = branched_history("bisect-two-culprits-history", true);
    let (m2, t2, merge) = (id("m2"), id("t2"), id("merge"));
    let dir = scratch("bisect-two-culprits");
    let t = std::time::Instant::now();
    let out = bisect_good_to_a1(&dir, &tree);
    let (stdout, stderr) = show(&out);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    eprintln!("bisected the two-culprit history in {:.0} s", t.elapsed().as_secs_f64());
    let named: Vec<&str> = stdout.lines().filter(|l| l.starts_with("carries ")).collect();
    assert_eq!(named.len(), 2, "{stdout}");
    assert!(!stdout.lines().any(|l| l.starts_with("first bad commit: ")), "{stdout}");
    let main = named
        .iter()
        .find(|l| l.contains(&m2[..7]) && l.contains("in alloc_bprm"));
    let topic = named
        .iter()
        .find(|l| l.contains(&t2[..7]) && l.contains("on a topic branch"));
    assert!(main.is_some() && topic.is_some(), "{stdout}");
    assert!(!named.iter().any(|l| l.contains(&merge[..7])), "{stdout}");
    // the path: the merge's branch was opened, and t2 was found inside it
    assert!(
        stdout.contains(&format!("merge {} carries ", &merge[..12]))
            && stdout.contains("(merge base..second parent) is bisected"),
        "{stdout}"
    );
    let via = format!("  (inside the branch merged by {merge})");
    let at = stdout
        .lines()
        .position(|l| l == via)
        .unwrap_or_else(|| panic!("{stdout}"));
    assert!(
        stdout.lines().nth(at - 1).unwrap().contains(&t2[..7]),
        "under t2's line: {stdout}"
    );
    // --json of the same bisection (resumed: nothing is measured again)
    let bisect_dir = std::fs::read_dir(dir.join("runs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.join("state.json").is_file())
        .unwrap();
    let entries = |d: &Path| std::fs::read_dir(d).unwrap().count();
    let before = entries(&bisect_dir);
    let again = harness(&dir)
        .args(["--json", "bisect", "--resume"])
        .arg(&bisect_dir)
        .output()
        .unwrap();
    let (json, stderr2) = show(&again);
    assert_eq!(again.status.code(), Some(0), "{stderr2}");
    assert_eq!(entries(&bisect_dir), before, "nothing measured again: {stderr2}");
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert!(v["first_bad"].is_null(), "{v}");
    assert!(v["open"].as_array().unwrap().is_empty(), "{v}");
    let culprits = v["culprits"].as_array().unwrap();
    let of = |c: &str| {
        culprits
            .iter()
            .find(|x| x["commit"] == c)
            .unwrap_or_else(|| panic!("{c}: {v}"))
    };
    assert_eq!(culprits.len(), 2, "{v}");
    assert_eq!(of(&m2)["via"], serde_json::json!([]), "{v}");
    assert_eq!(of(&t2)["via"], serde_json::json!([merge]), "{v}");
    for c in [&m2, &t2] {
        let share = of(c)["share"].as_f64().unwrap();
        assert!((0.3..=0.7).contains(&share), "about half each: {v}");
    }
}
