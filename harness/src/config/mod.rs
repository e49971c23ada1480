//! The matrix file: raw serde structs (unknown keys rejected, `raw.rs`)
//! turned into a validated [`Matrix`] (`validated.rs`) by one validator per
//! section (`validation.rs`); the benchmark kinds and their parameters are
//! declared once (`params.rs`). Owns every rule about what a matrix may say;
//! YAML errors carry `file:line:col`, validation errors name the YAML path
//! (`variants[2].apply[0]`). Nothing here touches the kernel tree or spawns.

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
pub use program::{guest_path as program_guest_path, Build, MetricSpec, Pattern, PLACEHOLDERS};
pub use program_check::{missing_program, not_installed};
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
    let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    parse(&text, path, profile)
}

/// The problems of each profile of the matrix file at `path` but `asked`
/// (the one already loaded), validated as `--profile <name>` would: a
/// profile no run has asked for yet is found broken by `check`, not by
/// the nightly that first selects it. Profiles without a problem are left
/// out.
pub fn other_profiles_problems(path: &Path, asked: Option<&str>) -> Result<Vec<(String, Vec<String>)>, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    let raw = raw_of(&text, path)?;
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
    let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    Ok(raw_of(&text, path)?.profiles.contains_key(name))
}

/// The raw matrix of YAML `text` (a UTF-8 byte-order mark, which some
/// editors write, left out), errors at `path`'s line and column.
fn raw_of(text: &str, path: &Path) -> Result<RawMatrix, ConfigError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    serde_yaml::from_str(text).map_err(|e| yaml_error(e, path))
}

/// A YAML error at its file, line and column.
fn yaml_error(e: serde_yaml::Error, path: &Path) -> ConfigError {
    let (line, column) = e.location().map(|l| (l.line(), l.column())).unwrap_or((0, 0));
    // serde_yaml appends " at line L column C"; the location leads instead
    let mut message = e.to_string();
    if let Some(i) = message.rfind(" at line ") {
        message.truncate(i);
    }
    ConfigError::Yaml {
        path: path.to_path_buf(),
        line,
        column,
        message,
    }
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
