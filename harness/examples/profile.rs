//! Hand tool for kernel profiles (harness/profiler/README.md):
//!
//!   cargo run --example profile -- symbols VMLINUX OUT
//!   cargo run --example profile -- data VMLINUX OUT
//!   cargo run --example profile -- diff [--ops N] [--limit K] BASE... -- VARIANT...
//!
//! `diff` takes one profile file per boot; without `--ops` each file's own
//! op count (from its closing markers) is used.

use anyhow::{bail, Context, Result};
use harness::profile::{self, diff};

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("data") if args.len() == 3 => {
            let n = profile::symbols::write_data(args[1].as_ref(), args[2].as_ref())?;
            println!("{n} data objects -> {}", args[2]);
        }
        Some("symbols") if args.len() == 3 => {
            let n = profile::symbols::write_symbols(args[1].as_ref(), args[2].as_ref())?;
            println!("{n} functions written to {}", args[2]);
        }
        Some("diff") => {
            let mut ops = None;
            let mut limit = 25;
            let mut sides: [Vec<profile::PerOp>; 2] = [Vec::new(), Vec::new()];
            let mut side = 0;
            let mut it = args[1..].iter();
            while let Some(a) = it.next() {
                match a.as_str() {
                    "--ops" => ops = Some(it.next().context("--ops N")?.parse()?),
                    "--limit" => limit = it.next().context("--limit K")?.parse()?,
                    "--" => side = 1,
                    f => sides[side].push(profile::read(f.as_ref())?.per_op(ops).with_context(|| f.to_string())?),
                }
            }
            if sides[0].is_empty() || sides[1].is_empty() {
                bail!("need BASE... -- VARIANT...");
            }
            let d = diff::diff(&sides[0], &sides[1], None, &diff::Options::default());
            print!("{}", d.text(limit));
        }
        _ => bail!("usage: profile symbols VMLINUX OUT | profile data VMLINUX OUT | profile diff [--ops N] [--limit K] BASE... -- VARIANT..."),
    }
    Ok(())
}
