//! One boot job's stages on a [`Machine`], told as [`BootEvent`]s to a
//! [`Sink`]: start, wait for SSH (watching QEMU and the console), read the
//! environment, measure every repetition, power off. The rules live here:
//! a QEMU that dies from a signal by itself boots the job again (up to
//! [`QEMU_CRASH_ATTEMPTS`]); a boot cut off during measurement gets no
//! `Ended`, so its samples are never counted; warm-up repetitions are
//! marked; every guest-time deadline becomes a host wait through the pace.
//! Only an interruption or a record that cannot be written returns `Err`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context, Result};

use super::events::{BootEvent, BootStage, BootStart, Sink, Told};
use super::machine::Machine;
use super::profiled::Windows;
use super::{
    boot_deadline, bounded, console_guest_time, profile_plugin, stuck_under_kvm, BootRun, Learned, Pace,
    ICOUNT_WAIT_CAP, QEMU_CRASH_ATTEMPTS, SEEN_FLOOR, SEEN_MULTIPLE,
};
use crate::bench::works_in_syscalls;
use crate::config::Clock;
use crate::guest::Deadline;
use crate::plan::BootJob;
use crate::proc;
use crate::records::MeasureClock;
use crate::records::{BootEnv, Cause, Failed};
use crate::store::Run;
use crate::vm::{self, CmdlineSpec, Exit, Finding, VmSpec};

mod measure;

/// Why a boot did not reach SSH, with what the console showed.
pub struct BootFailure {
    /// Why, as a type: [`Cause::QemuSignal`] when QEMU died from a signal
    /// by itself, whatever the wait saw first.
    pub cause: Cause,
    /// The message.
    pub error: String,
    /// Console findings.
    pub findings: Vec<Finding>,
    /// QEMU's log, for the KVM probe's diagnosis.
    pub qemu_log: String,
}

/// Stage [`BootStage::Start`]: starts a guest of `vcpus` for the run on `m`,
/// its console and QEMU's log in `dir`. Returns the kernel command line
/// and the profiler the guest loads, if any (counting instructions per
/// system call when `syscalls`).
pub fn start(
    ctx: &BootRun,
    m: &mut dyn Machine,
    vcpus: u32,
    kernel: &Path,
    initrd: &Path,
    dir: &Path,
    syscalls: bool,
) -> Result<(String, Option<vm::Plugin>)> {
    let clock = if ctx.accel == vm::Accel::Tcg {
        ctx.m.guest.clock
    } else {
        Clock::Wall
    };
    let plugin = match profile_plugin(ctx, kernel, dir, syscalls) {
        Ok(p) => p,
        Err(e) => {
            let id = dir.file_name().unwrap_or_default().to_string_lossy();
            ctx.run
                .notice(ctx.ui, format!("{id}: this boot has no kernel profile: {e:#}"))?;
            None
        }
    };
    let mut extra = ctx.m.guest.cmdline.clone();
    if plugin.is_some() {
        // the profile's symbols are the vmlinux's addresses
        extra.push("nokaslr".into());
    }
    let cmdline = vm::kernel_cmdline(&CmdlineSpec {
        aslr: ctx.m.guest.aslr,
        overcommit: ctx.overcommit(vcpus),
        accel: ctx.accel,
        clock,
        extra,
    });
    let g = &ctx.m.guest;
    let spec = VmSpec {
        qemu: ctx.qemu.clone(),
        accel: ctx.accel,
        clock,
        vcpus,
        sockets: g.sockets,
        threads: g.threads,
        numa_nodes: g.numa_nodes,
        memory_mib: g.memory_mib,
        kernel: kernel.to_path_buf(),
        initrd: initrd.to_path_buf(),
        cmdline: cmdline.clone(),
        console: dir.join("console.log"),
        ssh_port: 0,
        plugin: plugin.clone(),
        placement: vm::pin::plan(ctx.accel, clock, g, vcpus),
        hugepages: g.hugepages,
        qmp: None,
    };
    m.start(spec, &dir.join("qemu.log"))?;
    Ok((cmdline, plugin))
}

