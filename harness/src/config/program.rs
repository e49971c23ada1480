//! The `program` benchmark kind's parts: what runs (a program installed on
//! the host, C sources compiled like `images/`, or a source directory built
//! on the host), its argument list with placeholders, and the parsers of
//! its metrics. The kind's parameters are rows of the table in `params.rs`;
//! this file holds their types and checks (`program_check.rs` the second
//! pass, which needs the matrix's directory or the host's `PATH`).

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// `build:` as written: a directory built on the host with a command.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawBuild {
    dir: String,
    command: Vec<String>,
    binary: String,
}

/// A source directory built on the host before the image is made.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
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
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
#[serde(transparent)]
pub struct Pattern(pub String);

impl Pattern {
    /// The compiled expression (validation compiled it once already).
    pub fn regex(&self) -> regex::Regex {
        regex::Regex::new(&self.0).expect("checked at validation")
    }
}

/// One metric a program's output is parsed for.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
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

/// What a `program` benchmark runs: exactly one of `run:`, `sources:` and
/// `build:`, chosen once when the matrix is validated; its paths are made
/// absolute then (`program_check::resolve`). In
/// `run.json` it is the three keys it was written as
/// ([`ExecutableRecord`]), so the format did not change.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(into = "ExecutableRecord", from = "ExecutableRecord")]
pub enum Executable {
    /// `run:`, a program installed on the host: the name or path as
    /// written, and where it is here (None: not installed, a problem only
    /// where a variant runs it).
    Installed {
        /// As written.
        name: String,
        /// The absolute path found.
        found: Option<PathBuf>,
    },
    /// `sources:`, C files compiled statically like `images/`.
    Sources(Vec<PathBuf>),
    /// `build:`, a directory built on the host.
    Built(Build),
}

impl Executable {
    /// Where it is in the guest: an installed program at its host path, a
    /// compiled or built one under `/bench/prog/`.
    pub fn guest_path(&self, bench: &str) -> String {
        match self {
            Executable::Installed { found: Some(p), .. } => p.display().to_string(),
            Executable::Installed { name, found: None } => name.clone(),
            Executable::Sources(_) | Executable::Built(_) => format!("/bench/prog/{bench}"),
        }
    }
}

/// How `run.json` records an [`Executable`]: the keys as written, the one
/// given non-empty (`run` holds the path found, or the name when it was
/// not; a run.json of an older harness reads the same).
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ExecutableRecord {
    /// An installed host program: a name on `PATH` or a path.
    run: String,
    /// C sources compiled statically like `images/` (with `bench-common.h`).
    sources: Vec<String>,
    /// A directory built on the host: `{dir, command: [...], binary}`.
    build: Option<Build>,
}

impl From<Executable> for ExecutableRecord {
    fn from(e: Executable) -> Self {
        let mut r = ExecutableRecord {
            run: String::new(),
            sources: Vec::new(),
            build: None,
        };
        match e {
            Executable::Installed { name, found } => r.run = found.map_or(name, |p| p.display().to_string()),
            Executable::Sources(s) => r.sources = s.iter().map(|p| p.display().to_string()).collect(),
            Executable::Built(b) => r.build = Some(b),
        }
        r
    }
}

impl From<ExecutableRecord> for Executable {
    fn from(r: ExecutableRecord) -> Self {
        match (r.run, r.build) {
            (run, _) if !run.is_empty() => Executable::Installed {
                found: std::path::Path::new(&run).is_absolute().then(|| PathBuf::from(&run)),
                name: run,
            },
            (_, Some(b)) => Executable::Built(b),
            _ => Executable::Sources(r.sources.into_iter().map(PathBuf::from).collect()),
        }
    }
}

impl schemars::JsonSchema for Executable {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        ExecutableRecord::schema_name()
    }

    fn json_schema(g: &mut schemars::SchemaGenerator) -> schemars::Schema {
        ExecutableRecord::json_schema(g)
    }

    fn inline_schema() -> bool {
        true
    }
}

/// `run:`, `sources:` and `build:` as written: exactly one of them makes
/// the [`Executable`] (its paths made absolute later, in
/// `program_check::resolve`).
pub fn executable(
    errs: &mut Vec<String>,
    k: &str,
    (run, sources, build): (Option<&String>, Option<&Vec<String>>, Option<&RawBuild>),
) -> Executable {
    let run = run.filter(|r| !r.is_empty());
    let sources = sources.filter(|s| !s.is_empty());
    let given: Vec<&str> = [
        ("run", run.is_some()),
        ("sources", sources.is_some()),
        ("build", build.is_some()),
    ]
    .into_iter()
    .filter_map(|(key, set)| set.then_some(key))
    .collect();
    // the kind is what asks for one: none of the three keys is to blame alone
    let _ = k;
    if given.len() != 1 {
        errs.push(format!(
            "kind: a program benchmark names exactly one of run (an installed program), sources (C files) or build \
             (a directory); this one names {}",
            if given.is_empty() {
                "none".to_string()
            } else {
                given.join(" and ")
            }
        ));
    }
    match (run, sources, build) {
        (Some(name), _, _) => Executable::Installed {
            name: name.clone(),
            found: None,
        },
        (_, _, Some(b)) => Executable::Built(self::build(errs, "build", Some(b)).expect("given")),
        (_, s, None) => Executable::Sources(s.into_iter().flatten().map(PathBuf::from).collect()),
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
        if !super::names::valid_name(&m.name) {
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

/// The longest argument `args:` may give: the command goes to the guest
/// over SSH as one line (a few hundred bytes in every shipped benchmark).
pub const MAX_ARG_BYTES: usize = 4096;

/// `args:`: each argument's `{…}` must be a known placeholder, and no
/// argument longer than [`MAX_ARG_BYTES`].
pub fn args(errs: &mut Vec<String>, k: &str, v: Option<&Vec<String>>) -> Vec<String> {
    let args = v.cloned().unwrap_or_default();
    for (i, a) in args.iter().enumerate() {
        if a.len() > MAX_ARG_BYTES {
            errs.push(format!(
                "{k}[{i}]: {} bytes long, more than {MAX_ARG_BYTES}; put long input in a file (files:) and name it",
                a.len()
            ));
            continue;
        }
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
    match v {
        Some(0) => errs.push(format!("{k}: 0 is root, the default; leave it out")),
        // 65535 is the kernel's overflow uid and 4294967295 is (uid_t)-1
        Some(&u) if u >= 65535 => errs.push(format!(
            "{k}: {u} is not a user a guest runs as; use a uid from 1 to 65534"
        )),
        _ => {}
    }
    v.copied()
}
