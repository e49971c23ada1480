//! `harness check`: everything that can be known before building — the
//! matrix is valid, its sampling can give a significant verdict with the boot
//! as the unit, the tools are installed, every series applies or is already
//! contained as its variants need, and QEMU, KVM, the kernel's NR_CPUS and
//! the host's memory can hold every vCPU count asked for. It touches the
//! shared work tree only under the work-directory lock: during a run it
//! tries the series on a private copy of the files they touch.

use std::path::Path;

use serde::Serialize;

use crate::bench::comparison_count;
use crate::config::{AccelChoice, BaseConfig, Clock, Matrix};
use crate::host;
use crate::kernel::kconfig;
use crate::proc;
use crate::vm;
use crate::workdir::WorkDir;

mod noise;
mod series;

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
    Item {
        level,
        what: what.into(),
        message: message.into(),
    }
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
    let name = m
        .profile
        .as_ref()
        .map(|p| format!("profile {p}"))
        .unwrap_or_else(|| "the matrix without a profile".into());
    let what = format!("sampling ({name})");
    let lone = smallest * comparisons as f64;
    if lone <= alpha {
        let msg = format!("{boots} boots per variant and vCPU count: smallest p {smallest:.4}; a change in one of the {comparisons} comparisons can reach q {lone:.3} ≤ {alpha}");
        return Some(item(Level::Ok, what, msg));
    }
    let need = (boots.max(2)..=100)
        .find(|&b| crate::stats::smallest_p(b, b) * comparisons as f64 <= alpha)
        .unwrap_or(100);
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

/// Every profile of the matrix file but the one checked, validated: an
/// error item per problem of each, naming the profile (`--profile <name>`
/// would refuse it); none when they all validate.
fn other_profiles(m: &Matrix) -> Vec<Item> {
    match crate::config::other_profiles_problems(&m.path, m.profile.as_deref()) {
        Err(e) => vec![item(Level::Error, "profiles", format!("{e:#}"))],
        Ok(broken) => broken
            .into_iter()
            .flat_map(|(name, problems)| {
                problems.into_iter().map(move |p| {
                    item(
                        Level::Error,
                        "profile",
                        format!("{name} (--profile {name} would refuse it): {p}"),
                    )
                })
            })
            .collect(),
    }
}

/// Runs every check; `work` is the harness's work directory.
pub fn run(m: &Matrix, work: &WorkDir) -> Vec<Item> {
    let mut out = Vec::new();
    out.push(item(
        Level::Ok,
        "matrix",
        format!(
            "{}: {} variants, vCPUs {:?}, {} benchmarks",
            m.path.display(),
            m.variants.len(),
            m.vcpus,
            m.benchmarks.len()
        ),
    ));
    if let Some(i) = &m.instead_of {
        let runs = m.profile.as_deref().unwrap_or("?");
        out.push(item(
            Level::Ok,
            "profile",
            format!(
                "`{}` runs as `{runs}` on this host (profiles.{}.without_kvm): {}",
                i.profile, i.profile, i.why
            ),
        ));
    }
    out.extend(other_profiles(m));
    out.extend(sampling_power(m));
    out.extend(tool_checks());
    let (qemu, q35_max) = qemu_check();
    out.push(qemu);
    let limits = Limits {
        q35_max,
        nr_cpus: nr_cpus(m),
        kvm: vm::kvm_precheck(),
        kvm_max: vm::kvm_max_vcpus(),
        host_mem: host::memory_available_mib(),
    };
    out.push(accel_check(m, &limits));
    for &n in &m.vcpus {
        out.extend(vcpu_checks(m, n, &limits));
    }
    out.extend(noise::items(m));
    out.extend(ref_checks(m));
    out.extend(series::checks(m, work));
    out.extend(coverage_checks(m, work));
    out
}

