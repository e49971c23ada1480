//! The host's CPU topology from sysfs (packages, cores, SMT siblings, NUMA
//! nodes, online CPUs) and the placement of a guest on it: a host CPU per
//! vCPU, a host node per guest node, the CPUs left for QEMU's other
//! threads. Reading takes a root directory, so tests read fixture trees;
//! [`place`] is pure.
//!
//! The placement rule: the guest's sockets (or its NUMA nodes, when it has
//! them) are spread evenly over the host's nodes; each takes its vCPUs from
//! its own host node first, then from the nodes after it. Under
//! [`Pin::Cores`] a vCPU gets a physical core of its own while the host has
//! a core for every vCPU; with fewer, each node gives its cores and then
//! their SMT siblings, so a guest node stays on its host node. Under
//! [`Pin::Threads`] vCPUs fill cores thread by thread, so a guest's SMT
//! pair lands on a host core's pair. A guest with more vCPUs than the host
//! has CPUs is not pinned at all (overcommitted: pinning would tie vCPUs
//! that wait on each other to one CPU, and only the host scheduler can
//! share the CPUs among them); the placement says so. QEMU's other threads
//! get the cores no vCPU uses, else the CPUs no vCPU uses, else all.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use crate::config::Pin;

/// One online host CPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostCpu {
    /// Its number (`cpuN`).
    pub id: u32,
    /// `physical_package_id`.
    pub package: u32,
    /// The core: the least CPU number among its SMT siblings.
    pub core: u32,
    /// Its NUMA node (0 on a host without NUMA).
    pub node: u32,
}

/// The online CPUs of a host, in CPU number order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Topology {
    /// Online CPUs (those this process may use, for [`Topology::here`]).
    pub cpus: Vec<HostCpu>,
    /// Whether the host kernel has NUMA nodes in sysfs (memory can be bound).
    pub numa: bool,
}

/// A CPU list as sysfs writes it (`0-3,8,10-11`).
pub fn parse_list(s: &str) -> Option<Vec<u32>> {
    let mut out = Vec::new();
    for part in s.trim().split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => out.extend(a.trim().parse::<u32>().ok()?..=b.trim().parse::<u32>().ok()?),
            None => out.push(part.trim().parse().ok()?),
        }
    }
    Some(out)
}

/// A CPU list in sysfs's form, ranges joined (`0-3,8`).
pub fn format_list(cpus: &[u32]) -> String {
    let mut v = cpus.to_vec();
    v.sort_unstable();
    v.dedup();
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while i < v.len() {
        let mut j = i;
        while j + 1 < v.len() && v[j + 1] == v[j] + 1 {
            j += 1;
        }
        parts.push(if i == j {
            v[i].to_string()
        } else {
            format!("{}-{}", v[i], v[j])
        });
        i = j + 1;
    }
    parts.join(",")
}

fn read_list(p: &Path) -> Result<Vec<u32>> {
    let text = std::fs::read_to_string(p).with_context(|| format!("read {}", p.display()))?;
    parse_list(&text).with_context(|| format!("{}: not a CPU list", p.display()))
}

fn read_u32(p: &Path) -> Result<u32> {
    let text = std::fs::read_to_string(p).with_context(|| format!("read {}", p.display()))?;
    text.trim()
        .parse()
        .with_context(|| format!("{}: not a number", p.display()))
}

impl Topology {
    /// The topology under `root` (`/` on a real host): `sys/devices/system/cpu`
    /// and `sys/devices/system/node`.
    pub fn read(root: &Path) -> Result<Topology> {
        let cpu_dir = root.join("sys/devices/system/cpu");
        let node_dir = root.join("sys/devices/system/node");
        let mut node_of = BTreeMap::new();
        let numa = node_dir.join("online").exists();
        if numa {
            for n in read_list(&node_dir.join("online"))? {
                for c in read_list(&node_dir.join(format!("node{n}/cpulist")))? {
                    node_of.insert(c, n);
                }
            }
        }
        let mut cpus = Vec::new();
        for id in read_list(&cpu_dir.join("online"))? {
            let t = cpu_dir.join(format!("cpu{id}/topology"));
            let siblings = read_list(&t.join("thread_siblings_list"))?;
            cpus.push(HostCpu {
                id,
                package: read_u32(&t.join("physical_package_id"))?,
                core: siblings.iter().copied().min().unwrap_or(id),
                node: node_of.get(&id).copied().unwrap_or(0),
            });
        }
        Ok(Topology { cpus, numa })
    }

