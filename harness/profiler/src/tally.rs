//! Pure bookkeeping: what one translated block is made of, the measurement
//! window over per-block execution counts, and the profile text.

use std::collections::HashMap;
use std::fmt::Write as _;

use crate::symbols::Symbols;

/// A run of consecutive instructions of one function (or bucket) in a block.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Seg {
    /// Function or bucket index.
    pub func: u32,
    /// Instructions.
    pub insns: u32,
    /// Atomic read-modify-write instructions.
    pub locks: u32,
    /// `pause` instructions.
    pub pauses: u32,
}

/// The static composition of a translated block: every execution of the
/// block adds this much. Two blocks of equal composition may share one
/// execution counter.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Comp {
    /// Instruction runs per function.
    pub segs: Vec<Seg>,
    /// Functions whose first instruction is in the block.
    pub entries: Vec<u32>,
    /// Direct calls and jumps from a function to another function's first
    /// instruction: (from, to).
    pub edges: Vec<(u32, u32)>,
}

impl Comp {
    /// Appends one instruction of `func`.
    pub fn push(&mut self, func: u32, lock: bool, pause: bool) {
        match self.segs.last_mut() {
            Some(s) if s.func == func => {
                s.insns += 1;
                s.locks += lock as u32;
                s.pauses += pause as u32;
            }
            _ => self.segs.push(Seg {
                func,
                insns: 1,
                locks: lock as u32,
                pauses: pause as u32,
            }),
        }
    }

    /// Instructions in the block.
    pub fn insns(&self) -> u64 {
        self.segs.iter().map(|s| s.insns as u64).sum()
    }
}

/// Counts per function (and bucket), signed so that corrections can be
/// applied.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Totals {
    /// Instructions executed.
    pub insns: Vec<i64>,
    /// Executions of the first instruction.
    pub calls: Vec<i64>,
    /// Atomic read-modify-write instructions executed.
    pub locks: Vec<i64>,
    /// `pause` instructions executed.
    pub pauses: Vec<i64>,
    /// Direct call/jump edges (from, to) executed.
    pub edges: HashMap<(u32, u32), i64>,
}

impl Totals {
    /// All zero for `slots` functions and buckets.
    pub fn new(slots: usize) -> Totals {
        Totals {
            insns: vec![0; slots],
            calls: vec![0; slots],
            locks: vec![0; slots],
            pauses: vec![0; slots],
            edges: HashMap::new(),
        }
    }

    /// Adds `times` executions of a block of composition `c`.
    pub fn add(&mut self, c: &Comp, times: i64) {
        if times == 0 {
            return;
        }
        for s in &c.segs {
            let f = s.func as usize;
            self.insns[f] += times * s.insns as i64;
            self.locks[f] += times * s.locks as i64;
            self.pauses[f] += times * s.pauses as i64;
        }
        for &e in &c.entries {
            self.calls[e as usize] += times;
        }
        for &e in &c.edges {
            *self.edges.entry(e).or_insert(0) += times;
        }
    }
}

/// The composition of the part of a block from a marker instruction on,
/// used to make a window start or end exactly at the marker: `from` is the
/// marker and what follows it, `after` only what follows it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Tail {
    /// From the marker (included) to the end of the block.
    pub from: Comp,
    /// After the marker to the end of the block.
    pub after: Comp,
}

/// The window over per-slot execution counters. A block's counter is
/// incremented when the block is entered, before its first instruction, so
/// at a marker the counters already hold the whole block the marker is in:
/// opening adds the marker's tail (`Tail::from`), closing removes what
/// follows the marker (`Tail::after`). The window thus covers exactly the
/// instructions from the opening marker to the closing marker, both
/// included.
#[derive(Debug, Clone, Default)]
pub struct Window {
    base: Vec<u64>,
    acc: Vec<u64>,
    corrections: Vec<(Comp, i64)>,
    open_from: Comp,
    open: bool,
    last: Vec<u64>,
    last_corrections: Vec<(Comp, i64)>,
    /// Windows closed so far.
    pub windows: u64,
    /// Sum of the op counts the closing markers gave (0: none given).
    pub ops: u64,
    /// Closing markers that gave no op count.
    pub ops_missing: u64,
    /// The op count the last closing marker gave.
    pub last_ops: u64,
}