/// Which benchmarks execute what each variant's series change, from the
/// calls per op the last run of this base kernel kept: a series no
/// benchmark measures is a warning.
fn coverage_checks(m: &Matrix, work: &WorkDir) -> Vec<Item> {
    let cached = match crate::coverage::from_cache(m, work) {
        Ok(c) => c,
        Err(e) => return vec![item(Level::Warn, "coverage", format!("unknown: {e:#}"))],
    };
    let mut out = Vec::new();
    for (variant, why) in &cached.failed {
        out.push(item(
            Level::Warn,
            format!("coverage {variant}"),
            format!("cannot tell: {why}"),
        ));
    }
    let unknown = cached.unknown;
    for c in &cached.known {
        let what = format!("coverage {}", c.series);
        let text = crate::coverage::text(c);
        let level = if c.unmeasured() || c.cannot_tell() {
            Level::Warn
        } else {
            Level::Ok
        };
        out.push(item(level, what, text.trim_end().replace('\n', "\n      ")));
    }
    if !unknown.is_empty() {
        out.push(item(
            Level::Ok,
            "coverage",
            format!(
                "which benchmarks execute what {} change is known once a run has profiled base (every icount run does)",
                unknown.join(", ")
            ),
        ));
    }
    out
}

/// The host programs and the guest image's binaries, each missing one an error.
fn tool_checks() -> Vec<Item> {
    let mut out = Vec::new();
    for (t, pkg) in TOOLS {
        if proc::which(t).is_none() {
            out.push(item(
                Level::Error,
                format!("tool {t}"),
                format!("not installed: install {pkg} (harness/scripts/setup-host.sh)"),
            ));
        }
    }
    if crate::image::HostBins::find().is_err() {
        out.push(item(
            Level::Error,
            "guest image",
            "busybox-static or dropbear-bin missing (harness/scripts/setup-host.sh)",
        ));
    }
    out
}

/// QEMU and its version, and with that version the q35 machine's vCPU
/// limit (and the version it was read from).
fn qemu_check() -> (Item, Option<(u32, String)>) {
    let Some(q) = host::find_qemu() else {
        return (
            item(
                Level::Error,
                "qemu",
                "qemu-system-x86_64 not installed (harness/scripts/setup-host.sh)",
            ),
            None,
        );
    };
    let v = host::qemu_version(&q);
    match vm::parse_qemu_version(&v) {
        Some((a, b)) => {
            let lim = vm::q35_max_cpus(a, b);
            (
                item(Level::Ok, "qemu", format!("QEMU {a}.{b}: q35 boots up to {lim} vCPUs")),
                Some((lim, format!("{a}.{b}"))),
            )
        }
        None => (
            item(
                Level::Warn,
                "qemu",
                format!("could not read the version from `{}`", v.trim()),
            ),
            None,
        ),
    }
}

/// What bounds the vCPU counts and memory on this host.
struct Limits {
    /// The q35 machine's vCPU limit and the QEMU version it is of.
    q35_max: Option<(u32, String)>,
    /// The kernel's NR_CPUS and where it comes from.
    nr_cpus: (u32, String),
    /// Why KVM cannot be used, if it cannot.
    kvm: Option<String>,
    /// The host KVM's vCPU limit.
    kvm_max: Option<u32>,
    /// Host memory available, in MiB.
    host_mem: Option<u64>,
}

/// The accelerator guests will get.
fn accel_check(m: &Matrix, lim: &Limits) -> Item {
    match (&lim.kvm, m.guest.accel) {
        _ if m.guest.clock == Clock::Icount => item(
            Level::Ok,
            "accel",
            "TCG with the instruction-counting clock (guest.clock: icount): one host thread, 1 guest second = 10^9 instructions",
        ),
        (Some(why), AccelChoice::Kvm) => item(Level::Error, "accel", format!("guest.accel is kvm but {why}")),
        (Some(why), _) => item(Level::Ok, "accel", format!("{why}: guests will run under TCG")),
        (None, AccelChoice::Tcg) => item(Level::Ok, "accel", "TCG (guest.accel: tcg)"),
        (None, AccelChoice::Kvm) => item(
            Level::Ok,
            "accel",
            format!("/dev/kvm opens (max {} vCPUs); guest.accel is kvm, so there is no fallback: if KVM cannot start a guest here, every boot fails (`accel: auto` would fall back to TCG)", lim.kvm_max.map(|n| n.to_string()).unwrap_or("?".into())),
        ),
        (None, _) => item(
            Level::Ok,
            "accel",
            format!("/dev/kvm opens (max {} vCPUs); the first boot proves KVM works or falls back to TCG", lim.kvm_max.map(|n| n.to_string()).unwrap_or("?".into())),
        ),
    }
}

