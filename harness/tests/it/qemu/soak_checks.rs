//! What the soak checks after an interrupt and after a resume: processes
//! left behind (a /proc scan), the boots recorded against the plan, and the
//! shared tree against a fresh extraction and the kernel's own .gitignore.

use super::e2e::{cmdline, jsonl, proc_stats, within, work_dir};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

pub(super) const SOURCE: &str = "/usr/src/linux-source-6.12.tar.xz";

/// A process of /proc: pid, process group, state, name, cmdline, cwd.
struct Proc {
    pid: i32,
    pgrp: i32,
    state: String,
    comm: String,
    cmd: String,
    cwd: String,
}

fn procs() -> Vec<Proc> {
    proc_stats()
        .into_iter()
        .filter(|(_, state, _)| state != "Z" && state != "X")
        .map(|(pid, state, pgrp)| Proc {
            pid,
            pgrp,
            state,
            // the name stays readable while a process exits; cmdline and cwd do not
            comm: std::fs::read_to_string(format!("/proc/{pid}/comm"))
                .map(|s| s.trim().to_string())
                .unwrap_or_default(),
            cmd: cmdline(pid),
            cwd: std::fs::read_link(format!("/proc/{pid}/cwd"))
                .map(|p| p.to_string_lossy().into_owned())
                .unwrap_or_default(),
        })
        .collect()
}

/// Every live process that belongs to the harness run: in the harness's
/// process group, or with its cmdline or cwd under the work directory or
/// the run directory (make and its sub-makes, cc1, as, ld, patch, tar, xz,
/// QEMU). Each as "pid [name] state: cmdline (cwd ...)".
pub(super) fn leftovers(pgid: i32, run: &Path) -> Vec<String> {
    let me = std::process::id() as i32;
    let roots = [
        work_dir().to_string_lossy().into_owned(),
        run.to_string_lossy().into_owned(),
    ];
    let under = |s: &str| roots.iter().any(|r| s.contains(r.as_str()));
    procs()
        .into_iter()
        .filter(|p| p.pid != me && (p.pgrp == pgid || under(&p.cmd) || under(&p.cwd)))
        .map(|p| format!("{} [{}] {}: {} (cwd {})", p.pid, p.comm, p.state, p.cmd, p.cwd))
        .collect()
}

/// Waits up to 5 s for [`leftovers`] to be none, and fails naming them and
/// `after` (what the harness went through) otherwise. The wait: the
/// harness's watchdog (forked at its start, so in its group) exits on the
/// EOF of the harness's own exit, a moment after the harness is reaped; it
/// was once caught exiting (cycle 10 of seed 20261204, 2026-12-05).
pub(super) fn assert_none_left(pgid: i32, run: &Path, after: &str) {
    assert!(
        within(Duration::from_secs(5), || leftovers(pgid, run).is_empty()),
        "processes of the run outlived {after}:\n{}",
        leftovers(pgid, run).join("\n")
    );
}

/// The boots the soak matrix plans: each variant at 2 vCPUs, boots 0 and 1.
fn planned() -> BTreeSet<(String, u64, u64)> {
    ["base", "soak"]
        .iter()
        .flat_map(|v| (0..2).map(move |b| (v.to_string(), 2, b)))
        .collect()
}

/// The run's own records hold exactly one `boot_end` per planned boot,
/// none failed, each with a boot id whose `boot` record was measured and
/// which has exactly one sample of each metric; no record file ends in a torn line. Also
/// the report's cells agree. Gives the number of `boot` records (attempts
/// the interrupts cut short included).
pub(super) fn assert_planned_boots(run: &Path) -> usize {
    let events = jsonl(&run.join("events.jsonl"));
    let samples = jsonl(&run.join("samples.jsonl"));
    let mut ends: BTreeMap<(String, u64, u64), Vec<&Value>> = BTreeMap::new();
    for e in events.iter().filter(|e| e["event"] == "boot_end") {
        let key = (
            e["variant"].as_str().unwrap_or("?").to_string(),
            e["vcpus"].as_u64().unwrap_or(0),
            e["boot"].as_u64().unwrap_or(u64::MAX),
        );
        ends.entry(key).or_default().push(e);
    }
    let keys: BTreeSet<_> = ends.keys().cloned().collect();
    assert_eq!(
        keys,
        planned(),
        "boot_end records of {} against the plan",
        run.display()
    );
    for (key, es) in &ends {
        assert_eq!(
            es.len(),
            1,
            "{key:?} ended {} times in {}: {es:?}",
            es.len(),
            run.display()
        );
        let e = es[0];
        assert!(e["error"].is_null() && e["failed"].is_null(), "{key:?} failed: {e}");
        let id = e["boot_id"]
            .as_str()
            .unwrap_or_else(|| panic!("{key:?} has no boot id: {e}"));
        // one repetition: one sample of each metric (a profiled boot adds
        // its instruction metrics beside the rate)
        let mut per_metric: BTreeMap<&str, usize> = BTreeMap::new();
        for x in samples.iter().filter(|x| x["boot_id"] == id) {
            *per_metric.entry(x["metric"].as_str().unwrap_or("?")).or_default() += 1;
        }
        assert_eq!(
            per_metric.get("execs_per_s"),
            Some(&1),
            "{key:?} (boot {id}): {per_metric:?}"
        );
        assert!(
            per_metric.values().all(|&n| n == 1),
            "{key:?} (boot {id}) has a metric sampled more than once, 1 planned: {per_metric:?}"
        );
    }
    assert_report_cells(run);
    events.iter().filter(|e| e["event"] == "boot").count()
}

