//! `harness bisect`: runs or resumes a bisection; prints the rule, each
//! step's evidence and the first bad commit (exit 0), or why it stopped
//! undecided (exit 3). With `--json` the rule and the steps go to stderr
//! and stdout gets one object: `{"bisect_dir": DIR, "first_bad": ID,
//! "subject": "<id> <subject>"}` or `{"bisect_dir": DIR, "undecided": WHY}`.

use std::path::{Path, PathBuf};

use anyhow::Result;
use serde::Serialize;

use super::{print_json, run_options, Exit, Global};
use crate::{bisect, config, trial};

/// `harness bisect`'s arguments.
#[derive(clap::Args, Debug)]
pub(super) struct Args {
    /// The git tree.
    #[arg(long, value_name = "TREE", required_unless_present = "resume")]
    git: Option<PathBuf>,
    /// A commit-ish that performs well.
    #[arg(long, required_unless_present = "resume")]
    good: Option<String>,
    /// A later commit-ish that performs worse.
    #[arg(long, required_unless_present = "resume")]
    bad: Option<String>,
    /// The benchmark.
    #[arg(long, required_unless_present = "resume")]
    bench: Option<String>,
    /// The vCPU count.
    #[arg(long, required_unless_present = "resume")]
    vcpus: Option<u32>,
    /// The metric (default: the benchmark's first).
    #[arg(long)]
    metric: Option<String>,
    /// The guest clock: wall or icount.
    #[arg(long, value_parser = trial::parse_clock)]
    clock: Option<config::Clock>,
    /// The matrix whose kernel config, guest and benchmarks are used (default: the built-in one).
    #[arg(long)]
    matrix: Option<PathBuf>,
    /// The matrix profile (`none` for none).
    #[arg(long, default_value = "none")]
    profile: String,
    /// Boots of each end.
    #[arg(long, default_value_t = 5)]
    end_boots: u32,
    /// Boots per batch at a midpoint.
    #[arg(long, default_value_t = 5)]
    batch: u32,
    /// Most boots at a midpoint.
    #[arg(long, default_value_t = 15)]
    max_boots: u32,
    /// Overall level of each step's tests (split over its looks).
    #[arg(long, default_value_t = 0.05)]
    alpha: f64,
    /// Finish an interrupted bisection.
    #[arg(long, value_name = "BISECT_DIR")]
    resume: Option<PathBuf>,
    /// No progress output.
    #[arg(long, short)]
    quiet: bool,
}

impl Args {
    /// The request of a new bisection (without `--resume`, clap requires
    /// the tree, both ends, the benchmark and the vCPU count).
    fn request(self) -> bisect::Request {
        let trial = trial::Request {
            matrix: self.matrix,
            profile: self.profile,
            vcpus: self.vcpus.into_iter().collect(),
            bench: self.bench.into_iter().collect(),
            clock: self.clock,
            ..Default::default()
        };
        let rule = bisect::Rule { end_boots: self.end_boots, batch: self.batch, max_boots: self.max_boots, alpha: self.alpha };
        bisect::Request { git: self.git.unwrap_or_default(), good: self.good.unwrap_or_default(), bad: self.bad.unwrap_or_default(), trial, metric: self.metric, rule }
    }
}

/// `harness bisect --json`: how the bisection ended.
#[derive(Serialize)]
struct Ended<'a> {
    /// The bisection's directory.
    bisect_dir: &'a Path,
    /// The first bad commit's id.
    #[serde(skip_serializing_if = "Option::is_none")]
    first_bad: Option<&'a str>,
    /// `<short id> <subject>` of the first bad commit.
    #[serde(skip_serializing_if = "Option::is_none")]
    subject: Option<String>,
    /// Why the bisection stopped undecided.
    #[serde(skip_serializing_if = "Option::is_none")]
    undecided: Option<&'a str>,
}

/// Starts (or with `--resume` goes on with) the bisection and runs it to its end.
pub(super) fn run(a: Args, g: &Global) -> Result<Exit> {
    crate::proc::install_signal_handler()?;
    let quiet = a.quiet;
    let dir = match a.resume.clone() {
        Some(d) => d,
        None => bisect::start(&a.request(), &g.runs_dir, &g.work_dir)?,
    };
    eprintln!("bisect: {} (resume with `harness bisect --resume {}`)", dir.display(), dir.display());
    let (tree, matrix) = bisect::tree_of(&dir)?;
    let opts = run_options(g, &matrix, quiet)?;
    let json = g.json;
    let say = move |s: &str| if json { eprintln!("{s}") } else { println!("{s}") };
    let outcome = bisect::run(&dir, &opts, &say)?;
    let ended = match &outcome {
        bisect::Outcome::FirstBad(c) => Ended { bisect_dir: &dir, first_bad: Some(c), subject: Some(bisect::describe(&tree, c)), undecided: None },
        bisect::Outcome::Undecided(why) => Ended { bisect_dir: &dir, first_bad: None, subject: None, undecided: Some(why) },
    };
    if json {
        print_json(&ended)?;
    } else if let Some(s) = &ended.subject {
        println!("first bad commit: {s}");
    } else if let Some(why) = ended.undecided {
        println!("undecided: {why}");
    }
    Ok(exit(&outcome))
}

/// The exit code of a bisection's end.
fn exit(o: &bisect::Outcome) -> Exit {
    match o {
        bisect::Outcome::FirstBad(_) => Exit::Done,
        bisect::Outcome::Undecided(_) => Exit::Undecided,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn undecided_has_its_own_code() {
        assert_eq!(exit(&bisect::Outcome::FirstBad("c4".into())), Exit::Done);
        assert_eq!(exit(&bisect::Outcome::Undecided("step 2 at c3: …".into())), Exit::Undecided);
        assert_eq!(exit(&bisect::Outcome::Undecided(String::new())).code(), 3);
    }

    #[test]
    fn the_json_record_is_as_documented() {
        let dir = Path::new("/runs/bisect-1");
        let found = Ended { bisect_dir: dir, first_bad: Some("abc"), subject: Some("abc exec: slower".into()), undecided: None };
        assert_eq!(serde_json::to_string(&found).unwrap(), r#"{"bisect_dir":"/runs/bisect-1","first_bad":"abc","subject":"abc exec: slower"}"#);
        let stopped = Ended { bisect_dir: dir, first_bad: None, subject: None, undecided: Some("step 1 at c3: …") };
        assert_eq!(serde_json::to_string(&stopped).unwrap(), r#"{"bisect_dir":"/runs/bisect-1","undecided":"step 1 at c3: …"}"#);
    }
}
