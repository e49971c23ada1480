//! Contention counts (`contention=on`), pure bookkeeping: per measured
//! window, the cache lines that atomic read-modify-writes (RMWs) wrote and
//! which vCPUs wrote each, and the locks the kernel's lock functions took,
//! which vCPUs took each, and how long they were held; then the rows of
//! the profile's `x` lines.
//!
//! A line (64 bytes) is *shared* when two or more vCPUs wrote it with an
//! RMW inside the window, or when it lies in the kernel image's static data
//! (whatever this window's writers: a single-threaded benchmark has one
//! writer, yet every CPU that runs the path writes it). A lock likewise:
//! taken by two or more vCPUs, or a static lock of the image. The decision
//! is made per line from the set of its writers when the window closes,
//! never from who touched it last, so it does not depend on how QEMU
//! interleaves the vCPUs.
//!
//! Rows: a shared static line or lock is named by its data symbol and the
//! offset in it (`tasklist_lock+0x0`); a shared heap line by the function
//! that did the RMW, a shared heap lock by the function that called the
//! lock function (the plugin cannot name heap objects).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt::Write as _;

use crate::symbols::Symbols;

/// Bytes in a cache line.
pub const LINE: u64 = 64;

/// The vCPUs that wrote a line or took a lock: any number of them (448
/// vCPUs do not fit a 64-bit mask).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Writers {
    /// One vCPU (its ordinal).
    One(u16),
    /// Several: a bit per ordinal.
    Many(Vec<u64>),
}

impl Writers {
    /// Adds vCPU `v`.
    pub fn add(&mut self, v: u16) {
        match self {
            Writers::One(o) if *o == v => {}
            Writers::One(o) => {
                let mut bits = Vec::new();
                for x in [*o, v] {
                    set(&mut bits, x);
                }
                *self = Writers::Many(bits);
            }
            Writers::Many(bits) => set(bits, v),
        }
    }

    /// How many vCPUs.
    pub fn count(&self) -> u32 {
        match self {
            Writers::One(_) => 1,
            Writers::Many(b) => b.iter().map(|w| w.count_ones()).sum(),
        }
    }
}

fn set(bits: &mut Vec<u64>, v: u16) {
    let w = v as usize / 64;
    if bits.len() <= w {
        bits.resize(w + 1, 0);
    }
    bits[w] |= 1 << (v % 64);
}

/// The lock functions' families: what an acquisition takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum LockKind {
    /// `_raw_spin_lock*`.
    Spin,
    /// `_raw_read_lock*` (rwlock, read side).
    Read,
    /// `_raw_write_lock*` (rwlock, write side).
    Write,
    /// `down_read*`.
    RwsemRead,
    /// `down_write*`.
    RwsemWrite,
    /// `mutex_lock*`.
    Mutex,
}

impl LockKind {
    /// Every kind.
    pub const ALL: [LockKind; 6] = [
        LockKind::Spin,
        LockKind::Read,
        LockKind::Write,
        LockKind::RwsemRead,
        LockKind::RwsemWrite,
        LockKind::Mutex,
    ];

