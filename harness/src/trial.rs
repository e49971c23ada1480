//! `harness try`: "does my series regress anything?" in one command. Writes
//! the series (an mbox, a format-patch directory, a quilt directory or a git
//! range) as a quilt series in the work directory, makes a two-variant matrix
//! in memory — `base` and `series` (base + the series) — from the given
//! matrix or the one built into the binary, narrowed by the command line,
//! checks that the series applies before anything is built, and hands the
//! matrix to the pipeline. Afterwards it says plainly what failed: the patch
//! and hunk, the compiler line, the boot and its panic.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use sha2::{Digest, Sha256};

use crate::config::{Clock, Matrix, Variant};
use crate::kernel::patch::{self, SeriesState};
use crate::kernel::series::{self, Source};
use crate::kernel::tree;
use crate::records::{Cause, Event, Stage};
use crate::store::Run;
use crate::workdir::WorkDir;

mod workflow;
pub use workflow::{run, Tried};

/// The name of the series, and of the variant that applies it.
pub const SERIES: &str = "series";

/// What `harness try` was asked.
#[derive(Debug, Clone, Default)]
pub struct Request {
    /// Mbox files, format-patch directories or quilt directories, in order.
    pub series: Vec<PathBuf>,
    /// `--git TREE`: the source, and with `--range` where the patches come from.
    pub git: Option<PathBuf>,
    /// `--range BASE..TOPIC`.
    pub range: Option<String>,
    /// `--matrix` (default: the built-in matrix).
    pub matrix: Option<PathBuf>,
    /// `--profile` (`none` for none).
    pub profile: String,
    /// The profile is the command's default, not asked for: a matrix that
    /// does not define it runs its top level.
    pub profile_is_default: bool,
    /// `--vcpus`: replaces the profile's vCPU counts.
    pub vcpus: Vec<u32>,
    /// `--bench`: keeps only these benchmarks.
    pub bench: Vec<String>,
    /// `--covering`: the benchmarks that execute a function the series
    /// changes, as the last run of this base kernel profiled them.
    pub covering: bool,
    /// `--clock`.
    pub clock: Option<Clock>,
    /// `--boots` per variant and vCPU count.
    pub boots: Option<u32>,
    /// `--floor`.
    pub floor: Option<f64>,
}

/// The `--clock` word.
pub fn parse_clock(s: &str) -> Result<Clock, String> {
    match s {
        "wall" => Ok(Clock::Wall),
        "icount" => Ok(Clock::Icount),
        _ => Err(format!("`{s}` is not wall or icount")),
    }
}

/// The two-variant matrix of a request; the series is written under
/// `<work>/try/<hash of its patches>/series/`.
pub fn matrix(req: &Request, work: &WorkDir) -> Result<Matrix> {
    let mut m = base_matrix(req, work)?;
    let (sources, base_ref) = sources(req, &mut m)?;
    work.create()?;
    let patches = series::collect(&sources, &work.log("try-format-patch"))?;
    let mut h = Sha256::new();
    for (name, data) in &patches {
        h.update(name.as_bytes());
        h.update(data);
    }
    m.series_dir = work.try_series().join(crate::util::hex(&h.finalize()[..8]));
    series::write_quilt(&patches, &m.series_dir, SERIES)?;
    // the benchmarks the profile's variants run (`--bench`: those named)
    let benchmarks: Vec<String> = m
        .benchmarks
        .iter()
        .filter(|b| !req.bench.is_empty() || m.variants.iter().any(|v| v.benchmarks.contains(&b.name)))
        .map(|b| b.name.clone())
        .collect();
    let base = Variant {
        name: "base".into(),
        apply: vec![],
        revert: vec![],
        fragments: vec![],
        benchmarks,
        git_ref: base_ref,
    };
    m.variants = vec![
        base.clone(),
        Variant {
            name: SERIES.into(),
            apply: vec![SERIES.into()],
            ..base
        },
    ];
    if req.covering {
        covering(&mut m, work)?;
    }
    if let Some(why) = crate::config::not_installed(&m) {
        bail!("{why}");
    }
    // the profile that runs: the one asked for, or its `without_kvm:`
    m.profile = Some(match &m.profile {
        Some(p) => format!("try-{p}"),
        None => "try".into(),
    });
    Ok(m)
}

