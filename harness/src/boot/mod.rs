//! One boot job's lifecycle as explicit [`BootStage`]s — start QEMU, wait for
//! SSH (watching QEMU and the console), read the guest's environment,
//! measure every benchmark repetition, power off — told as a stream of
//! typed [`BootEvent`]s into a [`Sink`] ([`RunSink`] writes the run's
//! records and drives the progress display), on a [`Machine`] ([`Qemu`], or
//! a scripted fake in tests). Also the KVM probe boot and the [`Pace`] that
//! turns guest-time deadlines into host waits. Only an interruption or a
//! failure to write records returns `Err`.

mod bounds;
mod events;
mod lifecycle;
mod machine;
pub mod profiled;
mod sink;

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result};

pub use bounds::{
    bounded, first_ssh_bound, Seen, Strikes, BOOTS_BEFORE_GIVING_UP, FIRST_SSH_CAP, FIRST_SSH_PER_VCPU,
    ICOUNT_WAIT_CAP, SEEN_FLOOR, SEEN_MULTIPLE,
};
pub use events::{BootEvent, BootStage, BootStart, Recorder, Sink, Told};
pub use lifecycle::{start, wait_ssh, Boot, BootFailure};
pub use machine::{Abort, Machine, Qemu, Spawner};
pub use sink::RunSink;

use crate::config::Matrix;
use crate::kernel::build::Artifact;
use crate::plan::BootJob;
use crate::records::MeasureClock;
use crate::store::Run;
use crate::ui::Ui;
use crate::vm::Accel;

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

    /// Keeps the slower of this pace and `other` (what another boot
    /// running at the same time measured).
    pub fn merge(&mut self, other: Pace) {
        if let Some(p) = other.wall_per_guest {
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
            MeasureClock::TcgIcount => self
                .wall_per_guest
                .map_or(ICOUNT_BACKSTOP_PACE, |p| (p * PACE_MARGIN).max(1.0)),
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
            l.split(crate::image::UPTIME_MARK)
                .nth(1)
                .and_then(|r| r.split_whitespace().next()?.parse::<f64>().ok())
        };
        if let Some(t) = t.filter(|t| t.is_finite()) {
            best = Some(best.map_or(t, |b: f64| b.max(t)));
        }
    }
    best
}

/// The run's facts a boot job needs: the same for every job of the run
/// (a KVM probe is the run's facts under another accelerator).
#[derive(Clone)]
pub struct BootRun<'a> {
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
    /// The kernel profiler plugin, when this run's boots are profiled
    /// (each kernel's symbols beside its image, see [`profile_plugin`]).
    pub profiler: Option<PathBuf>,
}

impl BootRun<'_> {
    /// The clock this run's boots measure in.
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
}

/// What the run has learnt from its boots so far: the guest's pace, the
/// slowest boots to SSH and repetitions (the bounds of waits under icount),
/// the cells whose boots failed before SSH one after the other.
#[derive(Debug, Clone, Default)]
pub struct Learned {
    /// Guest pace measured so far.
    pub pace: Pace,
    /// The slowest boots to SSH and repetitions so far.
    pub seen: Seen,
    /// Boots failed before SSH in a row, per cell.
    pub strikes: Strikes,
}

