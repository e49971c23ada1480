//! Command-line interface: parses arguments (clap), calls the library, prints
//! results, and maps outcomes to exit codes. Errors are printed once, as a
//! chain of lowercase fragments after "error: failed to".

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};

use crate::{check, config, gc, history, pipeline, plan, report, slurm, store};

/// Exit code: the run finished and no gate failed.
pub const EXIT_OK: u8 = 0;
/// Exit code: `--gate` and a key metric regressed (or fails more, or, with
/// `--strict`, is unsure).
pub const EXIT_REGRESSED: u8 = 1;
/// Exit code: bad input or a failed step that stops the harness.
pub const EXIT_ERROR: u8 = 2;
/// Exit code: interrupted by SIGINT/SIGTERM (resume with `run --resume`).
pub const EXIT_INTERRUPTED: u8 = 130;

#[derive(Parser, Debug)]
#[command(name = "harness", version, about = "Does a kernel patch series make Linux faster or slower at scale? Builds, boots and measures variants, and says so with statistics.")]
struct Cli {
    #[command(subcommand)]
    cmd: Command,
    #[command(flatten)]
    global: Global,
}

/// Options every command takes.
#[derive(clap::Args, Debug)]
struct Global {
    /// Work directory: the kernel tree copy, the kernel cache, the lock.
    #[arg(long, global = true, env = "HARNESS_WORK_DIR", default_value = "work")]
    work_dir: PathBuf,
    /// Where run directories are created.
    #[arg(long, global = true, env = "HARNESS_RUNS_DIR", default_value = "runs")]
    runs_dir: PathBuf,
    /// Benchmark sources (default: `images/` beside the matrix file, else the ones built into the binary).
    #[arg(long, global = true, env = "HARNESS_IMAGES_DIR")]
    images_dir: Option<PathBuf>,
    /// The nightly history database (default: `<work-dir>/history.sqlite`).
    #[arg(long, global = true, env = "HARNESS_HISTORY_DB")]
    history_db: Option<PathBuf>,
    /// Print machine-readable JSON instead of tables.
    #[arg(long, global = true)]
    json: bool,
}

impl Global {
    /// The history database's path.
    fn history_path(&self) -> PathBuf {
        history::path(self.history_db.as_deref(), &self.work_dir)
    }
}

/// Which matrix, and which of its profiles.
#[derive(clap::Args, Debug)]
struct MatrixArgs {
    /// The matrix file.
    #[arg(default_value = "matrix.yaml")]
    matrix: PathBuf,
    /// Apply a profile of the matrix (its `profiles:` section).
    #[arg(long, conflicts_with = "quick")]
    profile: Option<String>,
    /// Shorthand for `--profile quick`.
    #[arg(long)]
    quick: bool,
}

