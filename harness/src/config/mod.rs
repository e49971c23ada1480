//! The matrix file: raw serde structs (unknown keys rejected, `raw.rs`)
//! turned into a validated [`Matrix`] (`validated.rs`) by one validator per
//! section (`validation.rs`); the benchmark kinds and their parameters are
//! declared once (`params.rs`). Owns every rule about what a matrix may say;
//! YAML errors carry `file:line:col`, validation errors name the YAML path
//! (`variants[2].apply[0]`). Nothing here touches the kernel tree or spawns.

mod events;
mod keys;
mod metrics;
mod names;
mod params;
mod program;
mod program_check;
mod raw;
mod statistics;
mod validated;
mod validation;
mod variants;

use std::path::{Path, PathBuf};

pub use metrics::{
    metric_names, per_call_metric, syscall_names, unit_of_work, works_in_syscalls, INSNS_PER_OP, SYSCALL_HANDLER,
    VMALLOC_TESTS,
};
pub use params::{BenchKind, Count, Link, NprocWord};
pub use program::{Build, Executable, MetricSpec, Pattern, PLACEHOLDERS};
pub use program_check::{missing_program, not_installed};
pub use statistics::DEFAULT_THRESHOLD;
pub use validated::{
    AccelChoice, BaseConfig, Benchmark, Clock, ContentionGate, Guest, InsteadOf, Kernel, Matrix, Pin, Sampling,
    Statistics, Variant,
};
pub use validation::{is_base_config_target, BASE_CONFIG_TARGETS};

use raw::RawMatrix;

/// Default kernel source: Debian's `linux-source-6.12` tarball.
pub const DEFAULT_SOURCE: &str = "/usr/src/linux-source-6.12.tar.xz";

/// A matrix that cannot be used, with every problem found.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("read {path}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// YAML syntax or shape (unknown key, wrong type).
    #[error("{path}:{line}:{column}: {message}")]
    Yaml {
        /// The file.
        path: PathBuf,
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: usize,
        /// serde_yaml's message, which starts with the YAML path.
        message: String,
    },
    /// Values that parse but make no sense, each with its YAML path.
    #[error("{path}: {} problem(s):\n{}", .problems.len(), .problems.iter().map(|p| format!("  {p}")).collect::<Vec<_>>().join("\n"))]
    Invalid {
        /// The file.
        path: PathBuf,
        /// `yaml.path: what is wrong and what to do`.
        problems: Vec<String>,
    },
}

/// Reads and validates a matrix file, applying `profile` if given.
pub fn load(path: &Path, profile: Option<&str>) -> Result<Matrix, ConfigError> {
    parse(&read_text(path)?, path, profile)
}

