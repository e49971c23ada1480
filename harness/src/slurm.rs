//! `harness slurm`: a matrix as a Slurm job chain. One build job fills the
//! kernel cache and writes the run directory's `run.json`; a job array runs
//! after it (`afterok`), one task per shard (`run --shard K/N`); a report job
//! runs after every task ended (`afterany`, so a failed shard is reported as
//! failed cells). The scripts are plain sbatch files in `<run>/slurm/`, meant
//! to be read and edited; `submit.sh` chains them by hand, and `--submit`
//! submits the same chain through [`crate::proc`]. Nothing else is run here.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

use crate::config::Matrix;
use crate::proc::Cmd;

/// What the scripts run and ask Slurm for.
#[derive(Debug, Clone)]
pub struct Job {
    /// The harness binary.
    pub harness: PathBuf,
    /// The matrix file.
    pub matrix: PathBuf,
    /// Its profile.
    pub profile: Option<String>,
    /// Work directory (the shared kernel cache).
    pub work_dir: PathBuf,
    /// Runs directory.
    pub runs_dir: PathBuf,
    /// Benchmark sources, if not beside the matrix.
    pub images_dir: Option<PathBuf>,
    /// The run directory every job writes into.
    pub run_dir: PathBuf,
    /// Shards (array tasks).
    pub shards: u32,
    /// Slurm partition, if not the default.
    pub partition: Option<String>,
    /// Time limit per job (`--time`), if not the partition's.
    pub time: Option<String>,
    /// CPUs per shard task: the largest guest's vCPUs.
    pub cpus: u32,
    /// Memory per shard task in MiB.
    pub mem_mib: u64,
}

/// What the largest guest of `m` needs: its vCPUs as cores, and the host
/// memory `check` estimates for it ([`crate::host::guest_need_mib`]).
pub fn resources(m: &Matrix) -> (u32, u64) {
    let vcpus = m.vcpus.iter().copied().max().unwrap_or(1);
    (vcpus, crate::host::guest_need_mib(m.guest.memory_mib, vcpus))
}

/// What the build job asks for: `cpus` cores, as many `make -j` jobs, each
/// with [`crate::kernel::build::MIB_PER_BUILD_JOB`] of memory.
fn build_mem_mib(cpus: u32) -> u64 {
    u64::from(cpus) * crate::kernel::build::MIB_PER_BUILD_JOB
}

