//! `harness check`: everything that can be known before building — the
//! matrix is valid, its sampling can give a significant verdict with the boot
//! as the unit, the tools are installed, every series applies or is already
//! contained as its variants need, and QEMU, KVM, the kernel's NR_CPUS and
//! the host's memory can hold every vCPU count asked for.

use serde::Serialize;

use crate::config::{AccelChoice, BaseConfig, Matrix};
use crate::kernel::kconfig;
use crate::kernel::patch::{self, State};
use crate::kernel::tree::Tree;
use crate::proc::{self, Cmd};
use crate::vm;

/// Severity of a finding.
#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq, PartialOrd, Ord)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    /// Fine.
    Ok,
    /// Will run, but read this.
    Warn,
    /// Will not work.
    Error,
}

/// One line of the check.
#[derive(Debug, Clone, Serialize)]
pub struct Item {
    /// Severity.
    pub level: Level,
    /// What was checked (`series prlimit-tasklist-lock`, `vcpus 448`, …).
    pub what: String,
    /// The finding.
    pub message: String,
}

fn item(level: Level, what: impl Into<String>, message: impl Into<String>) -> Item {
    Item { level, what: what.into(), message: message.into() }
}

/// Host programs the pipeline runs.
pub const TOOLS: &[(&str, &str)] = &[
    ("make", "build-essential"),
    ("gcc", "build-essential"),
    ("patch", "patch"),
    ("tar", "tar"),
    ("xz", "xz-utils"),
    ("flex", "flex"),
    ("bison", "bison"),
    ("bc", "bc"),
    ("ldd", "libc-bin"),
    ("dropbearkey", "dropbear-bin"),
    ("dropbearconvert", "dropbear-bin"),
];

/// The NR_CPUS the build will get: the last fragment that sets it, else the
/// base config file's, else the x86-64 default of 64.
pub fn nr_cpus(m: &Matrix) -> (u32, String) {
    let mut val = None;
    let mut from = String::from("the x86-64 default");
    if let BaseConfig::File(f) = &m.kernel.base_config {
        if let Ok(c) = kconfig::read(f) {
            if let Some(v) = c.get("NR_CPUS").and_then(|v| v.parse().ok()) {
                val = Some(v);
                from = f.display().to_string();
            }
        }
    }
    for f in &m.kernel.fragments {
        if let Ok(c) = kconfig::read(f) {
            if let Some(v) = c.get("NR_CPUS").and_then(|v| v.parse().ok()) {
                val = Some(v);
                from = f.display().to_string();
            }
        }
    }
    (val.unwrap_or(64), from)
}

/// Comparisons a report of the matrix makes: every non-base variant's
/// benchmarks × their metrics × vCPU counts.
pub fn comparison_count(m: &Matrix) -> usize {
    let per_vcpu: usize = m.variants.iter().skip(1).flat_map(|v| &v.benchmarks).filter_map(|b| m.benchmark(b)).map(crate::bench::metric_count).sum();
    per_vcpu * m.vcpus.len()
}

/// Whether the sampling can give a significant verdict with the boot as the
/// unit: Mann-Whitney's smallest p over `boots` vs `boots` must pass
/// Benjamini-Hochberg for a change confined to one of the report's `m`
/// comparisons, i.e. `m * smallest_p <= alpha`. Warns, naming the profile and
/// the boots needed, when it cannot.
pub fn sampling_power(m: &Matrix) -> Option<Item> {
    let comparisons = comparison_count(m);
    if comparisons == 0 {
        return None;
    }
    let boots = m.sampling.boots as usize;
    let alpha = m.statistics.alpha;
    let smallest = crate::stats::smallest_p(boots, boots);
    let name = m.profile.as_ref().map(|p| format!("profile {p}")).unwrap_or_else(|| "the matrix without a profile".into());
    let what = format!("sampling ({name})");
    let lone = smallest * comparisons as f64;
    if lone <= alpha {
        let msg = format!("{boots} boots per variant and vCPU count: smallest p {smallest:.4}; a change in one of the {comparisons} comparisons can reach q {lone:.3} ≤ {alpha}");
        return Some(item(Level::Ok, what, msg));
    }
    let need = (boots.max(2)..=100).find(|&b| crate::stats::smallest_p(b, b) * comparisons as f64 <= alpha).unwrap_or(100);
    let reach = if smallest > alpha {
        format!("no cell can reach p < {alpha} at all")
    } else {
        "only changes shared by several comparisons can pass".to_string()
    };
    Some(item(
        Level::Warn,
        what,
        format!(
            "{boots} boots per variant and vCPU count: Mann-Whitney's smallest two-sided p over boots is {smallest:.3}, so {reach}; \
             a change in one of the {comparisons} comparisons needs p ≤ {:.4} to pass Benjamini-Hochberg at q ≤ {alpha}: \
             use at least {need} boots (sampling.boots; fewer repetitions per boot keep the time)",
            alpha / comparisons as f64
        ),
    ))
}

