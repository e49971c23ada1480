//! What a run's files hold, as plain records: `run.json` ([`RunMeta`] with
//! its [`Host`] and pinned [`inputs::Inputs`]), each line of `samples.jsonl`
//! ([`Sample`]) and of `events.jsonl` ([`Event`], a boot's [`BootEnv`]).
//! Pure types and checks; reading and writing them is `store`'s.

pub mod clock;
pub mod inputs;
pub mod outcome;
pub mod schema;

pub use crate::vocab::{Accel, CpuWindow, Finding, Host, HostState, Lost, PatchFailure, SeriesState, Trouble};
pub use clock::MeasureClock;
pub use outcome::{Cause, Failed, Stage};

use anyhow::{bail, Result};
use serde::{Deserialize, Serialize};

use crate::config::Matrix;

/// Version of the files' format.
pub const FORMAT_VERSION: u32 = 1;

/// `run.json`.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RunMeta {
    /// Format version.
    pub format_version: u32,
    /// Run id (the directory name).
    pub id: String,
    /// When it started (UTC, RFC 3339).
    pub started: String,
    /// The validated matrix.
    pub matrix: Matrix,
    /// Host facts.
    pub host: Host,
    /// git revision of the harness checkout, if any.
    pub harness_revision: Option<String>,
    /// The clock the run's numbers are in, once the accelerator is known.
    #[serde(default)]
    pub clock: Option<MeasureClock>,
    /// Hashes of the source, series, fragments and base config at the
    /// start; `--resume` refuses when they changed (absent in older runs).
    #[serde(default)]
    pub inputs: Option<inputs::Inputs>,
    /// How many boot jobs ran at once (`run --jobs`), once boots begin
    /// (absent in older runs: one at a time).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jobs: Option<u32>,
    /// A random identity (UUID v4) made when the run was created: two runs
    /// with the same id (the same minute, the same matrix, another host)
    /// are told apart by it (absent in older runs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<String>,
    /// The host-wide wall-clock lock file its boots took
    /// (`HARNESS_WALL_LOCK`, else `/tmp/harness-wall-clock.lock`): exclusive
    /// under a wall clock, shared under icount; waits for another holder are
    /// notices in the events (absent in older runs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wall_lock: Option<String>,
}

/// A random UUID v4, in its usual text form.
pub fn new_uid() -> String {
    let mut b: [u8; 16] = rand::random();
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h = crate::util::hex(&b);
    format!("{}-{}-{}-{}-{}", &h[..8], &h[8..12], &h[12..16], &h[16..20], &h[20..])
}

/// One measured value.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct Sample {
    /// Variant.
    pub variant: String,
    /// vCPUs.
    pub vcpus: u32,
    /// Benchmark name.
    pub benchmark: String,
    /// Benchmark parameters.
    pub params: serde_json::Value,
    /// Metric.
    pub metric: String,
    /// Unit.
    pub unit: String,
    /// Direction.
    pub higher_is_better: bool,
    /// Boot id (unique per boot in the run).
    pub boot_id: String,
    /// Boot index within the cell.
    pub boot: u32,
    /// Repetition index within the boot (warm-up ones first).
    pub repetition: u32,
    /// A warm-up repetition, kept apart from the statistics.
    pub warmup: bool,
    /// The value.
    pub value: f64,
    /// Per-second values behind it, if any.
    #[serde(default)]
    pub series: Vec<f64>,
    /// CPU idle/steal over the sample window.
    pub cpu: Option<CpuWindow>,
    /// The clock the value is in (absent in records older than clocks).
    #[serde(default)]
    pub clock: Option<MeasureClock>,
    /// When it was taken (UTC, RFC 3339).
    pub timestamp: String,
}

impl Sample {
    /// Fails when the value, a per-second value or the CPU window is NaN or infinite.
    pub fn check_finite(&self) -> Result<()> {
        if !self.value.is_finite() {
            bail!("value {} is not finite", self.value);
        }
        if let Some(x) = self.series.iter().find(|x| !x.is_finite()) {
            bail!("per-second value {x} is not finite");
        }
        if let Some(c) = &self.cpu {
            if !(c.idle.is_finite() && c.steal.is_finite()) {
                bail!("CPU window {c:?} is not finite");
            }
        }
        Ok(())
    }
}

/// Environment of one boot, read in the guest.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default, schemars::JsonSchema)]
pub struct BootEnv {
    /// `uname -r`.
    pub kernel_release: String,
    /// `nproc`.
    pub nproc: u32,
    /// MemTotal in MiB.
    pub memory_mib: u64,
    /// `/proc/sys/kernel/randomize_va_space`.
    pub aslr: u32,
    /// Guest seconds since boot at login (`/proc/uptime`).
    #[serde(default)]
    pub uptime_s: f64,
}