    /// Its name in the profile.
    pub fn name(self) -> &'static str {
        match self {
            LockKind::Spin => "spin",
            LockKind::Read => "read",
            LockKind::Write => "write",
            LockKind::RwsemRead => "rwsem_read",
            LockKind::RwsemWrite => "rwsem_write",
            LockKind::Mutex => "mutex",
        }
    }

    /// The acquire entry points watched: each takes the lock's address as
    /// its first argument (RDI). Trylocks are not watched (whether they
    /// took the lock is known only at their return), nor fast paths the
    /// compiler inlined into their callers.
    pub fn acquires(self) -> &'static [&'static str] {
        match self {
            LockKind::Spin => &[
                "_raw_spin_lock",
                "_raw_spin_lock_irq",
                "_raw_spin_lock_irqsave",
                "_raw_spin_lock_bh",
                "_raw_spin_lock_nested",
                "_raw_spin_lock_irqsave_nested",
                "_raw_spin_lock_nest_lock",
            ],
            LockKind::Read => &[
                "_raw_read_lock",
                "_raw_read_lock_irq",
                "_raw_read_lock_irqsave",
                "_raw_read_lock_bh",
            ],
            LockKind::Write => &[
                "_raw_write_lock",
                "_raw_write_lock_irq",
                "_raw_write_lock_irqsave",
                "_raw_write_lock_bh",
                "_raw_write_lock_nested",
            ],
            LockKind::RwsemRead => &[
                "down_read",
                "down_read_killable",
                "down_read_interruptible",
                "down_read_nested",
                "down_read_killable_nested",
            ],
            LockKind::RwsemWrite => &[
                "down_write",
                "down_write_killable",
                "down_write_nested",
                "down_write_killable_nested",
            ],
            LockKind::Mutex => &[
                "mutex_lock",
                "mutex_lock_killable",
                "mutex_lock_interruptible",
                "mutex_lock_nested",
                "mutex_lock_killable_nested",
                "mutex_lock_interruptible_nested",
            ],
        }
    }

    /// The release that ends a hold taken by the acquire function `name`
    /// (`_raw_spin_lock_irqsave` → `_raw_spin_unlock_irqrestore`): its
    /// hold is measured only where this release is a function of its own
    /// (with `CONFIG_PREEMPT_NONE`, `spin_unlock` is inlined). The
    /// spinlock and rwlock [`releases`](Self::releases) are listed plain,
    /// `_irq`, `_irqrestore`, `_bh`; rwsems and mutexes have one.
    pub fn release_of(self, name: &str) -> &'static str {
        let variant = if name.contains("_irqsave") {
            2
        } else if name.ends_with("_irq") {
            1
        } else if name.ends_with("_bh") {
            3
        } else {
            0
        };
        let releases = self.releases();
        releases[variant.min(releases.len() - 1)]
    }

    /// The release entry points: the hold of an acquisition ends at the
    /// first of these on its vCPU with the same lock address.
    pub fn releases(self) -> &'static [&'static str] {
        match self {
            LockKind::Spin => &[
                "_raw_spin_unlock",
                "_raw_spin_unlock_irq",
                "_raw_spin_unlock_irqrestore",
                "_raw_spin_unlock_bh",
            ],
            LockKind::Read => &[
                "_raw_read_unlock",
                "_raw_read_unlock_irq",
                "_raw_read_unlock_irqrestore",
                "_raw_read_unlock_bh",
            ],
            LockKind::Write => &[
                "_raw_write_unlock",
                "_raw_write_unlock_irq",
                "_raw_write_unlock_irqrestore",
                "_raw_write_unlock_bh",
            ],
            LockKind::RwsemRead => &["up_read"],
            LockKind::RwsemWrite => &["up_write"],
            LockKind::Mutex => &["mutex_unlock"],
        }
    }
}

/// A watched function's role.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// It takes a lock of this kind; its hold is measured (its release is
    /// a function of this kernel).
    Acquire(LockKind, bool),
    /// It releases one.
    Release(LockKind),
}

/// The watched lock functions present in a kernel's symbols: function
/// index → role, and the acquire functions whose hold can be measured (its
/// release is a function of this kernel; spin unlocks are often inlined).
#[derive(Debug, Clone, Default)]
pub struct Watch {
    /// Function index → role.
    pub roles: HashMap<u32, Role>,
    /// Acquire functions whose hold is measured, by name.
    pub holds: Vec<&'static str>,
}

impl Watch {
    /// The lock functions of `syms`.
    pub fn of(syms: &Symbols) -> Watch {
        let mut w = Watch::default();
        for k in LockKind::ALL {
            for n in k.releases() {
                if let Some(i) = syms.find(n) {
                    w.roles.insert(i as u32, Role::Release(k));
                }
            }
            for n in k.acquires() {
                if let Some(i) = syms.find(n) {
                    let hold = syms.find(k.release_of(n)).is_some();
                    w.roles.insert(i as u32, Role::Acquire(k, hold));
                    if hold {
                        w.holds.push(n);
                    }
                }
            }
        }
        w
    }

    /// Acquire functions watched.
    pub fn acquires(&self) -> usize {
        self.roles.values().filter(|r| matches!(r, Role::Acquire(..))).count()
    }

    /// Release functions watched.
    pub fn releases(&self) -> usize {
        self.roles.values().filter(|r| matches!(r, Role::Release(_))).count()
    }
}

