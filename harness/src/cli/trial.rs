//! `harness try`: refuses a series that does not apply before building
//! anything, runs base against base + series, says plainly what failed, and
//! prints the verdict table; with `--per-patch` it bisects the series'
//! prefixes instead and prints what `harness bisect` prints (its `--json`
//! object too). With `--json` it prints the report as one object (as
//! `harness report --json`), or, when the series does not apply, one
//! object `{"does_not_apply": WHY}`; what failed is on stderr either way.

use std::path::PathBuf;

use anyhow::Result;
use serde::Serialize;

use super::report::{ending, print_finished, Gating};
use super::{print_json, run_options, Exit, Global};
use crate::trial::{self, Tried};
use crate::{bisect, config};

/// `harness try`'s arguments.
#[derive(clap::Args, Debug)]
pub(super) struct Args {
    /// Mbox files (`b4 am`, `git format-patch --stdout`), format-patch directories or quilt directories.
    series: Vec<PathBuf>,
    /// A git tree: the kernel source, and with --range where the patches come from.
    #[arg(long, value_name = "TREE")]
    git: Option<PathBuf>,
    /// `BASE..TOPIC` in --git: base is BASE, the series is `git format-patch BASE..TOPIC`.
    #[arg(long, requires = "git")]
    range: Option<String>,
    /// The matrix whose kernel, guest and benchmarks are used (default: the one built into harness).
    #[arg(long)]
    matrix: Option<PathBuf>,
    /// The matrix profile (`none` for none). Default: `premerge`, which in
    /// the built-in matrix runs as `premerge-icount` where KVM is not
    /// usable; a matrix without a `premerge` profile runs its top level.
    #[arg(long)]
    profile: Option<String>,
    /// vCPU counts, instead of the profile's.
    #[arg(long, value_delimiter = ',')]
    vcpus: Vec<u32>,
    /// Only these benchmarks.
    #[arg(long, value_delimiter = ',')]
    bench: Vec<String>,
    /// Only the benchmarks that execute a function the series changes (from the last profiled run of base; see docs/benchmarks.md).
    #[arg(long, conflicts_with = "bench")]
    covering: bool,
    /// The guest clock: wall or icount.
    #[arg(long, value_parser = trial::parse_clock)]
    clock: Option<config::Clock>,
    /// Boots per variant and vCPU count.
    #[arg(long)]
    boots: Option<u32>,
    /// The effect floor (a fraction: 0.005 is 0.5%).
    #[arg(long)]
    floor: Option<f64>,
    /// Bisect the series' prefixes: name the patch (or patches) that carry the change (one --bench, one --vcpus).
    /// A bisection has no gate: its exit code says whether a patch was named.
    #[arg(long, conflicts_with = "gate")]
    per_patch: bool,
    #[command(flatten)]
    gating: Gating,
    /// Also write the key cells against base as JUnit XML into FILE (for CI),
    /// after the report files.
    #[arg(long, value_name = "FILE", conflicts_with = "per_patch")]
    junit: Option<PathBuf>,
    /// No progress output.
    #[arg(long, short)]
    quiet: bool,
}

/// The options only the command uses.
struct Outputs {
    gating: Gating,
    junit: Option<PathBuf>,
    quiet: bool,
    per_patch: bool,
}

impl Args {
    /// The request the library takes, and the options only the command uses.
    fn request(self) -> (trial::Request, Outputs) {
        let Args {
            series,
            git,
            range,
            matrix,
            profile,
            vcpus,
            bench,
            covering,
            clock,
            boots,
            floor,
            per_patch,
            gating,
            junit,
            quiet,
        } = self;
        let profile_is_default = profile.is_none();
        let profile = profile.unwrap_or_else(|| "premerge".into());
        (
            trial::Request {
                series,
                git,
                range,
                matrix,
                profile,
                profile_is_default,
                vcpus,
                bench,
                covering,
                clock,
                boots,
                floor,
            },
            Outputs {
                gating,
                junit,
                quiet,
                per_patch,
            },
        )
    }
}

/// `harness try --json` when the series does not apply.
#[derive(Serialize)]
struct Refused<'a> {
    /// Which patch and hunk do not apply, or that the series is already in.
    does_not_apply: &'a str,
}

