//! A profiled boot's windows: each benchmark repetition opens and closes
//! one profiler window in the guest, and the plugin writes it alone to
//! `<boot id>.profile.N`. After a repetition the lifecycle takes the next
//! window the plugin wrote, if any, and reads its instructions per
//! operation as metrics of their own.

use std::path::PathBuf;

use anyhow::Result;

use crate::bench::{Measured, INSNS_PER_OP};
use crate::profile::{self, Profile};
use crate::vm::Plugin;

/// Their unit.
pub const INSNS_UNIT: &str = "insns/op";

/// The unit of a syscall's instructions per call (`NAME_insns_per_call`).
pub const PER_CALL_UNIT: &str = "insns/call";

/// The windows a boot's plugin has written so far.
#[derive(Debug)]
pub struct Windows {
    plugin: Plugin,
    next: u32,
}

/// One window the plugin wrote: its file and what it says.
#[derive(Debug)]
pub struct Window {
    /// The window's profile file.
    pub path: PathBuf,
    /// The op count the guest closed it with, and the metrics; or why the
    /// profile cannot be used.
    pub read: Result<(u64, Vec<Measured>), String>,
}

impl Windows {
    /// The windows of a boot that loads `plugin`.
    pub fn new(plugin: Plugin) -> Windows {
        Windows { plugin, next: 1 }
    }

    /// The next window, if the plugin has written it (it writes at the
    /// closing marker, before the benchmark answers). A window closed
    /// without an op count gets `ops`, when the output gave one; `unit` is
    /// the benchmark's unit of work (`bench::unit_of_work`).
    pub fn take(&mut self, ops: Option<u64>, unit: &[&str]) -> Option<Window> {
        let path = self.plugin.window(self.next);
        if !path.is_file() {
            return None;
        }
        self.next += 1;
        let read = ops
            .map_or(Ok(()), |n| supply_ops(&path, n))
            .and_then(|()| profile::read(&path))
            .and_then(|p| metrics(&p, unit))
            .map_err(|e| format!("{e:#}"));
        Some(Window { path, read })
    }
}

/// Writes the op count `n` into a window file closed without one (its
/// `ops 0 missing 1` header line, as `profmark exec 0` leaves it), through
/// a temporary file and a rename. A window that has its own count keeps it.
pub fn supply_ops(path: &std::path::Path, n: u64) -> Result<()> {
    use anyhow::Context;
    let text = std::fs::read_to_string(path).with_context(|| format!("read {}", path.display()))?;
    let Some(at) = text.find("\nops 0 missing 1\n") else {
        return Ok(());
    };
    let fixed = format!(
        "{}\nops {n} missing 0\n{}",
        &text[..at],
        &text[at + "\nops 0 missing 1\n".len()..]
    );
    crate::util::write_whole(path, fixed.as_bytes())
}