/// The report's cells (two a row): n 2, boots ended 2, failed 0, one repetition each.
fn assert_report_cells(run: &Path) {
    let report: Value = super::e2e::report_of(run);
    let rows = report["rows"].as_array().unwrap();
    // the rate's row, and a profiled run's instruction rows: two cells each
    assert!(rows.iter().any(|r| r["metric"] == "execs_per_s"), "{report}");
    assert!(
        rows.iter().all(|r| r["cells"].as_array().unwrap().len() == 2),
        "{report}"
    );
    let cells: Vec<&Value> = rows.iter().flat_map(|r| r["cells"].as_array().unwrap()).collect();
    for c in cells {
        let shape = (
            c["n"].as_u64(),
            c["boots_ended"].as_u64(),
            c["boots_failed"].as_u64(),
            c["reps_per_boot"].clone(),
        );
        assert_eq!(
            shape,
            (Some(2), Some(2), Some(0), serde_json::json!([1, 1])),
            "cell {} of {}",
            c["variant"],
            run.display()
        );
    }
}

/// The one tarball tree under the work directory.
pub(super) fn shared_tree() -> PathBuf {
    let trees: Vec<PathBuf> = std::fs::read_dir(work_dir().join("tree"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            p.is_dir() && !name.starts_with("git-") && !name.contains('.')
        })
        .collect();
    assert_eq!(trees.len(), 1, "{trees:?}");
    trees[0].clone()
}

/// Every file and symlink below `root`, relative to it.
fn files(root: &Path, rel: &Path, out: &mut BTreeSet<PathBuf>) {
    for e in std::fs::read_dir(root.join(rel)).unwrap().flatten() {
        let r = rel.join(e.file_name());
        let t = e.file_type().unwrap();
        if t.is_dir() {
            files(root, &r, out);
        } else {
            out.insert(r);
        }
    }
}

/// The shared tree against a fresh extraction of the source: no file of
/// the source differs or is missing, and every extra file is one the
/// kernel's own .gitignore rules ignore (a build product). Gives the number
/// of extra files.
pub(super) fn assert_tree_pristine(dir: &Path) -> usize {
    let fresh = dir.join("fresh");
    std::fs::create_dir_all(&fresh).unwrap();
    let st = std::process::Command::new("tar")
        .args(["-xf", SOURCE, "--strip-components=1", "-C"])
        .arg(&fresh)
        .status()
        .unwrap();
    assert!(st.success(), "extract {SOURCE}");
    let tree = shared_tree();
    let out = std::process::Command::new("diff")
        .arg("-rq")
        .arg("--no-dereference")
        .arg(&fresh)
        .arg(&tree)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let only_in_tree = format!("Only in {}", tree.display());
    let wrong: Vec<&str> = text.lines().filter(|l| !l.starts_with(&only_in_tree)).collect();
    assert!(
        wrong.is_empty(),
        "the shared tree is not the source:\n{}",
        wrong.join("\n")
    );
    let (mut theirs, mut ours) = (BTreeSet::new(), BTreeSet::new());
    files(&fresh, Path::new(""), &mut theirs);
    files(&tree, Path::new(""), &mut ours);
    let extra: Vec<&PathBuf> = ours.difference(&theirs).collect();
    let not_ignored = not_ignored(dir, &tree, &extra);
    assert!(
        not_ignored.is_empty(),
        "{} of {} extra files in the shared tree are not ignored by the kernel's .gitignore: {:?}",
        not_ignored.len(),
        extra.len(),
        &not_ignored[..not_ignored.len().min(40)]
    );
    std::fs::remove_dir_all(&fresh).ok();
    extra.len()
}

/// Those of `paths` (relative to `tree`) that the tree's .gitignore files
/// do not ignore: `git check-ignore --no-index` with a scratch bare repo.
fn not_ignored(dir: &Path, tree: &Path, paths: &[&PathBuf]) -> Vec<String> {
    use std::io::Write;
    let git_dir = dir.join("ignore.git");
    if !git_dir.exists() {
        let st = std::process::Command::new("git")
            .args(["init", "--quiet", "--bare"])
            .arg(&git_dir)
            .status()
            .unwrap();
        assert!(st.success(), "git init --bare {}", git_dir.display());
    }
    let mut child = std::process::Command::new("git")
        .arg(format!("--git-dir={}", git_dir.display()))
        .arg(format!("--work-tree={}", tree.display()))
        .args(["check-ignore", "--no-index", "--stdin", "-z"])
        .current_dir(tree)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = Vec::new();
    for p in paths {
        input.extend_from_slice(p.as_os_str().as_encoded_bytes());
        input.push(0);
    }
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || stdin.write_all(&input).unwrap());
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap();
    let ignored: BTreeSet<String> = String::from_utf8_lossy(&out.stdout)
        .split('\0')
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect();
    paths
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .filter(|p| !ignored.contains(p))
        .collect()
}
