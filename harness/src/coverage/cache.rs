//! The coverage cache in the work directory (`work/coverage/`): each base
//! kernel's calls per op per benchmark as its last run kept them, its
//! symbol names, and pristine copies of the source files series touch; and
//! what a matrix's series change, read against those copies. `check` and
//! `try --covering` read it without booting; a run's coverage step
//! (`pipeline/coverage.rs`) fills it, but for the source files, which the
//! run copies from its pristine tree when it prepares it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use super::model::{self as coverage, CallsPerOp, Coverage};
use crate::config::{Matrix, Variant};
use crate::kernel::{build, hunks, patch, tree};
use crate::profile::symbols;
use crate::workdir::WorkDir;

/// The functions variant `v`'s series change, read against pristine
/// copies of the files they touch, kept under `files` (see [`source_files`]).
pub fn changed_functions(m: &Matrix, v: &Variant, files: &Path, log: &Path) -> Result<coverage::Changes> {
    let diffs = v
        .apply
        .iter()
        .map(|name| series_diff(m, name, false))
        .chain(v.revert.iter().map(|name| series_diff(m, name, true)))
        .collect::<Result<Vec<_>>>()?;
    let all = touched(&diffs)?;
    // without the base's files (a source that cannot give them) only the hunks' own lines are read
    let _ = keep_missing(&m.kernel.source, &all, files, log);
    let base = |f: &str| std::fs::read_to_string(files.join(f)).ok();
    let mut out: Vec<hunks::Changed> = diffs
        .iter()
        .flat_map(|d| hunks::changed_functions(&d.diff, d.reverse, &base))
        .collect();
    out.sort();
    out.dedup();
    Ok(coverage::Changes {
        functions: out,
        files: all,
    })
}

/// Copies the files the matrix's series touch from `pristine`, a work
/// tree with no patch applied, into the matrix's [`source_files`], where
/// the coverage step reads them. A run calls it once its tree is ready, so
/// a tarball source is not decompressed a second time (10 s of a fresh
/// machine's first run).
pub fn keep_pristine(m: &Matrix, work: &WorkDir, pristine: &Path, log: &Path) -> Result<()> {
    let diffs = m
        .series_names()
        .iter()
        .map(|name| series_diff(m, name, false))
        .collect::<Result<Vec<_>>>()?;
    keep_missing(pristine, &touched(&diffs)?, &source_files(m, work)?, log)
}

/// Copies from `source` the files of `wanted` not yet kept under `files`:
/// files already copied from this source are kept, as a tarball's cost is
/// its decompression.
fn keep_missing(source: &Path, wanted: &[String], files: &Path, log: &Path) -> Result<()> {
    let missing: Vec<String> = wanted.iter().filter(|f| !files.join(f).is_file()).cloned().collect();
    if missing.is_empty() {
        return Ok(());
    }
    tree::pristine_files(source, &missing, files, log)
}

/// A series' patches as one diff.
struct SeriesDiff {
    name: String,
    diff: String,
    /// The variant reverts the series.
    reverse: bool,
}

/// Series `name` as one diff, applied or `reverse`d.
fn series_diff(m: &Matrix, name: &str, reverse: bool) -> Result<SeriesDiff> {
    let s = patch::load_series(&m.series_dir, name).with_context(|| format!("series {name}"))?;
    let mut diff = String::new();
    for p in &s.patches {
        diff.push_str(&String::from_utf8_lossy(&patch::read(p)?));
        diff.push('\n');
    }
    Ok(SeriesDiff {
        name: name.to_string(),
        diff,
        reverse,
    })
}

/// The files `diffs` touch, sorted, each once.
fn touched(diffs: &[SeriesDiff]) -> Result<Vec<String>> {
    let mut files = BTreeSet::new();
    for d in diffs {
        files.extend(patch::touched_files(&d.diff).with_context(|| format!("series {}", d.name))?);
    }
    Ok(files.into_iter().collect())
}

/// The function names of a kernel's symbol table, from its kernel cache
/// entry (the profiler's symbols file, else its vmlinux).
pub fn kernel_symbols(work: &WorkDir, key: &str) -> Option<BTreeSet<String>> {
    let art = build::cached(work, key)?;
    let file = art.dir.join(symbols::FILE);
    let names: Vec<String> = match std::fs::read_to_string(&file) {
        Ok(text) => text
            .lines()
            .filter_map(|l| l.split_whitespace().nth(2).map(String::from))
            .collect(),
        Err(_) => {
            let data = std::fs::read(&art.vmlinux).ok()?;
            symbols::functions(symbols::raw_from_elf(&data).ok()?)
                .into_iter()
                .map(|s| s.name)
                .collect()
        }
    };
    Some(names.into_iter().collect())
}

