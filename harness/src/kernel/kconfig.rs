//! Kernel config fragments: parsing `.config`-style text, merging fragments
//! over a base the way `scripts/kconfig/merge_config.sh` does (later values
//! win, redefinitions are reported), and checking after `olddefconfig` that
//! every symbol a fragment asked for kept its value. Pure functions.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{bail, Context, Result};

/// Symbol (without `CONFIG_`) → value (`y`, `m`, `n`, a number, a quoted string).
pub type Config = BTreeMap<String, String>;

/// Parses `.config` text; `# CONFIG_X is not set` reads as `n`.
/// Errors name the 1-based line.
pub fn parse(text: &str) -> Result<Config, String> {
    let mut out = Config::new();
    for (i, line) in text.lines().enumerate() {
        let t = line.trim();
        if t.is_empty() {
            continue;
        }
        if let Some(rest) = t.strip_prefix("# CONFIG_") {
            if let Some(sym) = rest.strip_suffix(" is not set") {
                out.insert(sym.to_string(), "n".into());
            }
            continue;
        }
        if t.starts_with('#') {
            continue;
        }
        let Some(rest) = t.strip_prefix("CONFIG_") else {
            return Err(format!("line {}: `{t}` is not CONFIG_<SYMBOL>=<value>", i + 1));
        };
        let Some((sym, val)) = rest.split_once('=') else {
            return Err(format!("line {}: `{t}` has no `=`", i + 1));
        };
        if sym.is_empty() || !sym.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') || val.is_empty() {
            return Err(format!("line {}: `{t}` is not CONFIG_<SYMBOL>=<value>", i + 1));
        }
        out.insert(sym.to_string(), val.to_string());
    }
    Ok(out)
}

/// Reads and parses a fragment file; errors name `file:line`.
pub fn read(path: &Path) -> Result<Config> {
    let text = std::fs::read_to_string(path).with_context(|| format!("read {}", path.display()))?;
    match parse(&text) {
        Ok(c) => Ok(c),
        Err(e) => bail!("{}:{}", path.display(), e.trim_start_matches("line ")),
    }
}

/// A fragment value that overrides an earlier, different one.
#[derive(Debug, Clone, PartialEq)]
pub struct Override {
    /// The symbol.
    pub symbol: String,
    /// Value before.
    pub was: String,
    /// Value after.
    pub now: String,
    /// Which fragment set it (index into the fragment list).
    pub fragment: usize,
}

/// Merges fragments over a base, in order. Returns the merged config, the
/// requested values (what the fragments asked for, last one winning), and the
/// overrides of values set differently before.
pub fn merge(base: &Config, fragments: &[Config]) -> (Config, Config, Vec<Override>) {
    let mut merged = base.clone();
    let mut requested = Config::new();
    let mut overrides = Vec::new();
    for (i, frag) in fragments.iter().enumerate() {
        for (k, v) in frag {
            if let Some(prev) = requested.get(k) {
                if prev != v {
                    overrides.push(Override {
                        symbol: k.clone(),
                        was: prev.clone(),
                        now: v.clone(),
                        fragment: i,
                    });
                }
            }
            merged.insert(k.clone(), v.clone());
            requested.insert(k.clone(), v.clone());
        }
    }
    (merged, requested, overrides)
}

/// Renders a config as `.config` text (sorted by symbol).
pub fn render(c: &Config) -> String {
    let mut s = String::new();
    for (k, v) in c {
        if v == "n" {
            s.push_str(&format!("# CONFIG_{k} is not set\n"));
        } else {
            s.push_str(&format!("CONFIG_{k}={v}\n"));
        }
    }
    s
}

pub use crate::vocab::Lost;

impl std::fmt::Display for Lost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CONFIG_{}={} became {}", self.symbol, self.requested, self.actual)
    }
}

/// The requested symbols whose final value differs.
pub fn lost(requested: &Config, fin: &Config) -> Vec<Lost> {
    requested
        .iter()
        .filter_map(|(k, want)| {
            let have = fin.get(k).cloned().unwrap_or_else(|| "n".into());
            (have != *want).then(|| Lost {
                symbol: k.clone(),
                requested: want.clone(),
                actual: have,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(s: &str) -> Config {
        parse(s).unwrap()
    }

    #[test]
    fn parse_reads_values_and_not_set() {
        let x = c("CONFIG_A=y\n# CONFIG_B is not set\n# comment\nCONFIG_C=\"str\"\nCONFIG_NR_CPUS=512\n");
        assert_eq!(x["A"], "y");
        assert_eq!(x["B"], "n");
        assert_eq!(x["C"], "\"str\"");
        assert_eq!(x["NR_CPUS"], "512");
    }

    #[test]
    fn parse_errors_name_the_line() {
        assert_eq!(
            parse("CONFIG_A=y\nNR_CPUS=4\n").unwrap_err(),
            "line 2: `NR_CPUS=4` is not CONFIG_<SYMBOL>=<value>"
        );
        assert_eq!(parse("CONFIG_A\n").unwrap_err(), "line 1: `CONFIG_A` has no `=`");
    }

    #[test]
    fn merge_table() {
        // (base, fragments, merged, overrides)
        let cases: &[(&str, &[&str], &str, usize)] = &[
            ("CONFIG_A=y\n", &["CONFIG_B=m\n"], "CONFIG_A=y\nCONFIG_B=m\n", 0),
            (
                "CONFIG_A=y\n",
                &["# CONFIG_A is not set\n"],
                "# CONFIG_A is not set\n",
                0,
            ),
            ("", &["CONFIG_A=y\n", "CONFIG_A=m\n"], "CONFIG_A=m\n", 1),
            ("", &["CONFIG_A=y\n", "CONFIG_A=y\n"], "CONFIG_A=y\n", 0),
            ("CONFIG_N=64\n", &["CONFIG_N=512\n"], "CONFIG_N=512\n", 0),
        ];
        for (base, frags, want, n_over) in cases {
            let frags: Vec<Config> = frags.iter().map(|f| c(f)).collect();
            let (m, _, o) = merge(&c(base), &frags);
            assert_eq!(render(&m), *want, "base {base:?}");
            assert_eq!(o.len(), *n_over, "base {base:?}");
        }
    }

    #[test]
    fn lost_names_symbols_that_changed_or_vanished() {
        let req = c("CONFIG_A=y\nCONFIG_B=m\n# CONFIG_C is not set\nCONFIG_D=y\n");
        let fin = c("CONFIG_A=y\nCONFIG_B=y\n");
        let l = lost(&req, &fin);
        assert_eq!(l.len(), 2);
        assert_eq!(l[0].to_string(), "CONFIG_B=m became y");
        assert_eq!(l[1].to_string(), "CONFIG_D=y became n");
    }
}
