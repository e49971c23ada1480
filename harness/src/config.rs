//! The matrix file: raw serde structs (unknown keys rejected) turned into a
//! validated [`Matrix`]. Owns every rule about what a matrix may say; YAML
//! errors carry `file:line:col`, validation errors name the YAML path
//! (`variants[2].apply[0]`). Nothing here touches the kernel tree or spawns.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// Default kernel source: Debian's `linux-source-6.12` tarball.
pub const DEFAULT_SOURCE: &str = "/usr/src/linux-source-6.12.tar.xz";

// ---------------------------------------------------------------- raw -----

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawMatrix {
    #[serde(default)]
    kernel: RawKernel,
    #[serde(default = "default_series_dir")]
    series_dir: String,
    variants: Vec<RawVariant>,
    #[serde(default)]
    guest: RawGuest,
    vcpus: Vec<u32>,
    benchmarks: Vec<RawBenchmark>,
    #[serde(default)]
    sampling: RawSampling,
    #[serde(default)]
    statistics: RawStatistics,
    #[serde(default)]
    key_metrics: Vec<String>,
    #[serde(default)]
    profiles: BTreeMap<String, RawProfile>,
}

fn default_series_dir() -> String {
    "patches".into()
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawKernel {
    source: Option<String>,
    base_config: Option<String>,
    #[serde(default)]
    fragments: Vec<String>,
    build_timeout_min: Option<u64>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawVariant {
    name: String,
    #[serde(default)]
    apply: Vec<String>,
    #[serde(default)]
    revert: Vec<String>,
    #[serde(default)]
    fragments: Vec<String>,
    benchmarks: Option<Vec<String>>,
    #[serde(rename = "ref")]
    git_ref: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawGuest {
    memory_mib: Option<u64>,
    accel: Option<String>,
    #[serde(default)]
    cmdline: Vec<String>,
    boot_timeout_s: Option<u64>,
    boot: Option<String>,
    clock: Option<String>,
    aslr: Option<bool>,
    sockets: Option<u32>,
    threads: Option<u32>,
    numa_nodes: Option<u32>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawBenchmark {
    name: String,
    kind: String,
    link: Option<String>,
    workers: Option<Count>,
    duration_s: Option<u32>,
    warmup_s: Option<u32>,
    timeout_s: Option<u64>,
    fanout: Option<u32>,
    iterations: Option<u32>,
    usleep_us: Option<u32>,
    nr_threads: Option<Count>,
    run_test_mask: Option<u32>,
    test_repeat_count: Option<u32>,
    test_loop_count: Option<u32>,
    sequential_test_order: Option<bool>,
    nr_pages: Option<u32>,
}

/// A count that may be the literal `nproc` (the guest's CPU count).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Count {
    /// A fixed number.
    Fixed(u32),
    /// `nproc`: the number of online CPUs in the guest.
    Named(NprocWord),
}

/// The only word a [`Count`] accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum NprocWord {
    /// The guest's online CPU count.
    Nproc,
}

impl Count {
    /// The number this count stands for in a guest with `nproc` CPUs.
    pub fn resolve(self, nproc: u32) -> u32 {
        match self {
            Count::Fixed(n) => n,
            Count::Named(NprocWord::Nproc) => nproc,
        }
    }
}

impl fmt::Display for Count {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Count::Fixed(n) => write!(f, "{n}"),
            Count::Named(_) => f.write_str("nproc"),
        }
    }
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSampling {
    boots: Option<u32>,
    repetitions: Option<u32>,
    warmup_repetitions: Option<u32>,
    seed: Option<u64>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawStatistics {
    alpha: Option<f64>,
    floor: Option<f64>,
    resamples: Option<usize>,
    seed: Option<u64>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawProfile {
    variants: Option<Vec<String>>,
    vcpus: Option<Vec<u32>>,
    benchmarks: Option<Vec<String>>,
    sampling: Option<RawSampling>,
    memory_mib: Option<u64>,
    clock: Option<String>,
    cmdline: Option<Vec<String>>,
    statistics: Option<RawStatistics>,
    #[serde(default)]
    overrides: BTreeMap<String, RawOverride>,
}

/// A profile's new values for some parameters of one benchmark (for
/// example shorter durations under the instruction-counting clock).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawOverride {
    workers: Option<Count>,
    duration_s: Option<u32>,
    warmup_s: Option<u32>,
    timeout_s: Option<u64>,
    fanout: Option<u32>,
    iterations: Option<u32>,
    usleep_us: Option<u32>,
    nr_threads: Option<Count>,
    run_test_mask: Option<u32>,
    test_repeat_count: Option<u32>,
    test_loop_count: Option<u32>,
    sequential_test_order: Option<bool>,
    nr_pages: Option<u32>,
}

impl RawOverride {
    /// Puts every value this override gives into `b`.
    fn apply(&self, b: &mut RawBenchmark) {
        fn set<T: Clone>(to: &mut Option<T>, from: &Option<T>) {
            if from.is_some() {
                *to = from.clone();
            }
        }
        set(&mut b.workers, &self.workers);
        set(&mut b.duration_s, &self.duration_s);
        set(&mut b.warmup_s, &self.warmup_s);
        set(&mut b.timeout_s, &self.timeout_s);
        set(&mut b.fanout, &self.fanout);
        set(&mut b.iterations, &self.iterations);
        set(&mut b.usleep_us, &self.usleep_us);
        set(&mut b.nr_threads, &self.nr_threads);
        set(&mut b.run_test_mask, &self.run_test_mask);
        set(&mut b.test_repeat_count, &self.test_repeat_count);
        set(&mut b.test_loop_count, &self.test_loop_count);
        set(&mut b.sequential_test_order, &self.sequential_test_order);
        set(&mut b.nr_pages, &self.nr_pages);
    }
}

// ---------------------------------------------------------- validated -----

/// A validated matrix: every name resolved, every number in range.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Matrix {
    /// Where the matrix file was (paths in it are relative to its directory).
    pub path: PathBuf,
    /// The profile applied, if any.
    pub profile: Option<String>,
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

/// Kernel source and configuration.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
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
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub enum BaseConfig {
    /// `make <target>` (tinyconfig, defconfig, …).
    Target(String),
    /// A config file.
    File(PathBuf),
}

/// One kernel variant.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
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
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
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
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Default)]
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
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
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
    /// Sockets (vCPUs are split evenly).
    pub sockets: u32,
    /// Threads per core.
    pub threads: u32,
    /// NUMA nodes (0 = none).
    pub numa_nodes: u32,
}