/// The kernel image's static data: objects by address, and the image's
/// data range (from the first object to the end of the last; the per-CPU
/// section, linked at 0 on x86-64, is not in it).
#[derive(Debug, Clone, Default)]
pub struct Data {
    syms: Symbols,
    lo: u64,
    hi: u64,
}

impl Data {
    /// From a data symbols file's objects (`START SIZE NAME`); objects
    /// below the kernel half (per-CPU symbols) are left out.
    pub fn new(syms: Symbols) -> Data {
        let n = syms.len();
        let first = (0..n).find(|&i| syms.start(i) >= crate::symbols::KERNEL_HALF);
        let (lo, hi) = match first {
            Some(f) => (syms.start(f), syms.end(n - 1)),
            None => (0, 0),
        };
        Data { syms, lo, hi }
    }

    /// Whether `addr` is in the image's static data.
    pub fn is_static(&self, addr: u64) -> bool {
        (self.lo..self.hi).contains(&addr)
    }

    /// `symbol+0xOFF` of a static address (`[data]+0xOFF` from the range's
    /// start where no object covers it); `None` outside the image's data.
    pub fn name(&self, addr: u64) -> Option<String> {
        if !self.is_static(addr) {
            return None;
        }
        Some(match self.syms.function(addr) {
            Some(i) => format!("{}+{:#x}", self.syms.name(i as u32), addr - self.syms.start(i)),
            None => format!("[data]+{:#x}", addr - self.lo),
        })
    }
}

/// One held lock on a vCPU.
#[derive(Debug, Clone, Copy)]
struct Held {
    lock: u64,
    kind: LockKind,
    caller: u32,
    at: u64,
    epoch: u64,
}

/// One window's counts.
#[derive(Debug, Default)]
pub struct Tally {
    /// Line → the vCPUs that wrote it with an RMW.
    lines: HashMap<u64, Writers>,
    /// (address, function) → RMWs.
    rmws: HashMap<(u64, u32), u64>,
    /// (lock, kind) → the vCPUs that took it.
    locks: HashMap<(u64, LockKind), Writers>,
    /// (lock, kind, caller) → acquisitions.
    acqs: HashMap<(u64, LockKind, u32), u64>,
    /// (lock, kind, caller) → (holds measured, their instructions).
    held: HashMap<(u64, LockKind, u32), (u64, u64)>,
    /// Holds not measured: another vCPU ran in between.
    pub held_across: u64,
    /// vCPUs that did anything counted.
    seen: Option<Writers>,
}

/// The contention state across windows: the open window's tally, each
/// vCPU's held locks, the turn epoch.
#[derive(Debug, Default)]
pub struct State {
    /// The open window's counts.
    pub open: Tally,
    /// Per vCPU ordinal: locks held, innermost last.
    stacks: Vec<Vec<Held>>,
    last_vcpu: Option<u16>,
    epoch: u64,
    /// Rows of every closed window, summed by name.
    pub total: Rows,
    /// The last closed window's rows.
    pub last: Rows,
}

impl State {
    fn saw(&mut self, v: u16) {
        if self.last_vcpu != Some(v) {
            self.epoch += 1;
            self.last_vcpu = Some(v);
        }
        match &mut self.open.seen {
            Some(w) => w.add(v),
            None => self.open.seen = Some(Writers::One(v)),
        }
    }

    /// vCPU `v` did an RMW at `addr` in function `func`.
    pub fn rmw(&mut self, v: u16, addr: u64, func: u32) {
        self.saw(v);
        let t = &mut self.open;
        t.lines.entry(addr / LINE).or_insert(Writers::One(v)).add(v);
        *t.rmws.entry((addr, func)).or_insert(0) += 1;
    }

    /// vCPU `v` entered an acquire function of `kind` for `lock`, called
    /// from `caller`; `now` is the instruction count so far. `hold` says
    /// whether this kind's holds are measured.
    pub fn acquire(&mut self, v: u16, lock: u64, kind: LockKind, caller: u32, now: u64, hold: bool) {
        self.saw(v);
        let t = &mut self.open;
        t.locks.entry((lock, kind)).or_insert(Writers::One(v)).add(v);
        *t.acqs.entry((lock, kind, caller)).or_insert(0) += 1;
        if hold {
            let i = v as usize;
            if self.stacks.len() <= i {
                self.stacks.resize_with(i + 1, Vec::new);
            }
            // a stack that only grows has lost its releases: start again
            if self.stacks[i].len() >= 64 {
                self.stacks[i].clear();
            }
            let epoch = self.epoch;
            self.stacks[i].push(Held {
                lock,
                kind,
                caller,
                at: now,
                epoch,
            });
        }
    }