/// Stage [`BootStage::WaitSsh`]: waits until the guest's sshd lets the run's
/// key in, QEMU exits, the kernel panics, or the deadline passes (under the
/// instruction-counting clock `boot_timeout_s` is guest seconds, read off
/// the console). Returns the wall seconds to the login.
pub fn wait_ssh(
    ctx: &BootRun,
    m: &mut dyn Machine,
    deadline: Duration,
) -> Result<std::result::Result<f64, BootFailure>> {
    let mut cause = None;
    let res = m.wait_ssh(deadline, &mut |m| {
        let (c, why) = give_up(ctx, m)?;
        cause = Some(c);
        Some(why)
    });
    let e = match res {
        Ok(ready) => return Ok(Ok(ready.as_secs_f64())),
        Err(e) => interruption(e)?,
    };
    let findings = vm::scan_console(&m.console());
    // still running means the harness gave up on it (deadline, panic): only
    // a QEMU that died on its own has a signal here
    let signal = match m.exit(Duration::ZERO) {
        Ok(Exit::Signal(sig)) => Some(sig),
        _ => None,
    };
    m.kill();
    let cause = match (signal, cause) {
        (Some(_), _) => Cause::QemuSignal,
        (None, Some(c)) => c,
        (None, None) if e.downcast_ref::<Deadline>().is_some() => Cause::BootTimeout,
        (None, None) => Cause::Ssh,
    };
    Ok(Err(BootFailure {
        cause,
        error: format!("{e:#}"),
        findings,
        qemu_log: m.log(),
    }))
}

/// Why to stop waiting for SSH now, if there is a reason: a kernel panic on
/// the console, QEMU gone, no SSH forward, a KVM guest QEMU stopped, or
/// (under icount) the guest-time deadline passed.
fn give_up(ctx: &BootRun, m: &mut dyn Machine) -> Option<(Cause, String)> {
    if let Some(why) = console_flood(m) {
        return Some((Cause::OutputOverLimit, why));
    }
    let console = m.console();
    let findings = vm::scan_console(&console);
    if findings.iter().any(|f| f.kind == vm::Trouble::Panic) {
        return Some((
            Cause::Panic,
            format!("kernel panic during boot ({})", findings[0].signature),
        ));
    }
    match m.exit(Duration::ZERO) {
        Ok(Exit::Running) | Err(_) => {}
        Ok(exit @ Exit::Signal(_)) => {
            return Some((Cause::QemuSignal, qemu_exit_reason(exit, findings.first(), &m.log())))
        }
        Ok(exit) => return Some((Cause::QemuExit, qemu_exit_reason(exit, findings.first(), &m.log()))),
    }
    if !m.forwarded() {
        return Some((Cause::Qemu, "QEMU bound no SSH forward on 127.0.0.1".into()));
    }
    if let Some(why) = stuck_under_kvm(ctx.accel, &m.log()) {
        return Some((Cause::Qemu, why));
    }
    let limit = ctx.m.guest.boot_timeout_s as f64;
    match console_guest_time(&console) {
        Some(g) if ctx.clock() == MeasureClock::TcgIcount && g > limit => Some((
            Cause::BootTimeout,
            format!(
                "no SSH after {g:.0} guest seconds (guest.boot_timeout_s is {limit:.0} guest seconds under icount)"
            ),
        )),
        _ => None,
    }
}

/// Why to stop a boot whose console floods (more than
/// [`vm::MAX_CONSOLE`] written), if it does.
fn console_flood(m: &dyn Machine) -> Option<String> {
    (m.console_bytes() > vm::MAX_CONSOLE).then(|| super::machine::ConsoleFlood.to_string())
}

/// How a host wait under icount is bounded, in words.
fn icount_bound() -> String {
    format!(
        "under icount a host wait is its guest time through the pace, at most {SEEN_MULTIPLE}x the slowest of its kind the run measured (at least {} s), at most {} s",
        SEEN_FLOOR.as_secs(),
        ICOUNT_WAIT_CAP.as_secs()
    )
}

