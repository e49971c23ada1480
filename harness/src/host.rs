//! Facts of the host the harness runs on: the QEMU binary and its version,
//! online CPUs, memory, the kernel release and hostname, the harness's own
//! git revision, and the memory of a KVM probe boot that failed here (so a
//! host whose KVM does not work is not probed again at every run). Read from
//! `/proc` and `qemu-system-x86_64 --version`; the only file written is the
//! probe's own.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use crate::proc::{self, Cmd};
use crate::workdir::WorkDir;

pub mod state;
pub mod topology;
pub mod wall;

/// The QEMU system emulator the harness boots guests with.
pub const QEMU: &str = "qemu-system-x86_64";

/// Where QEMU is installed, if it is.
pub fn find_qemu() -> Option<PathBuf> {
    proc::which(QEMU)
}

/// The QEMU binary, or what to install when there is none.
pub fn qemu_binary() -> Result<PathBuf> {
    find_qemu().context("find qemu-system-x86_64: run harness/scripts/setup-host.sh (QEMU 10 from bookworm-backports)")
}

/// The first line of `qemu --version` (`QEMU emulator version 10.0.2 …`),
/// empty when it does not run.
pub fn qemu_version(qemu: &Path) -> String {
    Cmd::new(qemu)
        .arg("--version")
        .capture()
        .run()
        .map(|f| f.output.lines().next().unwrap_or("").to_string())
        .unwrap_or_default()
}

/// Online host CPUs.
pub fn cpus() -> u32 {
    std::thread::available_parallelism()
        .map(|n| n.get() as u32)
        .unwrap_or(1)
}

/// A `/proc/meminfo` field (`MemTotal`, `MemAvailable`) in MiB.
fn meminfo_mib(field: &str) -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let kib: u64 = text.lines().find_map(|l| {
        l.strip_prefix(field)?
            .strip_prefix(':')?
            .split_whitespace()
            .next()?
            .parse()
            .ok()
    })?;
    Some(kib / 1024)
}

/// The host's memory in MiB (0 when /proc/meminfo does not say).
pub fn memory_total_mib() -> u64 {
    meminfo_mib("MemTotal").unwrap_or(0)
}

/// Memory available for new processes in MiB, if /proc/meminfo says: at
/// most what this process's memory cgroup (a Slurm job's `--mem`, a
/// container's limit) has left.
pub fn memory_available_mib() -> Option<u64> {
    let host = meminfo_mib("MemAvailable")?;
    let cgroup = std::fs::read_to_string("/proc/self/cgroup")
        .ok()
        .and_then(|c| cgroup_headroom_mib(&c, Path::new("/sys/fs/cgroup"), |p| std::fs::read_to_string(p).ok()));
    Some(cgroup.map_or(host, |c| c.min(host)))
}

/// What the memory cgroup named in `proc_self_cgroup` (the text of
/// `/proc/self/cgroup`) has left under its limit, in MiB, reading its files
/// under `root` through `read`: v2 (`0::/path`: `memory.max`,
/// `memory.current`) or v1 (`N:memory:/path`: `memory.limit_in_bytes`,
/// `memory.usage_in_bytes`), at the path or, inside a cgroup namespace, at
/// the mount's root. `None` without a limit.
pub fn cgroup_headroom_mib(proc_self_cgroup: &str, root: &Path, read: impl Fn(&Path) -> Option<String>) -> Option<u64> {
    let names = |v2: bool| {
        if v2 {
            ("memory.max", "memory.current")
        } else {
            ("memory.limit_in_bytes", "memory.usage_in_bytes")
        }
    };
    for (v2, dirs) in memory_cgroups(proc_self_cgroup, root) {
        let (limit, usage) = names(v2);
        for d in dirs {
            let Some(l) = read(&d.join(limit)) else { continue };
            // "max", or v1's "no limit" (a page-rounded i64::MAX)
            let l: u64 = l.trim().parse().ok().filter(|&b: &u64| b < 1 << 60)?;
            let used: u64 = read(&d.join(usage)).and_then(|u| u.trim().parse().ok()).unwrap_or(0);
            return Some(l.saturating_sub(used) / (1024 * 1024));
        }
    }
    None
}