/// Where the request's patches come from, and base's git ref with
/// `--range` (`--git` makes the tree `m`'s source).
fn sources(req: &Request, m: &mut Matrix) -> Result<(Vec<Source>, Option<String>)> {
    let mut sources: Vec<Source> = req.series.iter().map(|p| Source::detect(p)).collect::<Result<_>>()?;
    let mut base_ref = None;
    match (&req.git, &req.range) {
        (Some(git), range) => {
            m.kernel.source = std::path::absolute(git).context("resolve --git")?;
            if let Some(r) = range {
                let (base, _) = r
                    .split_once("..")
                    .with_context(|| format!("the range `{r}` is not BASE..TOPIC"))?;
                base_ref = Some(base.to_string());
                sources.push(Source::GitRange {
                    tree: m.kernel.source.clone(),
                    range: r.clone(),
                });
            }
        }
        (None, Some(_)) => bail!("--range needs --git TREE"),
        (None, None) => {}
    }
    if sources.is_empty() {
        bail!("no series: name an mbox, a patch directory or a quilt directory, or --git TREE --range BASE..TOPIC");
    }
    Ok((sources, base_ref))
}

/// `--covering`: both arms run the benchmarks of the matrix (installed
/// here) that execute a function the series changes, from the calls per
/// op kept by the last run of this base kernel; refused when none is known
/// or none executes one.
fn covering(m: &mut Matrix, work: &WorkDir) -> Result<()> {
    let candidates: Vec<String> = m
        .benchmarks
        .iter()
        .filter(|b| crate::config::missing_program(b).is_none())
        .map(|b| b.name.clone())
        .collect();
    for v in &mut m.variants {
        v.benchmarks = candidates.clone();
    }
    let known = crate::coverage::from_cache(m, work)?.known;
    let Some(c) = known.first() else {
        bail!("--covering: no run has profiled base's benchmarks yet ({}); run them once under icount (e.g. `harness run --profile peers-icount`) or name --bench", candidates.join(", "));
    };
    let pick: Vec<String> = candidates
        .into_iter()
        .filter(|b| c.covering().contains(b.as_str()))
        .collect();
    if pick.is_empty() {
        bail!(
            "--covering: no benchmark of the matrix executes a function the series changes:\n{}",
            crate::coverage::text(c)
        );
    }
    for v in &mut m.variants {
        v.benchmarks = pick.clone();
    }
    m.key_metrics
        .retain(|k| pick.iter().any(|b| k == b || k.starts_with(&format!("{b}."))));
    Ok(())
}

/// The matrix (`--matrix` or the built-in one) with its profile, narrowed
/// by the command line; its variants are the caller's to replace.
pub fn base_matrix(req: &Request, work: &WorkDir) -> Result<Matrix> {
    let path = match &req.matrix {
        Some(p) => std::path::absolute(p).context("resolve --matrix")?,
        None => crate::builtin::materialise(work)?.join("matrix.yaml"),
    };
    let mut profile = (req.profile != "none").then_some(req.profile.as_str());
    if req.profile_is_default && !crate::config::defines_profile(&path, &req.profile)? {
        profile = None;
    }
    let mut m = crate::config::load(&path, profile).context("load the matrix")?;
    if req.clock.is_none() {
        m = crate::pipeline::for_this_host(m, work)?;
    }
    narrow(&mut m, req)?;
    Ok(m)
}

