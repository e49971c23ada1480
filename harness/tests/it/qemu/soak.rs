//! Issue 22's soak test, strengthened by issue 30: a small two-variant
//! icount run interrupted at a random point, again and again, each time
//! followed by `--resume` (itself interrupted now and then). It checks what
//! a nightly user relies on after any crash: the run's own records hold
//! exactly one `boot_end` per planned boot, no process of the run (its
//! process group, make and sub-makes, cc1, ld, patch, tar, QEMU) outlives
//! the harness, and the shared tree is a fresh extraction of the source
//! plus only files the kernel's .gitignore ignores. The cycle's patch
//! edits, creates and deletes a file; the second cycle removes the tree's Makefile
//! after its interrupt, so the resume must extract the tree afresh.
//!
//! `cargo test --test it qemu::soak -- --ignored --nocapture`; the cycle
//! count is `HARNESS_SOAK_CYCLES` (20), the seed `HARNESS_SOAK_SEED` (the
//! clock; printed, so a failing sequence can be replayed).

use super::e2e::{
    bzimage_make, events, harness, kernel_yaml, only_run_dir, process_groups, qemus_of, within, work_dir,
};
use super::soak_checks::{assert_none_left, assert_planned_boots, assert_tree_pristine, shared_tree, SOURCE};
use crate::common::scratch;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

/// A file of the source the build never reads, which the soak patch deletes.
const DELETED: &str = "Documentation/admin-guide/features.rst";

/// What the tree log says when the tree is extracted afresh because its
/// Makefile is gone.
const FALLBACK: &str = "has no top-level Makefile: moving it aside";

/// Where in the run the harness is interrupted.
#[derive(Clone, Copy, Debug)]
enum Point {
    /// While `make -j` has jobs.
    Build,
    /// While a guest boots (QEMU up, no login yet).
    Boot,
    /// While a guest measures (after its login).
    Benchmark,
    /// Any moment of the run's first 90 s (a patch, a config, a build, a boot, or after the end).
    Anytime,
}

/// xorshift64*: enough to pick points, delays and signals reproducibly.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) % n
    }
}

/// The cycle's matrix: base and `soak`, whose one patch adds a comment
/// naming the cycle to init/version.c, creates a file naming the cycle and
/// deletes [`DELETED`], so every cycle builds a new kernel (and rolls the
/// shared tree back); icount at 2 vCPUs, 2 boots a variant.
fn soak_matrix(dir: &Path, cycle: u32, deleted: &str) -> PathBuf {
    let series = dir.join("series/soak");
    std::fs::create_dir_all(&series).unwrap();
    std::fs::write(series.join("series"), "0001-soak.patch\n").unwrap();
    let gone: String = deleted.lines().map(|l| format!("-{l}\n")).collect();
    let patch = format!(
        "From: Harness Tests <tests@harness.invalid>\nSubject: [PATCH] init/version.c: soak cycle {cycle} (test fixture)\n\n---\n\
         --- a/init/version.c\n+++ b/init/version.c\n@@ -1,3 +1,4 @@\n // SPDX-License-Identifier: GPL-2.0-only\n\
         +/* harness soak test, cycle {cycle}: a comment, no change in behaviour */\n /*\n  *  linux/init/version.c\n\
         --- /dev/null\n+++ b/Documentation/harness-soak-{cycle}.txt\n@@ -0,0 +1 @@\n+soak cycle {cycle}\n\
         --- a/{DELETED}\n+++ /dev/null\n@@ -1,{n} +0,0 @@\n{gone}",
        n = deleted.lines().count()
    );
    std::fs::write(series.join("0001-soak.patch"), patch).unwrap();
    let matrix = dir.join(format!("matrix-{cycle}.yaml"));
    let yaml = format!(
        "{}variants:\n  - name: base\n  - {{name: soak, apply: [soak]}}\nguest: {{memory_mib: 1024, clock: icount}}\nvcpus: [2]\n\
         benchmarks:\n  - {{name: static-doexec, kind: doexec, duration_s: 1, warmup_s: 0, timeout_s: 120}}\n\
         sampling: {{boots: 2, repetitions: 1, warmup_repetitions: 0}}\n",
        kernel_yaml(&dir.join("series"))
    );
    std::fs::write(&matrix, yaml).unwrap();
    matrix
}

