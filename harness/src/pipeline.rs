//! `harness run`: carries every cell of a matrix through the real steps —
//! work tree, series, config, build, guest image, boot, benchmarks — and
//! records each outcome in the run directory as it happens. A failed patch,
//! build, boot or benchmark becomes an event and the matrix goes on; an
//! interruption stops at once, and `--resume` finishes the remaining boots.
//! Split over hosts, `harness build` makes every kernel once and each
//! `run --shard K/N` boots its share of the jobs from the kernel cache.
//! The kernels are made in [`variants`]; the accelerator (the KVM probe
//! stage) and the clock are chosen in [`accel`].

mod accel;
pub mod coverage;
mod guest_image;
use guest_image::{guest_parts, initrds, warn_guest_memory, GuestParts, Kernels};
mod parallel;
pub mod profile_boots;
mod profiling;
mod variants;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

use crate::boot::{self, BootRun, Learned};
use crate::config::Matrix;
use crate::host::{self, Host};
use crate::plan::{self, BootJob, CellKey, JobId, Shard};
use crate::proc;
use crate::records::{Cause, Event, Failed, RunMeta, Stage};
use crate::store::Run;
use crate::ui::Ui;
use crate::workdir::WorkDir;

pub use accel::{for_this_host, kvm_unusable, Plan, Restart};
pub use parallel::jobs_at_once;
pub use variants::{from_cache, Built};

/// How `run` was asked to go.
#[derive(Debug, Clone)]
pub struct Options {
    /// Work directory (tree, kernel cache, lock).
    pub work_dir: WorkDir,
    /// Where run directories go.
    pub runs_dir: PathBuf,
    /// Directory with the benchmark sources (`images/`).
    pub images_dir: PathBuf,
    /// No progress output.
    pub quiet: bool,
    /// Boot jobs at once (`--jobs`); `None`: the default for the clock.
    pub jobs: Option<u32>,
    /// Several boots at once even under a wall clock.
    pub allow_concurrent_wall: bool,
}

/// The label of a run's id: the profile, or the matrix file's name.
pub fn run_label(m: &Matrix) -> String {
    m.profile.clone().unwrap_or_else(|| {
        m.path
            .file_stem()
            .map(|s| s.to_string_lossy().replace('.', "-"))
            .unwrap_or_else(|| "run".into())
    })
}

/// Makes a run directory (a fresh id under the runs directory, or `at`)
/// and writes its `run.json`.
fn new_run(m: Matrix, opts: &Options, at: Option<&Path>) -> Result<(Run, RunMeta)> {
    std::fs::create_dir_all(&opts.runs_dir).with_context(|| format!("create {}", opts.runs_dir.display()))?;
    let inputs = crate::records::inputs::pin(&m, &opts.images_dir)?;
    let run = match at {
        Some(dir) => Run::create_at(dir)?,
        None => Run::create(&opts.runs_dir, &run_label(&m))?,
    };
    let qemu = host::qemu_binary()?;
    let meta = RunMeta {
        format_version: crate::records::FORMAT_VERSION,
        id: run.id.clone(),
        started: crate::util::now_rfc3339(),
        matrix: m,
        host: Host::here(&qemu),
        harness_revision: host::harness_revision(),
        clock: None,
        inputs: Some(inputs),
        jobs: None,
        uid: Some(crate::records::new_uid()),
        wall_lock: Some(host::wall::lock_path().display().to_string()),
    };
    run.write_meta(&meta)?;
    Ok((run, meta))
}

/// How [`start`] ended.
#[derive(Debug)]
pub enum Started {
    /// The run in this directory is done.
    Done(PathBuf),
    /// The probe boot found KVM unusable before any job booted: start
    /// again as the profile named (the run in `dir`, builds and the probe
    /// only, is given up).
    RestartAs {
        /// What to start instead, and why.
        restart: Restart,
        /// The given-up run directory.
        dir: PathBuf,
    },
}

/// Starts a new run of `m`; after a failed probe boot, a profile with
/// `without_kvm:` ends as [`Started::RestartAs`] for the caller to start
/// its substitute (`run` and `try` do).
pub fn start(m: Matrix, opts: &Options) -> Result<Started> {
    let plan = Plan::new(&m, &opts.work_dir, true)?;
    start_as(m, opts, &plan)
}

/// Starts the run of `m` (made for this host by [`for_this_host`]); when
/// its probe boot finds KVM unusable before anything booted
/// ([`Started::RestartAs`]), once more with the matrix `again` makes then
/// (the failed probe is remembered, so it is the profile's `without_kvm:`
/// substitute; the given-up run directory, builds and the probe only, is
/// removed). `run` and `try` start this way; the restart is said as a
/// notice.
pub fn start_for_this_host(m: Matrix, again: impl Fn() -> Result<Matrix>, opts: &Options) -> Result<PathBuf> {
    let (restart, dir) = match start(m, opts)? {
        Started::Done(dir) => return Ok(dir),
        Started::RestartAs { restart, dir } => (restart, dir),
    };
    crate::ui::notice(&format!(
        "{restart}; starting again as `{}` (the kernels are cached)",
        restart.instead
    ));
    std::fs::remove_dir_all(&dir).with_context(|| format!("remove the given-up run {}", dir.display()))?;
    start_fixed(again()?, opts)
}

