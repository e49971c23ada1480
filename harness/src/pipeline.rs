//! `harness run`: carries every cell of a matrix through the real steps —
//! work tree, series, config, build, guest image, boot, benchmarks — and
//! records each outcome in the run directory as it happens. A failed patch,
//! build, boot or benchmark becomes an event and the matrix goes on; an
//! interruption stops at once, and `--resume` finishes the remaining boots.
//! Split over hosts, `harness build` makes every kernel once and each
//! `run --shard K/N` boots its share of the jobs from the kernel cache.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context, Result};

use crate::bench;
use crate::boot::{self, BootCtx, Pace};
use crate::config::{AccelChoice, Clock, Matrix, Variant};
use crate::image::{self, Archive};
use crate::kernel::build::{self, Artifact};
use crate::kernel::patch::{self, State};
use crate::kernel::tree::Tree;
use crate::plan::{self, BootJob, Shard};
use crate::proc::{self, Cmd};
use crate::records::{Event, Host, RunMeta};
use crate::store::Run;
use crate::ui::Ui;
use crate::vm::{self, Accel, MeasureClock};

/// How `run` was asked to go.
#[derive(Debug, Clone)]
pub struct Options {
    /// Work directory (tree, kernel cache, lock).
    pub work_dir: PathBuf,
    /// Where run directories go.
    pub runs_dir: PathBuf,
    /// Directory with the benchmark sources (`images/`).
    pub images_dir: PathBuf,
    /// No progress output.
    pub quiet: bool,
}

/// Host facts for run.json.
pub fn host_facts(qemu: &Path) -> Host {
    let read = |p: &str| std::fs::read_to_string(p).unwrap_or_default().trim().to_string();
    let mem_kib: u64 = read("/proc/meminfo")
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:").and_then(|r| r.split_whitespace().next()?.parse().ok()))
        .unwrap_or(0);
    let qemu_version = Cmd::new(qemu).arg("--version").capture().run().map(|f| f.output.lines().next().unwrap_or("").to_string()).unwrap_or_default();
    Host {
        hostname: read("/proc/sys/kernel/hostname"),
        cpus: host_cpus(),
        memory_mib: mem_kib / 1024,
        kernel: read("/proc/sys/kernel/osrelease"),
        qemu: qemu_version,
    }
}

/// Online host CPUs.
pub fn host_cpus() -> u32 {
    std::thread::available_parallelism().map(|n| n.get() as u32).unwrap_or(1)
}

/// The QEMU binary.
pub fn qemu_binary() -> Result<PathBuf> {
    proc::which("qemu-system-x86_64").context("find qemu-system-x86_64: run harness/scripts/setup-host.sh (QEMU 10 from bookworm-backports)")
}

fn harness_revision() -> Option<String> {
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    Cmd::new("git").arg("-C").arg(here).args(["rev-parse", "--short", "HEAD"]).capture().run().ok().filter(|f| f.success()).map(|f| f.output.trim().to_string())
}

/// The label of a run's id: the profile, or the matrix file's name.
pub fn run_label(m: &Matrix) -> String {
    m.profile.clone().unwrap_or_else(|| m.path.file_stem().map(|s| s.to_string_lossy().replace('.', "-")).unwrap_or_else(|| "run".into()))
}

/// Makes a run directory (a fresh id under the runs directory, or `at`)
/// and writes its `run.json`.
fn new_run(m: Matrix, opts: &Options, at: Option<&Path>) -> Result<(Run, RunMeta)> {
    std::fs::create_dir_all(&opts.runs_dir).with_context(|| format!("create {}", opts.runs_dir.display()))?;
    let inputs = crate::records::inputs::pin(&m)?;
    let run = match at {
        Some(dir) => Run::create_at(dir)?,
        None => Run::create(&opts.runs_dir, &run_label(&m))?,
    };
    let qemu = qemu_binary()?;
    let meta = RunMeta {
        format_version: crate::records::FORMAT_VERSION,
        id: run.id.clone(),
        started: crate::util::now_rfc3339(),
        matrix: m,
        host: host_facts(&qemu),
        harness_revision: harness_revision(),
        clock: None,
        inputs: Some(inputs),
    };
    run.write_meta(&meta)?;
    Ok((run, meta))
}

