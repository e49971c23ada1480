//! Configuring and building one variant in the work tree, and the cache of
//! built kernels (`work/kernels/<key>/`), keyed by the source, the final
//! `.config` and the patches applied, so a variant is built once.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::cache;
use super::fault::{host_fault, HostFault};
use super::kconfig::{self, Config, Lost};
use super::tree::{Applied, Tree};
use crate::config::BaseConfig;
use crate::proc::Cmd;
use crate::util::hex;
use crate::workdir::WorkDir;

/// A built kernel.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Artifact {
    /// Cache key.
    pub key: String,
    /// Directory holding it.
    pub dir: PathBuf,
    /// `bzImage`.
    pub bzimage: PathBuf,
    /// `vmlinux` (for PVH boot).
    pub vmlinux: PathBuf,
    /// `lib/modules/<release>` root (INSTALL_MOD_PATH), if modules were built.
    pub modules: Option<PathBuf>,
    /// `uname -r` of the kernel.
    pub release: String,
    /// Seconds the build took (0 for a cache hit in this run).
    pub build_s: f64,
    /// CONFIG_NR_CPUS of the final config.
    pub nr_cpus: Option<u32>,
}

impl Artifact {
    /// Whether the kernel was built with CONFIG_PVH: its `vmlinux` has a
    /// PVH entry QEMU can boot directly.
    pub fn has_pvh(&self) -> bool {
        std::fs::read_to_string(self.dir.join("config"))
            .map(|c| c.contains("\nCONFIG_PVH=y"))
            .unwrap_or(false)
    }

    /// The image to boot: `vmlinux` through its PVH entry when `pvh` is
    /// asked for (the matrix's `guest.pvh`) and the kernel has one, else
    /// `bzImage`.
    pub fn boot_image(&self, pvh: bool) -> &Path {
        if pvh && self.has_pvh() {
            &self.vmlinux
        } else {
            &self.bzimage
        }
    }
}

/// Result of configuring.
pub struct Configured {
    /// The final `.config`.
    pub config: Config,
    /// Requested symbols that did not keep their value.
    pub lost: Vec<Lost>,
    /// Text of the final `.config`.
    pub text: String,
}

fn make(tree: &Tree, work: &WorkDir) -> Cmd {
    let c = Cmd::new("make")
        .arg("-C")
        .arg(&tree.dir)
        .env("KBUILD_BUILD_TIMESTAMP", "harness")
        .env("KBUILD_BUILD_USER", "harness")
        .env("KBUILD_BUILD_HOST", "harness");
    with_ccache(c, tree, work)
}

/// Compiles through ccache when it is installed, with its cache beside the
/// tree copies (`work/ccache`): variants share one tree, and a series that
/// touches a widely included header makes the next variant rebuild most of
/// the kernel; ccache turns those rebuilds into cache hits. The compiler's
/// version text, and so `.config` and the cache key, do not change.
/// Depend mode (`CCACHE_DEPEND`): a miss hashes the include files the
/// compiler's `-MMD` file names instead of running the preprocessor once
/// more, so a cold cache costs +5% compile CPU instead of +47%, with the
/// same direct hits (docs/measurements/2026-12-01-build-and-icount-cost.md).
fn with_ccache(c: Cmd, tree: &Tree, work: &WorkDir) -> Cmd {
    let Some(ccache) = crate::proc::which("ccache") else {
        return c;
    };
    c.arg(format!("CC={} gcc", ccache.display()))
        .env("CCACHE_DIR", work.ccache())
        .env("CCACHE_MAXSIZE", "8G")
        .env("CCACHE_BASEDIR", &tree.dir)
        .env("CCACHE_DEPEND", "1")
}

/// The base config: a file, or a config target (`tinyconfig`) made once
/// per tree and kept beside it.
fn base_config(tree: &Tree, base: &BaseConfig, work: &WorkDir, log: &Path) -> Result<Config> {
    let t = match base {
        BaseConfig::File(f) => return kconfig::read(f),
        BaseConfig::Target(t) => t,
    };
    // a run.json written by an older harness is not validated again
    if !crate::config::is_base_config_target(t) {
        anyhow::bail!("make the base config: `{t}` is not a config target this harness runs");
    }
    let cached = work.tree_companion(&tree.key, t);
    if !cached.is_file() {
        make_ok(
            make(tree, work).arg(t).deadline(Duration::from_secs(600)),
            &format!("make {t}"),
            log,
        )?;
        std::fs::copy(tree.dir.join(".config"), &cached).with_context(|| format!("write {}", cached.display()))?;
    }
    kconfig::read(&cached)
}