impl MatrixArgs {
    /// The absolute matrix path and the profile asked for.
    fn resolve(self) -> Result<(PathBuf, Option<String>)> {
        let path = std::path::absolute(&self.matrix).context("resolve the matrix path")?;
        Ok((path, if self.quick { Some("quick".into()) } else { self.profile }))
    }
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run a matrix: patch, build, boot, measure, tabulate.
    Run {
        #[command(flatten)]
        m: MatrixArgs,
        /// Finish an interrupted run instead of starting one.
        #[arg(long, value_name = "RUN_DIR", conflicts_with = "shard")]
        resume: Option<PathBuf>,
        /// Run only shard K of N of the boot jobs of the run in --run-dir (made
        /// by `harness build`), kernels from the cache; K counts from 0.
        #[arg(long, value_name = "K/N", requires = "run_dir")]
        shard: Option<plan::Shard>,
        /// The shared run directory a shard writes into.
        #[arg(long, value_name = "DIR", requires = "shard")]
        run_dir: Option<PathBuf>,
        #[command(flatten)]
        gating: Gating,
        /// No progress output.
        #[arg(long, short)]
        quiet: bool,
    },
    /// Build every variant into the kernel cache and write the run directory,
    /// without booting (shards then run with `run --shard`).
    Build {
        #[command(flatten)]
        m: MatrixArgs,
        /// The run directory to write (made if missing; opened again if `harness build` made it).
        #[arg(long, value_name = "DIR")]
        run_dir: Option<PathBuf>,
        /// No progress output.
        #[arg(long, short)]
        quiet: bool,
    },
    /// Write (and with --submit, submit) the matrix as a Slurm job chain:
    /// a build job, a job array of shards, a report job.
    Slurm {
        #[command(flatten)]
        m: MatrixArgs,
        /// Shards: tasks of the job array.
        #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=1000))]
        shards: u32,
        /// Slurm partition.
        #[arg(long)]
        partition: Option<String>,
        /// Time limit of each job (`--time`).
        #[arg(long)]
        time: Option<String>,
        /// The run directory (default: a new one under --runs-dir).
        #[arg(long, value_name = "DIR")]
        run_dir: Option<PathBuf>,
        /// Submit the chain with sbatch and print the job ids.
        #[arg(long)]
        submit: bool,
    },
    /// Check a matrix, the host, QEMU and every series without building.
    Check {
        #[command(flatten)]
        m: MatrixArgs,
    },
    /// Measure this host's noise: run base as two identical arms (A/A).
    Calibrate {
        #[command(flatten)]
        m: MatrixArgs,
        /// No progress output.
        #[arg(long, short)]
        quiet: bool,
    },
    /// Compare the same cells of two runs (B against A).
    Compare {
        /// The earlier run.
        run_a: PathBuf,
        /// The later run.
        run_b: PathBuf,
        #[command(flatten)]
        gating: Gating,
    },
    /// List (or with --yes delete) old kernels, tree copies and run images.
    Gc {
        /// Keep this many kernels, tree copies and run images, most recently used first.
        #[arg(long, default_value_t = 3)]
        keep: usize,
        /// Also keep whatever was used within this many days.
        #[arg(long)]
        days: Option<u64>,
        /// Delete; without it gc only says what it would delete.
        #[arg(long)]
        yes: bool,
    },
    /// Nightly trends per cell with change points, from the history database
    /// every finished run is added to; `history import` backfills.
    History {
        #[command(subcommand)]
        action: Option<HistoryAction>,
        /// Only this benchmark.
        #[arg(long)]
        bench: Option<String>,
        /// Only this vCPU count.
        #[arg(long)]
        vcpus: Option<u32>,
        /// Only this variant.
        #[arg(long)]
        variant: Option<String>,
        /// Only the last N nights of each series.
        #[arg(long)]
        last: Option<usize>,
        /// Also write the trends as an HTML page.
        #[arg(long, value_name = "FILE")]
        html: Option<PathBuf>,
    },
    /// Does a series regress anything? Base against base + the series.
    Try {
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
        /// The matrix profile (`none` for none).
        #[arg(long, default_value = "premerge")]
        profile: String,
        /// vCPU counts, instead of the profile's.
        #[arg(long, value_delimiter = ',')]
        vcpus: Vec<u32>,
        /// Only these benchmarks.
        #[arg(long, value_delimiter = ',')]
        bench: Vec<String>,
        /// The guest clock: wall or icount.
        #[arg(long, value_parser = crate::trial::parse_clock)]
        clock: Option<config::Clock>,
        /// Boots per variant and vCPU count.
        #[arg(long)]
        boots: Option<u32>,
        /// The effect floor (a fraction: 0.005 is 0.5%).
        #[arg(long)]
        floor: Option<f64>,
        #[command(flatten)]
        gating: Gating,
        /// No progress output.
        #[arg(long, short)]
        quiet: bool,
    },
    /// Which commit did it? A performance bisection between a good and a bad commit.
    Bisect {
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
        #[arg(long, value_parser = crate::trial::parse_clock)]
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
    },
    /// Tabulate a finished or interrupted run again and write report files.
    Report {
        /// The run directory.
        run_dir: PathBuf,
        #[command(flatten)]
        gating: Gating,
    },
}

#[derive(Subcommand, Debug)]
enum HistoryAction {
    /// Add run directories to the history (runs already there with the same records are left alone).
    Import {
        /// Run directories.
        #[arg(required = true)]
        run_dirs: Vec<PathBuf>,
    },
}

