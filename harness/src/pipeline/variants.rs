//! The kernels of a run: the work tree, the series' states, then each
//! variant patched, configured and built (or found in the kernel cache),
//! every step's outcome recorded as it happens. Every step has one shape:
//! it gives what it makes or a [`StepFailure`], and a variant's failure is
//! recorded only through `Step::fail`, which stops the run unrecorded when
//! it was interrupted. A shard only looks its kernels up in the cache by
//! the build's keys.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result};

use super::Options;
use crate::config::{Matrix, Variant};
use crate::kernel::build::{self, Artifact, Configured};
use crate::kernel::patch::{self, SeriesState};
use crate::kernel::tree::{Applied, Tree};
use crate::proc;
use crate::records::{Cause, Event, Failed, Stage};
use crate::store::Run;
use crate::ui::Ui;
use crate::workdir::WorkDir;

/// Per variant, what was made (a kernel, its cache key) or why it was not.
pub type Built<T> = BTreeMap<String, Result<T, String>>;

/// The work tree, the series' states, then every variant in `needed`
/// patched, configured and built (or found in the cache), each outcome
/// recorded. A variant with `ref:` is built in the work clone checked out at
/// that commit, its series judged against it. `Err` stops the run; a variant
/// that failed is an `Err` entry.
pub(super) fn build_variants(
    run: &Run,
    m: &Matrix,
    opts: &Options,
    needed: &BTreeSet<&str>,
    ui: &Ui,
) -> Result<Built<Artifact>> {
    ui.stage("tree", &format!("preparing {}", m.kernel.source.display()));
    let base_ref = m.variant("base").and_then(|b| b.git_ref.clone());
    let states = base_states(run, m, base_ref.as_deref(), &opts.work_dir, ui)?;
    for (s, st) in &states {
        run.event(&Event::Series {
            series: s.clone(),
            state: st.clone(),
        })?;
    }
    let mut out = BTreeMap::new();
    for v in &m.variants {
        proc::check_interrupted()?;
        if !needed.contains(v.name.as_str()) {
            ui.inc();
            continue;
        }
        ui.stage("build", &v.name);
        let turn = tree_turn(run, &opts.work_dir, ui)?;
        let tree = variant_tree(m, v.git_ref.as_deref(), &opts.work_dir, &run.log("tree.log"))?;
        let own_states;
        let states = if v.git_ref == base_ref {
            &states
        } else {
            // series of a variant on another commit are judged against that commit
            let names: Vec<String> = v.revert.iter().chain(&v.apply).cloned().collect();
            own_states = classify(m, &names, &tree, &opts.work_dir)?;
            &own_states
        };
        let r = Step {
            run,
            m,
            tree: &tree,
            v,
            work: &opts.work_dir,
            ui,
        }
        .make(states);
        tree.rollback(&run.log("tree.log"))?;
        drop(turn);
        out.insert(v.name.clone(), StepFailure::entry(r)?);
        ui.inc();
    }
    Ok(out)
}

/// The kernels of `needed`: those this run built before (it is resumed,
/// started again under another clock, or boots its second stage) taken from
/// the cache by the keys its build events recorded, the rest built. Its
/// inputs are pinned ([`check_unchanged`](crate::records::inputs::check_unchanged)),
/// so building again would only make the same keys, at the cost of
/// preparing the tree and configuring each variant once more (minutes in a
/// slow guest); a variant whose build failed is tried again.
pub(super) fn built_before_or_now(
    run: &Run,
    m: &Matrix,
    opts: &Options,
    needed: &BTreeSet<&str>,
    ui: &Ui,
) -> Result<Built<Artifact>> {
    let mut have = built_before(&run.events()?, &opts.work_dir, needed);
    for v in have.keys() {
        ui.stage("build", &format!("{v}: built earlier in this run, in the kernel cache"));
    }
    let rest: BTreeSet<&str> = needed.iter().filter(|v| !have.contains_key(**v)).copied().collect();
    if rest.is_empty() {
        m.variants.iter().for_each(|_| ui.inc());
    } else {
        have.extend(build_variants(run, m, opts, &rest, ui)?);
    }
    Ok(have)
}