/// Starts a new run of `m`.
pub fn start(m: Matrix, opts: &Options) -> Result<PathBuf> {
    let _lock = work_lock(opts)?;
    let (run, meta) = new_run(m, opts, None)?;
    execute(&run, &meta.matrix, opts, &plan::boot_jobs(&meta.matrix), None)?;
    Ok(run.dir)
}

/// Finishes an interrupted run.
pub fn resume(dir: &Path, opts: &Options) -> Result<PathBuf> {
    let _lock = work_lock(opts)?;
    let (run, meta) = open_again(dir)?;
    execute(&run, &meta.matrix, opts, &plan::boot_jobs(&meta.matrix), None)?;
    Ok(run.dir)
}

/// Opens a run to write it again, refusing one whose inputs changed.
fn open_again(dir: &Path) -> Result<(Run, RunMeta)> {
    let run = Run::open_to_write(dir)?;
    let meta = run.meta()?;
    crate::records::inputs::check_unchanged(meta.inputs.as_ref(), &meta.matrix, &run.dir)?;
    Ok((run, meta))
}

/// `harness build`: makes the run directory (or opens `at` again, its
/// inputs unchanged) and builds every variant into the kernel cache, with
/// no boot. Gives the run directory and each variant's outcome.
pub fn build(m: Matrix, opts: &Options, at: Option<&Path>) -> Result<(PathBuf, Built<String>)> {
    let _lock = work_lock(opts)?;
    let (run, meta) = match at {
        Some(dir) if dir.join("run.json").exists() => open_again(dir)?,
        _ => new_run(m, opts, at)?,
    };
    let m = &meta.matrix;
    let ui = Ui::new(m.variants.len() as u64, opts.quiet);
    let all: BTreeSet<&str> = m.variants.iter().map(|v| v.name.as_str()).collect();
    let built = build_variants(&run, m, opts, &all, &ui)?;
    ui.finish();
    let outcome = built.into_iter().map(|(v, r)| (v, r.map(|a| a.key))).collect();
    Ok((run.dir, outcome))
}

/// `harness run --shard K/N --run-dir DIR`: boots the shard's share of the
/// jobs of the run `harness build` made in `dir`, with kernels from the
/// cache only; run again, it goes on where it stopped. It takes no
/// work-directory lock (shards on one host share the cache), and its keys
/// and images go to `keys/<run-id>/shard-K-of-N/`.
pub fn shard(dir: &Path, shard: Shard, opts: &Options) -> Result<PathBuf> {
    let run = Run::open_shard(dir, shard)?;
    let meta = run.meta()?;
    let builds = Run::open(dir)?.own_events()?;
    let jobs = plan::shard_jobs(&meta.matrix, &plan::boot_jobs(&meta.matrix), shard);
    let h = host_facts(&qemu_binary()?);
    let msg = format!("shard {shard}: {} boot job(s) on {} ({} CPUs, {} MiB, {})", jobs.len(), h.hostname, h.cpus, h.memory_mib, h.qemu);
    run.event(&Event::Notice { message: msg })?;
    execute(&run, &meta.matrix, opts, &jobs, Some(&builds))?;
    Ok(run.dir)
}

/// The work-directory lock for a run: waits out a `check` or `gc --yes`
/// (a nightly should not fail on one), refuses another run.
fn work_lock(opts: &Options) -> Result<crate::workdir::WorkLock> {
    crate::workdir::WorkLock::acquire_waiting(&opts.work_dir, "run", crate::workdir::BRIEF_HOLDER_WAIT, crate::ui::notice)
}

/// `work/keys/<run-id>/`: a run's private keys and the initramfs images
/// that carry its host key. Never under `runs/`, which travels with
/// archived runs.
pub fn private_dir(work: &Path, run_id: &str) -> PathBuf {
    work.join("keys").join(run_id)
}

/// Per variant, what was made (a kernel, its cache key) or why it was not.
pub type Built<T> = BTreeMap<String, Result<T, String>>;

/// Each variant's kernel and initramfs, or why it could not be made.
type Kernels = BTreeMap<String, Result<(Artifact, PathBuf), String>>;

