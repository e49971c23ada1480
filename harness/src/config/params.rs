//! The benchmark kinds and their parameters, declared once: the table at the
//! end of this file generates the raw keys (`RawBenchmark`, a profile's
//! `RawOverride` and what it replaces), the validated [`BenchKind`] with
//! its documented fields, each kind's parameter list for "not a parameter of"
//! problems, and each parameter's default and check.
//!
//! Adding a parameter to a kind is one row under that kind:
//! `/// doc` then `name: Type = check(default)`, where `check` is one of the
//! functions below (`or`, `positive`, `count`, `link`, `fanout`, `mask`). A
//! key no kind had before also gets its YAML type in `keys` (or `fixed`,
//! when no profile may override it). The guest side
//! (`bench::command`) then uses the new field. The parameter types
//! ([`Count`], [`Link`]) live here too.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::program::{
    args, executable, list, metrics, ops, user, Executable, MetricSpec, Pattern, RawBuild, RawMetric,
};

/// A count that may be the literal `nproc` (the guest's CPU count).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(untagged)]
pub enum Count {
    /// A fixed number.
    Fixed(u32),
    /// `nproc`: the number of online CPUs in the guest.
    Named(NprocWord),
}

/// The only word a [`Count`] accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
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

/// Link mode of doexec.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Link {
    /// `-static`.
    Static,
    /// Dynamic: separate binaries, one shared loader and libc.
    Shared,
}

