//! A guest's vCPU threads pinned where its [`Placement`] says: the plan
//! (the matrix's `guest.pin` on this host's topology, under a wall clock
//! only: under icount one TCG thread runs every vCPU), then, once QEMU
//! runs, each vCPU's host thread read over QMP (`query-cpus-fast`) and
//! pinned with `sched_setaffinity`, QEMU's other threads put on the CPUs
//! no vCPU uses. What was done is written beside the console as
//! `pin.json` ([`Pinned`]). The harness changes nothing else on the host.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

use super::qmp::{vcpu_threads, Qmp};
use super::Accel;
use crate::config::{Clock, Guest};
use crate::host::topology::{self, GuestShape, Placement, Topology};

/// The placement of a guest of `vcpus` (its shape from `g`) under `accel`
/// and `clock`: none under icount or where sysfs says nothing.
pub fn plan(accel: Accel, clock: Clock, g: &Guest, vcpus: u32) -> Option<Placement> {
    if accel == Accel::Tcg && clock == Clock::Icount {
        return None;
    }
    let t = Topology::here()?;
    let shape = GuestShape {
        vcpus,
        sockets: g.sockets,
        numa_nodes: g.numa_nodes,
    };
    Some(topology::place(&t, shape, g.pin))
}

/// The CPUs the run's largest guest is pinned to (empty when it is not):
/// those whose IRQs and noise matter ([`crate::host::state`]).
pub fn measured_cpus(accel: Accel, clock: Clock, g: &Guest, vcpus: &[u32]) -> Vec<u32> {
    let most = vcpus.iter().copied().max().unwrap_or(0);
    plan(accel, clock, g, most).map_or(Vec::new(), |p| p.vcpu_cpus)
}

/// What pinning did to one guest, as `<boot>/pin.json` records it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Pinned {
    /// The plan.
    pub placement: Placement,
    /// `(vCPU, host thread id)` as QMP told them, each pinned to its CPU.
    pub vcpu_threads: Vec<(u32, i32)>,
    /// QEMU's other threads, put on the placement's `others`.
    pub other_threads: Vec<i32>,
    /// Threads QEMU started after it was pinned (a thread-pool worker a
    /// vCPU thread spawns is born on that vCPU's CPU), each put on `others`
    /// before the next repetition ([`repin`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub late_threads: Vec<i32>,
    /// Why the guest is not (wholly) pinned.
    pub error: Option<String>,
}

/// The file beside the console where [`Pinned`] goes.
pub fn record_path(console: &Path) -> PathBuf {
    console.with_file_name("pin.json")
}

/// A fresh path for a QMP socket: short (a unix socket path has 108
/// bytes), in the temporary directory, unique in this process.
pub fn socket_path() -> PathBuf {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    std::env::temp_dir().join(format!("harness-qmp-{}-{n}.sock", std::process::id()))
}

/// Pins QEMU `pid`'s vCPU threads, asked over the QMP socket at `qmp`
/// (waiting until `until` while `alive`), and its other threads.
pub fn apply(pid: i32, qmp: &Path, p: &Placement, until: Instant, alive: impl FnMut() -> bool) -> Result<Pinned> {
    let mut q = Qmp::connect(qmp, until, alive)?;
    let threads = vcpu_threads(&q.execute("query-cpus-fast")?)?;
    if threads.len() != p.vcpu_cpus.len() {
        bail!(
            "QMP names {} vCPU threads, the plan {}",
            threads.len(),
            p.vcpu_cpus.len()
        );
    }
    for &(i, tid) in &threads {
        let cpu = p.vcpu_cpus[i as usize];
        set_affinity(tid, &[cpu]).with_context(|| format!("pin vCPU {i} (thread {tid}) to CPU {cpu}"))?;
    }
    let vcpus: BTreeSet<i32> = threads.iter().map(|&(_, t)| t).collect();
    let mut others = Vec::new();
    for tid in tasks(pid).into_iter().filter(|t| !vcpus.contains(t)) {
        // a thread that ended meanwhile is no matter
        if set_affinity(tid, &p.others).is_ok() {
            others.push(tid);
        }
    }
    Ok(Pinned {
        placement: p.clone(),
        vcpu_threads: threads,
        other_threads: others,
        late_threads: Vec::new(),
        error: None,
    })
}

/// Puts each thread QEMU `pid` started since `pinned` was made (none of
/// its vCPU, other or late threads) on the placement's `others`, and
/// counts it late: a thread inherits the CPUs of the thread that starts it,
/// so a worker a vCPU thread spawns would share that vCPU's one CPU. Gives
/// whether there was any.
pub fn repin(pid: i32, pinned: &mut Pinned) -> bool {
    let known: BTreeSet<i32> = pinned
        .vcpu_threads
        .iter()
        .map(|&(_, t)| t)
        .chain(pinned.other_threads.iter().copied())
        .chain(pinned.late_threads.iter().copied())
        .collect();
    let born: Vec<i32> = tasks(pid).into_iter().filter(|t| !known.contains(t)).collect();
    for &tid in &born {
        // a thread that ended meanwhile is no matter
        if set_affinity(tid, &pinned.placement.others).is_ok() {
            pinned.late_threads.push(tid);
        }
    }
    !born.is_empty()
}