/// A word for a shell script: single-quoted, quotes escaped.
fn sh(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

fn path_sh(p: &Path) -> String {
    sh(&p.to_string_lossy())
}

/// `#SBATCH` lines are not shell: a path or name in them must not need quoting.
fn plain(what: &str, s: &str) -> Result<()> {
    if s.is_empty()
        || s.chars()
            .any(|c| c.is_whitespace() || c.is_control() || "'\"\\$`#;&|<>".contains(c))
    {
        bail!("write the Slurm scripts: {what} `{s}` has characters an #SBATCH line cannot hold");
    }
    Ok(())
}

fn header(j: &Job, name: &str, what: &str, cpus: u32, mem_mib: u64) -> String {
    let out = j
        .run_dir
        .join("slurm")
        .join(format!("{name}-%A{}.out", if name == "shard" { "_%a" } else { "" }));
    let mut s = format!(
        "#!/bin/bash\n# {what}\n# Written by `harness slurm`; edit freely. Every path must be the same on every node (a shared filesystem).\n\
         #SBATCH --job-name=harness-{name}\n#SBATCH --cpus-per-task={cpus}\n#SBATCH --mem={mem_mib}M\n#SBATCH --output={}\n",
        out.display()
    );
    if let Some(p) = &j.partition {
        s.push_str(&format!("#SBATCH --partition={p}\n"));
    }
    if let Some(t) = &j.time {
        s.push_str(&format!("#SBATCH --time={t}\n"));
    }
    s
}

/// The shell lines every script shares: the paths, and the harness with its global options.
fn common(j: &Job) -> String {
    let images = j
        .images_dir
        .as_ref()
        .map(|i| format!(" --images-dir {}", path_sh(i)))
        .unwrap_or_default();
    format!(
        "set -euo pipefail\nHARNESS={}\nRUN_DIR={}\nharness() {{\n    \"$HARNESS\" --work-dir {} --runs-dir {}{images} \"$@\"\n}}\n",
        path_sh(&j.harness),
        path_sh(&j.run_dir),
        path_sh(&j.work_dir),
        path_sh(&j.runs_dir)
    )
}

/// The scripts, by file name: `build.sbatch`, `shards.sbatch`,
/// `report.sbatch` and `submit.sh`.
pub fn scripts(j: &Job) -> Result<Vec<(&'static str, String)>> {
    plain("the run directory", &j.run_dir.to_string_lossy())?;
    for (what, v) in [("the partition", &j.partition), ("the time limit", &j.time)] {
        if let Some(v) = v {
            plain(what, v)?;
        }
    }
    let profile = j
        .profile
        .as_deref()
        .map(|p| format!(" --profile {}", sh(p)))
        .unwrap_or_default();
    let build = format!(
        "{}{}harness build {}{profile} --run-dir \"$RUN_DIR\" --quiet\n",
        header(
            j,
            "build",
            "Builds every kernel of the matrix once into the shared kernel cache and writes the run directory.",
            j.cpus,
            build_mem_mib(j.cpus)
        ),
        common(j),
        path_sh(&j.matrix)
    );
    let shards = format!(
        "{}#SBATCH --array=0-{}\n#SBATCH --kill-on-invalid-dep=yes\n{}harness run --shard \"$SLURM_ARRAY_TASK_ID/{}\" --run-dir \"$RUN_DIR\" --quiet\n",
        header(j, "shard", "One shard of the boot jobs per array task, kernels from the cache; asks for what the largest guest needs.", j.cpus, j.mem_mib),
        j.shards - 1,
        common(j),
        j.shards
    );
    let report = format!(
        "{}#SBATCH --kill-on-invalid-dep=yes\n{}harness report \"$RUN_DIR\"\n",
        header(
            j,
            "report",
            "Merges the shards' records and writes report.json, report.csv and report.html into the run directory.",
            1,
            1024
        ),
        common(j)
    );
    let submit = "#!/bin/bash\n# Submits the chain: the build; the shards once it succeeded; the report once every shard ended,\n\
                  # whatever its outcome (a failed shard shows as failed cells). Written by `harness slurm`.\n\
                  set -euo pipefail\ncd \"$(dirname \"$0\")\"\n\
                  build=$(sbatch --parsable build.sbatch); build=${build%%;*}\n\
                  shards=$(sbatch --parsable --dependency=afterok:\"$build\" shards.sbatch); shards=${shards%%;*}\n\
                  report=$(sbatch --parsable --dependency=afterany:\"$shards\" report.sbatch); report=${report%%;*}\n\
                  echo \"build $build, shards $shards, report $report\"\n"
        .to_string();
    Ok(vec![
        ("build.sbatch", build),
        ("shards.sbatch", shards),
        ("report.sbatch", report),
        ("submit.sh", submit),
    ])
}

/// Writes the scripts into `<run>/slurm/` and gives that directory.
pub fn write(j: &Job) -> Result<PathBuf> {
    let dir = j.run_dir.join("slurm");
    std::fs::create_dir_all(&dir).with_context(|| format!("create {}", dir.display()))?;
    for (name, text) in scripts(j)? {
        let p = dir.join(name);
        std::fs::write(&p, text).with_context(|| format!("write {}", p.display()))?;
        if name == "submit.sh" {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755))
                .with_context(|| format!("make {} executable", p.display()))?;
        }
    }
    Ok(dir)
}

/// Slurm job ids of a submitted chain.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Submitted {
    /// The build job.
    pub build: String,
    /// The shard array.
    pub shards: String,
    /// The report job.
    pub report: String,
}

/// Submits the scripts in `dir` as `submit.sh` would.
pub fn submit(dir: &Path) -> Result<Submitted> {
    let build = sbatch(dir, "build.sbatch", None)?;
    let shards = sbatch(dir, "shards.sbatch", Some(format!("--dependency=afterok:{build}")))?;
    let report = sbatch(dir, "report.sbatch", Some(format!("--dependency=afterany:{shards}")))?;
    Ok(Submitted { build, shards, report })
}

fn sbatch(dir: &Path, script: &str, dependency: Option<String>) -> Result<String> {
    let mut cmd = Cmd::new("sbatch").arg("--parsable");
    if let Some(d) = dependency {
        cmd = cmd.arg(d);
    }
    let f = cmd
        .arg(dir.join(script))
        .dir(dir)
        .capture()
        .deadline(std::time::Duration::from_secs(120))
        .run_ok()
        .with_context(|| format!("submit {script}"))?;
    job_id(&f.output).with_context(|| format!("read the job id of {script} from sbatch's output: {}", f.output.trim()))
}

