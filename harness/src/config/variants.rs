//! `variants:` validated: each one's series, fragments, benchmarks and git
//! ref, every problem at its YAML path; `base` first, running every
//! benchmark another variant asks for.

use std::collections::BTreeSet;
use std::path::Path;

use super::names::{check_name, files, valid_name, Rel};
use super::raw::RawVariant;
use super::validated::Variant;

/// `variants:`: each one's series, fragments, benchmarks and git ref; `base`
/// first, running every benchmark another variant asks for.
pub(super) fn validate_variants(
    raw: &[RawVariant],
    series_dir: &Path,
    all_bench: &[String],
    rel: &Rel,
    p: &mut Vec<String>,
) -> Vec<Variant> {
    let mut variants = Vec::new();
    let mut seen = BTreeSet::new();
    for (i, v) in raw.iter().enumerate() {
        let at = format!("variants[{i}]");
        check_name(&v.name, &at, &mut seen, p);
        check_series(v, &at, series_dir, p);
        let fragments = files(&v.fragments, &format!("{at}.fragments"), rel, p);
        let benchmarks = benchmarks(v, &at, all_bench, p);
        if let Some(r) = &v.git_ref {
            if r.is_empty() || r.starts_with('-') || r.chars().any(|c| c.is_whitespace() || c.is_control()) {
                p.push(format!(
                    "{at}.ref: `{r}` is not a git commit-ish (a commit id, tag or branch)"
                ));
            }
        }
        variants.push(Variant {
            name: v.name.clone(),
            apply: v.apply.clone(),
            revert: v.revert.clone(),
            fragments,
            benchmarks,
            git_ref: v.git_ref.clone(),
        });
    }
    base_first(variants, raw, all_bench, p)
}

/// Each series a variant applies or reverts: a valid name with a `series`
/// file under the series directory.
fn check_series(v: &RawVariant, at: &str, series_dir: &Path, p: &mut Vec<String>) {
    for (key, list) in [("apply", &v.apply), ("revert", &v.revert)] {
        for (j, s) in list.iter().enumerate() {
            let d = series_dir.join(s);
            if !valid_name(s) {
                p.push(format!(
                    "{at}.{key}[{j}]: `{s}` is not a series name (a directory under {})",
                    series_dir.display()
                ));
            } else if !d.join("series").is_file() {
                p.push(format!(
                    "{at}.{key}[{j}]: no series `{s}`: expected {} listing its patches",
                    d.join("series").display()
                ));
            }
        }
    }
}

/// The benchmarks a variant names (each defined), or every benchmark.
fn benchmarks(v: &RawVariant, at: &str, all_bench: &[String], p: &mut Vec<String>) -> Vec<String> {
    let Some(list) = &v.benchmarks else {
        return all_bench.to_vec();
    };
    for (j, b) in list.iter().enumerate() {
        if !all_bench.contains(b) {
            p.push(format!(
                "{at}.benchmarks[{j}]: no benchmark `{b}` (defined: {})",
                all_bench.join(", ")
            ));
        }
    }
    list.clone()
}

/// `base` (required, unmodified) moved first; without a list of its own it
/// runs the benchmarks the other variants use (all when they use none).
fn base_first(
    mut variants: Vec<Variant>,
    raw: &[RawVariant],
    all_bench: &[String],
    p: &mut Vec<String>,
) -> Vec<Variant> {
    let Some(i) = variants.iter().position(|v| v.name == "base") else {
        p.push("variants: a variant named `base` (the reference) is required".into());
        return variants;
    };
    if !variants[i].is_plain() {
        p.push(format!(
            "variants[{i}]: `base` is the unmodified tree; it takes no apply, revert or fragments"
        ));
    }
    let mut base = variants.remove(i);
    let mut used: Vec<String> = Vec::new();
    for b in variants.iter().flat_map(|v| &v.benchmarks) {
        if !used.contains(b) {
            used.push(b.clone());
        }
    }
    if raw[i].benchmarks.is_none() && !used.is_empty() {
        base.benchmarks = all_bench.iter().filter(|b| used.contains(b)).cloned().collect();
    }
    variants.insert(0, base);
    variants
}
