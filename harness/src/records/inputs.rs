//! The inputs a run is made from, pinned in `run.json` when it starts: the
//! kernel source's identity, every file of every series the matrix names,
//! every config fragment, the base config file, the benchmark sources and
//! the compiler that builds them, and every host file copied into the guest
//! image (busybox, dropbear, the loader and libraries, the static libc) with
//! the binutils that link the benchmarks. `--resume` pins them again and refuses to
//! go on when any changed: the cells it finishes would otherwise mix kernels
//! (or benchmark binaries) of two different inputs; a shard, whose kernels
//! come from the cache, is refused when it would compile other benchmarks
//! or make another guest image.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::config::{BaseConfig, Matrix};
use crate::kernel::{patch, tree};

/// Hashes of a run's inputs.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default, schemars::JsonSchema)]
pub struct Inputs {
    /// Identity of the kernel source ([`tree::source_key`]).
    pub source: String,
    /// Per series: file name (`series` and each patch) → SHA-256.
    pub series: BTreeMap<String, BTreeMap<String, String>>,
    /// Fragment path → SHA-256 (the matrix's and every variant's).
    pub fragments: BTreeMap<String, String>,
    /// The base config file and its SHA-256, when it is a file.
    pub base_config: Option<(String, String)>,
    /// The benchmark sources (`images/`): file name → SHA-256 (empty in a
    /// run an older harness started).
    #[serde(default)]
    pub benchmarks: BTreeMap<String, String>,
    /// The compiler that builds the benchmarks, as `gcc --version` names itself.
    #[serde(default)]
    pub compiler: String,
    /// The host files copied into the guest image: `busybox`, `dropbear`,
    /// `libc.a` (the static libc the benchmarks link) and each library's
    /// path (the loader among them) → SHA-256, or `missing` (empty in a run
    /// an older harness started).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub image: BTreeMap<String, String>,
    /// The linker of the benchmarks, as `ld --version` names itself.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub binutils: String,
}

impl Inputs {
    /// The guest image's parts as pinned.
    pub fn image_parts(&self) -> crate::image::ImageParts {
        crate::image::ImageParts {
            files: self.image.clone(),
            binutils: self.binutils.clone(),
        }
    }

    /// Sets the guest image's parts.
    pub fn set_image_parts(&mut self, p: crate::image::ImageParts) {
        self.image = p.files;
        self.binutils = p.binutils;
    }
}

fn file_hash(p: &Path) -> Result<String> {
    let data = std::fs::read(p).with_context(|| format!("read {}", p.display()))?;
    Ok(crate::util::hex(&Sha256::digest(&data)))
}

/// Hashes the inputs of `m` as they are now, with the benchmark sources
/// in `images` and the compiler that would build them.
pub fn pin(m: &Matrix, images: &Path) -> Result<Inputs> {
    let mut series = BTreeMap::new();
    for name in m.series_names() {
        let s = patch::load_series(&m.series_dir, &name)?;
        let mut files = BTreeMap::new();
        files.insert(
            "series".to_string(),
            file_hash(&m.series_dir.join(&name).join("series"))?,
        );
        for p in &s.patches {
            let f = p
                .file_name()
                .map(|f| f.to_string_lossy().into_owned())
                .unwrap_or_default();
            files.insert(f, file_hash(p)?);
        }
        series.insert(name, files);
    }
    let mut fragments = BTreeMap::new();
    for f in m
        .kernel
        .fragments
        .iter()
        .chain(m.variants.iter().flat_map(|v| &v.fragments))
    {
        fragments.insert(f.display().to_string(), file_hash(f)?);
    }
    let base_config = match &m.kernel.base_config {
        BaseConfig::File(f) => Some((f.display().to_string(), file_hash(f)?)),
        BaseConfig::Target(_) => None,
    };
    // a matrix whose variants all name commits does not build HEAD: its state does not matter
    let mut source = if m.variants.iter().all(|v| v.git_ref.is_some()) {
        String::new()
    } else {
        tree::source_key(&m.kernel.source)?
    };
    for v in &m.variants {
        if let Some(r) = &v.git_ref {
            source.push_str(&format!(" {}={}", v.name, tree::resolve_ref(&m.kernel.source, r)?));
        }
    }
    let (benchmarks, compiler) = (crate::image::benchmark_sources(images)?, crate::image::compiler()?);
    let mut inputs = Inputs {
        source,
        series,
        fragments,
        base_config,
        benchmarks,
        compiler,
        ..Inputs::default()
    };
    inputs.set_image_parts(crate::image::image_parts()?);
    Ok(inputs)
}

