//! `harness run`: carries every cell of a matrix through the real steps —
//! work tree, series, config, build, guest image, boot, benchmarks — and
//! records each outcome in the run directory as it happens. A failed patch,
//! build, boot or benchmark becomes an event and the matrix goes on; an
//! interruption stops at once, and `--resume` finishes the remaining boots.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use crate::bench;
use crate::config::{AccelChoice, Matrix, Variant};
use crate::guest::{Guest, Timeout};
use crate::image::{self, Archive};
use crate::kernel::build::{self, Artifact};
use crate::kernel::patch::{self, State};
use crate::kernel::tree::Tree;
use crate::plan::{self, BootJob};
use crate::proc::{self, Cmd};
use crate::store::{self, BootEnv, Event, Host, Run, RunMeta, Sample};
use crate::ui::Ui;
use crate::vm::{self, Accel, CmdlineSpec, Vm, VmSpec};

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

/// Every series the matrix names.
pub fn series_names(m: &Matrix) -> Vec<String> {
    let mut s: Vec<String> = Vec::new();
    for v in &m.variants {
        for n in v.apply.iter().chain(&v.revert) {
            if !s.contains(n) {
                s.push(n.clone());
            }
        }
    }
    s
}

/// Starts a new run of `m`.
pub fn start(m: Matrix, opts: &Options) -> Result<PathBuf> {
    let label = m.profile.clone().unwrap_or_else(|| {
        m.path.file_stem().map(|s| s.to_string_lossy().replace('.', "-")).unwrap_or_else(|| "run".into())
    });
    std::fs::create_dir_all(&opts.runs_dir).with_context(|| format!("create {}", opts.runs_dir.display()))?;
    let _lock = store::WorkLock::acquire(&opts.work_dir)?;
    let run = Run::create(&opts.runs_dir, &label)?;
    let qemu = qemu_binary()?;
    let meta = RunMeta {
        format_version: store::FORMAT_VERSION,
        id: run.id.clone(),
        started: store::now_rfc3339(),
        matrix: m,
        host: host_facts(&qemu),
        harness_revision: harness_revision(),
    };
    run.write_meta(&meta)?;
    execute(&run, &meta.matrix, opts)?;
    Ok(run.dir)
}

/// Finishes an interrupted run.
pub fn resume(dir: &Path, opts: &Options) -> Result<PathBuf> {
    let _lock = store::WorkLock::acquire(&opts.work_dir)?;
    let run = Run::open(dir)?;
    let meta = run.meta()?;
    execute(&run, &meta.matrix, opts)?;
    Ok(run.dir)
}

struct Ctx<'a> {
    run: &'a Run,
    m: &'a Matrix,
    ui: Ui,
    qemu: PathBuf,
    accel: Accel,
    kvm_proven: bool,
    key: PathBuf,
    host_cpus: u32,
    work: PathBuf,
    probe_key: String,
}

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