/// Applies `--vcpus`, `--bench`, `--clock`, `--boots`, `--floor`.
fn narrow(m: &mut Matrix, req: &Request) -> Result<()> {
    if !req.vcpus.is_empty() {
        m.vcpus = req.vcpus.clone();
        m.vcpus.sort_unstable();
        m.vcpus.dedup();
        if m.vcpus.contains(&0) {
            bail!("--vcpus 0: a guest needs at least one vCPU");
        }
    }
    if !req.bench.is_empty() {
        let known: Vec<String> = m.benchmarks.iter().map(|b| b.name.clone()).collect();
        if let Some(b) = req.bench.iter().find(|b| !known.contains(b)) {
            bail!(
                "--bench {b}: the matrix has no such benchmark (it has {})",
                known.join(", ")
            );
        }
        m.benchmarks.retain(|b| req.bench.contains(&b.name));
        m.key_metrics
            .retain(|k| req.bench.iter().any(|b| k == b || k.starts_with(&format!("{b}."))));
    }
    if let Some(c) = req.clock {
        m.guest.clock = c;
    }
    if let Some(b) = req.boots {
        if b == 0 {
            bail!("--boots 0: at least one boot per variant is needed");
        }
        m.sampling.boots = b;
    }
    if let Some(f) = req.floor {
        if !(0.0..1.0).contains(&f) {
            bail!("--floor {f}: it is a fraction such as 0.02");
        }
        m.statistics.threshold = f;
    }
    Ok(())
}

/// Tries the series on the files it touches, taken from the source (the
/// work tree is not needed, nor its lock): `Some(why)` when it does not
/// apply to the base. A base at a git ref is left to the pipeline.
pub fn preflight(m: &Matrix, scratch: &Path) -> Result<Option<String>> {
    if m.variants.iter().any(|v| v.git_ref.is_some()) {
        return Ok(None);
    }
    let s = patch::load_series(&m.series_dir, SERIES)?;
    let mut files: Vec<String> = Vec::new();
    for p in &s.patches {
        // decoded as every patch reader does: a series saved from a mail may be quoted-printable
        for f in patch::files_of(p)? {
            if !files.contains(&f) {
                files.push(f);
            }
        }
    }
    let _ = std::fs::remove_dir_all(scratch);
    tree::pristine_files(
        &m.kernel.source,
        &files,
        &scratch.join("tree"),
        &scratch.join("preflight.log"),
    )?;
    let st = patch::classify(&scratch.join("tree"), &s, &scratch.join("scratch"))?;
    let _ = std::fs::remove_dir_all(scratch);
    Ok(match st {
        SeriesState::Applies => None,
        SeriesState::Contained => Some(format!(
            "the series is already in {} (every patch reverse-applies)",
            m.kernel.source.display()
        )),
        SeriesState::Conflicts { forward, .. } => Some(format!(
            "the series does not apply to {}: {forward}",
            m.kernel.source.display()
        )),
    })
}

/// One line of what went wrong in a `try` run.
#[derive(Debug, Clone, PartialEq)]
pub struct FailedStep {
    /// The step that failed.
    pub stage: Stage,
    /// Why, when the run recorded it.
    pub cause: Option<Cause>,
    /// The line: the variant (and boot), the step, and why.
    pub text: String,
}

impl FailedStep {
    /// The variant could not be patched, configured or built.
    pub fn unmade(&self) -> bool {
        self.stage.makes_the_variant()
    }
}

