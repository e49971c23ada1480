//! The vocabulary: plain values that several layers name and the run
//! files hold — the accelerator, what a console showed, a sample window's
//! CPU time, a series' state against a tree, a config symbol lost, the
//! host's facts. Defined once here, low in the layers: `vm`, `bench`,
//! `kernel` and `host` make them, `records` writes them, and their JSON
//! Schemas (`docs/schema/`, checked by a fast test) are what keeps the
//! files' format from changing unseen. Behaviour lives with the module
//! that makes each value (`impl` blocks there).

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// The accelerator a guest runs under.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Accel {
    /// Hardware virtualisation.
    Kvm,
    /// Software emulation, multi-threaded.
    Tcg,
}

/// Kinds of trouble a console can show.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, PartialOrd, Ord, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Trouble {
    /// Kernel panic.
    Panic,
    /// Oops / general protection fault.
    Oops,
    /// BUG: (other than soft lockup and sleeping-in-atomic).
    Bug,
    /// WARNING: at/CPU.
    Warn,
    /// Lockdep report.
    Lockdep,
    /// Soft lockup.
    SoftLockup,
    /// RCU stall.
    RcuStall,
    /// Hung task.
    HungTask,
}

/// One finding: its kind and a one-line signature (kind + first function of
/// the call trace).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct Finding {
    /// Kind.
    pub kind: Trouble,
    /// The console line that announced it.
    pub line: String,
    /// `kind: function` when a call trace followed.
    pub signature: String,
}

/// CPU time split over a sample window, from two `/proc/stat` cpu lines.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Default, schemars::JsonSchema)]
pub struct CpuWindow {
    /// Fraction of CPU time idle (idle + iowait).
    pub idle: f64,
    /// Fraction stolen by the hypervisor.
    pub steal: f64,
}

/// Where a patch did not apply.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default, schemars::JsonSchema)]
#[schemars(rename = "Failure")] // the schema's name from before the type was named for its kind
pub struct PatchFailure {
    /// The patch file.
    pub patch: PathBuf,
    /// `(file, failed hunk numbers)` pairs, from patch's output.
    pub files: Vec<(String, Vec<u32>)>,
    /// patch's own words, trimmed.
    pub output: String,
}

/// A series' state against a tree.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
#[serde(tag = "state", rename_all = "snake_case")]
#[schemars(rename = "State")] // as PatchFailure's
pub enum SeriesState {
    /// Applies forward: the tree does not contain it.
    Applies,
    /// Reverse-applies: the tree already contains it.
    Contained,
    /// Neither.
    Conflicts {
        /// Why the forward application failed.
        forward: PatchFailure,
        /// Why the reverse application failed.
        reverse: PatchFailure,
    },
}

/// A requested symbol that `olddefconfig` changed (a missing dependency, a
/// typo, a symbol that does not exist in this tree).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Lost {
    /// The symbol.
    pub symbol: String,
    /// What a fragment asked for.
    pub requested: String,
    /// What the final config has (`n` when absent).
    pub actual: String,
}

/// Facts about the host, as `run.json` records them.
#[derive(Debug, Clone, Serialize, Deserialize, Default, schemars::JsonSchema)]
pub struct Host {
    /// hostname.
    pub hostname: String,
    /// Online CPUs.
    pub cpus: u32,
    /// Memory in MiB.
    pub memory_mib: u64,
    /// Host kernel release.
    pub kernel: String,
    /// QEMU version line.
    pub qemu: String,
    /// Governor, boost, SMT, THP, load, other QEMUs, free memory, IRQs on
    /// the measured CPUs, at the run's start (absent in older runs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<HostState>,
}

/// What `run.json` records of the host's state (`host.state`).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct HostState {
    /// Packages, cores, CPUs and nodes ([`Topology::describe`]).
    pub topology: String,
    /// The distinct `scaling_governor`s of the online CPUs (empty: no cpufreq).
    pub governors: Vec<String>,
    /// Boost/turbo on (`cpufreq/boost`, or `intel_pstate/no_turbo` = 0).
    pub boost: Option<bool>,
    /// `smt/control` (`on`, `off`, `forceoff`, `notsupported`, …).
    pub smt: Option<String>,
    /// Transparent huge pages: the chosen word of `enabled`.
    pub thp: Option<String>,
    /// The 1-minute load average.
    pub load: Option<f64>,
    /// Other QEMU and harness processes (`name pid`).
    pub others: Vec<String>,
    /// Free memory of each NUMA node in MiB.
    pub node_free_mib: Vec<(u32, u64)>,
    /// Free huge pages in MiB (`HugePages_Free` × `Hugepagesize`).
    pub hugepages_free_mib: Option<u64>,
    /// The CPUs the IRQ count is about (the measured ones).
    pub measured: String,
    /// IRQs whose `smp_affinity_list` includes a measured CPU.
    pub irqs_on_measured: Vec<u32>,
    /// The CPUs carry `/proc/cpuinfo`'s `hypervisor` flag: this host is
    /// itself a virtual machine, and a KVM guest on it is nested.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hypervisor: Option<bool>,
}