    /// This host's topology, limited to the CPUs this process may run on
    /// (a Slurm job's or a container's cpuset); `None` when sysfs says
    /// nothing usable.
    pub fn here() -> Option<Topology> {
        let mut t = Topology::read(Path::new("/")).ok()?;
        if let Some(allowed) = allowed_cpus() {
            t.cpus.retain(|c| allowed.contains(&c.id));
        }
        (!t.cpus.is_empty()).then_some(t)
    }

    /// Physical cores (SMT siblings counted once).
    pub fn cores(&self) -> usize {
        self.cpus.iter().map(|c| c.core).collect::<BTreeSet<_>>().len()
    }

    /// NUMA nodes with online CPUs.
    pub fn nodes(&self) -> Vec<u32> {
        self.cpus
            .iter()
            .map(|c| c.node)
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect()
    }

    /// Packages (sockets).
    pub fn packages(&self) -> usize {
        self.cpus.iter().map(|c| c.package).collect::<BTreeSet<_>>().len()
    }

    /// `2 packages, 128 cores, 256 CPUs, 2 nodes`.
    pub fn describe(&self) -> String {
        format!(
            "{} package(s), {} core(s), {} CPU(s), {} node(s)",
            self.packages(),
            self.cores(),
            self.cpus.len(),
            self.nodes().len()
        )
    }
}

/// The CPUs this process may run on (`sched_getaffinity`).
pub fn allowed_cpus() -> Option<BTreeSet<u32>> {
    // SAFETY: cpu_set_t is plain data; sched_getaffinity fills it for this process.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return None;
        }
        Some(
            (0..libc::CPU_SETSIZE as usize)
                .filter(|&c| libc::CPU_ISSET(c, &set))
                .map(|c| c as u32)
                .collect(),
        )
    }
}

/// A guest's shape, as `vm.rs` builds it: `-smp` sockets and threads, and
/// `-numa` nodes holding contiguous vCPU ranges.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GuestShape {
    /// vCPUs.
    pub vcpus: u32,
    /// Sockets.
    pub sockets: u32,
    /// NUMA nodes (0: none).
    pub numa_nodes: u32,
}

/// Where a guest runs on the host.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Placement {
    /// The mode asked for.
    pub pin: Pin,
    /// The host CPU of each vCPU (index: the vCPU); empty when not pinned.
    pub vcpu_cpus: Vec<u32>,
    /// The host node guest node N's memory is bound to (index: N); empty
    /// without guest nodes, without host NUMA, or when not pinned.
    pub guest_nodes: Vec<u32>,
    /// The CPUs for QEMU's other threads (I/O, RCU, the main loop): cores
    /// no vCPU uses, else CPUs no vCPU uses, else all of them.
    pub others: Vec<u32>,
    /// The vCPUs exceed the host's CPUs.
    pub overcommitted: bool,
    /// What the placement could not do, in words.
    pub note: Option<String>,
}

impl Placement {
    /// Whether any vCPU is pinned.
    pub fn pinned(&self) -> bool {
        !self.vcpu_cpus.is_empty()
    }
}