impl std::fmt::Display for FailedStep {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

/// What went wrong in a run, one plain line each: patches with their hunks,
/// configs, builds with the compiler's lines, boots with their console
/// findings (a panic, an oops) or error. A boot of a variant that was never
/// built is left out: its build's line says why.
pub fn failures(run: &Run) -> Result<Vec<FailedStep>> {
    Ok(run.events()?.iter().flat_map(failure_lines).collect())
}

/// The lines of one event's failure (none for a success).
fn failure_lines(e: &Event) -> Vec<FailedStep> {
    // the event's kind is its stage; a cut boot names its own
    let line = |stage, text: String| failure(e, stage, text);
    match e {
        Event::Patch {
            variant,
            error: Some(err),
            ..
        } => vec![line(Stage::Patch, format!("{variant}: patch: {err}"))],
        Event::Config {
            variant,
            error: Some(err),
            ..
        } => vec![line(Stage::Config, format!("{variant}: config: {err}"))],
        Event::Build {
            variant,
            errors,
            error: Some(err),
            ..
        } => {
            let compiler = errors
                .iter()
                .skip(1)
                .take(9)
                .map(|l| line(Stage::Build, format!("{variant}:   {l}")));
            std::iter::once(line(Stage::Build, format!("{variant}: {err}")))
                .chain(compiler)
                .collect()
        }
        Event::BootEnd { .. } => boot_end_lines(e),
        _ => vec![],
    }
}

/// One line of `e`'s failure at `stage`.
fn failure(e: &Event, stage: Stage, text: String) -> FailedStep {
    FailedStep {
        stage,
        cause: e.failed().map(|f| f.cause),
        text,
    }
}

/// The lines of a `boot_end` event: its console findings, then its error
/// unless the variant was never built.
fn boot_end_lines(e: &Event) -> Vec<FailedStep> {
    let Event::BootEnd {
        variant,
        vcpus,
        boot,
        boot_id,
        findings,
        error,
        failed,
        ..
    } = e
    else {
        return vec![];
    };
    let stage = failed.map_or(Stage::Boot, |f| f.stage);
    let at = format!("{variant} at {vcpus} vCPUs, boot {boot}");
    let mut out: Vec<FailedStep> = findings
        .iter()
        .map(|f| {
            let text = format!("{at}: console: {} {}", f.line.trim(), f.signature);
            failure(e, stage, text.trim_end().to_string())
        })
        .collect();
    // never built (no boot id in runs recorded before causes were)
    let not_built = failed.is_some_and(|f| f.cause == Cause::NotBuilt) || boot_id.is_none();
    if let Some(err) = error.as_ref().filter(|_| !not_built) {
        out.push(failure(e, stage, format!("{at}: {err}")));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn covering_picks_the_benchmarks_that_execute_what_the_series_changes() {
        if crate::proc::which("stress-ng").is_none() {
            eprintln!("skipped: stress-ng is not installed (harness/scripts/setup-host.sh)");
            return;
        }
        let tmp = tempfile::tempdir().unwrap();
        let patch = "From 1 Mon Sep 17 00:00:00 2001\nFrom: A <a@x>\nSubject: [PATCH] pipe\n\n---\n\
                     --- a/fs/pipe.c\n+++ b/fs/pipe.c\n@@ -3,2 +3,3 @@\n {\n+\tcost();\n \treturn 0;\n";
        std::fs::write(tmp.path().join("one.mbox"), patch).unwrap();
        let req = Request {
            series: vec![tmp.path().join("one.mbox")],
            profile: "premerge-icount".into(),
            covering: true,
            ..Request::default()
        };
        let work = WorkDir::at(&tmp.path().join("work"));
        let e = format!("{:#}", matrix(&req, &work).unwrap_err());
        assert!(
            e.contains("--covering: no run has profiled base's benchmarks yet"),
            "{e}"
        );
        // what a run of base kept: stress-pipe calls pipe_write, doexec does not
        let probe = base_matrix(&req, &work).unwrap();
        let files = crate::coverage::source_files(&probe, &work).unwrap();
        std::fs::create_dir_all(files.join("fs")).unwrap();
        std::fs::write(
            files.join("fs/pipe.c"),
            "static ssize_t\npipe_write(struct kiocb *iocb)\n{\n\treturn 0;\n}\n",
        )
        .unwrap();
        let id = crate::coverage::base_identity(&probe).unwrap();
        for (b, calls) in [
            ("stress-pipe", r#"{"vcpus": 2, "calls": {"pipe_write": 2.0}}"#),
            ("static-doexec", r#"{"vcpus": 2, "calls": {"bprm_execve": 1.0}}"#),
        ] {
            let f = crate::coverage::cache_file(&work, &id, b);
            std::fs::create_dir_all(f.parent().unwrap()).unwrap();
            std::fs::write(f, calls).unwrap();
        }
        let m = matrix(&req, &work).unwrap();
        assert_eq!(m.variants[1].benchmarks, ["stress-pipe"]);
        assert_eq!(m.variants[0].benchmarks, ["stress-pipe"]);
    }

    #[test]
    fn the_arms_run_the_profiles_benchmarks_or_those_named() {
        let tmp = tempfile::tempdir().unwrap();
        let patch = "From 1 Mon Sep 17 00:00:00 2001\nFrom: A <a@x>\nSubject: [PATCH] x\n\n---\n--- a/fs/exec.c\n+++ b/fs/exec.c\n@@ -1 +1 @@\n-a\n+b\n";
        std::fs::write(tmp.path().join("one.mbox"), patch).unwrap();
        let req = Request {
            series: vec![tmp.path().join("one.mbox")],
            profile: "premerge-icount".into(),
            ..Request::default()
        };
        let work = WorkDir::at(&tmp.path().join("work"));
        let seeds = [
            "static-doexec",
            "shared-doexec",
            "fork-exec",
            "fork-prlimit",
            "test-vmalloc",
        ];
        // the built-in matrix's real suites are run only where asked for
        let m = matrix(&req, &work).unwrap();
        assert_eq!(m.variants[1].benchmarks, seeds);
        let named = Request {
            bench: vec!["stress-pipe".into()],
            ..req.clone()
        };
        if crate::proc::which("stress-ng").is_some() {
            assert_eq!(matrix(&named, &work).unwrap().variants[1].benchmarks, ["stress-pipe"]);
        } else {
            let e = format!("{:#}", matrix(&named, &work).unwrap_err());
            assert!(e.contains("`stress-ng` is not installed on this host"), "{e}");
        }
    }

    #[test]
    fn a_request_becomes_base_against_base_plus_series() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().to_path_buf();
        let patch = "From: A <a@x>\nSubject: [PATCH] exec: slower\n\n---\n--- a/fs/exec.c\n+++ b/fs/exec.c\n@@ -1 +1 @@\n-a\n+b\n";
        std::fs::write(
            root.join("one.mbox"),
            format!("From 1234 Mon Sep 17 00:00:00 2001\n{patch}"),
        )
        .unwrap();
        let req = Request {
            series: vec![root.join("one.mbox")],
            profile: "exact".into(),
            vcpus: vec![4, 2, 4],
            bench: vec!["static-doexec".into()],
            boots: Some(3),
            floor: Some(0.01),
            ..Request::default()
        };
        let work = WorkDir::at(&root.join("work"));
        let m = matrix(&req, &work).unwrap();
        let names: Vec<&str> = m.variants.iter().map(|v| v.name.as_str()).collect();
        assert_eq!(names, ["base", "series"]);
        assert_eq!(m.variants[1].apply, vec!["series".to_string()]);
        assert_eq!(
            (m.vcpus.clone(), m.sampling.boots, m.statistics.threshold, m.guest.clock),
            (vec![2, 4], 3, 0.01, Clock::Icount)
        );
        assert_eq!(m.key_metrics, vec!["static-doexec".to_string()]);
        assert_eq!(m.profile.as_deref(), Some("try-exact"));
        let s = patch::load_series(&m.series_dir, SERIES).unwrap();
        assert_eq!(
            std::fs::read_to_string(&s.patches[0]).unwrap(),
            patch,
            "the message, byte for byte"
        );
        assert!(s.patches[0].ends_with("0001-exec-slower.patch"));
        let e = format!(
            "{:#}",
            matrix(
                &Request {
                    bench: vec!["nope".into()],
                    ..req.clone()
                },
                &work
            )
            .unwrap_err()
        );
        assert!(e.starts_with("--bench nope: the matrix has no such benchmark"), "{e}");
        let e = format!(
            "{:#}",
            matrix(
                &Request {
                    series: vec![],
                    ..req.clone()
                },
                &work
            )
            .unwrap_err()
        );
        assert!(e.starts_with("no series: name an mbox"), "{e}");
        assert_eq!(parse_clock("cycles").unwrap_err(), "`cycles` is not wall or icount");
        std::fs::remove_dir_all(root).ok();
    }

    #[test]
    fn preflight_names_the_patch_and_hunk_that_do_not_apply() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().to_path_buf();
        std::fs::create_dir_all(root.join("src/fs")).unwrap();
        std::fs::write(root.join("src/Makefile"), "VERSION = 6\n").unwrap();
        std::fs::write(root.join("src/fs/exec.c"), "one\ntwo\nthree\n").unwrap();
        let mut m = crate::config::parse(
            "variants:\n  - name: base\nvcpus: [2]\nbenchmarks:\n  - {name: d, kind: doexec}\n",
            &root.join("matrix.yaml"),
            None,
        )
        .unwrap();
        m.kernel.source = root.join("src");
        m.series_dir = root.join("patches");
        let mk = |old: &str| {
            let p = vec![(
                "0001-x.patch".to_string(),
                format!("--- a/fs/exec.c\n+++ b/fs/exec.c\n@@ -1,3 +1,3 @@\n one\n-{old}\n+TWO\n three\n").into_bytes(),
            )];
            series::write_quilt(&p, &m.series_dir, SERIES).unwrap();
        };
        mk("two");
        assert_eq!(preflight(&m, &root.join("scratch")).unwrap(), None);
        // a line in ISO-8859-1, as a patch saved from an old mail has it: read
        // as every patch reader reads it (it was refused as not UTF-8)
        let latin1 = b"--- a/fs/exec.c\n+++ b/fs/exec.c\n@@ -1,3 +1,3 @@\n one\n-two\n+caf\xe9\n three\n".to_vec();
        series::write_quilt(&[("0001-x.patch".to_string(), latin1)], &m.series_dir, SERIES).unwrap();
        assert_eq!(preflight(&m, &root.join("scratch")).unwrap(), None);
        mk("zwei");
        let why = preflight(&m, &root.join("scratch")).unwrap().unwrap();
        assert!(
            why.contains("does not apply")
                && why.contains("0001-x.patch")
                && why.ends_with("fs/exec.c: hunk #1 failed"),
            "{why}"
        );
        std::fs::remove_dir_all(root).ok();
    }

    #[test]
    fn failures_take_their_stage_from_the_records_not_the_words() {
        use crate::records::Failed;
        let build = Event::Build {
            variant: "series".into(),
            key: None,
            build_s: 0.0,
            cached: false,
            release: None,
            errors: vec!["x.c:1: error: y".into(), "x.c:2: error: z".into()],
            error: Some("the build did not finish".into()),
            failed: Some(Failed::new(Stage::Build, Cause::BuildTimeout)),
        };
        let lines = failure_lines(&build);
        assert_eq!(
            lines.iter().map(|l| l.text.as_str()).collect::<Vec<_>>(),
            ["series: the build did not finish", "series:   x.c:2: error: z"]
        );
        assert!(lines.iter().all(|l| l.unmade() && l.cause == Some(Cause::BuildTimeout)));
        let end = |error: &str, failed| Event::BootEnd {
            variant: "series".into(),
            vcpus: 2,
            boot: 1,
            boot_id: Some("series-2cpu-b1".into()),
            findings: vec![],
            error: Some(error.into()),
            busy_wall_per_guest_s: None,
            failed,
        };
        assert!(
            failure_lines(&end(
                "whatever it says",
                Some(Failed::new(Stage::Boot, Cause::NotBuilt))
            ))
            .is_empty(),
            "its build says why"
        );
        let cut = failure_lines(&end(
            "measure during d: guest stopped answering",
            Some(Failed::new(Stage::Benchmark, Cause::GuestHung)),
        ));
        assert_eq!((cut.len(), cut[0].stage, cut[0].unmade()), (1, Stage::Benchmark, false));
        let old = failure_lines(&end("boot failed: no SSH", None));
        assert_eq!(
            (old[0].stage, old[0].cause),
            (Stage::Boot, None),
            "a run recorded before causes still reads"
        );
    }
}
