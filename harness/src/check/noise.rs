//! `check`'s host items: where each vCPU count's guest would be pinned
//! (`guest.pin` on this host's topology) and the host's state
//! ([`crate::host::state`]): governor, boost, SMT, THP, load, other QEMUs,
//! free memory per node, IRQs on the CPUs to be measured, each that costs a
//! wall-clock run something a warning with the command that fixes it. Under
//! the instruction-counting clock none of it moves the numbers: the items
//! are there, as `ok`.

use super::{item, Item, Level};
use crate::config::{Clock, Matrix};
use crate::host::state::{findings, HostState};
use crate::host::topology::format_list;
use crate::vm::{self, Accel};

/// The pinning of each vCPU count and the host's state, as check items.
pub fn items(m: &Matrix) -> Vec<Item> {
    let icount = m.guest.clock == Clock::Icount;
    // KVM and TCG's wall clock place vCPUs alike
    let accel = if icount { Accel::Tcg } else { Accel::Kvm };
    let mut out: Vec<Item> = m.vcpus.iter().map(|&n| pinning(m, accel, n)).collect();
    let measured = vm::pin::measured_cpus(accel, m.guest.clock, &m.guest, &m.vcpus);
    let state = HostState::here(&measured);
    out.push(item(
        Level::Ok,
        "host state",
        state
            .settings()
            .iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect::<Vec<_>>()
            .join(", "),
    ));
    let need = m.guest.hugepages.then_some(m.guest.memory_mib);
    for f in findings(&state, crate::host::cpus() as usize, need) {
        let level = if f.warn && !icount { Level::Warn } else { Level::Ok };
        let mut msg = f.message;
        if let Some(fix) = f.fix {
            msg.push_str(&format!("; fix: {fix}"));
        }
        if f.warn && icount {
            msg.push_str(" (the instruction-counting clock does not depend on it)");
        }
        out.push(item(level, format!("host {}", f.what), msg));
    }
    out
}

fn pinning(m: &Matrix, accel: Accel, n: u32) -> Item {
    let what = format!("pin {n} vCPUs");
    let Some(p) = vm::pin::plan(accel, m.guest.clock, &m.guest, n) else {
        let why = match m.guest.clock {
            Clock::Icount => "not pinned: under icount one TCG thread runs every vCPU",
            Clock::Wall => "not pinned: sysfs gives no CPU topology here",
        };
        return item(Level::Ok, what, why);
    };
    if !p.pinned() {
        let why = p
            .note
            .unwrap_or_else(|| format!("not pinned (guest.pin: {})", p.pin.name()));
        let level = if p.overcommitted { Level::Warn } else { Level::Ok };
        return item(level, what, why);
    }
    let mut msg = format!(
        "guest.pin {}: vCPUs on host CPUs {}, QEMU's other threads on {}",
        p.pin.name(),
        format_list(&p.vcpu_cpus),
        format_list(&p.others)
    );
    if !p.guest_nodes.is_empty() {
        let nodes: Vec<String> = p
            .guest_nodes
            .iter()
            .enumerate()
            .map(|(g, h)| format!("{g}→{h}"))
            .collect();
        msg.push_str(&format!("; guest node memory bound to host nodes {}", nodes.join(" ")));
    }
    if let Some(note) = p.note {
        msg.push_str(&format!(" ({note})"));
    }
    item(Level::Ok, what, msg)
}
