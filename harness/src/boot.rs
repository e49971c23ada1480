//! One boot job's lifecycle as explicit [`Stage`]s — start QEMU, wait for
//! SSH (watching QEMU and the console), read the guest's environment,
//! measure every benchmark repetition, power off — plus the KVM probe boot
//! and the [`Pace`] that turns guest-time deadlines into host waits. Every
//! outcome becomes a record in the run directory; only an interruption or
//! a failure to write records returns `Err`.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Result};

use crate::bench;
use crate::config::{Benchmark, Clock, Matrix};
use crate::guest::{Guest, Timeout};
use crate::kernel::build::Artifact;
use crate::plan::BootJob;
use crate::proc;
use crate::records::{BootEnv, Event, Sample};
use crate::store::Run;
use crate::ui::Ui;
use crate::vm::{self, Accel, CmdlineSpec, Exit, MeasureClock, Vm, VmSpec};

/// The stages of a boot job, in order. A failure names the stage it
/// happened in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// QEMU is starting.
    Start,
    /// Waiting for the guest's sshd.
    WaitSsh,
    /// Reading what the guest says about itself.
    Environment,
    /// Running the benchmarks' repetitions.
    Measure,
    /// Reading dmesg and powering off.
    PowerOff,
}

impl Stage {
    fn name(self) -> &'static str {
        match self {
            Stage::Start => "start",
            Stage::WaitSsh => "wait for SSH",
            Stage::Environment => "read the environment",
            Stage::Measure => "measure",
            Stage::PowerOff => "power off",
        }
    }
}

/// Wall seconds per guest second, measured from the guest's own uptime. A
/// deadline stated in guest seconds becomes a host wait through it: under
/// a wall clock the pace is about 1, under the instruction-counting clock
/// it is whatever this host manages (10–15 on the development machines).
#[derive(Debug, Clone, Copy, Default)]
pub struct Pace {
    wall_per_guest: Option<f64>,
}

/// Margin over the slowest pace seen, for the host's waits.
const PACE_MARGIN: f64 = 1.5;

/// Wall seconds per guest second assumed for an instruction-counting boot
/// before any pace was measured in the run; the console's guest time
/// decides sooner (see [`console_guest_time`]). A backstop, not an estimate.
pub const ICOUNT_BACKSTOP_PACE: f64 = 60.0;

impl Pace {
    /// Records `wall` seconds taken by `guest` seconds of guest time; the
    /// slowest pace seen is kept.
    pub fn observe(&mut self, wall: f64, guest: f64) {
        if guest > 0.05 && wall.is_finite() && wall > 0.0 {
            let p = wall / guest;
            self.wall_per_guest = Some(self.wall_per_guest.map_or(p, |q| q.max(p)));
        }
    }

    /// The slowest measured pace, if any.
    pub fn measured(&self) -> Option<f64> {
        self.wall_per_guest
    }

    /// Host wait for `guest_s` guest seconds under `clock`: the guest time
    /// itself under a wall clock, stretched by the measured pace (with a
    /// margin) under icount.
    pub fn wait(&self, clock: MeasureClock, guest_s: f64) -> Duration {
        let factor = match clock {
            MeasureClock::TcgIcount => self.wall_per_guest.map_or(ICOUNT_BACKSTOP_PACE, |p| (p * PACE_MARGIN).max(1.0)),
            _ => 1.0,
        };
        Duration::from_secs_f64(guest_s * factor)
    }
}

/// The latest guest time (seconds since boot) the console shows: kernel
/// timestamps (`[   12.345678] …`) and the init's `harness: uptime 12.34`
/// marks.
pub fn console_guest_time(text: &str) -> Option<f64> {
    let mut best: Option<f64> = None;
    for l in text.lines() {
        let t = if let Some(rest) = l.trim_start().strip_prefix('[') {
            rest.split(']').next().and_then(|s| s.trim().parse::<f64>().ok())
        } else {
            l.split(crate::image::UPTIME_MARK).nth(1).and_then(|r| r.split_whitespace().next()?.parse::<f64>().ok())
        };
        if let Some(t) = t.filter(|t| t.is_finite()) {
            best = Some(best.map_or(t, |b: f64| b.max(t)));
        }
    }
    best
}