/// A step's outcome.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    /// A series' state against the base tree.
    Series {
        /// Series.
        series: String,
        /// State.
        state: SeriesState,
    },
    /// A variant's patches.
    Patch {
        /// Variant.
        variant: String,
        /// The failure, if the variant could not be made.
        failure: Option<PatchFailure>,
        /// Other problems (a revert of a series the base lacks, …).
        error: Option<String>,
        /// Where and why it failed, when it did (absent in runs recorded
        /// before causes were).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        failed: Option<Failed>,
    },
    /// A variant's config.
    Config {
        /// Variant.
        variant: String,
        /// Symbols that lost their requested value.
        lost: Vec<Lost>,
        /// Failure to configure.
        error: Option<String>,
        /// Where and why it failed, when it did (absent in runs recorded
        /// before causes were).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        failed: Option<Failed>,
    },
    /// A variant's build.
    Build {
        /// Variant.
        variant: String,
        /// Cache key.
        key: Option<String>,
        /// Seconds (0 when cached).
        build_s: f64,
        /// Reused from the cache.
        cached: bool,
        /// Kernel release.
        release: Option<String>,
        /// Compiler errors, when it failed.
        errors: Vec<String>,
        /// Failure summary.
        error: Option<String>,
        /// Where and why it failed, when it did (absent in runs recorded
        /// before causes were).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        failed: Option<Failed>,
    },
    /// A boot.
    Boot {
        /// Variant.
        variant: String,
        /// vCPUs.
        vcpus: u32,
        /// Boot index.
        boot: u32,
        /// Boot id.
        boot_id: String,
        /// Accelerator.
        accel: Accel,
        /// The clock the boot's numbers are in.
        #[serde(default)]
        clock: Option<MeasureClock>,
        /// Wall seconds per guest second from QEMU start to SSH login, as
        /// measured from the guest's uptime (about 1 under a wall clock;
        /// under icount an idle guest's clock jumps ahead, so this is lower
        /// than a busy guest's pace).
        #[serde(default)]
        wall_per_guest_s: Option<f64>,
        /// Kernel command line.
        cmdline: String,
        /// Kernel image booted (`vmlinux` via PVH, or `bzImage`).
        #[serde(default)]
        image: String,
        /// vCPUs per host CPU.
        overcommit: f64,
        /// Seconds from QEMU start to SSH login.
        ready_s: Option<f64>,
        /// What the guest said about itself.
        env: Option<BootEnv>,
        /// Failure to boot.
        error: Option<String>,
        /// Console findings during boot.
        findings: Vec<Finding>,
        /// QEMU died from a signal before SSH (its failure, not the
        /// kernel's) and the job was started again in a new boot.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        retried: bool,
        /// Where and why it failed, when it did (absent in runs recorded
        /// before causes were).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        failed: Option<Failed>,
    },
    /// A benchmark repetition that produced no sample.
    BenchFailed {
        /// Variant.
        variant: String,
        /// vCPUs.
        vcpus: u32,
        /// Benchmark.
        benchmark: String,
        /// Boot id.
        boot_id: String,
        /// Repetition.
        repetition: u32,
        /// Why.
        error: String,
        /// Where and why it failed, when it did (absent in runs recorded
        /// before causes were).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        failed: Option<Failed>,
    },
    /// A boot job finished (all its benchmarks ran or were given up).
    BootEnd {
        /// Variant.
        variant: String,
        /// vCPUs.
        vcpus: u32,
        /// Boot index.
        boot: u32,
        /// Boot id (None when the variant never built).
        boot_id: Option<String>,
        /// Console findings over the whole boot.
        findings: Vec<Finding>,
        /// Why the job could not run or was cut short.
        error: Option<String>,
        /// Wall seconds per guest second while the guest ran its
        /// benchmarks (the slowest repetition of this boot, from the
        /// guest's uptime around it): about 1 under a wall clock, the cost
        /// of a guest second under icount.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        busy_wall_per_guest_s: Option<f64>,
        /// Where and why it failed, when it did (absent in runs recorded
        /// before causes were).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        failed: Option<Failed>,
    },
    /// The kernel profile of one benchmark repetition's window (absent in
    /// runs recorded before profiles).
    Profile {
        /// Variant.
        variant: String,
        /// vCPUs.
        vcpus: u32,
        /// Boot index.
        boot: u32,
        /// Boot id.
        boot_id: String,
        /// Benchmark.
        benchmark: String,
        /// Repetition.
        repetition: u32,
        /// A warm-up repetition: recorded, never counted.
        warmup: bool,
        /// The profile file, relative to the run directory.
        path: String,
        /// The benchmark operations in the window (its instructions per op
        /// are samples of their own).
        ops: Option<u64>,
        /// Why the profile cannot be used, when it cannot.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<String>,
    },
    /// A notice shown to the user (accelerator fallback, …).
    Notice {
        /// Text.
        message: String,
    },
}

impl Event {
    /// Where and why the step failed, if it did and the run recorded it.
    pub fn failed(&self) -> Option<Failed> {
        match self {
            Event::Patch { failed, .. }
            | Event::Config { failed, .. }
            | Event::Build { failed, .. }
            | Event::Boot { failed, .. }
            | Event::BenchFailed { failed, .. }
            | Event::BootEnd { failed, .. } => *failed,
            Event::Series { .. } | Event::Notice { .. } | Event::Profile { .. } => None,
        }
    }
}
