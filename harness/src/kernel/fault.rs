//! Failures the host caused, not the kernel or its series: out of disk, a
//! compiler or a build step killed (the OOM killer's SIGKILL: `make: ***
//! [...] Killed`), out of memory (`cc1: out of memory`, `virtual memory
//! exhausted`), a file system that failed (EIO, ESTALE, EROFS), make or
//! patch killed by a signal. The run stops with a [`HostFault`] and records nothing against
//! the variant, so `--resume` builds (or patches) again once the host is
//! mended.

/// A step the host failed; see the module.
#[derive(Debug, thiserror::Error)]
#[error("{what}: the host failed, not the kernel ({why}; see {log}); nothing was recorded against the variant: free the host and run again with --resume")]
pub struct HostFault {
    /// The step (`build the kernel`, `make olddefconfig`, `apply 0001-x.patch`).
    pub what: String,
    /// What the host did.
    pub why: String,
    /// The log it shows in.
    pub log: String,
}

/// A kernel the run's build recorded that the kernel cache no longer holds
/// (or holds damaged) when its jobs are to boot: deleted by `gc` or by
/// hand. The host's doing: the run or shard stops with nothing recorded
/// against the variant, so its jobs boot once the kernel is rebuilt.
#[derive(Debug, thiserror::Error)]
#[error("boot variant {variant}: its kernel {key} is not in the kernel cache any more ({dir} deleted or damaged); the host failed, not the kernel, and nothing was recorded against the variant: rebuild it with `harness build --run-dir {run_dir}`, then run again where it stopped (the shard again, or `harness run --resume {run_dir}`)")]
pub struct KernelGone {
    /// The variant whose jobs were to boot.
    pub variant: String,
    /// Its kernel's cache key.
    pub key: String,
    /// The cache entry (`work/kernels/<key>`).
    pub dir: String,
    /// The run directory whose build recorded the kernel.
    pub run_dir: String,
}

/// Why a failed `tool` (make, patch) was the host's doing, from how it
/// ended (`code` `None`: killed by a signal, `signal` which) and its
/// output; `None` when it is the kernel's (a compile error, a hunk that
/// does not apply).
pub fn host_fault(tool: &str, code: Option<i32>, signal: Option<i32>, log: &str) -> Option<String> {
    let lower = log.to_ascii_lowercase();
    if out_of_space(log) {
        return Some("no space left on device".into());
    }
    if log.contains("Killed signal terminated program") || log.contains("internal compiler error: Killed") {
        return Some("the compiler was killed, most likely out of memory".into());
    }
    if let Some(step) = log.lines().find_map(killed_step) {
        return Some(format!("the build step {step} was killed, most likely out of memory"));
    }
    if log.lines().any(out_of_memory) {
        return Some("the host ran out of memory".into());
    }
    if let Some((_, why)) = IO_FAULTS.iter().find(|(words, _)| lower.contains(words)) {
        return Some((*why).into());
    }
    if code.is_none() {
        return Some(match signal {
            Some(s) => format!("{tool} was killed by signal {s}"),
            None => format!("{tool} was killed by a signal"),
        });
    }
    None
}

/// Whether a tool's output says it ran out of disk space (or quota).
pub fn out_of_space(log: &str) -> bool {
    let lower = log.to_ascii_lowercase();
    lower.contains("no space left on device") || lower.contains("disk quota exceeded")
}

/// The words (lowercase) of a file system that failed under a step, and
/// what they mean.
const IO_FAULTS: [(&str, &str); 3] = [
    ("input/output error", "the file system failed (input/output error)"),
    ("stale file handle", "the file system failed (stale file handle)"),
    ("read-only file system", "the file system is read-only"),
];

/// The target of a make line saying its recipe was killed by a signal
/// (`make[2]: *** [scripts/Makefile.vmlinux:34: vmlinux] Killed`), the
/// OOM killer's usual victims being the vmlinux link, objtool and pahole.
fn killed_step(line: &str) -> Option<&str> {
    let rest = line.trim_end().strip_suffix("] Killed")?;
    let (head, target) = rest.split_once("*** [")?;
    (head.starts_with("make") && head.trim_end().ends_with(':')).then_some(target)
}

/// Whether a line is a program saying it ran out of memory (`cc1: out of
/// memory allocating …`, `virtual memory exhausted: …`), not a source line
/// a diagnostic quotes.
fn out_of_memory(line: &str) -> bool {
    let line = line.trim_start();
    let program = |p: &str| !p.is_empty() && !p.contains([' ', '"', '(', '\'']);
    line.starts_with("virtual memory exhausted") || line.split_once(": out of memory").is_some_and(|(p, _)| program(p))
}

/// The I/O errors that are the host's: the disk full, out of memory, a
/// file system that failed or went read-only.
const HOST_ERRNOS: [i32; 6] = [
    libc::ENOSPC,
    libc::EDQUOT,
    libc::ENOMEM,
    libc::EIO,
    libc::ESTALE,
    libc::EROFS,
];