/// What a boot job needs from the run.
pub struct BootCtx<'a> {
    /// The run directory.
    pub run: &'a Run,
    /// The matrix.
    pub m: &'a Matrix,
    /// Progress and notices.
    pub ui: &'a Ui,
    /// QEMU binary.
    pub qemu: PathBuf,
    /// The run's SSH private key.
    pub key: PathBuf,
    /// The guest's host key (public line), pinned in the run's image.
    pub host_key: String,
    /// Host CPUs.
    pub host_cpus: u32,
    /// The accelerator boots use.
    pub accel: Accel,
    /// Guest pace measured so far in this run.
    pub pace: Pace,
}

impl BootCtx<'_> {
    /// The clock this context's boots measure in.
    pub fn clock(&self) -> MeasureClock {
        MeasureClock::of(self.accel, self.m.guest.clock)
    }

    /// vCPUs per host thread running them: icount runs every vCPU on one.
    fn overcommit(&self, vcpus: u32) -> f64 {
        match self.clock() {
            MeasureClock::TcgIcount => vcpus as f64,
            _ => vcpus as f64 / self.host_cpus.max(1) as f64,
        }
    }

    fn wait(&self, guest_s: f64) -> Duration {
        self.pace.wait(self.clock(), guest_s)
    }
}

/// A guest that reached SSH.
pub struct Booted {
    vm: Vm,
    guest: Guest,
    /// Wall seconds from QEMU start to SSH login.
    pub ready_s: f64,
    /// The kernel command line it booted with.
    pub cmdline: String,
}

/// Why a boot did not reach SSH, with what the console showed.
pub struct BootFailure {
    /// The message.
    pub error: String,
    /// Console findings.
    pub findings: Vec<vm::Finding>,
    /// QEMU's log, for the KVM probe's diagnosis.
    pub qemu_log: String,
    /// The signal QEMU died from by itself (an assertion, a segfault, the
    /// host's OOM killer), if it did: QEMU's failure, not the kernel's.
    pub qemu_signal: Option<i32>,
}

/// How many times one boot job starts QEMU when QEMU itself dies from a
/// signal (before SSH or while the guest measures). Multi-threaded TCG in
/// QEMU 10 has a rare race that aborts QEMU (`iotlb_to_section: Assertion
/// ... failed`) while the guest is booting. Such an attempt is recorded and
/// shown, but it does not count against the kernel. A kernel that kills
/// QEMU every time still fails once the attempts are used up.
pub const QEMU_CRASH_ATTEMPTS: u32 = 3;

/// Deadline for a guest to reach SSH under a wall clock: the matrix value,
/// stretched under TCG where boot time grows with the vCPU count (~2.5 s
/// per vCPU at 448).
pub fn boot_deadline(m: &Matrix, accel: Accel, vcpus: u32) -> Duration {
    let base = m.guest.boot_timeout_s;
    let s = match accel {
        Accel::Kvm => base,
        Accel::Tcg => base.max(vcpus as u64 * 3),
    };
    Duration::from_secs(s)
}

/// How long after a benchmark's own (guest-side) timeout the host still
/// waits for its result before calling the guest hung: 30 s, stretched under
/// TCG by the vCPU overcommit (a 448-vCPU guest on 2 host CPUs is ~200×
/// slower to even answer).
pub fn answer_grace(accel: Accel, overcommit: f64) -> Duration {
    let factor = if accel == Accel::Tcg { (overcommit / 16.0).max(1.0) } else { 1.0 };
    Duration::from_secs_f64(30.0 * factor)
}