/// Entry point used by the binary.
pub fn main() -> ExitCode {
    // first, while the process has one thread: the watchdog is a fork
    if let Err(e) = crate::proc::start_watchdog() {
        crate::ui::notice(&format!("children may outlive a killed harness: failed to {e:#}"));
    }
    let cli = Cli::parse();
    match dispatch(cli) {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            if e.downcast_ref::<crate::proc::Interrupted>().is_some() || crate::proc::interrupted() {
                eprintln!("interrupted: results so far are saved; finish with `harness run --resume <run dir>`");
                return ExitCode::from(EXIT_INTERRUPTED);
            }
            let chain: Vec<String> = e.chain().map(|c| c.to_string()).collect();
            eprintln!("error: failed to {}", chain.join(": "));
            ExitCode::from(EXIT_ERROR)
        }
    }
}

/// Where a run of the matrix at `matrix` works, stores and finds its benchmarks.
/// The benchmark sources are `--images-dir`, `images/` beside the matrix,
/// or the copy embedded in the binary ([`crate::builtin`]).
fn run_options(g: &Global, matrix: &Path, quiet: bool) -> Result<pipeline::Options> {
    Ok(pipeline::Options {
        work_dir: g.work_dir.clone(),
        runs_dir: g.runs_dir.clone(),
        images_dir: crate::builtin::images_dir(g.images_dir.as_deref(), matrix, &g.work_dir)?,
        quiet,
    })
}

fn dispatch(mut cli: Cli) -> Result<u8> {
    // children run in other directories (make -C): every path is made absolute once, here
    cli.global.work_dir = std::path::absolute(&cli.global.work_dir).context("resolve --work-dir")?;
    cli.global.runs_dir = std::path::absolute(&cli.global.runs_dir).context("resolve --runs-dir")?;
    match cli.cmd {
        Command::Run { shard: Some(shard), run_dir: Some(dir), quiet, .. } => run_shard(&cli.global, &dir, shard, quiet),
        Command::Run { m, resume, gating, quiet, .. } => {
            let (matrix, profile) = m.resolve()?;
            crate::proc::install_signal_handler()?;
            let run_dir = match resume {
                Some(dir) => {
                    let meta = store::Run::open(&dir)?.meta()?;
                    let opts = run_options(&cli.global, &meta.matrix.path, quiet)?;
                    eprintln!("resuming {}", dir.display());
                    pipeline::resume(&dir, &opts)?
                }
                None => {
                    let m = config::load(&matrix, profile.as_deref()).context("load the matrix")?;
                    let opts = run_options(&cli.global, &matrix, quiet)?;
                    pipeline::start(m, &opts)?
                }
            };
            add_to_history(&cli.global, &run_dir);
            finish_report(&run_dir, &cli.global, gating)
        }
        Command::Build { m, run_dir, quiet } => build(&cli.global, m, run_dir, quiet),
        Command::Slurm { m, shards, partition, time, run_dir, submit } => {
            write_slurm(&cli.global, m, SlurmArgs { shards, partition, time, run_dir, submit })
        }
        Command::Check { m } => {
            let (matrix, profile) = m.resolve()?;
            let m = config::load(&matrix, profile.as_deref()).context("load the matrix")?;
            let mut items = check::run(&m, &cli.global.work_dir);
            items.extend(check::disk(&cli.global.work_dir, &cli.global.runs_dir));
            let errors = items.iter().filter(|i| i.level == check::Level::Error).count();
            if cli.global.json {
                println!("{}", serde_json::to_string_pretty(&items)?);
            } else {
                for i in &items {
                    let tag = match i.level {
                        check::Level::Ok => "ok   ",
                        check::Level::Warn => "warn ",
                        check::Level::Error => "ERROR",
                    };
                    println!("{tag} {}: {}", i.what, i.message);
                }
                println!("{errors} error(s)");
            }
            Ok(if errors > 0 { EXIT_ERROR } else { EXIT_OK })
        }
        Command::Gc { keep, days, yes } => run_gc(&cli.global, gc::Policy { keep, days }, yes),
        Command::Report { run_dir, gating } => finish_report(&run_dir, &cli.global, gating),
        Command::History { action: Some(HistoryAction::Import { run_dirs }), .. } => history_import(&cli.global, &run_dirs),
        Command::History { action: None, bench, vcpus, variant, last, html } => {
            show_history(&cli.global, &history::Filter { bench, vcpus, variant, last }, html.as_deref())
        }
        Command::Calibrate { m, quiet } => calibrate(m, &cli.global, quiet),
        Command::Bisect { git, good, bad, bench, vcpus, metric, clock, matrix, profile, end_boots, batch, max_boots, alpha, resume, quiet } => {
            crate::proc::install_signal_handler()?;
            let dir = match resume {
                Some(d) => d,
                None => {
                    let trial = crate::trial::Request { matrix, profile, vcpus: vcpus.into_iter().collect(), bench: bench.into_iter().collect(), clock, ..Default::default() };
                    let rule = crate::bisect::Rule { end_boots, batch, max_boots, alpha };
                    let req = crate::bisect::Request { git: git.unwrap_or_default(), good: good.unwrap_or_default(), bad: bad.unwrap_or_default(), trial, metric, rule };
                    crate::bisect::start(&req, &cli.global.runs_dir, &cli.global.work_dir)?
                }
            };
            run_bisect(&dir, &cli.global, quiet)
        }
        Command::Try { series, git, range, matrix, profile, vcpus, bench, clock, boots, floor, gating, quiet } => {
            let req = crate::trial::Request { series, git, range, matrix, profile, vcpus, bench, clock, boots, floor };
            try_series(&req, &cli.global, quiet, gating)
        }
        Command::Compare { run_a, run_b, gating } => compare(&run_a, &run_b, &cli.global, gating),
    }
}