/// The host CPU of every vCPU, the host node of every guest node and the
/// CPUs left for QEMU's other threads (the rule in the module's doc).
pub fn place(t: &Topology, g: GuestShape, pin: Pin) -> Placement {
    let mut p = Placement {
        pin,
        vcpu_cpus: Vec::new(),
        guest_nodes: Vec::new(),
        others: Vec::new(),
        overcommitted: g.vcpus as usize > t.cpus.len(),
        note: None,
    };
    if pin == Pin::None || g.vcpus == 0 {
        return p;
    }
    if p.overcommitted {
        p.note = Some(format!(
            "{} vCPUs on {} host CPUs: overcommitted, not pinned (the host scheduler shares the CPUs)",
            g.vcpus,
            t.cpus.len()
        ));
        return p;
    }
    let nodes = t.nodes();
    let units = if g.numa_nodes > 0 {
        g.numa_nodes
    } else {
        g.sockets.max(1)
    };
    let per_unit = g.vcpus.div_ceil(units);
    let mut used = BTreeSet::new();
    for u in 0..units {
        let first = (u as usize * nodes.len()) / units as usize;
        let order = preference(t, &nodes, first, pin, g.vcpus);
        let n = per_unit.min(g.vcpus - u * per_unit);
        let mut got = Vec::new();
        for &cpu in order.iter().filter(|c| !used.contains(*c)).take(n as usize) {
            got.push(cpu);
        }
        used.extend(got.iter().copied());
        if g.numa_nodes > 0 && t.numa {
            p.guest_nodes.push(majority_node(t, &got).unwrap_or(nodes[first]));
        }
        p.vcpu_cpus.extend(got);
    }
    p.others = others(t, &used);
    if p.others.len() == t.cpus.len() && !used.is_empty() {
        p.note = Some("no host CPU left for QEMU's other threads: they share the vCPUs' CPUs".into());
    }
    p
}

/// The CPUs a guest unit whose own node is `nodes[first]` takes, best
/// first: its node, then the nodes after it. Under [`Pin::Cores`] with a
/// core for every vCPU, first SMT threads only (a core each); with fewer
/// cores than vCPUs, each node's cores then its siblings, so a unit stays
/// on its node. Under [`Pin::Threads`] each node core by core, siblings
/// together.
fn preference(t: &Topology, nodes: &[u32], first: usize, pin: Pin, vcpus: u32) -> Vec<u32> {
    let ring = (0..nodes.len()).map(|i| nodes[(first + i) % nodes.len()]);
    // a CPU's rank among its core's siblings (0: the first thread)
    let rank = |c: &HostCpu| t.cpus.iter().filter(|o| o.core == c.core && o.id < c.id).count();
    let cores_only = pin == Pin::Cores && vcpus as usize <= t.cores();
    let mut out = Vec::new();
    for n in ring {
        let mut v: Vec<(usize, &HostCpu)> = t.cpus.iter().filter(|c| c.node == n).map(|c| (rank(c), c)).collect();
        match pin {
            Pin::Threads => v.sort_by_key(|(r, c)| (c.package, c.core, *r)),
            _ => v.sort_by_key(|(r, c)| (*r, c.package, c.core)),
        }
        out.extend(v.iter().filter(|(r, _)| !cores_only || *r == 0).map(|(_, c)| c.id));
    }
    out
}

fn majority_node(t: &Topology, cpus: &[u32]) -> Option<u32> {
    let mut count: BTreeMap<u32, usize> = BTreeMap::new();
    for c in t.cpus.iter().filter(|c| cpus.contains(&c.id)) {
        *count.entry(c.node).or_default() += 1;
    }
    let first = t.cpus.iter().find(|c| cpus.first() == Some(&c.id)).map(|c| c.node);
    let best = count.values().copied().max()?;
    // ties go to the node of the unit's first vCPU
    first
        .filter(|n| count.get(n) == Some(&best))
        .or_else(|| count.iter().find(|(_, &k)| k == best).map(|(&n, _)| n))
}

fn others(t: &Topology, used: &BTreeSet<u32>) -> Vec<u32> {
    let busy: BTreeSet<u32> = t.cpus.iter().filter(|c| used.contains(&c.id)).map(|c| c.core).collect();
    let free_cores: Vec<u32> = t
        .cpus
        .iter()
        .filter(|c| !busy.contains(&c.core))
        .map(|c| c.id)
        .collect();
    if !free_cores.is_empty() {
        return free_cores;
    }
    let free: Vec<u32> = t.cpus.iter().filter(|c| !used.contains(&c.id)).map(|c| c.id).collect();
    if !free.is_empty() {
        return free;
    }
    t.cpus.iter().map(|c| c.id).collect()
}

#[cfg(test)]
mod tests;