/// Stage [`Stage::Start`] and [`Stage::WaitSsh`]: starts QEMU for `job` and
/// waits until the guest's sshd lets the run's key in, QEMU exits, the
/// kernel panics, or the deadline passes. Under the instruction-counting
/// clock `boot_timeout_s` is guest seconds, read off the console.
pub fn start_and_wait(
    ctx: &BootCtx,
    vcpus: u32,
    kernel: &Path,
    initrd: &Path,
    dir: &Path,
    deadline: Duration,
) -> Result<std::result::Result<Booted, BootFailure>> {
    let clock = if ctx.accel == Accel::Tcg { ctx.m.guest.clock } else { Clock::Wall };
    let cmdline = vm::kernel_cmdline(&CmdlineSpec {
        aslr: ctx.m.guest.aslr,
        overcommit: ctx.overcommit(vcpus),
        accel: ctx.accel,
        clock,
        extra: ctx.m.guest.cmdline.clone(),
    });
    let spec = VmSpec {
        qemu: ctx.qemu.clone(),
        accel: ctx.accel,
        clock,
        vcpus,
        sockets: ctx.m.guest.sockets,
        threads: ctx.m.guest.threads,
        numa_nodes: ctx.m.guest.numa_nodes,
        memory_mib: ctx.m.guest.memory_mib,
        kernel: kernel.to_path_buf(),
        initrd: initrd.to_path_buf(),
        cmdline: cmdline.clone(),
        console: dir.join("console.log"),
        ssh_port: 0,
    };
    let qemu_log = dir.join("qemu.log");
    let started = Instant::now();
    let mut vm = Vm::start(spec, &qemu_log)?;
    let icount = ctx.clock() == MeasureClock::TcgIcount;
    let guest_limit = ctx.m.guest.boot_timeout_s as f64;
    let res = Guest::wait_ready(vm.spec.ssh_port, &ctx.key, &ctx.host_key, started + deadline, || {
        let console = vm.console();
        let findings = vm::scan_console(&console);
        let panic = findings.iter().find(|f| f.kind == vm::Trouble::Panic).map(|_| findings[0].signature.clone());
        if let Some(sig) = panic {
            return Some(format!("kernel panic during boot ({sig})"));
        }
        match vm.exited() {
            Ok(Exit::Running) | Err(_) => {}
            Ok(exit) => {
                let qlog = std::fs::read_to_string(&qemu_log).unwrap_or_default();
                return Some(qemu_exit_reason(exit, findings.first(), &qlog));
            }
        }
        if vm.spec.ssh_port == 0 {
            return Some("QEMU bound no SSH forward on 127.0.0.1".into());
        }
        if let Some(why) = stuck_under_kvm(ctx.accel, &std::fs::read_to_string(&qemu_log).unwrap_or_default()) {
            return Some(why);
        }
        match console_guest_time(&console) {
            Some(g) if icount && g > guest_limit => {
                Some(format!("no SSH after {g:.0} guest seconds (guest.boot_timeout_s is {guest_limit:.0} guest seconds under icount)"))
            }
            _ => None,
        }
    });
    match res {
        Ok(guest) => Ok(Ok(Booted { vm, guest, ready_s: started.elapsed().as_secs_f64(), cmdline })),
        Err(e) => {
            proc::check_interrupted()?;
            let findings = vm::scan_console(&vm.console());
            // still running means the harness gave up on it (deadline,
            // panic): only a QEMU that died on its own has a signal here
            let qemu_signal = died_from_signal(&mut vm, Duration::ZERO);
            drop(vm);
            let qemu_log = std::fs::read_to_string(&qemu_log).unwrap_or_default();
            Ok(Err(BootFailure { error: format!("{e:#}"), findings, qemu_log, qemu_signal }))
        }
    }
}

/// Why QEMU exited before SSH came up: the console's first finding, else
/// QEMU's last line.
/// `exit` is how QEMU ended.
fn qemu_exit_reason(exit: Exit, first: Option<&vm::Finding>, qlog: &str) -> String {
    let why = first.map(|f| f.signature.clone()).or_else(|| last_line(qlog).map(str::to_string));
    let how = match exit {
        Exit::Code(c) => format!("QEMU exited with status {c}"),
        Exit::Signal(sig) => format!("QEMU died from signal {sig} ({})", signal_name(sig)),
        Exit::Running => "QEMU still runs".to_string(),
    };
    format!("{how} before SSH came up: {}", why.unwrap_or_else(|| "no console output".into()))
}

