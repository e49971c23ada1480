//! Instructions per system call, by syscall number, per vCPU.
//!
//! System-mode plugins get no syscall callbacks, so the plugin finds the
//! syscall in the kernel's text: a call starts when a vCPU enters the block
//! at `entry_SYSCALL_64` (the `syscall` instruction's target; RAX holds the
//! syscall number there) and ends when that vCPU next enters a user-space
//! block (after `sysret` or `iret`). Every kernel block the vCPU executes in
//! between is the call's, the entry block included: the entry and exit
//! path, the handler, page faults on user memory and any interrupt taken
//! on that vCPU meanwhile. A call during which the vCPU enters `__switch_to`
//! (the task blocked, was preempted, or exited on a signal) is not counted
//! but dropped: the instructions after the switch are another task's. Only
//! calls that end inside a marker window are counted, into that window.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};

/// Syscall numbers counted (x86-64's table has fewer than this).
pub const MAX_NR: usize = 512;

/// What a block is, for the syscall tracker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Any other kernel block: its instructions go to the call in flight.
    Kernel,
    /// A user-space block: the call in flight has returned.
    User,
    /// The block at `entry_SYSCALL_64`: a call starts.
    Entry,
    /// The block at `__switch_to`: the call in flight is dropped.
    Switch,
}

/// A block's facts for the tracker, fixed at translation.
#[derive(Debug)]
pub struct Block {
    /// The block's execution counter (the profile's own, see `qemu.rs`).
    pub counter: *const AtomicU64,
    /// Its instructions.
    pub insns: u64,
    /// What it is.
    pub kind: Kind,
}

/// The call in flight on one vCPU: written only by that vCPU's thread.
#[derive(Debug, Default)]
pub struct Vcpu {
    /// Syscall number + 1; 0 when no call is in flight.
    nr: AtomicU64,
    /// Instructions of the call so far.
    insns: AtomicU64,
}

/// How a tracked call ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Done {
    /// Returned to user space after `insns` instructions.
    Call { nr: usize, insns: u64 },
    /// The vCPU switched tasks inside it (`by_switch`) or a new call began:
    /// not counted.
    Dropped { nr: usize, by_switch: bool },
}

impl Vcpu {
    /// The vCPU entered a block of `kind` with `insns` instructions; `nr`
    /// is RAX (read only at an entry block). Returns the call that ended.
    pub fn step(&self, kind: Kind, insns: u64, nr: impl FnOnce() -> Option<u64>) -> Option<Done> {
        let cur = self.nr.load(Ordering::Relaxed);
        let open = (cur != 0).then(|| (cur - 1) as usize);
        match kind {
            Kind::Kernel => {
                if open.is_some() {
                    self.insns
                        .store(self.insns.load(Ordering::Relaxed) + insns, Ordering::Relaxed);
                }
                None
            }
            Kind::User | Kind::Switch => {
                let nr = open?;
                self.nr.store(0, Ordering::Relaxed);
                Some(match kind {
                    Kind::User => Done::Call {
                        nr,
                        insns: self.insns.load(Ordering::Relaxed),
                    },
                    _ => Done::Dropped { nr, by_switch: true },
                })
            }
            Kind::Entry => {
                let next = nr().filter(|&n| (n as usize) < MAX_NR).map_or(0, |n| n + 1);
                self.nr.store(next, Ordering::Relaxed);
                self.insns.store(insns, Ordering::Relaxed);
                open.map(|nr| Done::Dropped { nr, by_switch: false })
            }
        }
    }
}

/// The vCPUs' calls in flight, found by a key that names the executing
/// vCPU (its per-CPU base): an open-addressing table that takes a new key
/// on first sight, without locks.
///
/// QEMU 10.0 compiles the callback's vCPU index into each translated block
/// as a constant when blocks do not run in parallel (`CF_PARALLEL` unset,
/// as under `-icount`, where one thread runs all vCPUs in turn), so the
/// index names the vCPU that translated the block, not the one executing
/// it. Keyed by that index, one vCPU's call would take another's blocks.
#[derive(Debug)]
pub struct Seats {
    keys: Vec<AtomicU64>,
    vcpus: Vec<Vcpu>,
}

impl Seats {
    /// A table for `n` vCPUs (twice as many slots, a power of two).
    pub fn new(n: usize) -> Seats {
        let slots = (2 * n.max(1)).next_power_of_two();
        Seats {
            keys: (0..slots).map(|_| AtomicU64::new(0)).collect(),
            vcpus: (0..slots).map(|_| Vcpu::default()).collect(),
        }
    }

    /// The call state of the vCPU keyed `key` (non-zero), taking a free
    /// slot on first sight; `None` for key 0 or a full table.
    pub fn get(&self, key: u64) -> Option<&Vcpu> {
        if key == 0 {
            return None;
        }
        let mask = self.keys.len() - 1;
        let start = ((key >> 12).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32) as usize;
        for i in 0..self.keys.len() {
            let at = (start + i) & mask;
            let k = &self.keys[at];
            let now = match k.compare_exchange(0, key, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => key,
                Err(other) => other,
            };
            if now == key {
                return Some(&self.vcpus[at]);
            }
        }
        None
    }
}

/// Counted calls per syscall number.
#[derive(Debug, Clone, PartialEq)]
pub struct Tally {
    calls: Vec<u64>,
    insns: Vec<u64>,
    dropped: Vec<u64>,
    by_switch: Vec<u64>,
}

impl Default for Tally {
    fn default() -> Tally {
        Tally {
            calls: vec![0; MAX_NR],
            insns: vec![0; MAX_NR],
            dropped: vec![0; MAX_NR],
            by_switch: vec![0; MAX_NR],
        }
    }
}