/// A benchmark with its parameters.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Benchmark {
    /// Unique name used in variants, reports and key metrics.
    pub name: String,
    /// What runs.
    pub kind: BenchKind,
    /// Guest-side deadline of one repetition.
    pub timeout_s: u64,
}

/// Link mode of doexec.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Link {
    /// `-static`.
    Static,
    /// Dynamic: separate binaries, one shared loader and libc.
    Shared,
}

/// The benchmark programs and their parameters.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum BenchKind {
    /// Separate binary copies re-executing themselves (seeds 000, 002).
    Doexec {
        /// static or shared.
        link: Link,
        /// Worker processes.
        workers: Count,
        /// Measured seconds.
        duration_s: u32,
        /// Warm-up seconds, discarded.
        warmup_s: u32,
    },
    /// fork ×fanout, then fork/usleep/kill/waitpid against set/getpriority (seed 003).
    ForkPrlimit {
        /// The program forks this many times first (2^fanout processes).
        fanout: u32,
        /// Loop iterations per process.
        iterations: u32,
        /// Parent's sleep before killing its child.
        usleep_us: u32,
    },
    /// Workers fork+exec `/bin/true` in a loop (seed 004).
    ForkExec {
        /// Worker processes.
        workers: Count,
        /// Measured seconds.
        duration_s: u32,
        /// Warm-up seconds, discarded.
        warmup_s: u32,
    },
    /// The kernel's test_vmalloc module (seed 001).
    TestVmalloc {
        /// Module parameter nr_threads.
        nr_threads: Count,
        /// Module parameter run_test_mask.
        run_test_mask: u32,
        /// Module parameter test_repeat_count.
        test_repeat_count: u32,
        /// Module parameter test_loop_count.
        test_loop_count: u32,
        /// Module parameter sequential_test_order.
        sequential_test_order: bool,
        /// Module parameter nr_pages.
        nr_pages: u32,
    },
}

/// Sampling plan.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
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
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Statistics {
    /// Significance level after Benjamini-Hochberg.
    pub alpha: f64,
    /// Minimum effect floor (fraction); raised to the measured noise floor.
    pub floor: f64,
    /// Bootstrap resamples.
    pub resamples: usize,
    /// Bootstrap seed.
    pub seed: u64,
}

// ------------------------------------------------------------ errors -----

/// A matrix that cannot be used, with every problem found.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("read {path}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// YAML syntax or shape (unknown key, wrong type).
    #[error("{path}:{line}:{column}: {message}")]
    Yaml {
        /// The file.
        path: PathBuf,
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: usize,
        /// serde_yaml's message, which starts with the YAML path.
        message: String,
    },
    /// Values that parse but make no sense, each with its YAML path.
    #[error("{path}: {} problem(s):\n{}", .problems.len(), .problems.iter().map(|p| format!("  {p}")).collect::<Vec<_>>().join("\n"))]
    Invalid {
        /// The file.
        path: PathBuf,
        /// `yaml.path: what is wrong and what to do`.
        problems: Vec<String>,
    },
}

// -------------------------------------------------------------- load -----

/// Reads and validates a matrix file, applying `profile` if given.
pub fn load(path: &Path, profile: Option<&str>) -> Result<Matrix, ConfigError> {
    let text = std::fs::read_to_string(path)
        .map_err(|source| ConfigError::Read { path: path.to_path_buf(), source })?;
    parse(&text, path, profile)
}

/// Parses and validates matrix text; `path` is used for messages and to
/// resolve relative paths.
pub fn parse(text: &str, path: &Path, profile: Option<&str>) -> Result<Matrix, ConfigError> {
    let raw: RawMatrix = serde_yaml::from_str(text).map_err(|e| {
        let (line, column) = e.location().map(|l| (l.line(), l.column())).unwrap_or((0, 0));
        // serde_yaml appends " at line L column C"; the location leads instead
        let mut message = e.to_string();
        if let Some(i) = message.rfind(" at line ") {
            message.truncate(i);
        }
        ConfigError::Yaml { path: path.to_path_buf(), line, column, message }
    })?;
    validate(raw, path, profile)
        .map_err(|problems| ConfigError::Invalid { path: path.to_path_buf(), problems })
}