/// The signal QEMU died from by itself, waiting up to `grace` for it to be
/// reaped (a guest's SSH connection drops as QEMU exits, a moment before).
fn died_from_signal(vm: &mut Vm, grace: Duration) -> Option<i32> {
    let until = Instant::now() + grace;
    loop {
        match vm.exited() {
            Ok(Exit::Signal(sig)) => return Some(sig),
            Ok(Exit::Code(_)) | Err(_) => return None,
            Ok(Exit::Running) if Instant::now() > until => return None,
            Ok(Exit::Running) => std::thread::sleep(Duration::from_millis(50)),
        }
    }
}

/// QEMU's last line of output.
fn last_line(qlog: &str) -> Option<&str> {
    qlog.lines().rev().map(str::trim).find(|l| !l.is_empty() && !l.starts_with('$'))
}

fn signal_name(sig: i32) -> &'static str {
    match sig {
        libc::SIGABRT => "SIGABRT",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGBUS => "SIGBUS",
        libc::SIGKILL => "SIGKILL",
        libc::SIGTERM => "SIGTERM",
        libc::SIGILL => "SIGILL",
        _ => "signal",
    }
}

/// A KVM guest that hit an internal error: some QEMU builds pause the
/// guest and wait instead of exiting, so the log is the only sign.
pub fn stuck_under_kvm(accel: Accel, qemu_log: &str) -> Option<String> {
    if accel != Accel::Kvm {
        return None;
    }
    qemu_log
        .lines()
        .find(|l| l.contains("KVM internal error") || l.contains("emulation failure") || l.contains("Assertion"))
        .map(|l| format!("QEMU stopped the guest: {}", l.trim()))
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

/// The KVM probe: one short boot of `kernel` at 1 vCPU under KVM. `Ok(None)`:
/// KVM works. `Ok(Some((reason, kvm_fault)))`: it does not; `kvm_fault` says
/// whether QEMU itself blamed KVM (only then is the failure worth
/// remembering for the host).
pub fn probe_kvm(ctx: &BootCtx, kernel: &Path, initrd: &Path, dir: &Path) -> Result<Option<(String, bool)>> {
    std::fs::create_dir_all(dir)?;
    let probe = BootCtx {
        run: ctx.run,
        m: ctx.m,
        ui: ctx.ui,
        qemu: ctx.qemu.clone(),
        key: ctx.key.clone(),
        host_key: ctx.host_key.clone(),
        host_cpus: ctx.host_cpus,
        accel: Accel::Kvm,
        pace: ctx.pace,
    };
    match start_and_wait(&probe, 1, kernel, initrd, dir, PROBE_DEADLINE)? {
        Ok(b) => {
            b.guest.poweroff();
            b.vm.finish(Duration::from_secs(5));
            Ok(None)
        }
        Err(f) => {
            let fault = kvm_failure_reason(&f.qemu_log).filter(|r| r.contains("KVM") || r.contains("kvm") || r.contains("Assertion"));
            Ok(Some((fault.clone().unwrap_or(f.error), fault.is_some())))
        }
    }
}

/// How long the KVM probe may take: a 1-vCPU KVM guest reaches SSH in a few
/// seconds on any host where KVM works.
pub const PROBE_DEADLINE: Duration = Duration::from_secs(60);

/// What became of one attempt at a boot job.
enum Attempt {
    /// The job's outcome is recorded (`boot_end`).
    Ended,
    /// QEMU died from a signal and attempts are left: boot again.
    QemuCrashed,
}

/// Runs one boot job through every stage and records its outcome. While
/// QEMU dies from a signal (its failure, not the kernel's) the job boots
/// again in a fresh log directory (`<id>.2`…), up to [`QEMU_CRASH_ATTEMPTS`].
pub fn run_job(ctx: &mut BootCtx, job: &BootJob, art: &Artifact, pvh: bool, initrd: &Path) -> Result<()> {
    ctx.ui.stage("boot", &format!("{} at {} vCPUs (boot {})", job.variant, job.vcpus, job.boot));
    let kernel = art.boot_image(pvh);
    let mut attempt = 1;
    while let Attempt::QemuCrashed = attempt_job(ctx, job, kernel, initrd, attempt)? {
        attempt += 1;
    }
    Ok(())
}

/// One attempt at a job: every stage, or up to QEMU's crash.
fn attempt_job(ctx: &mut BootCtx, job: &BootJob, kernel: &Path, initrd: &Path, attempt: u32) -> Result<Attempt> {
    let run = ctx.run;
    let dir = new_boot_dir(run, job)?;
    let boot_id = dir.file_name().unwrap().to_string_lossy().into_owned();
    let image = kernel.file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default();
    let mut rec = BootRecord { job, boot_id, image, clock: ctx.clock(), overcommit: ctx.overcommit(job.vcpus), pace: Default::default() };
    let deadline = match ctx.clock() {
        MeasureClock::TcgIcount => ctx.wait(ctx.m.guest.boot_timeout_s as f64),
        _ => boot_deadline(ctx.m, ctx.accel, job.vcpus),
    };
    let mut booted = match start_and_wait(ctx, job.vcpus, kernel, initrd, &dir, deadline)? {
        Ok(b) => b,
        Err(f) => return failed_boot(ctx, &rec, f, attempt),
    };
    // stage: environment (and the pace of guest time at login)
    // the pace at login is recorded but not used for waits: under icount an
    // idle guest's clock jumps from timer to timer while the host retries
    // SSH, so it understates the pace of a busy guest; repetitions measure it
    let env = read_env(&booted.guest, ctx.wait(60.0)).ok();
    let nproc = env.as_ref().map(|e| e.nproc).filter(|&n| n > 0).unwrap_or(job.vcpus);
    let findings = vm::scan_console(&booted.vm.console());
    let mut ev = rec.boot(ctx.accel, booted.cmdline.clone(), Some(booted.ready_s), env.clone(), None, findings);
    if let (Event::Boot { wall_per_guest_s, .. }, Some(e)) = (&mut ev, &env) {
        *wall_per_guest_s = (e.uptime_s > 0.0).then(|| booted.ready_s / e.uptime_s);
    }
    run.event(&ev)?;
    let cut = measure(ctx, job, &mut rec, &mut booted, nproc, &dir)?;
    if let Some(c) = cut.as_ref().filter(|c| boots_again(c.qemu_signal, attempt)) {
        // no boot_end: the boot is cut off, its samples are not counted
        let msg = format!("{}: {}; QEMU's failure, not the kernel's: this boot's samples are not counted and the job boots again", rec.boot_id, c.why);
        ctx.ui.notice(&msg);
        run.event(&Event::Notice { message: msg })?;
        return Ok(Attempt::QemuCrashed);
    }
    let end_error = cut.map(|c| match c.qemu_signal {
        Some(_) => format!("{}{}", c.why, all_attempts(attempt)),
        None => c.why,
    });
    let findings = power_off(ctx, booted, end_error.is_none(), &dir)?;
    for f in &findings {
        ctx.ui.notice(&format!("{}: console: {} ({})", rec.boot_id, f.signature, f.line));
    }
    run.event(&rec.end(findings, end_error))?;
    Ok(Attempt::Ended)
}

/// Records a boot that did not reach SSH: a QEMU crash with attempts left
/// is a `boot` record with `retried: true`; anything else ends the job.
fn failed_boot(ctx: &BootCtx, rec: &BootRecord, mut f: BootFailure, attempt: u32) -> Result<Attempt> {
    let retry = boots_again(f.qemu_signal, attempt);
    if f.qemu_signal.is_some() && !retry {
        f.error.push_str(&all_attempts(attempt));
    }
    let mut ev = rec.boot(ctx.accel, String::new(), None, None, Some(f.error.clone()), f.findings.clone());
    if retry {
        ctx.ui.notice(&format!("{}: {}; not the kernel's failure, booting again", rec.boot_id, f.error));
        if let Event::Boot { retried, .. } = &mut ev {
            *retried = true;
        }
        ctx.run.event(&ev)?;
        return Ok(Attempt::QemuCrashed);
    }
    ctx.ui.notice(&format!("{}: boot failed: {}", rec.boot_id, f.error));
    ctx.run.event(&ev)?;
    ctx.run.event(&rec.end(f.findings, Some(format!("boot failed: {}", f.error))))?;
    Ok(Attempt::Ended)
}

/// Whether a job boots again after `attempt` ended with QEMU dead from
/// `qemu_signal` (or alive, `None`).
fn boots_again(qemu_signal: Option<i32>, attempt: u32) -> bool {
    qemu_signal.is_some() && attempt < QEMU_CRASH_ATTEMPTS
}

/// What a job's last QEMU crash adds to its failure.
fn all_attempts(attempt: u32) -> String {
    format!(" (QEMU died in all {attempt} attempts)")
}

/// A fresh log directory for a job (`<id>`, or `<id>.2`… for a re-run).
fn new_boot_dir(run: &Run, job: &BootJob) -> Result<PathBuf> {
    let mut dir = run.log("boots").join(job.id());
    let mut attempt = 1;
    while dir.exists() {
        attempt += 1;
        dir = run.log("boots").join(format!("{}.{attempt}", job.id()));
    }
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}

/// The parts of a boot's records that every stage shares.
struct BootRecord<'a> {
    job: &'a BootJob,
    boot_id: String,
    image: String,
    clock: MeasureClock,
    overcommit: f64,
    /// This boot's pace over its repetitions.
    pace: Pace,
}

