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

use super::events::{BootEvent, BootStart, Sink, Stage};
use super::machine::Machine;
use super::profiled::Windows;
use super::{
    answer_grace, boot_deadline, bounded, console_guest_time, profile_plugin, stuck_under_kvm, BootCtx, Pace,
    ICOUNT_WAIT_CAP, QEMU_CRASH_ATTEMPTS, SEEN_FLOOR, SEEN_MULTIPLE,
};
use crate::bench;
use crate::config::{BenchKind, Benchmark, Clock};
use crate::guest::{Deadline, Output, OverLimit, Timeout};
use crate::plan::BootJob;
use crate::proc;
use crate::records::{BootEnv, Cause, Failed};
use crate::store::Run;
use crate::vm::{self, CmdlineSpec, Exit, Finding, MeasureClock, VmSpec};

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

/// Stage [`Stage::Start`]: starts a guest of `vcpus` for the run on `m`,
/// its console and QEMU's log in `dir`. Returns the kernel command line
/// and the profiler the guest loads, if any.
pub fn start(
    ctx: &BootCtx,
    m: &mut dyn Machine,
    vcpus: u32,
    kernel: &Path,
    initrd: &Path,
    dir: &Path,
) -> Result<(String, Option<vm::Plugin>)> {
    let clock = if ctx.accel == vm::Accel::Tcg {
        ctx.m.guest.clock
    } else {
        Clock::Wall
    };
    let plugin = match profile_plugin(ctx, kernel, dir) {
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
    };
    m.start(spec, &dir.join("qemu.log"))?;
    Ok((cmdline, plugin))
}