/// `harness run --shard K/N --run-dir DIR`: the shard's boot jobs; the
/// report is the report job's (`harness report DIR`).
fn run_shard(g: &Global, dir: &Path, shard: plan::Shard, quiet: bool) -> Result<u8> {
    crate::proc::install_signal_handler()?;
    let dir = std::path::absolute(dir).context("resolve --run-dir")?;
    let meta = store::Run::open(&dir)?.meta()?;
    pipeline::shard(&dir, shard, &run_options(g, &meta.matrix.path, quiet)?)?;
    println!("shard {shard} of {} done; the merged report: harness report {}", dir.display(), dir.display());
    Ok(EXIT_OK)
}

/// `harness build`: every variant into the kernel cache, the run directory written.
fn build(g: &Global, m: MatrixArgs, run_dir: Option<PathBuf>, quiet: bool) -> Result<u8> {
    crate::proc::install_signal_handler()?;
    let (matrix, profile) = m.resolve()?;
    let m = config::load(&matrix, profile.as_deref()).context("load the matrix")?;
    let at = run_dir.map(std::path::absolute).transpose().context("resolve --run-dir")?;
    let (dir, built) = pipeline::build(m, &run_options(g, &matrix, quiet)?, at.as_deref())?;
    for (variant, r) in &built {
        match r {
            Ok(key) => println!("{variant}: kernel {key}"),
            Err(e) => println!("{variant}: FAILED: {e}"),
        }
    }
    println!("run directory: {}", dir.display());
    Ok(EXIT_OK)
}

/// The Slurm options of `harness slurm`.
struct SlurmArgs {
    shards: u32,
    partition: Option<String>,
    time: Option<String>,
    run_dir: Option<PathBuf>,
    submit: bool,
}