/// Runs every check; `work` is the harness's work directory.
pub fn run(m: &Matrix, work: &std::path::Path) -> Vec<Item> {
    let mut out = Vec::new();
    out.push(item(Level::Ok, "matrix", format!("{}: {} variants, vCPUs {:?}, {} benchmarks", m.path.display(), m.variants.len(), m.vcpus, m.benchmarks.len())));
    out.extend(sampling_power(m));

    for (t, pkg) in TOOLS {
        if proc::which(t).is_none() {
            out.push(item(Level::Error, format!("tool {t}"), format!("not installed: install {pkg} (harness/scripts/setup-host.sh)")));
        }
    }
    if crate::image::HostBins::find().is_err() {
        out.push(item(Level::Error, "guest image", "busybox-static or dropbear-bin missing (harness/scripts/setup-host.sh)"));
    }

    // QEMU and its q35 limit
    let mut q35_max = None;
    match proc::which("qemu-system-x86_64") {
        None => out.push(item(Level::Error, "qemu", "qemu-system-x86_64 not installed (harness/scripts/setup-host.sh)")),
        Some(q) => {
            let v = Cmd::new(q).arg("--version").capture().run().map(|f| f.output).unwrap_or_default();
            match vm::parse_qemu_version(&v) {
                Some((a, b)) => {
                    let lim = vm::q35_max_cpus(a, b);
                    q35_max = Some((lim, format!("{a}.{b}")));
                    out.push(item(Level::Ok, "qemu", format!("QEMU {a}.{b}: q35 boots up to {lim} vCPUs")));
                }
                None => out.push(item(Level::Warn, "qemu", format!("could not read the version from `{}`", v.trim()))),
            }
        }
    }
    let (nr, nr_from) = nr_cpus(m);
    let kvm = vm::kvm_precheck();
    let kvm_max = vm::kvm_max_vcpus();
    match (&kvm, m.guest.accel) {
        (Some(why), AccelChoice::Kvm) => out.push(item(Level::Error, "accel", format!("guest.accel is kvm but {why}"))),
        (Some(why), _) => out.push(item(Level::Ok, "accel", format!("{why}: guests will run under TCG"))),
        (None, AccelChoice::Tcg) => out.push(item(Level::Ok, "accel", "TCG (guest.accel: tcg)")),
        (None, _) => out.push(item(
            Level::Ok,
            "accel",
            format!("/dev/kvm opens (max {} vCPUs); the first boot proves KVM works or falls back to TCG", kvm_max.map(|n| n.to_string()).unwrap_or("?".into())),
        )),
    }
    let host_mem = host_available_mib();
    for &n in &m.vcpus {
        let what = format!("vcpus {n}");
        if let Some((lim, ver)) = &q35_max {
            if n > *lim {
                out.push(item(Level::Error, &what, format!("QEMU {ver}'s q35 machine boots at most {lim} vCPUs; install QEMU >= 9 (bookworm-backports)")));
            }
        }
        if n > nr {
            out.push(item(Level::Error, &what, format!("the kernel's CONFIG_NR_CPUS is {nr} (from {nr_from}); raise it to at least {n} in a fragment")));
        }
        if m.guest.accel != AccelChoice::Tcg && kvm.is_none() {
            if let Some(k) = kvm_max {
                if n > k {
                    out.push(item(Level::Warn, &what, format!("the host KVM allows {k} vCPUs per VM; this count would only run under TCG")));
                }
            }
        }
        if n > vm::XAPIC_LIMIT {
            out.push(item(Level::Ok, &what, "above 255: x2APIC with interrupt remapping (intel-iommu, split irqchip)"));
        }
        // QEMU under TCG needs ~10 MiB per vCPU on top of guest RAM (4.4 GB RSS at 448)
        let need = m.guest.memory_mib + n as u64 * 10;
        if let Some(avail) = host_mem {
            if need > avail {
                out.push(item(Level::Warn, &what, format!("needs ~{need} MiB on the host (guest {} + QEMU), {avail} MiB available", m.guest.memory_mib)));
            }
        }
        for b in &m.benchmarks {
            let want = crate::bench::memory_need_mib(b, n) + 128;
            if want > m.guest.memory_mib {
                out.push(item(
                    Level::Warn,
                    format!("{} at {n} vCPUs", b.name),
                    format!("needs ~{want} MiB of guest memory, guest.memory_mib is {}; raise it or lower the thread/worker count", m.guest.memory_mib),
                ));
            }
        }
    }

    // series against the base tree
    let log = work.join("check.log");
    match Tree::prepare(&m.kernel.source, work, &log) {
        Err(e) => out.push(item(Level::Error, "kernel tree", format!("{e:#}"))),
        Ok(tree) => {
            out.push(item(Level::Ok, "kernel tree", format!("{} ({}) at {}", tree.version().unwrap_or_default(), m.kernel.source.display(), tree.dir.display())));
            let mut states = std::collections::BTreeMap::new();
            let mut names: Vec<String> = crate::pipeline::series_names(m);
            // every series directory, so a maintainer sees all of them
            if let Ok(rd) = std::fs::read_dir(&m.series_dir) {
                let mut extra: Vec<String> = rd
                    .filter_map(|e| e.ok())
                    .filter(|e| e.path().join("series").is_file())
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .filter(|n| !names.contains(n))
                    .collect();
                extra.sort();
                names.extend(extra);
            }
            for s in names {
                let what = format!("series {s}");
                match patch::load_series(&m.series_dir, &s).and_then(|ser| {
                    let exp = ser.experimental;
                    patch::classify(&tree.dir, &ser, &work.join("scratch")).map(|st| (st, exp))
                }) {
                    Err(e) => out.push(item(Level::Error, &what, format!("{e:#}"))),
                    Ok((st, exp)) => {
                        let lvl = if matches!(st, State::Conflicts { .. }) { Level::Warn } else { Level::Ok };
                        let tag = if exp { " [experimental]" } else { "" };
                        out.push(item(lvl, &what, format!("{st}{tag}")));
                        states.insert(s, st);
                    }
                }
            }
            for (i, v) in m.variants.iter().enumerate() {
                for (key, list, want) in [("revert", &v.revert, "contained"), ("apply", &v.apply, "applies")] {
                    for (j, s) in list.iter().enumerate() {
                        let Some(st) = states.get(s) else { continue };
                        let good = matches!((st, want), (State::Contained, "contained") | (State::Applies, "applies"));
                        if !good {
                            out.push(item(
                                Level::Error,
                                format!("variants[{}].{key}[{j}]", i),
                                format!("variant {} cannot {key} {s}: {st}", v.name),
                            ));
                        }
                    }
                }
            }
        }
    }
    out
}