/// A window's op count and its instructions per op (total, kernel, user),
/// then, for each syscall handler `__x64_sys_NAME` of the unit of work
/// that the window counted calls of (the plugin's `syscalls=on`), its
/// instructions per call from syscall entry to the return to user space,
/// `NAME_insns_per_call`: lower is better, one value a repetition. A
/// syscall whose calls were dropped more than once in 20 (a call that
/// blocks or is preempted is dropped at the task switch, see the plugin's
/// `syscalls.rs`) has no metric: the counted calls would be the short ones.
pub fn metrics(p: &Profile, unit: &[&str]) -> Result<(u64, Vec<Measured>)> {
    let per = p.per_op(None)?;
    let user = per.functions.get("[user]").map_or(0.0, |f| f.insns);
    let values = [per.total_insns, per.kernel_insns, user];
    let measured = |metric: String, value: f64, unit: &str| Measured {
        metric,
        value,
        unit: unit.into(),
        higher_is_better: false,
        series: vec![],
        warmup_series: vec![],
    };
    let mut ms: Vec<Measured> = INSNS_PER_OP
        .iter()
        .zip(values)
        .map(|(name, value)| measured(name.to_string(), value, INSNS_UNIT))
        .collect();
    for name in crate::bench::syscall_names(unit) {
        let Some(s) = profile::syscall_number(name).and_then(|nr| p.syscalls.get(&nr)) else {
            continue;
        };
        if s.calls > 0 && s.dropped * 20 <= s.calls + s.dropped {
            let value = s.insns as f64 / s.calls as f64;
            ms.push(measured(crate::bench::per_call_metric(name), value, PER_CALL_UNIT));
        }
    }
    Ok((p.ops, ms))
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) const TEXT: &str = "harness-profile 1\nmode marker\nwindows 1\nunclosed 0\nops 10 missing 0\nvcpus 2\n\
        callers static top 8\ntotal 450 15 2 1\nkernel 400 15 2 1\nf f2 300 5 2 1\nf f0 100 10 0 0\nf [user] 50 0 0 0\n";

    #[test]
    fn instructions_per_op_of_a_window() {
        let (ops, ms) = metrics(&profile::parse(TEXT).unwrap(), &[]).unwrap();
        assert_eq!(ops, 10);
        let got: Vec<(&str, f64, &str, bool)> = ms
            .iter()
            .map(|m| (m.metric.as_str(), m.value, m.unit.as_str(), m.higher_is_better))
            .collect();
        assert_eq!(
            got,
            [
                ("insns_per_op", 45.0, "insns/op", false),
                ("kernel_insns_per_op", 40.0, "insns/op", false),
                ("user_insns_per_op", 5.0, "insns/op", false)
            ]
        );
        let no_count = TEXT.replace("ops 10 missing 0", "ops 0 missing 1");
        assert!(
            metrics(&profile::parse(&no_count).unwrap(), &[]).is_err(),
            "a window closed with no count gives no metrics"
        );
    }

    #[test]
    fn instructions_per_call_of_the_unit_of_works_syscalls() {
        let text = format!("{TEXT}s 302 39 3900 1 1\ns 140 0 0 2 2\ns 141 19 1900 2 2\ns 110 5 50 0 0\n");
        let unit = [
            "__x64_sys_prlimit64",
            "__x64_sys_getpriority",
            "__x64_sys_setpriority",
            "bprm_execve",
        ];
        let (_, ms) = metrics(&profile::parse(&text).unwrap(), &unit).unwrap();
        let got: Vec<(&str, f64, &str)> = ms[3..]
            .iter()
            .map(|m| (m.metric.as_str(), m.value, m.unit.as_str()))
            .collect();
        // getpriority: only dropped calls; setpriority: 2 of 21 dropped;
        // getppid (110) is not in the unit of work
        assert_eq!(got, [("prlimit64_insns_per_call", 100.0, "insns/call")]);
        assert!(!ms[3].higher_is_better);
    }

    #[test]
    fn windows_are_taken_in_order_once_written() {
        let d = tempfile::tempdir().unwrap();
        let plugin = Plugin {
            so: "/p.so".into(),
            symbols: "/s".into(),
            out: d.path().join("b.profile"),
            syscalls: true,
            data: None,
        };
        let mut w = Windows::new(plugin.clone());
        assert!(w.take(None, &[]).is_none(), "nothing written yet");
        std::fs::write(plugin.window(1), TEXT).unwrap();
        std::fs::write(plugin.window(2), "garbage").unwrap();
        let first = w.take(None, &[]).unwrap();
        assert_eq!((first.path, first.read.map(|r| r.0)), (plugin.window(1), Ok(10)));
        let second = w.take(None, &[]).unwrap();
        assert!(second.read.unwrap_err().contains("not a harness profile"));
        assert!(w.take(None, &[]).is_none());
    }

    /// `profmark exec 0` closes a window without a count; the count the
    /// output gave is written in, and a window with its own keeps it.
    #[test]
    fn a_window_closed_without_a_count_gets_the_outputs() {
        let d = tempfile::tempdir().unwrap();
        let plugin = Plugin {
            so: "/p.so".into(),
            symbols: "/s".into(),
            out: d.path().join("b.profile"),
            syscalls: true,
            data: None,
        };
        let mut w = Windows::new(plugin.clone());
        std::fs::write(plugin.window(1), TEXT.replace("ops 10 missing 0", "ops 0 missing 1")).unwrap();
        std::fs::write(plugin.window(2), TEXT).unwrap();
        assert_eq!(w.take(Some(5), &[]).unwrap().read.map(|r| r.0), Ok(5));
        assert_eq!(
            w.take(Some(5), &[]).unwrap().read.map(|r| r.0),
            Ok(10),
            "its own count stays"
        );
        let back = std::fs::read_to_string(plugin.window(1)).unwrap();
        assert_eq!(back, TEXT.replace("ops 10 missing 0", "ops 5 missing 0"));
    }
}