/// A boot that passed its host `deadline` under icount says so: the
/// console's guest time never reached `boot_timeout_s`, the host stopped
/// waiting first.
fn icount_deadline(ctx: &BootRun, mut f: BootFailure, deadline: Duration) -> BootFailure {
    if ctx.clock() == MeasureClock::TcgIcount && f.cause == Cause::BootTimeout && !f.error.starts_with("no SSH after") {
        f.error = format!(
            "no SSH within {} host seconds ({}): {}",
            deadline.as_secs(),
            icount_bound(),
            f.error
        );
    }
    f
}

/// `e`, unless the run was interrupted: then the interruption, as `Err`.
fn interruption(e: anyhow::Error) -> Result<anyhow::Error> {
    if e.downcast_ref::<proc::Interrupted>().is_some() {
        return Err(e);
    }
    proc::check_interrupted()?;
    Ok(e)
}

/// Why QEMU exited before SSH came up: the console's first finding, else
/// QEMU's last line. `exit` is how QEMU ended.
fn qemu_exit_reason(exit: Exit, first: Option<&Finding>, qlog: &str) -> String {
    let why = first
        .map(|f| f.signature.clone())
        .or_else(|| last_line(qlog).map(str::to_string));
    let how = match exit {
        Exit::Code(c) => format!("QEMU exited with status {c}"),
        Exit::Signal(sig) => format!("QEMU died from signal {sig} ({})", signal_name(sig)),
        Exit::Running => "QEMU still runs".to_string(),
    };
    format!(
        "{how} before SSH came up: {}",
        why.unwrap_or_else(|| "no console output".into())
    )
}