/// Writes the base config merged with `fragments`, runs `olddefconfig`, and
/// reports the requested symbols that changed.
pub fn configure(
    tree: &Tree,
    base: &BaseConfig,
    fragments: &[PathBuf],
    work: &WorkDir,
    log: &Path,
) -> Result<Configured> {
    let base_cfg = base_config(tree, base, work, log)?;
    let frags = fragments.iter().map(|f| kconfig::read(f)).collect::<Result<Vec<_>>>()?;
    let (merged, requested, overrides) = kconfig::merge(&base_cfg, &frags);
    let mut note = String::new();
    for o in &overrides {
        note.push_str(&format!(
            "note: CONFIG_{} redefined from {} to {} by {}\n",
            o.symbol,
            o.was,
            o.now,
            fragments[o.fragment].display()
        ));
    }
    let dot_config = tree.dir.join(".config");
    std::fs::write(&dot_config, kconfig::render(&merged)).with_context(|| format!("write {}", dot_config.display()))?;
    make_ok(
        make(tree, work).arg("olddefconfig").deadline(Duration::from_secs(600)),
        "make olddefconfig",
        log,
    )?;
    let text = std::fs::read_to_string(&dot_config).with_context(|| format!("read {}", dot_config.display()))?;
    let config = kconfig::parse(&text).map_err(|e| anyhow::anyhow!("read the final .config: {e}"))?;
    let lost = kconfig::lost(&requested, &config);
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(log)
        .with_context(|| format!("open {}", log.display()))?;
    use std::io::Write;
    f.write_all(note.as_bytes())?;
    for l in &lost {
        writeln!(f, "warning: {l}")?;
    }
    Ok(Configured { config, lost, text })
}

/// The cache key of a variant's kernel.
pub fn key(tree: &Tree, config_text: &str, applied: &[Applied]) -> Result<String> {
    let mut h = Sha256::new();
    h.update(tree.key.as_bytes());
    h.update(config_text.as_bytes());
    for a in applied {
        h.update([a.reverse as u8]);
        h.update(std::fs::read(&a.patch).with_context(|| format!("read {}", a.patch.display()))?);
    }
    Ok(hex(&h.finalize()[..8]))
}

/// Writes `dir/artifact.json` for `art`: the size and SHA-256 of every file
/// `dir` holds (each synced first), the whole synced.
pub fn write_entry(dir: &Path, art: &Artifact) -> Result<()> {
    let files = cache::digests(dir)?;
    let entry = cache::CacheRecord {
        art: art.clone(),
        files,
    };
    crate::util::write_whole(&dir.join("artifact.json"), &serde_json::to_vec_pretty(&entry)?)
}

/// Loads a cached kernel and records its use (for `harness gc`): only an
/// entry whose every file has the size and SHA-256 its `artifact.json`
/// records (an entry written before they were recorded, or damaged, is a
/// miss, built again).
pub fn cached(work: &WorkDir, key: &str) -> Option<Artifact> {
    let dir = work.kernel(key);
    let entry: cache::CacheRecord<Artifact> =
        serde_json::from_slice(&std::fs::read(dir.join("artifact.json")).ok()?).ok()?;
    if entry.files.is_empty() || !cache::verify(&dir, &entry.files) {
        return None;
    }
    let mut a = entry.art;
    // the work directory may have moved since the kernel was stored
    a.bzimage = dir.join("bzImage");
    a.vmlinux = dir.join("vmlinux");
    a.modules = a.modules.as_ref().map(|_| dir.join("mods"));
    a.dir = dir;
    crate::workdir::touch(&a.dir.join(crate::workdir::LAST_USED));
    Some(a)
}

/// Why a build failed, with the compiler's error lines.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct BuildFailure {
    /// `make` timed out.
    pub timed_out: bool,
    /// Lines with `error:` (and make's own `Error` lines), at most 20.
    pub errors: Vec<String>,
}

/// Pulls the error lines out of a build log.
pub fn error_lines(log: &str) -> Vec<String> {
    log.lines()
        .filter(|l| {
            l.contains("error:")
                || l.contains("] Error ")
                || l.starts_with("make: ***")
                || l.contains("undefined reference")
        })
        .take(20)
        .map(|l| l.trim().to_string())
        .collect()
}

/// Runs `cmd` (a make logged to `log`); a failure the host caused is a
/// [`HostFault`], any other a plain error.
fn make_ok(cmd: Cmd, what: &str, log: &Path) -> Result<()> {
    let from = log_len(log);
    let oom = crate::host::OomKills::now();
    let f = cmd.log(log).run()?;
    if f.success() {
        return Ok(());
    }
    crate::proc::check_interrupted()?;
    let text = log_since(log, from);
    if let Some(why) = make_fault(&f, &text, oom) {
        return Err(HostFault {
            what: what.into(),
            why,
            log: log.display().to_string(),
        }
        .into());
    }
    let how = if f.timed_out {
        "timed out".to_string()
    } else {
        crate::proc::exit_words(f.code)
    };
    let tail = crate::proc::tail_lines(&text, 15);
    anyhow::bail!("{what}: {how} (log: {})\n{tail}", log.display())
}