/// The variants of `needed` whose last build event in `events` names a
/// kernel the cache still holds intact.
fn built_before(events: &[Event], work: &WorkDir, needed: &BTreeSet<&str>) -> Built<Artifact> {
    last_builds(events)
        .into_iter()
        .filter(|(v, (_, error))| needed.contains(v) && error.is_none())
        .filter_map(|(v, (key, _))| Some((v.to_string(), Ok(build::cached(work, key?)?))))
        .collect()
}

/// Each variant's last build event in `events`: the cache key of its
/// kernel and why the build failed, as recorded.
fn last_builds(events: &[Event]) -> BTreeMap<&str, (Option<&str>, Option<&str>)> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::Build {
                variant, key, error, ..
            } => Some((variant.as_str(), (key.as_deref(), error.as_deref()))),
            _ => None,
        })
        .collect()
}

/// The run's turn at the shared kernel trees (`work/locks/tree`): other
/// runs on the work directory wait while one prepares, patches, builds in
/// and rolls back a tree (a run that died let go with its process; the next
/// one rolls back what it left).
fn tree_turn(run: &Run, work: &WorkDir, ui: &Ui) -> Result<crate::util::Flock> {
    crate::workdir::lock_waiting(work, "tree", "the kernel tree", &format!("run {}", run.id), |m| {
        ui.notice(m)
    })
}

/// What the cache holds for each variant in `needed`, by the key of the
/// variant's last build event (recorded in `run_dir`); never builds. A
/// kernel the build made that the cache no longer holds is the host's
/// fault ([`KernelGone`](crate::kernel::fault::KernelGone)), never the
/// variant's: the caller stops with nothing recorded.
pub fn from_cache(
    builds: &[Event],
    work: &WorkDir,
    needed: &BTreeSet<&str>,
    run_dir: &Path,
) -> Result<Built<Artifact>> {
    let last = last_builds(builds);
    let mut failed: BTreeMap<&str, &str> = BTreeMap::new();
    for e in builds {
        match e {
            Event::Patch {
                variant,
                error: Some(err),
                ..
            }
            | Event::Config {
                variant,
                error: Some(err),
                ..
            } => {
                failed.insert(variant, err);
            }
            _ => {}
        }
    }
    let missing = || "kernel not in the cache: run `harness build` first".to_string();
    needed
        .iter()
        .map(|&v| {
            let r = match (last.get(v), failed.get(v)) {
                (Some((_, Some(err))), _) => Err(err.to_string()),
                (Some((Some(key), None)), _) => match build::cached(work, key) {
                    Some(art) => Ok(art),
                    None => return Err(gone(v, key, &work.kernel(key), run_dir).into()),
                },
                (_, Some(err)) => Err(err.to_string()),
                _ => Err(missing()),
            };
            Ok((v.to_string(), r))
        })
        .collect()
}

/// Variant `variant`'s kernel `key`, recorded by the build in `run_dir`,
/// is no longer in its cache entry `dir`.
pub fn gone(variant: &str, key: &str, dir: &Path, run_dir: &Path) -> crate::kernel::fault::KernelGone {
    crate::kernel::fault::KernelGone {
        variant: variant.into(),
        key: key.into(),
        dir: dir.display().to_string(),
        run_dir: run_dir.display().to_string(),
    }
}

/// Every series' state against the base tree (checked out at the base's
/// `ref:`, if it has one).
fn base_states(
    run: &Run,
    m: &Matrix,
    base_ref: Option<&str>,
    work: &WorkDir,
    ui: &Ui,
) -> Result<BTreeMap<String, SeriesState>> {
    let _turn = tree_turn(run, work, ui)?;
    let log = run.log("tree.log");
    let tree = variant_tree(m, base_ref, work, &log)?;
    if base_ref.is_none() {
        // the source's own copy, pristine now: the coverage step's copies of the series'
        // files come from here, not from the source again (where that fails, from the source)
        let _ = crate::coverage::cache::keep_pristine(m, work, &tree.dir, &log);
    }
    classify(m, &m.series_names(), &tree, work)
}

