//! The validated matrix: every name resolved, every number in range, every
//! path made absolute against the matrix file's directory. What the rest of
//! the harness reads; serialised whole into `run.json`. The benchmark kinds
//! ([`BenchKind`]) are generated from the table in `params.rs`.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::params::BenchKind;

/// A validated matrix: every name resolved, every number in range.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct Matrix {
    /// Where the matrix file was (paths in it are relative to its directory).
    pub path: PathBuf,
    /// The profile applied, if any.
    pub profile: Option<String>,
    /// The profile's `without_kvm:`: the profile to run instead on a host
    /// where KVM is not usable (where the wall clock is TCG's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub without_kvm: Option<String>,
    /// Set when this matrix runs in place of the profile asked for: that
    /// profile, and why (KVM is not usable here).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instead_of: Option<InsteadOf>,
    /// The kernel tree and its configuration.
    pub kernel: Kernel,
    /// Directory holding one sub-directory per patch series.
    pub series_dir: PathBuf,
    /// Variants; the first is `base`, the reference of every comparison.
    pub variants: Vec<Variant>,
    /// Guest machine settings.
    pub guest: Guest,
    /// vCPU counts, ascending.
    pub vcpus: Vec<u32>,
    /// Benchmarks by name.
    pub benchmarks: Vec<Benchmark>,
    /// How many samples, over how many boots.
    pub sampling: Sampling,
    /// The decision rule's parameters.
    pub statistics: Statistics,
    /// Metrics (`benchmark` or `benchmark.metric`) that gate a pre-merge check.
    pub key_metrics: Vec<String>,
}

/// A profile run in place of the one asked for ([`Matrix::instead_of`]).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct InsteadOf {
    /// The profile asked for.
    pub profile: String,
    /// Why it does not run here.
    pub why: String,
}

/// Kernel source and configuration.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct Kernel {
    /// A tarball, a git tree or a plain directory.
    pub source: PathBuf,
    /// A make target such as `tinyconfig`, or a path to a `.config`.
    pub base_config: BaseConfig,
    /// Fragments merged over the base config, in order.
    pub fragments: Vec<PathBuf>,
    /// Deadline of one variant's build.
    pub build_timeout_min: u64,
}

/// Where the base `.config` comes from.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub enum BaseConfig {
    /// `make <target>` (tinyconfig, defconfig, …).
    Target(String),
    /// A config file.
    File(PathBuf),
}

/// One kernel variant.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct Variant {
    /// Name, unique, `[a-z0-9._-]`.
    pub name: String,
    /// Series applied on top of the base, in order.
    pub apply: Vec<String>,
    /// Series the base contains and this variant takes out (reverse-applied).
    pub revert: Vec<String>,
    /// Extra config fragments for this variant.
    pub fragments: Vec<PathBuf>,
    /// Benchmarks this variant is measured with.
    pub benchmarks: Vec<String>,
    /// A commit-ish of the git source (`ref:`) this variant is built from
    /// instead of the source's HEAD.
    #[serde(default, rename = "ref", skip_serializing_if = "Option::is_none")]
    pub git_ref: Option<String>,
}

impl Variant {
    /// True for a variant with no patch and no extra fragment.
    pub fn is_plain(&self) -> bool {
        self.apply.is_empty() && self.revert.is_empty() && self.fragments.is_empty()
    }
}

/// Accelerator choice.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum AccelChoice {
    /// KVM when a probe boot proves it works, otherwise TCG.
    Auto,
    /// KVM or fail.
    Kvm,
    /// TCG always.
    Tcg,
}

/// The clock the guest's time (and so every rate and duration it reports)
/// runs on.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Default, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Clock {
    /// Host time: KVM, or multi-threaded TCG.
    #[default]
    Wall,
    /// QEMU's instruction-counting clock (`-icount shift=0,sleep=off`,
    /// single-threaded TCG): one guest second is 10^9 guest instructions
    /// over all vCPUs, whatever the host does.
    Icount,
}

/// Guest machine settings.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct Guest {
    /// Memory in MiB.
    pub memory_mib: u64,
    /// Accelerator choice.
    pub accel: AccelChoice,
    /// The guest's clock.
    #[serde(default)]
    pub clock: Clock,
    /// Extra kernel command-line words.
    pub cmdline: Vec<String>,
    /// Deadline from QEMU start to SSH ready, scaled up for large guests.
    pub boot_timeout_s: u64,
    /// Boot `vmlinux` directly through its PVH entry (when the kernel has
    /// CONFIG_PVH) instead of `bzImage` through the firmware's loader.
    pub pvh: bool,
    /// Address-space randomisation in the guest.
    pub aslr: bool,
    /// Profile the guest kernel with the TCG plugin in every boot (under
    /// the instruction-counting clock only; on by default there). Absent
    /// in runs recorded before profiles: off.
    #[serde(default)]
    pub kernel_profile: bool,
    /// Under a wall clock (`kernel_profile: true` there): after the measured
    /// boots, one boot per variant and vCPU count under TCG's
    /// instruction-counting clock with the profiler, whose profiles explain
    /// the cells (the instruction profile is a property of the code path,
    /// not of the accelerator). Absent in older runs: off.
    #[serde(default)]
    pub profile_boots: bool,
    /// Profiled boots also count contention (the plugin's `contention=on`:
    /// shared cache lines and locks per op). On by default; `false` spares
    /// its host time. Absent in runs recorded before contention: off.
    #[serde(default)]
    pub contention: bool,
    /// Sockets (vCPUs are split evenly).
    pub sockets: u32,
    /// Threads per core.
    pub threads: u32,
    /// NUMA nodes (0 = none).
    pub numa_nodes: u32,
    /// How vCPU threads are pinned to host CPUs under a wall clock (and
    /// guest node N's memory bound to host node N). Absent in older runs:
    /// they were not pinned.
    #[serde(default = "Pin::unpinned")]
    pub pin: Pin,
    /// Guest memory on hugetlbfs (`/dev/hugepages`) huge pages. Absent in
    /// older runs: off.
    #[serde(default)]
    pub hugepages: bool,
}