    /// vCPU `v` entered a release function of `kind` for `lock`.
    pub fn release(&mut self, v: u16, lock: u64, kind: LockKind, now: u64) {
        self.saw(v);
        let Some(stack) = self.stacks.get_mut(v as usize) else {
            return;
        };
        let Some(at) = stack.iter().rposition(|h| h.lock == lock && h.kind == kind) else {
            return;
        };
        let h = stack.remove(at);
        let t = &mut self.open;
        if h.epoch == self.epoch {
            let e = t.held.entry((lock, kind, h.caller)).or_insert((0, 0));
            e.0 += 1;
            e.1 += now.saturating_sub(h.at);
        } else {
            t.held_across += 1;
        }
    }

    /// A window opened: counts start afresh, no lock is held in it yet.
    pub fn opened(&mut self) {
        self.open = Tally::default();
        self.stacks.clear();
    }

    /// The open window closed: its rows, named with `syms` and `data`,
    /// become the last window's and are added to the total.
    pub fn closed(&mut self, syms: &Symbols, data: &Data) {
        let t = std::mem::take(&mut self.open);
        self.last = t.rows(syms, data);
        self.total.merge(&self.last);
    }
}

/// Whether a static row or one written by several vCPUs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Class {
    /// In the kernel image's static data.
    Static,
    /// On the heap (anywhere else), written or taken by two or more vCPUs.
    Heap,
}

impl Class {
    fn name(self) -> &'static str {
        match self {
            Class::Static => "static",
            Class::Heap => "heap",
        }
    }
}

/// One row: a named shared line or lock and its counts.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Row {
    /// Distinct lines or locks folded into the row.
    pub objects: u64,
    /// Most vCPUs that wrote (took) one of them.
    pub writers: u32,
    /// RMWs on the lines, or acquisitions of the locks.
    pub events: u64,
    /// Holds measured (locks).
    pub holds: u64,
    /// Their instructions.
    pub hold_insns: u64,
    /// Functions that did the RMWs or called the lock function.
    pub funcs: BTreeMap<String, u64>,
}

/// A window's (or the windows') rows and summary.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Rows {
    /// (`line`, class, name) → row.
    pub lines: BTreeMap<(Class, String), Row>,
    /// (class, name, kind) → row.
    pub locks: BTreeMap<(Class, String, LockKind), Row>,
    /// vCPUs that did anything counted (largest over windows).
    pub vcpus: u32,
    /// RMWs, of which on shared lines; lines, of which shared.
    pub rmws: (u64, u64),
    /// Lines written, of which shared.
    pub line_count: (u64, u64),
    /// Acquisitions, of which of shared locks.
    pub acqs: (u64, u64),
    /// Locks taken, of which shared.
    pub lock_count: (u64, u64),
    /// Holds measured and not (another vCPU ran in between).
    pub holds: (u64, u64),
}

/// One count of a shared object, on its way into a named row.
struct Event<K> {
    /// The line or lock (its address).
    object: u64,
    /// The row it belongs to.
    key: K,
    /// The function that did it.
    func: String,
    /// The vCPUs that wrote or took the object.
    writers: u32,
    /// How many.
    n: u64,
    /// Holds measured, and their instructions.
    held: (u64, u64),
}

/// Named rows from events: each row's distinct objects counted once, its
/// most writers, its events and holds summed, by function.
fn fold<K: Ord + Clone + std::hash::Hash>(events: Vec<Event<K>>) -> BTreeMap<K, Row> {
    let mut rows: BTreeMap<K, Row> = BTreeMap::new();
    let mut seen: HashSet<(K, u64)> = HashSet::new();
    for e in events {
        let row = rows.entry(e.key.clone()).or_default();
        row.objects += seen.insert((e.key, e.object)) as u64;
        row.writers = row.writers.max(e.writers);
        row.events += e.n;
        row.holds += e.held.0;
        row.hold_insns += e.held.1;
        *row.funcs.entry(e.func).or_insert(0) += e.n;
    }
    rows
}

