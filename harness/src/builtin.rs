//! What travels inside the binary: the benchmark sources (`images/`), the
//! default matrix with its fragments (`kconfigs/`) and its seed series
//! (`patches/`), embedded at build time. [`materialise`] writes them once
//! into `<work-dir>/builtin/<hash>/`, so `harness` runs from any directory:
//! a matrix without `images/` beside it gets these benchmarks, and `try`
//! without `--matrix` gets this matrix.

use std::path::{Path, PathBuf};

use crate::workdir::WorkDir;
use anyhow::{Context, Result};
use sha2::{Digest, Sha256};

macro_rules! files {
    ($($path:literal),* $(,)?) => {
        &[$(($path, include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/../", $path)) as &[u8])),*]
    };
}

/// Every embedded file, by its path relative to the checkout's top.
/// `every_shipped_file_is_embedded` keeps the list whole.
pub const FILES: &[(&str, &[u8])] = files![
    "matrix.yaml",
    "images/bench-common.h",
    "images/doexec.c",
    "images/forkexec.c",
    "images/forkprlimit.c",
    "images/profmark.c",
    "kconfigs/base.config",
    "kconfigs/bench.config",
    "kconfigs/kvm-host.config",
    "kconfigs/lockdep.config",
    "kconfigs/profiling.config",
    "patches/README.md",
    "patches/i-mmap-batching/series",
    "patches/i-mmap-batching/0001-mm-batch-unlink_file_vma-calls-in-free_pgtables.patch",
    "patches/lazy-rss-stat/series",
    "patches/lazy-rss-stat/0001-lib-add-lazily-upgraded-per-cpu-counters.patch",
    "patches/lazy-rss-stat/0002-mm-avoid-per-cpu-rss_stat-counters-for-single-task-m.patch",
    "patches/pcpcntr-grouping/series",
    "patches/pcpcntr-grouping/0001-fork-group-allocation-free-of-the-mm-rss_stat-per-cp.patch",
    "patches/prlimit-tasklist-lock/series",
    "patches/prlimit-tasklist-lock/0001-kernel-sys.c-only-take-tasklist_lock-for-get-setprio.patch",
    "patches/prlimit-tasklist-lock/0002-prlimit-do-not-grab-the-tasklist_lock-in-do_prlimit.patch",
    "patches/vmalloc-lazy-nr/series",
    "patches/vmalloc-lazy-nr/0001-mm-vmalloc-subtract-purged-pages-from-vmap_lazy_nr-o.patch",
    "patches/vmalloc-lazy-nr-nonatomic/series",
    "patches/vmalloc-lazy-nr-nonatomic/0001-mm-vmalloc-non-atomic-vmap_lazy_nr-update-in-free_vm.patch",
];

/// `<work>/builtin/<hash>/`: where this harness's embedded files go (the
/// hash is over every file), written or not.
pub fn dir(work: &WorkDir) -> PathBuf {
    let mut h = Sha256::new();
    for (p, data) in FILES {
        h.update(p.as_bytes());
        h.update((data.len() as u64).to_le_bytes());
        h.update(data);
    }
    work.builtin_version(&crate::util::hex(&h.finalize()[..8]))
}

/// Writes the embedded files under `<work>/builtin/<hash>/` (once, whole,
/// verified at every use: [`crate::util::write_dir_once`]; the hash is over
/// every file, so a new harness gets a new directory) and returns
/// that directory: `matrix.yaml`, `images/`, `kconfigs/`, `patches/`.
pub fn materialise(work: &WorkDir) -> Result<PathBuf> {
    let dir = dir(work);
    crate::util::write_dir_once(&dir, FILES).context("write the embedded files")?;
    Ok(dir)
}

/// The benchmark sources: `flag` when given, else `images/` beside the
/// matrix when it exists (a checkout), else the embedded copy.
pub fn images_dir(flag: Option<&Path>, matrix: &Path, work: &WorkDir) -> Result<PathBuf> {
    if let Some(d) = flag {
        return Ok(d.to_path_buf());
    }
    let beside = matrix
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
        .join("images");
    if beside.join("doexec.c").is_file() {
        return Ok(beside);
    }
    Ok(materialise(work)?.join("images"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn walk(root: &Path, rel: &str, out: &mut Vec<String>) {
        for e in std::fs::read_dir(root.join(rel)).unwrap() {
            let e = e.unwrap();
            let r = if rel.is_empty() {
                e.file_name().to_string_lossy().into_owned()
            } else {
                format!("{rel}/{}", e.file_name().to_string_lossy())
            };
            if e.file_type().unwrap().is_dir() {
                walk(root, &r, out);
            } else {
                out.push(r);
            }
        }
    }

    #[test]
    fn every_shipped_file_is_embedded() {
        let top = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
        let mut on_disk = vec!["matrix.yaml".to_string()];
        for d in ["images", "kconfigs", "patches"] {
            walk(top, d, &mut on_disk);
        }
        on_disk.sort();
        let mut embedded: Vec<String> = FILES.iter().map(|(p, _)| p.to_string()).collect();
        embedded.sort();
        assert_eq!(
            embedded, on_disk,
            "list every file of images/, kconfigs/ and patches/ in builtin::FILES"
        );
    }

    #[test]
    fn the_embedded_matrix_loads_from_its_own_directory() {
        let tmp = tempfile::tempdir().unwrap();
        let work = tmp.path().to_path_buf();
        let wd = WorkDir::at(&work);
        let dir = materialise(&wd).unwrap();
        assert_eq!(materialise(&wd).unwrap(), dir, "written once, found again");
        let m = crate::config::load(&dir.join("matrix.yaml"), Some("premerge")).unwrap();
        assert_eq!(m.vcpus, vec![26]);
        assert!(m.kernel.fragments.iter().all(|f| f.starts_with(&dir) && f.is_file()));
        let elsewhere = work.join("elsewhere/matrix.yaml");
        assert_eq!(images_dir(None, &elsewhere, &wd).unwrap(), dir.join("images"));
        assert!(dir.join("images/doexec.c").is_file());
        let top = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
        assert_eq!(
            images_dir(None, &top.join("matrix.yaml"), &wd).unwrap(),
            top.join("images")
        );
        assert_eq!(
            images_dir(Some(Path::new("/x")), &elsewhere, &wd).unwrap(),
            PathBuf::from("/x")
        );
    }

    fn holds_every_file(dir: &Path) -> bool {
        FILES
            .iter()
            .all(|(p, data)| std::fs::read(dir.join(p)).ok().as_deref() == Some(*data))
    }

    #[test]
    fn a_half_written_directory_is_not_reused() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = materialise(&WorkDir::at(tmp.path())).unwrap();
        // what a harness killed while writing (or racing another) left behind
        std::fs::remove_file(dir.join("images/doexec.c")).unwrap();
        std::fs::write(dir.join("images/forkexec.c"), "torn").unwrap();
        let again = materialise(&WorkDir::at(tmp.path())).unwrap();
        assert!(holds_every_file(&again), "a damaged directory is written afresh");
    }

    #[test]
    fn concurrent_first_uses_all_get_whole_files() {
        for _ in 0..5 {
            let tmp = tempfile::tempdir().unwrap();
            let work = WorkDir::at(tmp.path());
            let got: Vec<Result<PathBuf>> = std::thread::scope(|s| {
                let hs: Vec<_> = (0..8).map(|_| s.spawn(|| materialise(&work))).collect();
                hs.into_iter().map(|h| h.join().unwrap()).collect()
            });
            for g in got {
                let d = g.unwrap();
                assert!(holds_every_file(&d), "{}", d.display());
            }
        }
    }
}
