//! Kernel profiles from the `harness-profiler` QEMU plugin
//! (`harness/profiler/`): reading a profile file, normalising it per
//! benchmark operation, the differential profile of base against a variant
//! over several boots ([`diff`]), a variant's growth against base's across
//! vCPU counts ([`scaling`]), and the symbols file the plugin reads,
//! written from a variant's `vmlinux` ([`symbols`]).
//!
//! Pure: nothing here runs a process; [`read`] and
//! [`symbols::write_symbols`] only read and write files.

pub mod contention;
pub mod diff;
pub mod scaling;
pub mod symbols;
pub mod work;

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{bail, Context, Result};

/// The profile format version the plugin writes; this module reads it and
/// format 1 (the same lines without the `end` trailer, from older runs).
pub const FORMAT: u32 = 2;

/// Executed counts of one function, one bucket, or a sum.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// Instructions executed.
    pub insns: u64,
    /// Executions of the function's first instruction.
    pub calls: u64,
    /// Atomic read-modify-write instructions (`lock` prefix, `xchg` with memory).
    pub locks: u64,
    /// `pause` instructions.
    pub pauses: u64,
}

/// One `f` line and its `c` lines.
#[derive(Debug, Clone, PartialEq)]
pub struct Function {
    /// Kernel symbol, or a bucket: `[user]`, `[module]`, `[other]`.
    pub name: String,
    /// Its counts.
    pub counts: Counts,
    /// Top callers and their call counts, most first; `[indirect]` (entered
    /// other than by a direct call or jump), `[rest]` (callers beyond the top
    /// ones), `[?]` (stack unreadable) are pseudo-callers.
    pub callers: Vec<(String, u64)>,
}

/// A parsed profile file.
#[derive(Debug, Clone, PartialEq)]
pub struct Profile {
    /// `marker` (guest-marked windows) or `all` (the whole run).
    pub mode: String,
    /// Windows counted.
    pub windows: u64,
    /// A window was still open when the file was written (not counted).
    pub unclosed: bool,
    /// Op count the guest gave at the closing markers (0: none).
    pub ops: u64,
    /// Closing markers that gave no op count.
    pub ops_missing: u64,
    /// vCPUs.
    pub vcpus: u32,
    /// `off`, `static` or `full`.
    pub callers: String,
    /// All instructions (kernel, user, other).
    pub total: Counts,
    /// Kernel functions only (no bucket).
    pub kernel: Counts,
    /// Functions and buckets with a nonzero count, most instructions first.
    pub functions: Vec<Function>,
    /// System calls by x86-64 syscall number (`s` lines; a plugin run with
    /// `syscalls=on`), empty otherwise.
    pub syscalls: BTreeMap<u32, Syscall>,
    /// Contention counts (`x` lines; a plugin run with `contention=on`).
    pub contention: Option<contention::Contention>,
}

/// One syscall number's calls in a window: what each counted call executed
/// from `entry_SYSCALL_64` to its return to user space, on its vCPU.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Syscall {
    /// Calls that returned to user space inside the window.
    pub calls: u64,
    /// Their instructions, summed.
    pub insns: u64,
    /// Calls during which their vCPU switched tasks (blocked, preempted, or
    /// exited on a signal): not counted.
    pub dropped: u64,
}

/// The x86-64 syscall number of the syscalls a benchmark's unit of work
/// names (a `__x64_sys_NAME` handler's NAME), for the per-call metrics.
pub fn syscall_number(name: &str) -> Option<u32> {
    const TABLE: &[(&str, u32)] = &[
        ("getppid", 110),
        ("getpriority", 140),
        ("setpriority", 141),
        ("getrlimit", 97),
        ("setrlimit", 160),
        ("prlimit64", 302),
    ];
    TABLE.iter().find(|(n, _)| *n == name).map(|&(_, nr)| nr)
}