/// A remembered failed KVM probe.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
struct FailedProbe {
    key: String,
    when: String,
    reason: String,
}

fn probe_path(work: &Path) -> PathBuf {
    work.join("kvm-probe.json")
}

/// Host kernel and QEMU version: a failed probe holds until either changes.
fn kvm_probe_key(qemu: &Path) -> String {
    let h = host_facts(qemu);
    format!("{} / {}", h.kernel, h.qemu)
}

fn load_probe(work: &Path, key: &str) -> Option<FailedProbe> {
    let p: FailedProbe = serde_json::from_slice(&std::fs::read(probe_path(work)).ok()?).ok()?;
    (p.key == key).then_some(p)
}

/// Runs `jobs` of the run. Kernels are built, or with `cached` (the
/// build's events) only looked up in the kernel cache.
fn execute(run: &Run, m: &Matrix, opts: &Options, jobs: &[BootJob], cached: Option<&[Event]>) -> Result<()> {
    let done: BTreeSet<(String, u32, u32)> = run
        .events()?
        .into_iter()
        .filter_map(|e| match e {
            Event::BootEnd { variant, vcpus, boot, .. } => Some((variant, vcpus, boot)),
            _ => None,
        })
        .collect();
    let ui = Ui::new((m.variants.len() + jobs.len()) as u64, opts.quiet);
    let qemu = qemu_binary()?;

    let probe_key = kvm_probe_key(&qemu);
    let accel = first_accel(m, run, &ui, &opts.work_dir, &probe_key)?;

    // benchmarks that will not fit in the guest's memory (test_vmalloc's need
    // grows with threads and CPUs)
    for &n in &m.vcpus {
        for b in &m.benchmarks {
            let need = bench::memory_need_mib(b, n) + 128;
            if need > m.guest.memory_mib {
                let msg = format!(
                    "{} at {n} vCPUs needs ~{need} MiB of guest memory but guest.memory_mib is {}; expect failures or lower its threads/workers",
                    b.name, m.guest.memory_mib
                );
                ui.notice(&msg);
                run.event(&Event::Notice { message: msg })?;
            }
        }
    }

    // guest image parts shared by every kernel
    ui.stage("image", "compiling benchmarks, making the SSH keys");
    let benches = image::compile_benchmarks(&opts.images_dir, &run.records().join("image/bin"), &run.log("image.log"))?;
    // private keys, and the images that hold the host key, stay in the work directory
    let img_dir = match run.shard {
        Some(s) => private_dir(&opts.work_dir, &run.id).join(format!("shard-{}-of-{}", s.k, s.n)),
        None => private_dir(&opts.work_dir, &run.id),
    };
    let keys = image::make_keys(&img_dir, &run.log("image.log"))?;
    let common = image::common_archive(&image::HostBins::find()?, &benches, &keys)?.to_cpio();

    // kernels
    let needed: BTreeSet<&str> = jobs.iter().filter(|j| !done.contains(&(j.variant.clone(), j.vcpus, j.boot))).map(|j| j.variant.as_str()).collect();
    let arts = match cached {
        None => build_variants(run, m, opts, &needed, &ui)?,
        Some(events) => from_cache(events, &opts.work_dir, &needed),
    };
    let mut kernels: Kernels = BTreeMap::new();
    for (name, art) in arts {
        let r = match art {
            Ok(art) => {
                let initrd = img_dir.join(format!("{name}.cpio"));
                let mut data = common.clone();
                if let Some(mods) = &art.modules {
                    data.extend(image::modules_archive(mods, &art.release)?.to_cpio());
                } else {
                    data.extend(Archive::default().to_cpio());
                }
                std::fs::write(&initrd, data).with_context(|| format!("write {}", initrd.display()))?;
                Ok((art, initrd))
            }
            Err(e) => Err(e),
        };
        kernels.insert(name, r);
    }

    let mut ctx = BootCtx { run, m, ui: &ui, qemu, key: keys.client, host_key: keys.host_public, host_cpus: host_cpus(), accel, pace: Pace::default() };
    if accel == Accel::Kvm && m.guest.accel == AccelChoice::Auto {
        ctx.accel = probe_stage(&ctx, &kernels, &opts.work_dir, &probe_key)?;
    }
    record_clock(run, ctx.clock())?;
    for job in jobs {
        if done.contains(&(job.variant.clone(), job.vcpus, job.boot)) {
            ui.inc();
            continue;
        }
        proc::check_interrupted()?;
        match kernels.get(&job.variant) {
            Some(Ok((art, initrd))) => boot::run_job(&mut ctx, job, art, boots_pvh(m, art), initrd)?,
            Some(Err(e)) => run.event(&Event::BootEnd {
                variant: job.variant.clone(),
                vcpus: job.vcpus,
                boot: job.boot,
                boot_id: None,
                findings: vec![],
                error: Some(format!("variant not built: {e}")),
                busy_wall_per_guest_s: None,
            })?,
            None => bail!("find a kernel for variant {}", job.variant),
        }
        ui.inc();
    }
    ui.finish();
    Ok(())
}

