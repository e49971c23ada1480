//! The `program` benchmark kind's parts: what runs (a program installed on
//! the host, C sources compiled like `images/`, or a source directory built
//! on the host), its argument list with placeholders, and the parsers of
//! its metrics. The kind's parameters are rows of the table in `params.rs`;
//! this file holds their types, their checks, and the second pass that
//! needs the matrix's directory (paths) or the host (`PATH`).

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::params::BenchKind;

/// `build:` as written: a directory built on the host with a command.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawBuild {
    dir: String,
    command: Vec<String>,
    binary: String,
}

/// A source directory built on the host before the image is made.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Build {
    /// The directory, absolute.
    pub dir: PathBuf,
    /// The command run in it (an argument vector, no shell).
    pub command: Vec<String>,
    /// The program it makes, relative to `dir`.
    pub binary: String,
}

/// One item of `metrics:` as written.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawMetric {
    name: String,
    regex: String,
    unit: Option<String>,
    better: Option<String>,
}

/// A regular expression with a `value` group, checked at validation.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(transparent)]
pub struct Pattern(pub String);

impl Pattern {
    /// The compiled expression (validation compiled it once already).
    pub fn regex(&self) -> regex::Regex {
        regex::Regex::new(&self.0).expect("checked at validation")
    }
}

/// One metric a program's output is parsed for.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct MetricSpec {
    /// Metric name.
    pub name: String,
    /// Where its value is in stdout, then stderr: the `value` group of the
    /// first match.
    pub regex: Pattern,
    /// Unit.
    pub unit: String,
    /// Direction of "better".
    pub higher_is_better: bool,
}

/// Where a `program` benchmark's executable is in the guest: an installed
/// program at its host path, a compiled or built one under `/bench/prog/`.
pub fn guest_path(name: &str, run: &str) -> String {
    if run.is_empty() {
        format!("/bench/prog/{name}")
    } else {
        run.to_string()
    }
}

/// The placeholders an argument may hold, each replaced in the guest's
/// command with a number.
pub const PLACEHOLDERS: &[&str] = &["{nproc}", "{workers}", "{duration_s}"];

/// A pattern that compiles and has a `value` group, or a problem at `at`.
pub fn pattern(errs: &mut Vec<String>, at: &str, re: &str) -> Pattern {
    match regex::Regex::new(re) {
        Err(e) => errs.push(format!("{at}: `{re}` is not a regular expression: {e}")),
        Ok(r) if !r.capture_names().any(|n| n == Some("value")) => errs.push(format!(
            "{at}: `{re}` has no value group (write `(?P<value>…)` around the number)"
        )),
        Ok(_) => {}
    }
    Pattern(re.to_string())
}

/// `metrics:` checked: names valid and distinct, patterns with a value
/// group, `better` higher or lower. Empty means the `sample` line protocol.
pub fn metrics(errs: &mut Vec<String>, k: &str, v: Option<&Vec<RawMetric>>) -> Vec<MetricSpec> {
    let mut out: Vec<MetricSpec> = Vec::new();
    for (i, m) in v.into_iter().flatten().enumerate() {
        let at = format!("{k}[{i}]");
        if !super::validation::valid_name(&m.name) {
            errs.push(format!(
                "{at}.name: `{}` must be lowercase letters, digits, '.', '_' or '-'",
                m.name
            ));
        }
        if out.iter().any(|o| o.name == m.name) {
            errs.push(format!("{at}.name: `{}` is defined twice", m.name));
        }
        let higher_is_better = match m.better.as_deref() {
            Some("higher") | None => true,
            Some("lower") => false,
            Some(o) => {
                errs.push(format!("{at}.better: `{o}` is not higher or lower"));
                true
            }
        };
        out.push(MetricSpec {
            name: m.name.clone(),
            regex: pattern(errs, &format!("{at}.regex"), &m.regex),
            unit: m.unit.clone().unwrap_or_else(|| "1".into()),
            higher_is_better,
        });
    }
    out
}

/// `ops:`: the pattern of the operation count, if given.
pub fn ops(errs: &mut Vec<String>, k: &str, v: Option<&String>) -> Option<Pattern> {
    v.map(|re| pattern(errs, k, re))
}

/// A list of strings as written (paths are made absolute in [`resolve`]).
pub fn list(_: &mut Vec<String>, _: &str, v: Option<&Vec<String>>) -> Vec<String> {
    v.cloned().unwrap_or_default()
}

/// `args:`: each argument's `{…}` must be a known placeholder.
pub fn args(errs: &mut Vec<String>, k: &str, v: Option<&Vec<String>>) -> Vec<String> {
    let args = v.cloned().unwrap_or_default();
    for (i, a) in args.iter().enumerate() {
        let mut rest = a.as_str();
        while let Some(open) = rest.find('{') {
            let close = rest[open..].find('}').map(|c| open + c + 1);
            let word = close.map_or(&rest[open..], |c| &rest[open..c]);
            if !PLACEHOLDERS.contains(&word) {
                errs.push(format!(
                    "{k}[{i}]: `{word}` is not a placeholder ({}); arguments are passed literally otherwise",
                    PLACEHOLDERS.join(", ")
                ));
            }
            rest = close.map_or("", |c| &rest[c..]);
        }
    }
    args
}

/// `build:` with its command checked non-empty (its directory is made
/// absolute in [`resolve`]).
pub fn build(errs: &mut Vec<String>, k: &str, v: Option<&RawBuild>) -> Option<Build> {
    let b = v?;
    if b.command.is_empty() {
        errs.push(format!("{k}.command: give the build command as a list, e.g. [make]"));
    }
    if b.binary.is_empty() || b.binary.starts_with('/') || b.binary.split('/').any(|s| s == "..") {
        errs.push(format!("{k}.binary: `{}` must be a path inside {k}.dir", b.binary));
    }
    Some(Build {
        dir: PathBuf::from(&b.dir),
        command: b.command.clone(),
        binary: b.binary.clone(),
    })
}

/// `user:`, a uid other than 0 the program runs as (some programs refuse
/// root, like stress-ng's exec stressor).
pub fn user(errs: &mut Vec<String>, k: &str, v: Option<&u32>) -> Option<u32> {
    if v == Some(&0) {
        errs.push(format!("{k}: 0 is root, the default; leave it out"));
    }
    v.copied()
}

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
        return p.is_file().then_some(p);
    }
    crate::proc::which(run)
}

/// The first `program` benchmark a variant of `m` runs whose program is
/// not installed here (validation leaves unused ones be; a caller that
/// picks other benchmarks, as `try --bench` does, asks again).
pub fn not_installed(m: &super::Matrix) -> Option<String> {
    m.benchmarks
        .iter()
        .filter(|b| m.variants.iter().any(|v| v.benchmarks.contains(&b.name)))
        .find_map(missing_program)
}

/// Why benchmark `b` cannot run here: a `program` whose program was not
/// found when the matrix was validated.
pub fn missing_program(b: &super::Benchmark) -> Option<String> {
    match &b.kind {
        BenchKind::Program { run, .. } if !run.is_empty() && !std::path::Path::new(run).is_absolute() => Some(format!(
            "benchmark {}: `{run}` is not installed on this host (install its package, e.g. with harness/scripts/setup-host.sh)",
            b.name
        )),
        _ => None,
    }
}