/// The job id in `sbatch --parsable` output (`id` or `id;cluster`, after any warnings).
fn job_id(output: &str) -> Option<String> {
    output
        .lines()
        .rev()
        .map(|l| l.trim().split(';').next().unwrap_or(""))
        .find(|id| !id.is_empty() && id.chars().all(|c| c.is_ascii_digit()))
        .map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job() -> Job {
        Job {
            harness: "/opt/h/harness".into(),
            matrix: "/srv/m it's.yaml".into(),
            profile: Some("quick".into()),
            work_dir: "/shared/work".into(),
            runs_dir: "/shared/runs".into(),
            images_dir: None,
            run_dir: "/shared/runs/20261201-quick".into(),
            shards: 3,
            partition: Some("big".into()),
            time: None,
            cpus: 26,
            mem_mib: 9320,
        }
    }

    #[test]
    fn scripts_chain_build_shards_and_report() {
        let s: std::collections::BTreeMap<_, _> = scripts(&job()).unwrap().into_iter().collect();
        let shards = &s["shards.sbatch"];
        for line in [
            "#SBATCH --array=0-2\n",
            "#SBATCH --cpus-per-task=26\n",
            "#SBATCH --mem=9320M\n",
            "#SBATCH --partition=big\n",
            "--output=/shared/runs/20261201-quick/slurm/shard-%A_%a.out\n",
        ] {
            assert!(shards.contains(line), "{line:?} not in\n{shards}");
        }
        assert!(
            shards.contains("harness run --shard \"$SLURM_ARRAY_TASK_ID/3\" --run-dir \"$RUN_DIR\""),
            "{shards}"
        );
        assert!(
            shards.contains("--work-dir '/shared/work' --runs-dir '/shared/runs'"),
            "{shards}"
        );
        assert!(
            s["build.sbatch"].contains("harness build '/srv/m it'\\''s.yaml' --profile 'quick' --run-dir \"$RUN_DIR\""),
            "{}",
            s["build.sbatch"]
        );
        assert!(s["report.sbatch"].contains("harness report \"$RUN_DIR\""));
        let submit = &s["submit.sh"];
        assert!(
            submit.contains("--dependency=afterok:\"$build\" shards.sbatch")
                && submit.contains("--dependency=afterany:\"$shards\" report.sbatch"),
            "{submit}"
        );
        assert!(!s["build.sbatch"].contains("--array"));
    }

    /// The build job asks for 1.5 GiB per `make -j` job: its CPUs, which
    /// `make -j` takes inside the job.
    #[test]
    fn the_build_job_asks_for_memory_by_its_make_jobs() {
        let s: std::collections::BTreeMap<_, _> = scripts(&job()).unwrap().into_iter().collect();
        let b = &s["build.sbatch"];
        assert!(
            b.contains("#SBATCH --cpus-per-task=26\n") && b.contains(&format!("#SBATCH --mem={}M\n", 26 * 1536)),
            "{b}"
        );
        assert_eq!(crate::kernel::build::build_jobs(26, Some(26 * 1536)), 26);
    }

    #[test]
    fn unquotable_sbatch_values_are_refused() {
        let mut j = job();
        j.run_dir = "/shared/my runs/x".into();
        let e = format!("{:#}", scripts(&j).unwrap_err());
        assert!(
            e.contains("the run directory `/shared/my runs/x` has characters an #SBATCH line cannot hold"),
            "{e}"
        );
        let mut j = job();
        j.partition = Some("a\n#SBATCH --x".into());
        assert!(scripts(&j).is_err());
    }

    #[test]
    fn job_ids_are_read_from_parsable_output() {
        assert_eq!(job_id("42\n").as_deref(), Some("42"));
        assert_eq!(job_id("sbatch: warning: x\n43;cluster\n").as_deref(), Some("43"));
        assert_eq!(job_id("sbatch: error: no\n"), None);
    }

    #[test]
    fn the_largest_guest_sets_the_request() {
        let y = "variants:\n  - name: base\nvcpus: [2, 26]\nguest: {memory_mib: 8192}\nbenchmarks:\n  - {name: s, kind: doexec}\n";
        let m = crate::config::parse(y, Path::new("/nonexistent/m.yaml"), None).unwrap();
        assert_eq!(resources(&m), (26, 8192 + 1024 + 260));
    }
}
