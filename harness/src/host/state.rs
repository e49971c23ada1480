//! The host's state as far as it moves wall-clock numbers, the way pyperf's
//! `system show` and mmtests' monitors read it: the CPU frequency governor,
//! boost/turbo, SMT, transparent huge pages, the load average and other
//! QEMU or harness processes, free memory per NUMA node (and huge pages),
//! and the IRQs that may fire on the CPUs a run measures on. Read from
//! `/proc` and `/sys` under a root directory (fixture trees in tests);
//! [`findings`] says what each costs and the command that fixes it. The
//! harness changes nothing on the host.

use std::path::Path;

use serde::Serialize;

use super::topology::{format_list, parse_list, Topology};

pub use crate::vocab::HostState;

fn read(root: &Path, rel: &str) -> Option<String> {
    std::fs::read_to_string(root.join(rel))
        .ok()
        .map(|s| s.trim().to_string())
}

impl HostState {
    /// The state under `root` (`/` here), the IRQs counted on `measured`
    /// (all online CPUs when empty); `me` is this process, left out of
    /// the others.
    pub fn read(root: &Path, measured: &[u32], me: u32) -> HostState {
        let t = Topology::read(root).ok();
        let online: Vec<u32> = t.as_ref().map_or(Vec::new(), |t| t.cpus.iter().map(|c| c.id).collect());
        let measured = if measured.is_empty() {
            online.clone()
        } else {
            measured.to_vec()
        };
        let mut governors: Vec<String> = online
            .iter()
            .filter_map(|c| read(root, &format!("sys/devices/system/cpu/cpu{c}/cpufreq/scaling_governor")))
            .collect();
        governors.sort();
        governors.dedup();
        let boost = read(root, "sys/devices/system/cpu/cpufreq/boost")
            .map(|b| b == "1")
            .or_else(|| read(root, "sys/devices/system/cpu/intel_pstate/no_turbo").map(|n| n == "0"));
        HostState {
            topology: t.as_ref().map(Topology::describe).unwrap_or_default(),
            governors,
            boost,
            smt: read(root, "sys/devices/system/cpu/smt/control"),
            thp: read(root, "sys/kernel/mm/transparent_hugepage/enabled").and_then(|s| chosen(&s)),
            load: read(root, "proc/loadavg").and_then(|l| l.split_whitespace().next()?.parse().ok()),
            others: other_processes(root, me),
            node_free_mib: node_free(root),
            hugepages_free_mib: hugepages_free(root),
            measured: format_list(&measured),
            irqs_on_measured: irqs_on(root, &measured),
            hypervisor: read(root, "proc/cpuinfo").and_then(|c| hypervisor_flag(&c)),
        }
    }

    /// This host's state, the IRQs counted on `measured`.
    pub fn here(measured: &[u32]) -> HostState {
        HostState::read(Path::new("/"), measured, std::process::id())
    }

    /// The settings that stay put between runs (not load, free memory or
    /// processes), for telling two runs' hosts apart.
    pub fn settings(&self) -> Vec<(&'static str, String)> {
        let opt = |o: &Option<String>| o.clone().unwrap_or_else(|| "unknown".into());
        vec![
            ("topology", self.topology.clone()),
            (
                "governor",
                if self.governors.is_empty() {
                    "none".into()
                } else {
                    self.governors.join("+")
                },
            ),
            (
                "boost",
                self.boost
                    .map_or("unknown".into(), |b| if b { "on" } else { "off" }.to_string()),
            ),
            ("SMT", opt(&self.smt)),
            ("THP", opt(&self.thp)),
        ]
    }
}

/// Whether the first `flags` line of `/proc/cpuinfo` text has
/// `hypervisor` (None without a flags line).
fn hypervisor_flag(cpuinfo: &str) -> Option<bool> {
    let flags = cpuinfo.lines().find(|l| l.starts_with("flags"))?;
    Some(flags.split_whitespace().any(|w| w == "hypervisor"))
}

/// The bracketed word of `always [madvise] never`.
fn chosen(s: &str) -> Option<String> {
    Some(s.split('[').nth(1)?.split(']').next()?.to_string())
}