fn num(s: Option<&str>, what: &str, line: usize) -> Result<u64> {
    let s = s.with_context(|| format!("line {line}: {what} missing"))?;
    let n = s
        .parse::<u64>()
        .with_context(|| format!("line {line}: {what} {s:?} is not a count"))?;
    bounded(n, what, line)
}

/// The largest count a profile line may hold: 2^53 instructions would be
/// 100 guest days at 10^9 a second, so no real profile comes near it, and
/// sums of up to 2^10 such counts fit a u64 without wrapping.
pub const MAX_COUNT: u64 = 1 << 53;

/// `n` if it is at most [`MAX_COUNT`].
pub(crate) fn bounded(n: u64, what: &str, line: usize) -> Result<u64> {
    if n > MAX_COUNT {
        bail!(
            "line {line}: {what} {n} is past 2^53, which no real profile holds: the file was made or damaged by hand"
        );
    }
    Ok(n)
}

fn counts(f: &[&str], line: usize) -> Result<Counts> {
    Ok(Counts {
        insns: num(f.first().copied(), "instructions", line)?,
        calls: num(f.get(1).copied(), "calls", line)?,
        locks: num(f.get(2).copied(), "locks", line)?,
        pauses: num(f.get(3).copied(), "pauses", line)?,
    })
}

/// Parses profile text (see `harness/profiler/README.md`). A format-2
/// file must end with its `end N` trailer, N the lines before it, and its
/// contention rows must add up to their summary: a file cut short, or with
/// lines dropped, is refused rather than read as fewer rows.
pub fn parse(text: &str) -> Result<Profile> {
    let version = match text.lines().next() {
        Some(l) if l.split_whitespace().next() == Some("harness-profile") => {
            let v = num(l.split_whitespace().nth(1), "format version", 1)?;
            if v != 1 && v != FORMAT as u64 {
                bail!("profile format {v}, this harness reads formats 1 and {FORMAT}");
            }
            v
        }
        _ => bail!("not a harness profile (no `harness-profile` first line)"),
    };
    let body = if version >= 2 { sealed(text)? } else { text };
    let mut p = Profile {
        mode: String::new(),
        windows: 0,
        unclosed: false,
        ops: 0,
        ops_missing: 0,
        vcpus: 0,
        callers: String::new(),
        total: Counts::default(),
        kernel: Counts::default(),
        functions: Vec::new(),
        syscalls: BTreeMap::new(),
        contention: None,
    };
    for (n, l) in body.lines().enumerate().skip(1) {
        if l.chars().any(|c| c.is_control() && c != '\t') {
            bail!(
                "line {}: control characters (a name the plugin never writes; the file was damaged)",
                n + 1
            );
        }
        let f: Vec<&str> = l.split_whitespace().collect();
        if let Some((&key, rest)) = f.split_first() {
            line(&mut p, key, rest, n + 1)?;
        }
    }
    if version >= 2 {
        if let Some(c) = &p.contention {
            c.check_sums()?;
        }
    }
    Ok(p)
}

/// The lines of `text` before its `end N` trailer, checked to number N.
fn sealed(text: &str) -> Result<&str> {
    let t = text.strip_suffix('\n').unwrap_or(text);
    let (body, last) = t.rsplit_once('\n').unwrap_or(("", t));
    let Some(n) = last.strip_prefix("end ") else {
        bail!("the file is cut short: it does not end with its `end` line (the plugin did not finish writing it, or it was damaged since)");
    };
    let want: usize = n
        .trim()
        .parse()
        .with_context(|| format!("its `end` line says {n:?}, not a count of lines"))?;
    let have = body.lines().count();
    if have != want {
        bail!("the file has {have} lines before its `end` line, which says {want}: lines were lost or added since the plugin wrote it");
    }
    Ok(body)
}