/// QEMU's last line of output.
fn last_line(qlog: &str) -> Option<&str> {
    qlog.lines()
        .rev()
        .map(str::trim)
        .find(|l| !l.is_empty() && !l.starts_with('$'))
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

/// A started attempt: its boot directory, the wait for SSH, the profiler's
/// output.
struct Launched {
    dir: PathBuf,
    deadline: Duration,
    plugin: Option<vm::Plugin>,
}

/// What became of one attempt at a boot job.
enum Attempt {
    /// The job's outcome is told (`Ended`).
    Ended,
    /// QEMU died from a signal and attempts are left: boot again.
    QemuCrashed,
}

/// A boot job in progress: the run, the machine it boots on, where its
/// events go.
pub struct Boot<'c, 'a> {
    /// The run's facts.
    pub ctx: &'c BootRun<'a>,
    /// What the run has learnt from its boots so far.
    pub learned: &'c mut Learned,
    /// The machine.
    pub machine: &'c mut dyn Machine,
    /// Where the job's events go.
    pub sink: &'c mut dyn Sink,
    /// The job.
    pub job: &'c BootJob,
}

/// One attempt's own: its log directory, the pace of its repetitions and
/// its profiler's windows.
struct Try {
    dir: PathBuf,
    pace: Pace,
    windows: Option<Windows>,
}

impl Boot<'_, '_> {
    /// Tells `event` of this job to the sink, in its envelope.
    fn tell(&mut self, event: BootEvent) -> Result<()> {
        self.sink.emit(Told::now(self.job, event))
    }

    /// The host wait for `guest_s` guest seconds: through the pace, at
    /// most [`ICOUNT_WAIT_CAP`] under icount.
    fn wait(&self, guest_s: f64) -> Duration {
        let clock = self.ctx.clock();
        bounded(clock, self.learned.pace.wait(clock, guest_s), None)
    }

    /// Runs the job through every stage and tells its outcome. While QEMU
    /// dies from a signal (its failure, not the kernel's) the job boots
    /// again in a fresh log directory (`<id>.2`…), up to
    /// [`QEMU_CRASH_ATTEMPTS`].
    pub fn run(&mut self, kernel: &Path, initrd: &Path) -> Result<()> {
        let j = self.job;
        self.tell(BootEvent::Job {
            variant: j.variant.clone(),
            vcpus: j.vcpus,
            boot: j.boot,
        })?;
        if let Some(error) = self.learned.strikes.given_up(&j.variant, j.vcpus) {
            return self.tell(BootEvent::NotBooted { error });
        }
        let mut attempt = 1;
        while let Attempt::QemuCrashed = self.attempt(kernel, initrd, attempt)? {
            attempt += 1;
        }
        Ok(())
    }

    /// One attempt at the job: every stage, or up to QEMU's crash.
    fn attempt(&mut self, kernel: &Path, initrd: &Path, attempt: u32) -> Result<Attempt> {
        let (ctx, job) = (self.ctx, self.job);
        let Launched { dir, deadline, plugin } = self.launch(kernel, initrd, attempt)?;
        let ready_s = match wait_ssh(ctx, self.machine, deadline)? {
            Ok(r) => r,
            Err(f) => return self.failed_boot(icount_deadline(ctx, f, deadline), attempt),
        };
        self.learned.seen.ssh(job.vcpus, ready_s);
        self.learned.strikes.reached(&job.variant, job.vcpus);
        self.tell(BootEvent::SshReady { ready_s })?;
        let nproc = self.environment(ready_s)?;
        let mut t = Try {
            dir,
            pace: Pace::default(),
            windows: plugin.map(Windows::new),
        };
        let (end_error, failed) = match self.measure(&mut t, nproc)? {
            None => (None, None),
            Some(cut) => match self.cut(cut, attempt)? {
                Some((error, failed)) => (Some(error), Some(failed)),
                None => return Ok(Attempt::QemuCrashed),
            },
        };
        let findings = self.power_off(end_error.is_none(), &t.dir)?;
        self.tell(BootEvent::PoweredOff {
            findings: findings.clone(),
        })?;
        self.tell(BootEvent::Ended {
            findings,
            error: end_error,
            busy_wall_per_guest_s: t.pace.measured(),
            failed,
        })?;
        Ok(Attempt::Ended)
    }

    /// Starts the machine for one attempt, in a new boot directory, and
    /// tells it: where the boot writes, how long SSH may take, and the
    /// profiler's output where the boot is profiled.
    fn launch(&mut self, kernel: &Path, initrd: &Path, attempt: u32) -> Result<Launched> {
        let (ctx, job) = (self.ctx, self.job);
        let dir = new_boot_dir(ctx.run, job)?;
        let deadline = match ctx.clock() {
            MeasureClock::TcgIcount => bounded(
                ctx.clock(),
                self.wait(ctx.m.guest.boot_timeout_s as f64),
                self.learned.seen.ssh_bound(job.vcpus),
            ),
            _ => boot_deadline(ctx.m, ctx.accel, job.vcpus),
        };
        let syscalls = job
            .benchmarks
            .iter()
            .any(|b| ctx.m.benchmark(b).is_some_and(works_in_syscalls));
        let (cmdline, plugin) = start(ctx, self.machine, job.vcpus, kernel, initrd, &dir, syscalls)?;
        self.tell(BootEvent::Started(BootStart {
            boot_id: dir.file_name().unwrap_or_default().to_string_lossy().into_owned(),
            attempt,
            accel: ctx.accel,
            clock: ctx.clock(),
            image: kernel
                .file_name()
                .map(|f| f.to_string_lossy().into_owned())
                .unwrap_or_default(),
            overcommit: ctx.overcommit(job.vcpus),
            cmdline,
        }))?;
        Ok(Launched { dir, deadline, plugin })
    }

    /// Tells a boot that did not reach SSH: a QEMU crash with attempts
    /// left boots again; anything else ends the job.
    fn failed_boot(&mut self, f: BootFailure, attempt: u32) -> Result<Attempt> {
        let again = boots_again(f.cause, attempt);
        let mut error = f.error;
        if f.cause.spurious() && !again {
            error.push_str(&all_attempts(attempt));
        }
        let findings = f.findings;
        self.tell(BootEvent::Cut {
            stage: BootStage::WaitSsh,
            cause: f.cause,
            error: error.clone(),
            findings: findings.clone(),
            again,
        })?;
        if again {
            return Ok(Attempt::QemuCrashed);
        }
        let failed = Some(Failed::new(BootStage::WaitSsh.step(), f.cause));
        self.learned
            .strikes
            .failed(&self.job.variant, self.job.vcpus, f.cause, &error);
        self.tell(BootEvent::Ended {
            findings,
            error: Some(format!("boot failed: {error}")),
            busy_wall_per_guest_s: None,
            failed,
        })?;
        Ok(Attempt::Ended)
    }

    /// Tells a measurement cut short. `None`: the job boots again (the
    /// guest is killed, the attempt gets no `Ended`); else the job's error
    /// and where and why it failed.
    fn cut(&mut self, cut: MeasureCut, attempt: u32) -> Result<Option<(String, Failed)>> {
        let again = boots_again(cut.cause, attempt);
        let error = match cut.cause {
            Cause::QemuSignal if !again => format!("{}{}", cut.why, all_attempts(attempt)),
            _ => cut.why,
        };
        let findings = vm::scan_console(&self.machine.console());
        self.tell(BootEvent::Cut {
            stage: BootStage::Measure,
            cause: cut.cause,
            error: error.clone(),
            findings,
            again,
        })?;
        if again {
            self.machine.kill();
            return Ok(None);
        }
        Ok(Some((error, Failed::new(BootStage::Measure.step(), cut.cause))))
    }

    /// Stage [`BootStage::Environment`], and the pace of guest time at login.
    /// Returns the guest's CPU count (the job's vCPUs if it did not say).
    fn environment(&mut self, ready_s: f64) -> Result<u32> {
        // the pace at login is recorded but not used for waits: under icount
        // an idle guest's clock jumps from timer to timer while the host
        // retries SSH, so it understates the pace of a busy guest;
        // repetitions measure it
        let wait = self.wait(60.0);
        let env = read_env(self.machine, wait).ok();
        let nproc = env
            .as_ref()
            .map(|e| e.nproc)
            .filter(|&n| n > 0)
            .unwrap_or(self.job.vcpus);
        let findings = vm::scan_console(&self.machine.console());
        let wall_per_guest_s = env
            .as_ref()
            .and_then(|e| (e.uptime_s > 0.0).then(|| ready_s / e.uptime_s));
        self.tell(BootEvent::Environment {
            env,
            findings,
            wall_per_guest_s,
        })?;
        Ok(nproc)
    }

    /// Stage [`BootStage::PowerOff`]: keeps dmesg (when the guest still
    /// answers), powers off (or kills), and scans the console and dmesg
    /// for trouble.
    fn power_off(&mut self, answering: bool, dir: &Path) -> Result<Vec<Finding>> {
        if answering {
            if let Ok(d) = self.machine.run("dmesg", self.wait(60.0)) {
                let p = dir.join("dmesg.log");
                std::fs::write(&p, &d.stdout).with_context(|| format!("write {}", p.display()))?;
            }
            self.machine.power_off(self.wait(15.0));
        } else {
            self.machine.kill();
        }
        let mut findings = vm::scan_console(&self.machine.console());
        let dmesg = std::fs::read(dir.join("dmesg.log"))
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_default();
        for f in vm::scan_console(&dmesg) {
            if !findings.iter().any(|x| x.signature == f.signature) {
                findings.push(f);
            }
        }
        Ok(findings)
    }
}

/// Why a boot's measurement was cut short.
struct MeasureCut {
    why: String,
    cause: Cause,
}

/// Whether a job boots again after `attempt` was cut for `cause`.
fn boots_again(cause: Cause, attempt: u32) -> bool {
    cause.spurious() && attempt < QEMU_CRASH_ATTEMPTS
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
    std::fs::create_dir_all(&dir).with_context(|| format!("create {}", dir.display()))?;
    Ok(dir)
}

/// Stage [`BootStage::Environment`]: kernel release, nproc, memory, ASLR and
/// uptime, as the guest reports them.
fn read_env(m: &mut dyn Machine, wait: Duration) -> Result<BootEnv> {
    let o = m.run(
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
        memory_mib: l[2]
            .split_whitespace()
            .nth(1)
            .and_then(|k| k.parse::<u64>().ok())
            .unwrap_or(0)
            / 1024,
        aslr: l[3].trim().parse().unwrap_or(0),
        uptime_s: l[4]
            .split_whitespace()
            .next()
            .and_then(|u| u.parse().ok())
            .unwrap_or(0.0),
    })
}