fn execute(run: &Run, m: &Matrix, opts: &Options) -> Result<()> {
    let jobs = plan::boot_jobs(m);
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

    // accelerator: KVM only if a real boot proves it (a failed probe is
    // remembered per host kernel and QEMU version)
    let probe_key = kvm_probe_key(&qemu);
    let accel = match m.guest.accel {
        AccelChoice::Tcg => Accel::Tcg,
        AccelChoice::Kvm => Accel::Kvm,
        AccelChoice::Auto => match (vm::kvm_precheck(), load_probe(&opts.work_dir, &probe_key)) {
            (Some(why), _) => {
                let msg = format!("{why}; using TCG (-accel tcg,thread=multi)");
                ui.notice(&msg);
                run.event(&Event::Notice { message: msg })?;
                Accel::Tcg
            }
            (None, Some(failed)) => {
                let msg = format!(
                    "KVM is not usable here (a probe boot failed on {}: {}); using TCG (-accel tcg,thread=multi); delete {} to probe again",
                    failed.when,
                    failed.reason,
                    probe_path(&opts.work_dir).display()
                );
                ui.notice(&msg);
                run.event(&Event::Notice { message: msg })?;
                Accel::Tcg
            }
            (None, None) => Accel::Kvm,
        },
    };

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

    ui.stage("tree", &format!("preparing {}", m.kernel.source.display()));
    let tree = Tree::prepare(&m.kernel.source, &opts.work_dir, &run.log("tree.log"))?;

    // series states against the base
    let mut states: BTreeMap<String, State> = BTreeMap::new();
    for s in series_names(m) {
        let series = patch::load_series(&m.series_dir, &s)?;
        let st = patch::classify(&tree.dir, &series, &opts.work_dir.join("scratch"))?;
        run.event(&Event::Series { series: s.clone(), state: st.clone() })?;
        states.insert(s, st);
    }

    // guest image parts shared by every kernel
    ui.stage("image", "compiling benchmarks, making the SSH key");
    let img_dir = run.dir.join("image");
    let benches = image::compile_benchmarks(&opts.images_dir, &img_dir.join("bin"), &run.log("image.log"))?;
    let (key, pubkey) = image::make_ssh_key(&run.dir.join("ssh"), &run.log("image.log"))?;
    let common = image::common_archive(&image::HostBins::find()?, &benches, &pubkey)?.to_cpio();

    // kernels
    let mut kernels: BTreeMap<String, Result<(Artifact, PathBuf), String>> = BTreeMap::new();
    let needed: BTreeSet<&str> = jobs.iter().filter(|j| !done.contains(&(j.variant.clone(), j.vcpus, j.boot))).map(|j| j.variant.as_str()).collect();
    for v in &m.variants {
        proc::check_interrupted()?;
        if !needed.contains(v.name.as_str()) {
            ui.inc();
            continue;
        }
        ui.stage("build", &v.name);
        let r = make_variant(run, m, &tree, v, &states, &opts.work_dir, &ui);
        tree.rollback(&run.log("tree.log"))?;
        let r = match r? {
            Ok(art) => {
                let initrd = img_dir.join(format!("{}.cpio", v.name));
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
        kernels.insert(v.name.clone(), r);
        ui.inc();
    }

    let mut ctx = Ctx { run, m, ui, qemu, accel, kvm_proven: false, key, host_cpus: host_cpus(), work: opts.work_dir.clone(), probe_key };
    for job in &jobs {
        if done.contains(&(job.variant.clone(), job.vcpus, job.boot)) {
            ctx.ui.inc();
            continue;
        }
        proc::check_interrupted()?;
        match kernels.get(&job.variant) {
            Some(Ok((art, initrd))) => boot_job(&mut ctx, job, art, initrd)?,
            Some(Err(e)) => run.event(&Event::BootEnd {
                variant: job.variant.clone(),
                vcpus: job.vcpus,
                boot: job.boot,
                boot_id: None,
                findings: vec![],
                error: Some(format!("variant not built: {e}")),
            })?,
            None => bail!("no kernel for variant {}", job.variant),
        }
        ctx.ui.inc();
    }
    ctx.ui.finish();
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

/// The line of QEMU's output that says why a KVM guest died: an internal
/// error or a failed assertion first, any error next, warnings last.
pub fn kvm_failure_reason(qemu_log: &str) -> Option<String> {
    let lines: Vec<&str> = qemu_log.lines().filter(|l| !l.starts_with("$ ")).collect();
    let pick = |pred: &dyn Fn(&str) -> bool| lines.iter().find(|l| pred(l)).map(|l| l.trim().to_string());
    pick(&|l| l.contains("internal error") || l.contains("Assertion"))
        .or_else(|| pick(&|l| l.to_lowercase().contains("error")))
        .or_else(|| pick(&|l| l.contains("KVM")))
}

/// How long after a benchmark's own (guest-side) timeout the host still waits
/// for its result before calling the guest hung: 30 s, stretched under TCG by
/// the vCPU overcommit (a 448-vCPU guest on 2 host CPUs is ~200× slower to
/// even answer).
pub fn answer_grace(accel: Accel, vcpus: u32, host_cpus: u32) -> Duration {
    let over = vcpus as f64 / host_cpus.max(1) as f64;
    let factor = if accel == Accel::Tcg { (over / 16.0).max(1.0) } else { 1.0 };
    Duration::from_secs_f64(30.0 * factor)
}

/// Deadline for a guest to reach SSH: the matrix value, stretched under TCG
/// where boot time grows with the vCPU count (~2.5 s per vCPU at 448).
pub fn boot_deadline(m: &Matrix, accel: Accel, vcpus: u32) -> Duration {
    let base = m.guest.boot_timeout_s;
    let s = match accel {
        Accel::Kvm => base,
        Accel::Tcg => base.max(vcpus as u64 * 3),
    };
    Duration::from_secs(s)
}

fn boot_job(ctx: &mut Ctx, job: &BootJob, art: &Artifact, initrd: &Path) -> Result<()> {
    let run = ctx.run;
    let mut dir = run.dir.join("logs/boots").join(job.id());
    let mut attempt = 1;
    while dir.exists() {
        attempt += 1;
        dir = run.dir.join("logs/boots").join(format!("{}.{attempt}", job.id()));
    }
    std::fs::create_dir_all(&dir)?;
    let boot_id = dir.file_name().unwrap().to_string_lossy().into_owned();
    ctx.ui.stage("boot", &format!("{} at {} vCPUs (boot {})", job.variant, job.vcpus, job.boot));

    let overcommit = job.vcpus as f64 / ctx.host_cpus as f64;
    let boot_event = |accel, cmdline: String, image: String, ready_s, env, error, findings| Event::Boot {
        variant: job.variant.clone(),
        vcpus: job.vcpus,
        boot: job.boot,
        boot_id: boot_id.clone(),
        accel,
        cmdline,
        image,
        overcommit,
        ready_s,
        env,
        error,
        findings,
    };
    let pvh = ctx.m.guest.pvh
        && std::fs::read_to_string(art.dir.join("config")).map(|c| c.contains("\nCONFIG_PVH=y")).unwrap_or(false);
    let kernel_image = if pvh { art.vmlinux.clone() } else { art.bzimage.clone() };
    let image_name = kernel_image.file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default();
    let (vm, guest, ready_s, cmdline) = loop {
        let cmdline = vm::kernel_cmdline(&CmdlineSpec {
            aslr: ctx.m.guest.aslr,
            overcommit,
            accel: ctx.accel,
            extra: ctx.m.guest.cmdline.clone(),
        });
        let spec = VmSpec {
            qemu: ctx.qemu.clone(),
            accel: ctx.accel,
            vcpus: job.vcpus,
            sockets: ctx.m.guest.sockets,
            threads: ctx.m.guest.threads,
            numa_nodes: ctx.m.guest.numa_nodes,
            memory_mib: ctx.m.guest.memory_mib,
            kernel: kernel_image.clone(),
            initrd: initrd.to_path_buf(),
            cmdline: cmdline.clone(),
            console: dir.join("console.log"),
            ssh_port: vm::free_port()?,
        };
        let started = Instant::now();
        let mut vm = Vm::start(spec, &dir.join("qemu.log"))?;
        let deadline = started + boot_deadline(ctx.m, ctx.accel, job.vcpus);
        let qemu_log = dir.join("qemu.log");
        let res = Guest::wait_ready(vm.spec.ssh_port, &ctx.key, deadline, || {
            let findings = vm::scan_console(&vm.console());
            let panic = findings.iter().any(|f| f.kind == vm::Trouble::Panic);
            let first = findings.first().map(|f| f.signature.clone());
            match vm.exited() {
                Ok(Some(code)) => {
                    let qlog = std::fs::read_to_string(&qemu_log).unwrap_or_default();
                    if panic {
                        return Some(format!("kernel panic during boot ({})", first.unwrap_or_default()));
                    }
                    let why = first.or_else(|| {
                        qlog.lines().rev().find(|l| !l.trim().is_empty() && !l.starts_with('$')).map(|l| l.trim().to_string())
                    });
                    let how = match code {
                        Some(c) => format!("QEMU exited with status {c}"),
                        None => "QEMU died from a signal".to_string(),
                    };
                    Some(format!("{how} before SSH came up: {}", why.unwrap_or_else(|| "no console output".into())))
                }
                _ if panic => Some(format!("kernel panic during boot ({})", first.unwrap_or_default())),
                _ => None,
            }
        });
        match res {
            Ok(g) => {
                if ctx.accel == Accel::Kvm {
                    ctx.kvm_proven = true;
                }
                break (vm, g, started.elapsed().as_secs_f64(), cmdline);
            }
            Err(e) if ctx.accel == Accel::Kvm && !ctx.kvm_proven && ctx.m.guest.accel == AccelChoice::Auto => {
                proc::check_interrupted()?;
                let qlog = std::fs::read_to_string(&qemu_log).unwrap_or_default();
                let why = kvm_failure_reason(&qlog).unwrap_or_else(|| format!("{e:#}"));
                let msg = format!("KVM is not usable here (probe boot failed: {why}); falling back to TCG (-accel tcg,thread=multi)");
                let probe = FailedProbe { key: ctx.probe_key.clone(), when: store::now_rfc3339(), reason: why.clone() };
                std::fs::write(probe_path(&ctx.work), serde_json::to_vec_pretty(&probe)?).ok();
                ctx.ui.notice(&msg);
                run.event(&Event::Notice { message: msg })?;
                ctx.accel = Accel::Tcg;
                drop(vm);
                let _ = std::fs::rename(dir.join("console.log"), dir.join("console.kvm-probe.log"));
                let _ = std::fs::rename(dir.join("qemu.log"), dir.join("qemu.kvm-probe.log"));
                continue;
            }
            Err(e) => {
                proc::check_interrupted()?;
                let findings = vm::scan_console(&vm.console());
                drop(vm);
                let msg = format!("{e:#}");
                run.event(&boot_event(ctx.accel, cmdline, image_name.clone(), None, None, Some(msg.clone()), findings.clone()))?;
                ctx.ui.notice(&format!("{}: boot failed: {msg}", job.id()));
                run.event(&Event::BootEnd {
                    variant: job.variant.clone(),
                    vcpus: job.vcpus,
                    boot: job.boot,
                    boot_id: Some(boot_id),
                    findings,
                    error: Some(format!("boot failed: {msg}")),
                })?;
                return Ok(());
            }
        }
    };

    let env = read_env(&guest).ok();
    let nproc = env.as_ref().map(|e| e.nproc).filter(|&n| n > 0).unwrap_or(job.vcpus);
    run.event(&boot_event(ctx.accel, cmdline, image_name, Some(ready_s), env.clone(), None, vm::scan_console(&vm.console())))?;

    let mut end_error = None;
    'benches: for bname in &job.benchmarks {
        let Some(b) = ctx.m.benchmark(bname) else { continue };
        let params = serde_json::to_value(&b.kind)?;
        let reps = ctx.m.sampling.warmup_repetitions + ctx.m.sampling.repetitions;
        for rep in 0..reps {
            proc::check_interrupted()?;
            let warmup = rep < ctx.m.sampling.warmup_repetitions;
            ctx.ui.stage("bench", &format!("{} {}cpu b{} {bname} rep {}/{reps}", job.variant, job.vcpus, job.boot, rep + 1));
            let cmd = bench::command(b, nproc);
            let log = dir.join(format!("bench-{bname}-r{rep}.log"));
            let grace = answer_grace(ctx.accel, job.vcpus, ctx.host_cpus);
            let res = guest.run(&cmd, Duration::from_secs(b.timeout_s) + grace);
            let failed = |error: String| Event::BenchFailed {
                variant: job.variant.clone(),
                vcpus: job.vcpus,
                benchmark: bname.clone(),
                boot_id: boot_id.clone(),
                repetition: rep,
                error,
            };
            match res {
                Ok(out) => {
                    std::fs::write(&log, format!("$ {cmd}\n# status {:?}\n{}\n# stderr\n{}", out.status, out.stdout, out.stderr))?;
                    let parsed = bench::parse(b, &out.stdout);
                    let vmalloc = matches!(b.kind, crate::config::BenchKind::TestVmalloc { .. });
                    match parsed {
                        Ok(p) if out.status == Some(0) || vmalloc => {
                            for mt in p.metrics {
                                run.sample(&Sample {
                                    variant: job.variant.clone(),
                                    vcpus: job.vcpus,
                                    benchmark: bname.clone(),
                                    params: params.clone(),
                                    metric: mt.metric,
                                    unit: mt.unit,
                                    higher_is_better: mt.higher_is_better,
                                    boot_id: boot_id.clone(),
                                    boot: job.boot,
                                    repetition: rep,
                                    warmup,
                                    value: mt.value,
                                    series: mt.series,
                                    cpu: p.cpu,
                                    timestamp: store::now_rfc3339(),
                                })?;
                            }
                        }
                        other => {
                            let why = match (out.status, other) {
                                (Some(124) | Some(137), _) => format!("killed at its {} s timeout", b.timeout_s),
                                (status, Ok(_)) => format!("exited with {status:?}: {}", out.stderr.trim()),
                                (status, Err(e)) => format!("{e:#} (status {status:?}; {})", out.stderr.trim()),
                            };
                            run.event(&failed(why))?;
                        }
                    }
                }
                Err(e) => {
                    proc::check_interrupted()?;
                    let why = if e.downcast_ref::<Timeout>().is_some() {
                        format!("guest stopped answering: no result {} s after the benchmark's timeout", grace.as_secs())
                    } else {
                        format!("{e:#}")
                    };
                    run.event(&failed(why.clone()))?;
                    end_error = Some(why);
                    break 'benches;
                }
            }
        }
    }

    if end_error.is_none() {
        if let Ok(d) = guest.run("dmesg", Duration::from_secs(60)) {
            std::fs::write(dir.join("dmesg.log"), &d.stdout)?;
        }
        guest.poweroff();
        vm.finish(Duration::from_secs(15));
    } else {
        drop(guest);
        drop(vm);
    }
    let mut findings = vm::scan_console(&std::fs::read_to_string(dir.join("console.log")).unwrap_or_default());
    for f in vm::scan_console(&std::fs::read_to_string(dir.join("dmesg.log")).unwrap_or_default()) {
        if !findings.iter().any(|x| x.signature == f.signature) {
            findings.push(f);
        }
    }
    for f in &findings {
        ctx.ui.notice(&format!("{}: console: {} ({})", boot_id, f.signature, f.line));
    }
    run.event(&Event::BootEnd {
        variant: job.variant.clone(),
        vcpus: job.vcpus,
        boot: job.boot,
        boot_id: Some(boot_id),
        findings,
        error: end_error,
    })?;
    Ok(())
}

fn read_env(g: &Guest) -> Result<BootEnv> {
    let o = g.run(
        "uname -r; nproc; grep MemTotal /proc/meminfo; cat /proc/sys/kernel/randomize_va_space",
        Duration::from_secs(60),
    )?;
    let l: Vec<&str> = o.stdout.lines().collect();
    if l.len() < 4 {
        bail!("read the guest environment: got `{}`", o.stdout.trim());
    }
    Ok(BootEnv {
        kernel_release: l[0].trim().into(),
        nproc: l[1].trim().parse().unwrap_or(0),
        memory_mib: l[2].split_whitespace().nth(1).and_then(|k| k.parse::<u64>().ok()).unwrap_or(0) / 1024,
        aslr: l[3].trim().parse().unwrap_or(0),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grace_grows_with_tcg_overcommit_only() {
        assert_eq!(answer_grace(Accel::Tcg, 4, 2), Duration::from_secs(30));
        assert_eq!(answer_grace(Accel::Tcg, 448, 2), Duration::from_secs(420));
        assert_eq!(answer_grace(Accel::Kvm, 448, 2), Duration::from_secs(30));
    }

    #[test]
    fn kvm_failure_reason_prefers_the_real_error() {
        let log = "$ qemu-system-x86_64 -accel kvm\n\
            qemu-system-x86_64: -accel kvm: warning: Number of SMP cpus requested (26) exceeds the recommended cpus supported by KVM (2)\n\
            KVM internal error. Suberror: 1\n";
        assert_eq!(kvm_failure_reason(log).unwrap(), "KVM internal error. Suberror: 1");
        let log = "qemu: warning: KVM something\nqemu: kvm.c:3849: kvm_buf_set_msrs: Assertion `ret' failed.\n";
        assert!(kvm_failure_reason(log).unwrap().contains("Assertion"));
        assert_eq!(kvm_failure_reason("qemu: warning: KVM x\n").unwrap(), "qemu: warning: KVM x");
        assert_eq!(kvm_failure_reason(""), None);
    }
}