/// `harness slurm`: writes the job chain's scripts, and with `--submit` submits them.
fn write_slurm(g: &Global, m: MatrixArgs, a: SlurmArgs) -> Result<u8> {
    let (matrix, profile) = m.resolve()?;
    let mx = config::load(&matrix, profile.as_deref()).context("load the matrix")?;
    let run_dir = match a.run_dir {
        Some(d) => std::path::absolute(d).context("resolve --run-dir")?,
        None => store::fresh_run_dir(&g.runs_dir, &pipeline::run_label(&mx))?,
    };
    let blocks = plan::block_count(&mx);
    if a.shards as usize > blocks {
        crate::ui::notice(&format!("{} shards for {blocks} blocks of boot jobs (one boot of every variant at one vCPU count): {} shard(s) will have nothing to do", a.shards, a.shards as usize - blocks));
    }
    let (cpus, mem_mib) = slurm::resources(&mx);
    let job = slurm::Job {
        harness: std::env::current_exe().context("find the harness binary")?,
        matrix,
        profile,
        work_dir: g.work_dir.clone(),
        runs_dir: g.runs_dir.clone(),
        images_dir: g.images_dir.as_ref().map(std::path::absolute).transpose().context("resolve --images-dir")?,
        run_dir,
        shards: a.shards,
        partition: a.partition,
        time: a.time,
        cpus,
        mem_mib,
    };
    let dir = slurm::write(&job)?;
    println!("slurm scripts: {} (submit with {}/submit.sh)", dir.display(), dir.display());
    if a.submit {
        let ids = slurm::submit(&dir)?;
        println!("submitted: build {}, shards {} (array 0-{}), report {}", ids.build, ids.shards, a.shards - 1, ids.report);
        println!("run directory: {}", job.run_dir.display());
    }
    Ok(EXIT_OK)
}

/// `harness try`: refuses a series that does not apply before building
/// anything, runs base against base + series, says plainly what failed, and
/// prints the verdict table.
fn try_series(req: &crate::trial::Request, g: &Global, quiet: bool, gating: Gating) -> Result<u8> {
    crate::proc::install_signal_handler()?;
    let m = crate::trial::matrix(req, &g.work_dir)?;
    let scratch = g.work_dir.join(format!("try-preflight-{}", std::process::id()));
    if let Some(why) = crate::trial::preflight(&m, &scratch)? {
        eprintln!("try: {why}");
        return Ok(EXIT_ERROR);
    }
    let opts = run_options(g, &m.path, quiet)?;
    let dir = pipeline::start(m, &opts)?;
    let failures = crate::trial::failures(&store::Run::open(&dir)?)?;
    for f in &failures {
        eprintln!("try: {f}");
    }
    let code = finish_report(&dir, g, gating)?;
    Ok(if failures.iter().any(crate::trial::Failure::unmade) { EXIT_ERROR } else { code })
}

/// `harness bisect`: runs or resumes the bisection in `dir`; prints each
/// step and the first bad commit (exit 0), or why it stopped (exit 1).
fn run_bisect(dir: &Path, g: &Global, quiet: bool) -> Result<u8> {
    eprintln!("bisect: {} (resume with `harness bisect --resume {}`)", dir.display(), dir.display());
    let (m, matrix) = crate::bisect::tree_of(dir)?;
    let opts = run_options(g, &matrix, quiet)?;
    let say = |s: &str| println!("{s}");
    match crate::bisect::run(dir, &opts, &say)? {
        crate::bisect::Outcome::FirstBad(c) => {
            println!("first bad commit: {}", crate::bisect::describe(&m, &c));
            Ok(EXIT_OK)
        }
        crate::bisect::Outcome::Undecided(why) => {
            println!("undecided: {why}");
            Ok(EXIT_REGRESSED)
        }
    }
}

/// `--gate` and `--strict`, shared by every command that reports.
#[derive(clap::Args, Clone, Copy, Debug)]
struct Gating {
    /// Exit 1 when a key metric regressed (pre-merge gate).
    #[arg(long)]
    gate: bool,
    /// With --gate, also exit 1 on its warnings (unsure, fails more without significance).
    #[arg(long, requires = "gate")]
    strict: bool,
}

impl Gating {
    /// Prints the gate's findings and gives the exit code.
    fn apply(self, g: &report::Gate) -> u8 {
        if !self.gate {
            return EXIT_OK;
        }
        for f in &g.failures {
            eprintln!("gate: fails: {f}");
        }
        let tag = if self.strict { "fails (--strict)" } else { "warning (fatal with --strict)" };
        for w in &g.warnings {
            eprintln!("gate: {tag}: {w}");
        }
        if g.fails(self.strict) {
            EXIT_REGRESSED
        } else {
            EXIT_OK
        }
    }
}