/// `work/coverage/source/<source key>/`: files as the matrix's kernel
/// source holds them, copied the first time a series touches them.
pub fn source_files(m: &Matrix, work: &WorkDir) -> Result<PathBuf> {
    use sha2::{Digest, Sha256};
    let key = Sha256::digest(tree::source_key(&m.kernel.source)?.as_bytes());
    Ok(work.coverage_source(&crate::util::hex(&key[..8])))
}

/// `work/coverage/<base identity>/<benchmark>.json`: a base kernel's calls
/// per op in one benchmark.
pub fn cache_file(work: &WorkDir, key: &str, benchmark: &str) -> PathBuf {
    work.coverage_kept(key, benchmark)
}

/// The base kernel as the matrix describes it, without building it: its
/// source, base config and fragments (what `check` can know; a run and a
/// check of one matrix agree on it).
pub fn base_identity(m: &Matrix) -> Result<String> {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    h.update(tree::source_key(&m.kernel.source)?.as_bytes());
    let base_ref = m
        .variants
        .iter()
        .find(|v| v.name == "base")
        .and_then(|v| v.git_ref.clone());
    h.update(format!("{:?} {base_ref:?}", m.kernel.base_config).as_bytes());
    if let crate::config::BaseConfig::File(f) = &m.kernel.base_config {
        h.update(std::fs::read(f).with_context(|| format!("read {}", f.display()))?);
    }
    for f in &m.kernel.fragments {
        h.update(std::fs::read(f).with_context(|| format!("read {}", f.display()))?);
    }
    Ok(crate::util::hex(&h.finalize()[..8]))
}

/// What the coverage cache tells of a matrix's variants with series.
#[derive(Debug, Default)]
pub struct Cached {
    /// The variants whose coverage is known.
    pub known: Vec<Coverage>,
    /// The variants none of whose benchmarks were profiled yet.
    pub unknown: Vec<String>,
    /// The variants whose series could not be read as diffs, each with why
    /// (the series named): the others are still told.
    pub failed: Vec<(String, String)>,
}

/// The coverage of each variant with series from the calls per op the
/// last run of this base kernel kept (`work/coverage/`), for `check`.
pub fn from_cache(m: &Matrix, work: &WorkDir) -> Result<Cached> {
    let id = base_identity(m)?;
    let symbols: Option<BTreeSet<String>> = std::fs::read_to_string(work.coverage_symbols(&id))
        .ok()
        .map(|t| t.lines().map(String::from).collect());
    let mut out = Cached::default();
    for v in m
        .variants
        .iter()
        .filter(|v| !v.apply.is_empty() || !v.revert.is_empty())
    {
        let kept: BTreeMap<String, Kept> = v
            .benchmarks
            .iter()
            .filter_map(|b| {
                let data = std::fs::read(cache_file(work, &id, b)).ok()?;
                Some((b.clone(), serde_json::from_slice(&data).ok()?))
            })
            .collect();
        let Some(vcpus) = kept.values().map(|k| k.vcpus).min() else {
            out.unknown.push(v.name.clone());
            continue;
        };
        let base = kept.into_iter().map(|(b, k)| (b, k.calls)).collect();
        let changed = match changed_functions(m, v, &source_files(m, work)?, &work.log("coverage")) {
            Ok(c) => c,
            Err(e) => {
                out.failed.push((v.name.clone(), format!("{e:#}")));
                continue;
            }
        };
        let mut c = coverage::table(&v.name, vcpus, &changed, symbols.as_ref(), &base, &BTreeMap::new());
        // base's symbol table says nothing of a function the series adds
        for r in c
            .rows
            .iter_mut()
            .filter(|r| r.changed.change == hunks::Change::Added && r.symbol.is_none())
        {
            r.symbol = Some(r.changed.function.clone());
        }
        out.known.push(c);
    }
    Ok(out)
}

/// Keeps each benchmark's calls per op of the base kernel `key`.
pub fn remember(
    work: &WorkDir,
    key: &str,
    vcpus: u32,
    base: &BTreeMap<String, CallsPerOp>,
    symbols: Option<&BTreeSet<String>>,
) -> Result<()> {
    let write = |f: PathBuf, data: Vec<u8>| -> Result<()> {
        if let Some(d) = f.parent() {
            std::fs::create_dir_all(d).with_context(|| format!("create {}", d.display()))?;
        }
        crate::util::write_whole(&f, &data)
    };
    for (b, calls) in base {
        write(
            cache_file(work, key, b),
            serde_json::to_vec(&Kept {
                vcpus,
                calls: calls.clone(),
            })?,
        )?;
    }
    if let Some(s) = symbols {
        let names: Vec<&str> = s.iter().map(String::as_str).collect();
        write(work.coverage_symbols(key), names.join("\n").into_bytes())?;
    }
    Ok(())
}