fn other_processes(root: &Path, me: u32) -> Vec<String> {
    let Ok(dir) = std::fs::read_dir(root.join("proc")) else {
        return Vec::new();
    };
    let mut out: Vec<(u32, String)> = dir
        .flatten()
        .filter_map(|e| {
            let pid: u32 = e.file_name().to_str()?.parse().ok()?;
            let comm = read(root, &format!("proc/{pid}/comm"))?;
            (pid != me && (comm.starts_with("qemu-system") || comm == "harness")).then_some((pid, comm))
        })
        .collect();
    out.sort();
    out.into_iter().map(|(pid, comm)| format!("{comm} {pid}")).collect()
}

fn node_free(root: &Path) -> Vec<(u32, u64)> {
    let Some(nodes) = read(root, "sys/devices/system/node/online").and_then(|l| parse_list(&l)) else {
        return Vec::new();
    };
    let free = |n: u32| {
        let m = read(root, &format!("sys/devices/system/node/node{n}/meminfo"))?;
        let kib: u64 = m
            .lines()
            .find(|l| l.contains("MemFree:"))?
            .split_whitespace()
            .nth(3)?
            .parse()
            .ok()?;
        Some((n, kib / 1024))
    };
    nodes.into_iter().filter_map(free).collect()
}

fn hugepages_free(root: &Path) -> Option<u64> {
    let m = read(root, "proc/meminfo")?;
    let field = |name: &str| -> Option<u64> {
        m.lines()
            .find_map(|l| l.strip_prefix(name)?.split_whitespace().next()?.parse().ok())
    };
    Some(field("HugePages_Free:")? * field("Hugepagesize:")? / 1024)
}

fn irqs_on(root: &Path, measured: &[u32]) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir(root.join("proc/irq")) else {
        return Vec::new();
    };
    let mut out: Vec<u32> = dir
        .flatten()
        .filter_map(|e| {
            let irq: u32 = e.file_name().to_str()?.parse().ok()?;
            let cpus = parse_list(&read(root, &format!("proc/irq/{irq}/smp_affinity_list"))?)?;
            cpus.iter().any(|c| measured.contains(c)).then_some(irq)
        })
        .collect();
    out.sort_unstable();
    out
}

/// One thing about the host that moves wall-clock numbers.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Finding {
    /// What it is about (`governor`, `boost`, …).
    pub what: &'static str,
    /// Whether it costs a wall-clock run anything.
    pub warn: bool,
    /// What the host has, and what that costs.
    pub message: String,
    /// The command that fixes it (run by the maintainer, as root).
    pub fix: Option<String>,
}

fn finding(what: &'static str, message: String, fix: Option<String>) -> Finding {
    Finding {
        what,
        warn: fix.is_some(),
        message,
        fix,
    }
}

/// What the state costs a wall-clock run on `cpus` host CPUs, each with its
/// fix; a setting that costs nothing is an item without one. `need_mib`:
/// the memory a guest asks of huge pages (`guest.hugepages`), if it does.
pub fn findings(s: &HostState, cpus: usize, need_mib: Option<u64>) -> Vec<Finding> {
    let mut f = Vec::new();
    let gov = s.governors.join(", ");
    f.push(match gov.as_str() {
        "" => finding("governor", "no cpufreq here (a VM, or a fixed-frequency host): nothing to set".into(), None),
        "performance" => finding("governor", "performance on every CPU".into(), None),
        _ => finding(
            "governor",
            format!("{gov}: the frequency follows the load, so a short benchmark and a long one run at different clocks (pyperf measures up to 2x on ramp-up)"),
            Some("cpupower frequency-set -g performance".into()),
        ),
    });
    f.push(match s.boost {
        Some(true) => finding(
            "boost",
            "on: the clock rises with temperature and with how many cores are busy, so 2 and 26 vCPUs run at different frequencies".into(),
            Some("echo 0 > /sys/devices/system/cpu/cpufreq/boost (intel_pstate: echo 1 > /sys/devices/system/cpu/intel_pstate/no_turbo)".into()),
        ),
        Some(false) => finding("boost", "off".into(), None),
        None => finding("boost", "not reported (no cpufreq boost control)".into(), None),
    });
    f.push(match s.smt.as_deref() {
        Some("on") => finding(
            "SMT",
            "on: a vCPU on a core's sibling shares its caches and pipeline with another (guest.pin: cores keeps one vCPU per core while cores last; record SMT with the numbers)".into(),
            None,
        ),
        Some(x) => finding("SMT", x.to_string(), None),
        None => finding("SMT", "not reported".into(), None),
    });
    f.push(match s.thp.as_deref() {
        Some("always") => finding(
            "THP",
            "always: khugepaged collapses guest memory in the background at times of its own, and page faults vary with what it did".into(),
            Some("echo madvise > /sys/kernel/mm/transparent_hugepage/enabled".into()),
        ),
        Some(x) => finding("THP", x.to_string(), None),
        None => finding("THP", "not reported".into(), None),
    });
    f.extend(s.hypervisor.map(|vm| {
        let what = if vm {
            "a virtual machine (its CPUs carry the hypervisor flag): KVM guests here are nested, their wall clock is not a bare-metal host's"
        } else {
            "bare metal (no hypervisor flag)"
        };
        finding("virtualisation", what.into(), None)
    }));
    f.extend(load_findings(s, cpus));
    f.extend(memory_findings(s, need_mib));
    f
}