fn valid_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 64
        && s.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "._-".contains(c))
        && !s.starts_with(['.', '-'])
}

/// Paths in the matrix are relative to the matrix file's directory.
struct Rel(PathBuf);

impl Rel {
    fn of(path: &Path) -> Rel {
        let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
        Rel(if dir.as_os_str().is_empty() { PathBuf::from(".") } else { dir })
    }
    fn path(&self, s: &str) -> PathBuf {
        let q = PathBuf::from(s);
        if q.is_absolute() { q } else { self.0.join(q) }
    }
}

/// Raw matrix → validated matrix, one validator per section; every problem
/// is collected, each naming its YAML path.
fn validate(mut raw: RawMatrix, path: &Path, profile: Option<&str>) -> Result<Matrix, Vec<String>> {
    let mut p = Vec::new();
    let rel = Rel::of(path);
    // Key metrics may name benchmarks a profile leaves out.
    let defined_bench: Vec<String> = raw.benchmarks.iter().map(|b| b.name.clone()).collect();
    for pname in raw.profiles.keys() {
        if !valid_name(pname) {
            p.push(format!("profiles.{pname}: profile names are lowercase letters, digits, '.', '_' and '-'"));
        }
    }
    // Profiles first: they select from and override the top level.
    if let Some(name) = profile {
        if !apply_profile(&mut raw, name, &mut p) {
            return Err(p);
        }
    }
    let kernel = validate_kernel(&raw.kernel, &rel, &mut p);
    let series_dir = rel.path(&raw.series_dir);
    let benchmarks = validate_benchmarks(&raw.benchmarks, &mut p);
    let all_bench: Vec<String> = raw.benchmarks.iter().map(|b| b.name.clone()).collect();
    let variants = validate_variants(&raw.variants, &series_dir, &all_bench, &rel, &mut p);
    let guest = validate_guest(&raw.guest, &mut p);
    let vcpus = validate_vcpus(&raw.vcpus, &guest, &mut p);
    let (sampling, statistics) = validate_sampling(&raw.sampling, &raw.statistics, &mut p);
    for (i, k) in raw.key_metrics.iter().enumerate() {
        let b = k.split('.').next().unwrap_or("");
        if !defined_bench.iter().any(|n| n == b) {
            p.push(format!("key_metrics[{i}]: `{k}` names no benchmark (write `benchmark` or `benchmark.metric`)"));
        }
    }
    raw.key_metrics.retain(|k| all_bench.iter().any(|n| Some(n.as_str()) == k.split('.').next()));

    if !p.is_empty() {
        return Err(p);
    }
    Ok(Matrix {
        path: path.to_path_buf(),
        profile: profile.map(str::to_string),
        kernel,
        series_dir,
        variants,
        guest,
        vcpus,
        benchmarks,
        sampling,
        statistics,
        key_metrics: raw.key_metrics,
    })
}

/// Narrows and overrides the top level with profile `name`; false when
/// there is no such profile (then nothing else is worth checking).
fn apply_profile(raw: &mut RawMatrix, name: &str, p: &mut Vec<String>) -> bool {
    let Some(prof) = raw.profiles.get(name).cloned() else {
        let known: Vec<_> = raw.profiles.keys().cloned().collect();
        p.push(format!("profiles: no profile `{name}` (defined: {})", if known.is_empty() { "none".into() } else { known.join(", ") }));
        return false;
    };
    if let Some(vs) = &prof.variants {
        for (i, v) in vs.iter().enumerate() {
            if !raw.variants.iter().any(|rv| &rv.name == v) {
                p.push(format!("profiles.{name}.variants[{i}]: no variant `{v}`"));
            }
        }
        raw.variants.retain(|rv| vs.contains(&rv.name) || rv.name == "base");
    }
    if let Some(bs) = &prof.benchmarks {
        for (i, b) in bs.iter().enumerate() {
            if !raw.benchmarks.iter().any(|rb| &rb.name == b) {
                p.push(format!("profiles.{name}.benchmarks[{i}]: no benchmark `{b}`"));
            }
        }
        raw.benchmarks.retain(|rb| bs.contains(&rb.name));
        for vb in raw.variants.iter_mut().filter_map(|v| v.benchmarks.as_mut()) {
            vb.retain(|b| bs.contains(b));
        }
    }
    if let Some(vc) = prof.vcpus {
        raw.vcpus = vc;
    }
    if let Some(s) = prof.sampling {
        let t = &raw.sampling;
        raw.sampling = RawSampling {
            boots: s.boots.or(t.boots),
            repetitions: s.repetitions.or(t.repetitions),
            warmup_repetitions: s.warmup_repetitions.or(t.warmup_repetitions),
            seed: s.seed.or(t.seed),
        };
    }
    if let Some(m) = prof.memory_mib {
        raw.guest.memory_mib = Some(m);
    }
    if let Some(c) = prof.clock {
        raw.guest.clock = Some(c);
    }
    if let Some(c) = prof.cmdline {
        raw.guest.cmdline = c;
    }
    if let Some(s) = prof.statistics {
        let t = &raw.statistics;
        raw.statistics = RawStatistics { alpha: s.alpha.or(t.alpha), floor: s.floor.or(t.floor), resamples: s.resamples.or(t.resamples), seed: s.seed.or(t.seed) };
    }
    for (bname, o) in &prof.overrides {
        match raw.benchmarks.iter_mut().find(|b| &b.name == bname) {
            Some(b) => o.apply(b),
            None => p.push(format!("profiles.{name}.overrides.{bname}: no benchmark `{bname}` in this profile")),
        }
    }
    true
}