/// Whether `make -j` has jobs of its own (its process group holds three).
fn make_has_jobs() -> bool {
    let tree = work_dir().join("tree").to_string_lossy().into_owned();
    let groups = process_groups();
    bzimage_make(&groups, &tree).is_some_and(|make| groups.iter().filter(|g| g.1 == make).count() >= 3)
}

/// Waits until the run reaches `point` (or ends), then a random moment
/// more. Returns the run directory and whether the point was reached.
fn reach(child: &mut Child, runs: &Path, point: Point, rng: &mut Rng) -> (PathBuf, bool) {
    let mut run = None;
    let started = within(Duration::from_secs(600), || {
        run = std::fs::read_dir(runs).ok().and_then(|rd| {
            rd.flatten()
                .map(|e| e.path())
                .find(|p| p.join("events.jsonl").is_file())
        });
        run.is_some()
    });
    assert!(started, "no run directory within 10 minutes");
    let run = run.unwrap();
    let ended = |c: &mut Child| c.try_wait().unwrap().is_some();
    let reached = within(Duration::from_secs(1800), || {
        ended(child)
            || match point {
                Point::Build => make_has_jobs(),
                Point::Boot => !qemus_of(&run).is_empty(),
                Point::Benchmark => {
                    !qemus_of(&run).is_empty() && events(&run, "boot").len() > events(&run, "boot_end").len()
                }
                Point::Anytime => true,
            }
    });
    assert!(reached, "{point:?} not reached within 30 minutes");
    let extra_ms = match point {
        Point::Build => rng.below(8000),
        Point::Boot => rng.below(1500),
        Point::Benchmark => rng.below(4000),
        Point::Anytime => rng.below(90_000),
    };
    std::thread::sleep(Duration::from_millis(extra_ms));
    (run, !ended(child))
}

/// How a cycle's signals are sent and what they found.
#[derive(Default)]
struct Tally {
    signals: Vec<(i32, bool)>,
    interrupted_resumes: u32,
    ended_before_signal: u32,
    fallbacks: usize,
    doubts: usize,
    boot_records: usize,
}

/// Sends `sig` to the harness (`group`: to its whole process group, as a
/// terminal's Ctrl-C does; the harness leads a group of its own) and checks
/// that it ends as it should (130, or killed; 0 if the run had ended) and
/// that within 5 s no process of the run is left.
fn interrupt(child: &mut Child, run: &Path, sig: i32, group: bool, live: bool) {
    let pid = child.id() as i32;
    unsafe {
        libc::kill(if group { -pid } else { pid }, sig);
    }
    let code = child.wait().unwrap().code();
    let expected = if !live {
        Some(0)
    } else if sig == libc::SIGKILL {
        None
    } else {
        Some(130)
    };
    assert_eq!(code, expected, "signal {sig} (group {group})");
    assert_none_left(pid, run, &format!("the harness (signal {sig}, group {group})"));
}

/// Starts `harness run ARGS` in a process group of its own.
fn start(runs: &Path, args: &[&std::ffi::OsStr]) -> Child {
    let mut c = harness(runs);
    c.args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .unwrap()
}

/// Draws a point, a signal and its target, interrupts `child` there.
/// Gives a line for the log.
fn strike(child: &mut Child, runs: &Path, rng: &mut Rng, force: Option<Point>, t: &mut Tally) -> (PathBuf, String) {
    let drawn = [Point::Build, Point::Boot, Point::Benchmark, Point::Anytime][rng.below(4) as usize];
    let point = force.unwrap_or(drawn);
    let sig = [libc::SIGINT, libc::SIGKILL, libc::SIGHUP][rng.below(3) as usize];
    let group = rng.below(2) == 0;
    let started = Instant::now();
    let (run, live) = reach(child, runs, point, rng);
    let at = started.elapsed().as_secs_f64();
    interrupt(child, &run, sig, group, live);
    t.signals.push((sig, group));
    t.ended_before_signal += u32::from(!live);
    let to = if group { "group" } else { "pid" };
    let ended = if live { "" } else { " (it had ended)" };
    (run, format!("{point:?} signal {sig} to {to} at {at:.0} s{ended}"))
}