/// Runs the two-variant matrix; a refusal or a variant that could not be
/// made decides the exit code before the gate does.
pub(super) fn run(a: Args, g: &Global) -> Result<Exit> {
    let (
        req,
        Outputs {
            gating,
            junit,
            quiet,
            per_patch,
        },
    ) = a.request();
    crate::proc::install_signal_handler()?;
    let e = ending(g, gating, junit.as_deref());
    let options = |m: &std::path::Path| run_options(g, m, quiet);
    match trial::run(&req, per_patch, &options, &e, &|line| eprintln!("{line}"))? {
        Tried::DoesNotApply(why) => {
            eprintln!("try: {}", crate::ui::printable(&why));
            if g.json {
                print_json(&Refused { does_not_apply: &why })?;
            }
            Ok(Exit::DoesNotApply)
        }
        Tried::PerPatch(m) => {
            let dir = bisect::start_series(*m, None, bisect::Rule::default(), &g.runs_dir)?;
            super::bisect::finish(&dir, g, quiet)
        }
        Tried::Measured { failures, finished } => {
            for f in &failures {
                eprintln!("try: {}", crate::ui::printable(&f.to_string()));
            }
            let gated = print_finished(&finished, g, e.gate)?;
            Ok(exit(&failures, gated))
        }
    }
}

/// `try`'s outcome: a variant that could not be made outranks the gate.
fn exit(failures: &[trial::FailedStep], gated: Exit) -> Exit {
    if failures.iter().any(trial::FailedStep::unmade) {
        Exit::VariantFailed
    } else {
        gated
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_variant_that_could_not_be_made_outranks_the_gate() {
        use crate::records::{Cause, Stage};
        let f = |stage, cause, text: &str| trial::FailedStep {
            stage,
            cause: Some(cause),
            text: text.into(),
        };
        let boot = f(
            Stage::Boot,
            Cause::Panic,
            "series at 2 vCPUs, boot 0: console: Kernel panic",
        );
        let build = f(
            Stage::Build,
            Cause::BuildTimeout,
            "series: build timed out after 60 min",
        );
        assert_eq!(exit(&[], Exit::Done), Exit::Done);
        assert_eq!(exit(&[], Exit::Regressed), Exit::Regressed);
        assert_eq!(
            exit(std::slice::from_ref(&boot), Exit::Done),
            Exit::Done,
            "a failed boot is the verdict's business"
        );
        assert_eq!(exit(&[boot, build.clone()], Exit::Regressed), Exit::VariantFailed);
        assert_eq!(exit(&[build], Exit::Done).code(), 2);
        assert_eq!(Exit::DoesNotApply.code(), 2);
    }

    #[test]
    fn per_patch_and_junit_are_asked_for_by_their_flags() {
        use clap::Parser;
        let args = |extra: &[&str]| {
            let argv = [
                &["harness", "try", "s.mbox", "--bench", "static-doexec", "--vcpus", "2"][..],
                extra,
            ]
            .concat();
            match super::super::Cli::try_parse_from(argv).unwrap().cmd {
                super::super::Command::Try(a) => a.request(),
                _ => unreachable!(),
            }
        };
        assert!(args(&["--per-patch"]).1.per_patch);
        let (req, out) = args(&[]);
        assert!(!out.per_patch && out.junit.is_none());
        assert_eq!(args(&["--junit", "ci.xml"]).1.junit, Some(PathBuf::from("ci.xml")));
        let both = ["harness", "try", "s.mbox", "--per-patch", "--junit", "ci.xml"];
        assert!(
            super::super::Cli::try_parse_from(both).is_err(),
            "a bisection writes no junit"
        );
        // issue 29: --gate was ignored with --per-patch (a culprit patch exited 0); clap refuses it
        let gated = ["harness", "try", "s.mbox", "--per-patch", "--gate"];
        let e = super::super::Cli::try_parse_from(gated)
            .expect_err("refused")
            .to_string();
        assert!(e.contains("--per-patch") && e.contains("--gate"), "{e}");
        assert_eq!((req.bench, req.vcpus), (vec!["static-doexec".to_string()], vec![2]));
    }
}