/// Builds the raw structs, `BenchKind` and the per-kind validation from
/// one table: `fixed { key: YamlType, … }` (keys a benchmark may set but a
/// profile may not override), `keys { … }` (keys a profile may override
/// too; serde lists both in this order), then per
/// kind its doc, variant, YAML word and parameters with doc, validated type
/// and `check(args)`.
macro_rules! bench_kinds {
    (
        fixed { $( $fixed:ident : $fty:ty ),* $(,)? }
        keys { $( $key:ident : $kty:ty ),* $(,)? }
        $(
            $(#[doc = $kdoc:literal])*
            $kind:ident $tag:literal {
                $(
                    $(#[$pmeta:meta])*
                    $param:ident : $pty:ty = $check:ident ( $($arg:expr),* ) $( from ( $($raw:ident),+ ) )?
                ),* $(,)?
            }
        )*
    ) => {
        #[derive(Debug, Clone, Default, Deserialize)]
        #[serde(deny_unknown_fields)]
        pub(super) struct RawBenchmark {
            pub(super) name: String,
            pub(super) kind: String,
            $( pub(super) $fixed: Option<$fty>, )*
            $( pub(super) $key: Option<$kty>, )*
        }

        /// A profile's new values for some parameters of one benchmark (for
        /// example shorter durations under the instruction-counting clock).
        #[derive(Debug, Clone, Default, Deserialize)]
        #[serde(deny_unknown_fields)]
        pub(super) struct RawOverride {
            $( $key: Option<$kty>, )*
        }

        impl RawOverride {
            /// Puts every value this override gives into `b`.
            pub(super) fn apply(&self, b: &mut RawBenchmark) {
                fn set<T: Clone>(to: &mut Option<T>, from: &Option<T>) {
                    if from.is_some() {
                        *to = from.clone();
                    }
                }
                $( set(&mut b.$key, &self.$key); )*
            }
        }

        impl RawBenchmark {
            /// The kind parameters this benchmark sets (not those of every kind).
            pub(super) fn given(&self) -> Vec<&'static str> {
                let all = [$( (stringify!($fixed), self.$fixed.is_some()), )* $( (stringify!($key), self.$key.is_some()) ),*];
                all.into_iter().filter(|(k, set)| *set && !EVERY_KIND.contains(k)).map(|(k, _)| k).collect()
            }
        }

        /// The benchmark programs and their parameters (a `program`'s are
        /// larger than the rest; benchmarks are few, so the size is kept).
        #[allow(clippy::large_enum_variant)]
        #[derive(Debug, Clone, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
        #[serde(tag = "kind")]
        pub enum BenchKind {
            $(
                $(#[doc = $kdoc])*
                #[serde(rename = $tag)]
                $kind { $( $(#[$pmeta])* $param: $pty ),* },
            )*
        }

        /// Every kind's YAML word, in table order.
        pub(super) const KINDS: &[&str] = &[$($tag),*];

        /// The keys of kind `kind`'s parameters, or None when there is no
        /// such kind.
        pub(super) fn parameters(kind: &str) -> Option<Vec<&'static str>> {
            match kind {
                $( $tag => Some([$( &raw_keys!($param $(; $($raw),+)?)[..] ),*].concat()), )*
                _ => None,
            }
        }

        /// The kind `b` names with each parameter checked (its default when
        /// absent); problems are `key: message`. None for an unknown kind.
        pub(super) fn validate(b: &RawBenchmark, errs: &mut Vec<String>) -> Option<BenchKind> {
            Some(match b.kind.as_str() {
                $( $tag => BenchKind::$kind { $( $param: $check(errs, stringify!($param), raw_values!(b, $param $(; $($raw),+)?) $(, $arg)*) ),* }, )*
                _ => return None,
            })
        }
    };
}

/// The YAML keys of one parameter: its name, or with `from (…)` the keys
/// it is made of.
macro_rules! raw_keys {
    ($param:ident) => {
        [stringify!($param)]
    };
    ($param:ident; $($raw:ident),+) => {
        [$(stringify!($raw)),+]
    };
}

/// What the raw benchmark `b` gives one parameter: its key's value, or with
/// `from (…)` a tuple of the values of the keys it is made of.
macro_rules! raw_values {
    ($b:ident, $param:ident) => {
        $b.$param.as_ref()
    };
    ($b:ident, $param:ident; $($raw:ident),+) => {
        ($($b.$raw.as_ref()),+)
    };
}

/// A sample's default length: what runs recorded before `sample_ms` measured.
fn a_second_ms() -> u32 {
    1000
}

/// A second's sample is not written, so a benchmark's parameters (and the
/// history's series keyed by them) read as before `sample_ms` existed.
fn is_a_second(ms: &u32) -> bool {
    *ms == 1000
}

/// Keys every kind takes (checked with the benchmark, not its kind).
const EVERY_KIND: &[&str] = &["timeout_s"];

/// The value, or `default` when absent; anything goes.
fn or<T: Clone>(_: &mut Vec<String>, _: &str, v: Option<&T>, default: T) -> T {
    v.cloned().unwrap_or(default)
}

/// The value, or `default`; 0 is a problem.
fn positive(errs: &mut Vec<String>, k: &str, v: Option<&u32>, default: u32) -> u32 {
    let v = v.copied().unwrap_or(default);
    if v == 0 {
        errs.push(format!("{k}: must be at least 1"));
    }
    v
}

/// The count, or `nproc`; 0 is a problem.
fn count(errs: &mut Vec<String>, k: &str, v: Option<&Count>) -> Count {
    let v = v.copied().unwrap_or(Count::Named(NprocWord::Nproc));
    if v == Count::Fixed(0) {
        errs.push(format!("{k}: must be at least 1 or `nproc`"));
    }
    v
}

/// `static` (the default) or `shared`.
fn link(errs: &mut Vec<String>, k: &str, v: Option<&String>) -> Link {
    match v.map_or("static", String::as_str) {
        "static" => Link::Static,
        "shared" => Link::Shared,
        o => {
            errs.push(format!("{k}: `{o}` is not static or shared"));
            Link::Static
        }
    }
}

/// The value, or `default`; more than 12 doublings is a problem.
fn fanout(errs: &mut Vec<String>, k: &str, v: Option<&u32>, default: u32) -> u32 {
    let v = v.copied().unwrap_or(default);
    if v > 12 {
        errs.push(format!("{k}: {v} would start 2^{v} processes; at most 12"));
    }
    v
}

/// A test mask, or `default`; 0 selects nothing and is a problem.
fn mask(errs: &mut Vec<String>, k: &str, v: Option<&u32>, default: u32) -> u32 {
    let v = v.copied().unwrap_or(default);
    if v == 0 {
        errs.push(format!("{k}: selects no test"));
    }
    v
}

bench_kinds! {
    fixed {
        link: String,
        run: String,
        sources: Vec<String>,
        build: RawBuild,
        files: Vec<String>,
        metrics: Vec<RawMetric>,
        ops: String,
        work: Vec<String>,
        user: u32,
    }
    keys {
        workers: Count,
        duration_s: u32,
        sample_ms: u32,
        warmup_s: u32,
        timeout_s: u64,
        fanout: u32,
        iterations: u32,
        usleep_us: u32,
        nr_threads: Count,
        run_test_mask: u32,
        test_repeat_count: u32,
        test_loop_count: u32,
        sequential_test_order: bool,
        nr_pages: u32,
        args: Vec<String>,
    }
    /// Separate binary copies re-executing themselves (seeds 000, 002).
    Doexec "doexec" {
        /// static or shared.
        link: Link = link(),
        /// Worker processes.
        workers: Count = count(),
        /// Measured samples, each `sample_ms` long (a second by default).
        duration_s: u32 = positive(5),
        /// Length of each measured sample in milliseconds: at many vCPUs
        /// under icount a guest second costs minutes, so a short sample
        /// keeps the op, not the boot, the cost.
        #[serde(default = "a_second_ms", skip_serializing_if = "is_a_second")]
        sample_ms: u32 = positive(1000),
        /// Warm-up seconds, discarded.
        warmup_s: u32 = or(1),
    }
    /// fork ×fanout, then fork/usleep/kill/waitpid against set/getpriority (seed 003).
    ForkPrlimit "fork_prlimit" {
        /// The program forks this many times first (2^fanout processes).
        fanout: u32 = fanout(6),
        /// Loop iterations per process.
        iterations: u32 = positive(5000),
        /// Parent's sleep before killing its child.
        usleep_us: u32 = or(1000),
    }
    /// Workers fork+exec `/bin/true` in a loop (seed 004).
    ForkExec "fork_exec" {
        /// Worker processes.
        workers: Count = count(),
        /// Measured samples, each `sample_ms` long (a second by default).
        duration_s: u32 = positive(5),
        /// Length of each measured sample in milliseconds: at many vCPUs
        /// under icount a guest second costs minutes, so a short sample
        /// keeps the op, not the boot, the cost.
        #[serde(default = "a_second_ms", skip_serializing_if = "is_a_second")]
        sample_ms: u32 = positive(1000),
        /// Warm-up seconds, discarded.
        warmup_s: u32 = or(1),
    }
    /// The kernel's test_vmalloc module (seed 001).
    TestVmalloc "test_vmalloc" {
        /// Module parameter nr_threads.
        nr_threads: Count = count(),
        /// Module parameter run_test_mask.
        run_test_mask: u32 = mask(0x7),
        /// Module parameter test_repeat_count.
        test_repeat_count: u32 = positive(1),
        /// Module parameter test_loop_count.
        test_loop_count: u32 = positive(1_000_000),
        /// Module parameter sequential_test_order.
        sequential_test_order: bool = or(false),
        /// Module parameter nr_pages.
        nr_pages: u32 = positive(1),
    }
    /// Any guest program of the user's (`docs/benchmarks.md`): one that is
    /// installed on the host (copied with its libraries), C sources
    /// compiled like `images/`, or a directory built on the host.
    Program "program" {
        /// What runs: `run:` (an installed program), `sources:` (C files)
        /// or `build:` (a directory built on the host).
        #[serde(flatten)]
        executable: Executable = executable() from (run, sources, build),
        /// Extra host files or directories the guest gets at the same paths.
        files: Vec<String> = list(),
        /// The arguments, passed literally but for `{nproc}`, `{workers}`, `{duration_s}`.
        args: Vec<String> = args(),
        /// What `{workers}` stands for.
        workers: Count = count(),
        /// What `{duration_s}` stands for.
        duration_s: u32 = positive(5),
        /// The metrics and their patterns; none: the `sample` line protocol.
        metrics: Vec<MetricSpec> = metrics(),
        /// The pattern of the operation count a kernel profile is divided by
        /// (none: one operation a repetition).
        ops: Option<Pattern> = ops(),
        /// The kernel functions that are the unit of work (their calls per op
        /// must match between arms for a per-op comparison under icount).
        work: Vec<String> = list(),
        /// A uid other than root to run the program as.
        user: Option<u32> = user(),
    }
}

/// Builds a benchmark kind from the flat raw struct; errors are `key: message`.
pub(super) fn bench_kind(b: &RawBenchmark) -> Result<BenchKind, Vec<String>> {
    let Some(allowed) = parameters(&b.kind) else {
        return Err(vec![format!(
            "kind: `{}` is not a benchmark kind ({})",
            b.kind,
            KINDS.join(", ")
        )]);
    };
    let mut errs: Vec<String> = b
        .given()
        .into_iter()
        .filter(|k| !allowed.contains(k))
        .map(|k| {
            format!(
                "{k}: not a parameter of {} (its parameters: {})",
                b.kind,
                allowed.join(", ")
            )
        })
        .collect();
    let kind = validate(b, &mut errs);
    match kind {
        Some(kind) if errs.is_empty() => Ok(kind),
        _ => Err(errs),
    }
}