impl Tally {
    /// The window's rows: every shared line and lock, named.
    pub fn rows(&self, syms: &Symbols, data: &Data) -> Rows {
        let mut r = Rows {
            vcpus: self.seen.as_ref().map_or(0, Writers::count),
            holds: (self.held.values().map(|h| h.0).sum(), self.held_across),
            ..Rows::default()
        };
        let shared = |addr: u64, w: &Writers| data.is_static(addr) || w.count() >= 2;
        r.line_count = (
            self.lines.len() as u64,
            self.lines.iter().filter(|(l, w)| shared(*l * LINE, w)).count() as u64,
        );
        let mut lines = Vec::new();
        for (&(addr, func), &n) in &self.rmws {
            let w = &self.lines[&(addr / LINE)];
            r.rmws.0 += n;
            if !shared(addr / LINE * LINE, w) {
                continue;
            }
            r.rmws.1 += n;
            let func = syms.name(func).to_string();
            lines.push(Event {
                object: addr / LINE,
                key: data
                    .name(addr)
                    .map_or((Class::Heap, func.clone()), |s| (Class::Static, s)),
                func,
                writers: w.count(),
                n,
                held: (0, 0),
            });
        }
        r.lines = fold(lines);
        r.lock_count = (
            self.locks.len() as u64,
            self.locks.iter().filter(|((l, _), w)| shared(*l, w)).count() as u64,
        );
        let mut locks = Vec::new();
        for (&(lock, kind, caller), &n) in &self.acqs {
            let w = &self.locks[&(lock, kind)];
            r.acqs.0 += n;
            if !shared(lock, w) {
                continue;
            }
            r.acqs.1 += n;
            let func = syms.name(caller).to_string();
            locks.push(Event {
                object: lock,
                key: data
                    .name(lock)
                    .map_or((Class::Heap, func.clone(), kind), |s| (Class::Static, s, kind)),
                func,
                writers: w.count(),
                n,
                held: self.held.get(&(lock, kind, caller)).copied().unwrap_or((0, 0)),
            });
        }
        r.locks = fold(locks);
        r
    }
}

fn add_row(into: &mut Row, r: &Row) {
    into.objects = into.objects.max(r.objects);
    into.writers = into.writers.max(r.writers);
    into.events += r.events;
    into.holds += r.holds;
    into.hold_insns += r.hold_insns;
    for (f, n) in &r.funcs {
        *into.funcs.entry(f.clone()).or_insert(0) += n;
    }
}

fn add2(a: &mut (u64, u64), b: (u64, u64)) {
    a.0 += b.0;
    a.1 += b.1;
}

impl Rows {
    /// Adds another window's rows (by name; objects and writers are the
    /// larger of the two).
    pub fn merge(&mut self, o: &Rows) {
        for (k, r) in &o.lines {
            add_row(self.lines.entry(k.clone()).or_default(), r);
        }
        for (k, r) in &o.locks {
            add_row(self.locks.entry(k.clone()).or_default(), r);
        }
        self.vcpus = self.vcpus.max(o.vcpus);
        add2(&mut self.rmws, o.rmws);
        add2(&mut self.line_count, o.line_count);
        add2(&mut self.acqs, o.acqs);
        add2(&mut self.lock_count, o.lock_count);
        add2(&mut self.holds, o.holds);
    }

    /// The profile's contention lines (README, "Contention"):
    ///
    /// ```text
    /// x summary VCPUS RMWS SHARED_RMWS LINES SHARED_LINES ACQS SHARED_ACQS LOCKS SHARED_LOCKS HOLDS HELD_ACROSS
    /// x line CLASS NAME OBJECTS WRITERS RMWS
    /// x lock CLASS NAME KIND OBJECTS WRITERS ACQS HOLDS HOLD_INSNS
    /// xf FUNCTION COUNT          (after its row; most first, `top` of them, then `xf [rest] COUNT`)
    /// ```
    pub fn render(&self, watch: &Watch, top: usize) -> String {
        let mut out = String::new();
        let holds = &watch.holds;
        let _ = writeln!(
            out,
            "x watch {} {} {}",
            watch.acquires(),
            watch.releases(),
            if holds.is_empty() {
                "-".to_string()
            } else {
                holds.join(",")
            }
        );
        let _ = writeln!(
            out,
            "x summary {} {} {} {} {} {} {} {} {} {} {}",
            self.vcpus,
            self.rmws.0,
            self.rmws.1,
            self.line_count.0,
            self.line_count.1,
            self.acqs.0,
            self.acqs.1,
            self.lock_count.0,
            self.lock_count.1,
            self.holds.0,
            self.holds.1
        );
        for ((class, name), r) in most_first(self.lines.iter()) {
            let _ = writeln!(
                out,
                "x line {} {} {} {} {}",
                class.name(),
                name,
                r.objects,
                r.writers,
                r.events
            );
            funcs(&mut out, r, top);
        }
        for ((class, name, kind), r) in most_first(self.locks.iter()) {
            let _ = writeln!(
                out,
                "x lock {} {} {} {} {} {} {} {}",
                class.name(),
                name,
                kind.name(),
                r.objects,
                r.writers,
                r.events,
                r.holds,
                r.hold_insns
            );
            funcs(&mut out, r, top);
        }
        out
    }
}