/// The matrix file's text; bytes that are not UTF-8 are an error at their
/// line and column, with the byte offset.
fn read_text(path: &Path) -> Result<String, ConfigError> {
    let bytes = std::fs::read(path).map_err(|source| ConfigError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    String::from_utf8(bytes).map_err(|e| {
        let at = e.utf8_error().valid_up_to();
        let b = e.as_bytes();
        let line = b[..at].iter().filter(|&&c| c == b'\n').count() + 1;
        let column = at - b[..at].iter().rposition(|&c| c == b'\n').map_or(0, |i| i + 1) + 1;
        ConfigError::Yaml {
            path: path.to_path_buf(),
            line,
            column,
            message: format!(
                "byte 0x{:02x} at offset {at} is not UTF-8: save the matrix as UTF-8",
                b[at]
            ),
        }
    })
}

/// The problems of each profile of the matrix file at `path` but `asked`
/// (the one already loaded), validated as `--profile <name>` would: a
/// profile no run has asked for yet is found broken by `check`, not by
/// the nightly that first selects it. Profiles without a problem are left
/// out.
pub fn other_profiles_problems(path: &Path, asked: Option<&str>) -> Result<Vec<(String, Vec<String>)>, ConfigError> {
    let raw = raw_of(&read_text(path)?, path)?;
    let names: Vec<String> = raw
        .profiles
        .keys()
        .filter(|n| Some(n.as_str()) != asked)
        .cloned()
        .collect();
    Ok(names
        .into_iter()
        .filter_map(|n| validation::validate(raw.clone(), path, Some(&n)).err().map(|p| (n, p)))
        .collect())
}

/// Whether the matrix file at `path` defines profile `name` (the file read
/// and parsed, not validated).
pub fn defines_profile(path: &Path, name: &str) -> Result<bool, ConfigError> {
    Ok(raw_of(&read_text(path)?, path)?.profiles.contains_key(name))
}

/// The raw matrix of YAML `text` (a UTF-8 byte-order mark, which some
/// editors write, left out), errors at `path`'s line and column.
fn raw_of(text: &str, path: &Path) -> Result<RawMatrix, ConfigError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    if let Some(x) = events::excess(text) {
        let ((line, column), message) = match x {
            events::Excess::Aliases { line, column } => (
                (line, column),
                format!(
                    "more than {} YAML aliases (`*name`): each is expanded in full, so a few lines can ask for \
                     gigabytes; write the values out, or use profiles and overrides",
                    events::MAX_ALIASES
                ),
            ),
            events::Excess::Depth { line, column } => (
                (line, column),
                format!(
                    "sequences and mappings nested more than {} deep: no matrix needs that; flatten it",
                    events::MAX_DEPTH
                ),
            ),
        };
        return Err(ConfigError::Yaml {
            path: path.to_path_buf(),
            line,
            column,
            message,
        });
    }
    serde_yaml::from_str(text).map_err(|e| yaml_error(e, text, path))
}

/// A YAML error at its file, line and column (a duplicate key at its
/// second occurrence, where serde_yaml gives its mapping's start).
fn yaml_error(e: serde_yaml::Error, text: &str, path: &Path) -> ConfigError {
    let (mut line, mut column) = e.location().map(|l| (l.line(), l.column())).unwrap_or((0, 0));
    // serde_yaml appends " at line L column C"; the location leads instead
    let mut message = e.to_string();
    if let Some(i) = message.rfind(" at line ") {
        message.truncate(i);
    }
    let dup = message
        .split("duplicate field `")
        .nth(1)
        .and_then(|r| r.split('`').next());
    if let Some((l, c)) = dup.and_then(|key| duplicate_key_at(text, line, column, key)) {
        (line, column) = (l, c);
    }
    ConfigError::Yaml {
        path: path.to_path_buf(),
        line,
        column,
        message,
    }
}

/// Where `key` occurs the second time in the block mapping whose first key
/// is at `line`:`column` (1-based): the lines at that indentation, up to
/// the first line indented less. None for a flow mapping (`{…}`).
fn duplicate_key_at(text: &str, line: usize, column: usize, key: &str) -> Option<(usize, usize)> {
    let indent = column.checked_sub(1)?;
    let mut seen = 0;
    for (i, l) in text.lines().enumerate().skip(line.checked_sub(1)?) {
        let body = l.trim_start_matches([' ', '-']);
        let at = l.len() - body.len();
        if body.is_empty() || body.starts_with('#') {
            continue;
        }
        if at < indent && i + 1 > line {
            return None;
        }
        let is_key = body.strip_prefix(key).is_some_and(|r| r.trim_start().starts_with(':'));
        if at == indent && is_key {
            seen += 1;
            if seen == 2 {
                return Some((i + 1, column));
            }
        }
    }
    None
}

/// Parses and validates matrix text; `path` is used for messages and to
/// resolve relative paths.
pub fn parse(text: &str, path: &Path, profile: Option<&str>) -> Result<Matrix, ConfigError> {
    let raw = raw_of(text, path)?;
    validation::validate(raw, path, profile).map_err(|problems| ConfigError::Invalid {
        path: path.to_path_buf(),
        problems,
    })
}

#[cfg(test)]
mod tests;