/// The work tree of a variant: the source's own copy, or with `ref:` the
/// work clone checked out at that commit.
fn variant_tree(m: &Matrix, git_ref: Option<&str>, work: &WorkDir, log: &Path) -> Result<Tree> {
    match git_ref {
        Some(r) => Tree::prepare_ref(&m.kernel.source, r, work, log),
        None => Tree::prepare(&m.kernel.source, work, log),
    }
}

/// The state of each named series against `tree`.
fn classify(m: &Matrix, names: &[String], tree: &Tree, work: &WorkDir) -> Result<BTreeMap<String, SeriesState>> {
    let mut states = BTreeMap::new();
    for s in names {
        let series = patch::load_series(&m.series_dir, s)?;
        states.insert(s.clone(), patch::classify(&tree.dir, &series, &work.scratch())?);
    }
    Ok(states)
}

/// Why a step did not give what it makes.
#[derive(Debug)]
enum StepFailure {
    /// The variant failed at this step: its event is written (by
    /// [`Step::fail`], the one place), this is its message.
    Failed(String),
    /// The run stops, nothing recorded: an interruption, the host's
    /// failure, a record that cannot be written.
    Stop(anyhow::Error),
}

impl From<anyhow::Error> for StepFailure {
    fn from(e: anyhow::Error) -> Self {
        StepFailure::Stop(e)
    }
}

impl StepFailure {
    /// A variant's outcome as its [`Built`] entry; `Err` to stop the run.
    fn entry<T>(r: StepResult<T>) -> Result<Result<T, String>> {
        match r {
            Ok(t) => Ok(Ok(t)),
            Err(StepFailure::Failed(msg)) => Ok(Err(msg)),
            Err(StepFailure::Stop(e)) => Err(e),
        }
    }
}

/// What a step gives, or why not.
type StepResult<T> = std::result::Result<T, StepFailure>;

/// One variant being made in its work tree.
struct Step<'a> {
    run: &'a Run,
    m: &'a Matrix,
    tree: &'a Tree,
    v: &'a Variant,
    work: &'a WorkDir,
    ui: &'a Ui,
}