impl BootRecord<'_> {
    fn boot(
        &self,
        accel: Accel,
        cmdline: String,
        ready_s: Option<f64>,
        env: Option<BootEnv>,
        error: Option<String>,
        findings: Vec<vm::Finding>,
    ) -> Event {
        Event::Boot {
            variant: self.job.variant.clone(),
            vcpus: self.job.vcpus,
            boot: self.job.boot,
            boot_id: self.boot_id.clone(),
            accel,
            clock: Some(self.clock),
            wall_per_guest_s: None,
            cmdline,
            image: self.image.clone(),
            overcommit: self.overcommit,
            ready_s,
            env,
            error,
            findings,
            retried: false,
            failed: None,
        }
    }

    fn end(&self, findings: Vec<vm::Finding>, error: Option<String>) -> Event {
        Event::BootEnd {
            variant: self.job.variant.clone(),
            vcpus: self.job.vcpus,
            boot: self.job.boot,
            boot_id: Some(self.boot_id.clone()),
            findings,
            error,
            busy_wall_per_guest_s: self.pace.measured(),
            failed: None,
        }
    }

    fn failed(&self, benchmark: &str, repetition: u32, error: String) -> Event {
        Event::BenchFailed {
            variant: self.job.variant.clone(),
            vcpus: self.job.vcpus,
            benchmark: benchmark.to_string(),
            boot_id: self.boot_id.clone(),
            repetition,
            error,
            failed: None,
        }
    }
}

