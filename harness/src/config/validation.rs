//! Raw matrix → validated matrix, one validator per section (profile,
//! kernel, benchmarks, variants, guest, vcpus, sampling). Every problem is
//! collected, each naming its YAML path (`variants[2].apply[0]: …`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use super::params;
use super::raw::{RawBenchmark, RawGuest, RawKernel, RawMatrix, RawProfile, RawSampling, RawStatistics};
use super::validated::{
    AccelChoice, BaseConfig, Benchmark, Clock, ContentionGate, Guest, Kernel, Matrix, Pin, Sampling, Statistics,
};
use super::DEFAULT_SOURCE;

use super::keys::{names_benchmark, Producible};

use super::names::{check_name, files, valid_name, Rel};

/// `key_metrics:`: each names a benchmark the matrix defines, or one of its
/// metrics; those a profile left out are dropped.
fn key_metrics(keys: &mut Vec<String>, producible: &Producible, kept: &[String], p: &mut Vec<String>) {
    for (i, k) in keys.iter().enumerate() {
        if let Some(problem) = producible.problem(k) {
            p.push(format!("key_metrics[{i}]: {problem}"));
        }
    }
    keys.retain(|k| kept.iter().any(|b| names_benchmark(k, b)));
}

/// The keys of `statistics.thresholds:`, the top level's and each
/// profile's, each a benchmark or one of its metrics.
fn threshold_keys(raw: &RawMatrix, producible: &Producible, p: &mut Vec<String>) {
    let profiles = raw
        .profiles
        .iter()
        .map(|(name, pr)| (format!("profiles.{name}.statistics"), pr.statistics.as_ref()));
    for (at, s) in std::iter::once(("statistics".to_string(), Some(&raw.statistics))).chain(profiles) {
        for key in s.and_then(|s| s.thresholds.as_ref()).into_iter().flat_map(|t| t.keys()) {
            if let Some(problem) = producible.problem(key) {
                p.push(format!("{at}.thresholds.{key}: {problem}"));
            }
        }
    }
}

/// The most memory a guest may be given, in MiB (4 TiB): a fixed bound
/// checked before anything is built; more than the host has is a warning
/// of `check` only, since a shard host may have more.
const MAX_MEMORY_MIB: u64 = 4 << 20;