/// Sets thread `tid`'s CPUs.
pub fn set_affinity(tid: i32, cpus: &[u32]) -> Result<()> {
    // SAFETY: cpu_set_t is plain data, filled with CPU_SET within its size,
    // and only read by sched_setaffinity.
    let r = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for &c in cpus.iter().filter(|&&c| (c as usize) < libc::CPU_SETSIZE as usize) {
            libc::CPU_SET(c as usize, &mut set);
        }
        libc::sched_setaffinity(tid, std::mem::size_of::<libc::cpu_set_t>(), &set)
    };
    if r != 0 {
        return Err(std::io::Error::last_os_error()).context("sched_setaffinity");
    }
    Ok(())
}

/// The thread ids of process `pid` (`/proc/<pid>/task`).
pub fn tasks(pid: i32) -> Vec<i32> {
    let mut v: Vec<i32> = std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|d| {
            d.flatten()
                .filter_map(|e| e.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default();
    v.sort_unstable();
    v
}

/// A thread's `Cpus_allowed_list` from `/proc/<pid>/task/<tid>/status`.
pub fn allowed_list(pid: i32, tid: i32) -> Option<String> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/status")).ok()?;
    s.lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .map(|v| v.trim().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A thread of this process that waits until it is dropped.
    struct Parked {
        tid: i32,
        done: Option<std::sync::mpsc::Sender<()>>,
        thread: Option<std::thread::JoinHandle<()>>,
    }

    impl Parked {
        fn new() -> Parked {
            let (tx, rx) = std::sync::mpsc::channel();
            let (done, wait) = std::sync::mpsc::channel::<()>();
            let thread = std::thread::spawn(move || {
                // SAFETY: gettid has no preconditions.
                tx.send(unsafe { libc::gettid() }).unwrap();
                // ends when the sender is dropped
                let _ = wait.recv();
            });
            Parked {
                tid: rx.recv().unwrap(),
                done: Some(done),
                thread: Some(thread),
            }
        }
    }

    impl Drop for Parked {
        fn drop(&mut self) {
            drop(self.done.take());
            if let Some(t) = self.thread.take() {
                t.join().unwrap();
            }
        }
    }

    #[test]
    fn a_thread_of_this_process_is_pinned_and_read_back() {
        let me = std::process::id() as i32;
        let cpu = *crate::host::topology::allowed_cpus().unwrap().iter().next().unwrap();
        let parked = Parked::new();
        let tid = parked.tid;
        assert!(tasks(me).contains(&tid));
        set_affinity(tid, &[cpu]).unwrap();
        assert_eq!(allowed_list(me, tid), Some(cpu.to_string()));
        assert!(set_affinity(tid, &[]).is_err(), "an empty set is refused");
        drop(parked);
    }

    /// Issue 48: in the KVM box a QEMU thread born after the pinning sat on
    /// vCPU 1's CPU. A thread started since is put on `others` by `repin`.
    #[test]
    fn a_thread_started_after_pinning_is_put_on_the_others_cpus() {
        let me = std::process::id() as i32;
        let cpus: Vec<u32> = crate::host::topology::allowed_cpus().unwrap().into_iter().collect();
        if cpus.len() < 2 {
            eprintln!("skipped: one CPU here, a late thread cannot be told from a repinned one");
            return;
        }
        let mut pinned = Pinned {
            placement: Placement {
                pin: crate::config::Pin::Cores,
                vcpu_cpus: cpus[..1].to_vec(),
                guest_nodes: Vec::new(),
                others: cpus.clone(),
                overcommitted: false,
                note: None,
            },
            vcpu_threads: Vec::new(),
            other_threads: tasks(me),
            late_threads: Vec::new(),
            error: None,
        };
        let parked = Parked::new();
        let tid = parked.tid;
        // born on one CPU, as a worker a vCPU thread spawns
        set_affinity(tid, &cpus[..1]).unwrap();
        assert!(repin(me, &mut pinned), "the new thread was not seen");
        assert!(pinned.late_threads.contains(&tid), "{pinned:?}");
        assert_eq!(
            allowed_list(me, tid),
            Some(crate::host::topology::format_list(&cpus)),
            "late thread {tid}"
        );
        repin(me, &mut pinned);
        assert_eq!(
            pinned.late_threads.iter().filter(|&&t| t == tid).count(),
            1,
            "a known thread counted again: {pinned:?}"
        );
        drop(parked);
    }

    #[test]
    fn no_placement_under_icount() {
        let y = "variants:\n  - name: base\nvcpus: [1]\nbenchmarks:\n  - {name: d, kind: doexec}\n";
        let m = crate::config::parse(y, Path::new("/x/m.yaml"), None).unwrap();
        assert_eq!(m.guest.pin, crate::config::Pin::Cores, "the default");
        assert!(plan(Accel::Tcg, Clock::Icount, &m.guest, 2).is_none());
        let p = plan(Accel::Tcg, Clock::Wall, &m.guest, 1).expect("this host's sysfs");
        assert!(p.pinned(), "{p:?}");
    }
}