/// One cycle: a run interrupted, perhaps its resume interrupted too, then
/// a resume to the end and the checks. In the `fallback` cycle the point is
/// a build and the tree's Makefile is removed after the interrupt.
fn cycle(dir: &Path, cycle: u32, deleted: &str, fallback: bool, rng: &mut Rng, t: &mut Tally) {
    let matrix = soak_matrix(dir, cycle, deleted);
    let runs = dir.join(format!("runs-{cycle}"));
    let mut child = start(&runs, &["run".as_ref(), matrix.as_os_str()]);
    let force = fallback.then_some(Point::Build);
    let (run, mut said) = strike(&mut child, &runs, rng, force, t);
    if fallback {
        std::fs::remove_file(shared_tree().join("Makefile")).unwrap();
        said += ", Makefile removed";
    }
    let resume = ["run".as_ref(), "--resume".as_ref(), run.as_os_str()];
    if rng.below(3) == 0 {
        let mut child = start(&runs, &resume);
        let (_, again) = strike(&mut child, &runs, rng, None, t);
        t.interrupted_resumes += 1;
        said += &format!("; resume: {again}");
    }
    let resumed = Instant::now();
    let mut child = start(&runs, &resume);
    let st = child.wait().unwrap();
    assert!(st.success(), "harness run --resume {}: {st}", run.display());
    assert_eq!(only_run_dir(&runs), run);
    assert_none_left(child.id() as i32, &run, "the resumed run");
    t.boot_records += assert_planned_boots(&run);
    let log = std::fs::read_to_string(run.join("logs/tree.log")).unwrap_or_default();
    let (fell, doubt) = (log.matches(FALLBACK).count(), log.matches("is in doubt").count());
    if fallback {
        assert!(
            fell > 0,
            "the tree without its Makefile was not extracted afresh:\n{log}"
        );
    }
    t.fallbacks += fell;
    t.doubts += doubt;
    eprintln!(
        "soak cycle {cycle}: {said}; resumed in {:.0} s, extracted afresh {fell} time(s), in doubt {doubt} time(s)",
        resumed.elapsed().as_secs_f64()
    );
}

/// The content of [`DELETED`] in the source tarball.
fn deleted_file() -> String {
    let out = std::process::Command::new("tar")
        .args(["-xOf", SOURCE, "--wildcards"])
        .arg(format!("*/{DELETED}"))
        .output()
        .unwrap();
    assert!(
        out.status.success() && !out.stdout.is_empty(),
        "read {DELETED} from {SOURCE}"
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
#[ignore = "the soak: 20 interrupted and resumed two-variant icount runs, ~1 hour on 2 cores; run with --ignored"]
fn interrupted_runs_resume_to_their_planned_boots_and_a_pristine_tree() {
    let _g = crate::common::serial();
    let dir = scratch("soak");
    let cycles: u32 = std::env::var("HARNESS_SOAK_CYCLES")
        .ok()
        .map_or(20, |s| s.parse().unwrap());
    let seed = std::env::var("HARNESS_SOAK_SEED").ok().map_or_else(
        || std::time::UNIX_EPOCH.elapsed().unwrap().as_nanos() as u64,
        |s| s.parse().unwrap(),
    );
    eprintln!("soak: {cycles} cycles, seed {seed}");
    let mut rng = Rng(seed | 1);
    let deleted = deleted_file();
    let mut t = Tally::default();
    let started = Instant::now();
    for c in 0..cycles {
        cycle(&dir, c, &deleted, c == 1.min(cycles - 1), &mut rng, &mut t);
    }
    let extra = assert_tree_pristine(&dir);
    let by = |sig: i32| t.signals.iter().filter(|s| s.0 == sig).count();
    eprintln!(
        "soak: {cycles} cycles in {:.0} s; {} signals (SIGINT {}, SIGHUP {}, SIGKILL {}; {} to the group), \
         {} to a run that had ended; {} resumes interrupted; {} boot records for {} planned boots; \
         extracted afresh {} time(s) (Makefile gone), {} time(s) in doubt; tree: no file differs or is missing, \
         {extra} extra files, all ignored by the kernel's .gitignore",
        started.elapsed().as_secs_f64(),
        t.signals.len(),
        by(libc::SIGINT),
        by(libc::SIGHUP),
        by(libc::SIGKILL),
        t.signals.iter().filter(|s| s.1).count(),
        t.ended_before_signal,
        t.interrupted_resumes,
        t.boot_records,
        4 * cycles,
        t.fallbacks,
        t.doubts,
    );
}