/// The notice a run under KVM gives on a host that is itself a virtual
/// machine: its numbers are a nested guest's.
pub fn nested_kvm_notice(s: &HostState) -> Option<String> {
    (s.hypervisor == Some(true)).then(|| {
        "KVM here is nested: this host is itself a virtual machine (its CPUs carry the hypervisor flag), \
         so each guest runs under two hypervisors and its wall clock is not a bare-metal host's; \
         compare these numbers only with runs on this host"
            .to_string()
    })
}

fn load_findings(s: &HostState, cpus: usize) -> Vec<Finding> {
    let mut f = Vec::new();
    let load = s.load.unwrap_or(0.0);
    if load > 0.1 * cpus as f64 {
        f.push(finding(
            "load",
            format!("{load:.2} on {cpus} CPUs: other work takes the cores the vCPUs run on and adds its noise to every boot"),
            Some("uptime; top -b -n 1 | head -20  (stop what runs, then measure)".into()),
        ));
    } else {
        f.push(finding("load", format!("{load:.2} on {cpus} CPUs"), None));
    }
    if !s.others.is_empty() {
        let pids: Vec<&str> = s.others.iter().filter_map(|o| o.rsplit(' ').next()).collect();
        f.push(finding(
            "processes",
            format!(
                "other QEMU or harness processes run: {}; they share the host's cores and memory bandwidth",
                s.others.join(", ")
            ),
            Some(format!(
                "ps -o pid,etime,args -p {}  (wait for them, or stop them)",
                pids.join(",")
            )),
        ));
    }
    if !s.irqs_on_measured.is_empty() {
        let n = s.irqs_on_measured.len();
        let first: Vec<String> = s.irqs_on_measured.iter().take(8).map(|i| i.to_string()).collect();
        f.push(finding(
            "IRQs",
            format!("{n} IRQ(s) may fire on the measured CPUs {} ({}{}): an interrupt stalls the vCPU it lands on", s.measured, first.join(", "), if n > 8 { ", …" } else { "" }),
            Some("systemctl stop irqbalance; for i in /proc/irq/[0-9]*; do echo <CPUs no vCPU uses> > $i/smp_affinity_list; done".into()),
        ));
    }
    f
}

fn memory_findings(s: &HostState, need_mib: Option<u64>) -> Vec<Finding> {
    let mut f = Vec::new();
    if !s.node_free_mib.is_empty() {
        let per: Vec<String> = s
            .node_free_mib
            .iter()
            .map(|(n, m)| format!("node {n}: {m} MiB"))
            .collect();
        f.push(finding("memory", format!("free per node: {}", per.join(", ")), None));
    }
    if let Some(need) = need_mib {
        let free = s.hugepages_free_mib.unwrap_or(0);
        if free < need {
            f.push(finding(
                "hugepages",
                format!("guest.hugepages asks {need} MiB of huge pages, {free} MiB are free: QEMU fails to start"),
                Some(format!(
                    "echo {} > /proc/sys/vm/nr_hugepages  (2 MiB pages)",
                    need.div_ceil(2)
                )),
            ));
        }
    }
    f
}

#[cfg(test)]
mod tests;