/// Starts a new run of `m` that goes on under TCG after a failed probe
/// boot (`try --clock`, `bisect`, `calibrate`, the nightly).
pub fn start_fixed(m: Matrix, opts: &Options) -> Result<PathBuf> {
    let plan = Plan::new(&m, &opts.work_dir, false)?;
    match start_as(m, opts, &plan)? {
        Started::Done(dir) => Ok(dir),
        Started::RestartAs { dir, .. } => bail!("run {}: a plan without a restart restarted", dir.display()),
    }
}

/// A new run of `m` under `plan`.
fn start_as(m: Matrix, opts: &Options, plan: &Plan) -> Result<Started> {
    let _lock = work_lock(opts)?;
    let (run, meta) = new_run(m, opts, None)?;
    if let Some(restart) = execute(&run, &meta.matrix, opts, plan, &plan::boot_jobs(&meta.matrix), None)? {
        return Ok(Started::RestartAs { restart, dir: run.dir });
    }
    profile_boots::boot(&run, &meta, opts)?;
    coverage_step(&run, &meta.matrix, opts)?;
    Ok(Started::Done(run.dir))
}

/// Which benchmarks execute what each variant's series change
/// (`coverage.json`); a coverage that cannot be made is a notice, never
/// the run's failure.
fn coverage_step(run: &Run, m: &Matrix, opts: &Options) -> Result<()> {
    if let Err(e) = coverage::write(run, m, &opts.work_dir) {
        proc::check_interrupted()?;
        run.notice(
            &Ui::new(0, true),
            format!("which benchmarks execute the series' functions is unknown: {e:#}"),
        )?;
    }
    Ok(())
}

/// Finishes an interrupted run; a sharded one is refused (its shards
/// finish it: booting their jobs here would give two boots one id).
pub fn resume(dir: &Path, opts: &Options) -> Result<PathBuf> {
    let _lock = work_lock(opts)?;
    // decided under the run's lock, which a starting shard takes too
    let run = Run::open_to_write(dir)?;
    if let Some(s) = run.shard_dirs()?.first() {
        let n = s.shard.n;
        bail!("resume {}: it is split into shards (shards/{}-of-{n}): run them again with `harness run --shard K/{n} --run-dir {}`", dir.display(), s.shard.k, dir.display());
    }
    let (run, meta) = unchanged(run, opts)?;
    let opts = &as_started(opts, meta.jobs);
    execute_fixed(&run, &meta.matrix, opts, &plan::boot_jobs(&meta.matrix), None)?;
    profile_boots::boot(&run, &meta, opts)?;
    coverage_step(&run, &meta.matrix, opts)?;
    Ok(run.dir)
}

/// `opts` for resuming a run that booted `started` jobs at once: without
/// `--jobs` of its own, as many as the run did (its `--jobs`, or the
/// default it had; more than one under a wall clock was allowed then).
fn as_started(opts: &Options, started: Option<u32>) -> Options {
    let mut o = opts.clone();
    if let (None, Some(n)) = (o.jobs, started) {
        o.jobs = Some(n);
        o.allow_concurrent_wall |= n > 1;
    }
    o
}

/// The gate's second stage of a finished first stage (`run`/`try` with
/// `--gate` when the matrix plans one): the key cells its first stage sent
/// ([`report::second_stage_cells`], of the report with `floors`, those the
/// gate will judge with) boot again, base and their variants only, in the
/// seeded plan of [`plan::second_stage_jobs`]; jobs already done are
/// skipped, so a resumed run continues the second stage. Gives the cells
/// sent and the jobs planned.
pub fn second_stage(
    dir: &Path,
    opts: &Options,
    floors: impl FnOnce(&Run) -> Result<crate::report::Floors>,
) -> Result<(Vec<CellKey>, usize)> {
    let run = Run::open(dir)?;
    let meta = run.meta()?;
    if meta.matrix.statistics.second_stage_boots == 0 {
        return Ok((Vec::new(), 0));
    }
    let r = crate::report::build(&run, &floors(&run)?)?;
    let sent = crate::report::second_stage_cells(&r);
    let jobs = plan::second_stage_jobs(&meta.matrix, &sent);
    if !jobs.is_empty() {
        let _lock = work_lock(opts)?;
        let (run, meta) = open_again(dir, opts)?;
        execute_fixed(&run, &meta.matrix, opts, &jobs, None)?;
    }
    Ok((sent, jobs.len()))
}

