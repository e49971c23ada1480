//! The second pass over `program` benchmarks: what needs the matrix's
//! directory (paths made absolute) or the host (`PATH`), and the question
//! callers that pick benchmarks themselves ask again: is its program here?

use std::path::PathBuf;

use super::params::BenchKind;
use super::validated::{Benchmark, Matrix};

/// The second pass over a `program` benchmark at `at`: exactly one of
/// `run`, `sources` and `build`; an installed program found on the host's
/// `PATH`; sources, files and the build directory made absolute and
/// checked to exist. `path` makes a matrix-relative name absolute. A
/// program not installed here is given back, not put in `p`: it is a
/// problem only where a variant runs the benchmark.
pub fn resolve(kind: &mut BenchKind, at: &str, path: &dyn Fn(&str) -> PathBuf, p: &mut Vec<String>) -> Option<String> {
    let BenchKind::Program {
        run,
        sources,
        build,
        files,
        ..
    } = kind
    else {
        return None;
    };
    let mut missing = None;
    let given = [!run.is_empty(), !sources.is_empty(), build.is_some()];
    if given.iter().filter(|g| **g).count() != 1 {
        p.push(format!(
            "{at}: a program benchmark names exactly one of run (an installed program), sources (C files) or build (a directory)"
        ));
    }
    if run.contains('/') && path(run).is_file() && !crate::proc::is_executable(&path(run)) {
        p.push(format!(
            "{at}.run: `{}` is not executable (make it so with chmod +x, or name an installed program)",
            path(run).display()
        ));
    }
    if !run.is_empty() {
        match find_program(run, path) {
            Some(found) => *run = found.display().to_string(),
            None => {
                missing = Some(format!(
                    "{at}.run: `{run}` is not installed on this host (install its package, e.g. with harness/scripts/setup-host.sh, or give its path)"
                ))
            }
        }
    }
    for (what, names) in [("sources", sources), ("files", files)] {
        for (i, f) in names.iter_mut().enumerate() {
            let fp = path(f);
            if !fp.exists() {
                p.push(format!("{at}.{what}[{i}]: no file `{}`", fp.display()));
            }
            *f = fp.display().to_string();
        }
    }
    if let Some(b) = build {
        b.dir = path(&b.dir.display().to_string());
        if !b.dir.is_dir() {
            p.push(format!("{at}.build.dir: no directory `{}`", b.dir.display()));
        }
    }
    missing
}

/// An installed program: a path (made absolute) that is a file, or a name
/// found on `PATH`.
fn find_program(run: &str, path: &dyn Fn(&str) -> PathBuf) -> Option<PathBuf> {
    if run.contains('/') {
        let p = path(run);
        // a file that is not executable is a problem of its own (resolve)
        return p.is_file().then_some(p);
    }
    crate::proc::which(run)
}

/// The first `program` benchmark a variant of `m` runs whose program is
/// not installed here (validation leaves unused ones be; a caller that
/// picks other benchmarks, as `try --bench` does, asks again).
pub fn not_installed(m: &Matrix) -> Option<String> {
    m.benchmarks
        .iter()
        .filter(|b| m.variants.iter().any(|v| v.benchmarks.contains(&b.name)))
        .find_map(missing_program)
}

/// Why benchmark `b` cannot run here: a `program` whose program was not
/// found when the matrix was validated.
pub fn missing_program(b: &Benchmark) -> Option<String> {
    match &b.kind {
        BenchKind::Program { run, .. } if !run.is_empty() && !std::path::Path::new(run).is_absolute() => Some(format!(
            "benchmark {}: `{run}` is not installed on this host (install its package, e.g. with harness/scripts/setup-host.sh)",
            b.name
        )),
        _ => None,
    }
}

/// Each `program` benchmark's `files:` against the guest's memory: the
/// guest image carries them in guest memory, so more than half of it is a
/// problem at the benchmark's `files`, before any build (a 1.2 GB file
/// used to pass, take 2.57 GB of host memory and a boot before QEMU said
/// "initrd is too large").
pub fn files_fit(benchmarks: &[Benchmark], memory_mib: u64, p: &mut Vec<String>) {
    for (i, b) in benchmarks.iter().enumerate() {
        let BenchKind::Program { files, .. } = &b.kind else {
            continue;
        };
        let bytes: u64 = files.iter().map(|f| tree_bytes(std::path::Path::new(f))).sum();
        if bytes > memory_mib << 19 {
            p.push(format!(
                "benchmarks[{i}].files: {} MiB in all, more than half the guest's {memory_mib} MiB of memory, \
                 which holds them (raise guest.memory_mib or ship less)",
                bytes >> 20
            ));
        }
    }
}

/// The bytes of a file, or of every file under a directory, as the guest
/// image takes them: links to files followed, links to directories not
/// (so a link to a parent is no loop).
fn tree_bytes(p: &std::path::Path) -> u64 {
    let Ok(meta) = std::fs::symlink_metadata(p) else {
        return 0;
    };
    if meta.is_symlink() {
        return std::fs::metadata(p).map_or(0, |m| if m.is_file() { m.len() } else { 0 });
    }
    if meta.is_file() {
        return meta.len();
    }
    std::fs::read_dir(p).map_or(0, |rd| rd.flatten().map(|e| tree_bytes(&e.path())).sum())
}
