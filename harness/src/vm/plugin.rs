//! The kernel profiler plugin (`harness/profiler/`) on QEMU's command line:
//! where its shared object is, its `-plugin` argument, and the check of
//! its inputs before QEMU starts (a bad plugin argument or an unreadable
//! symbols file makes QEMU abort with SIGABRT, which the boot lifecycle
//! would take for a QEMU crash and boot again).

use std::ffi::OsStr;
use std::io::Read;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

/// The plugin's file name as cargo builds it.
pub const PROFILER_SO: &str = "libharness_profiler.so";

/// Environment variable naming the plugin's shared object.
pub const PROFILER_ENV: &str = "HARNESS_PROFILER";

/// One boot's profiler: the plugin, the kernel's symbols, the profile file
/// (every closed window also alone in `<out>.N`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Plugin {
    /// The plugin's shared object.
    pub so: PathBuf,
    /// The kernel's symbols file (`START SIZE NAME`, hex).
    pub symbols: PathBuf,
    /// The profile the plugin writes.
    pub out: PathBuf,
    /// Whether the plugin also counts instructions per system call
    /// (`syscalls=on`): only for a boot whose benchmarks have syscalls as
    /// their unit of work, because with more than one vCPU it reads
    /// registers in every block's callback (about twice the boot's host
    /// time: the profiler's README).
    #[serde(default)]
    pub syscalls: bool,
    /// The kernel's data symbols file: the plugin then also counts
    /// contention (`contention=on`: the cache lines several vCPUs write
    /// with atomics and the locks they share, named by these symbols).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<PathBuf>,
}

impl Plugin {
    /// The `-plugin` option's value.
    pub fn arg(&self) -> String {
        let contention = match &self.data {
            Some(d) => format!(",contention=on,data={}", d.display()),
            None => String::new(),
        };
        format!(
            "{},symbols={},out={},each=on{}{contention}",
            self.so.display(),
            self.symbols.display(),
            self.out.display(),
            if self.syscalls { ",syscalls=on" } else { "" }
        )
    }

    /// The profile of the `n`th closed window (from 1).
    pub fn window(&self, n: u32) -> PathBuf {
        let mut s = self.out.clone().into_os_string();
        s.push(format!(".{n}"));
        PathBuf::from(s)
    }

    /// Refuses what would make QEMU abort at start: a shared object that is
    /// not an ELF file, a symbols file whose first entry does not read as
    /// `START SIZE NAME`, an output directory that does not exist, or a
    /// path QEMU's option parser would split (a comma).
    pub fn check(&self) -> Result<()> {
        for p in [&self.so, &self.symbols, &self.out].into_iter().chain(&self.data) {
            if p.to_string_lossy().contains(',') {
                bail!(
                    "profiler path {} has a comma, which QEMU's -plugin option cannot take",
                    p.display()
                );
            }
        }
        let mut magic = [0u8; 4];
        std::fs::File::open(&self.so)
            .and_then(|mut f| f.read_exact(&mut magic))
            .with_context(|| format!("read the profiler plugin {}", self.so.display()))?;
        if &magic != b"\x7fELF" {
            bail!("the profiler plugin {} is not a shared object", self.so.display());
        }
        let text = std::fs::read_to_string(&self.symbols)
            .with_context(|| format!("read the symbols file {}", self.symbols.display()))?;
        let first = text.lines().find(|l| !l.starts_with('#') && !l.trim().is_empty());
        let ok = first.is_some_and(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            f.len() == 3 && u64::from_str_radix(f[0], 16).is_ok() && u64::from_str_radix(f[1], 16).is_ok()
        });
        if !ok {
            bail!(
                "the symbols file {} lists no function as START SIZE NAME",
                self.symbols.display()
            );
        }
        if let Some(d) = &self.data {
            std::fs::File::open(d).with_context(|| format!("read the data symbols file {}", d.display()))?;
        }
        match self.out.parent() {
            Some(d) if d.is_dir() => Ok(()),
            _ => bail!("the profile's directory for {} does not exist", self.out.display()),
        }
    }
}