/// One benchmark's calls per op as a run of the base kernel kept them.
#[derive(serde::Serialize, serde::Deserialize)]
struct Kept {
    /// The vCPU count of the boots they come from.
    vcpus: u32,
    /// Function → calls per op.
    calls: CallsPerOp,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::write;

    /// Issue 47: one variant whose series is not a diff leaves the others'
    /// coverage told; it is named with its series and why.
    #[test]
    fn a_series_that_is_not_a_diff_fails_its_variant_only() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        let src = root.join("src");
        write(&src.join("Makefile"), "VERSION = 6\n");
        write(&src.join("mm/a.c"), "int f(void)\n{\n\treturn 1;\n}\n");
        let diff = "--- a/mm/a.c\n+++ b/mm/a.c\n@@ -1,4 +1,4 @@\n int f(void)\n {\n-\treturn 1;\n+\treturn 2;\n }\n";
        write(&root.join("patches/good/0001.patch"), diff);
        write(&root.join("patches/good/series"), "0001.patch\n");
        write(&root.join("patches/bad/0001.patch"), "just words, no diff\n");
        write(&root.join("patches/bad/series"), "0001.patch\n");
        let yaml = format!(
            "kernel: {{source: {}, fragments: []}}\nseries_dir: patches\nvariants:\n  - name: base\n  - {{name: g, apply: [good]}}\n  - {{name: b, apply: [bad]}}\n\
             vcpus: [2]\nbenchmarks: [{{name: d, kind: doexec}}]\n",
            src.display()
        );
        let m = crate::config::parse(&yaml, &root.join("matrix.yaml"), None).unwrap();
        let work = WorkDir::at(&root.join("work"));
        let kept = Kept {
            vcpus: 2,
            calls: [("f".to_string(), 3.0)].into_iter().collect(),
        };
        write(
            &cache_file(&work, &base_identity(&m).unwrap(), "d"),
            &serde_json::to_string(&kept).unwrap(),
        );
        let c = from_cache(&m, &work).unwrap();
        assert_eq!(c.known.iter().map(|k| k.series.as_str()).collect::<Vec<_>>(), ["g"]);
        assert!(c.unknown.is_empty());
        assert_eq!(c.failed.len(), 1, "{:?}", c.failed);
        let (variant, why) = &c.failed[0];
        assert_eq!(variant, "b");
        assert!(
            why.starts_with("series bad: no file names found: not a unified diff"),
            "{why}"
        );
    }

    /// The files a run's series touch are copied from its pristine work
    /// tree, so the coverage step reads them without unpacking the source
    /// again; a file already kept is left as it is.
    #[test]
    fn a_runs_pristine_tree_gives_the_coverage_step_its_files() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        let src = root.join("src");
        write(&src.join("Makefile"), "VERSION = 6\n");
        write(&src.join("mm/a.c"), "from the source\n");
        write(&src.join("mm/b.c"), "from the source\n");
        let tree = root.join("tree");
        write(&tree.join("mm/a.c"), "from the tree\n");
        write(&tree.join("mm/b.c"), "from the tree\n");
        write(&tree.join("mm/c.c"), "from the tree\n");
        let diff = |f: &str| format!("--- a/{f}\n+++ b/{f}\n@@ -1 +1 @@\n-x\n+y\n");
        write(&root.join("patches/s/0001.patch"), &(diff("mm/a.c") + &diff("mm/b.c")));
        write(&root.join("patches/s/series"), "0001.patch\n");
        let yaml = format!(
            "kernel: {{source: {}, fragments: []}}\nseries_dir: patches\nvariants:\n  - name: base\n  - {{name: g, revert: [s]}}\n\
             vcpus: [2]\nbenchmarks: [{{name: d, kind: doexec}}]\n",
            src.display()
        );
        let m = crate::config::parse(&yaml, &root.join("matrix.yaml"), None).unwrap();
        let work = WorkDir::at(&root.join("work"));
        let files = source_files(&m, &work).unwrap();
        write(&files.join("mm/b.c"), "kept before\n");
        keep_pristine(&m, &work, &tree, &root.join("log")).unwrap();
        let read = |f: &str| std::fs::read_to_string(files.join(f)).unwrap();
        assert_eq!(read("mm/a.c"), "from the tree\n");
        assert_eq!(read("mm/b.c"), "kept before\n");
        assert!(
            !files.join("mm/c.c").exists(),
            "only the files the series touch are kept"
        );
        let changes = changed_functions(&m, &m.variants[1], &files, &root.join("log")).unwrap();
        assert_eq!(changes.files, ["mm/a.c", "mm/b.c"]);
        assert_eq!(read("mm/a.c"), "from the tree\n", "the step does not copy it again");
    }
}