/// Whether a guest of `n` vCPUs can boot here: QEMU's and the kernel's
/// limits, KVM's, host memory, and each benchmark's guest memory.
fn vcpu_checks(m: &Matrix, n: u32, lim: &Limits) -> Vec<Item> {
    let mut out = limit_checks(m, n, lim);
    out.extend(memory_checks(m, n, lim));
    out
}

/// QEMU's q35 limit, the kernel's `CONFIG_NR_CPUS`, KVM's per-VM limit,
/// and the x2APIC note, for a guest of `n` vCPUs.
fn limit_checks(m: &Matrix, n: u32, lim: &Limits) -> Vec<Item> {
    let mut out = Vec::new();
    let what = format!("vcpus {n}");
    if let Some((max, ver)) = &lim.q35_max {
        if n > *max {
            // a newer QEMU helps only while one raises the limit
            let remedy = if *max < vm::q35_max_cpus(u32::MAX, 0) {
                "install QEMU >= 9 (bookworm-backports)".to_string()
            } else {
                format!("no QEMU release boots more there: ask for at most {max} vCPUs")
            };
            out.push(item(
                Level::Error,
                &what,
                format!("QEMU {ver}'s q35 machine boots at most {max} vCPUs; {remedy}"),
            ));
        }
    }
    let (nr, nr_from) = &lim.nr_cpus;
    if n > *nr {
        out.push(item(
            Level::Error,
            &what,
            format!("the kernel's CONFIG_NR_CPUS is {nr} (from {nr_from}); raise it to at least {n} in a fragment"),
        ));
    }
    if m.guest.accel != AccelChoice::Tcg && m.guest.clock == Clock::Wall && lim.kvm.is_none() {
        if let Some(k) = lim.kvm_max.filter(|&k| n > k) {
            out.push(item(
                Level::Warn,
                &what,
                format!("the host KVM allows {k} vCPUs per VM; this count would only run under TCG"),
            ));
        }
    }
    if n > vm::XAPIC_LIMIT {
        out.push(item(
            Level::Ok,
            &what,
            "above 255: x2APIC with interrupt remapping (intel-iommu, split irqchip)",
        ));
    }
    out
}

/// The host memory a guest of `n` vCPUs needs, and each benchmark's guest
/// memory at that count.
fn memory_checks(m: &Matrix, n: u32, lim: &Limits) -> Vec<Item> {
    let mut out = Vec::new();
    let what = format!("vcpus {n}");
    let need = host::guest_need_mib(m.guest.memory_mib, n);
    match lim.host_mem {
        Some(avail) if need > avail => out.push(item(
            Level::Warn,
            &what,
            format!(
                "needs ~{need} MiB on the host (guest {} + QEMU), {avail} MiB available; lower guest.memory_mib",
                m.guest.memory_mib
            ),
        )),
        // a profiled icount boot at hundreds of vCPUs is where memory runs short: say what one takes
        Some(avail) if n >= 256 => out.push(item(
            Level::Ok,
            &what,
            format!(
                "needs ~{need} MiB on the host (guest {} + QEMU, 10 MiB a vCPU), {avail} MiB available: {} at once",
                m.guest.memory_mib,
                avail / need.max(1)
            ),
        )),
        _ => {}
    }
    for (b, want) in crate::bench::short_of_memory(m, n) {
        out.push(item(
            Level::Warn,
            format!("{} at {n} vCPUs", b.name),
            format!(
                "needs ~{want} MiB of guest memory, guest.memory_mib is {}; raise it or lower the thread/worker count",
                m.guest.memory_mib
            ),
        ));
    }
    out
}

/// Every `ref:` variant names a commit of the git source. Series such a
/// variant applies are classified against the base source below, not
/// against its commit (that tree is only checked out by a run).
fn ref_checks(m: &Matrix) -> Vec<Item> {
    let mut out = Vec::new();
    for (i, v) in m.variants.iter().enumerate() {
        let Some(r) = &v.git_ref else { continue };
        let what = format!("variants[{i}].ref");
        match crate::kernel::tree::resolve_ref(&m.kernel.source, r) {
            Err(e) => out.push(item(Level::Error, what, format!("{e:#}"))),
            Ok(id) => {
                let also = if v.apply.is_empty() && v.revert.is_empty() {
                    String::new()
                } else {
                    "; its series are checked against the base source here, against this commit only by a run"
                        .to_string()
                };
                out.push(item(
                    Level::Ok,
                    what,
                    format!(
                        "variant {} is built from {r} = {}{also}",
                        v.name,
                        &id[..12.min(id.len())]
                    ),
                ));
            }
        }
    }
    out
}

