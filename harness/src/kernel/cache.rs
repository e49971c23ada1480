//! A kernel cache entry's `artifact.json`: the artifact (`build::Artifact`) with the size
//! and SHA-256 of every file stored beside it (`bzImage`, `vmlinux`,
//! `config`, the modules), written synced, and checked before each use.

use std::io::Read;
use std::path::Path;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// One stored file: its path in the entry, size and SHA-256 (hex).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Stored {
    /// Path relative to the entry's directory.
    pub path: String,
    /// Bytes.
    pub size: u64,
    /// SHA-256 of the bytes, hex.
    pub sha256: String,
}

/// `artifact.json`: the artifact and its files (none in an entry written
/// before they were recorded).
#[derive(Debug, Serialize, Deserialize)]
pub struct CacheRecord<A> {
    /// The kernel.
    #[serde(flatten)]
    pub art: A,
    /// Its files.
    #[serde(default)]
    pub files: Vec<Stored>,
}

/// The size and SHA-256 of `path`.
fn digest(path: &Path) -> Result<(u64, String)> {
    let mut f = std::fs::File::open(path).with_context(|| format!("open {}", path.display()))?;
    let (mut h, mut buf, mut size) = (Sha256::new(), vec![0u8; 1 << 20], 0u64);
    loop {
        let n = f.read(&mut buf).with_context(|| format!("read {}", path.display()))?;
        if n == 0 {
            return Ok((size, crate::util::hex(&h.finalize())));
        }
        h.update(&buf[..n]);
        size += n as u64;
    }
}

/// Every regular file under `dir` (sorted by path), each synced to disk and
/// digested: what the entry holds before its `artifact.json` is written.
pub fn digests(dir: &Path) -> Result<Vec<Stored>> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).with_context(|| format!("read {}", d.display()))? {
            let p = e.with_context(|| format!("read {}", d.display()))?.path();
            let ty = std::fs::symlink_metadata(&p).with_context(|| format!("stat {}", p.display()))?;
            if ty.is_dir() {
                todo.push(p);
            } else if ty.is_file() {
                std::fs::File::open(&p)
                    .and_then(|f| f.sync_all())
                    .with_context(|| format!("sync {}", p.display()))?;
                let (size, sha256) = digest(&p)?;
                let path = p.strip_prefix(dir).unwrap_or(&p).to_string_lossy().into_owned();
                out.push(Stored { path, size, sha256 });
            }
        }
        sync_dir(&d);
    }
    out.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(out)
}

/// Whether every file of `files` is in `dir` with its size and SHA-256.
pub fn verify(dir: &Path, files: &[Stored]) -> bool {
    files.iter().all(|f| {
        let p = dir.join(&f.path);
        std::fs::metadata(&p).is_ok_and(|m| m.len() == f.size)
            && digest(&p).is_ok_and(|(size, sha)| size == f.size && sha == f.sha256)
    })
}

/// Syncs a directory's entries (a rename into it, a file made in it); best
/// effort: a file system that cannot sync a directory loses nothing more.
pub fn sync_dir(dir: &Path) {
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
}