/// Opens a run to write it again, refusing one whose inputs changed.
fn open_again(dir: &Path, opts: &Options) -> Result<(Run, RunMeta)> {
    unchanged(Run::open_to_write(dir)?, opts)
}

/// A run opened to write, refused when its inputs changed since it started.
fn unchanged(run: Run, opts: &Options) -> Result<(Run, RunMeta)> {
    let meta = run.meta()?;
    crate::records::inputs::check_unchanged(meta.inputs.as_ref(), &meta.matrix, &opts.images_dir, &run.dir)?;
    Ok((run, meta))
}

/// `harness build`: makes the run directory (or opens `at` again, its
/// inputs unchanged) and builds every variant into the kernel cache, with
/// no boot. Gives the run directory and each variant's outcome.
pub fn build(m: Matrix, opts: &Options, at: Option<&Path>) -> Result<(PathBuf, Built<String>)> {
    let _lock = work_lock(opts)?;
    let (run, meta) = match at {
        Some(dir) if dir.join("run.json").exists() => open_again(dir, opts)?,
        _ => new_run(m, opts, at)?,
    };
    let m = &meta.matrix;
    let ui = Ui::new(m.variants.len() as u64, opts.quiet);
    let all: BTreeSet<&str> = m.variants.iter().map(|v| v.name.as_str()).collect();
    let built = variants::build_variants(&run, m, opts, &all, &ui)?;
    ui.finish();
    let outcome = built.into_iter().map(|(v, r)| (v, r.map(|a| a.key))).collect();
    Ok((run.dir, outcome))
}

/// `harness run --shard K/N --run-dir DIR`: boots the shard's share of the
/// jobs of the run `harness build` made in `dir`, with kernels from the
/// cache only; run again, it goes on where it stopped. It shares the
/// work-directory lock (with other shards and runs; `gc --yes` waits), and its keys
/// and images go to `keys/<run-id>/shard-K-of-N/`.
pub fn shard(dir: &Path, shard: Shard, opts: &Options) -> Result<PathBuf> {
    let _lock = work_lock(opts)?;
    let run = Run::open_shard(dir, shard)?;
    let meta = run.meta()?;
    crate::records::inputs::check_benchmarks(meta.inputs.as_ref(), &opts.images_dir, &run.dir)?;
    let builds = Run::open(dir)?.own_events()?;
    let jobs = plan::shard_jobs(&meta.matrix, &plan::boot_jobs(&meta.matrix), shard);
    let h = Host::here(&host::qemu_binary()?);
    let msg = format!(
        "shard {shard}: {} boot job(s) on {} ({} CPUs, {} MiB, {})",
        jobs.len(),
        h.hostname,
        h.cpus,
        h.memory_mib,
        h.qemu
    );
    run.event(&Event::Notice { message: msg })?;
    execute_fixed(&run, &meta.matrix, opts, &jobs, Some(&builds))?;
    Ok(run.dir)
}

/// The work-directory lock for a run, a build or a shard: shared with
/// other runs (each takes its turn at the kernel tree and builds a cache key
/// under the key's own lock), it keeps `gc --yes` from deleting what they
/// use; waits out a `check` or `gc --yes` (a nightly should not fail on one).
fn work_lock(opts: &Options) -> Result<crate::workdir::WorkLock> {
    crate::workdir::WorkLock::share_waiting(
        &opts.work_dir,
        "run",
        crate::workdir::BRIEF_HOLDER_WAIT,
        crate::ui::notice,
    )
}

/// The run directory whose build events name `run`'s kernels: its own;
/// for profile boots, the run they belong to.
fn builds_dir(run: &Run) -> &Path {
    match run.dir.parent() {
        Some(up) if run.dir.ends_with(crate::store::PROFILE_BOOTS_DIR) => up,
        _ => &run.dir,
    }
}

/// Every job that ended.
type Ended = BTreeSet<JobId>;

/// Runs `jobs` of a run that is never started again (a resume, the second
/// stage, a shard, the profile boots): after a failed probe it goes on
/// under TCG.
fn execute_fixed(run: &Run, m: &Matrix, opts: &Options, jobs: &[BootJob], cached: Option<&[Event]>) -> Result<()> {
    let plan = Plan::new(m, &opts.work_dir, false)?;
    match execute(run, m, opts, &plan, jobs, cached)? {
        None => Ok(()),
        Some(r) => bail!("{}: a plan without a restart restarted ({r})", run.dir.display()),
    }
}