/// Stage [`Stage::WaitSsh`]: waits until the guest's sshd lets the run's
/// key in, QEMU exits, the kernel panics, or the deadline passes (under the
/// instruction-counting clock `boot_timeout_s` is guest seconds, read off
/// the console). Returns the wall seconds to the login.
pub fn wait_ssh(
    ctx: &BootCtx,
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
fn give_up(ctx: &BootCtx, m: &mut dyn Machine) -> Option<(Cause, String)> {
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
    (m.console_bytes() > vm::MAX_CONSOLE).then(|| {
        format!(
            "console over limit: the guest wrote more than {} MiB to its console",
            vm::MAX_CONSOLE >> 20
        )
    })
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
fn icount_deadline(ctx: &BootCtx, mut f: BootFailure, deadline: Duration) -> BootFailure {
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
    /// The run's context.
    pub ctx: &'c mut BootCtx<'a>,
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
    /// Runs the job through every stage and tells its outcome. While QEMU
    /// dies from a signal (its failure, not the kernel's) the job boots
    /// again in a fresh log directory (`<id>.2`…), up to
    /// [`QEMU_CRASH_ATTEMPTS`].
    pub fn run(&mut self, kernel: &Path, initrd: &Path) -> Result<()> {
        let j = self.job;
        self.sink.emit(BootEvent::Job {
            variant: j.variant.clone(),
            vcpus: j.vcpus,
            boot: j.boot,
        })?;
        if let Some(error) = self.ctx.strikes.given_up(&j.variant, j.vcpus) {
            return self.sink.emit(BootEvent::NotBooted { error });
        }
        let mut attempt = 1;
        while let Attempt::QemuCrashed = self.attempt(kernel, initrd, attempt)? {
            attempt += 1;
        }
        Ok(())
    }

    /// One attempt at the job: every stage, or up to QEMU's crash.
    fn attempt(&mut self, kernel: &Path, initrd: &Path, attempt: u32) -> Result<Attempt> {
        let (ctx, job) = (&*self.ctx, self.job);
        let dir = new_boot_dir(ctx.run, job)?;
        let deadline = match ctx.clock() {
            MeasureClock::TcgIcount => bounded(
                ctx.clock(),
                ctx.wait(ctx.m.guest.boot_timeout_s as f64),
                ctx.seen.ssh_bound(job.vcpus),
            ),
            _ => boot_deadline(ctx.m, ctx.accel, job.vcpus),
        };
        let (cmdline, plugin) = start(ctx, self.machine, job.vcpus, kernel, initrd, &dir)?;
        self.sink.emit(BootEvent::Started(BootStart {
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
        let ready_s = match wait_ssh(ctx, self.machine, deadline)? {
            Ok(r) => r,
            Err(f) => return self.failed_boot(icount_deadline(ctx, f, deadline), attempt),
        };
        self.ctx.seen.ssh(job.vcpus, ready_s);
        self.ctx.strikes.reached(&job.variant, job.vcpus);
        self.sink.emit(BootEvent::SshReady { ready_s })?;
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
        self.sink.emit(BootEvent::PoweredOff {
            findings: findings.clone(),
        })?;
        self.sink.emit(BootEvent::Ended {
            findings,
            error: end_error,
            busy_wall_per_guest_s: t.pace.measured(),
            failed,
        })?;
        Ok(Attempt::Ended)
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
        self.sink.emit(BootEvent::Cut {
            stage: Stage::WaitSsh,
            cause: f.cause,
            error: error.clone(),
            findings: findings.clone(),
            again,
        })?;
        if again {
            return Ok(Attempt::QemuCrashed);
        }
        let failed = Some(Failed::new(Stage::WaitSsh.step(), f.cause));
        self.ctx
            .strikes
            .failed(&self.job.variant, self.job.vcpus, f.cause, &error);
        self.sink.emit(BootEvent::Ended {
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
        self.sink.emit(BootEvent::Cut {
            stage: Stage::Measure,
            cause: cut.cause,
            error: error.clone(),
            findings,
            again,
        })?;
        if again {
            self.machine.kill();
            return Ok(None);
        }
        Ok(Some((error, Failed::new(Stage::Measure.step(), cut.cause))))
    }

    /// Stage [`Stage::Environment`], and the pace of guest time at login.
    /// Returns the guest's CPU count (the job's vCPUs if it did not say).
    fn environment(&mut self, ready_s: f64) -> Result<u32> {
        // the pace at login is recorded but not used for waits: under icount
        // an idle guest's clock jumps from timer to timer while the host
        // retries SSH, so it understates the pace of a busy guest;
        // repetitions measure it
        let env = read_env(self.machine, self.ctx.wait(60.0)).ok();
        let nproc = env
            .as_ref()
            .map(|e| e.nproc)
            .filter(|&n| n > 0)
            .unwrap_or(self.job.vcpus);
        let findings = vm::scan_console(&self.machine.console());
        let wall_per_guest_s = env
            .as_ref()
            .and_then(|e| (e.uptime_s > 0.0).then(|| ready_s / e.uptime_s));
        self.sink.emit(BootEvent::Environment {
            env,
            findings,
            wall_per_guest_s,
        })?;
        Ok(nproc)
    }

    /// Stage [`Stage::Measure`]: every repetition of every benchmark of the
    /// job. Returns why the boot was cut short (the guest stopped answering
    /// or QEMU died), if it was.
    fn measure(&mut self, t: &mut Try, nproc: u32) -> Result<Option<MeasureCut>> {
        let (m, job) = (self.ctx.m, self.job);
        for bname in &job.benchmarks {
            let Some(b) = m.benchmark(bname) else { continue };
            let of = m.sampling.warmup_repetitions + m.sampling.repetitions;
            for rep in 0..of {
                proc::check_interrupted()?;
                if let Some(why) = console_flood(&*self.machine) {
                    return Ok(Some(MeasureCut {
                        why: format!("{} during {}: {why}", Stage::Measure.name(), bname),
                        cause: Cause::OutputOverLimit,
                    }));
                }
                self.sink.emit(BootEvent::Repetition {
                    benchmark: bname.clone(),
                    repetition: rep,
                    of,
                })?;
                if let Err(cut) = self.repetition(t, b, nproc, rep)? {
                    return Ok(Some(MeasureCut {
                        why: format!("{} during {}: {}", Stage::Measure.name(), bname, cut.why),
                        ..cut
                    }));
                }
            }
        }
        Ok(None)
    }

    /// One repetition: run, parse, tell its metrics or its failure.
    /// `Ok(Err(cut))` means the guest stopped answering or QEMU died (then
    /// no failure is told here: the boot is QEMU's failure, not the
    /// kernel's).
    fn repetition(
        &mut self,
        t: &mut Try,
        b: &Benchmark,
        nproc: u32,
        rep: u32,
    ) -> Result<std::result::Result<(), MeasureCut>> {
        let cmd = bench::command(b, nproc);
        let grace = answer_grace(self.ctx.accel, self.ctx.overcommit(self.job.vcpus));
        let seen = self.ctx.seen.repetition_bound(&b.name, self.job.vcpus);
        let wait = bounded(self.ctx.clock(), self.ctx.wait(b.timeout_s as f64) + grace, seen);
        let out = match self.machine.run(&cmd, wait) {
            Ok(out) => out,
            Err(e) if e.downcast_ref::<OverLimit>().is_some() => {
                // the guest answers; only this repetition is no measurement
                let failed = BootEvent::RepetitionFailed {
                    benchmark: b.name.clone(),
                    repetition: rep,
                    error: format!("{e:#}"),
                    cause: Cause::OutputOverLimit,
                };
                return self.sink.emit(failed).map(Ok);
            }
            Err(e) => return self.no_answer(b, rep, wait, e).map(Err),
        };
        let log = t.dir.join(format!("bench-{}-r{rep}.log", b.name));
        std::fs::write(
            &log,
            format!(
                "$ {cmd}\n# status {:?}\n{}\n# stderr\n{}",
                out.status, out.stdout, out.stderr
            ),
        )
        .with_context(|| format!("write {}", log.display()))?;
        if let Some(g) = bench::guest_span(&out.stdout) {
            let wall = out.elapsed.as_secs_f64();
            self.ctx.pace.observe(wall, g);
            t.pace.observe(wall, g);
        }
        let vmalloc = matches!(b.kind, BenchKind::TestVmalloc { .. });
        let event = match bench::parse(b, &out.stdout) {
            Ok(p) if out.status == Some(0) || vmalloc => {
                self.ctx
                    .seen
                    .repetition(&b.name, self.job.vcpus, out.elapsed.as_secs_f64());
                BootEvent::RepetitionDone {
                    benchmark: b.name.clone(),
                    params: serde_json::to_value(&b.kind)?,
                    repetition: rep,
                    warmup: rep < self.ctx.m.sampling.warmup_repetitions,
                    metrics: p.metrics,
                    cpu: p.cpu,
                }
            }
            other => {
                let (cause, error) = failure(b, &out, other.err());
                BootEvent::RepetitionFailed {
                    benchmark: b.name.clone(),
                    repetition: rep,
                    error,
                    cause,
                }
            }
        };
        self.with_profile(t, crate::bench::unit_of_work(b), event).map(Ok)
    }

    /// Tells a repetition's outcome with the profiler window it closed,
    /// if the plugin wrote one: its instructions per op join the
    /// repetition's metrics, and the window is told as a `Profile`. A
    /// failed repetition's window is passed over.
    fn with_profile(&mut self, t: &mut Try, unit: &[&str], mut event: BootEvent) -> Result<()> {
        let Some(w) = t.windows.as_mut().and_then(|w| w.take(unit)) else {
            return self.sink.emit(event);
        };
        let BootEvent::RepetitionDone {
            benchmark,
            repetition,
            warmup,
            metrics,
            ..
        } = &mut event
        else {
            return self.sink.emit(event);
        };
        let (ops, error) = match w.read {
            Ok((ops, ms)) => {
                metrics.extend(ms);
                (Some(ops), None)
            }
            Err(e) => (None, Some(e)),
        };
        let path = w.path.strip_prefix(&self.ctx.run.dir).unwrap_or(&w.path).to_path_buf();
        let profile = BootEvent::Profile {
            benchmark: benchmark.clone(),
            repetition: *repetition,
            warmup: *warmup,
            path,
            ops,
            error,
        };
        self.sink.emit(event)?;
        self.sink.emit(profile)
    }

    /// A repetition without a result: QEMU died from a signal (a cut, not
    /// the kernel's failure), the guest stopped answering, or SSH failed.
    fn no_answer(&mut self, b: &Benchmark, rep: u32, wait: Duration, e: anyhow::Error) -> Result<MeasureCut> {
        let e = interruption(e)?;
        if let Ok(Exit::Signal(sig)) = self.machine.exit(Duration::from_secs(1)) {
            let qlog = self.machine.log();
            let why = format!(
                "QEMU died from signal {sig} ({}) in repetition {rep}: {}",
                signal_name(sig),
                last_line(&qlog).unwrap_or("no QEMU output")
            );
            return Ok(MeasureCut {
                why,
                cause: Cause::QemuSignal,
            });
        }
        let (cause, why) = if e.downcast_ref::<Timeout>().is_some() && self.ctx.clock() == MeasureClock::TcgIcount {
            (
                Cause::GuestHung,
                format!(
                    "guest stopped answering: no result within {} host seconds ({})",
                    wait.as_secs(),
                    icount_bound()
                ),
            )
        } else if e.downcast_ref::<Timeout>().is_some() {
            (
                Cause::GuestHung,
                format!(
                    "guest stopped answering: no result {} s after the benchmark's timeout",
                    (wait.as_secs()).saturating_sub(b.timeout_s)
                ),
            )
        } else {
            (Cause::Ssh, format!("{e:#}"))
        };
        self.sink.emit(BootEvent::RepetitionFailed {
            benchmark: b.name.clone(),
            repetition: rep,
            error: why.clone(),
            cause,
        })?;
        Ok(MeasureCut { why, cause })
    }

    /// Stage [`Stage::PowerOff`]: keeps dmesg (when the guest still
    /// answers), powers off (or kills), and scans the console and dmesg
    /// for trouble.
    fn power_off(&mut self, answering: bool, dir: &Path) -> Result<Vec<Finding>> {
        if answering {
            if let Ok(d) = self.machine.run("dmesg", self.ctx.wait(60.0)) {
                let p = dir.join("dmesg.log");
                std::fs::write(&p, &d.stdout).with_context(|| format!("write {}", p.display()))?;
            }
            self.machine.power_off(self.ctx.wait(15.0));
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

/// Why a repetition failed that did produce output.
fn failure(b: &Benchmark, out: &Output, parsed: Option<anyhow::Error>) -> (Cause, String) {
    match (out.status, parsed) {
        (Some(0), Some(e)) if e.downcast_ref::<bench::NoProgress>().is_some() => (Cause::NoProgress, format!("{e:#}")),
        (Some(124) | Some(137), _) => (Cause::BenchTimeout, format!("killed at its {} s timeout", b.timeout_s)),
        (status, None) => (
            Cause::BenchError,
            format!("exited with {status:?}: {}", out.stderr.trim()),
        ),
        (status, Some(e)) => (
            Cause::BenchError,
            format!("{e:#} (status {status:?}; {})", out.stderr.trim()),
        ),
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

/// Stage [`Stage::Environment`]: kernel release, nproc, memory, ASLR and
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
