//! A guest's serial console: read with a cap (a flooding guest costs the
//! harness no more than [`MAX_CONSOLE`]) and scanned for panics, oopses,
//! BUGs, WARNs, lockdep splats, soft lockups, RCU stalls and hung tasks,
//! each with the first function of its call trace.

use std::path::Path;

pub use crate::vocab::Trouble;

pub use crate::vocab::Finding;

fn classify_line(l: &str) -> Option<Trouble> {
    if l.contains("Kernel panic - not syncing") {
        Some(Trouble::Panic)
    } else if l.contains("possible circular locking dependency")
        || l.contains("possible recursive locking detected")
        || l.contains("inconsistent lock state")
        || l.contains("suspicious RCU usage")
        || l.contains("bad unlock balance detected")
    {
        Some(Trouble::Lockdep)
    } else if l.contains("BUG: soft lockup") {
        Some(Trouble::SoftLockup)
    } else if l.contains("rcu_sched detected stall")
        || l.contains("rcu_preempt detected stall")
        || l.contains("detected stalls on CPUs")
    {
        Some(Trouble::RcuStall)
    } else if l.contains("blocked for more than") && l.contains("INFO: task") {
        Some(Trouble::HungTask)
    } else if l.contains("Oops:") || l.contains("general protection fault") {
        Some(Trouble::Oops)
    } else if l.contains("BUG:") || l.contains("kernel BUG at") {
        Some(Trouble::Bug)
    } else if l.contains("WARNING:") && (l.contains(" at ") || l.contains("CPU:")) {
        Some(Trouble::Warn)
    } else {
        None
    }
}

/// First function of a call trace line such as ` do_thing+0x12/0x40`.
fn trace_function(l: &str) -> Option<String> {
    let t = l.split(']').next_back().unwrap_or(l).trim();
    if t.starts_with('?') || t.starts_with('<') || t.is_empty() {
        return None;
    }
    let f = t.split_whitespace().next()?;
    let (name, off) = f.split_once('+')?;
    (off.starts_with("0x") && !name.is_empty()).then(|| name.to_string())
}

/// Scans console text for trouble. Each finding gets the first function of
/// the call trace that follows it (within 60 lines), if any.
pub fn scan_console(text: &str) -> Vec<Finding> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out: Vec<Finding> = Vec::new();
    for (i, l) in lines.iter().enumerate() {
        let Some(kind) = classify_line(l) else { continue };
        // "WARNING: CPU: 1 PID: 9 at mm/x.c:10 func+0x9/0x20" names it itself
        let mut func = if kind == Trouble::Warn {
            l.split_whitespace().find_map(trace_function)
        } else {
            None
        };
        let mut in_trace = false;
        for m in lines.iter().skip(i + 1).take(if func.is_some() { 0 } else { 60 }) {
            if m.contains("Call Trace:") {
                in_trace = true;
                continue;
            }
            if in_trace {
                if let Some(f) = trace_function(m) {
                    func = Some(f);
                    break;
                }
            }
        }
        // a RIP line names the faulting function even without a trace
        if func.is_none() {
            func = lines.iter().skip(i).take(20).find_map(|m| {
                m.split("RIP: 0010:")
                    .nth(1)
                    .and_then(|r| r.split('+').next())
                    .map(|s| s.trim().to_string())
            });
        }
        let kname = serde_json::to_value(kind)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default();
        let signature = match &func {
            Some(f) => format!("{kname}: {f}"),
            None => kname,
        };
        let line = l.split(']').skip(1).collect::<Vec<_>>().join("]").trim().to_string();
        let line = if line.is_empty() { l.trim().to_string() } else { line };
        if !out.iter().any(|f| f.signature == signature && f.kind == kind) {
            out.push(Finding { kind, line, signature });
        }
    }
    out
}

/// The most of a console the harness reads into memory: 64 MiB.
pub const MAX_CONSOLE: u64 = 64 << 20;