/// One line of a profile after the first: `key rest...` at line `n`.
fn line(p: &mut Profile, key: &str, rest: &[&str], n: usize) -> Result<()> {
    let first = || rest.first().copied();
    match key {
        "mode" => p.mode = first().unwrap_or("").to_string(),
        "windows" => p.windows = num(first(), "windows", n)?,
        "unclosed" => p.unclosed = num(first(), "unclosed", n)? != 0,
        "ops" => {
            p.ops = num(first(), "ops", n)?;
            p.ops_missing = num(rest.get(2).copied(), "ops missing", n)?;
        }
        "vcpus" => p.vcpus = num(first(), "vcpus", n)? as u32,
        "callers" => p.callers = first().unwrap_or("").to_string(),
        "total" => p.total = counts(rest, n)?,
        "kernel" => p.kernel = counts(rest, n)?,
        "f" => {
            let name = first().with_context(|| format!("line {n}: function name missing"))?;
            p.functions.push(Function {
                name: name.to_string(),
                counts: counts(&rest[1..], n)?,
                callers: Vec::new(),
            });
        }
        "c" => {
            let name = first().with_context(|| format!("line {n}: caller name missing"))?;
            let count = num(rest.get(1).copied(), "caller count", n)?;
            let f = p
                .functions
                .last_mut()
                .with_context(|| format!("line {n}: caller line before any function"))?;
            f.callers.push((name.to_string(), count));
        }
        "s" => {
            let nr = num(first(), "syscall number", n)? as u32;
            let s = Syscall {
                calls: num(rest.get(1).copied(), "syscall calls", n)?,
                insns: num(rest.get(2).copied(), "syscall instructions", n)?,
                dropped: num(rest.get(3).copied(), "dropped syscalls", n)?,
            };
            p.syscalls.insert(nr, s);
        }
        "x" => p.contention.get_or_insert_with(Default::default).line(rest, n)?,
        "xf" => p
            .contention
            .as_mut()
            .with_context(|| format!("line {n}: function line before any contention line"))?
            .func(rest, n)?,
        // informational header lines (blocks, functions) and future keys
        _ => {}
    }
    Ok(())
}

/// The largest profile file read: the plugin's are kilobytes to a few
/// megabytes (every executed function with its callers).
pub const MAX_BYTES: u64 = 256 << 20;

/// Reads and parses a profile file: a regular file of at most
/// [`MAX_BYTES`], UTF-8 (a byte that is not is named by its offset).
pub fn read(path: &Path) -> Result<Profile> {
    let bytes = crate::util::read_capped(path, MAX_BYTES)?;
    let text = String::from_utf8(bytes).map_err(|e| {
        anyhow::anyhow!(
            "profile {}: byte {} is not UTF-8: the file was damaged after the plugin wrote it",
            path.display(),
            e.utf8_error().valid_up_to()
        )
    })?;
    parse(&text).with_context(|| format!("profile {}", path.display()))
}

/// The sum of several windows' profiles (one boot's measured
/// repetitions): every count added, functions by name (most instructions
/// first), callers by name; `None` for none. Its per-op values are the
/// boot's whole instructions over its whole op count.
pub fn sum(profiles: &[Profile]) -> Option<Profile> {
    let (first, rest) = profiles.split_first()?;
    let add = |a: &mut Counts, b: &Counts| {
        a.insns += b.insns;
        a.calls += b.calls;
        a.locks += b.locks;
        a.pauses += b.pauses;
    };
    let mut p = first.clone();
    let mut by_name: BTreeMap<String, (Counts, BTreeMap<String, u64>)> = BTreeMap::new();
    for q in profiles {
        for f in &q.functions {
            let e = by_name.entry(f.name.clone()).or_default();
            add(&mut e.0, &f.counts);
            for (c, k) in &f.callers {
                *e.1.entry(c.clone()).or_default() += k;
            }
        }
    }
    for q in rest {
        p.windows += q.windows;
        p.unclosed |= q.unclosed;
        p.ops += q.ops;
        p.ops_missing += q.ops_missing;
        add(&mut p.total, &q.total);
        add(&mut p.kernel, &q.kernel);
        for (nr, c) in &q.syscalls {
            let e = p.syscalls.entry(*nr).or_default();
            e.calls += c.calls;
            e.insns += c.insns;
            e.dropped += c.dropped;
        }
        if let Some(c) = &q.contention {
            p.contention.get_or_insert_with(Default::default).add(c);
        }
    }
    p.functions = by_name
        .into_iter()
        .map(|(name, (counts, callers))| {
            let mut callers: Vec<(String, u64)> = callers.into_iter().collect();
            callers.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
            Function { name, counts, callers }
        })
        .collect();
    p.functions
        .sort_by(|a, b| b.counts.insns.cmp(&a.counts.insns).then(a.name.cmp(&b.name)));
    Some(p)
}