fn most_first<'a, K: Ord + 'a>(it: impl Iterator<Item = (&'a K, &'a Row)>) -> Vec<(&'a K, &'a Row)> {
    let mut v: Vec<_> = it.collect();
    v.sort_by(|a, b| b.1.events.cmp(&a.1.events).then(a.0.cmp(b.0)));
    v
}

fn funcs(out: &mut String, r: &Row, top: usize) {
    let mut fs: Vec<(&String, &u64)> = r.funcs.iter().collect();
    fs.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    let rest: u64 = fs.iter().skip(top).map(|f| *f.1).sum();
    for (f, n) in fs.iter().take(top) {
        let _ = writeln!(out, "xf {f} {n}");
    }
    if rest > 0 {
        let _ = writeln!(out, "xf [rest] {rest}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn syms() -> Symbols {
        Symbols::parse(
            "ffffffff81000000 100 copy_process\nffffffff81000100 100 _raw_spin_lock\n\
             ffffffff81000200 100 _raw_spin_unlock\nffffffff81000300 100 down_write\n\
             ffffffff81000400 100 unlink_file_vma_batch_process\nffffffff81000500 100 up_write\n",
        )
        .unwrap()
    }

    fn data() -> Data {
        // a per-CPU symbol at 0x1000 (left out), two objects in the image
        Data::new(
            Symbols::parse("1000 8 pcpu_hot\nffffffff82000000 40 counter_x\nffffffff82000040 8 tasklist_lock\n")
                .unwrap(),
        )
    }

    const HEAP: u64 = 0xffff_8880_0123_4000;

    #[test]
    fn writers_count_any_number_of_vcpus() {
        let mut w = Writers::One(3);
        w.add(3);
        assert_eq!(w.count(), 1);
        for v in [0, 447, 200, 447] {
            w.add(v);
        }
        assert_eq!(w.count(), 4, "0, 3, 200 and 447");
    }

    #[test]
    fn static_data_is_named_and_the_per_cpu_section_is_not_static() {
        let d = data();
        assert_eq!(d.name(0xffff_ffff_8200_0008).as_deref(), Some("counter_x+0x8"));
        assert_eq!(d.name(0xffff_ffff_8200_0040).as_deref(), Some("tasklist_lock+0x0"));
        assert_eq!(d.name(0x1000), None, "per-CPU symbols are linked at 0");
        assert_eq!(d.name(HEAP), None);
        assert!(!d.is_static(0xffff_ffff_8200_0048), "past the last object");
    }

    #[test]
    fn a_line_is_shared_by_its_writers_or_by_being_static_whatever_the_order() {
        let (s, d) = (syms(), data());
        let copy = 0;
        // vCPU order 0,1,0 and 1,0,0 give the same rows
        let orders: [[u16; 3]; 2] = [[0, 1, 0], [1, 0, 0]];
        let mut seen = Vec::new();
        for order in orders {
            let mut st = State::default();
            st.opened();
            for v in order {
                st.rmw(v, HEAP + 8, copy); // a heap line both write
            }
            st.rmw(0, HEAP + 0x100, copy); // a heap line only vCPU 0 writes: private
            st.rmw(0, 0xffff_ffff_8200_0000, copy); // a static line: shared with one writer
            st.closed(&s, &d);
            seen.push(st.last.clone());
        }
        assert_eq!(
            seen[0], seen[1],
            "the classification does not depend on the interleaving"
        );
        let r = &seen[0];
        assert_eq!((r.rmws, r.line_count, r.vcpus), ((5, 4), (3, 2), 2));
        let heap = &r.lines[&(Class::Heap, "copy_process".to_string())];
        assert_eq!((heap.objects, heap.writers, heap.events), (1, 2, 3));
        let stat = &r.lines[&(Class::Static, "counter_x+0x0".to_string())];
        assert_eq!((stat.writers, stat.events), (1, 1));
        assert_eq!(r.lines.len(), 2, "the private line has no row");
    }

    #[test]
    fn locks_are_counted_per_caller_and_held_on_their_vcpu() {
        let (s, d) = (syms(), data());
        let tl = 0xffff_ffff_8200_0040;
        let unlink = s.find("unlink_file_vma_batch_process").unwrap() as u32;
        let mut st = State::default();
        st.opened();
        st.acquire(0, tl, LockKind::Write, 0, 100, true);
        st.release(0, tl, LockKind::Write, 130);
        st.acquire(1, tl, LockKind::Write, 0, 200, true);
        st.rmw(0, HEAP, 0); // vCPU 0 runs while vCPU 1 holds it: its hold is not measured
        st.release(1, tl, LockKind::Write, 900);
        st.acquire(0, HEAP + 64, LockKind::RwsemWrite, unlink, 1000, true);
        st.acquire(1, HEAP + 64, LockKind::RwsemWrite, unlink, 1100, true);
        st.acquire(0, HEAP + 128, LockKind::Spin, unlink, 1200, false); // private heap lock
        st.closed(&s, &d);
        let r = &st.last;
        let t = &r.locks[&(Class::Static, "tasklist_lock+0x0".to_string(), LockKind::Write)];
        assert_eq!((t.events, t.writers, t.holds, t.hold_insns), (2, 2, 1, 30));
        assert_eq!(r.holds, (1, 1), "one measured, one across a turn");
        let i = &r.locks[&(
            Class::Heap,
            "unlink_file_vma_batch_process".to_string(),
            LockKind::RwsemWrite,
        )];
        assert_eq!((i.events, i.objects), (2, 1));
        assert_eq!((r.acqs, r.lock_count), ((5, 4), (3, 2)));
        let text = r.render(&Watch::of(&s), 1);
        assert!(
            text.starts_with("x watch 2 2 _raw_spin_lock,down_write\nx summary 2 1 0 1 0 5 4 3 2 1 1\n"),
            "{text}"
        );
        assert!(
            text.contains("x lock static tasklist_lock+0x0 write 1 2 2 1 30\nxf copy_process 2\n"),
            "{text}"
        );
        // the total adds windows by name
        st.opened();
        st.acquire(0, tl, LockKind::Write, 0, 0, true);
        st.closed(&s, &d);
        assert_eq!(
            st.total.locks[&(Class::Static, "tasklist_lock+0x0".to_string(), LockKind::Write)].events,
            3
        );
        assert_eq!(st.total.acqs, (6, 5));
    }

    #[test]
    fn the_watch_finds_the_kernels_lock_functions() {
        let w = Watch::of(&syms());
        assert_eq!(w.roles.get(&1), Some(&Role::Acquire(LockKind::Spin, true)));
        assert_eq!(w.roles.get(&2), Some(&Role::Release(LockKind::Spin)));
        assert_eq!(w.roles.get(&3), Some(&Role::Acquire(LockKind::RwsemWrite, true)));
        assert_eq!(w.holds, ["_raw_spin_lock", "down_write"]);
        // an irqsave lock whose irqrestore unlock is not a function: no hold
        let s = Symbols::parse("ffffffff81000000 100 _raw_spin_lock_irqsave\nffffffff81000100 100 _raw_spin_unlock\n")
            .unwrap();
        let w = Watch::of(&s);
        assert_eq!(w.roles.get(&0), Some(&Role::Acquire(LockKind::Spin, false)));
        assert!(w.holds.is_empty());
        assert_eq!(
            LockKind::Write.release_of("_raw_write_lock_irq"),
            "_raw_write_unlock_irq"
        );
        assert_eq!(
            LockKind::Spin.release_of("_raw_spin_lock_irqsave_nested"),
            "_raw_spin_unlock_irqrestore"
        );
    }
}