/// The memory cgroups `proc_self_cgroup` (the text of `/proc/self/cgroup`)
/// names, each as whether it is v2 (`0::/path`; else v1's
/// `N:memory:/path`) and the directories under `root` to look in: the
/// path, then (inside a cgroup namespace) the mount's root.
fn memory_cgroups(proc_self_cgroup: &str, root: &Path) -> Vec<(bool, [PathBuf; 2])> {
    proc_self_cgroup
        .lines()
        .filter_map(|line| {
            let mut f = line.splitn(3, ':');
            let (_, controllers, path) = (f.next()?, f.next()?, f.next()?);
            let (v2, dir) = match controllers {
                "" => (true, root.to_path_buf()),
                c if c.split(',').any(|x| x == "memory") => (false, root.join("memory")),
                _ => return None,
            };
            Some((v2, [dir.join(path.trim_start_matches('/')), dir]))
        })
        .collect()
}

/// The out-of-memory killer's counts: host-wide (`oom_kill` of
/// `/proc/vmstat`) and in this process's memory cgroup, which a build's
/// make inherits (v2 `memory.events`, v1 `memory.oom_control`), each
/// `None` where the kernel does not say.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct OomKills {
    /// `/proc/vmstat`'s `oom_kill`.
    pub host: Option<u64>,
    /// The memory cgroup's `oom_kill`.
    pub cgroup: Option<u64>,
}

impl OomKills {
    /// The counts now.
    pub fn now() -> OomKills {
        let read = |p: &Path| std::fs::read_to_string(p).ok();
        let cgroup =
            read(Path::new("/proc/self/cgroup")).and_then(|c| cgroup_oom_kills(&c, Path::new("/sys/fs/cgroup"), read));
        OomKills {
            host: read(Path::new("/proc/vmstat")).and_then(|t| oom_kill_field(&t)),
            cgroup,
        }
    }

    /// What the killer did since `before`, in words; `None` when neither
    /// count rose.
    pub fn since(self, before: OomKills) -> Option<String> {
        let rose = |a: Option<u64>, b: Option<u64>| match (a, b) {
            (Some(a), Some(b)) if b > a => Some(b - a),
            _ => None,
        };
        let (c, h) = (rose(before.cgroup, self.cgroup), rose(before.host, self.host));
        let (n, where_) = match (c, h) {
            (Some(n), _) => (n, "in this process's memory cgroup"),
            (None, Some(n)) => (n, "on the host (/proc/vmstat)"),
            (None, None) => return None,
        };
        Some(format!(
            "the out-of-memory killer killed {n} process(es) {where_} while it ran"
        ))
    }
}

/// The `oom_kill N` line of a `/proc/vmstat`, `memory.events` or
/// `memory.oom_control` text.
fn oom_kill_field(text: &str) -> Option<u64> {
    text.lines()
        .find_map(|l| l.strip_prefix("oom_kill "))
        .and_then(|n| n.trim().parse().ok())
}

/// The `oom_kill` count of the memory cgroup named in `proc_self_cgroup`,
/// read under `root` as [`cgroup_headroom_mib`] finds it.
pub fn cgroup_oom_kills(proc_self_cgroup: &str, root: &Path, read: impl Fn(&Path) -> Option<String>) -> Option<u64> {
    memory_cgroups(proc_self_cgroup, root)
        .into_iter()
        .find_map(|(v2, dirs)| {
            let file = if v2 { "memory.events" } else { "memory.oom_control" };
            dirs.iter()
                .find_map(|d| read(&d.join(file)).and_then(|t| oom_kill_field(&t)))
        })
}

/// Host memory (MiB) one guest of `guest_mib` and `vcpus` takes: its own
/// memory, 1 GiB for QEMU (its TCG translation cache) and the harness, and
/// 10 MiB per vCPU of QEMU's per-CPU state (4.4 GB RSS at 448 vCPUs). What
/// `check` estimates, what a Slurm shard job asks for and what decides how
/// many icount boots run at once.
pub fn guest_need_mib(guest_mib: u64, vcpus: u32) -> u64 {
    guest_mib + 1024 + 10 * u64::from(vcpus)
}

fn proc_line(p: &str) -> String {
    std::fs::read_to_string(p).unwrap_or_default().trim().to_string()
}