/// Runs `jobs` of the run under `plan`. Kernels are built, or with
/// `cached` (the build's events) only looked up in the kernel cache.
/// `Some`: the probe boot ended the run to be started again so.
fn execute(
    run: &Run,
    m: &Matrix,
    opts: &Options,
    plan: &Plan,
    jobs: &[BootJob],
    cached: Option<&[Event]>,
) -> Result<Option<Restart>> {
    let done = ended_jobs(run)?;
    let ui = Ui::new((m.variants.len() + jobs.len()) as u64, opts.quiet);
    let qemu = host::qemu_binary()?;
    plan.tell(run, &ui)?;
    warn_guest_memory(run, m, &ui)?;
    let guest = guest_parts(run, m, &opts.images_dir, &opts.work_dir, &ui)?;
    let needed: BTreeSet<&str> = jobs
        .iter()
        .filter(|j| !is_done(&done, j))
        .map(|j| j.variant.as_str())
        .collect();
    let arts = match cached {
        None => variants::built_before_or_now(run, m, opts, &needed, &ui)?,
        Some(events) => from_cache(events, &opts.work_dir, &needed, builds_dir(run))?,
    };
    let kernels = initrds(&guest, arts)?;
    let GuestParts { keys, .. } = guest;
    let mut ctx = BootRun {
        run,
        m,
        ui: &ui,
        qemu,
        key: keys.client,
        host_key: keys.host_public,
        host_cpus: host::cpus(),
        accel: plan.accel,
        profiler: None,
    };
    let mut learned = Learned {
        strikes: boot::Strikes::from_events(&run.events()?),
        ..Learned::default()
    };
    if plan.probe {
        match accel::probe_stage(&ctx, &kernels, &opts.work_dir, plan)? {
            accel::Probed::Accel(a) => ctx.accel = a,
            accel::Probed::RestartAs(r) => return Ok(Some(r)),
        }
    }
    accel::record_clock(run, ctx.clock())?;
    accel::record_host_state(&ctx)?;
    ctx.profiler = profiling::profiler(run, m, &ui, ctx.clock(), &kernels)?;
    let n = at_once(&ctx, opts)?;
    boot_all(&ctx, &mut learned, n, jobs, &kernels, &done)?;
    ui.finish();
    Ok(None)
}

/// How many boot jobs run at once, said at the start and written to
/// `run.json` (a shard's run.json is the build's: its notice says it).
fn at_once(ctx: &BootRun, opts: &Options) -> Result<u32> {
    let (cpus, mem) = (
        host::cpus(),
        host::memory_available_mib().unwrap_or_else(host::memory_total_mib),
    );
    let n = jobs_at_once(
        ctx.clock(),
        opts.jobs,
        opts.allow_concurrent_wall,
        cpus,
        mem,
        host::guest_need_mib(ctx.m.guest.memory_mib, ctx.m.vcpus.iter().copied().max().unwrap_or(1)),
    )?;
    let how = if opts.jobs.is_some() {
        "--jobs, or on --resume as many as the run started with"
    } else {
        "the default for the clock: under icount the host's CPUs and memory, else 1"
    };
    ctx.run.notice(
        ctx.ui,
        format!(
            "{n} boot job(s) at once under the {} clock ({how}; {cpus} CPUs, {mem} MiB available)",
            ctx.clock()
        ),
    )?;
    if ctx.run.shard.is_none() {
        let mut meta = ctx.run.meta()?;
        meta.jobs = Some(n);
        ctx.run.write_meta(&meta)?;
    }
    Ok(n)
}

fn ended_jobs(run: &Run) -> Result<Ended> {
    let ended = run.events()?.into_iter().filter_map(|e| match e {
        Event::BootEnd {
            variant, vcpus, boot, ..
        } => Some(JobId { variant, vcpus, boot }),
        _ => None,
    });
    Ok(ended.collect())
}

fn is_done(done: &Ended, job: &BootJob) -> bool {
    done.contains(&job.job_id())
}

/// Boots the jobs `n` at a time.
fn boot_all(
    ctx: &BootRun,
    learned: &mut Learned,
    n: u32,
    jobs: &[BootJob],
    kernels: &Kernels,
    done: &Ended,
) -> Result<()> {
    if n == 1 {
        return boot_jobs(ctx, learned, jobs, kernels, done);
    }
    // boots of one run at once under a wall clock (--allow-concurrent-wall) hold the host lock together
    let _wall = wall_lock(ctx)?;
    parallel::boot_at_once(ctx, learned, n, jobs, kernels, done)
}

/// Boots every job not done yet; a variant that was not built ends its
/// jobs with the reason.
fn boot_jobs(ctx: &BootRun, learned: &mut Learned, jobs: &[BootJob], kernels: &Kernels, done: &Ended) -> Result<()> {
    for job in jobs {
        if is_done(done, job) {
            ctx.ui.inc();
            continue;
        }
        proc::check_interrupted()?;
        let _wall = wall_lock(ctx)?;
        boot_one(ctx, learned, job, kernels, None)?;
        ctx.ui.inc();
    }
    Ok(())
}

/// Under a wall clock, the host-wide wall-clock lock ([`host::wall`]): a
/// wait for another run's boot is said when it begins, naming the holder,
/// and recorded as a notice with its length when it ends (the report
/// lists both). Icount boots take it shared.
fn wall_lock(ctx: &BootRun) -> Result<Option<host::wall::WallLock>> {
    let shared = ctx.clock() == crate::records::MeasureClock::TcgIcount;
    wall_lock_at(ctx, &host::wall::lock_path(), std::time::Duration::from_secs(1), shared)
}

