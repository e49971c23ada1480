//! The `program` benchmarks' part of the image: each program (installed on
//! the host, compiled from C sources, or built in a directory with its own
//! command), the extra files and directories it names, and — through
//! [`super::common_archive`] — the shared libraries of every ELF among them.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

use crate::config::{BenchKind, Build, Executable, Matrix};
use crate::proc::Cmd;

/// A host file and where the guest gets it.
#[derive(Debug, Clone, PartialEq)]
pub struct GuestFile {
    /// Absolute guest path.
    pub guest: String,
    /// The host file.
    pub host: PathBuf,
}

/// Every file the `program` benchmarks a variant of `m` runs put in the image: compiled
/// and built programs go to `out` first. A build's output goes to `log`.
pub fn program_files(m: &Matrix, images: &Path, out: &Path, log: &Path) -> Result<Vec<GuestFile>> {
    let mut files = Vec::new();
    let used = |name: &str| m.variants.iter().any(|v| v.benchmarks.iter().any(|b| b == name));
    for b in m.benchmarks.iter().filter(|b| used(&b.name)) {
        let BenchKind::Program {
            executable,
            files: extra,
            ..
        } = &b.kind
        else {
            continue;
        };
        let host = match executable {
            Executable::Installed { found: Some(p), .. } => p.clone(),
            Executable::Installed { name, found: None } => {
                anyhow::bail!("benchmark {}: `{name}` is not installed on this host", b.name)
            }
            Executable::Built(bd) => built(&b.name, bd, out, log)?,
            Executable::Sources(sources) => compiled(&b.name, sources, images, out, log)?,
        };
        files.push(GuestFile {
            guest: executable.guest_path(&b.name),
            host,
        });
        for f in extra {
            walk(Path::new(f), &mut files).with_context(|| format!("benchmark {}: files", b.name))?;
        }
    }
    Ok(files)
}

/// C sources compiled statically as `images/` programs are, into `out`.
fn compiled(name: &str, sources: &[PathBuf], images: &Path, out: &Path, log: &Path) -> Result<PathBuf> {
    std::fs::create_dir_all(out).with_context(|| format!("create {}", out.display()))?;
    let dst = out.join(format!("prog-{name}"));
    Cmd::new("gcc")
        .args(["-O2", "-Wall", "-static", "-I"])
        .arg(images)
        .arg("-o")
        .arg(&dst)
        .args(sources)
        .log(log)
        .run_ok()
        .with_context(|| format!("compile benchmark {name}"))?;
    Ok(dst)
}

/// A directory built on the host with its command (no shell), its program
/// copied to `out` so a later build cannot change what a run boots with.
fn built(name: &str, b: &Build, out: &Path, log: &Path) -> Result<PathBuf> {
    let (prog, args) = b.command.split_first().context("empty build command")?;
    Cmd::new(prog)
        .args(args)
        .dir(&b.dir)
        .log(log)
        .run_ok()
        .with_context(|| format!("build benchmark {name} in {}", b.dir.display()))?;
    let made = b.dir.join(&b.binary);
    if !made.is_file() {
        bail!(
            "build benchmark {name}: `{}` made no {}",
            b.command.join(" "),
            made.display()
        );
    }
    std::fs::create_dir_all(out).with_context(|| format!("create {}", out.display()))?;
    let dst = out.join(format!("prog-{name}"));
    std::fs::copy(&made, &dst).with_context(|| format!("copy {} to {}", made.display(), dst.display()))?;
    Ok(dst)
}

/// A host file, or every regular file under a host directory, at the same
/// guest paths: symbolic links are followed to their files, never into
/// directories (a link to a parent would copy it again and again), as
/// validation counted them (`tree_bytes` in config/program_check.rs).
fn walk(p: &Path, out: &mut Vec<GuestFile>) -> Result<()> {
    let link = std::fs::symlink_metadata(p).with_context(|| format!("stat {}", p.display()))?;
    let meta = std::fs::metadata(p).with_context(|| format!("stat {}", p.display()))?;
    if link.is_symlink() && meta.is_dir() {
        return Ok(());
    }
    if meta.is_file() {
        out.push(GuestFile {
            guest: p.display().to_string(),
            host: p.to_path_buf(),
        });
        return Ok(());
    }
    if !meta.is_dir() {
        bail!("{} is neither a file nor a directory", p.display());
    }
    let mut entries: Vec<PathBuf> = std::fs::read_dir(p)
        .with_context(|| format!("read {}", p.display()))?
        .map(|e| e.map(|e| e.path()))
        .collect::<std::io::Result<_>>()
        .with_context(|| format!("read {}", p.display()))?;
    entries.sort();
    for e in entries {
        walk(&e, out)?;
    }
    Ok(())
}

/// Whether a host file is an ELF object (whose libraries the guest needs).
pub fn is_elf(p: &Path) -> bool {
    use std::io::Read;
    let mut magic = [0u8; 4];
    std::fs::File::open(p)
        .and_then(|mut f| f.read_exact(&mut magic))
        .is_ok()
        && magic == *b"\x7fELF"
}