/// What differs between the inputs pinned at the start and now, one phrase
/// per change.
pub fn changes(pinned: &Inputs, now: &Inputs, source: &Path) -> Vec<String> {
    let mut out = Vec::new();
    if pinned.source != now.source {
        out.push(format!("the kernel source {} changed", source.display()));
    }
    for (name, files) in &pinned.series {
        let cur = now.series.get(name).cloned().unwrap_or_default();
        for (f, h) in files {
            match cur.get(f) {
                Some(c) if c == h => {}
                Some(_) => out.push(format!("series {name}: {f} changed")),
                None => out.push(format!("series {name}: {f} is no longer listed")),
            }
        }
        for f in cur.keys().filter(|f| !files.contains_key(*f)) {
            out.push(format!("series {name}: {f} was added"));
        }
    }
    for (f, h) in &pinned.fragments {
        if now.fragments.get(f) != Some(h) {
            out.push(format!("fragment {f} changed"));
        }
    }
    if pinned.base_config != now.base_config {
        let f = pinned.base_config.as_ref().map(|b| b.0.clone()).unwrap_or_default();
        out.push(format!("base config {f} changed"));
    }
    out.extend(benchmark_changes(pinned, now));
    out
}

/// What differs in the benchmark sources, their compiler and the guest
/// image's host files, one phrase per change; nothing for what a run an
/// older harness started did not pin.
pub fn benchmark_changes(pinned: &Inputs, now: &Inputs) -> Vec<String> {
    let mut out = Vec::new();
    if pinned.benchmarks.is_empty() && pinned.compiler.is_empty() {
        out.extend(crate::image::pins_changes(&pinned.image_parts(), &now.image_parts()));
        return out;
    }
    for (f, h) in &pinned.benchmarks {
        match now.benchmarks.get(f) {
            Some(c) if c == h => {}
            Some(_) => out.push(format!("benchmark source {f} changed")),
            None => out.push(format!("benchmark source {f} is missing")),
        }
    }
    for f in now.benchmarks.keys().filter(|f| !pinned.benchmarks.contains_key(*f)) {
        out.push(format!("benchmark source {f} was added"));
    }
    if pinned.compiler != now.compiler {
        out.push(format!(
            "the compiler of the benchmarks changed ({}, now {})",
            pinned.compiler, now.compiler
        ));
    }
    out.extend(crate::image::pins_changes(&pinned.image_parts(), &now.image_parts()));
    out
}

/// Refuses a shard whose host would compile other benchmark binaries than
/// the run pinned (its kernels come from the cache by key; its benchmarks
/// are compiled where it runs).
pub fn check_benchmarks(pinned: Option<&Inputs>, images: &Path, run_dir: &Path) -> Result<()> {
    let Some(pinned) = pinned else { return Ok(()) };
    let mut now = Inputs {
        benchmarks: crate::image::benchmark_sources(images)?,
        compiler: crate::image::compiler()?,
        ..Inputs::default()
    };
    now.set_image_parts(crate::image::image_parts()?);
    refuse_shard(pinned, &now, run_dir)
}

