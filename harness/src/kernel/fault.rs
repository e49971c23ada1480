//! Failures the host caused, not the kernel or its series: out of disk, a
//! compiler killed (the OOM killer's SIGKILL), make or patch killed by a
//! signal. The run stops with a [`HostFault`] and records nothing against
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

/// Why a failed `tool` (make, patch) was the host's doing, from how it
/// ended (`code` `None`: killed by a signal, `signal` which) and its
/// output; `None` when it is the kernel's (a compile error, a hunk that
/// does not apply).
pub fn host_fault(tool: &str, code: Option<i32>, signal: Option<i32>, log: &str) -> Option<String> {
    let lower = log.to_ascii_lowercase();
    if lower.contains("no space left on device") || lower.contains("disk quota exceeded") {
        return Some("no space left on device".into());
    }
    if log.contains("Killed signal terminated program") || log.contains("internal compiler error: Killed") {
        return Some("the compiler was killed, most likely out of memory".into());
    }
    if code.is_none() {
        return Some(match signal {
            Some(s) => format!("{tool} was killed by signal {s}"),
            None => format!("{tool} was killed by a signal"),
        });
    }
    None
}

/// Whether `e` is a host failure: a [`HostFault`], or a file write that
/// found the disk full.
pub fn is_host_fault(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.is::<HostFault>()
            || c.downcast_ref::<std::io::Error>()
                .and_then(|io| io.raw_os_error())
                .is_some_and(|n| n == libc::ENOSPC || n == libc::EDQUOT)
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
        let cases: [Case; 10] = [
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
        assert!(!is_host_fault(&anyhow::anyhow!(
            "make olddefconfig: exited with Some(2)"
        )));
    }
}