/// The work tree, the series' states, then every variant in `needed`
/// patched, configured and built (or found in the cache), each outcome
/// recorded. A variant with `ref:` is built in the work clone checked out at
/// that commit, its series judged against it. `Err` stops the run; a variant
/// that failed is an `Err` entry.
fn build_variants(run: &Run, m: &Matrix, opts: &Options, needed: &BTreeSet<&str>, ui: &Ui) -> Result<Built<Artifact>> {
    ui.stage("tree", &format!("preparing {}", m.kernel.source.display()));
    let base_ref = m.variant("base").and_then(|b| b.git_ref.clone());
    let tree = variant_tree(m, base_ref.as_deref(), &opts.work_dir, &run.log("tree.log"))?;
    // series states against the base
    let states = classify(m, &m.series_names(), &tree, &opts.work_dir)?;
    for (s, st) in &states {
        run.event(&Event::Series { series: s.clone(), state: st.clone() })?;
    }
    let mut out = BTreeMap::new();
    for v in &m.variants {
        proc::check_interrupted()?;
        if !needed.contains(v.name.as_str()) {
            ui.inc();
            continue;
        }
        ui.stage("build", &v.name);
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
        let r = make_variant(run, m, &tree, v, states, &opts.work_dir, ui);
        tree.rollback(&run.log("tree.log"))?;
        out.insert(v.name.clone(), r?);
        ui.inc();
    }
    Ok(out)
}

/// What the cache holds for each variant in `needed`, by the key of the
/// variant's last build event; never builds.
pub fn from_cache(builds: &[Event], work: &Path, needed: &BTreeSet<&str>) -> Built<Artifact> {
    let mut last: BTreeMap<&str, (&Option<String>, &Option<String>)> = BTreeMap::new();
    let mut failed: BTreeMap<&str, &str> = BTreeMap::new();
    for e in builds {
        match e {
            Event::Build { variant, key, error, .. } => {
                last.insert(variant, (key, error));
            }
            Event::Patch { variant, error: Some(err), .. } | Event::Config { variant, error: Some(err), .. } => {
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
                (Some((_, Some(err))), _) => Err(err.clone()),
                (Some((Some(key), None)), _) => build::cached(work, key).ok_or_else(missing),
                (_, Some(err)) => Err(err.to_string()),
                _ => Err(missing()),
            };
            (v.to_string(), r)
        })
        .collect()
}

/// The work tree of a variant: the source's own copy, or with `ref:` the
/// work clone checked out at that commit.
fn variant_tree(m: &Matrix, git_ref: Option<&str>, work: &Path, log: &Path) -> Result<Tree> {
    match git_ref {
        Some(r) => Tree::prepare_ref(&m.kernel.source, r, work, log),
        None => Tree::prepare(&m.kernel.source, work, log),
    }
}

/// The state of each named series against `tree`.
fn classify(m: &Matrix, names: &[String], tree: &Tree, work: &Path) -> Result<BTreeMap<String, State>> {
    let mut states = BTreeMap::new();
    for s in names {
        let series = patch::load_series(&m.series_dir, s)?;
        states.insert(s.clone(), patch::classify(&tree.dir, &series, &work.join("scratch"))?);
    }
    Ok(states)
}