/// Stage [`Stage::Measure`]: every repetition of every benchmark of the job.
/// Returns why the boot was cut short (the guest stopped answering or QEMU
/// died), if it was.
fn measure(ctx: &mut BootCtx, job: &BootJob, rec: &mut BootRecord, booted: &mut Booted, nproc: u32, dir: &Path) -> Result<Option<Cut>> {
    for bname in &job.benchmarks {
        let Some(b) = ctx.m.benchmark(bname) else { continue };
        let reps = ctx.m.sampling.warmup_repetitions + ctx.m.sampling.repetitions;
        for rep in 0..reps {
            proc::check_interrupted()?;
            ctx.ui.stage("bench", &format!("{} {}cpu b{} {bname} rep {}/{reps}", job.variant, job.vcpus, job.boot, rep + 1));
            if let Err(cut) = repetition(ctx, rec, booted, b, nproc, rep, dir)? {
                return Ok(Some(Cut { why: format!("{} during {}: {}", Stage::Measure.name(), bname, cut.why), ..cut }));
            }
        }
    }
    Ok(None)
}

/// Why a boot's measurement was cut short.
struct Cut {
    why: String,
    /// QEMU died from this signal (by itself).
    qemu_signal: Option<i32>,
}

/// One repetition: run, parse, record a sample per metric or a failure.
/// `Ok(Err(cut))` means the guest stopped answering or QEMU died (then no
/// failure is recorded here: the boot is QEMU's failure, not the kernel's).
fn repetition(
    ctx: &mut BootCtx,
    rec: &mut BootRecord,
    booted: &mut Booted,
    b: &Benchmark,
    nproc: u32,
    rep: u32,
    dir: &Path,
) -> Result<std::result::Result<(), Cut>> {
    let run = ctx.run;
    let cmd = bench::command(b, nproc);
    let grace = answer_grace(ctx.accel, ctx.overcommit(rec.job.vcpus));
    let wait = ctx.wait(b.timeout_s as f64) + grace;
    let out = match booted.guest.run(&cmd, wait) {
        Ok(out) => out,
        Err(e) => {
            proc::check_interrupted()?;
            if let Some(sig) = died_from_signal(&mut booted.vm, Duration::from_secs(1)) {
                let qlog = std::fs::read_to_string(dir.join("qemu.log")).unwrap_or_default();
                let why = format!("QEMU died from signal {sig} ({}) in repetition {rep}: {}", signal_name(sig), last_line(&qlog).unwrap_or("no QEMU output"));
                return Ok(Err(Cut { why, qemu_signal: Some(sig) }));
            }
            let why = if e.downcast_ref::<Timeout>().is_some() {
                format!("guest stopped answering: no result {} s after the benchmark's timeout", (wait.as_secs()).saturating_sub(b.timeout_s))
            } else {
                format!("{e:#}")
            };
            run.event(&rec.failed(&b.name, rep, why.clone()))?;
            return Ok(Err(Cut { why, qemu_signal: None }));
        }
    };
    let log = dir.join(format!("bench-{}-r{rep}.log", b.name));
    std::fs::write(&log, format!("$ {cmd}\n# status {:?}\n{}\n# stderr\n{}", out.status, out.stdout, out.stderr))?;
    if let Some(g) = bench::guest_span(&out.stdout) {
        let wall = out.elapsed.as_secs_f64();
        ctx.pace.observe(wall, g);
        rec.pace.observe(wall, g);
    }
    let vmalloc = matches!(b.kind, crate::config::BenchKind::TestVmalloc { .. });
    match bench::parse(b, &out.stdout) {
        Ok(p) if out.status == Some(0) || vmalloc => {
            let params = serde_json::to_value(&b.kind)?;
            for mt in p.metrics {
                run.sample(&Sample {
                    variant: rec.job.variant.clone(),
                    vcpus: rec.job.vcpus,
                    benchmark: b.name.clone(),
                    params: params.clone(),
                    metric: mt.metric,
                    unit: mt.unit,
                    higher_is_better: mt.higher_is_better,
                    boot_id: rec.boot_id.clone(),
                    boot: rec.job.boot,
                    repetition: rep,
                    warmup: rep < ctx.m.sampling.warmup_repetitions,
                    value: mt.value,
                    series: mt.series,
                    cpu: p.cpu,
                    clock: Some(rec.clock),
                    timestamp: crate::util::now_rfc3339(),
                })?;
            }
        }
        other => {
            let why = match (out.status, other) {
                (Some(124) | Some(137), _) => format!("killed at its {} s timeout", b.timeout_s),
                (status, Ok(_)) => format!("exited with {status:?}: {}", out.stderr.trim()),
                (status, Err(e)) => format!("{e:#} (status {status:?}; {})", out.stderr.trim()),
            };
            run.event(&rec.failed(&b.name, rep, why))?;
        }
    }
    Ok(Ok(()))
}