/// The host's name.
pub fn hostname() -> String {
    proc_line("/proc/sys/kernel/hostname")
}

/// The host kernel's release.
pub fn kernel_release() -> String {
    proc_line("/proc/sys/kernel/osrelease")
}

/// The short git revision of the harness's own source, when it was built
/// from a git checkout that is still there.
pub fn harness_revision() -> Option<String> {
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    Cmd::new("git")
        .arg("-C")
        .arg(here)
        .args(["rev-parse", "--short", "HEAD"])
        .capture()
        .run()
        .ok()
        .filter(|f| f.success())
        .map(|f| f.output.trim().to_string())
}

pub use crate::vocab::Host;

impl Host {
    /// This host's facts, with the version of the QEMU at `qemu`.
    pub fn here(qemu: &Path) -> Host {
        Host {
            hostname: hostname(),
            cpus: cpus(),
            memory_mib: memory_total_mib(),
            kernel: kernel_release(),
            qemu: qemu_version(qemu),
            state: Some(state::HostState::here(&[])),
        }
    }
}

/// How long a failed KVM probe is remembered: a day, so a probe that failed
/// for a passing reason (a slow boot beside a `make -j`) does not send every
/// later run to TCG.
pub const PROBE_MEMORY: std::time::Duration = std::time::Duration::from_secs(24 * 3600);

/// A KVM probe boot that failed on a host, remembered in the work
/// directory until the host kernel or QEMU changes, or [`PROBE_MEMORY`]
/// passes.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FailedProbe {
    /// The host, its kernel and QEMU version it failed with ([`probe_key`]).
    pub key: String,
    /// When (RFC 3339).
    pub when: String,
    /// Why the probe boot failed.
    pub reason: String,
    /// When, in seconds since the epoch (none in a file written before it
    /// was recorded: such a failure is forgotten).
    #[serde(default)]
    pub at_s: Option<u64>,
}

impl FailedProbe {
    /// Whether the failure still holds at `now_s`: recorded less than
    /// [`PROBE_MEMORY`] ago (a time ahead of the clock, a skew, holds not).
    pub fn holds_at(&self, now_s: u64) -> bool {
        self.at_s
            .is_some_and(|at| at <= now_s && now_s - at < PROBE_MEMORY.as_secs())
    }
}

/// Seconds since the epoch.
fn now_s() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// The 1-minute load average per online CPU (`/proc/loadavg`), if known.
pub fn load_per_cpu() -> Option<f64> {
    let text = std::fs::read_to_string("/proc/loadavg").ok()?;
    let load: f64 = text.split_whitespace().next()?.parse().ok()?;
    Some(load / f64::from(cpus().max(1)))
}

/// `work/kvm-probe/<hash of key>.json`: the failed KVM probe of one host,
/// host kernel and QEMU ([`probe_key`]); a work directory shared by several
/// hosts holds one file per host, so no host rewrites another's.
pub fn probe_path(work: &WorkDir, key: &str) -> PathBuf {
    use sha2::Digest;
    work.kvm_probe_record(&crate::util::hex(&sha2::Sha256::digest(key.as_bytes())[..8]))
}

/// Host name, host kernel and QEMU version: a failed probe holds for its
/// host until either of the others changes.
pub fn probe_key(qemu: &Path) -> String {
    format!("{} / {} / {}", hostname(), kernel_release(), qemu_version(qemu))
}

/// The failed probe remembered in `work` for `key`, if any still holds
/// ([`FailedProbe::holds_at`]).
pub fn failed_probe(work: &WorkDir, key: &str) -> Option<FailedProbe> {
    let p: FailedProbe = serde_json::from_slice(&std::fs::read(probe_path(work, key)).ok()?).ok()?;
    (p.key == key && p.holds_at(now_s())).then_some(p)
}