/// [`wall_lock`] taken shared whatever the clock, for a boot that measures
/// nothing but loads the host (the KVM probe): it never runs beside
/// another run's wall-clock boot, and may run beside icount boots.
pub(super) fn wall_lock_unmeasured(ctx: &BootRun) -> Result<Option<host::wall::WallLock>> {
    wall_lock_at(ctx, &host::wall::lock_path(), std::time::Duration::from_secs(1), true)
}

/// [`wall_lock`] at `p`, tried every `poll`, `shared` or exclusive.
fn wall_lock_at(
    ctx: &BootRun,
    p: &Path,
    poll: std::time::Duration,
    shared: bool,
) -> Result<Option<host::wall::WallLock>> {
    let clock = ctx.clock();
    let what = format!("run {} ({clock} boot)", ctx.run.id);
    let (lock, waited) = host::wall::take(p, &what, shared, poll, |holder| {
        ctx.run.notice(
            ctx.ui,
            format!(
                "waiting for the host-wide wall-clock lock {} held by {holder}: one wall-clock measurement runs on a host at a time",
                p.display()
            ),
        )
    })?;
    if let Some(w) = waited {
        let msg = format!(
            "waited {:.0} s (monotonic clock) for the host-wide wall-clock lock {} held by {}",
            w.secs,
            p.display(),
            w.holder
        );
        ctx.run.notice(ctx.ui, msg)?;
    }
    Ok(Some(lock))
}