/// Why a failed make `f` (its log `text`) was the host's doing: what
/// [`host_fault`] reads from how it ended and its words, else the OOM
/// killer's counts risen since `oom` (a victim that printed nothing).
fn make_fault(f: &crate::proc::Finished, text: &str, oom: crate::host::OomKills) -> Option<String> {
    host_fault("make", f.code, f.signal, text).or_else(|| crate::host::OomKills::now().since(oom))
}

/// How long `log` is now (0 when it is not there yet).
fn log_len(log: &Path) -> u64 {
    std::fs::metadata(log).map(|m| m.len()).unwrap_or(0)
}

/// What was appended to `log` after it was `from` bytes long: the words of
/// this make alone, not of an earlier attempt's (a log is appended to).
fn log_since(log: &Path, from: u64) -> String {
    let data = std::fs::read(log).unwrap_or_default();
    String::from_utf8_lossy(data.get(from as usize..).unwrap_or_default()).into_owned()
}

/// Memory a kernel build's compiler job may take, in MiB (a large
/// translation unit with debug info takes over 1 GiB).
pub const MIB_PER_BUILD_JOB: u64 = 1536;

/// `make -j`: the host's CPUs, capped so every job has
/// [`MIB_PER_BUILD_JOB`] of the memory available (`None`: unknown, no cap),
/// at least 1.
pub fn build_jobs(cpus: u32, available_mib: Option<u64>) -> u32 {
    let by_mem = available_mib.map_or(u64::from(cpus), |m| m / MIB_PER_BUILD_JOB);
    (u64::from(cpus).min(by_mem) as u32).max(1)
}

/// Builds the configured tree and stores the kernel under `work/kernels/<key>`.
/// A failure the host caused is an `Err` holding a [`HostFault`].
pub fn build(
    tree: &Tree,
    cfg: &Configured,
    key: &str,
    work: &WorkDir,
    timeout: Duration,
    log: &Path,
) -> Result<Result<Artifact, BuildFailure>> {
    let jobs = build_jobs(crate::host::cpus(), crate::host::memory_available_mib());
    let modules = cfg.config.get("MODULES").map(|v| v == "y").unwrap_or(false);
    let mut targets = vec!["bzImage", "vmlinux"];
    if modules {
        targets.push("modules");
    }
    let start = std::time::Instant::now();
    let from = log_len(log);
    let oom = crate::host::OomKills::now();
    let f = make(tree, work)
        .arg(format!("-j{jobs}"))
        .args(targets)
        .log(log)
        .deadline(timeout)
        .run()?;
    if !f.success() {
        // make killed by Ctrl-C is an interruption, not a failed build
        crate::proc::check_interrupted()?;
        let text = log_since(log, from);
        if let (false, Some(why)) = (f.timed_out, make_fault(&f, &text, oom)) {
            return Err(HostFault {
                what: "build the kernel".into(),
                why,
                log: log.display().to_string(),
            }
            .into());
        }
        return Ok(Err(BuildFailure {
            timed_out: f.timed_out,
            errors: error_lines(&text),
        }));
    }
    store(tree, cfg, key, work, modules, start.elapsed().as_secs_f64(), log).map(Ok)
}

