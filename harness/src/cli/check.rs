//! `harness check`: the matrix, the host, QEMU and every series, without
//! building. With `--json` it prints one array of items `{"level": "ok" |
//! "warn" | "error", "what": …, "message": …}`; it exits 2 when any item is
//! an error.

use anyhow::{Context, Result};

use super::{print_json, Exit, Global, MatrixArgs};
use crate::{check, config, pipeline};

/// `harness check`'s arguments.
#[derive(clap::Args, Debug)]
pub(super) struct Args {
    #[command(flatten)]
    m: MatrixArgs,
}

/// Checks and prints every item; an error among them is [`Exit::Error`].
pub(super) fn run(a: Args, g: &Global) -> Result<Exit> {
    let (matrix, profile) = a.m.resolve()?;
    let m = config::load(&matrix, profile.as_deref()).context("load the matrix")?;
    // what runs here: a profile's `without_kvm:` where KVM is not usable
    // (without QEMU there is nothing to probe: the matrix is checked as
    // written, the first item says why, the QEMU item what is missing)
    let (m, unknown) = match pipeline::for_this_host(m.clone(), &g.work()) {
        Ok(here) => (here, None),
        Err(e) => (m, Some(e)),
    };
    let mut items = check::run(&m, &g.work());
    if let Some(e) = unknown {
        items.insert(
            0,
            check::Item {
                level: check::Level::Warn,
                what: "profile here".into(),
                message: format!("checked as written: whether KVM is usable here is not known ({e:#})"),
            },
        );
    }
    items.extend(check::disk(&g.work(), &g.runs_dir));
    let errors = items.iter().filter(|i| i.level == check::Level::Error).count();
    if g.json {
        print_json(&items)?;
    } else {
        for i in &items {
            let tag = match i.level {
                check::Level::Ok => "ok   ",
                check::Level::Warn => "warn ",
                check::Level::Error => "ERROR",
            };
            let line = format!("{tag} {}: {}", i.what, i.message);
            println!("{}", crate::ui::printable_lines(&line));
        }
        println!("{errors} error(s)");
    }
    Ok(if errors > 0 { Exit::Error } else { Exit::Done })
}
