//! The second pass over `program` benchmarks: what needs the matrix's
//! directory (paths made absolute) or the host (`PATH`), and the question
//! callers that pick benchmarks themselves ask again: is its program here?

use std::path::PathBuf;

use super::params::BenchKind;
use super::program::{Build, Executable};
use super::validated::{Benchmark, Matrix};

/// The second pass over a `program` benchmark at `at`: an installed
/// program looked up on the host's `PATH`; sources, files and the build
/// directory made absolute and checked to exist. `path` makes a
/// matrix-relative name absolute. Gives the kind with its paths resolved
/// and, for a program not installed here, why: that is a problem only
/// where a variant runs the benchmark, so it is not put in `p`.
pub fn resolve(
    mut kind: BenchKind,
    at: &str,
    path: &dyn Fn(&str) -> PathBuf,
    p: &mut Vec<String>,
) -> (BenchKind, Option<String>) {
    let BenchKind::Program { executable, files, .. } = &mut kind else {
        return (kind, None);
    };
    let (here, missing) = executable_here(executable, at, path, p);
    *executable = here;
    *files = absolute(files, &format!("{at}.files"), path, p)
        .iter()
        .map(|f| f.display().to_string())
        .collect();
    (kind, missing)
}

/// The executable as this host has it: an installed program found, sources
/// and the build directory made absolute and checked to exist; with why,
/// when the program is not installed here.
fn executable_here(
    e: &Executable,
    at: &str,
    path: &dyn Fn(&str) -> PathBuf,
    p: &mut Vec<String>,
) -> (Executable, Option<String>) {
    match e {
        Executable::Installed { name, .. } => {
            let found = installed(name, at, path, p);
            let missing = found.is_none().then(|| {
                format!(
                    "{at}.run: `{name}` is not installed on this host (install its package, e.g. with harness/scripts/setup-host.sh, or give its path)"
                )
            });
            let name = name.clone();
            (Executable::Installed { name, found }, missing)
        }
        Executable::Sources(s) => {
            let names: Vec<String> = s.iter().map(|f| f.display().to_string()).collect();
            (
                Executable::Sources(absolute(&names, &format!("{at}.sources"), path, p)),
                None,
            )
        }
        Executable::Built(b) => {
            let dir = path(&b.dir.display().to_string());
            if !dir.is_dir() {
                p.push(format!("{at}.build.dir: no directory `{}`", dir.display()));
            }
            (Executable::Built(Build { dir, ..b.clone() }), None)
        }
    }
}

/// `names` made absolute by `path`; each that does not exist is a problem
/// at `at[i]`.
fn absolute(names: &[String], at: &str, path: &dyn Fn(&str) -> PathBuf, p: &mut Vec<String>) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for (i, f) in names.iter().enumerate() {
        let fp = path(f);
        if !fp.exists() {
            p.push(format!("{at}[{i}]: no file `{}`", fp.display()));
        }
        out.push(fp);
    }
    out
}

/// An installed program `run`: a path (made absolute) that is an
/// executable file, or a name found on `PATH`. A file that is not
/// executable is a problem in `p`.
fn installed(run: &str, at: &str, path: &dyn Fn(&str) -> PathBuf, p: &mut Vec<String>) -> Option<PathBuf> {
    if !run.contains('/') {
        return crate::proc::which(run);
    }
    let f = path(run);
    if f.is_file() && !crate::proc::is_executable(&f) {
        p.push(format!(
            "{at}.run: `{}` is not executable (make it so with chmod +x, or name an installed program)",
            f.display()
        ));
    }
    f.is_file().then_some(f)
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
        BenchKind::Program {
            executable: Executable::Installed { name, found: None },
            ..
        } => Some(format!(
            "benchmark {}: `{name}` is not installed on this host (install its package, e.g. with harness/scripts/setup-host.sh)",
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