/// Boots `vmlinux` through PVH when the matrix asks and the kernel has it.
fn boots_pvh(m: &Matrix, art: &Artifact) -> bool {
    m.guest.pvh && std::fs::read_to_string(art.dir.join("config")).map(|c| c.contains("\nCONFIG_PVH=y")).unwrap_or(false)
}

/// The accelerator before any boot: TCG when the matrix or its clock asks
/// for it, when /dev/kvm does not open, or when a probe on this host and
/// QEMU failed before; otherwise KVM, which the probe boot must prove.
fn first_accel(m: &Matrix, run: &Run, ui: &Ui, work: &Path, probe_key: &str) -> Result<Accel> {
    let why = match (m.guest.accel, m.guest.clock) {
        (AccelChoice::Tcg, _) => return Ok(Accel::Tcg),
        (AccelChoice::Kvm, _) => return Ok(Accel::Kvm),
        (AccelChoice::Auto, Clock::Icount) => return Ok(Accel::Tcg),
        (AccelChoice::Auto, Clock::Wall) => match (vm::kvm_precheck(), load_probe(work, probe_key)) {
            (Some(why), _) => why,
            (None, Some(failed)) => format!(
                "KVM is not usable here (a probe boot failed on {}: {}); delete {} to probe again",
                failed.when,
                failed.reason,
                probe_path(work).display()
            ),
            (None, None) => return Ok(Accel::Kvm),
        },
    };
    let msg = format!("{why}; using TCG (-accel tcg,thread=multi)");
    ui.notice(&msg);
    run.event(&Event::Notice { message: msg })?;
    Ok(Accel::Tcg)
}

/// The KVM probe stage: one short 1-vCPU boot of the first kernel that
/// built. A failure QEMU blames on KVM is remembered for this host kernel and
/// QEMU version; any other failure only sends this run to TCG.
fn probe_stage(ctx: &BootCtx, kernels: &Kernels, work: &Path, probe_key: &str) -> Result<Accel> {
    let Some((art, initrd)) = kernels.values().find_map(|k| k.as_ref().ok()) else { return Ok(Accel::Kvm) };
    ctx.ui.stage("probe", "booting once under KVM to see whether it works here");
    let kernel = if boots_pvh(ctx.m, art) { &art.vmlinux } else { &art.bzimage };
    let dir = ctx.run.log("kvm-probe");
    let Some((why, kvm_fault)) = boot::probe_kvm(ctx, kernel, initrd, &dir)? else { return Ok(Accel::Kvm) };
    if kvm_fault {
        let probe = FailedProbe { key: probe_key.to_string(), when: crate::util::now_rfc3339(), reason: why.clone() };
        std::fs::write(probe_path(work), serde_json::to_vec_pretty(&probe)?)
            .with_context(|| format!("write {}", probe_path(work).display()))?;
    }
    let msg = format!("KVM is not usable here (probe boot failed: {why}); falling back to TCG (-accel tcg,thread=multi)");
    ctx.ui.notice(&msg);
    ctx.run.event(&Event::Notice { message: msg })?;
    Ok(Accel::Tcg)
}

/// Writes the clock the run's numbers are in to `run.json`.
fn record_clock(run: &Run, clock: MeasureClock) -> Result<()> {
    if run.shard.is_some() {
        // run.json is the build's; each boot record carries its clock, and
        // the report says when shards measured in different ones
        return Ok(());
    }
    let mut meta = run.meta()?;
    if let Some(had) = meta.clock.filter(|&c| c != clock) {
        bail!(
            "resume {}: its numbers are in the {had} clock but this host would measure in {clock}; \
             resume it where {had} is available (numbers of different clocks are never mixed)",
            run.dir.display()
        );
    }
    if meta.clock != Some(clock) {
        meta.clock = Some(clock);
        run.write_meta(&meta)?;
    }
    Ok(())
}