impl Tally {
    /// Counts one ended call.
    pub fn add(&mut self, d: Done) {
        match d {
            Done::Call { nr, insns } => {
                self.calls[nr] += 1;
                self.insns[nr] += insns;
            }
            Done::Dropped { nr, by_switch } => {
                self.dropped[nr] += 1;
                self.by_switch[nr] += by_switch as u64;
            }
        }
    }

    /// Adds another tally.
    pub fn merge(&mut self, o: &Tally) {
        for i in 0..MAX_NR {
            self.calls[i] += o.calls[i];
            self.insns[i] += o.insns[i];
            self.dropped[i] += o.dropped[i];
            self.by_switch[i] += o.by_switch[i];
        }
    }

    /// The profile's syscall lines: `s NR CALLS INSNS DROPPED` for every
    /// number with a counted or dropped call, by number.
    pub fn render(&self) -> String {
        let mut out = String::new();
        for i in 0..MAX_NR {
            if self.calls[i] + self.dropped[i] > 0 {
                let (c, n, d, w) = (self.calls[i], self.insns[i], self.dropped[i], self.by_switch[i]);
                let _ = writeln!(out, "s {i} {c} {n} {d} {w}");
            }
        }
        out
    }
}

/// The window's tallies: the open window's, the last closed one's, all
/// closed ones'.
#[derive(Debug, Default)]
pub struct Windows {
    /// Calls ended inside the open window.
    pub open: Tally,
    /// The last closed window's.
    pub last: Tally,
    /// Every closed window's.
    pub total: Tally,
}

impl Windows {
    /// A window opened: its tally starts empty.
    pub fn opened(&mut self) {
        self.open = Tally::default();
    }

    /// The open window closed.
    pub fn closed(&mut self) {
        self.last = std::mem::take(&mut self.open);
        self.total.merge(&self.last);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_counts_its_kernel_blocks_from_entry_to_user() {
        let v = Vcpu::default();
        assert_eq!(v.step(Kind::Kernel, 5, || None), None, "no call in flight");
        assert_eq!(v.step(Kind::User, 3, || None), None);
        assert_eq!(v.step(Kind::Entry, 4, || Some(302)), None);
        assert_eq!(v.step(Kind::Kernel, 10, || None), None);
        assert_eq!(v.step(Kind::Kernel, 6, || None), None);
        assert_eq!(v.step(Kind::User, 3, || None), Some(Done::Call { nr: 302, insns: 20 }));
        assert_eq!(v.step(Kind::User, 3, || None), None, "ended once");
    }

    #[test]
    fn a_switch_or_a_second_entry_drops_the_call() {
        let v = Vcpu::default();
        v.step(Kind::Entry, 4, || Some(140));
        v.step(Kind::Kernel, 10, || None);
        assert_eq!(
            v.step(Kind::Switch, 7, || None),
            Some(Done::Dropped {
                nr: 140,
                by_switch: true
            })
        );
        assert_eq!(
            v.step(Kind::User, 3, || None),
            None,
            "the next task's return is not the call's"
        );
        v.step(Kind::Entry, 4, || Some(141));
        assert_eq!(
            v.step(Kind::Entry, 4, || Some(39)),
            Some(Done::Dropped {
                nr: 141,
                by_switch: false
            })
        );
        assert_eq!(v.step(Kind::User, 1, || None), Some(Done::Call { nr: 39, insns: 4 }));
        v.step(Kind::Entry, 4, || Some(9999));
        assert_eq!(
            v.step(Kind::User, 1, || None),
            None,
            "a number past the table is not tracked"
        );
    }

    #[test]
    fn each_key_has_its_own_seat_and_keeps_it() {
        let seats = Seats::new(3);
        let bases = [0xffff_8880_7fa0_0000u64, 0xffff_8880_7fc0_0000, 0xffff_8880_7fe0_0000];
        let got: Vec<*const Vcpu> = bases.iter().map(|&b| seats.get(b).unwrap() as *const _).collect();
        assert!(
            got[0] != got[1] && got[1] != got[2] && got[0] != got[2],
            "one seat per vCPU"
        );
        for (b, p) in bases.iter().zip(&got) {
            assert_eq!(seats.get(*b).unwrap() as *const _, *p, "the same vCPU, the same seat");
        }
        seats.get(bases[0]).unwrap().step(Kind::Entry, 4, || Some(39));
        assert_eq!(
            seats.get(bases[1]).unwrap().step(Kind::User, 1, || None),
            None,
            "another vCPU's call"
        );
        assert_eq!(
            seats.get(bases[0]).unwrap().step(Kind::User, 1, || None),
            Some(Done::Call { nr: 39, insns: 4 })
        );
        assert!(seats.get(0).is_none(), "no key, no seat");
        let full = Seats::new(1);
        assert!(full.get(1 << 12).is_some() && full.get(2 << 12).is_some());
        assert!(full.get(3 << 12).is_none(), "a full table says so");
    }

    #[test]
    fn windows_keep_the_last_and_the_sum() {
        let mut w = Windows::default();
        w.open.add(Done::Call { nr: 1, insns: 50 });
        w.opened();
        w.open.add(Done::Call { nr: 302, insns: 40 });
        w.open.add(Done::Call { nr: 302, insns: 44 });
        w.open.add(Done::Dropped {
            nr: 140,
            by_switch: true,
        });
        w.closed();
        assert_eq!(w.last.render(), "s 140 0 0 1 1\ns 302 2 84 0 0\n");
        w.opened();
        w.open.add(Done::Call { nr: 302, insns: 41 });
        w.closed();
        assert_eq!(w.last.render(), "s 302 1 41 0 0\n");
        assert_eq!(w.total.render(), "s 140 0 0 1 1\ns 302 3 125 0 0\n");
    }
}