/// Stage [`Stage::PowerOff`]: keeps dmesg (when the guest still answers),
/// powers off, and scans the console and dmesg for trouble.
fn power_off(ctx: &BootCtx, b: Booted, answering: bool, dir: &Path) -> Result<Vec<vm::Finding>> {
    if answering {
        if let Ok(d) = b.guest.run("dmesg", ctx.wait(60.0)) {
            std::fs::write(dir.join("dmesg.log"), &d.stdout)?;
        }
        b.guest.poweroff();
        b.vm.finish(ctx.wait(15.0));
    } else {
        drop(b);
    }
    let mut findings = vm::scan_console(&std::fs::read_to_string(dir.join("console.log")).unwrap_or_default());
    for f in vm::scan_console(&std::fs::read_to_string(dir.join("dmesg.log")).unwrap_or_default()) {
        if !findings.iter().any(|x| x.signature == f.signature) {
            findings.push(f);
        }
    }
    Ok(findings)
}

/// Stage [`Stage::Environment`]: kernel release, nproc, memory, ASLR and
/// uptime, as the guest reports them.
fn read_env(g: &Guest, wait: Duration) -> Result<BootEnv> {
    let o = g.run(
        "uname -r; nproc; grep MemTotal /proc/meminfo; cat /proc/sys/kernel/randomize_va_space; cat /proc/uptime",
        wait,
    )?;
    let l: Vec<&str> = o.stdout.lines().collect();
    if l.len() < 5 {
        bail!("read the guest environment: got `{}`", o.stdout.trim());
    }
    Ok(BootEnv {
        kernel_release: l[0].trim().into(),
        nproc: l[1].trim().parse().unwrap_or(0),
        memory_mib: l[2].split_whitespace().nth(1).and_then(|k| k.parse::<u64>().ok()).unwrap_or(0) / 1024,
        aslr: l[3].trim().parse().unwrap_or(0),
        uptime_s: l[4].split_whitespace().next().and_then(|u| u.parse().ok()).unwrap_or(0.0),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grace_grows_with_tcg_overcommit_only() {
        assert_eq!(answer_grace(Accel::Tcg, 2.0), Duration::from_secs(30));
        assert_eq!(answer_grace(Accel::Tcg, 224.0), Duration::from_secs(420));
        assert_eq!(answer_grace(Accel::Kvm, 224.0), Duration::from_secs(30));
    }

    #[test]
    fn pace_stretches_guest_time_only_under_icount() {
        let mut p = Pace::default();
        assert_eq!(p.wait(MeasureClock::TcgWall, 10.0), Duration::from_secs(10));
        assert_eq!(p.wait(MeasureClock::TcgIcount, 10.0), Duration::from_secs(600), "backstop before any measurement");
        p.observe(120.0, 10.0);
        p.observe(50.0, 10.0);
        assert_eq!(p.measured(), Some(12.0), "the slowest pace is kept");
        assert_eq!(p.wait(MeasureClock::TcgIcount, 10.0), Duration::from_secs(180));
        assert_eq!(p.wait(MeasureClock::KvmWall, 10.0), Duration::from_secs(10));
        p.observe(1.0, 0.0);
        assert_eq!(p.measured(), Some(12.0), "no guest time, no measurement");
    }

    #[test]
    fn guest_time_from_the_console() {
        let text = "SeaBIOS\n[    0.000000] Linux version 6.12\n[   12.500000] random: crng init done\n\
                    harness: uptime 14.25 3.10\nharness: guest ready\n";
        assert_eq!(console_guest_time(text), Some(14.25));
        assert_eq!(console_guest_time("[   3.5] x\n"), Some(3.5));
        assert_eq!(console_guest_time("no time here\n[bad] x\n"), None);
    }

    #[test]
    fn a_paused_kvm_guest_is_noticed_from_qemu_log() {
        let log = "$ qemu\nKVM internal error. Suberror: 1\nextra data[0]: 0x0\n";
        assert_eq!(stuck_under_kvm(Accel::Kvm, log).unwrap(), "QEMU stopped the guest: KVM internal error. Suberror: 1");
        assert_eq!(stuck_under_kvm(Accel::Tcg, log), None);
        assert_eq!(stuck_under_kvm(Accel::Kvm, "$ qemu\n"), None);
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