/// `kernel:`: the source, the base config (a make target or a file) and fragments.
fn validate_kernel(k: &RawKernel, rel: &Rel, p: &mut Vec<String>) -> Kernel {
    let source = rel.path(k.source.as_deref().unwrap_or(DEFAULT_SOURCE));
    let base_config = match k.base_config.as_deref().unwrap_or("tinyconfig") {
        t if is_base_config_target(t) => BaseConfig::Target(t.into()),
        f => {
            let fp = rel.path(f);
            if !fp.is_file() {
                p.push(base_config_problem(f, &fp));
            }
            BaseConfig::File(fp)
        }
    };
    let fragments = files(&k.fragments, "kernel.fragments", rel, p);
    let build_timeout_min = k.build_timeout_min.unwrap_or(90);
    if build_timeout_min == 0 {
        p.push("kernel.build_timeout_min: must be at least 1".into());
    }
    Kernel { source, base_config, fragments, build_timeout_min }
}

/// Files named relative to the matrix; each missing one is a problem at `at[i]`.
fn files(names: &[String], at: &str, rel: &Rel, p: &mut Vec<String>) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for (i, f) in names.iter().enumerate() {
        let fp = rel.path(f);
        if !fp.is_file() {
            p.push(format!("{at}[{i}]: no file `{}`", fp.display()));
        }
        out.push(fp);
    }
    out
}

/// A name that is valid and not yet in `seen`, or a problem at `at.name`.
fn check_name(name: &str, at: &str, seen: &mut BTreeSet<String>, p: &mut Vec<String>) {
    if !valid_name(name) {
        p.push(format!("{at}.name: `{name}` must be lowercase letters, digits, '.', '_' or '-'"));
    }
    if !seen.insert(name.to_string()) {
        p.push(format!("{at}.name: `{name}` is defined twice"));
    }
}

/// `benchmarks:`: names and kinds with their parameters.
fn validate_benchmarks(raw: &[RawBenchmark], p: &mut Vec<String>) -> Vec<Benchmark> {
    let mut benchmarks = Vec::new();
    let mut seen = BTreeSet::new();
    for (i, b) in raw.iter().enumerate() {
        let at = format!("benchmarks[{i}]");
        check_name(&b.name, &at, &mut seen, p);
        match bench_kind(b) {
            Ok(kind) => benchmarks.push(Benchmark { name: b.name.clone(), kind, timeout_s: b.timeout_s.unwrap_or(600) }),
            Err(errs) => p.extend(errs.into_iter().map(|e| format!("{at}.{e}"))),
        }
        if b.timeout_s == Some(0) {
            p.push(format!("{at}.timeout_s: must be at least 1"));
        }
    }
    if raw.is_empty() {
        p.push("benchmarks: at least one benchmark is needed".into());
    }
    benchmarks
}

/// `variants:`: each one's series, fragments, benchmarks and git ref; `base`
/// first, running every benchmark another variant asks for.
fn validate_variants(raw: &[RawVariant], series_dir: &Path, all_bench: &[String], rel: &Rel, p: &mut Vec<String>) -> Vec<Variant> {
    let mut variants = Vec::new();
    let mut seen = BTreeSet::new();
    for (i, v) in raw.iter().enumerate() {
        let at = format!("variants[{i}]");
        check_name(&v.name, &at, &mut seen, p);
        for (key, list) in [("apply", &v.apply), ("revert", &v.revert)] {
            for (j, s) in list.iter().enumerate() {
                let d = series_dir.join(s);
                if !valid_name(s) {
                    p.push(format!("{at}.{key}[{j}]: `{s}` is not a series name (a directory under {})", series_dir.display()));
                } else if !d.join("series").is_file() {
                    p.push(format!("{at}.{key}[{j}]: no series `{s}`: expected {} listing its patches", d.join("series").display()));
                }
            }
        }
        let fragments = files(&v.fragments, &format!("{at}.fragments"), rel, p);
        let benchmarks = match &v.benchmarks {
            None => all_bench.to_vec(),
            Some(list) => {
                for (j, b) in list.iter().enumerate() {
                    if !all_bench.contains(b) {
                        p.push(format!("{at}.benchmarks[{j}]: no benchmark `{b}` (defined: {})", all_bench.join(", ")));
                    }
                }
                list.clone()
            }
        };
        if let Some(r) = &v.git_ref {
            if r.is_empty() || r.starts_with('-') || r.chars().any(|c| c.is_whitespace() || c.is_control()) {
                p.push(format!("{at}.ref: `{r}` is not a git commit-ish (a commit id, tag or branch)"));
            }
        }
        let (apply, revert, git_ref) = (v.apply.clone(), v.revert.clone(), v.git_ref.clone());
        variants.push(Variant { name: v.name.clone(), apply, revert, fragments, benchmarks, git_ref });
    }
    let Some(i) = variants.iter().position(|v| v.name == "base") else {
        p.push("variants: a variant named `base` (the reference) is required".into());
        return variants;
    };
    if !variants[i].is_plain() {
        p.push(format!("variants[{i}]: `base` is the unmodified tree; it takes no apply, revert or fragments"));
    }
    let mut base = variants.remove(i);
    let mut used: Vec<String> = Vec::new();
    for b in variants.iter().flat_map(|v| &v.benchmarks) {
        if !used.contains(b) {
            used.push(b.clone());
        }
    }
    if raw[i].benchmarks.is_none() && !used.is_empty() {
        base.benchmarks = all_bench.iter().filter(|b| used.contains(b)).cloned().collect();
    }
    variants.insert(0, base);
    variants
}