fn host_available_mib() -> Option<u64> {
    let t = std::fs::read_to_string("/proc/meminfo").ok()?;
    t.lines().find_map(|l| l.strip_prefix("MemAvailable:").and_then(|r| r.split_whitespace().next()?.parse::<u64>().ok())).map(|k| k / 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn matrix(boots: u32, profile: Option<&str>) -> Matrix {
        let y = format!(
            "variants:\n  - name: base\n  - name: v\nvcpus: [2, 4]\nbenchmarks:\n  - {{name: d, kind: doexec}}\n\
             sampling: {{boots: 9, repetitions: 2}}\nprofiles:\n  p: {{sampling: {{boots: {boots}}}}}\n"
        );
        crate::config::parse(&y, std::path::Path::new("/x/m.yaml"), profile).unwrap()
    }

    #[test]
    fn sampling_that_cannot_pass_bh_is_named_with_the_boots_needed() {
        // 2 comparisons (one variant, one metric, two vCPU counts)
        assert_eq!(comparison_count(&matrix(2, Some("p"))), 2);
        let two = sampling_power(&matrix(2, Some("p"))).unwrap();
        assert_eq!((two.level, two.what.as_str()), (Level::Warn, "sampling (profile p)"));
        assert!(two.message.contains("smallest two-sided p over boots is 0.333, so no cell can reach p < 0.05 at all"), "{}", two.message);
        assert!(two.message.contains("use at least 5 boots"), "{}", two.message);
        // 4 boots: p = 0.029 < 0.05, but 2 x 0.029 > 0.05
        let four = sampling_power(&matrix(4, Some("p"))).unwrap();
        assert!(four.level == Level::Warn && four.message.contains("only changes shared by several comparisons"), "{}", four.message);
        let five = sampling_power(&matrix(5, Some("p"))).unwrap();
        assert_eq!(five.level, Level::Ok, "{}", five.message);
        let top = sampling_power(&matrix(4, None)).unwrap();
        assert_eq!((top.level, top.what.as_str()), (Level::Ok, "sampling (the matrix without a profile)"));
    }

    #[test]
    fn shipped_profiles_say_what_their_sampling_can_show() {
        let file = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../matrix.yaml");
        let at = |p: Option<&str>| {
            let m = crate::config::load(&file, p).unwrap();
            (comparison_count(&m), sampling_power(&m).unwrap().level)
        };
        assert_eq!(at(None), (33, Level::Ok), "nightly");
        assert_eq!(at(Some("premerge")), (11, Level::Ok));
        assert_eq!(at(Some("quick")), (2, Level::Warn), "quick: 4 boots, documented in matrix.yaml and README");
    }
}
