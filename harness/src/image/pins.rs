//! What the guest image is made of on this host, by digest: busybox,
//! dropbear, the shared libraries and loader dropbear needs (the ones a
//! dynamic benchmark needs are among them), the static libc archive the
//! benchmarks are linked with, and the linker's version (binutils). A run
//! pins them when it starts and again when it makes its image; `--resume`
//! and `--shard` compare them with what this host would put in the image.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use sha2::{Digest, Sha256};

use super::{needed_libs, HostBins};
use crate::proc::Cmd;

/// The value recorded for a file the host does not have.
pub const MISSING: &str = "missing";

/// The image's host files: name (`busybox`, `dropbear`, `libc.a` or a
/// library's path) → SHA-256, and the first line of `ld --version`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ImageParts {
    /// Name → SHA-256 (or [`MISSING`]).
    pub files: BTreeMap<String, String>,
    /// The linker that links the benchmarks, as `ld --version` names itself.
    pub binutils: String,
}

/// SHA-256 of a file (following symlinks), or [`MISSING`].
fn digest(p: &Path) -> Result<String> {
    match std::fs::read(p) {
        Ok(data) => Ok(crate::util::hex(&Sha256::digest(&data))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(MISSING.into()),
        Err(e) => Err(e).with_context(|| format!("read {}", p.display())),
    }
}

/// Digests the named files: `busybox`, `dropbear`, each library under its
/// path, and `libc.a` when there is a static libc.
pub fn digest_files(
    busybox: &Path,
    dropbear: &Path,
    libs: &[PathBuf],
    libc_a: Option<&Path>,
) -> Result<BTreeMap<String, String>> {
    let mut out = BTreeMap::new();
    out.insert("busybox".to_string(), digest(busybox)?);
    out.insert("dropbear".to_string(), digest(dropbear)?);
    for l in libs {
        out.insert(l.display().to_string(), digest(l)?);
    }
    if let Some(a) = libc_a {
        out.insert("libc.a".to_string(), digest(a)?);
    }
    Ok(out)
}

/// The static libc that `gcc -static` links, when gcc knows one.
fn static_libc() -> Result<Option<PathBuf>> {
    if crate::proc::which("gcc").is_none() {
        return Ok(None);
    }
    let f = Cmd::new("gcc")
        .arg("-print-file-name=libc.a")
        .capture()
        .run_ok()
        .context("ask gcc for its static libc")?;
    let p = PathBuf::from(f.output.trim());
    // gcc answers the bare name when it has none
    Ok(p.is_absolute().then_some(p))
}

/// The first line of `ld --version`, or `ld not found`.
fn binutils() -> Result<String> {
    if crate::proc::which("ld").is_none() {
        return Ok("ld not found".into());
    }
    let f = Cmd::new("ld")
        .arg("--version")
        .capture()
        .run_ok()
        .context("ask ld its version")?;
    Ok(f.output.lines().next().unwrap_or("").trim().to_string())
}

/// What this host would make the guest image of. A host without busybox
/// or dropbear has them [`MISSING`] (making the image then fails with
/// what to install).
pub fn image_parts() -> Result<ImageParts> {
    let (busybox, dropbear) = match HostBins::find() {
        Ok(h) => (h.busybox, h.dropbear),
        Err(_) => (PathBuf::from("/usr/bin/busybox"), PathBuf::from("/usr/sbin/dropbear")),
    };
    let libs = if dropbear.is_file() {
        needed_libs(&dropbear)?
    } else {
        Vec::new()
    };
    Ok(ImageParts {
        files: digest_files(&busybox, &dropbear, &libs, static_libc()?.as_deref())?,
        binutils: binutils()?,
    })
}

/// What differs between the pinned image files and now, one phrase per
/// change; nothing for a run an older harness pinned without them.
pub fn changes(pinned: &ImageParts, now: &ImageParts) -> Vec<String> {
    let mut out = Vec::new();
    if pinned.files.is_empty() && pinned.binutils.is_empty() {
        return out;
    }
    let short = |h: &str| h.chars().take(12).collect::<String>();
    for (f, h) in &pinned.files {
        match now.files.get(f) {
            Some(c) if c == h => {}
            Some(c) if c == MISSING => out.push(format!("guest image file {f} is missing")),
            Some(c) => out.push(format!("guest image file {f} changed ({}, now {})", short(h), short(c))),
            None => out.push(format!("guest image file {f} is no longer used")),
        }
    }
    for f in now.files.keys().filter(|f| !pinned.files.contains_key(*f)) {
        out.push(format!("guest image file {f} was added"));
    }
    if pinned.binutils != now.binutils {
        out.push(format!(
            "the binutils of the benchmarks changed ({}, now {})",
            pinned.binutils, now.binutils
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{scratch, write};

    /// Issue 30: each file copied into the image is digested by name; a
    /// change, a removal and an addition are each named.
    #[test]
    fn image_files_are_digested_and_changes_named() {
        let root = scratch("image-pins");
        let (bb, db, lib, a) = (
            root.join("busybox"),
            root.join("dropbear"),
            root.join("libc.so.6"),
            root.join("libc.a"),
        );
        for (p, s) in [(&bb, "bb1"), (&db, "db1"), (&lib, "lib1"), (&a, "a1")] {
            write(p, s);
        }
        let files = digest_files(&bb, &db, std::slice::from_ref(&lib), Some(&a)).unwrap();
        let libname = lib.display().to_string();
        assert_eq!(
            files.keys().map(String::as_str).collect::<Vec<_>>(),
            [libname.as_str(), "busybox", "dropbear", "libc.a"]
        );
        assert_eq!(files["busybox"], crate::util::hex(&Sha256::digest(b"bb1")));
        let pinned = ImageParts {
            files,
            binutils: "GNU ld 2.40".into(),
        };
        let again = ImageParts {
            files: digest_files(&bb, &db, std::slice::from_ref(&lib), Some(&a)).unwrap(),
            binutils: "GNU ld 2.40".into(),
        };
        assert!(changes(&pinned, &again).is_empty());

        write(&bb, "bb2");
        std::fs::remove_file(&a).unwrap();
        let extra = root.join("libz.so.1");
        write(&extra, "z");
        let now = ImageParts {
            files: digest_files(&bb, &db, &[lib.clone(), extra.clone()], Some(&a)).unwrap(),
            binutils: "GNU ld 2.44".into(),
        };
        let c = changes(&pinned, &now);
        let old = crate::util::hex(&Sha256::digest(b"bb1"));
        let new = crate::util::hex(&Sha256::digest(b"bb2"));
        let want = [
            format!("guest image file busybox changed ({}, now {})", &old[..12], &new[..12]),
            "guest image file libc.a is missing".to_string(),
            format!("guest image file {} was added", extra.display()),
            "the binutils of the benchmarks changed (GNU ld 2.40, now GNU ld 2.44)".to_string(),
        ];
        assert_eq!(c, want);
        assert!(
            changes(&ImageParts::default(), &now).is_empty(),
            "a run pinned without them is not refused"
        );
        std::fs::remove_dir_all(root).ok();
    }

    /// This host's parts: busybox and dropbear by name, the loader among the
    /// libraries, binutils named.
    #[test]
    fn this_hosts_image_parts() {
        let p = image_parts().unwrap();
        assert!(
            p.files.contains_key("busybox") && p.files.contains_key("dropbear"),
            "{p:?}"
        );
        if p.files["dropbear"] != MISSING {
            assert!(p.files.keys().any(|k| k.contains("ld-linux")), "{p:?}");
        }
        assert!(!p.binutils.is_empty());
    }
}