/// `guest:`: accelerator, clock, memory, command line, boot path, topology.
fn validate_guest(g: &RawGuest, p: &mut Vec<String>) -> Guest {
    let accel = match g.accel.as_deref().unwrap_or("auto") {
        "auto" => AccelChoice::Auto,
        "kvm" => AccelChoice::Kvm,
        "tcg" => AccelChoice::Tcg,
        other => {
            p.push(format!("guest.accel: `{other}` is not one of auto, kvm, tcg"));
            AccelChoice::Auto
        }
    };
    let clock = match g.clock.as_deref().unwrap_or("wall") {
        "wall" => Clock::Wall,
        "icount" => Clock::Icount,
        other => {
            p.push(format!("guest.clock: `{other}` is not wall or icount"));
            Clock::Wall
        }
    };
    if clock == Clock::Icount && accel == AccelChoice::Kvm {
        p.push("guest.clock: icount counts instructions under TCG only; set guest.accel to tcg or auto".into());
    }
    let memory_mib = g.memory_mib.unwrap_or(2048);
    if memory_mib < 256 {
        p.push(format!("guest.memory_mib: {memory_mib} is too small; the guest needs at least 256"));
    }
    for (i, w) in g.cmdline.iter().enumerate() {
        if w.is_empty() || w.chars().any(|c| c.is_whitespace() || c.is_control() || c == '"') {
            p.push(format!("guest.cmdline[{i}]: `{w}` must be one word without spaces or quotes"));
        }
    }
    let pvh = match g.boot.as_deref().unwrap_or("pvh") {
        "pvh" => true,
        "bzimage" => false,
        other => {
            p.push(format!("guest.boot: `{other}` is not pvh or bzimage"));
            true
        }
    };
    let (sockets, threads) = (g.sockets.unwrap_or(1), g.threads.unwrap_or(1));
    if sockets == 0 || threads == 0 {
        p.push("guest: sockets and threads must be at least 1".into());
    }
    Guest {
        pvh,
        memory_mib,
        accel,
        clock,
        cmdline: g.cmdline.clone(),
        boot_timeout_s: g.boot_timeout_s.unwrap_or(300),
        aslr: g.aslr.unwrap_or(true),
        sockets,
        threads,
        numa_nodes: g.numa_nodes.unwrap_or(0),
    }
}

/// `vcpus:`: counts that fit the guest's topology, sorted, without repeats.
fn validate_vcpus(raw: &[u32], guest: &Guest, p: &mut Vec<String>) -> Vec<u32> {
    for (i, &n) in raw.iter().enumerate() {
        if n == 0 {
            p.push(format!("vcpus[{i}]: must be at least 1"));
        } else if n % (guest.sockets * guest.threads).max(1) != 0 {
            p.push(format!("vcpus[{i}]: {n} does not divide into {} socket(s) × {} thread(s)", guest.sockets, guest.threads));
        } else if guest.numa_nodes > 0 && n % guest.numa_nodes != 0 {
            p.push(format!("vcpus[{i}]: {n} does not divide into {} NUMA nodes", guest.numa_nodes));
        }
    }
    let mut vcpus = raw.to_vec();
    vcpus.sort_unstable();
    vcpus.dedup();
    if vcpus.is_empty() {
        p.push("vcpus: at least one vCPU count is needed".into());
    }
    vcpus
}

/// `sampling:` and `statistics:` with their defaults.
fn validate_sampling(s: &RawSampling, t: &RawStatistics, p: &mut Vec<String>) -> (Sampling, Statistics) {
    let sampling = Sampling {
        boots: s.boots.unwrap_or(2),
        repetitions: s.repetitions.unwrap_or(5),
        warmup_repetitions: s.warmup_repetitions.unwrap_or(1),
        seed: s.seed.unwrap_or(1),
    };
    if sampling.boots == 0 || sampling.repetitions == 0 {
        p.push("sampling: boots and repetitions must be at least 1".into());
    }
    let statistics = Statistics {
        alpha: t.alpha.unwrap_or(0.05),
        floor: t.floor.unwrap_or(0.02),
        resamples: t.resamples.unwrap_or(10_000),
        seed: t.seed.unwrap_or(1),
    };
    if !(statistics.alpha > 0.0 && statistics.alpha < 0.5) {
        p.push(format!("statistics.alpha: {} must lie in (0, 0.5)", statistics.alpha));
    }
    if !(statistics.floor >= 0.0 && statistics.floor < 1.0) {
        p.push(format!("statistics.floor: {} must lie in [0, 1)", statistics.floor));
    }
    (sampling, statistics)
}

