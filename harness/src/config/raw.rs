//! The matrix file as written: serde structs that reject unknown keys, every
//! value still optional. The benchmarks' keys (`RawBenchmark` and a
//! profile's `RawOverride`) come from the one table in `params.rs`.

use std::collections::BTreeMap;

use serde::Deserialize;

pub(super) use super::params::{RawBenchmark, RawOverride};

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawMatrix {
    #[serde(default)]
    pub(super) kernel: RawKernel,
    #[serde(default = "default_series_dir")]
    pub(super) series_dir: String,
    pub(super) variants: Vec<RawVariant>,
    #[serde(default)]
    pub(super) guest: RawGuest,
    pub(super) vcpus: Vec<u32>,
    pub(super) benchmarks: Vec<RawBenchmark>,
    #[serde(default)]
    pub(super) sampling: RawSampling,
    #[serde(default)]
    pub(super) statistics: RawStatistics,
    #[serde(default)]
    pub(super) key_metrics: Vec<String>,
    #[serde(default)]
    pub(super) profiles: BTreeMap<String, RawProfile>,
}

fn default_series_dir() -> String {
    "patches".into()
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawKernel {
    pub(super) source: Option<String>,
    pub(super) base_config: Option<String>,
    #[serde(default)]
    pub(super) fragments: Vec<String>,
    pub(super) build_timeout_min: Option<u64>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawVariant {
    pub(super) name: String,
    #[serde(default)]
    pub(super) apply: Vec<String>,
    #[serde(default)]
    pub(super) revert: Vec<String>,
    #[serde(default)]
    pub(super) fragments: Vec<String>,
    pub(super) benchmarks: Option<Vec<String>>,
    #[serde(rename = "ref")]
    pub(super) git_ref: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawGuest {
    pub(super) memory_mib: Option<u64>,
    pub(super) accel: Option<String>,
    #[serde(default)]
    pub(super) cmdline: Vec<String>,
    pub(super) boot_timeout_s: Option<u64>,
    pub(super) boot: Option<String>,
    pub(super) clock: Option<String>,
    pub(super) aslr: Option<bool>,
    pub(super) kernel_profile: Option<bool>,
    pub(super) contention: Option<bool>,
    pub(super) sockets: Option<u32>,
    pub(super) threads: Option<u32>,
    pub(super) numa_nodes: Option<u32>,
    pub(super) pin: Option<String>,
    pub(super) hugepages: Option<bool>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawSampling {
    pub(super) boots: Option<u32>,
    pub(super) repetitions: Option<u32>,
    pub(super) warmup_repetitions: Option<u32>,
    pub(super) seed: Option<u64>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawStatistics {
    pub(super) alpha: Option<f64>,
    pub(super) floor: Option<RawFraction>,
    pub(super) threshold: Option<RawFraction>,
    pub(super) thresholds: Option<BTreeMap<String, RawFraction>>,
    pub(super) second_stage: Option<RawSecondStage>,
    pub(super) resamples: Option<usize>,
    pub(super) seed: Option<u64>,
    pub(super) contention: Option<String>,
}

/// A fraction as written: `0.03` or `3%`.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub(super) enum RawFraction {
    Number(f64),
    Text(String),
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawSecondStage {
    pub(super) boots: Option<u32>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawProfile {
    pub(super) variants: Option<Vec<String>>,
    pub(super) vcpus: Option<Vec<u32>>,
    pub(super) benchmarks: Option<Vec<String>>,
    pub(super) sampling: Option<RawSampling>,
    pub(super) memory_mib: Option<u64>,
    pub(super) clock: Option<String>,
    pub(super) cmdline: Option<Vec<String>>,
    pub(super) statistics: Option<RawStatistics>,
    #[serde(default)]
    pub(super) overrides: BTreeMap<String, RawOverride>,
    pub(super) without_kvm: Option<String>,
}