/// `guest.pin`: where the vCPU threads run under a wall clock (never under
/// icount, whose one TCG thread runs every vCPU).
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Default, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Pin {
    /// One vCPU per physical core while they last, then their SMT siblings.
    #[default]
    Cores,
    /// vCPUs on SMT siblings core by core (a guest's thread pairs on a
    /// host core's pair).
    Threads,
    /// Not pinned: the host scheduler places vCPU threads.
    None,
}

impl Pin {
    fn unpinned() -> Pin {
        Pin::None
    }

    /// `guest.pin`'s word (default `cores`); a problem named by its path.
    pub fn parse(word: Option<&str>, p: &mut Vec<String>) -> Pin {
        match word.unwrap_or("cores") {
            "cores" => Pin::Cores,
            "threads" => Pin::Threads,
            "none" => Pin::None,
            other => {
                p.push(format!("guest.pin: `{other}` is not one of cores, threads, none"));
                Pin::Cores
            }
        }
    }

    /// The word, as in the matrix.
    pub fn name(self) -> &'static str {
        match self {
            Pin::Cores => "cores",
            Pin::Threads => "threads",
            Pin::None => "none",
        }
    }
}

/// A benchmark with its parameters.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct Benchmark {
    /// Unique name used in variants, reports and key metrics.
    pub name: String,
    /// What runs.
    pub kind: BenchKind,
    /// Guest-side deadline of one repetition.
    pub timeout_s: u64,
}

/// Sampling plan.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct Sampling {
    /// Boots per (variant, vCPUs).
    pub boots: u32,
    /// Measured repetitions per benchmark per boot.
    pub repetitions: u32,
    /// Repetitions run first in each boot and kept apart.
    pub warmup_repetitions: u32,
    /// Seed of the randomised, interleaved boot order.
    pub seed: u64,
}

/// Decision-rule parameters.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct Statistics {
    /// Significance level after Benjamini-Hochberg.
    pub alpha: f64,
    /// The declared practical threshold (a fraction) of every metric without
    /// its own entry: a change smaller than this does not matter. A cell is
    /// `regressed` when its whole interval lies beyond it; the interval
    /// carries the noise, so a calibrated A/A floor does not raise it.
    /// (`floor` in the `run.json` of runs before thresholds.)
    #[serde(alias = "floor")]
    pub threshold: f64,
    /// Per-metric thresholds, keyed `benchmark` or `benchmark.metric`.
    #[serde(default)]
    pub thresholds: BTreeMap<String, f64>,
    /// Boots per arm of the gate's second stage (0: none).
    #[serde(default)]
    pub second_stage_boots: u32,
    /// Bootstrap resamples.
    pub resamples: usize,
    /// Bootstrap seed.
    pub seed: u64,
    /// What `more contention` in a key benchmark does to the gate.
    #[serde(default)]
    pub contention: ContentionGate,
}

/// What the gate does with a key benchmark's `more contention`
/// (`statistics.contention`): warn (fails only with `--strict`), or fail.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ContentionGate {
    /// A warning.
    #[default]
    Warn,
    /// A failure.
    Fail,
}

impl Statistics {
    /// The threshold of `benchmark.metric`: its own entry, else its
    /// benchmark's, else the default.
    pub fn threshold_for(&self, benchmark: &str, metric: &str) -> f64 {
        let own = self.thresholds.get(&format!("{benchmark}.{metric}"));
        own.or_else(|| self.thresholds.get(benchmark))
            .copied()
            .unwrap_or(self.threshold)
    }
}

impl Matrix {
    /// Every series the matrix names, in first-named order.
    pub fn series_names(&self) -> Vec<String> {
        let mut s: Vec<String> = Vec::new();
        for v in &self.variants {
            for n in v.apply.iter().chain(&v.revert) {
                if !s.contains(n) {
                    s.push(n.clone());
                }
            }
        }
        s
    }

    /// The benchmark called `name`.
    pub fn benchmark(&self, name: &str) -> Option<&Benchmark> {
        self.benchmarks.iter().find(|b| b.name == name)
    }
    /// The variant called `name`.
    pub fn variant(&self, name: &str) -> Option<&Variant> {
        self.variants.iter().find(|v| v.name == name)
    }
}
