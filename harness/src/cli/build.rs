//! `harness build`: every variant into the kernel cache and the run
//! directory written, without booting. With `--json` it prints one object:
//! `{"run_dir": …, "variants": [{"variant": …, "kernel": KEY} or
//! {"variant": …, "error": …}, …]}`.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde::Serialize;

use super::{print_json, run_options, Exit, Global, MatrixArgs};
use crate::{config, pipeline};

/// `harness build`'s arguments.
#[derive(clap::Args, Debug)]
pub(super) struct Args {
    #[command(flatten)]
    m: MatrixArgs,
    /// The run directory to write (made if missing; opened again if `harness build` made it).
    #[arg(long, value_name = "DIR")]
    run_dir: Option<PathBuf>,
    /// No progress output.
    #[arg(long, short)]
    quiet: bool,
}

/// `harness build --json`: the run directory and each variant's kernel.
#[derive(Serialize)]
struct Built<'a> {
    /// The run directory shards then write into.
    run_dir: &'a Path,
    /// One per variant, in name order.
    variants: Vec<Variant<'a>>,
}

/// One variant's build: its kernel's cache key, or why it has none.
#[derive(Serialize)]
struct Variant<'a> {
    /// The variant.
    variant: &'a str,
    /// The kernel's cache key.
    #[serde(skip_serializing_if = "Option::is_none")]
    kernel: Option<&'a str>,
    /// Why the variant was not built.
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<&'a str>,
}

/// Builds every variant; a failed variant is printed, not an error.
pub(super) fn run(a: Args, g: &Global) -> Result<Exit> {
    crate::proc::install_signal_handler()?;
    let (matrix, profile) = a.m.resolve()?;
    let m = config::load(&matrix, profile.as_deref()).context("load the matrix")?;
    let at = a
        .run_dir
        .map(std::path::absolute)
        .transpose()
        .context("resolve --run-dir")?;
    let (dir, built) = pipeline::build(m, &run_options(g, &matrix, a.quiet)?, at.as_deref())?;
    if g.json {
        let variants = built
            .iter()
            .map(|(variant, r)| match r {
                Ok(key) => Variant {
                    variant,
                    kernel: Some(key),
                    error: None,
                },
                Err(e) => Variant {
                    variant,
                    kernel: None,
                    error: Some(e),
                },
            })
            .collect();
        print_json(&Built {
            run_dir: &dir,
            variants,
        })?;
        return Ok(Exit::Done);
    }
    for (variant, r) in &built {
        match r {
            Ok(key) => println!("{variant}: kernel {key}"),
            Err(e) => println!("{variant}: FAILED: {e}"),
        }
    }
    println!("run directory: {}", dir.display());
    Ok(Exit::Done)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_json_record_is_as_documented() {
        let variants = vec![
            Variant {
                variant: "base",
                kernel: Some("k1"),
                error: None,
            },
            Variant {
                variant: "v",
                kernel: None,
                error: Some("build failed: x"),
            },
        ];
        let j = serde_json::to_string(&Built {
            run_dir: Path::new("/r"),
            variants,
        })
        .unwrap();
        assert_eq!(
            j,
            r#"{"run_dir":"/r","variants":[{"variant":"base","kernel":"k1"},{"variant":"v","error":"build failed: x"}]}"#
        );
    }
}