/// Stores the built tree's kernel under `work/kernels/<key>`: the files
/// written into `<key>.partial`, each synced, `artifact.json` (with every
/// file's size and SHA-256) last, the whole renamed into place and the
/// rename synced, so a crash leaves a whole entry or none.
fn store(
    tree: &Tree,
    cfg: &Configured,
    key: &str,
    work: &WorkDir,
    modules: bool,
    build_s: f64,
    log: &Path,
) -> Result<Artifact> {
    let dir = work.kernel(key);
    let tmp = dir.with_extension("partial");
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(&tmp).with_context(|| format!("create {}", tmp.display()))?;
    let mods = if modules {
        let install = make(tree, work)
            .arg("modules_install")
            .arg(format!("INSTALL_MOD_PATH={}", tmp.join("mods").display()))
            .arg("INSTALL_MOD_STRIP=1");
        make_ok(install.deadline(Duration::from_secs(600)), "make modules_install", log)?;
        Some(dir.join("mods"))
    } else {
        None
    };
    std::fs::copy(tree.dir.join("arch/x86/boot/bzImage"), tmp.join("bzImage")).context("copy bzImage")?;
    std::fs::copy(tree.dir.join("vmlinux"), tmp.join("vmlinux")).context("copy vmlinux")?;
    std::fs::write(tmp.join("config"), &cfg.text).with_context(|| format!("write {}/config", tmp.display()))?;
    let release = std::fs::read_to_string(tree.dir.join("include/config/kernel.release"))
        .context("read kernel.release")?
        .trim()
        .to_string();
    let art = Artifact {
        key: key.to_string(),
        dir: dir.clone(),
        bzimage: dir.join("bzImage"),
        vmlinux: dir.join("vmlinux"),
        modules: mods,
        release,
        build_s,
        nr_cpus: cfg.config.get("NR_CPUS").and_then(|v| v.parse().ok()),
    };
    write_entry(&tmp, &art)?;
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::rename(&tmp, &dir).with_context(|| format!("store the kernel in {}", dir.display()))?;
    cache::sync_dir(&work.kernels());
    crate::workdir::touch(&dir.join(crate::workdir::LAST_USED));
    Ok(art)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_lines_keep_compiler_and_make_errors() {
        let log = "  CC      mm/memory.o\nmm/memory.c:12:5: error: 'x' undeclared\nmake[2]: *** [scripts/Makefile.build:229: mm/memory.o] Error 1\n  CC kernel/fork.o\n";
        assert_eq!(
            error_lines(log),
            vec![
                "mm/memory.c:12:5: error: 'x' undeclared",
                "make[2]: *** [scripts/Makefile.build:229: mm/memory.o] Error 1"
            ]
        );
    }

    /// Issue 30: a cache entry records each file's size and SHA-256 in
    /// `artifact.json` and is verified on use: a file damaged (a byte
    /// changed at the same size, or cut short) or an entry written without
    /// them is a miss (it used to be taken whenever `bzImage` existed).
    #[test]
    fn a_cache_entry_is_verified_on_use() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        let src = root.join("linux");
        for (f, text) in [
            ("Makefile", "bzImage vmlinux:\n\ttrue\n"),
            ("arch/x86/boot/bzImage", "image"),
            ("vmlinux", "elf-bytes"),
            ("include/config/kernel.release", "6.12.0\n"),
        ] {
            std::fs::create_dir_all(src.join(f).parent().unwrap()).unwrap();
            std::fs::write(src.join(f), text).unwrap();
        }
        let (work, log) = (WorkDir::at(&root.join("work")), root.join("build.log"));
        let tree = Tree::prepare(&src, &work, &log).unwrap();
        let cfg = Configured {
            config: Default::default(),
            lost: vec![],
            text: "CONFIG_X=y\n".into(),
        };
        let art = build(&tree, &cfg, "k1", &work, Duration::from_secs(60), &log)
            .unwrap()
            .unwrap();
        let json = art.dir.join("artifact.json");
        let entry: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
        let files = entry["files"].as_array().unwrap();
        let names: Vec<&str> = files.iter().map(|f| f["path"].as_str().unwrap()).collect();
        assert_eq!(names, ["bzImage", "config", "vmlinux"]);
        assert_eq!(files[2]["size"], 9);
        assert_eq!(files[2]["sha256"], hex(&Sha256::digest(b"elf-bytes")));
        assert_eq!(cached(&work, "k1").map(|a| a.release).as_deref(), Some("6.12.0"));
        let vmlinux = art.dir.join("vmlinux");
        std::fs::write(&vmlinux, "elf-bytez").unwrap();
        assert!(cached(&work, "k1").is_none(), "a byte changed");
        std::fs::write(&vmlinux, "elf-bytes").unwrap();
        assert!(cached(&work, "k1").is_some());
        std::fs::write(art.dir.join("bzImage"), "ima").unwrap();
        assert!(cached(&work, "k1").is_none(), "cut short");
        std::fs::write(art.dir.join("bzImage"), "image").unwrap();
        let mut legacy = entry.clone();
        legacy.as_object_mut().unwrap().remove("files");
        std::fs::write(&json, serde_json::to_vec(&legacy).unwrap()).unwrap();
        assert!(cached(&work, "k1").is_none(), "no sizes and digests recorded");
    }

    /// `make -j` takes the CPUs, capped at 1.5 GiB of available memory a job.
    #[test]
    fn build_jobs_are_capped_by_memory() {
        for (cpus, avail, want) in [
            (8, Some(64 * 1024), 8),
            (8, Some(4 * 1024), 2),
            (8, Some(1000), 1),
            (2, None, 2),
            (1, Some(0), 1),
        ] {
            assert_eq!(build_jobs(cpus, avail), want, "{cpus} CPUs, {avail:?} MiB");
        }
    }
}