/// The console file at `path`, read lossily (one invalid byte loses
/// nothing else), and at most `limit` bytes of it: a longer console (a
/// flooding guest) is read as its head, a line saying how much was left
/// out, and its last sixteenth of `limit`, where a final panic would be.
/// Empty when it cannot be read.
pub fn read_console(path: &Path, limit: u64) -> String {
    use std::io::{Read, Seek, SeekFrom};
    let Ok(mut f) = std::fs::File::open(path) else {
        return String::new();
    };
    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
    let lossy = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    if len <= limit {
        let mut all = Vec::new();
        return f.read_to_end(&mut all).map(|_| lossy(&all)).unwrap_or_default();
    }
    let tail = limit / 16;
    let mut head = Vec::new();
    let _ = f.by_ref().take(limit - tail).read_to_end(&mut head);
    let mut end = Vec::new();
    if f.seek(SeekFrom::Start(len - tail)).is_ok() {
        let _ = f.take(tail).read_to_end(&mut end);
    }
    // the tail from its first whole line
    let from = end.iter().position(|&c| c == b'\n').map_or(0, |i| i + 1);
    let left_out = len - head.len() as u64 - (end.len() - from) as u64;
    format!(
        "{}\n[console over limit: {left_out} bytes of {len} not read]\n{}",
        lossy(&head),
        lossy(&end[from..])
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn console_scan_finds_kinds_and_signatures() {
        let text = "[    1.0] Run /init as init process\n\
            [    2.1] kernel BUG at kernel/harness_test.c:10!\n\
            [    2.1] Oops: invalid opcode: 0000 [#1] SMP\n\
            [    2.1] RIP: 0010:harness_boom+0x5/0x10\n\
            [    2.1] Call Trace:\n\
            [    2.1]  <TASK>\n\
            [    2.1]  ? die+0x36/0x90\n\
            [    2.1]  harness_boom+0x5/0x10\n\
            [    2.1]  do_one_initcall+0x41/0x200\n\
            [    2.2] Kernel panic - not syncing: Fatal exception\n\
            [    3.0] WARNING: CPU: 1 PID: 9 at mm/vmalloc.c:100 free_vmap_area_noflush+0x9/0x20\n";
        let f = scan_console(text);
        let sigs: Vec<&str> = f.iter().map(|x| x.signature.as_str()).collect();
        assert_eq!(
            sigs,
            vec![
                "bug: harness_boom",
                "oops: harness_boom",
                "panic",
                "warn: free_vmap_area_noflush"
            ]
        );
        assert!(scan_console("[ 1.0] all fine\n[ 2.0] random: crng init done\n").is_empty());
    }

    #[test]
    fn a_flooding_console_is_read_up_to_its_limit() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("console.log");
        let mut text = b"[    0.1] Linux version 6.12\n\xff odd byte\n".to_vec();
        text.extend(std::iter::repeat_n(b"flood flood flood\n".to_vec(), 10_000).flatten());
        text.extend(b"[  900.0] Kernel panic - not syncing: Fatal exception\n");
        std::fs::write(&p, &text).unwrap();
        let got = read_console(&p, 16 << 10);
        assert!(got.len() < (16 << 10) + 200, "{}", got.len());
        assert!(
            got.starts_with("[    0.1] Linux version 6.12\n\u{fffd} odd byte\n"),
            "lossy, from the start"
        );
        assert!(
            got.contains("console over limit:") && got.ends_with("Kernel panic - not syncing: Fatal exception\n"),
            "{}",
            &got[got.len() - 200..]
        );
        assert_eq!(scan_console(&got).len(), 1, "the panic at the end is still found");
        assert_eq!(
            read_console(&p, 1 << 30).len(),
            String::from_utf8_lossy(&text).len(),
            "a console under the limit is read whole"
        );
        assert_eq!(read_console(&dir.path().join("none"), 10), "");
    }
}