/// Refuses a shard whose benchmarks or guest image (`now`) differ from
/// the pinned ones.
pub fn refuse_shard(pinned: &Inputs, now: &Inputs, run_dir: &Path) -> Result<()> {
    let c = benchmark_changes(pinned, now);
    if !c.is_empty() {
        bail!(
            "run a shard of {}: this host would make other benchmark binaries or another guest image than the run pinned ({}); \
             its numbers would not compare with the other shards' — use the same benchmark sources (--images-dir), compiler, \
             binutils and guest packages (busybox-static, dropbear-bin, libc6) as the host that started the run",
            run_dir.display(),
            c.join("; ")
        );
    }
    Ok(())
}

/// Refuses to resume a run whose inputs changed since it started. Runs
/// written before inputs were pinned are resumed as they are.
pub fn check_unchanged(pinned: Option<&Inputs>, m: &Matrix, images: &Path, run_dir: &Path) -> Result<()> {
    let Some(pinned) = pinned else { return Ok(()) };
    let now = pin(m, images).with_context(|| format!("resume {}: read its inputs again", run_dir.display()))?;
    refuse_resume(pinned, &now, &m.kernel.source, run_dir)
}

/// Refuses to resume when the inputs now differ from the pinned ones.
pub fn refuse_resume(pinned: &Inputs, now: &Inputs, source: &Path, run_dir: &Path) -> Result<()> {
    let c = changes(pinned, now, source);
    if !c.is_empty() {
        bail!(
            "resume {}: its inputs changed since it started ({}); its cells would mix kernels, benchmarks or guest \
             images of old and new inputs — restore them (reinstall the guest packages a changed image file came from), \
             or start a new run",
            run_dir.display(),
            c.join("; ")
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{scratch, write};

    /// Issue 11 item 11: every pinned input that changes is named.
    #[test]
    fn changed_inputs_are_named() {
        let root = scratch("inputs");
        write(&root.join("src/Makefile"), "VERSION = 6\n");
        write(&root.join("patches/s/0001-t.patch"), "--- a/x\n+++ b/x\n");
        write(&root.join("patches/s/series"), "0001-t.patch\n");
        write(&root.join("frag.config"), "CONFIG_A=y\n");
        write(&root.join("base.config"), "CONFIG_B=y\n");
        let yaml = format!(
            "kernel:\n  source: {}\n  base_config: base.config\n  fragments: [frag.config]\nseries_dir: patches\n\
             variants:\n  - name: base\n  - name: v\n    apply: [s]\nvcpus: [2]\nbenchmarks:\n  - {{name: d, kind: doexec}}\n",
            root.join("src").display()
        );
        let m = crate::config::parse(&yaml, &root.join("matrix.yaml"), None).unwrap();
        let images = root.join("images");
        write(&images.join("doexec.c"), "int main(void) { return 0; }\n");
        write(&images.join("bench-common.h"), "#define X 1\n");
        let pinned = pin(&m, &images).unwrap();
        assert!(changes(&pinned, &pin(&m, &images).unwrap(), &m.kernel.source).is_empty());
        check_unchanged(Some(&pinned), &m, &images, &root).unwrap();

        write(&root.join("patches/s/0001-t.patch"), "--- a/x\n+++ b/x\n@@ edited\n");
        write(&root.join("frag.config"), "CONFIG_A=n\n");
        write(&root.join("base.config"), "CONFIG_B=n\n");
        write(&root.join("src/mm/vmalloc.c"), "edited\n");
        let c = changes(&pinned, &pin(&m, &images).unwrap(), &m.kernel.source);
        let frag = root.join("frag.config");
        let want = [
            format!("the kernel source {} changed", root.join("src").display()),
            "series s: 0001-t.patch changed".to_string(),
            format!("fragment {} changed", frag.display()),
            format!("base config {} changed", root.join("base.config").display()),
        ];
        assert_eq!(c, want);
        let e = format!("{:#}", check_unchanged(Some(&pinned), &m, &images, &root).unwrap_err());
        assert!(
            e.contains("inputs changed since it started (the kernel source")
                && e.contains("series s: 0001-t.patch changed"),
            "{e}"
        );
        check_unchanged(None, &m, &images, &root).expect("a run from before pinning resumes");
        std::fs::remove_dir_all(root).ok();
    }

    /// Issue 22 item 11: the benchmark binaries' sources and compiler are pinned too.
    #[test]
    fn changed_benchmark_sources_or_compiler_are_named() {
        let root = scratch("bench-inputs");
        let images = root.join("images");
        write(&images.join("doexec.c"), "int main(void) { return 0; }\n");
        write(&images.join("bench-common.h"), "#define X 1\n");
        write(&images.join("README"), "not a source\n");
        let pinned = Inputs {
            benchmarks: crate::image::benchmark_sources(&images).unwrap(),
            compiler: "gcc (Debian 12.2.0-14) 12.2.0".into(),
            ..Inputs::default()
        };
        assert_eq!(
            pinned.benchmarks.keys().collect::<Vec<_>>(),
            ["bench-common.h", "doexec.c"]
        );
        write(&images.join("bench-common.h"), "#define X 2\n");
        write(&images.join("forkexec.c"), "int main(void) { return 1; }\n");
        let now = Inputs {
            benchmarks: crate::image::benchmark_sources(&images).unwrap(),
            compiler: "gcc (Debian 14.2.0-19) 14.2.0".into(),
            ..Inputs::default()
        };
        let want = [
            "benchmark source bench-common.h changed",
            "benchmark source forkexec.c was added",
            "the compiler of the benchmarks changed (gcc (Debian 12.2.0-14) 12.2.0, now gcc (Debian 14.2.0-19) 14.2.0)",
        ];
        assert_eq!(changes(&pinned, &now, Path::new("/src")), want);
        assert_eq!(benchmark_changes(&pinned, &now), want, "what a shard checks");
        let old = Inputs::default();
        assert!(
            benchmark_changes(&old, &now).is_empty(),
            "a run from before pinning them is not refused"
        );
        std::fs::remove_dir_all(root).ok();
    }

    /// Issue 30 item 1: a guest image file that changed since the run was
    /// pinned refuses its resume and its shards, naming the file; a run
    /// pinned without image files goes on.
    #[test]
    fn a_changed_image_file_refuses_resume_and_shard() {
        let root = scratch("image-inputs");
        let (bb, db) = (root.join("busybox"), root.join("dropbear"));
        write(&bb, "busybox 1.36");
        write(&db, "dropbear 2022.83");
        let parts = |binutils: &str| crate::image::ImageParts {
            files: crate::image::pins::digest_files(&bb, &db, &[], None).unwrap(),
            binutils: binutils.into(),
        };
        let mut pinned = Inputs::default();
        pinned.set_image_parts(parts("GNU ld 2.40"));
        let mut now = Inputs::default();
        now.set_image_parts(parts("GNU ld 2.40"));
        refuse_resume(&pinned, &now, Path::new("/src"), &root).unwrap();
        refuse_shard(&pinned, &now, &root).unwrap();

        write(&db, "dropbear 2025.88");
        now.set_image_parts(parts("GNU ld 2.40"));
        let e = format!(
            "{:#}",
            refuse_resume(&pinned, &now, Path::new("/src"), &root).unwrap_err()
        );
        assert!(
            e.contains("inputs changed since it started (guest image file dropbear changed (")
                && e.contains("reinstall the guest packages"),
            "{e}"
        );
        let e = format!("{:#}", refuse_shard(&pinned, &now, &root).unwrap_err());
        assert!(
            e.contains("another guest image than the run pinned (guest image file dropbear changed"),
            "{e}"
        );
        refuse_resume(&Inputs::default(), &now, Path::new("/src"), &root).expect("an old run resumes");
        let json = serde_json::to_string(&Inputs::default()).unwrap();
        assert!(!json.contains("binutils"), "{json}");
        let old: Inputs = serde_json::from_str(&json).unwrap();
        assert!(old.image.is_empty(), "an old run.json reads");
        std::fs::remove_dir_all(root).ok();
    }
}