/// The profiler plugin to load: `$HARNESS_PROFILER` when set (used as
/// given, even if missing, so a wrong path is reported rather than another
/// plugin silently taken), else the release build in the target directory
/// of the running binary `exe` (`target/release/`, whatever profile `exe`
/// was built in), else one next to `exe`. `None`: not built.
pub fn find_profiler(exe: &Path, env: Option<&OsStr>) -> Option<PathBuf> {
    if let Some(p) = env.filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(p));
    }
    let dir = exe.parent()?;
    // a test binary lives in target/<profile>/deps/
    let profile_dir = if dir.file_name() == Some(OsStr::new("deps")) {
        dir.parent()?
    } else {
        dir
    };
    let mut candidates = Vec::new();
    if let Some(target) = profile_dir.parent() {
        candidates.push(target.join("release").join(PROFILER_SO));
    }
    candidates.push(profile_dir.join(PROFILER_SO));
    candidates.into_iter().find(|p| p.is_file())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arg_and_windows() {
        let p = Plugin {
            so: "/t/release/libharness_profiler.so".into(),
            symbols: "/k/vmlinux.syms".into(),
            out: "/r/profiles/b.profile".into(),
            syscalls: true,
            data: None,
        };
        assert_eq!(
            p.arg(),
            "/t/release/libharness_profiler.so,symbols=/k/vmlinux.syms,out=/r/profiles/b.profile,each=on,syscalls=on"
        );
        let off = Plugin {
            syscalls: false,
            ..p.clone()
        };
        assert!(off.arg().ends_with("b.profile,each=on"), "{}", off.arg());
        assert_eq!(p.window(2), PathBuf::from("/r/profiles/b.profile.2"));
        let cont = Plugin {
            data: Some("/k/vmlinux.data".into()),
            ..off.clone()
        };
        assert!(
            cont.arg()
                .ends_with("b.profile,each=on,contention=on,data=/k/vmlinux.data"),
            "{}",
            cont.arg()
        );
    }

    #[test]
    fn check_table() {
        let d = tempfile::tempdir().unwrap();
        let w = |name: &str, data: &[u8]| {
            let p = d.path().join(name);
            std::fs::write(&p, data).unwrap();
            p
        };
        let so = w("p.so", b"\x7fELF\x02\x01");
        let not_so = w("p.txt", b"hello");
        let syms = w(
            "vmlinux.syms",
            b"# harness-profiler symbols: start size name (hex)\nffffffff81000000 10 f\n",
        );
        let nm = w("bad.syms", b"ffffffff81000000 T _text\n");
        let empty = w("empty.syms", b"# header only\n");
        let out = d.path().join("profiles.profile");
        let comma = d.path().join("a,b.profile");
        let gone = d.path().join("nodir/x.profile");
        // (so, symbols, out, error fragment or "" for accepted)
        let cases: &[(&Path, &Path, &Path, &str)] = &[
            (&so, &syms, &out, ""),
            (&not_so, &syms, &out, "is not a shared object"),
            (Path::new("/nonexistent.so"), &syms, &out, "read the profiler plugin"),
            (&so, &nm, &out, "lists no function"),
            (&so, &empty, &out, "lists no function"),
            (&so, Path::new("/nonexistent.syms"), &out, "read the symbols file"),
            (&so, &syms, &gone, "does not exist"),
            (&so, &syms, &comma, "has a comma"),
        ];
        for (so, symbols, out, want) in cases {
            let p = Plugin {
                so: so.to_path_buf(),
                symbols: symbols.to_path_buf(),
                out: out.to_path_buf(),
                syscalls: true,
                data: None,
            };
            match (p.check(), *want) {
                (Ok(()), "") => {}
                (Err(e), w) if !w.is_empty() => assert!(format!("{e:#}").contains(w), "{e:#} wants {w}"),
                (got, w) => panic!("{p:?}: {got:?}, want {w:?}"),
            }
        }
        let p = Plugin {
            so,
            symbols: syms,
            out,
            syscalls: false,
            data: Some(d.path().join("vmlinux.data")),
        };
        let e = p.check().unwrap_err();
        assert!(format!("{e:#}").contains("read the data symbols file"), "{e:#}");
    }

    #[test]
    fn finds_the_release_build_next_to_the_binary() {
        let d = tempfile::tempdir().unwrap();
        let t = d.path();
        for dir in ["debug/deps", "release"] {
            std::fs::create_dir_all(t.join(dir)).unwrap();
        }
        let exe = t.join("debug/harness");
        let test_exe = t.join("debug/deps/e2e-0123");
        assert_eq!(find_profiler(&exe, None), None, "not built");
        std::fs::write(t.join("debug").join(PROFILER_SO), b"x").unwrap();
        assert_eq!(
            find_profiler(&exe, None),
            Some(t.join("debug").join(PROFILER_SO)),
            "the debug one when alone"
        );
        std::fs::write(t.join("release").join(PROFILER_SO), b"x").unwrap();
        for e in [&exe, &test_exe, &t.join("release/harness")] {
            assert_eq!(
                find_profiler(e, None),
                Some(t.join("release").join(PROFILER_SO)),
                "{}",
                e.display()
            );
        }
        assert_eq!(
            find_profiler(&exe, Some(OsStr::new("/x/p.so"))),
            Some(PathBuf::from("/x/p.so"))
        );
        assert_eq!(
            find_profiler(&exe, Some(OsStr::new(""))),
            Some(t.join("release").join(PROFILER_SO))
        );
    }
}