/// `harness gc`: prints what the policy lets go; with `yes`, deletes it
/// under the work-directory lock.
fn run_gc(g: &Global, policy: gc::Policy, yes: bool) -> Result<u8> {
    let _lock = if yes { Some(crate::workdir::WorkLock::acquire(&g.work_dir, "gc")?) } else { None };
    let victims = gc::plan(&g.work_dir, &g.runs_dir, policy, std::time::SystemTime::now());
    let total: u64 = victims.iter().map(|v| v.bytes).sum();
    if g.json {
        println!("{}", serde_json::to_string_pretty(&victims)?);
    } else {
        let verb = if yes { "delete" } else { "would delete" };
        for v in &victims {
            println!("{verb} {} ({}): {}", v.path.display(), gc::human(v.bytes), v.why);
        }
        let tail = if yes || victims.is_empty() { "" } else { "; pass --yes to delete" };
        println!("{} in {} item(s){tail}", gc::human(total), victims.len());
    }
    if yes {
        gc::delete(&victims)?;
    }
    Ok(EXIT_OK)
}

/// A run's report with the floors of the stored calibration that fits it.
fn build_report(run: &store::Run, work_dir: &Path) -> Result<report::Report> {
    let floors = crate::calibrate::floors_for_run(work_dir, &run.meta()?, &run.events()?);
    report::build(run, &floors)
}

fn calibrate(m: MatrixArgs, g: &Global, quiet: bool) -> Result<u8> {
    crate::proc::install_signal_handler()?;
    let (matrix, profile) = m.resolve()?;
    let m = config::load(&matrix, profile.as_deref()).context("load the matrix")?;
    let opts = run_options(g, &matrix, quiet)?;
    let mut aa = crate::calibrate::aa_matrix(&m);
    aa.profile = Some(format!("calibrate{}", m.profile.as_ref().map(|p| format!("-{p}")).unwrap_or_default()));
    let dir = pipeline::start(aa, &opts)?;
    let run = store::Run::open(&dir)?;
    let (meta, events) = (run.meta()?, run.events()?);
    let r = report::build_from(&meta, &run.samples()?, &events, &report::Floors::none("none (this is the A/A run)"));
    let cal = crate::calibrate::compute(&r, &meta, &events, m.profile.clone());
    crate::calibrate::save(&g.work_dir, &cal)?;
    if g.json {
        println!("{}", serde_json::to_string_pretty(&cal)?);
        return Ok(EXIT_OK);
    }
    print!("{}", report::table(&r));
    for f in &cal.floors {
        let used = crate::stats::effect_floor(Some(f.floor)).max(m.statistics.floor);
        println!(
            "floor {}.{} at {} vCPUs ({}): {:.2}% from {}+{} boots (seen {:.2}%, boot spread {:.2}%); reports use {:.2}%",
            f.benchmark, f.metric, f.vcpus, f.clock, f.floor * 100.0, f.boots.0, f.boots.1, f.observed * 100.0, f.spread * 100.0, used * 100.0
        );
    }
    println!(
        "A/A cells called regressed or improved: {} of {} ({:.1}%)",
        (cal.false_positive_rate * cal.cells as f64).round(),
        cal.cells,
        cal.false_positive_rate * 100.0
    );
    println!("stored in {} for runs of this matrix and profile on this host", crate::calibrate::path(&g.work_dir).display());
    Ok(EXIT_OK)
}

fn compare(run_a: &Path, run_b: &Path, g: &Global, gating: Gating) -> Result<u8> {
    let (ra, rb) = (store::Run::open(run_a)?, store::Run::open(run_b)?);
    let (a, b) = (build_report(&ra, &g.work_dir)?, build_report(&rb, &g.work_dir)?);
    report::compare::same_clock(&a, &b)?;
    let rows = report::compare::compare(&a, &b, &b.rule);
    if g.json {
        println!("{}", serde_json::to_string_pretty(&rows)?);
    } else {
        print!("{}", report::compare::table(&a.run_id, &b.run_id, &rows));
        println!("floors: A {}; B {}", a.floor_source, b.floor_source);
    }
    let key = rb.meta()?.matrix.key_metrics;
    Ok(gating.apply(&report::gate(rows.iter().map(|r| r.gate_item()), &key)))
}