/// Remembers a probe boot that failed on KVM's account for `key` (written
/// whole: a temporary file of this process and thread renamed into place).
pub fn remember_failed_probe(work: &WorkDir, key: &str, reason: &str) -> Result<()> {
    let p = FailedProbe {
        key: key.to_string(),
        when: crate::util::now_rfc3339(),
        reason: reason.to_string(),
        at_s: Some(now_s()),
    };
    let path = probe_path(work, key);
    let dir = path.parent().unwrap_or(work.root());
    std::fs::create_dir_all(dir).with_context(|| format!("create {}", dir.display()))?;
    crate::util::write_whole(&path, &serde_json::to_vec_pretty(&p)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A cgroup's limit caps the memory available; no limit, none.
    #[test]
    fn the_memory_cgroup_caps_what_is_available() {
        let gib = 1u64 << 30;
        let files = |m: Vec<(&'static str, String)>| {
            move |p: &Path| m.iter().find(|(k, _)| Path::new(k) == p).map(|(_, v)| v.clone())
        };
        let root = Path::new("/cg");
        let v2 = files(vec![
            ("/cg/job/memory.max", format!("{}\n", 8 * gib)),
            ("/cg/job/memory.current", format!("{}\n", 2 * gib)),
        ]);
        assert_eq!(cgroup_headroom_mib("0::/job\n", root, v2), Some(6 * 1024));
        let v2max = files(vec![("/cg/job/memory.max", "max\n".into())]);
        assert_eq!(cgroup_headroom_mib("0::/job\n", root, v2max), None);
        // v1, in a cgroup namespace: the named path is not there, the mount's root is
        let v1 = files(vec![
            ("/cg/memory/memory.limit_in_bytes", format!("{}", 4 * gib)),
            ("/cg/memory/memory.usage_in_bytes", format!("{}", gib)),
        ]);
        assert_eq!(
            cgroup_headroom_mib("4:memory:/slurm/uid_0/job_7\n1:cpu:/\n0::/\n", root, v1),
            Some(3 * 1024)
        );
        let v1none = files(vec![("/cg/memory/memory.limit_in_bytes", "9223372036854771712".into())]);
        assert_eq!(cgroup_headroom_mib("4:memory:/x\n", root, v1none), None);
        assert_eq!(cgroup_headroom_mib("", root, |_| None), None);
    }

    /// The OOM killer's counts: v2 `memory.events`, v1 `memory.oom_control`
    /// (at the path or the mount's root), and what a rise says.
    #[test]
    fn the_oom_killers_counts_are_read_and_a_rise_is_told() {
        let files = |m: Vec<(&'static str, &'static str)>| {
            move |p: &Path| m.iter().find(|(k, _)| Path::new(k) == p).map(|(_, v)| v.to_string())
        };
        let root = Path::new("/cg");
        let v2 = files(vec![(
            "/cg/job/memory.events",
            "low 0\nhigh 0\nmax 3\noom 1\noom_kill 2\n",
        )]);
        assert_eq!(cgroup_oom_kills("0::/job\n", root, v2), Some(2));
        let v1 = files(vec![(
            "/cg/memory/memory.oom_control",
            "oom_kill_disable 0\nunder_oom 0\noom_kill 5\n",
        )]);
        assert_eq!(cgroup_oom_kills("4:memory:/gone\n0::/\n", root, v1), Some(5));
        assert_eq!(cgroup_oom_kills("1:cpu:/\n", root, |_| None), None);
        assert_eq!(oom_kill_field("pgfault 9\noom_kill 7\n"), Some(7));
        let at = |host, cgroup| OomKills { host, cgroup };
        assert_eq!(at(Some(4), Some(1)).since(at(Some(4), Some(1))), None);
        assert_eq!(
            at(Some(4), Some(2)).since(at(Some(3), Some(1))).unwrap(),
            "the out-of-memory killer killed 1 process(es) in this process's memory cgroup while it ran"
        );
        assert_eq!(
            at(Some(6), None).since(at(Some(4), None)).unwrap(),
            "the out-of-memory killer killed 2 process(es) on the host (/proc/vmstat) while it ran"
        );
        assert_eq!(at(None, None).since(at(None, None)), None);
        assert!(OomKills::now().host.is_some(), "this host's /proc/vmstat has oom_kill");
    }

    #[test]
    fn meminfo_fields_are_read_in_mib() {
        let total = memory_total_mib();
        assert!(total > 0);
        assert!(memory_available_mib().is_some_and(|a| a <= total));
        assert_eq!(meminfo_mib("NoSuchField"), None);
    }

    #[test]
    fn a_failed_probe_holds_for_its_key_only() {
        let work = tempfile::tempdir().unwrap();
        assert!(failed_probe(&WorkDir::at(work.path()), "6.1 / QEMU 10").is_none());
        remember_failed_probe(&WorkDir::at(work.path()), "6.1 / QEMU 10", "kvm: entry failed").unwrap();
        let p = failed_probe(&WorkDir::at(work.path()), "6.1 / QEMU 10").unwrap();
        assert_eq!(p.reason, "kvm: entry failed");
        assert!(failed_probe(&WorkDir::at(work.path()), "6.2 / QEMU 10").is_none());
    }

    /// Issue 30: a failed probe is forgotten after a day (and one whose time
    /// is ahead of the clock, or not recorded, holds not): it used to be
    /// remembered forever.
    #[test]
    fn a_failed_probe_expires_after_a_day() {
        let work = tempfile::tempdir().unwrap();
        let key = "lab / 6.1 / QEMU 10";
        remember_failed_probe(&WorkDir::at(work.path()), key, "no console output").unwrap();
        let p = failed_probe(&WorkDir::at(work.path()), key).expect("fresh");
        let at = p.at_s.unwrap();
        assert!(p.holds_at(at + 23 * 3600));
        assert!(!p.holds_at(at + 24 * 3600), "a day old");
        assert!(!p.holds_at(at - 60), "ahead of the clock");
        let rewrite = |at_s: Option<u64>| {
            let old = FailedProbe { at_s, ..p.clone() };
            std::fs::write(
                probe_path(&WorkDir::at(work.path()), key),
                serde_json::to_vec(&old).unwrap(),
            )
            .unwrap();
        };
        rewrite(Some(at - 2 * 24 * 3600));
        assert!(failed_probe(&WorkDir::at(work.path()), key).is_none(), "two days old");
        rewrite(None);
        assert!(
            failed_probe(&WorkDir::at(work.path()), key).is_none(),
            "a file without its time"
        );
        rewrite(Some(at));
        assert!(failed_probe(&WorkDir::at(work.path()), key).is_some());
    }

    /// Hosts sharing a work directory remember their probes at once: each
    /// host's file is its own, so none loses another's.
    #[test]
    fn hosts_remembering_at_once_lose_nothing() {
        let work = tempfile::tempdir().unwrap();
        let keys: Vec<String> = (0..16).map(|i| format!("lab{i} / 6.1 / QEMU 10")).collect();
        let start = std::sync::Barrier::new(keys.len());
        std::thread::scope(|s| {
            for k in &keys {
                let (start, w) = (&start, work.path());
                s.spawn(move || {
                    start.wait();
                    remember_failed_probe(&WorkDir::at(w), k, "kvm: entry failed").unwrap();
                });
            }
        });
        let lost: Vec<&String> = keys
            .iter()
            .filter(|k| failed_probe(&WorkDir::at(work.path()), k).is_none())
            .collect();
        assert!(lost.is_empty(), "lost {lost:?}");
        assert_ne!(
            probe_path(&WorkDir::at(work.path()), &keys[0]),
            probe_path(&WorkDir::at(work.path()), &keys[1])
        );
    }

    #[test]
    fn failed_probes_are_remembered_per_host() {
        assert!(
            probe_key(Path::new("/nonexistent/qemu")).starts_with(&hostname()),
            "the key names the host"
        );
        // one work directory on a shared file system, two hosts
        let work = tempfile::tempdir().unwrap();
        remember_failed_probe(&WorkDir::at(work.path()), "lab1 / 6.1 / QEMU 10", "kvm: entry failed").unwrap();
        remember_failed_probe(&WorkDir::at(work.path()), "lab2 / 6.1 / QEMU 10", "KVM internal error").unwrap();
        assert_eq!(
            failed_probe(&WorkDir::at(work.path()), "lab1 / 6.1 / QEMU 10")
                .map(|p| p.reason)
                .as_deref(),
            Some("kvm: entry failed")
        );
        assert_eq!(
            failed_probe(&WorkDir::at(work.path()), "lab2 / 6.1 / QEMU 10")
                .map(|p| p.reason)
                .as_deref(),
            Some("KVM internal error")
        );
    }
}
