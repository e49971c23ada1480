//! `harness explain`: the differential kernel profile of one cell of a
//! run (a variant against base on one benchmark at one vCPU count), every
//! function ranked by |Δ instructions per op| with its calls, atomics and
//! pauses per op, share of the op and noise threshold. With `--json` it
//! prints the cell's profile as one object (`benchmark`, `vcpus`,
//! `variant`, `diff`: as in `report.json`'s `profiles`; and `contention`,
//! the cell's contention profile as in `report.json`'s `contention`, when
//! its boots carry contention counts; and `scaling`, the scaling view of
//! the variant on the benchmark across the run's vCPU counts as in
//! `report.json`'s `scaling`, when the run has profiles at two or more).

use std::path::PathBuf;

use anyhow::Result;

use super::{print_json, Exit, Global};
use crate::profile::scaling::Scaling;
use crate::report::profiles::{self, CellProfile};
use crate::report::render::scaling as scaling_text;
use crate::store;

/// `harness explain`'s arguments.
#[derive(clap::Args, Debug)]
pub(super) struct Args {
    /// The run directory.
    run_dir: PathBuf,
    /// The variant to explain against base.
    #[arg(long)]
    variant: String,
    /// The benchmark (its name in the matrix).
    #[arg(long)]
    bench: String,
    /// The vCPU count.
    #[arg(long)]
    vcpus: u32,
    /// Functions shown (default: every function that ran on either side).
    #[arg(long)]
    top: Option<usize>,
}

/// Refuses a cell the run's matrix does not have, naming what it has (a
/// misspelt benchmark was blamed on profiling).
fn known_cell(m: &crate::config::Matrix, a: &Args) -> Result<()> {
    let benches: Vec<&str> = m.benchmarks.iter().map(|b| b.name.as_str()).collect();
    if !benches.contains(&a.bench.as_str()) {
        anyhow::bail!(
            "--bench {}: the run has no such benchmark; it has {}",
            a.bench,
            benches.join(", ")
        );
    }
    let variants: Vec<&str> = m.variants.iter().map(|v| v.name.as_str()).collect();
    if !variants.contains(&a.variant.as_str()) {
        anyhow::bail!(
            "--variant {}: the run has no such variant; it has {}",
            a.variant,
            variants.join(", ")
        );
    }
    if !m.vcpus.contains(&a.vcpus) {
        let counts: Vec<String> = m.vcpus.iter().map(u32::to_string).collect();
        anyhow::bail!("--vcpus {}: the run measured {} vCPUs only", a.vcpus, counts.join(", "));
    }
    Ok(())
}

/// Prints the cell's differential profile.
pub(super) fn run(a: Args, g: &Global) -> Result<Exit> {
    let run = store::Run::open(&a.run_dir)?;
    let m = run.meta()?.matrix;
    known_cell(&m, &a)?;
    let (dir, events, from) = profiles::source(&run, run.events()?)?;
    let mut notes = Vec::new();
    let diff = profiles::cell(&dir, &events, &a.variant, a.vcpus, &a.bench, &mut notes)?;
    let contention = profiles::cell_contention(&dir, &events, &a.variant, a.vcpus, &a.bench, &mut notes);
    let scaling = crate::report::scaling::cell_scaling(&dir, &events, &m, &a.variant, &a.bench, &mut notes);
    for n in &notes {
        crate::ui::notice(n);
    }
    let cell = CellProfile {
        benchmark: a.bench,
        vcpus: a.vcpus,
        variant: a.variant,
        diff,
        from,
    };
    if g.json {
        #[derive(serde::Serialize)]
        struct Explained<'a> {
            #[serde(flatten)]
            cell: &'a CellProfile,
            #[serde(skip_serializing_if = "Option::is_none")]
            contention: Option<&'a crate::profile::contention::Diff>,
            #[serde(skip_serializing_if = "Option::is_none")]
            model: Option<&'a profiles::CellModel>,
            #[serde(skip_serializing_if = "Option::is_none")]
            scaling: Option<&'a Scaling>,
        }
        print_json(&Explained {
            cell: &cell,
            contention: contention.as_ref().map(|c| &c.0),
            model: contention.as_ref().map(|c| &c.1),
            scaling: scaling.as_ref(),
        })?;
    } else {
        println!(
            "{} against base: {} at {} vCPUs, run {}{}",
            cell.variant,
            cell.benchmark,
            cell.vcpus,
            run.id,
            cell.from_clause()
        );
        let top = a.top.unwrap_or(usize::MAX);
        print!("{}", cell.diff.text(top));
        print!("{}", contention_view(contention.as_ref(), cell.vcpus, top));
        if let Some(s) = &scaling {
            print!("{}", scaling_view(&cell, s, top));
        }
    }
    Ok(Exit::Done)
}

/// The cell's contention verdict, notes, first `top` rows and model, in
/// 100 columns; or that the boots carry no counts.
fn contention_view(
    c: Option<&(crate::profile::contention::Diff, profiles::CellModel)>,
    vcpus: u32,
    top: usize,
) -> String {
    let Some((d, m)) = c else {
        return "contention: not counted (the boots' profiles carry no contention counts)\n".into();
    };
    let mut out = format!("contention: {}\n", d.summary(3));
    for n in [d.short_of(vcpus), d.held_back()].into_iter().flatten() {
        out.push_str(&format!("{}\n", n.trim_start()));
    }
    out.push_str(&crate::report::render::compact::contention_rows(d, top, 100));
    out.push_str(&crate::report::render::compact::model_text(m, 100));
    out
}

/// The scaling view of the cell's variant on its benchmark across the
/// run's vCPU counts, its first `top` rows, in 100 columns.
fn scaling_view(cell: &CellProfile, s: &Scaling, top: usize) -> String {
    use crate::report::render::layout::wrap;
    let title = crate::report::scaling::title(&cell.benchmark, &cell.variant, &s.vcpus);
    let mut out = wrap(&format!("scaling, {title}: {}", scaling_text::summary(s, 3)), 100, 2);
    if s.why.is_none() {
        out.push_str(&wrap(&scaling_text::scheduler_text(s), 100, 2));
    }
    out.push_str(&wrap(&format!("rule: {}", s.rule), 100, 2));
    let rows: Vec<_> = s.rows.iter().take(top).collect();
    out.push_str(&scaling_text::rows_text(s, &rows, 100));
    out
}