/// One function's counts per benchmark operation.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FnPerOp {
    /// Instructions per op.
    pub insns: f64,
    /// Calls per op.
    pub calls: f64,
    /// Atomic read-modify-write instructions per op.
    pub locks: f64,
    /// `pause` instructions per op.
    pub pauses: f64,
    /// Calls per op by caller.
    pub callers: BTreeMap<String, f64>,
}

/// A profile per benchmark operation: one boot's value of every function.
#[derive(Debug, Clone, PartialEq)]
pub struct PerOp {
    /// The op count it was divided by.
    pub ops: f64,
    /// All instructions per op (the op's whole cost in instructions).
    pub total_insns: f64,
    /// Kernel-function instructions per op.
    pub kernel_insns: f64,
    /// Per function (and bucket).
    pub functions: BTreeMap<String, FnPerOp>,
    /// Contention counts per op, when the plugin counted them.
    pub contention: Option<contention::PerOp>,
}

impl Profile {
    /// Divides every count by the op count: `ops` if given, else the op
    /// count the guest passed at its closing markers. Refused for a profile
    /// with no closed window, one with an unclosed window, or no op count.
    pub fn per_op(&self, ops: Option<u64>) -> Result<PerOp> {
        if self.windows == 0 {
            bail!("the profile has no closed window (did the guest run the markers?)");
        }
        if self.unclosed {
            bail!("a window was still open when the profile was written");
        }
        let ops = match ops {
            Some(n) => n,
            None if self.ops_missing == 0 => self.ops,
            None => bail!(
                "{} closing marker(s) gave no op count and none was passed",
                self.ops_missing
            ),
        };
        if ops == 0 {
            bail!("op count 0");
        }
        let d = ops as f64;
        let functions = self
            .functions
            .iter()
            .map(|f| {
                let c = &f.counts;
                let per = FnPerOp {
                    insns: c.insns as f64 / d,
                    calls: c.calls as f64 / d,
                    locks: c.locks as f64 / d,
                    pauses: c.pauses as f64 / d,
                    callers: f.callers.iter().map(|(n, k)| (n.clone(), *k as f64 / d)).collect(),
                };
                (f.name.clone(), per)
            })
            .collect();
        Ok(PerOp {
            ops: d,
            total_insns: self.total.insns as f64 / d,
            kernel_insns: self.kernel.insns as f64 / d,
            functions,
            contention: self.contention.as_ref().map(|c| c.per_op(d)),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "harness-profile 1\nmode marker\nwindows 1\nunclosed 0\nops 10 missing 0\nvcpus 2\n\
        callers static top 8\nblocks 9 counters 4\nfunctions 3\ntotal 450 15 2 1\nkernel 400 15 2 1\n\
        f f2 300 5 2 1\nc f0 3\nc [rest] 2\nf f0 100 10 0 0\nc [indirect] 10\nf [user] 50 0 0 0\n\
        s 140 4 200 1\ns 302 2 90 0\n";

    #[test]
    fn parses_the_plugin_format() {
        let p = parse(TEXT).unwrap();
        assert_eq!(
            (p.mode.as_str(), p.windows, p.unclosed, p.ops, p.ops_missing, p.vcpus),
            ("marker", 1, false, 10, 0, 2)
        );
        assert_eq!(p.callers, "static");
        assert_eq!(
            p.total,
            Counts {
                insns: 450,
                calls: 15,
                locks: 2,
                pauses: 1
            }
        );
        assert_eq!(p.kernel.insns, 400);
        assert_eq!(p.functions.len(), 3);
        assert_eq!(p.functions[0].name, "f2");
        assert_eq!(
            p.functions[0].callers,
            vec![("f0".to_string(), 3), ("[rest]".to_string(), 2)]
        );
        assert_eq!(
            p.functions[2].counts,
            Counts {
                insns: 50,
                ..Counts::default()
            }
        );
        assert_eq!(
            p.syscalls[&140],
            Syscall {
                calls: 4,
                insns: 200,
                dropped: 1
            }
        );
        assert_eq!(p.syscalls[&302].insns, 90);
        assert_eq!(syscall_number("prlimit64"), Some(302));
        assert_eq!(syscall_number("nosuch"), None);
    }

    #[test]
    fn per_op_table() {
        let p = parse(TEXT).unwrap();
        // (ops argument, expected ops, f2 insns/op) or an error
        type Case = (Option<u64>, Option<(f64, f64)>);
        let cases: &[Case] = &[
            (None, Some((10.0, 30.0))),
            (Some(100), Some((100.0, 3.0))),
            (Some(0), None),
        ];
        for (arg, want) in cases {
            let got = p.per_op(*arg);
            match want {
                Some((ops, f2)) => {
                    let g = got.unwrap();
                    assert_eq!(g.ops, *ops);
                    assert_eq!(g.functions["f2"].insns, *f2);
                    assert_eq!(g.total_insns, 450.0 / ops);
                    assert_eq!(g.functions["f2"].callers["f0"], 3.0 / ops);
                }
                None => assert!(got.is_err(), "{arg:?}"),
            }
        }
        let mut q = p.clone();
        q.ops_missing = 1;
        assert!(q.per_op(None).is_err());
        assert!(q.per_op(Some(5)).is_ok());
        q.unclosed = true;
        assert!(q.per_op(Some(5)).is_err());
        let mut q = p.clone();
        q.windows = 0;
        assert!(q.per_op(Some(5)).is_err());
    }

    #[test]
    fn sum_adds_windows() {
        let p = parse(TEXT).unwrap();
        assert_eq!(sum(&[]), None);
        assert_eq!(sum(std::slice::from_ref(&p)).unwrap(), p);
        let other = TEXT.replace("ops 10", "ops 30").replace(
            "f f0 100 10 0 0\nc [indirect] 10",
            "f f0 900 10 0 0\nc [indirect] 10\nc f2 4",
        );
        let s = sum(&[p.clone(), parse(&other).unwrap()]).unwrap();
        assert_eq!((s.windows, s.ops, s.total.insns, s.kernel.insns), (2, 40, 900, 800));
        let names: Vec<(&str, u64)> = s.functions.iter().map(|f| (f.name.as_str(), f.counts.insns)).collect();
        assert_eq!(names, [("f0", 1000), ("f2", 600), ("[user]", 100)]);
        assert_eq!(
            s.functions[0].callers,
            vec![("[indirect]".to_string(), 20), ("f2".to_string(), 4)]
        );
        assert_eq!(s.per_op(None).unwrap().functions["f0"].insns, 25.0);
        assert_eq!(
            (s.syscalls[&140].calls, s.syscalls[&140].insns, s.syscalls[&302].calls),
            (8, 400, 4)
        );
    }

    #[test]
    fn rejects_other_text() {
        for bad in [
            "",
            "hello\n",
            "harness-profile 2\n",
            "harness-profile 1\nf x 1 2 3\n",
            "harness-profile 1\nc x 1\n",
            "harness-profile 1\nf x 1 2 3 y\n",
            "harness-profile 1\ns 302 1 x 0\n",
        ] {
            assert!(parse(bad).is_err(), "{bad:?}");
        }
    }

    /// The profile the plugin's own writers render
    /// (`harness-profiler`'s `golden` test writes and checks the same
    /// file): every section and line kind, read value by value. A format
    /// change on either side fails one of the two tests.
    #[test]
    fn reads_the_golden_profile() {
        use contention::{Class, Key, Object};
        let p = parse(include_str!("../../tests/fixtures/profile/golden.profile")).unwrap();
        assert_eq!(
            (
                p.mode.as_str(),
                p.windows,
                p.unclosed,
                p.ops,
                p.ops_missing,
                p.vcpus,
                p.callers.as_str()
            ),
            ("marker", 1, false, 5, 0, 2, "static")
        );
        let c = |insns, calls, locks, pauses| Counts {
            insns,
            calls,
            locks,
            pauses,
        };
        assert_eq!((p.total, p.kernel), (c(450, 15, 2, 1), c(400, 15, 2, 1)));
        type Row<'a> = (&'a str, Counts, Vec<(&'a str, u64)>);
        let fs: Vec<Row> = p
            .functions
            .iter()
            .map(|f| {
                (
                    f.name.as_str(),
                    f.counts,
                    f.callers.iter().map(|(n, k)| (n.as_str(), *k)).collect(),
                )
            })
            .collect();
        assert_eq!(
            fs,
            [
                ("f2", c(300, 5, 2, 1), vec![("f0", 3), ("[rest]", 2)]),
                ("f0", c(100, 10, 0, 0), vec![("[indirect]", 10)]),
                ("[user]", c(50, 0, 0, 0), vec![]),
            ]
        );
        let s = p.syscalls[&302];
        assert_eq!((s.calls, s.insns, s.dropped), (2, 2000, 1));
        let x = p.contention.unwrap();
        assert_eq!(x.watch, (1, 1, "spin".to_string()));
        assert_eq!(
            (x.vcpus, x.rmws, x.lines, x.acqs, x.locks, x.holds),
            (2, (40, 12), (9, 3), (30, 20), (5, 2), (7, 1))
        );
        let key = |object: Object, class: Class, name: &str| Key {
            object,
            class,
            name: name.to_string(),
        };
        let counter = &x.rows[&key(Object::Line, Class::Static, "counter_x+0x0")];
        assert_eq!((counter.objects, counter.writers, counter.events), (1, 2, 10));
        assert_eq!(
            counter.funcs.iter().map(|(f, n)| (f.as_str(), *n)).collect::<Vec<_>>(),
            [("[rest]", 1), ("copy_process", 9)]
        );
        let heap = &x.rows[&key(Object::Line, Class::Heap, "copy_process")];
        assert_eq!((heap.objects, heap.writers, heap.events), (3, 2, 2));
        let lock = &x.rows[&key(Object::Lock("spin".into()), Class::Static, "pcpu_lock+0x0")];
        assert_eq!(
            (lock.objects, lock.writers, lock.events, lock.holds, lock.hold_insns),
            (1, 2, 20, 20, 2000)
        );
        assert_eq!(x.rows.len(), 3);
    }

    /// Issue 58: counts that would wrap a sum, and names carrying terminal
    /// escapes, are refused with the line.
    #[test]
    fn huge_counts_and_control_characters_are_refused() {
        for (bad, said) in [
            (
                format!("harness-profile 1\nf x {} 1 0 0\n", MAX_COUNT + 1),
                "line 2: instructions 9007199254740993 is past 2^53",
            ),
            (
                "harness-profile 1\nx summary 2 18446744073709551615 0 0 0 0 0 0 0 0 0\n".to_string(),
                "line 2: rmws 18446744073709551615 is past 2^53",
            ),
            (
                "harness-profile 1\nf x 1 1 0 0\nf \u{1b}[2Jevil 5 1 0 0\n".to_string(),
                "line 3: control characters",
            ),
        ] {
            let e = format!("{:#}", parse(&bad).unwrap_err());
            assert!(e.contains(said), "{bad:?}: {e}");
        }
        assert!(parse(&format!("harness-profile 1\nf x {MAX_COUNT} 1 0 0\n")).is_ok());
    }
}