impl Learned {
    /// Takes in what one job learnt (`after`), which started from
    /// `before`, while other jobs may have added to `self` meanwhile.
    pub fn merge(&mut self, before: &Learned, after: &Learned, job: &BootJob) {
        self.pace.merge(after.pace);
        self.seen.merge(&after.seen);
        self.strikes
            .merge_job(&before.strikes, &after.strikes, &job.variant, job.vcpus);
    }
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
    let factor = if accel == Accel::Tcg {
        (overcommit / 16.0).max(1.0)
    } else {
        1.0
    };
    Duration::from_secs_f64(30.0 * factor)
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

/// The profiler of a boot of `kernel` whose log directory is `dir`, when
/// the run profiles and the boot runs under the instruction-counting clock:
/// the kernel's symbols file beside its image, the profile in the run's
/// `profiles/<boot id>.profile`. `Err`: the plugin's inputs would make QEMU
/// abort (then the boot goes without).
/// `syscalls`: the plugin counts instructions per system call too.
pub fn profile_plugin(ctx: &BootRun, kernel: &Path, dir: &Path, syscalls: bool) -> Result<Option<crate::vm::Plugin>> {
    let Some(so) = ctx
        .profiler
        .clone()
        .filter(|_| ctx.m.guest.kernel_profile && ctx.clock() == MeasureClock::TcgIcount)
    else {
        return Ok(None);
    };
    let profiles = ctx.run.records().join(PROFILES_DIR);
    std::fs::create_dir_all(&profiles).with_context(|| format!("create {}", profiles.display()))?;
    let id = dir.file_name().unwrap_or_default().to_string_lossy();
    let data = kernel.with_file_name(crate::profile::symbols::DATA_FILE);
    let p = crate::vm::Plugin {
        so,
        symbols: kernel.with_file_name(crate::profile::symbols::FILE),
        out: profiles.join(format!("{id}.profile")),
        syscalls,
        data: (ctx.m.guest.contention && data.is_file()).then_some(data),
    };
    p.check()?;
    Ok(Some(p))
}

/// The directory of a run's (or shard's) profiles.
pub const PROFILES_DIR: &str = "profiles";

/// Runs one boot job on QEMU through every stage, its events written into
/// the run and shown (see [`Boot::run`] for the retry rule).
pub fn run_job(
    ctx: &BootRun,
    learned: &mut Learned,
    job: &BootJob,
    art: &Artifact,
    pvh: bool,
    initrd: &Path,
) -> Result<()> {
    run_job_spawning(ctx, learned, job, art, pvh, initrd, None)
}

/// [`run_job`], QEMU started by `spawn` when given (a job on a worker
/// thread of `run --jobs`).
pub fn run_job_spawning(
    ctx: &BootRun,
    learned: &mut Learned,
    job: &BootJob,
    art: &Artifact,
    pvh: bool,
    initrd: &Path,
    spawn: Option<Spawner>,
) -> Result<()> {
    let kernel = art.boot_image(pvh);
    let (run, ui) = (ctx.run, ctx.ui);
    let mut machine = match spawn {
        Some(s) => Qemu::spawning(ctx.key.clone(), ctx.host_key.clone(), s),
        None => Qemu::new(ctx.key.clone(), ctx.host_key.clone()),
    };
    let mut sink = RunSink::new(run, ui);
    Boot {
        ctx,
        learned,
        machine: &mut machine,
        sink: &mut sink,
        job,
    }
    .run(kernel, initrd)
}

/// Why a KVM probe boot failed.
#[derive(Debug, Clone, PartialEq)]
pub struct ProbeFailure {
    /// In words: QEMU's KVM complaint, else the boot's error.
    pub why: String,
    /// QEMU itself blamed KVM (only then is the failure worth remembering for the host).
    pub kvm_fault: bool,
    /// The boot's cause ([`crate::records::Cause::Panic`]: the kernel's own failure).
    pub cause: crate::records::Cause,
}

/// The KVM probe: one short boot of `kernel` at 1 vCPU under KVM. `Ok(None)`:
/// KVM works. `Ok(Some(failure))`: the boot failed, and why.
pub fn probe_kvm(ctx: &BootRun, kernel: &Path, initrd: &Path, dir: &Path) -> Result<Option<ProbeFailure>> {
    std::fs::create_dir_all(dir).with_context(|| format!("create {}", dir.display()))?;
    let probe = BootRun {
        accel: Accel::Kvm,
        ..ctx.clone()
    };
    let mut machine = Qemu::new(ctx.key.clone(), ctx.host_key.clone());
    probe_on(&probe, &mut machine, kernel, initrd, dir)
}

/// The KVM probe boot on `machine`, under `probe`'s accelerator.
fn probe_on(
    probe: &BootRun,
    machine: &mut dyn Machine,
    kernel: &Path,
    initrd: &Path,
    dir: &Path,
) -> Result<Option<ProbeFailure>> {
    start(probe, machine, 1, kernel, initrd, dir, false)?;
    match wait_ssh(probe, machine, PROBE_DEADLINE)? {
        Ok(_) => {
            machine.power_off(Duration::from_secs(5));
            Ok(None)
        }
        Err(f) => {
            let fault = kvm_failure_reason(&f.qemu_log)
                .filter(|r| r.contains("KVM") || r.contains("kvm") || r.contains("Assertion"))
                .or_else(|| silent_under_kvm(f.cause, &machine.console()));
            Ok(Some(ProbeFailure {
                kvm_fault: fault.is_some(),
                why: fault.unwrap_or(f.error),
                cause: f.cause,
            }))
        }
    }
}

/// A probe guest still running at the deadline that never wrote a byte to
/// its console: the 1-vCPU KVM guest never reached the kernel's first
/// lines, which every kernel the harness boots prints within seconds
/// (`amd_pstate`, then `harness: guest ready`). KVM's fault, as an internal
/// error is: seen on the development hosts once QEMU stopped reporting that
/// error and the guest hung instead (2026-12-02).
fn silent_under_kvm(cause: crate::records::Cause, console: &str) -> Option<String> {
    use crate::records::Cause;
    (matches!(cause, Cause::BootTimeout | Cause::Ssh) && console.trim().is_empty()).then(|| {
        format!(
            "the KVM guest wrote nothing to its console in {} s",
            PROBE_DEADLINE.as_secs()
        )
    })
}

/// How long the KVM probe may take: a 1-vCPU KVM guest reaches SSH in a few
/// seconds on any host where KVM works.
pub const PROBE_DEADLINE: Duration = Duration::from_secs(60);

#[cfg(test)]
mod fake;
#[cfg(test)]
mod tests;