/// Whether `e` is a host failure: a [`HostFault`], a [`KernelGone`], or a file operation
/// that found the disk full, memory exhausted or the file system failed.
pub fn is_host_fault(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.is::<HostFault>()
            || c.is::<KernelGone>()
            || c.downcast_ref::<std::io::Error>()
                .and_then(|io| io.raw_os_error())
                .is_some_and(|n| HOST_ERRNOS.contains(&n))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The host's failures, told from the kernel's and the series'.
    #[test]
    fn host_faults_are_told_from_compile_errors_and_conflicts() {
        type Case = (
            &'static str,
            Option<i32>,
            Option<i32>,
            &'static str,
            Option<&'static str>,
        );
        let cases: [Case; 17] = [
            (
                "make",
                Some(2),
                None,
                "  LD      vmlinux.o\nmake[2]: *** [scripts/Makefile.vmlinux_o:61: vmlinux.o] Killed\nmake[1]: *** [Makefile:1: all] Error 2",
                Some("the build step scripts/Makefile.vmlinux_o:61: vmlinux.o was killed, most likely out of memory"),
            ),
            (
                "make",
                Some(2),
                None,
                "make: *** [Makefile:1154: vmlinux] Killed",
                Some("the build step Makefile:1154: vmlinux was killed, most likely out of memory"),
            ),
            (
                "make",
                Some(2),
                None,
                "cc1: out of memory allocating 65536 bytes after a total of 1048576 bytes",
                Some("the host ran out of memory"),
            ),
            (
                "make",
                Some(2),
                None,
                "virtual memory exhausted: Cannot allocate memory",
                Some("the host ran out of memory"),
            ),
            (
                "make",
                Some(2),
                None,
                "fs/a.o: error reading: Input/output error",
                Some("the file system failed (input/output error)"),
            ),
            (
                "make",
                Some(2),
                None,
                "cannot open mm/.a.o.cmd: Stale file handle",
                Some("the file system failed (stale file handle)"),
            ),
            (
                "patch",
                Some(2),
                None,
                "patch: **** Can't create temporary file mm/a.c.oXXX : Read-only file system",
                Some("the file system is read-only"),
            ),
            (
                "make",
                Some(2),
                None,
                "mm/memory.c:12:5: error: 'x' undeclared\nmake: *** [Makefile:1] Error 2",
                None,
            ),
            (
                "make",
                Some(2),
                None,
                "ld: final link failed: No space left on device",
                Some("no space left on device"),
            ),
            (
                "make",
                Some(2),
                None,
                "fatal error: error writing to /tmp/ccX.s: Disk quota exceeded",
                Some("no space left on device"),
            ),
            (
                "make",
                Some(2),
                None,
                "gcc: fatal error: Killed signal terminated program cc1\ncompilation terminated.",
                Some("the compiler was killed, most likely out of memory"),
            ),
            (
                "make",
                Some(2),
                None,
                "mm/x.c:1: internal compiler error: Killed (program cc1)",
                Some("the compiler was killed, most likely out of memory"),
            ),
            (
                "make",
                None,
                Some(9),
                "  CC mm/a.o\n",
                Some("make was killed by signal 9"),
            ),
            (
                "make",
                Some(2),
                None,
                "gcc: internal compiler error: Segmentation fault signal terminated program cc1",
                None,
            ),
            // GNU patch's words when it cannot write the patched file or its temporary copy
            (
                "patch",
                Some(2),
                None,
                "patch: **** write error : No space left on device",
                Some("no space left on device"),
            ),
            (
                "patch",
                Some(1),
                None,
                "checking file mm/memory.c\nHunk #1 FAILED at 12.\n1 out of 1 hunk FAILED",
                None,
            ),
            ("patch", None, Some(9), "", Some("patch was killed by signal 9")),
        ];
        for (tool, code, signal, log, want) in cases {
            assert_eq!(host_fault(tool, code, signal, log).as_deref(), want, "{log}");
        }
        let full = anyhow::Error::new(std::io::Error::from_raw_os_error(libc::ENOSPC)).context("write .config");
        assert!(is_host_fault(&full));
        for errno in [libc::EIO, libc::ESTALE, libc::EROFS, libc::ENOMEM] {
            let e = anyhow::Error::new(std::io::Error::from_raw_os_error(errno)).context("write .config");
            assert!(is_host_fault(&e), "{e:#}");
        }
        assert!(!is_host_fault(&anyhow::anyhow!(
            "make olddefconfig: exited with status 2"
        )));
        // a compile error whose source says "killed" or "out of memory" is the kernel's
        let quoted = "mm/a.c:3:9: error: 'x' undeclared\n    3 |   pr_err(\"a: out of memory\", x);\n\
                      make: *** [mm/a.o] Error 1";
        assert_eq!(host_fault("make", Some(2), None, quoted), None);
        assert_eq!(
            host_fault(
                "make",
                Some(2),
                None,
                "mm/a.c:3: error: 'Killed' undeclared\nmake: *** [mm/a.o] Error 1"
            ),
            None
        );
    }
}