impl Window {
    /// Is a window open?
    pub fn is_open(&self) -> bool {
        self.open
    }

    /// Opens a window at a marker, given every slot's counter now.
    /// Returns false (and does nothing) if one is already open.
    pub fn open(&mut self, now: Vec<u64>, tail: &Tail) -> bool {
        if self.open {
            return false;
        }
        self.base = now;
        self.open_from = tail.from.clone();
        self.open = true;
        true
    }

    /// Closes the open window at a marker; `ops` is the benchmark's op count
    /// for it (0: not given). Returns false if none was open.
    pub fn close(&mut self, now: &[u64], tail: &Tail, ops: u64) -> bool {
        if !self.open {
            return false;
        }
        if self.acc.len() < now.len() {
            self.acc.resize(now.len(), 0);
        }
        self.last = now
            .iter()
            .enumerate()
            .map(|(i, &n)| n - self.base.get(i).copied().unwrap_or(0))
            .collect();
        for (a, d) in self.acc.iter_mut().zip(&self.last) {
            *a += d;
        }
        self.last_corrections = vec![(std::mem::take(&mut self.open_from), 1), (tail.after.clone(), -1)];
        self.corrections.extend(self.last_corrections.iter().cloned());
        self.open = false;
        self.base.clear();
        self.windows += 1;
        self.last_ops = ops;
        if ops == 0 {
            self.ops_missing += 1;
        } else {
            self.ops += ops;
        }
        true
    }

    /// The closed windows' totals, given each slot's composition.
    pub fn totals(&self, comps: &[Comp], slots: usize) -> Totals {
        Self::sum(&self.acc, &self.corrections, comps, slots)
    }

    /// The last closed window's totals alone.
    pub fn last_totals(&self, comps: &[Comp], slots: usize) -> Totals {
        Self::sum(&self.last, &self.last_corrections, comps, slots)
    }

    fn sum(counts: &[u64], corrections: &[(Comp, i64)], comps: &[Comp], slots: usize) -> Totals {
        let mut t = Totals::new(slots);
        for (i, &n) in counts.iter().enumerate() {
            t.add(&comps[i], n as i64);
        }
        for (c, k) in corrections {
            t.add(c, *k);
        }
        t
    }
}

/// How callers are found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Callers {
    /// Not reported.
    Off,
    /// Free: direct calls and jumps, counted with the calling block; entries
    /// by any other way (indirect call or jump, exception, fall-through) go
    /// to the caller `[indirect]`.
    Static,
    /// Exact: every function entry reads the return address at the stack
    /// pointer (a callback per entry).
    Full,
}

impl Callers {
    /// Name as in the plugin argument and the profile header.
    pub fn name(self) -> &'static str {
        match self {
            Callers::Off => "off",
            Callers::Static => "static",
            Callers::Full => "full",
        }
    }
}

/// Everything the profile header says besides the totals.
#[derive(Debug, Clone)]
pub struct Header {
    /// `marker` or `all`.
    pub mode: &'static str,
    /// Closed windows (1 for `all`).
    pub windows: u64,
    /// A window was open when the profile was written (not counted).
    pub unclosed: bool,
    /// Op count from the closing markers, 0 if none.
    pub ops: u64,
    /// Closing markers without an op count.
    pub ops_missing: u64,
    /// Callers mode.
    pub callers: Callers,
    /// Top callers kept per function.
    pub top: usize,
    /// vCPUs.
    pub vcpus: u32,
    /// Translated blocks seen / distinct compositions (counters).
    pub blocks: u64,
    /// Distinct compositions.
    pub counters: u64,
}

/// Format version of the profile text: 2 ends with the [`seal`] trailer.
pub const FORMAT: u32 = 2;

/// The whole profile `text` (every section) with its trailer, `end N`, N
/// the lines before it: a reader refuses a file cut short or with lines
/// dropped.
pub fn seal(mut text: String) -> String {
    let lines = text.lines().count();
    let _ = writeln!(text, "end {lines}");
    text
}