/// Disk use of the work directory's kernels and trees and of the runs
/// directory, and the free space left where the work directory lives.
pub fn disk(work: &WorkDir, runs: &Path) -> Vec<Item> {
    let mut out: Vec<Item> = crate::gc::usage(work, runs)
        .into_iter()
        .map(|(what, bytes, n)| {
            item(
                Level::Ok,
                "disk",
                format!("{what}: {} in {n} entries", crate::gc::human(bytes)),
            )
        })
        .collect();
    if let Some(free) = free_bytes(work.root()) {
        // a 6.12 tree copy is 1.7 GB, an in-tree build ~1 GB more
        let lvl = if free < 10 << 30 { Level::Warn } else { Level::Ok };
        out.push(item(
            lvl,
            "disk",
            format!(
                "{} free at {}; `harness gc` lists what can go",
                crate::gc::human(free),
                work.display()
            ),
        ));
    }
    out
}

fn free_bytes(p: &Path) -> Option<u64> {
    use std::os::unix::ffi::OsStrExt;
    let existing = p.ancestors().find(|a| a.exists())?;
    let c = std::ffi::CString::new(existing.as_os_str().as_bytes()).ok()?;
    // SAFETY: statvfs fills the struct we pass; c is a valid C string.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    (unsafe { libc::statvfs(c.as_ptr(), &mut st) } == 0).then(|| st.f_bavail as u64 * st.f_frsize as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::patch;
    use crate::kernel::tree::Tree;
    use crate::testutil::{scratch, write};
    use crate::workdir::WorkLock;

    /// A run holds the lock and has a series applied mid-build: check must
    /// leave its tree and scratch alone and still classify the series
    /// against the pristine source.
    #[test]
    fn check_during_a_run_leaves_the_work_tree_alone() {
        let root = scratch("check-lock");
        let src = root.join("linux");
        write(
            &src.join("Makefile"),
            "VERSION = 6\nPATCHLEVEL = 12\nSUBLEVEL = 117\nEXTRAVERSION =\n",
        );
        write(&src.join("mm/vmalloc.c"), "one\ntwo\nthree\n");
        let patch = "Subject: [PATCH] t\n\n---\n--- a/mm/vmalloc.c\n+++ b/mm/vmalloc.c\n@@ -1,3 +1,3 @@\n one\n-two\n+TWO\n three\n";
        write(&root.join("patches/s/0001-t.patch"), patch);
        write(&root.join("patches/s/series"), "0001-t.patch\n");
        // issue 47: a broken series no variant uses is a warning, not an error
        write(&root.join("patches/junk/series"), "0001-missing.patch\n");
        let yaml = format!(
            "kernel:\n  source: {}\n  fragments: []\nseries_dir: patches\nvariants:\n  - name: base\n  - name: v\n    apply: [s]\n\
             vcpus: [2]\nbenchmarks:\n  - {{name: d, kind: doexec}}\n",
            src.display()
        );
        let m = crate::config::parse(&yaml, &root.join("matrix.yaml"), None).unwrap();
        let work = root.join("work");
        let wd = WorkDir::at(&work);

        // the run: lock, tree, series applied, scratch in use
        let run_lock = WorkLock::share_waiting(&wd, "run", std::time::Duration::ZERO, |_| {}).unwrap();
        let log = root.join("run.log");
        let tree = Tree::prepare(&src, &wd, &log).unwrap();
        let series = patch::load_series(&m.series_dir, "s").unwrap();
        tree.apply_series(&series, false, &log).unwrap().unwrap();
        write(&work.join("scratch/in-use"), "x");

        let items = run(&m, &wd);
        let find = |w: &str| {
            items
                .iter()
                .find(|i| i.what == w)
                .unwrap_or_else(|| panic!("no {w} in {items:?}"))
        };
        assert_eq!(
            std::fs::read_to_string(tree.dir.join("mm/vmalloc.c")).unwrap(),
            "one\nTWO\nthree\n",
            "check rolled the run's patch back"
        );
        assert!(work.join("scratch/in-use").exists(), "check cleared the run's scratch");
        assert!(
            find("kernel tree")
                .message
                .contains("a run holds the work directory (runs or shards are using"),
            "{items:?}"
        );
        assert_eq!(find("series s").message, "applies (not in the base)");
        assert!(!items.iter().any(|i| i.what.starts_with("variants[")), "{items:?}");
        let junk = find("series junk");
        assert!(
            junk.level == Level::Warn && junk.message.ends_with("(no variant of this matrix uses it)"),
            "{junk:?}"
        );

        // without a run, check uses (and rolls back) the work tree under the lock
        drop(run_lock);
        let items = run(&m, &wd);
        assert!(
            items
                .iter()
                .any(|i| i.what == "kernel tree" && i.message.contains(&tree.dir.display().to_string())),
            "{items:?}"
        );
        assert_eq!(
            std::fs::read_to_string(tree.dir.join("mm/vmalloc.c")).unwrap(),
            "one\ntwo\nthree\n"
        );
        WorkLock::acquire(&wd, "run").expect("check released the lock");
        std::fs::remove_dir_all(root).ok();
    }

    /// `ref:` variants are resolved in the git source: a commit that
    /// exists is named with its id, one that does not is an error at the
    /// variant's YAML path.
    #[test]
    fn check_resolves_every_ref_variant_in_the_git_source() {
        let root = scratch("check-ref");
        let src = root.join("linux");
        write(&src.join("Makefile"), "VERSION = 6\n");
        let git = |a: &[&str]| {
            let ok = std::process::Command::new("git")
                .arg("-C")
                .arg(&src)
                .args(["-c", "user.name=t", "-c", "user.email=t@t.invalid"])
                .args(a)
                .output()
                .unwrap();
            assert!(ok.status.success(), "{}", String::from_utf8_lossy(&ok.stderr));
            String::from_utf8_lossy(&ok.stdout).trim().to_string()
        };
        git(&["init", "-q"]);
        git(&["add", "-A"]);
        git(&["commit", "-qm", "one"]);
        git(&["tag", "good"]);
        let id = git(&["rev-parse", "good"]);
        let yaml = format!(
            "kernel:\n  source: {}\n  fragments: []\nvariants:\n  - name: base\n  - name: old\n    ref: good\n  - name: gone\n    ref: no-such-tag\n\
             vcpus: [2]\nbenchmarks:\n  - {{name: d, kind: doexec}}\n",
            src.display()
        );
        let m = crate::config::parse(&yaml, &root.join("matrix.yaml"), None).unwrap();
        let items = ref_checks(&m);
        assert_eq!(items.len(), 2, "{items:?}");
        assert!(
            matches!(items[0].level, Level::Ok) && items[0].what == "variants[1].ref",
            "{items:?}"
        );
        assert!(items[0].message.contains(&id[..12]), "{items:?}");
        assert!(
            matches!(items[1].level, Level::Error) && items[1].what == "variants[2].ref",
            "{items:?}"
        );
        assert!(
            items[1].message.contains("no-such-tag") && items[1].message.contains("names no commit"),
            "{items:?}"
        );
        std::fs::remove_dir_all(root).ok();
    }

    fn matrix(boots: u32, profile: Option<&str>) -> Matrix {
        let y = format!(
            "variants:\n  - name: base\n  - name: v\nvcpus: [2, 4]\nbenchmarks:\n  - {{name: d, kind: doexec}}\n\
             sampling: {{boots: 9, repetitions: 2}}\nprofiles:\n  p: {{sampling: {{boots: {boots}}}}}\n"
        );
        crate::config::parse(&y, std::path::Path::new("/x/m.yaml"), profile).unwrap()
    }

    /// The memory check estimates what the Slurm shard job asks for: one
    /// formula.
    #[test]
    fn check_estimates_the_memory_a_shard_job_asks_for() {
        let y = "variants:\n  - name: base\nvcpus: [2, 26]\nguest: {memory_mib: 8192}\nbenchmarks:\n  - {name: s, kind: doexec}\n";
        let m = crate::config::parse(y, Path::new("/nonexistent/m.yaml"), None).unwrap();
        let lim = Limits {
            q35_max: None,
            nr_cpus: (512, "test".into()),
            kvm: None,
            kvm_max: None,
            host_mem: Some(100),
        };
        let items = vcpu_checks(&m, 26, &lim);
        let (_, asks) = crate::slurm::resources(&m);
        assert!(
            items
                .iter()
                .any(|i| format!("{i:?}").contains(&format!("needs ~{asks} MiB on the host"))),
            "slurm asks {asks} MiB; check said {items:?}"
        );
    }

    /// Issue 58: with `accel: kvm` there is no probe and no fallback, and
    /// `check` says so rather than promising one.
    #[test]
    fn accel_kvm_is_told_it_has_no_fallback() {
        let lim = Limits {
            q35_max: None,
            nr_cpus: (512, "test".into()),
            kvm: None,
            kvm_max: Some(1024),
            host_mem: None,
        };
        let said = |accel: &str| {
            let y = format!("variants: [{{name: base}}]\nvcpus: [2]\nguest: {{accel: {accel}}}\nbenchmarks: [{{name: s, kind: doexec}}]\n");
            let m = crate::config::parse(&y, Path::new("/nonexistent/m.yaml"), None).unwrap();
            accel_check(&m, &lim).message
        };
        assert!(
            said("kvm").contains("no fallback: if KVM cannot start a guest here, every boot fails"),
            "{}",
            said("kvm")
        );
        assert!(said("auto").contains("falls back to TCG"), "{}", said("auto"));
    }

    /// Issue 47: past QEMU 10's 4096 the remedy is fewer vCPUs, not a
    /// newer QEMU; under QEMU 8.0's 288 it is QEMU >= 9.
    #[test]
    fn a_vcpu_count_past_qemus_limit_gets_the_remedy_that_helps() {
        let y = "variants:\n  - name: base\nvcpus: [2]\nbenchmarks:\n  - {name: s, kind: doexec}\n";
        let m = crate::config::parse(y, Path::new("/nonexistent/m.yaml"), None).unwrap();
        let said = |n: u32, max: u32, ver: &str| {
            let lim = Limits {
                q35_max: Some((max, ver.into())),
                nr_cpus: (u32::MAX, "test".into()),
                kvm: None,
                kvm_max: None,
                host_mem: None,
            };
            vcpu_checks(&m, n, &lim)
                .into_iter()
                .map(|i| i.message)
                .collect::<Vec<_>>()
                .join("\n")
        };
        assert!(
            said(100_000, 4096, "10.0").contains(
                "QEMU 10.0's q35 machine boots at most 4096 vCPUs; no QEMU release boots more there: ask for at most 4096 vCPUs"
            ),
            "{}",
            said(100_000, 4096, "10.0")
        );
        assert!(said(448, 288, "8.0").contains("boots at most 288 vCPUs; install QEMU >= 9 (bookworm-backports)"));
    }

    #[test]
    fn sampling_that_cannot_pass_bh_is_named_with_the_boots_needed() {
        // 2 comparisons (one variant, one metric, two vCPU counts)
        assert_eq!(comparison_count(&matrix(2, Some("p"))), 2);
        let two = sampling_power(&matrix(2, Some("p"))).unwrap();
        assert_eq!((two.level, two.what.as_str()), (Level::Warn, "sampling (profile p)"));
        assert!(
            two.message
                .contains("smallest two-sided p over boots is 0.333, so no cell can reach p < 0.05 at all"),
            "{}",
            two.message
        );
        assert!(two.message.contains("use at least 5 boots"), "{}", two.message);
        // 4 boots: p = 0.029 < 0.05, but 2 x 0.029 > 0.05
        let four = sampling_power(&matrix(4, Some("p"))).unwrap();
        assert!(
            four.level == Level::Warn && four.message.contains("only changes shared by several comparisons"),
            "{}",
            four.message
        );
        let five = sampling_power(&matrix(5, Some("p"))).unwrap();
        assert_eq!(five.level, Level::Ok, "{}", five.message);
        let top = sampling_power(&matrix(4, None)).unwrap();
        assert_eq!(
            (top.level, top.what.as_str()),
            (Level::Ok, "sampling (the matrix without a profile)")
        );
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
        assert_eq!(
            at(Some("quick")),
            (2, Level::Warn),
            "quick: 4 boots, documented in matrix.yaml and README"
        );
    }
}