/// Patches, configures and builds one variant. `Ok(Err(msg))` is a recorded
/// failure of this variant; `Err` stops the run.
fn make_variant(
    run: &Run,
    m: &Matrix,
    tree: &Tree,
    v: &Variant,
    states: &BTreeMap<String, State>,
    work: &Path,
    ui: &Ui,
) -> Result<Result<Artifact, String>> {
    let vlog = |f: &str| run.log(&format!("variants/{}/{f}", v.name));
    let plog = vlog("patch.log");
    std::fs::create_dir_all(plog.parent().unwrap()).with_context(|| format!("create {}", plog.display()))?;
    // apply and revert, in matrix order
    let mut applied = Vec::new();
    for (names, reverse) in [(&v.revert, true), (&v.apply, false)] {
        for s in names.iter() {
            let want = if reverse { State::Contained } else { State::Applies };
            let st = &states[s];
            if std::mem::discriminant(st) != std::mem::discriminant(&want) {
                let msg = if reverse {
                    format!("revert series {s}: the base does not contain it ({st})")
                } else {
                    format!("apply series {s}: {st}")
                };
                let failure = match st {
                    State::Conflicts { forward, reverse: rev } => Some(if reverse { rev.clone() } else { forward.clone() }),
                    _ => None,
                };
                run.event(&Event::Patch { variant: v.name.clone(), failure, error: Some(msg.clone()) })?;
                ui.notice(&format!("variant {}: {msg}", v.name));
                return Ok(Err(msg));
            }
            let series = patch::load_series(&m.series_dir, s)?;
            if let Err(f) = tree.apply_series(&series, reverse, &plog)? {
                proc::check_interrupted()?;
                let msg = f.to_string();
                run.event(&Event::Patch { variant: v.name.clone(), failure: Some(f), error: Some(msg.clone()) })?;
                return Ok(Err(msg));
            }
            for p in &series.patches {
                applied.push(crate::kernel::tree::Applied { patch: std::fs::canonicalize(p).with_context(|| format!("resolve {}", p.display()))?, reverse });
            }
        }
    }
    if !v.is_plain() {
        run.event(&Event::Patch { variant: v.name.clone(), failure: None, error: None })?;
    }
    let mut frags = m.kernel.fragments.clone();
    frags.extend(v.fragments.iter().cloned());
    let cfg = match build::configure(tree, &m.kernel.base_config, &frags, work, &vlog("config.log")) {
        Ok(c) => c,
        Err(e) => {
            // a make killed by Ctrl-C is an interruption, not a failed config
            proc::check_interrupted()?;
            let msg = format!("{e:#}");
            run.event(&Event::Config { variant: v.name.clone(), lost: vec![], error: Some(msg.clone()) })?;
            return Ok(Err(msg));
        }
    };
    for l in &cfg.lost {
        ui.notice(&format!("variant {}: {l} (see {})", v.name, vlog("config.log").display()));
    }
    run.event(&Event::Config { variant: v.name.clone(), lost: cfg.lost.clone(), error: None })?;
    let key = build::key(tree, &cfg.text, &applied)?;
    if let Some(art) = build::cached(work, &key) {
        run.event(&Event::Build {
            variant: v.name.clone(),
            key: Some(key),
            build_s: 0.0,
            cached: true,
            release: Some(art.release.clone()),
            errors: vec![],
            error: None,
        })?;
        return Ok(Ok(art));
    }
    let timeout = Duration::from_secs(m.kernel.build_timeout_min * 60);
    match build::build(tree, &cfg, &key, work, timeout, &vlog("build.log"))? {
        Ok(art) => {
            run.event(&Event::Build {
                variant: v.name.clone(),
                key: Some(key),
                build_s: art.build_s,
                cached: false,
                release: Some(art.release.clone()),
                errors: vec![],
                error: None,
            })?;
            Ok(Ok(art))
        }
        Err(f) => {
            proc::check_interrupted()?;
            let msg = if f.timed_out {
                format!("build timed out after {} min", m.kernel.build_timeout_min)
            } else {
                format!("build failed: {}", f.errors.first().cloned().unwrap_or_else(|| "see build.log".into()))
            };
            run.event(&Event::Build {
                variant: v.name.clone(),
                key: Some(key),
                build_s: 0.0,
                cached: false,
                release: None,
                errors: f.errors,
                error: Some(msg.clone()),
            })?;
            Ok(Err(msg))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{scratch, write};

    /// Issue 14: a shard takes kernels from the cache by the build's keys
    /// and never builds: a kernel the cache lacks, or a variant that failed
    /// to build, fails that variant's jobs with the reason.
    #[test]
    fn shards_find_kernels_only_in_the_cache() {
        let work = std::env::temp_dir().join(format!("harness-fromcache-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&work);
        let kept = work.join("kernels/k1");
        write(&kept.join("bzImage"), "");
        let art = Artifact { key: "k1".into(), dir: kept.clone(), bzimage: kept.join("bzImage"), vmlinux: kept.join("vmlinux"), modules: None, release: "6.12".into(), build_s: 1.0, nr_cpus: None };
        write(&kept.join("artifact.json"), &serde_json::to_string(&art).unwrap());
        let build = |v: &str, key: Option<&str>, error: Option<&str>| Event::Build {
            variant: v.into(),
            key: key.map(String::from),
            build_s: 0.0,
            cached: false,
            release: None,
            errors: vec![],
            error: error.map(String::from),
        };
        let events = vec![
            build("base", Some("k1"), None),
            build("gone", Some("k2"), None),
            build("broken", Some("k3"), Some("build failed: x.c:1: error: y")),
            Event::Patch { variant: "conflicts".into(), failure: None, error: Some("apply series s: conflicts".into()) },
        ];
        let needed: BTreeSet<&str> = ["base", "gone", "broken", "conflicts", "never"].into();
        let got = from_cache(&events, &work, &needed);
        assert_eq!(got["base"].as_ref().unwrap().key, "k1");
        let missing = "kernel not in the cache: run `harness build` first";
        assert_eq!(got["gone"].as_ref().unwrap_err(), missing);
        assert_eq!(got["never"].as_ref().unwrap_err(), missing);
        assert_eq!(got["broken"].as_ref().unwrap_err(), "build failed: x.c:1: error: y");
        assert_eq!(got["conflicts"].as_ref().unwrap_err(), "apply series s: conflicts");
        assert!(!work.join("tree").exists(), "a shard made a work tree");
        std::fs::remove_dir_all(work).ok();
    }

    /// Issue 11 items 9 and 11: `--resume` refuses a run another harness is
    /// writing (naming its pid) and a run whose inputs changed (naming them).
    #[test]
    fn resume_refuses_a_locked_run_and_changed_inputs() {
        let root = scratch("resume");
        write(&root.join("src/Makefile"), "VERSION = 6\n");
        write(&root.join("frag.config"), "CONFIG_A=y\n");
        let yaml = format!(
            "kernel:\n  source: {}\n  fragments: [frag.config]\nvariants:\n  - name: base\nvcpus: [2]\nbenchmarks:\n  - {{name: d, kind: doexec}}\n",
            root.join("src").display()
        );
        let m = crate::config::parse(&yaml, &root.join("matrix.yaml"), None).unwrap();
        let writer = Run::create(&root.join("runs"), "t").unwrap();
        let meta = RunMeta {
            format_version: crate::records::FORMAT_VERSION,
            id: writer.id.clone(),
            started: crate::util::now_rfc3339(),
            inputs: Some(crate::records::inputs::pin(&m).unwrap()),
            matrix: m,
            host: Host::default(),
            harness_revision: None,
            clock: None,
        };
        writer.write_meta(&meta).unwrap();
        let opts = |w: &str| Options { work_dir: root.join(w), runs_dir: root.join("runs"), images_dir: root.join("images"), quiet: true };
        // another work directory resumes the run while its writer lives
        let e = format!("{:#}", resume(&writer.dir, &opts("work-b")).unwrap_err());
        assert!(e.contains(&format!("another harness (pid {}, harness run) is writing it", std::process::id())), "{e}");
        let dir = writer.dir.clone();
        drop(writer);
        write(&root.join("frag.config"), "CONFIG_A=n\n");
        let e = format!("{:#}", resume(&dir, &opts("work-a")).unwrap_err());
        assert!(e.contains(&format!("inputs changed since it started (fragment {} changed)", root.join("frag.config").display())), "{e}");
        std::fs::remove_dir_all(root).ok();
    }
}