/// Boots one job (its QEMU started by `spawn` when given); a variant that
/// was not built ends the job with the reason.
fn boot_one(
    ctx: &BootRun,
    learned: &mut Learned,
    job: &BootJob,
    kernels: &Kernels,
    spawn: Option<boot::Spawner>,
) -> Result<()> {
    match kernels.get(&job.variant) {
        // gone since it was looked up (by hand: gc waits for the run): the host's, the job unrecorded
        Some(Ok((art, _))) if !art.boot_image(ctx.m.guest.pvh).is_file() => {
            Err(variants::gone(&job.variant, &art.key, &art.dir, builds_dir(ctx.run)).into())
        }
        Some(Ok((art, initrd))) => boot::run_job_spawning(ctx, learned, job, art, ctx.m.guest.pvh, initrd, spawn),
        Some(Err(e)) => ctx.run.event(&Event::BootEnd {
            variant: job.variant.clone(),
            vcpus: job.vcpus,
            boot: job.boot,
            boot_id: None,
            findings: vec![],
            error: Some(format!("variant not built: {e}")),
            busy_wall_per_guest_s: None,
            failed: Some(Failed::new(Stage::Boot, Cause::NotBuilt)),
        }),
        None => bail!("find a kernel for variant {}", job.variant),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::build::Artifact;
    use crate::testutil::{scratch, write};

    /// A fake kernel source at `root/<src>` (its Makefile `makefile`), the
    /// one-variant matrix of it, and the options of a harness working under
    /// `root`.
    pub(super) fn fake_kernel(root: &Path, src: &str, makefile: &str) -> (Matrix, Options) {
        write(&root.join(src).join("Makefile"), makefile);
        let yaml = format!(
            "kernel:\n  source: {}\n  fragments: []\nvariants:\n  - name: base\nvcpus: [2]\nbenchmarks:\n  - {{name: d, kind: doexec}}\n",
            root.join(src).display()
        );
        let m = crate::config::parse(&yaml, &root.join("matrix.yaml"), None).unwrap();
        let opts = Options {
            work_dir: WorkDir::at(&root.join("work")),
            runs_dir: root.join("runs"),
            images_dir: root.join("images"),
            quiet: true,
            jobs: None,
            allow_concurrent_wall: false,
        };
        (m, opts)
    }

    /// Issue 47: `--resume` without `--jobs` boots as many at once as the
    /// run started with (its `--jobs`, or its default then); `--jobs` wins.
    #[test]
    fn a_resume_keeps_the_jobs_the_run_started_with() {
        let opts = |jobs| Options {
            work_dir: WorkDir::at(Path::new("w")),
            runs_dir: "r".into(),
            images_dir: "i".into(),
            quiet: true,
            jobs,
            allow_concurrent_wall: false,
        };
        let cases = [
            (None, Some(1), Some(1), false),
            (None, Some(3), Some(3), true),
            (Some(2), Some(3), Some(2), false),
            (None, None, None, false),
        ];
        for (asked, started, jobs, allow) in cases {
            let o = as_started(&opts(asked), started);
            assert_eq!(
                (o.jobs, o.allow_concurrent_wall),
                (jobs, allow),
                "{asked:?} {started:?}"
            );
        }
    }

    /// A boot context of `run` for tests that never start QEMU.
    fn test_ctx<'a>(run: &'a Run, m: &'a Matrix, ui: &'a Ui, accel: crate::vm::Accel) -> BootRun<'a> {
        BootRun {
            run,
            m,
            ui,
            qemu: "qemu-system-x86_64".into(),
            key: "/nonexistent/key".into(),
            host_key: String::new(),
            host_cpus: 2,
            accel,
            profiler: None,
        }
    }

    /// The run's notices, in order.
    fn notices(run: &Run) -> Vec<String> {
        run.events()
            .unwrap()
            .into_iter()
            .filter_map(|e| match e {
                Event::Notice { message } => Some(message),
                _ => None,
            })
            .collect()
    }

    /// Issue 14: a shard takes kernels from the cache by the build's keys
    /// and never builds: a variant that failed to build (or was never
    /// built) fails its jobs with the reason. Issue 30: a kernel the build
    /// made that the cache lost is the host's fault, never the variant's.
    #[test]
    fn shards_find_kernels_only_in_the_cache() {
        let tmp = tempfile::tempdir().unwrap();
        let work = tmp.path().to_path_buf();
        let wd = WorkDir::at(&work);
        let kept = work.join("kernels/k1");
        write(&kept.join("bzImage"), "");
        let art = Artifact {
            key: "k1".into(),
            dir: kept.clone(),
            bzimage: kept.join("bzImage"),
            vmlinux: kept.join("vmlinux"),
            modules: None,
            release: "6.12".into(),
            build_s: 1.0,
            nr_cpus: None,
        };
        crate::kernel::build::write_entry(&kept, &art).unwrap();
        let build = |v: &str, key: Option<&str>, error: Option<&str>| Event::Build {
            variant: v.into(),
            key: key.map(String::from),
            build_s: 0.0,
            cached: false,
            release: None,
            errors: vec![],
            error: error.map(String::from),
            failed: None,
        };
        let events = vec![
            build("base", Some("k1"), None),
            build("gone", Some("k2"), None),
            build("broken", Some("k3"), Some("build failed: x.c:1: error: y")),
            Event::Patch {
                variant: "conflicts".into(),
                failure: None,
                error: Some("apply series s: conflicts".into()),
                failed: None,
            },
        ];
        let run_dir = work.join("runs/r");
        let needed: BTreeSet<&str> = ["base", "broken", "conflicts", "never"].into();
        let got = from_cache(&events, &wd, &needed, &run_dir).unwrap();
        assert_eq!(got["base"].as_ref().unwrap().key, "k1");
        let missing = "kernel not in the cache: run `harness build` first";
        assert_eq!(got["never"].as_ref().unwrap_err(), missing);
        assert_eq!(got["broken"].as_ref().unwrap_err(), "build failed: x.c:1: error: y");
        assert_eq!(got["conflicts"].as_ref().unwrap_err(), "apply series s: conflicts");
        assert!(!work.join("tree").exists(), "a shard made a work tree");
        let needed: BTreeSet<&str> = ["base", "gone"].into();
        let e = from_cache(&events, &wd, &needed, &run_dir).unwrap_err();
        assert!(crate::kernel::fault::is_host_fault(&e), "{e:#}");
        let text = format!("{e:#}");
        assert!(
            text.contains("variant gone: its kernel k2 is not in the kernel cache")
                && text.contains(&format!("harness build --run-dir {}", run_dir.display())),
            "{text}"
        );
    }

    /// Issue 30: a kernel deleted after it was looked up stops the boots
    /// with a host fault before QEMU starts, the job unrecorded, so a
    /// resume (or the shard run again) boots it once it is rebuilt.
    #[test]
    fn a_kernel_gone_at_boot_time_is_a_host_fault_and_leaves_the_job_to_boot() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        // icount: its boots take the host-wide wall-clock lock shared, so
        // another run's icount boots on this host do not make it wait (and
        // record the wait)
        let yaml = "variants:\n  - name: base\nvcpus: [2]\nbenchmarks:\n  - {name: s, kind: doexec, timeout_s: 60}\n\
                    sampling: {boots: 2, repetitions: 1}\nguest: {clock: icount}\n";
        let m = crate::config::parse(yaml, &dir.join("matrix.yaml"), None).unwrap();
        let run = Run::create(dir, "t").unwrap();
        let ui = Ui::new(0, true);
        let ctx = test_ctx(&run, &m, &ui, crate::vm::Accel::Tcg);
        let entry = dir.join("work/kernels/k1");
        let art = Artifact {
            key: "k1".into(),
            dir: entry.clone(),
            bzimage: entry.join("bzImage"),
            vmlinux: entry.join("vmlinux"),
            modules: None,
            release: "6.12".into(),
            build_s: 1.0,
            nr_cpus: None,
        };
        let kernels: Kernels = [("base".to_string(), Ok((art, dir.join("base.cpio"))))].into();
        let jobs = plan::boot_jobs(&m);
        let e = boot_jobs(&ctx, &mut Learned::default(), &jobs, &kernels, &Ended::new()).unwrap_err();
        assert!(crate::kernel::fault::is_host_fault(&e), "{e:#}");
        assert!(
            format!("{e:#}").contains("its kernel k1 is not in the kernel cache"),
            "{e:#}"
        );
        assert!(run.events().unwrap().is_empty(), "nothing recorded against the variant");
        assert!(ended_jobs(&run).unwrap().is_empty(), "every job is left to boot");
    }

    /// Issue 11 items 9 and 11: `--resume` refuses a run another harness is
    /// writing (naming its pid) and a run whose inputs changed (naming them).
    #[test]
    fn resume_refuses_a_locked_run_and_changed_inputs() {
        let root = scratch("resume");
        write(&root.join("src/Makefile"), "VERSION = 6\n");
        write(&root.join("frag.config"), "CONFIG_A=y\n");
        write(&root.join("images/doexec.c"), "int main(void) { return 0; }\n");
        let yaml = format!(
            "kernel:\n  source: {}\n  fragments: [frag.config]\nvariants:\n  - name: base\nvcpus: [2]\nbenchmarks:\n  - {{name: d, kind: doexec}}\n",
            root.join("src").display()
        );
        let m = crate::config::parse(&yaml, &root.join("matrix.yaml"), None).unwrap();
        let writer = Run::create(&root.join("runs"), "t").unwrap();
        let meta = RunMeta {
            uid: None,
            wall_lock: None,
            format_version: crate::records::FORMAT_VERSION,
            id: writer.id.clone(),
            started: crate::util::now_rfc3339(),
            inputs: Some(crate::records::inputs::pin(&m, &root.join("images")).unwrap()),
            matrix: m,
            host: crate::records::Host::default(),
            harness_revision: None,
            clock: None,
            jobs: None,
        };
        writer.write_meta(&meta).unwrap();
        let opts = |w: &str| Options {
            work_dir: WorkDir::at(&root.join(w)),
            runs_dir: root.join("runs"),
            images_dir: root.join("images"),
            quiet: true,
            jobs: None,
            allow_concurrent_wall: false,
        };
        // another work directory resumes the run while its writer lives
        let e = format!("{:#}", resume(&writer.dir, &opts("work-b")).unwrap_err());
        assert!(
            e.contains(&format!(
                "another harness (pid {}, harness run) is writing it",
                std::process::id()
            )),
            "{e}"
        );
        let dir = writer.dir.clone();
        drop(writer);
        crate::util::wait_until_released(&dir.join("lock"));
        write(&root.join("frag.config"), "CONFIG_A=n\n");
        let e = format!("{:#}", resume(&dir, &opts("work-a")).unwrap_err());
        assert!(
            e.contains(&format!(
                "inputs changed since it started (fragment {} changed)",
                root.join("frag.config").display()
            )),
            "{e}"
        );
        // a sharded run is finished by its shards: a plain resume would boot their jobs again under the same boot ids
        drop(Run::open_shard(&dir, Shard { k: 0, n: 2 }).unwrap());
        let e = format!("{:#}", resume(&dir, &opts("work-a")).unwrap_err());
        assert!(
            e.contains(
                "it is split into shards (shards/0-of-2): run them again with `harness run --shard K/2 --run-dir"
            ),
            "{e}"
        );
        std::fs::remove_dir_all(root).ok();
    }

    /// Issue 22 item 3: a build the host failed (out of disk) stops
    /// `harness build` with the host named and records nothing against the
    /// variant; the same run built again once the host is mended builds it.
    #[test]
    fn a_build_the_host_failed_is_built_again_when_the_run_goes_on() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        let full = "tinyconfig olddefconfig:\n\ttouch .config\nbzImage vmlinux &:\n\techo 'ld: final link failed: No space left on device'; exit 1\n";
        write(&root.join("images/doexec.c"), "int main(void) { return 0; }\n");
        write(&root.join("images/forkprlimit.c"), "int main(void) { return 0; }\n");
        let (m, opts) = fake_kernel(root, "src", full);
        let dir = root.join("runs/r");
        let e = format!(
            "{:#}",
            build(m.clone(), &opts, Some(&dir)).expect_err("a full disk stops the build")
        );
        assert!(
            e.contains("the host failed, not the kernel (no space left on device"),
            "{e}"
        );
        let builds = |d: &Path| {
            Run::open(d)
                .unwrap()
                .events()
                .unwrap()
                .into_iter()
                .filter(|e| matches!(e, Event::Build { .. }))
                .count()
        };
        assert_eq!(builds(&dir), 0, "the host's failure was recorded against the variant");
        // the disk freed: the source is unchanged (a copy of it is built), so mend the work tree's Makefile
        let tree = std::fs::read_dir(root.join("work/tree"))
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .find(|p| p.is_dir())
            .unwrap();
        let ok = "tinyconfig olddefconfig:\n\ttouch .config\nbzImage vmlinux &:\n\tmkdir -p arch/x86/boot include/config\n\techo i > arch/x86/boot/bzImage\n\techo e > vmlinux\n\techo 6.12.0 > include/config/kernel.release\n";
        std::fs::write(tree.join("Makefile"), ok).unwrap();
        let (_, built) = build(m, &opts, Some(&dir)).unwrap();
        assert!(built["base"].is_ok(), "{built:?}");
        assert_eq!(builds(&dir), 1);
        let meta = Run::open(&dir).unwrap().meta().unwrap();
        let lock = host::wall::lock_path().display().to_string();
        assert_eq!(
            meta.wall_lock,
            Some(lock),
            "run.json names the host-wide lock its boots take"
        );
    }

    /// Issue 30 item 2: a wall-clock boot waits for another run's hold on
    /// the host-wide lock, and the wait (holder, seconds) is in the run's
    /// events; an icount boot (which takes it shared) waits for it too.
    #[test]
    fn a_wall_clock_boot_waits_for_another_runs_lock_and_records_it() {
        let tmp = tempfile::tempdir().unwrap();
        let lock = tmp.path().join("wall.lock");
        let ui = Ui::new(0, true);
        for clock in ["wall", "icount"] {
            let yaml = format!(
                "variants:\n  - name: base\nvcpus: [2]\nguest: {{clock: {clock}}}\nbenchmarks:\n  - {{name: s, kind: doexec}}\n"
            );
            let m = crate::config::parse(&yaml, &tmp.path().join("matrix.yaml"), None).unwrap();
            let run = Run::create(tmp.path(), clock).unwrap();
            let ctx = test_ctx(&run, &m, &ui, crate::vm::Accel::Tcg);
            let other = crate::util::Flock::try_take(&lock, "run other (kvm-wall boot)")
                .unwrap()
                .unwrap();
            let release = std::thread::spawn(move || {
                std::thread::sleep(std::time::Duration::from_millis(200));
                drop(other);
            });
            let held = wall_lock_at(&ctx, &lock, std::time::Duration::from_millis(5), clock == "icount").unwrap();
            release.join().unwrap();
            let notes = notices(&run);
            assert!(held.is_some(), "{clock}");
            {
                let holder = format!("held by pid {}, harness run other (kvm-wall boot)", std::process::id());
                assert_eq!(notes.len(), 2, "{notes:?}");
                assert!(
                    notes[0].starts_with("waiting for the host-wide wall-clock lock") && notes[0].contains(&holder),
                    "{notes:?}"
                );
                assert!(
                    notes[1].starts_with("waited ") && notes[1].contains(&holder),
                    "{notes:?}"
                );
            }
            drop(held);
            crate::util::wait_until_released(&lock);
        }
    }

    /// The KVM probe measures nothing but loads the host: it takes the lock
    /// shared whatever the run's clock, so it starts beside an icount
    /// run's boots and waits while a wall-clock boot holds the lock.
    #[test]
    fn an_unmeasured_boot_takes_the_lock_shared_under_a_wall_clock() {
        let tmp = tempfile::tempdir().unwrap();
        let lock = tmp.path().join("wall.lock");
        let ui = Ui::new(0, true);
        let yaml =
            "variants:\n  - name: base\nvcpus: [2]\nguest: {clock: wall}\nbenchmarks:\n  - {name: s, kind: doexec}\n";
        let m = crate::config::parse(yaml, &tmp.path().join("matrix.yaml"), None).unwrap();
        let run = Run::create(tmp.path(), "probe").unwrap();
        let ctx = test_ctx(&run, &m, &ui, crate::vm::Accel::Kvm);
        assert_eq!(ctx.clock(), crate::records::MeasureClock::KvmWall);
        let icount = host::wall::take(
            &lock,
            "run other (tcg-icount boot)",
            true,
            std::time::Duration::from_millis(5),
            |_| Ok(()),
        )
        .unwrap();
        let probe = wall_lock_at(&ctx, &lock, std::time::Duration::from_millis(5), true).unwrap();
        assert!(probe.is_some());
        assert_eq!(
            notices(&run),
            Vec::<String>::new(),
            "beside an icount holder the probe does not wait"
        );
        drop((probe, icount));
        crate::util::wait_until_released(&lock);
        let wall = crate::util::Flock::try_take(&lock, "run other (kvm-wall boot)")
            .unwrap()
            .unwrap();
        let release = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(200));
            drop(wall);
        });
        let probe = wall_lock_at(&ctx, &lock, std::time::Duration::from_millis(5), true).unwrap();
        release.join().unwrap();
        assert!(probe.is_some());
        assert_eq!(
            notices(&run).len(),
            2,
            "under a wall-clock holder the probe waits, and says so"
        );
    }
}