/// Raw matrix → validated matrix, one validator per section; every problem
/// is collected, each naming its YAML path.
pub(super) fn validate(mut raw: RawMatrix, path: &Path, profile: Option<&str>) -> Result<Matrix, Vec<String>> {
    let mut p = Vec::new();
    let rel = Rel::of(path);
    // Key metrics and thresholds may name benchmarks a profile leaves out.
    let producible = Producible::of(&raw);
    threshold_keys(&raw, &producible, &mut p);
    let without_kvm = check_profiles(&raw.profiles, profile, &mut p);
    // Profiles first: they select from and override the top level.
    if let Some(name) = profile {
        if !apply_profile(&mut raw, name, &mut p) {
            return Err(p);
        }
    }
    let kernel = validate_kernel(&raw.kernel, &rel, &mut p);
    let series_dir = rel.path(&raw.series_dir);
    let (benchmarks, not_installed) = validate_benchmarks(&raw.benchmarks, &rel, &mut p);
    let all_bench: Vec<String> = raw.benchmarks.iter().map(|b| b.name.clone()).collect();
    let variants = super::variants::validate_variants(&raw.variants, &series_dir, &all_bench, &rel, &mut p);
    // a program not installed here matters where a variant runs it
    for (b, problem) in not_installed {
        if variants.iter().any(|v| v.benchmarks.contains(&b)) {
            p.push(problem);
        }
    }
    let guest = validate_guest(&raw.guest, &mut p);
    super::program_check::files_fit(&benchmarks, guest.memory_mib, &mut p);
    let vcpus = validate_vcpus(&raw.vcpus, &guest, &mut p);
    let (sampling, statistics) = validate_sampling(&raw.sampling, &raw.statistics, &mut p);
    let statistics = super::statistics::thresholds(statistics, &raw.statistics, &mut p);
    key_metrics(&mut raw.key_metrics, &producible, &all_bench, &mut p);
    if !p.is_empty() {
        return Err(p);
    }
    Ok(Matrix {
        path: path.to_path_buf(),
        profile: profile.map(str::to_string),
        without_kvm,
        instead_of: None,
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

/// The profiles' names and their `without_kvm:` checked; the `without_kvm:`
/// of `profile`, the one asked for.
fn check_profiles(
    profiles: &BTreeMap<String, RawProfile>,
    profile: Option<&str>,
    p: &mut Vec<String>,
) -> Option<String> {
    for pname in profiles.keys() {
        if !valid_name(pname) {
            p.push(format!(
                "profiles.{pname}: profile names are lowercase letters, digits, '.', '_' and '-'"
            ));
        }
    }
    check_without_kvm(profiles, p);
    profile
        .and_then(|n| profiles.get(n))
        .and_then(|pr| pr.without_kvm.clone())
}

/// Each profile's `without_kvm:` names another profile, one that has no
/// `without_kvm:` of its own.
fn check_without_kvm(profiles: &BTreeMap<String, RawProfile>, p: &mut Vec<String>) {
    for (name, prof) in profiles {
        let Some(alt) = &prof.without_kvm else { continue };
        match profiles.get(alt) {
            None => p.push(format!("profiles.{name}.without_kvm: no profile `{alt}`")),
            Some(_) if alt == name => p.push(format!("profiles.{name}.without_kvm: names the profile itself; name the profile to run where KVM is not usable")),
            Some(a) if a.without_kvm.is_some() => {
                p.push(format!("profiles.{name}.without_kvm: `{alt}` has a `without_kvm:` of its own; name a profile without one"))
            }
            Some(_) => {}
        }
    }
}

/// Narrows and overrides the top level with profile `name`; false when
/// there is no such profile (then nothing else is worth checking).
fn apply_profile(raw: &mut RawMatrix, name: &str, p: &mut Vec<String>) -> bool {
    let Some(prof) = raw.profiles.get(name).cloned() else {
        let known: Vec<_> = raw.profiles.keys().cloned().collect();
        p.push(format!(
            "profiles: no profile `{name}` (defined: {})",
            if known.is_empty() {
                "none".into()
            } else {
                known.join(", ")
            }
        ));
        return false;
    };
    narrow(raw, &prof, name, p);
    override_values(raw, prof, name, p);
    true
}

/// A profile's `variants:` and `benchmarks:`: keeps those it names (and
/// `base`), each name it gives that the matrix lacks a problem.
fn narrow(raw: &mut RawMatrix, prof: &RawProfile, name: &str, p: &mut Vec<String>) {
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
}

/// A profile's values over the top level's: vCPUs, sampling, guest memory,
/// clock and command line, statistics, and per benchmark its `overrides`.
fn override_values(raw: &mut RawMatrix, prof: RawProfile, name: &str, p: &mut Vec<String>) {
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
        let mut thresholds = t.thresholds.clone().unwrap_or_default();
        thresholds.extend(s.thresholds.unwrap_or_default());
        // a profile's threshold (or floor) replaces the top level's either way
        let (floor, threshold) = match (&s.floor, &s.threshold) {
            (None, None) => (t.floor.clone(), t.threshold.clone()),
            _ => (s.floor, s.threshold),
        };
        raw.statistics = RawStatistics {
            alpha: s.alpha.or(t.alpha),
            floor,
            threshold,
            thresholds: (!thresholds.is_empty()).then_some(thresholds),
            second_stage: s.second_stage.or_else(|| t.second_stage.clone()),
            resamples: s.resamples.or(t.resamples),
            seed: s.seed.or(t.seed),
            contention: s.contention.or_else(|| t.contention.clone()),
        };
    }
    for (bname, o) in &prof.overrides {
        match raw.benchmarks.iter_mut().find(|b| &b.name == bname) {
            Some(b) => o.apply(b),
            None => p.push(format!(
                "profiles.{name}.overrides.{bname}: no benchmark `{bname}` in this profile"
            )),
        }
    }
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
    at_most(
        build_timeout_min,
        MAX_BUILD_TIMEOUT_MIN,
        "kernel.build_timeout_min",
        "a week",
        p,
    );
    Kernel {
        source,
        base_config,
        fragments,
        build_timeout_min,
    }
}

/// The longest build `kernel.build_timeout_min` may allow: a week, in minutes.
pub const MAX_BUILD_TIMEOUT_MIN: u64 = 7 * 24 * 60;

/// The longest `guest.boot_timeout_s` and a benchmark's `timeout_s`: a day,
/// in seconds (a deadline scaled by the pace must neither wrap nor panic).
pub const MAX_TIMEOUT_S: u64 = 24 * 60 * 60;

/// A problem at `at` when `v` is more than `max` (`what`, in words).
fn at_most(v: u64, max: u64, at: &str, what: &str, p: &mut Vec<String>) {
    if v > max {
        p.push(format!("{at}: {v} is more than {max} ({what})"));
    }
}

/// `benchmarks:`: names and kinds with their parameters; with each
/// `program` benchmark whose program is not installed, the problem.
fn validate_benchmarks(
    raw: &[RawBenchmark],
    rel: &Rel,
    p: &mut Vec<String>,
) -> (Vec<Benchmark>, Vec<(String, String)>) {
    let mut benchmarks = Vec::new();
    let mut not_installed = Vec::new();
    let mut seen = BTreeSet::new();
    for (i, b) in raw.iter().enumerate() {
        let at = format!("benchmarks[{i}]");
        check_name(&b.name, &at, &mut seen, p);
        if b.name.contains('.') {
            p.push(format!(
                "{at}.name: `{}` holds a '.': key metrics and statistics overrides are written `benchmark.metric`, so a dot \
                 in a benchmark's name makes them ambiguous; use '-' or '_'",
                b.name
            ));
        }
        match params::bench_kind(b) {
            Ok(kind) => benchmarks.push(Benchmark {
                kind: {
                    let (kind, missing) = super::program_check::resolve(kind, &at, &|f| rel.path(f), p);
                    not_installed.extend(missing.map(|m| (b.name.clone(), m)));
                    kind
                },
                name: b.name.clone(),
                timeout_s: b.timeout_s.unwrap_or(600),
            }),
            Err(errs) => p.extend(errs.into_iter().map(|e| format!("{at}.{e}"))),
        }
        if b.timeout_s == Some(0) {
            p.push(format!("{at}.timeout_s: must be at least 1"));
        }
        at_most(
            b.timeout_s.unwrap_or(0),
            MAX_TIMEOUT_S,
            &format!("{at}.timeout_s"),
            "a day",
            p,
        );
    }
    if raw.is_empty() {
        p.push("benchmarks: at least one benchmark is needed".into());
    }
    (benchmarks, not_installed)
}

/// `guest.clock`: wall (the default) or icount, which only TCG counts.
fn guest_clock(v: Option<&str>, accel: AccelChoice, p: &mut Vec<String>) -> Clock {
    let clock = match v.unwrap_or("wall") {
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
    clock
}

/// `guest.memory_mib`: 2048 by default, at least 256, at most
/// [`MAX_MEMORY_MIB`].
fn guest_memory(v: Option<u64>, p: &mut Vec<String>) -> u64 {
    let memory_mib = v.unwrap_or(2048);
    if memory_mib < 256 {
        p.push(format!(
            "guest.memory_mib: {memory_mib} is too small; the guest needs at least 256"
        ));
    }
    if memory_mib > MAX_MEMORY_MIB {
        p.push(format!(
            "guest.memory_mib: {memory_mib} is more than {MAX_MEMORY_MIB} (4 TiB), which no benchmark guest needs; QEMU would refuse it only after the builds"
        ));
    }
    memory_mib
}

/// `guest:`: accelerator, clock, memory, command line, boot path, topology.
fn validate_guest(g: &RawGuest, p: &mut Vec<String>) -> Guest {
    let accel = guest_accel(g.accel.as_deref(), p);
    let clock = guest_clock(g.clock.as_deref(), accel, p);
    let memory_mib = guest_memory(g.memory_mib, p);
    for (i, w) in g.cmdline.iter().enumerate() {
        if w.is_empty() || w.chars().any(|c| c.is_whitespace() || c.is_control() || c == '"') {
            p.push(format!(
                "guest.cmdline[{i}]: `{w}` must be one word without spaces or quotes"
            ));
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
    let timeout = g.boot_timeout_s.unwrap_or(0);
    at_most(timeout, MAX_TIMEOUT_S, "guest.boot_timeout_s", "a day", p);
    let (sockets, threads) = (g.sockets.unwrap_or(1), g.threads.unwrap_or(1));
    if sockets == 0 || threads == 0 {
        p.push("guest: sockets and threads must be at least 1".into());
    }
    Guest {
        pin: Pin::parse(g.pin.as_deref(), p),
        hugepages: g.hugepages.unwrap_or(false),
        pvh,
        memory_mib,
        accel,
        clock,
        cmdline: g.cmdline.clone(),
        boot_timeout_s: g.boot_timeout_s.unwrap_or(300),
        aslr: g.aslr.unwrap_or(true),
        kernel_profile: g.kernel_profile.unwrap_or(clock == Clock::Icount) && clock == Clock::Icount,
        profile_boots: g.kernel_profile == Some(true) && clock == Clock::Wall,
        contention: g.contention.unwrap_or(true),
        sockets,
        threads,
        numa_nodes: g.numa_nodes.unwrap_or(0),
    }
}

/// `guest.accel`: auto (the default), kvm or tcg.
fn guest_accel(a: Option<&str>, p: &mut Vec<String>) -> AccelChoice {
    match a.unwrap_or("auto") {
        "auto" => AccelChoice::Auto,
        "kvm" => AccelChoice::Kvm,
        "tcg" => AccelChoice::Tcg,
        other => {
            p.push(format!("guest.accel: `{other}` is not one of auto, kvm, tcg"));
            AccelChoice::Auto
        }
    }
}

/// `vcpus:`: counts that fit the guest's topology, sorted, without repeats.
fn validate_vcpus(raw: &[u32], guest: &Guest, p: &mut Vec<String>) -> Vec<u32> {
    for (i, &n) in raw.iter().enumerate() {
        if n == 0 {
            p.push(format!("vcpus[{i}]: must be at least 1"));
        } else if n % (guest.sockets * guest.threads).max(1) != 0 {
            p.push(format!(
                "vcpus[{i}]: {n} does not divide into {} socket(s) × {} thread(s)",
                guest.sockets, guest.threads
            ));
        } else if guest.numa_nodes > 0 && n % guest.numa_nodes != 0 {
            p.push(format!(
                "vcpus[{i}]: {n} does not divide into {} NUMA nodes",
                guest.numa_nodes
            ));
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

/// The most boots per variant and vCPU count a matrix may ask for: a plan
/// is made whole before the first boot (a month of 2-vCPU icount boots).
pub const MAX_BOOTS: u32 = 10_000;

/// The most repetitions per boot a matrix may ask for.
pub const MAX_REPETITIONS: u32 = 10_000;

/// The most warm-up repetitions per boot a matrix may ask for.
pub const MAX_WARMUP_REPETITIONS: u32 = 1_000;

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
    for (key, n, most) in [
        ("boots", sampling.boots, MAX_BOOTS),
        ("repetitions", sampling.repetitions, MAX_REPETITIONS),
        (
            "warmup_repetitions",
            sampling.warmup_repetitions,
            MAX_WARMUP_REPETITIONS,
        ),
    ] {
        if n > most {
            p.push(format!("sampling.{key}: {n} is more than {most}, the most a run takes"));
        }
    }
    let statistics = Statistics {
        alpha: t.alpha.unwrap_or(0.05),
        threshold: super::statistics::DEFAULT_THRESHOLD,
        thresholds: Default::default(),
        second_stage_boots: t.second_stage.as_ref().and_then(|s| s.boots).unwrap_or(0),
        resamples: t.resamples.unwrap_or(10_000),
        seed: t.seed.unwrap_or(1),
        contention: match t.contention.as_deref() {
            None | Some("warn") => ContentionGate::Warn,
            Some("fail") => ContentionGate::Fail,
            Some(other) => {
                p.push(format!(
                    "statistics.contention: `{other}` is neither `warn` nor `fail` (what `more contention` in a key benchmark does to the gate)"
                ));
                ContentionGate::Warn
            }
        },
    };
    if !(statistics.alpha > 0.0 && statistics.alpha < 0.5) {
        p.push(format!("statistics.alpha: {} must lie in (0, 0.5)", statistics.alpha));
    }
    super::statistics::check_resamples(statistics.resamples, p);
    (sampling, statistics)
}

/// The kernel's config targets that make a whole `.config` from Kconfig
/// alone (6.12 `scripts/kconfig/Makefile`); `oldconfig`, `olddefconfig`,
/// `config` and the `*.config` fragment targets start from whatever
/// `.config` the tree holds, and the interactive ones wait for a human.
pub const BASE_CONFIG_TARGETS: &[&str] = &[
    "defconfig",
    "tinyconfig",
    "allnoconfig",
    "allyesconfig",
    "allmodconfig",
    "alldefconfig",
    "randconfig",
];

/// Is `t` a make target `base_config` may name: one of
/// [`BASE_CONFIG_TARGETS`] or an `arch/*/configs/<name>_defconfig` name
/// (`[a-z0-9_]+_defconfig`)? Anything else is a file path, never a make
/// argument.
pub fn is_base_config_target(t: &str) -> bool {
    let arch_defconfig = t.strip_suffix("_defconfig").is_some_and(|n| {
        !n.is_empty()
            && n.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
    });
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
