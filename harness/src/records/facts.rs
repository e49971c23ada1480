//! The host a run ran on, as `run.json` holds it: owned here and made from
//! `host`'s own facts where the run's meta is written, so an edit of
//! `host` cannot change the file.

use serde::{Deserialize, Serialize};

#[cfg(doc)]
use crate::host::topology::Topology;
use crate::host::{self, state};

/// Facts about the host, as `run.json` records them.
#[derive(Debug, Clone, Serialize, Deserialize, Default, schemars::JsonSchema)]
pub struct Host {
    /// hostname.
    pub hostname: String,
    /// Online CPUs.
    pub cpus: u32,
    /// Memory in MiB.
    pub memory_mib: u64,
    /// Host kernel release.
    pub kernel: String,
    /// QEMU version line.
    pub qemu: String,
    /// Governor, boost, SMT, THP, load, other QEMUs, free memory, IRQs on
    /// the measured CPUs, at the run's start (absent in older runs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<HostState>,
}

/// What `run.json` records of the host's state (`host.state`).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct HostState {
    /// Packages, cores, CPUs and nodes ([`Topology::describe`]).
    pub topology: String,
    /// The distinct `scaling_governor`s of the online CPUs (empty: no cpufreq).
    pub governors: Vec<String>,
    /// Boost/turbo on (`cpufreq/boost`, or `intel_pstate/no_turbo` = 0).
    pub boost: Option<bool>,
    /// `smt/control` (`on`, `off`, `forceoff`, `notsupported`, …).
    pub smt: Option<String>,
    /// Transparent huge pages: the chosen word of `enabled`.
    pub thp: Option<String>,
    /// The 1-minute load average.
    pub load: Option<f64>,
    /// Other QEMU and harness processes (`name pid`).
    pub others: Vec<String>,
    /// Free memory of each NUMA node in MiB.
    pub node_free_mib: Vec<(u32, u64)>,
    /// Free huge pages in MiB (`HugePages_Free` × `Hugepagesize`).
    pub hugepages_free_mib: Option<u64>,
    /// The CPUs the IRQ count is about (the measured ones).
    pub measured: String,
    /// IRQs whose `smp_affinity_list` includes a measured CPU.
    pub irqs_on_measured: Vec<u32>,
    /// The CPUs carry `/proc/cpuinfo`'s `hypervisor` flag: this host is
    /// itself a virtual machine, and a KVM guest on it is nested.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hypervisor: Option<bool>,
}

impl From<host::Host> for Host {
    fn from(h: host::Host) -> Host {
        let host::Host {
            hostname,
            cpus,
            memory_mib,
            kernel,
            qemu,
            state,
        } = h;
        Host {
            hostname,
            cpus,
            memory_mib,
            kernel,
            qemu,
            state: state.map(HostState::from),
        }
    }
}

impl From<state::HostState> for HostState {
    fn from(s: state::HostState) -> HostState {
        let state::HostState {
            topology,
            governors,
            boost,
            smt,
            thp,
            load,
            others,
            node_free_mib,
            hugepages_free_mib,
            measured,
            irqs_on_measured,
            hypervisor,
        } = s;
        HostState {
            topology,
            governors,
            boost,
            smt,
            thp,
            load,
            others,
            node_free_mib,
            hugepages_free_mib,
            measured,
            irqs_on_measured,
            hypervisor,
        }
    }
}

impl From<HostState> for state::HostState {
    fn from(s: HostState) -> state::HostState {
        let HostState {
            topology,
            governors,
            boost,
            smt,
            thp,
            load,
            others,
            node_free_mib,
            hugepages_free_mib,
            measured,
            irqs_on_measured,
            hypervisor,
        } = s;
        state::HostState {
            topology,
            governors,
            boost,
            smt,
            thp,
            load,
            others,
            node_free_mib,
            hugepages_free_mib,
            measured,
            irqs_on_measured,
            hypervisor,
        }
    }
}

impl HostState {
    /// The settings that stay put between runs, in `host`'s words
    /// ([`state::HostState::settings`]).
    pub fn settings(&self) -> Vec<(&'static str, String)> {
        state::HostState::from(self.clone()).settings()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The record serialises as `host`'s own facts do and reads the same.
    #[test]
    fn a_host_record_keeps_host_shape_and_words() {
        let s = state::HostState {
            topology: "1 package, 2 cores, 4 CPUs, 1 node".into(),
            governors: vec!["performance".into()],
            boost: Some(false),
            smt: Some("on".into()),
            thp: None,
            load: Some(0.5),
            others: vec!["qemu-system-x86 12".into()],
            node_free_mib: vec![(0, 1024)],
            hugepages_free_mib: Some(0),
            measured: "0-1".into(),
            irqs_on_measured: vec![9],
            hypervisor: Some(true),
        };
        let h = host::Host {
            hostname: "h".into(),
            cpus: 4,
            memory_mib: 8192,
            kernel: "6.1".into(),
            qemu: "QEMU emulator version 8.2.2".into(),
            state: Some(s.clone()),
        };
        let r = Host::from(h.clone());
        assert_eq!(serde_json::to_value(&r).unwrap(), serde_json::to_value(&h).unwrap());
        assert_eq!(r.state.unwrap().settings(), s.settings());
        let bare = host::Host::default();
        assert_eq!(
            serde_json::to_value(Host::from(bare.clone())).unwrap(),
            serde_json::to_value(&bare).unwrap()
        );
    }
}