impl Step<'_> {
    /// `logs/variants/<name>/<file>`.
    fn log(&self, file: &str) -> PathBuf {
        self.run.log(&format!("variants/{}/{file}", self.v.name))
    }

    /// The variant's failure `msg`, recorded as `event` (the step's record,
    /// its `error` and `failed` set) — unless the run was interrupted: then
    /// it stops and nothing is recorded, so an interruption (a make or patch
    /// killed by Ctrl-C) is never a failed step.
    fn fail(&self, msg: String, event: Event) -> StepFailure {
        match proc::check_interrupted().and_then(|_| self.run.event(&event)) {
            Ok(()) => StepFailure::Failed(msg),
            Err(e) => StepFailure::Stop(e),
        }
    }

    /// Patches, configures and builds the variant.
    fn make(&self, states: &BTreeMap<String, SeriesState>) -> StepResult<Artifact> {
        let applied = self.patch(states)?;
        if !self.v.is_plain() {
            self.run.event(&Event::Patch {
                variant: self.v.name.clone(),
                failure: None,
                error: None,
                failed: None,
            })?;
        }
        let cfg = self.configure()?;
        let key = build::key(self.tree, &cfg.text, &applied)?;
        self.build(&cfg, key)
    }

    /// Reverts and applies the variant's series, in matrix order; gives the
    /// patches applied.
    fn patch(&self, states: &BTreeMap<String, SeriesState>) -> StepResult<Vec<Applied>> {
        let plog = self.log("patch.log");
        std::fs::create_dir_all(plog.parent().unwrap()).with_context(|| format!("create {}", plog.display()))?;
        let mut applied = Vec::new();
        for (names, reverse) in [(&self.v.revert, true), (&self.v.apply, false)] {
            for s in names.iter() {
                self.usable(s, &states[s], reverse)?;
                let series = patch::load_series(&self.m.series_dir, s)?;
                if let Err(f) = self.tree.apply_series(&series, reverse, &plog)? {
                    let msg = f.to_string();
                    return Err(self.fail(msg.clone(), self.patch_failed(Some(f), msg)));
                }
                applied.extend(Applied::series(&series, reverse)?);
            }
        }
        Ok(applied)
    }

    /// The patch event of a series that cannot be used: `error`, with the
    /// patch that failed when one did.
    fn patch_failed(&self, failure: Option<patch::PatchFailure>, error: String) -> Event {
        Event::Patch {
            variant: self.v.name.clone(),
            failure,
            error: Some(error),
            failed: Some(Failed::new(Stage::Patch, Cause::Conflict)),
        }
    }

    /// Whether series `s` in state `st` can be reverted (`reverse`) or
    /// applied; why not recorded and shown.
    fn usable(&self, s: &str, st: &SeriesState, reverse: bool) -> StepResult<()> {
        let want = if reverse {
            SeriesState::Contained
        } else {
            SeriesState::Applies
        };
        if std::mem::discriminant(st) == std::mem::discriminant(&want) {
            return Ok(());
        }
        let msg = if reverse {
            format!("revert series {s}: the base does not contain it ({st})")
        } else {
            format!("apply series {s}: {st}")
        };
        let failure = match st {
            SeriesState::Conflicts { forward, reverse: rev } => {
                Some(if reverse { rev.clone() } else { forward.clone() })
            }
            _ => None,
        };
        let failed = self.fail(msg.clone(), self.patch_failed(failure, msg.clone()));
        if matches!(failed, StepFailure::Failed(_)) {
            self.ui.notice(&format!("variant {}: {msg}", self.v.name));
        }
        Err(failed)
    }

    /// The matrix's and the variant's fragments merged onto the base config.
    fn configure(&self) -> StepResult<Configured> {
        let mut frags = self.m.kernel.fragments.clone();
        frags.extend(self.v.fragments.iter().cloned());
        let log = self.log("config.log");
        let cfg = match build::configure(self.tree, &self.m.kernel.base_config, &frags, self.work, &log) {
            Ok(c) => c,
            // a full disk or a killed make is the host's, not the variant's
            Err(e) if crate::kernel::fault::is_host_fault(&e) => return Err(self.fail_host(e)),
            Err(e) => {
                let msg = format!("{e:#}");
                let event = Event::Config {
                    variant: self.v.name.clone(),
                    lost: vec![],
                    error: Some(msg.clone()),
                    failed: Some(Failed::new(Stage::Config, Cause::Config)),
                };
                return Err(self.fail(msg, event));
            }
        };
        for l in &cfg.lost {
            self.ui
                .notice(&format!("variant {}: {l} (see {})", self.v.name, log.display()));
        }
        self.run.event(&Event::Config {
            variant: self.v.name.clone(),
            lost: cfg.lost.to_vec(),
            error: None,
            failed: None,
        })?;
        Ok(cfg)
    }

    /// The host failed the step: the run stops unrecorded, as an
    /// interruption when it was one.
    fn fail_host(&self, e: anyhow::Error) -> StepFailure {
        StepFailure::Stop(proc::check_interrupted().err().unwrap_or(e))
    }

    /// The kernel of cache key `key`: from the cache, or built into it.
    fn build(&self, cfg: &Configured, key: String) -> StepResult<Artifact> {
        // the key's own lock: a run that needs the kernel another is building waits, then takes it from the cache
        let by = format!("run {}", self.run.id);
        let _key = crate::workdir::lock_waiting(
            self.work,
            &format!("kernel-{key}"),
            &format!("kernel {key}"),
            &by,
            |m| self.ui.notice(m),
        )?;
        if let Some(art) = build::cached(self.work, &key) {
            self.run.event(&self.built(key, &art, true))?;
            return Ok(art);
        }
        let timeout = Duration::from_secs(self.m.kernel.build_timeout_min * 60);
        let f = match build::build(self.tree, cfg, &key, self.work, timeout, &self.log("build.log"))? {
            Ok(art) => {
                self.run.event(&self.built(key, &art, false))?;
                return Ok(art);
            }
            Err(f) => f,
        };
        let (msg, cause) = if f.timed_out {
            let min = self.m.kernel.build_timeout_min;
            (format!("build timed out after {min} min"), Cause::BuildTimeout)
        } else {
            let first = f.errors.first().cloned().unwrap_or_else(|| "see build.log".into());
            (format!("build failed: {first}"), Cause::Compile)
        };
        let event = Event::Build {
            variant: self.v.name.clone(),
            key: Some(key),
            build_s: 0.0,
            cached: false,
            release: None,
            errors: f.errors,
            error: Some(msg.clone()),
            failed: Some(Failed::new(Stage::Build, cause)),
        };
        Err(self.fail(msg, event))
    }

    /// The build event of a kernel made (or, `cached`, found: no build time).
    fn built(&self, key: String, art: &Artifact, cached: bool) -> Event {
        let build_s = if cached { 0.0 } else { art.build_s };
        Event::Build {
            variant: self.v.name.clone(),
            key: Some(key),
            build_s,
            cached,
            release: Some(art.release.clone()),
            errors: vec![],
            error: None,
            failed: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::write;

    /// A series in a state its variant cannot use is refused with the
    /// variant's patch event and nothing applied; one it can use is applied
    /// and named for the cache key in series order.
    #[test]
    fn a_variant_applies_what_it_can_and_records_what_it_cannot() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        write(&root.join("linux/Makefile"), "VERSION = 6\n");
        write(&root.join("linux/mm/a.c"), "one\ntwo\nthree\n");
        let patch =
            "Subject: [PATCH] t\n\n---\n--- a/mm/a.c\n+++ b/mm/a.c\n@@ -1,3 +1,3 @@\n one\n-two\n+TWO\n three\n";
        write(&root.join("patches/s/0001-t.patch"), patch);
        write(&root.join("patches/s/series"), "0001-t.patch\n");
        let yaml = format!(
            "kernel:\n  source: {}\n  fragments: []\nseries_dir: patches\nvariants:\n  - name: base\n  - name: v\n    apply: [s]\n  - name: r\n    revert: [s]\n\
             vcpus: [2]\nbenchmarks:\n  - {{name: d, kind: doexec}}\n",
            root.join("linux").display()
        );
        let m = crate::config::parse(&yaml, &root.join("matrix.yaml"), None).unwrap();
        let (work, log) = (WorkDir::at(&root.join("work")), root.join("tree.log"));
        let run = Run::create(&root.join("runs"), "t").unwrap();
        let tree = Tree::prepare(&m.kernel.source, &work, &log).unwrap();
        let states = classify(&m, &m.series_names(), &tree, &work).unwrap();
        assert!(matches!(states["s"], SeriesState::Applies), "{states:?}");
        let ui = Ui::new(0, true);
        let step = |v: &str| Step {
            run: &run,
            m: &m,
            tree: &tree,
            v: m.variant(v).unwrap(),
            work: &work,
            ui: &ui,
        };

        let refused = match step("r").patch(&states) {
            Err(StepFailure::Failed(msg)) => msg,
            other => panic!("{other:?}"),
        };
        assert_eq!(
            refused,
            "revert series s: the base does not contain it (applies (not in the base))"
        );
        assert_eq!(
            std::fs::read_to_string(tree.dir.join("mm/a.c")).unwrap(),
            "one\ntwo\nthree\n"
        );

        let applied = step("v").patch(&states).unwrap();
        assert_eq!(
            applied,
            vec![Applied::new(&root.join("patches/s/0001-t.patch"), false).unwrap()]
        );
        assert_eq!(
            std::fs::read_to_string(tree.dir.join("mm/a.c")).unwrap(),
            "one\nTWO\nthree\n"
        );
        tree.rollback(&log).unwrap();

        let events = run.events().unwrap();
        let patches: Vec<(&str, Option<&str>)> = events
            .iter()
            .filter_map(|e| match e {
                Event::Patch { variant, error, .. } => Some((variant.as_str(), error.as_deref())),
                _ => None,
            })
            .collect();
        assert_eq!(
            patches,
            vec![("r", Some(refused.as_str()))],
            "a series that applied is recorded by make, not by patch"
        );
    }

    /// A build the host failed (out of disk, the compiler OOM-killed, make
    /// killed by a signal) stops the run with the host named and records no
    /// build event, so `--resume` builds again; a compile error stays the
    /// variant's recorded failure.
    #[test]
    fn a_host_failure_stops_the_build_unrecorded_and_a_compile_error_is_recorded() {
        let cases = [
            (
                "host-disk",
                "\techo 'fs/x.o: final link failed: No space left on device'; exit 2\n",
                Some("no space left on device"),
            ),
            (
                "host-oom",
                "\techo 'gcc: fatal error: Killed signal terminated program cc1'; exit 2\n",
                Some("compiler was killed"),
            ),
            (
                "host-signal",
                "\tkill -9 $$PPID; sleep 5\n",
                Some("make was killed by signal 9"),
            ),
            // issue 30: a step the OOM killer took, memory exhausted, a file system that failed
            (
                "host-killed-step",
                "\techo 'make[2]: *** [scripts/Makefile.vmlinux:34: vmlinux] Killed'; exit 2\n",
                Some("vmlinux was killed"),
            ),
            (
                "host-cc1-oom",
                "\techo 'cc1: out of memory allocating 4072 bytes after a total of 1 bytes'; exit 2\n",
                Some("ran out of memory"),
            ),
            (
                "host-vm-exhausted",
                "\techo 'virtual memory exhausted: Cannot allocate memory'; exit 2\n",
                Some("ran out of memory"),
            ),
            (
                "host-eio",
                "\techo 'fs/a.o: Input/output error'; exit 2\n",
                Some("input/output error"),
            ),
            (
                "host-estale",
                "\techo 'mm/.a.o.cmd: Stale file handle'; exit 2\n",
                Some("stale file handle"),
            ),
            (
                "host-erofs",
                "\techo 'cannot create mm/a.o: Read-only file system'; exit 2\n",
                Some("read-only"),
            ),
            ("compile", "\techo 'mm/a.c:1:2: error: x undeclared'; exit 2\n", None),
            // the disk was full at an earlier attempt (its words still in build.log): this one is a compile error
            (
                "compile-after-disk",
                "\techo 'mm/a.c:1:2: error: x undeclared'; exit 2\n",
                None,
            ),
        ];
        for (name, recipe, host) in cases {
            let tmp = tempfile::tempdir().unwrap();
            let root = tmp.path();
            write(&root.join("linux/Makefile"), &format!("bzImage vmlinux:\n{recipe}"));
            let yaml = format!(
                "kernel:\n  source: {}\n  fragments: []\nvariants:\n  - name: base\nvcpus: [2]\nbenchmarks:\n  - {{name: d, kind: doexec}}\n",
                root.join("linux").display()
            );
            let m = crate::config::parse(&yaml, &root.join("matrix.yaml"), None).unwrap();
            let (work, log) = (root.join("work"), root.join("tree.log"));
            let wd = WorkDir::at(&work);
            let run = Run::create(&root.join("runs"), "t").unwrap();
            if name == "compile-after-disk" {
                write(
                    &run.log("variants/base/build.log"),
                    "ld: final link failed: No space left on device\nmake: *** [vmlinux] Error 1\n",
                );
            }
            let tree = Tree::prepare(&m.kernel.source, &wd, &log).unwrap();
            let ui = Ui::new(0, true);
            let step = Step {
                run: &run,
                m: &m,
                tree: &tree,
                v: m.variant("base").unwrap(),
                work: &wd,
                ui: &ui,
            };
            let cfg = Configured {
                config: Default::default(),
                lost: vec![],
                text: String::new(),
            };
            let r = step.build(&cfg, "k".into());
            let builds = run
                .events()
                .unwrap()
                .into_iter()
                .filter(|e| matches!(e, Event::Build { .. }))
                .count();
            match host {
                Some(words) => {
                    let Err(StepFailure::Stop(e)) = r else {
                        panic!("{name}: the run went on: {r:?}")
                    };
                    let e = format!("{e:#}");
                    assert!(e.contains(words) && e.contains("not the kernel"), "{name}: {e}");
                    assert_eq!(builds, 0, "{name}: a host failure was recorded against the variant");
                }
                None => {
                    let Err(StepFailure::Failed(msg)) = r else {
                        panic!("{name}: {r:?}")
                    };
                    assert!(msg.contains("x undeclared"), "{name}: {msg}");
                    assert_eq!(builds, 1, "{name}");
                }
            }
        }
    }

    /// Two runs on one work directory that need the same kernel: the
    /// shared tree is used by one at a time, the kernel is built once, and
    /// the second run takes it from the cache.
    /// Issue 48: a resumed run took 4 to 6 minutes in a slow guest to
    /// prepare the tree and configure kernels it had built. Now the kernels
    /// its build events name are taken from the cache untouched; one the
    /// cache lost is built again.
    #[test]
    fn a_run_that_goes_on_takes_the_kernels_it_built_from_the_cache() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        let configured = root.join("configured");
        let makefile = format!(
            "tinyconfig olddefconfig:\n\ttouch .config\n\techo $@ >> {}\n\
             bzImage vmlinux &:\n\tmkdir -p arch/x86/boot include/config\n\
             \techo img > arch/x86/boot/bzImage\n\techo elf > vmlinux\n\techo 6.12.0 > include/config/kernel.release\n",
            configured.display()
        );
        let (m, opts) = crate::pipeline::tests::fake_kernel(root, "linux", &makefile);
        let run = Run::create(&opts.runs_dir, "a").unwrap();
        let needed: BTreeSet<&str> = ["base"].into();
        let ui = Ui::new(0, true);
        let makes = || std::fs::read_to_string(&configured).unwrap_or_default().lines().count();
        let first = built_before_or_now(&run, &m, &opts, &needed, &ui).unwrap();
        let key = first["base"].as_ref().expect("built").key.clone();
        let after_first = makes();
        assert!(after_first > 0, "the fake make never ran");

        let again = built_before_or_now(&run, &m, &opts, &needed, &ui).unwrap();
        assert_eq!(again["base"].as_ref().expect("from the cache").key, key);
        assert_eq!(
            makes(),
            after_first,
            "the tree was configured again for a kernel the run built"
        );

        std::fs::remove_file(opts.work_dir.kernel(&key).join("bzImage")).unwrap();
        let rebuilt = built_before_or_now(&run, &m, &opts, &needed, &ui).unwrap();
        assert_eq!(rebuilt["base"].as_ref().expect("built again").key, key);
        assert!(makes() > after_first, "a kernel the cache lost was not built again");
    }

    #[test]
    fn two_runs_needing_one_kernel_build_it_once() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        let count = root.join("builds");
        let makefile = format!(
            "tinyconfig olddefconfig:\n\ttouch .config\n\
             bzImage vmlinux &:\n\techo $$PPID >> {}\n\tsleep 1\n\tmkdir -p arch/x86/boot include/config\n\
             \techo img > arch/x86/boot/bzImage\n\techo elf > vmlinux\n\techo 6.12.0 > include/config/kernel.release\n",
            count.display()
        );
        let (m, opts) = crate::pipeline::tests::fake_kernel(root, "linux", &makefile);
        let runs: Vec<Run> = ["a", "b"]
            .iter()
            .map(|l| Run::create(&opts.runs_dir, l).unwrap())
            .collect();
        let needed: BTreeSet<&str> = ["base"].into();
        let built: Vec<Built<Artifact>> = std::thread::scope(|s| {
            let hs: Vec<_> = runs
                .iter()
                .map(|run| s.spawn(|| build_variants(run, &m, &opts, &needed, &Ui::new(0, true)).unwrap()))
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let builds = std::fs::read_to_string(&count).unwrap();
        assert_eq!(
            builds.lines().count(),
            1,
            "the kernel was built more than once: {builds}"
        );
        let keys: Vec<String> = built
            .iter()
            .map(|b| b["base"].as_ref().expect("built").key.clone())
            .collect();
        assert_eq!(keys[0], keys[1]);
        let cached: Vec<bool> = runs
            .iter()
            .flat_map(|r| r.events().unwrap())
            .filter_map(|e| match e {
                Event::Build {
                    cached, error: None, ..
                } => Some(cached),
                _ => None,
            })
            .collect();
        assert_eq!(
            {
                let mut c = cached.clone();
                c.sort();
                c
            },
            vec![false, true],
            "{cached:?}"
        );
    }
}
