//! `harness gc`: what the work and runs directories hold that the policy
//! lets go, and with `--yes` its deletion under the work-directory lock.
//! With `--json` it prints one array of `{"path": …, "bytes": N, "why": …}`.

use anyhow::Result;

use super::{print_json, Exit, Global};
use crate::gc;

/// `harness gc`'s arguments.
#[derive(clap::Args, Debug)]
pub(super) struct Args {
    /// Keep this many kernels, tree copies and run images, most recently used first.
    #[arg(long, default_value_t = 3)]
    keep: usize,
    /// Also keep whatever was used within this many days.
    #[arg(long)]
    days: Option<u64>,
    /// Delete; without it gc only says what it would delete.
    #[arg(long)]
    yes: bool,
}

/// Prints what the policy lets go; with `--yes`, deletes it.
pub(super) fn run(a: Args, g: &Global) -> Result<Exit> {
    let policy = gc::Policy {
        keep: a.keep,
        days: a.days,
    };
    let _lock = if a.yes {
        Some(crate::workdir::WorkLock::acquire(&g.work(), "gc")?)
    } else {
        None
    };
    let needed = crate::store::pending::needed(&g.runs_dir);
    let victims = gc::plan(&g.work(), &g.runs_dir, policy, std::time::SystemTime::now(), &needed);
    let total: u64 = victims.iter().map(|v| v.bytes).sum();
    if g.json {
        print_json(&victims)?;
    } else {
        for line in kept(&needed) {
            println!("{line}");
        }
        let verb = if a.yes { "delete" } else { "would delete" };
        for v in &victims {
            println!("{verb} {} ({}): {}", v.path.display(), gc::human(v.bytes), v.why);
        }
        let tail = if a.yes || victims.is_empty() {
            ""
        } else {
            "; pass --yes to delete"
        };
        println!("{} in {} item(s){tail}", gc::human(total), victims.len());
    }
    if a.yes {
        gc::delete(&victims)?;
    }
    Ok(Exit::Done)
}

/// What gc keeps for unfinished runs, one line per run.
fn kept(needed: &gc::Needed) -> Vec<String> {
    let mut by_run: std::collections::BTreeMap<&str, Vec<&str>> = std::collections::BTreeMap::new();
    for (key, runs) in &needed.kernels {
        for r in runs {
            by_run.entry(r).or_default().push(key);
        }
    }
    by_run
        .into_iter()
        .map(|(run, keys)| {
            format!(
                "keep kernel(s) {} and the images of run {run}: it has planned jobs not ended (finish it, or remove its directory, to let them go)",
                keys.join(", ")
            )
        })
        .collect()
}
