//! What a boot job tells as it goes: a stream of typed [`BootEvent`]s, in
//! order, each in its envelope ([`Told`]: the job and the time), into one
//! [`Sink`]. The run's sink ([`super::RunSink`]) turns them
//! into the records of `events.jsonl` and `samples.jsonl` and the progress
//! display; [`Recorder`] keeps them for tests. The lifecycle decides (retry,
//! cut, warm-up, pace); a sink only writes down what it is told.

use anyhow::Result;

use crate::bench::{CpuWindow, Measured};
use crate::plan::BootJob;
use crate::records::MeasureClock;
use crate::records::{BootEnv, Cause, Failed};
use crate::vm::{Accel, Finding};

/// The stages of a boot job, in order. A cut names the stage it happened in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BootStage {
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

impl BootStage {
    /// The stage in words, as messages name it.
    pub fn name(self) -> &'static str {
        match self {
            BootStage::Start => "start",
            BootStage::WaitSsh => "wait for SSH",
            BootStage::Environment => "read the environment",
            BootStage::Measure => "measure",
            BootStage::PowerOff => "power off",
        }
    }

    /// The step of a boot job it is, as records name it.
    pub fn step(self) -> crate::records::Stage {
        match self {
            BootStage::Start | BootStage::WaitSsh | BootStage::Environment => crate::records::Stage::Boot,
            BootStage::Measure | BootStage::PowerOff => crate::records::Stage::Benchmark,
        }
    }

    /// Whether the guest had not reached SSH yet in this stage.
    pub fn before_ssh(self) -> bool {
        matches!(self, BootStage::Start | BootStage::WaitSsh)
    }
}

/// Who one attempt at a boot job is, as QEMU starts it.
#[derive(Debug, Clone, PartialEq)]
pub struct BootStart {
    /// The attempt's id, also its log directory (`<job id>`, `<job id>.2`…).
    pub boot_id: String,
    /// Which attempt at the job this is, from 1.
    pub attempt: u32,
    /// The accelerator.
    pub accel: Accel,
    /// The clock its numbers are in.
    pub clock: MeasureClock,
    /// The kernel image's file name (`vmlinux` via PVH, or `bzImage`).
    pub image: String,
    /// vCPUs per host thread running them.
    pub overcommit: f64,
    /// The kernel command line.
    pub cmdline: String,
}

/// One step of a boot job, in the order they happen: `Job`, then per
/// attempt `Started`, and either `Cut` before SSH or `SshReady`,
/// `Environment`, repetitions, maybe a `Cut`, `PoweredOff`; the job ends
/// with `Ended` once (an attempt cut with `again` has none). A job given
/// up on ([`super::Strikes`]) is `Job` then `NotBooted`.
#[derive(Debug, Clone, PartialEq)]
pub enum BootEvent {
    /// A job begins.
    Job {
        /// Variant.
        variant: String,
        /// vCPUs.
        vcpus: u32,
        /// Boot index within (variant, vCPUs).
        boot: u32,
    },
    /// QEMU started an attempt.
    Started(BootStart),
    /// The guest's sshd let the run's key in.
    SshReady {
        /// Wall seconds from QEMU's start to the login.
        ready_s: f64,
    },
    /// What the guest said about itself at login.
    Environment {
        /// The environment, if the guest told it.
        env: Option<BootEnv>,
        /// What the console showed by then.
        findings: Vec<Finding>,
        /// Wall seconds per guest second up to the login.
        wall_per_guest_s: Option<f64>,
    },
    /// A repetition begins.
    Repetition {
        /// Benchmark.
        benchmark: String,
        /// Repetition index (warm-up ones first).
        repetition: u32,
        /// Repetitions of the benchmark in this boot, warm-up included.
        of: u32,
    },
    /// A repetition measured its metrics.
    RepetitionDone {
        /// Benchmark.
        benchmark: String,
        /// Its parameters, as records store them.
        params: serde_json::Value,
        /// Repetition index.
        repetition: u32,
        /// A warm-up repetition: recorded, never counted.
        warmup: bool,
        /// The metrics.
        metrics: Vec<Measured>,
        /// CPU idle/steal over the window.
        cpu: Option<CpuWindow>,
    },
    /// The kernel profile of a repetition's window (right after its
    /// `RepetitionDone`, whose metrics then hold its instructions per op).
    Profile {
        /// Benchmark.
        benchmark: String,
        /// Repetition index.
        repetition: u32,
        /// A warm-up repetition.
        warmup: bool,
        /// The window's profile file, relative to the run directory.
        path: std::path::PathBuf,
        /// The op count the guest closed the window with.
        ops: Option<u64>,
        /// Why the profile cannot be used, when it cannot.
        error: Option<String>,
    },
    /// A repetition produced no sample.
    RepetitionFailed {
        /// Benchmark.
        benchmark: String,
        /// Repetition index.
        repetition: u32,
        /// Why.
        error: String,
        /// Why, as a type.
        cause: Cause,
    },
    /// The attempt was cut off.
    Cut {
        /// The stage it was in.
        stage: BootStage,
        /// Why, as a type.
        cause: Cause,
        /// Why, in words (with what the last of the attempts adds).
        error: String,
        /// What the console showed by then.
        findings: Vec<Finding>,
        /// The job boots again: QEMU's failure, attempts are left.
        again: bool,
    },
    /// The guest is off (powered off, or killed when it no longer answered).
    PoweredOff {
        /// What the console and dmesg showed over the whole boot.
        findings: Vec<Finding>,
    },
    /// The job's outcome: it is done, its samples count.
    Ended {
        /// Console findings over the boot.
        findings: Vec<Finding>,
        /// Why the job could not run or was cut short.
        error: Option<String>,
        /// The slowest wall-per-guest pace of this boot's repetitions.
        busy_wall_per_guest_s: Option<f64>,
        /// Where and why the job failed, when it did.
        failed: Option<Failed>,
    },
    /// The job is done without booting: its cell's boots before it failed
    /// before SSH ([`crate::records::Cause::NotBooted`]).
    NotBooted {
        /// Why, naming the earlier failure.
        error: String,
    },
}

/// One event as the lifecycle tells it, in its envelope: whose job it is
/// and when it happened, so a sink needs no memory of the job to file it.
#[derive(Debug, Clone, PartialEq)]
pub struct Told<'j> {
    /// The job the event is of.
    pub job: &'j BootJob,
    /// When it was told (RFC 3339).
    pub at: String,
    /// What happened.
    pub event: BootEvent,
}

impl<'j> Told<'j> {
    /// `event` of `job`, now.
    pub fn now(job: &'j BootJob, event: BootEvent) -> Told<'j> {
        Told {
            job,
            at: crate::util::now_rfc3339(),
            event,
        }
    }
}

/// Where a boot job's events go.
pub trait Sink {
    /// Takes the next event; `Err` (a record that cannot be written) stops
    /// the run.
    fn emit(&mut self, told: Told) -> Result<()>;
}

/// A sink that keeps every event, for tests and tools.
#[derive(Debug, Default)]
pub struct Recorder {
    /// The events so far, in order (their envelopes dropped).
    pub events: Vec<BootEvent>,
}

impl Sink for Recorder {
    fn emit(&mut self, told: Told) -> Result<()> {
        self.events.push(told.event);
        Ok(())
    }
}