/// Renders the profile: header lines `key value...`, then one `f` line per
/// function or bucket with a nonzero count, most instructions first:
/// `f NAME INSNS CALLS LOCKS PAUSES`, each followed by up to `top` caller
/// lines `c NAME COUNT` (most first, then `c [rest] COUNT` for the others).
/// `dynamic` holds (callee, caller) counts when callers are `Full`.
pub fn render(h: &Header, t: &Totals, syms: &Symbols, dynamic: &HashMap<(u32, u32), u64>) -> String {
    let kernel = |v: &[i64]| -> i64 { (0..syms.len()).map(|i| v[i]).sum() };
    let all = |v: &[i64]| -> i64 { v.iter().sum() };
    let mut out = String::new();
    let _ = writeln!(out, "harness-profile {FORMAT}");
    let _ = writeln!(out, "mode {}", h.mode);
    let _ = writeln!(out, "windows {}", h.windows);
    let _ = writeln!(out, "unclosed {}", h.unclosed as u8);
    let _ = writeln!(out, "ops {} missing {}", h.ops, h.ops_missing);
    let _ = writeln!(out, "vcpus {}", h.vcpus);
    let _ = writeln!(out, "callers {} top {}", h.callers.name(), h.top);
    let _ = writeln!(out, "blocks {} counters {}", h.blocks, h.counters);
    let _ = writeln!(out, "functions {}", syms.len());
    let _ = writeln!(
        out,
        "total {} {} {} {}",
        all(&t.insns),
        all(&t.calls),
        all(&t.locks),
        all(&t.pauses)
    );
    let _ = writeln!(
        out,
        "kernel {} {} {} {}",
        kernel(&t.insns),
        kernel(&t.calls),
        kernel(&t.locks),
        kernel(&t.pauses)
    );

    // callers per callee
    let mut by_callee: HashMap<u32, Vec<(u32, i64)>> = HashMap::new();
    match h.callers {
        Callers::Off => {}
        Callers::Static => {
            for (&(from, to), &n) in &t.edges {
                if n != 0 {
                    by_callee.entry(to).or_default().push((from, n));
                }
            }
        }
        Callers::Full => {
            for (&(to, from), &n) in dynamic {
                by_callee.entry(to).or_default().push((from, n as i64));
            }
        }
    }

    let mut order: Vec<usize> = (0..syms.slots())
        .filter(|&i| t.insns[i] != 0 || t.calls[i] != 0 || t.locks[i] != 0 || t.pauses[i] != 0)
        .collect();
    order.sort_by(|&a, &b| {
        t.insns[b]
            .cmp(&t.insns[a])
            .then(t.calls[b].cmp(&t.calls[a]))
            .then(a.cmp(&b))
    });
    for i in order {
        let _ = writeln!(
            out,
            "f {} {} {} {} {}",
            syms.name(i as u32),
            t.insns[i],
            t.calls[i],
            t.locks[i],
            t.pauses[i]
        );
        if h.callers == Callers::Off || t.calls[i] == 0 {
            continue;
        }
        let mut cs = by_callee.remove(&(i as u32)).unwrap_or_default();
        let known: i64 = cs.iter().map(|c| c.1).sum();
        let mut named: Vec<(String, i64)> = cs.drain(..).map(|(f, n)| (syms.name(f).to_string(), n)).collect();
        if h.callers == Callers::Static && t.calls[i] > known {
            named.push(("[indirect]".into(), t.calls[i] - known));
        }
        named.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        let rest: i64 = named.iter().skip(h.top).map(|c| c.1).sum();
        for (name, n) in named.iter().take(h.top) {
            let _ = writeln!(out, "c {name} {n}");
        }
        if rest != 0 {
            let _ = writeln!(out, "c [rest] {rest}");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn syms() -> Symbols {
        Symbols::parse("ffffffff81000000 100 f0\nffffffff81000100 100 f1\nffffffff81000200 100 f2\n").unwrap()
    }

    #[test]
    fn comp_merges_runs() {
        let mut c = Comp::default();
        c.push(1, false, false);
        c.push(1, true, false);
        c.push(2, false, true);
        c.push(1, false, false);
        assert_eq!(
            c.segs,
            vec![
                Seg {
                    func: 1,
                    insns: 2,
                    locks: 1,
                    pauses: 0
                },
                Seg {
                    func: 2,
                    insns: 1,
                    locks: 0,
                    pauses: 1
                },
                Seg {
                    func: 1,
                    insns: 1,
                    locks: 0,
                    pauses: 0
                }
            ]
        );
        assert_eq!(c.insns(), 4);
    }

    #[test]
    fn window_counts_exactly_between_markers() {
        let s = syms();
        let user = s.bucket(crate::symbols::Bucket::User);
        // slot 0: a user block of 10 insns with the marker at index 3
        let mut marker = Comp::default();
        for _ in 0..10 {
            marker.push(user, false, false);
        }
        let mut from = Comp::default();
        for _ in 3..10 {
            from.push(user, false, false);
        }
        let mut after = Comp::default();
        for _ in 4..10 {
            after.push(user, false, false);
        }
        let tail = Tail { from, after };
        // slot 1: a kernel block entering f1, calling f2 from f1
        let mut k = Comp::default();
        k.push(1, false, false);
        k.push(1, true, false);
        k.entries.push(1);
        k.edges.push((1, 2));
        let comps = vec![marker, k];

        let mut w = Window::default();
        assert!(!w.close(&[0, 0], &tail, 0));
        // before the window: 5 kernel executions; the marker block entered once
        assert!(w.open(vec![1, 5], &tail));
        assert!(!w.open(vec![1, 5], &tail));
        // inside: 7 kernel executions; the closing marker block entered once
        assert!(w.close(&[2, 12], &tail, 7));
        let t = w.totals(&comps, s.slots());
        // user: 7 (marker and after it, at open) + 4 (up to the closing marker)
        assert_eq!(t.insns[user as usize], 11);
        assert_eq!(t.insns[1], 14);
        assert_eq!(t.locks[1], 7);
        assert_eq!(t.calls[1], 7);
        assert_eq!(t.edges[&(1, 2)], 7);
        assert_eq!((w.windows, w.ops, w.ops_missing), (1, 7, 0));

        // a second window, with a slot created inside it (no base value)
        assert!(w.open(vec![3, 20], &tail));
        assert!(w.close(&[4, 21, 0], &tail, 0));
        let mut comps3 = comps.clone();
        comps3.push(Comp::default());
        let t = w.totals(&comps3, s.slots());
        assert_eq!(t.insns[1], 16);
        assert_eq!(t.insns[user as usize], 22);
        let last = w.last_totals(&comps3, s.slots());
        assert_eq!((last.insns[1], last.insns[user as usize], last.calls[1]), (2, 11, 1));
        assert_eq!((w.windows, w.ops, w.ops_missing), (2, 7, 1));
    }

    #[test]
    fn render_format() {
        let s = syms();
        let mut t = Totals::new(s.slots());
        t.insns[0] = 100;
        t.calls[0] = 10;
        t.insns[2] = 300;
        t.calls[2] = 5;
        t.locks[2] = 2;
        t.pauses[2] = 1;
        t.insns[s.bucket(crate::symbols::Bucket::User) as usize] = 50;
        t.edges.insert((0, 2), 3);
        t.edges.insert((1, 2), 1);
        let h = Header {
            mode: "marker",
            windows: 1,
            unclosed: false,
            ops: 5,
            ops_missing: 0,
            callers: Callers::Static,
            top: 1,
            vcpus: 2,
            blocks: 9,
            counters: 4,
        };
        let got = render(&h, &t, &s, &HashMap::new());
        let want =
            "harness-profile 2\nmode marker\nwindows 1\nunclosed 0\nops 5 missing 0\nvcpus 2\ncallers static top 1\n\
                    blocks 9 counters 4\nfunctions 3\ntotal 450 15 2 1\nkernel 400 15 2 1\n\
                    f f2 300 5 2 1\nc f0 3\nc [rest] 2\nf f0 100 10 0 0\nc [indirect] 10\nf [user] 50 0 0 0\n";
        assert_eq!(got, want);
        assert_eq!(seal(got), format!("{want}end 17\n"));
    }
}