/// Builds a benchmark kind from the flat raw struct; errors are `key: message`.
fn bench_kind(b: &RawBenchmark) -> Result<BenchKind, Vec<String>> {
    let mut errs = Vec::new();
    // which keys were given, for "not a parameter of" errors
    let given: Vec<(&str, bool)> = vec![
        ("link", b.link.is_some()),
        ("workers", b.workers.is_some()),
        ("duration_s", b.duration_s.is_some()),
        ("warmup_s", b.warmup_s.is_some()),
        ("fanout", b.fanout.is_some()),
        ("iterations", b.iterations.is_some()),
        ("usleep_us", b.usleep_us.is_some()),
        ("nr_threads", b.nr_threads.is_some()),
        ("run_test_mask", b.run_test_mask.is_some()),
        ("test_repeat_count", b.test_repeat_count.is_some()),
        ("test_loop_count", b.test_loop_count.is_some()),
        ("sequential_test_order", b.sequential_test_order.is_some()),
        ("nr_pages", b.nr_pages.is_some()),
    ];
    let allowed: &[&str] = match b.kind.as_str() {
        "doexec" => &["link", "workers", "duration_s", "warmup_s"],
        "fork_prlimit" => &["fanout", "iterations", "usleep_us"],
        "fork_exec" => &["workers", "duration_s", "warmup_s"],
        "test_vmalloc" => &[
            "nr_threads", "run_test_mask", "test_repeat_count", "test_loop_count", "sequential_test_order", "nr_pages",
        ],
        other => {
            return Err(vec![format!(
                "kind: `{other}` is not a benchmark kind (doexec, fork_prlimit, fork_exec, test_vmalloc)"
            )])
        }
    };
    for (k, g) in &given {
        if *g && !allowed.contains(k) {
            errs.push(format!("{k}: not a parameter of {} (its parameters: {})", b.kind, allowed.join(", ")));
        }
    }
    let positive = |errs: &mut Vec<String>, k: &str, v: Option<u32>, d: u32| -> u32 {
        let v = v.unwrap_or(d);
        if v == 0 {
            errs.push(format!("{k}: must be at least 1"));
        }
        v
    };
    let count = |errs: &mut Vec<String>, k: &str, v: Option<Count>| -> Count {
        let v = v.unwrap_or(Count::Named(NprocWord::Nproc));
        if v == Count::Fixed(0) {
            errs.push(format!("{k}: must be at least 1 or `nproc`"));
        }
        v
    };
    let kind = match b.kind.as_str() {
        "doexec" => {
            let link = match b.link.as_deref().unwrap_or("static") {
                "static" => Link::Static,
                "shared" => Link::Shared,
                o => {
                    errs.push(format!("link: `{o}` is not static or shared"));
                    Link::Static
                }
            };
            BenchKind::Doexec {
                link,
                workers: count(&mut errs, "workers", b.workers),
                duration_s: positive(&mut errs, "duration_s", b.duration_s, 5),
                warmup_s: b.warmup_s.unwrap_or(1),
            }
        }
        "fork_prlimit" => {
            let fanout = b.fanout.unwrap_or(6);
            if fanout > 12 {
                errs.push(format!("fanout: {fanout} would start 2^{fanout} processes; at most 12"));
            }
            BenchKind::ForkPrlimit {
                fanout,
                iterations: positive(&mut errs, "iterations", b.iterations, 5000),
                usleep_us: b.usleep_us.unwrap_or(1000),
            }
        }
        "fork_exec" => BenchKind::ForkExec {
            workers: count(&mut errs, "workers", b.workers),
            duration_s: positive(&mut errs, "duration_s", b.duration_s, 5),
            warmup_s: b.warmup_s.unwrap_or(1),
        },
        _ => {
            let mask = b.run_test_mask.unwrap_or(0x7);
            if mask == 0 {
                errs.push("run_test_mask: selects no test".into());
            }
            BenchKind::TestVmalloc {
                nr_threads: count(&mut errs, "nr_threads", b.nr_threads),
                run_test_mask: mask,
                test_repeat_count: positive(&mut errs, "test_repeat_count", b.test_repeat_count, 1),
                test_loop_count: positive(&mut errs, "test_loop_count", b.test_loop_count, 1_000_000),
                sequential_test_order: b.sequential_test_order.unwrap_or(false),
                nr_pages: positive(&mut errs, "nr_pages", b.nr_pages, 1),
            }
        }
    };
    if errs.is_empty() { Ok(kind) } else { Err(errs) }
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

/// The kernel's config targets that make a whole `.config` from Kconfig
/// alone (6.12 `scripts/kconfig/Makefile`); `oldconfig`, `olddefconfig`,
/// `config` and the `*.config` fragment targets start from whatever
/// `.config` the tree holds, and the interactive ones wait for a human.
pub const BASE_CONFIG_TARGETS: &[&str] =
    &["defconfig", "tinyconfig", "allnoconfig", "allyesconfig", "allmodconfig", "alldefconfig", "randconfig"];

/// Is `t` a make target `base_config` may name: one of
/// [`BASE_CONFIG_TARGETS`] or an `arch/*/configs/<name>_defconfig` name
/// (`[a-z0-9_]+_defconfig`)? Anything else is a file path, never a make
/// argument.
pub fn is_base_config_target(t: &str) -> bool {
    let arch_defconfig = t
        .strip_suffix("_defconfig")
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_'));
    BASE_CONFIG_TARGETS.contains(&t) || arch_defconfig
}

fn base_config_problem(word: &str, file: &Path) -> String {
    let targets = BASE_CONFIG_TARGETS.join(", ");
    let why = match word {
        "oldconfig" | "olddefconfig" | "config" | "syncconfig" => {
            format!("`{word}` starts from the .config the work tree happens to hold, so it is not a base")
        }
        w if w.ends_with(".config") && !w.contains('/') => {
            format!("`{w}` is a fragment target; list the fragment file under kernel.fragments instead")
        }
        w => format!("`{w}` is not a config target"),
    };
    format!("kernel.base_config: {why}, and no file `{}` exists; name a target ({targets}, <name>_defconfig) or a .config file", file.display())
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = "\
variants:
  - name: base
  - name: v1
    benchmarks: [s]
vcpus: [4, 2]
benchmarks:
  - name: s
    kind: doexec
    link: shared
    workers: 3
  - name: v
    kind: test_vmalloc
    nr_threads: nproc
profiles:
  quick:
    vcpus: [2]
    benchmarks: [s]
    sampling: {boots: 1}
";

    fn p(text: &str) -> Result<Matrix, ConfigError> {
        parse(text, Path::new("/m/matrix.yaml"), None)
    }

    fn problems(text: &str) -> Vec<String> {
        match p(text) {
            Err(ConfigError::Invalid { problems, .. }) => problems,
            other => panic!("expected validation problems, got {other:?}"),
        }
    }

    #[test]
    fn a_good_matrix_validates() {
        let m = p(GOOD).unwrap();
        assert_eq!(m.vcpus, vec![2, 4]);
        assert_eq!(m.variants[0].name, "base");
        // base runs what the other variants need
        assert_eq!(m.variants[0].benchmarks, vec!["s"]);
        assert_eq!(m.kernel.source, PathBuf::from(DEFAULT_SOURCE));
        assert_eq!(m.series_dir, PathBuf::from("/m/patches"));
        match &m.benchmarks[0].kind {
            BenchKind::Doexec { link, workers, duration_s, .. } => {
                assert_eq!((*link, *workers, *duration_s), (Link::Shared, Count::Fixed(3), 5));
            }
            k => panic!("{k:?}"),
        }
        assert!(matches!(m.benchmarks[1].kind, BenchKind::TestVmalloc { nr_threads: Count::Named(_), run_test_mask: 7, .. }));
    }

    #[test]
    fn profiles_select_and_override() {
        let m = parse(GOOD, Path::new("/m/matrix.yaml"), Some("quick")).unwrap();
        assert_eq!(m.vcpus, vec![2]);
        assert_eq!(m.benchmarks.len(), 1);
        assert_eq!(m.sampling.boots, 1);
        assert_eq!(m.sampling.repetitions, 5);
        let e = parse(GOOD, Path::new("/m/matrix.yaml"), Some("nightly")).unwrap_err().to_string();
        assert!(e.contains("no profile `nightly` (defined: quick)"), "{e}");
    }

    #[test]
    fn profiles_override_benchmark_parameters() {
        let text = format!("{GOOD}  short:\n    overrides:\n      s: {{duration_s: 1, warmup_s: 0}}\n");
        let m = parse(&text, Path::new("/m/matrix.yaml"), Some("short")).unwrap();
        match &m.benchmarks[0].kind {
            BenchKind::Doexec { duration_s, warmup_s, workers, .. } => assert_eq!((*duration_s, *warmup_s, *workers), (1, 0, Count::Fixed(3))),
            k => panic!("{k:?}"),
        }
        let bad = format!("{GOOD}  short:\n    overrides:\n      nope: {{duration_s: 1}}\n      s: {{fanout: 2}}\n");
        let e = parse(&bad, Path::new("/m/matrix.yaml"), Some("short")).unwrap_err().to_string();
        assert!(e.contains("profiles.short.overrides.nope: no benchmark `nope` in this profile"), "{e}");
        assert!(e.contains("benchmarks[0].fanout: not a parameter of doexec"), "{e}");
        let unknown = format!("{GOOD}  short:\n    overrides:\n      s: {{speed: 1}}\n");
        assert!(matches!(parse(&unknown, Path::new("/m/matrix.yaml"), Some("short")), Err(ConfigError::Yaml { .. })));
    }

    #[test]
    fn the_clock_is_chosen_per_matrix_or_profile() {
        assert_eq!(p(GOOD).unwrap().guest.clock, Clock::Wall);
        let text = format!("{GOOD}  exact:\n    clock: icount\n    cmdline: [nokaslr]\n");
        let m = parse(&text, Path::new("/m/matrix.yaml"), Some("exact")).unwrap();
        assert_eq!((m.guest.clock, m.guest.cmdline.clone()), (Clock::Icount, vec!["nokaslr".to_string()]));
        assert_eq!(parse(&text, Path::new("/m/matrix.yaml"), None).unwrap().guest.clock, Clock::Wall);
        let pr = problems(&format!("guest: {{clock: icount, accel: kvm}}\n{GOOD}"));
        assert!(pr.iter().any(|x| x.starts_with("guest.clock: icount counts instructions under TCG only")), "{pr:?}");
        let pr = problems(&format!("guest: {{clock: cycles}}\n{GOOD}"));
        assert!(pr.iter().any(|x| x == "guest.clock: `cycles` is not wall or icount"), "{pr:?}");
    }

    #[test]
    fn yaml_errors_carry_file_line_column() {
        let e = p("variants:\n  - name: base\n   bad indent: [\n").unwrap_err();
        let s = e.to_string();
        assert!(s.starts_with("/m/matrix.yaml:3:"), "{s}");
        let e = p(&GOOD.replace("    link: shared\n", "    link: shared\n    wokers: 3\n")).unwrap_err().to_string();
        assert!(e.starts_with("/m/matrix.yaml:10:5: benchmarks[0]: unknown field `wokers`, expected one of"), "{e}");
        assert!(!e.contains(" at line "), "{e}");
        let e = p(&GOOD.replace("vcpus: [4, 2]", "vcpus: [4, two]")).unwrap_err().to_string();
        assert!(e.starts_with("/m/matrix.yaml:5:"), "{e}");
    }

    #[test]
    fn validation_names_yaml_paths() {
        let cases: &[(&str, &str, &str)] = &[
            ("  - name: v1\n", "  - name: v1\n    apply: [nope]\n", "variants[1].apply[0]: no series `nope`"),
            ("  - name: v1\n", "  - name: V 1\n", "variants[1].name: `V 1` must be lowercase"),
            ("  - name: v1\n", "  - name: v1\n    ref: --upload-pack=x\n", "variants[1].ref: `--upload-pack=x` is not a git commit-ish"),
            ("    benchmarks: [s]\n", "    benchmarks: [zz]\n", "variants[1].benchmarks[0]: no benchmark `zz`"),
            ("    kind: doexec\n", "    kind: dexec\n", "benchmarks[0].kind: `dexec` is not a benchmark kind"),
            ("    workers: 3\n", "    workers: 3\n    nr_threads: 4\n", "benchmarks[0].nr_threads: not a parameter of doexec"),
            ("    workers: 3\n", "    workers: 0\n", "benchmarks[0].workers: must be at least 1"),
            ("vcpus: [4, 2]", "vcpus: [4, 0]", "vcpus[1]: must be at least 1"),
            ("  - name: base\n", "  - name: basis\n", "variants: a variant named `base`"),
            ("  - name: base\n", "  - name: base\n    revert: [x]\n", "variants[0]: `base` is the unmodified tree"),
        ];
        for (from, to, want) in cases {
            let text = GOOD.replacen(from, to, 1);
            let pr = problems(&text);
            assert!(pr.iter().any(|x| x.starts_with(want)), "want `{want}` in {pr:?}");
        }
    }

    #[test]
    fn base_config_is_a_known_target_or_an_existing_file() {
        for t in ["tinyconfig", "defconfig", "allnoconfig", "x86_64_defconfig", "i386_defconfig"] {
            let m = p(&format!("kernel:\n  base_config: {t}\n{GOOD}")).unwrap();
            assert_eq!(m.kernel.base_config, BaseConfig::Target(t.into()), "{t}");
        }
        // make would run the host command in `--eval=$(shell ...)`
        for bad in ["--eval=$(shell id)config", "-j1config", "oldconfig", "kvm_guest.config", "X86_defconfig", "_defconfig"] {
            let pr = problems(&format!("kernel:\n  base_config: '{bad}'\n{GOOD}"));
            assert!(pr.iter().any(|x| x.starts_with("kernel.base_config: ") && x.contains("no file `/m/")), "{bad}: {pr:?}");
        }
        let dir = std::env::temp_dir().join(format!("harness-baseconfig-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("myconfig"), "CONFIG_SMP=y\n").unwrap();
        let m = parse(&format!("kernel:\n  base_config: myconfig\n{GOOD}"), &dir.join("matrix.yaml"), None).unwrap();
        assert_eq!(m.kernel.base_config, BaseConfig::File(dir.join("myconfig")));
        std::fs::remove_dir_all(dir).ok();
    }

    #[test]
    fn missing_fragment_and_series_files_are_named() {
        let text = format!("kernel:\n  fragments: [kconfigs/none.config]\n{GOOD}");
        let pr = problems(&text);
        assert!(pr.iter().any(|x| x == "kernel.fragments[0]: no file `/m/kconfigs/none.config`"), "{pr:?}");
    }
}