/// Adds a finished run to the history; a failure is a notice, never a failed run.
fn add_to_history(g: &Global, run_dir: &Path) {
    let path = g.history_path();
    let added = history::open(&path).and_then(|mut db| history::add(&mut db, run_dir, &g.work_dir, history::Sources::Live));
    match added {
        Ok(a) => eprintln!("history: {} {} ({a:?})", path.display(), run_dir.display()),
        Err(e) => crate::ui::notice(&format!("the run is not in the history: failed to {e:#}")),
    }
}

/// `harness history import`: adds each run directory.
fn history_import(g: &Global, run_dirs: &[PathBuf]) -> Result<u8> {
    let path = g.history_path();
    let mut db = history::open(&path)?;
    for dir in run_dirs {
        let a = history::add(&mut db, dir, &g.work_dir, history::Sources::Records).with_context(|| format!("add {} to the history", dir.display()))?;
        println!("{}: {}", dir.display(), format!("{a:?}").to_lowercase());
    }
    println!("history: {}", path.display());
    Ok(EXIT_OK)
}

/// `harness history`: every matching series with its change points, as a
/// table (or JSON) and, with `--html`, a page.
fn show_history(g: &Global, f: &history::Filter, html: Option<&Path>) -> Result<u8> {
    let path = g.history_path();
    let Some(db) = history::open_existing(&path)? else {
        anyhow::bail!("read the history {}: it does not exist yet (a finished `harness run` or `harness history import RUN_DIR...` makes it)", path.display());
    };
    let p = crate::stats::changepoint::Params::default();
    let series = history::series(&db, f, &p)?;
    if g.json {
        println!("{}", serde_json::to_string_pretty(&series)?);
    } else {
        print!("{}", report::trend::table(&history::trends(&series, None)));
        println!("{} series; {}", series.len(), history::method_text(&p));
    }
    if let Some(file) = html {
        let file = std::path::absolute(file).context("resolve --html")?;
        let page = report::trend::render(&history::trends(&series, file.parent()), &history::method_text(&p))?;
        std::fs::write(&file, page).with_context(|| format!("write {}", file.display()))?;
        eprintln!("trends: {}", file.display());
    }
    Ok(EXIT_OK)
}

/// Writes each key cell's standing against the history (when one exists)
/// into the report; a failure is a note, never a failed report.
fn annotate_history(r: &mut report::Report, g: &Global, run: &store::Run) {
    let done = history::open_existing(&g.history_path()).and_then(|db| match db {
        Some(db) => history::annotate(r, &db, &run.meta()?, &run.events()?),
        None => Ok(()),
    });
    if let Err(e) = done {
        r.notes.push(format!("history not consulted: failed to {e:#}"));
    }
}

/// Builds the report of a run, writes report.json/report.csv/report.html
/// into it, prints it, and applies the gate.
fn finish_report(run_dir: &Path, g: &Global, gating: Gating) -> Result<u8> {
    let (work_dir, json) = (&g.work_dir, g.json);
    let run = store::Run::open(run_dir)?;
    let meta = run.meta()?;
    let mut r = build_report(&run, work_dir)?;
    annotate_history(&mut r, g, &run);
    for (name, data) in [
        ("report.json", serde_json::to_vec_pretty(&r)?),
        ("report.csv", report::csv(&r).into_bytes()),
        ("report.html", report::html::render(&r)?.into_bytes()),
    ] {
        let p = run.dir.join(name);
        std::fs::write(&p, data).with_context(|| format!("write {}", p.display()))?;
    }
    if json {
        println!("{}", serde_json::to_string_pretty(&r)?);
    } else {
        print!("{}", report::table(&r));
        println!("report files: {}/report.{{json,csv,html}}", run.dir.display());
    }
    Ok(gating.apply(&report::report_gate(&r, &meta.matrix.key_metrics)))
}
