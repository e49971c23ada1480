//! Stage [`BootStage::Measure`] of a boot: every repetition of every
//! benchmark of the job run over SSH, its output kept in the boot's log
//! directory, parsed into metrics or a typed failure, and told with the
//! profiler window it closed.

use std::time::Duration;

use anyhow::{Context, Result};

use super::{console_flood, icount_bound, interruption, last_line, signal_name, Boot, MeasureCut, Try};
use crate::bench;
use crate::boot::events::{BootEvent, BootStage};
use crate::boot::machine::ConsoleFlood;
use crate::boot::{answer_grace, bounded};
use crate::config::{BenchKind, Benchmark};
use crate::guest::{Output, OverLimit, Timeout};
use crate::proc;
use crate::records::Cause;
use crate::records::MeasureClock;
use crate::vm::Exit;

impl Boot<'_, '_> {
    /// Stage [`BootStage::Measure`]: every repetition of every benchmark of the
    /// job. Returns why the boot was cut short (the guest stopped answering
    /// or QEMU died), if it was.
    pub(super) fn measure(&mut self, t: &mut Try, nproc: u32) -> Result<Option<MeasureCut>> {
        let (m, job) = (self.ctx.m, self.job);
        for bname in &job.benchmarks {
            let Some(b) = m.benchmark(bname) else { continue };
            let of = m.sampling.warmup_repetitions + m.sampling.repetitions;
            for rep in 0..of {
                proc::check_interrupted()?;
                if let Some(why) = console_flood(&*self.machine) {
                    return Ok(Some(MeasureCut {
                        why: format!("{} during {}: {why}", BootStage::Measure.name(), bname),
                        cause: Cause::OutputOverLimit,
                    }));
                }
                self.machine.repin();
                self.tell(BootEvent::Repetition {
                    benchmark: bname.clone(),
                    repetition: rep,
                    of,
                })?;
                if let Err(cut) = self.repetition(t, b, nproc, rep)? {
                    return Ok(Some(MeasureCut {
                        why: format!("{} during {}: {}", BootStage::Measure.name(), bname, cut.why),
                        ..cut
                    }));
                }
            }
        }
        Ok(None)
    }

    /// One repetition: run, parse, tell its metrics or its failure.
    /// `Ok(Err(cut))` means the guest stopped answering or QEMU died (then
    /// no failure is told here: the boot is QEMU's failure, not the
    /// kernel's).
    fn repetition(
        &mut self,
        t: &mut Try,
        b: &Benchmark,
        nproc: u32,
        rep: u32,
    ) -> Result<std::result::Result<(), MeasureCut>> {
        let cmd = bench::command(b, nproc);
        let grace = answer_grace(self.ctx.accel, self.ctx.overcommit(self.job.vcpus));
        let seen = self.learned.seen.repetition_bound(&b.name, self.job.vcpus);
        let wait = bounded(self.ctx.clock(), self.wait(b.timeout_s as f64) + grace, seen);
        let out = match self.machine.run(&cmd, wait) {
            Ok(out) => out,
            Err(e) if e.downcast_ref::<OverLimit>().is_some() => {
                // the guest answers; only this repetition is no measurement
                let failed = BootEvent::RepetitionFailed {
                    benchmark: b.name.clone(),
                    repetition: rep,
                    error: format!("{e:#}"),
                    cause: Cause::OutputOverLimit,
                };
                return self.tell(failed).map(Ok);
            }
            Err(e) if e.downcast_ref::<ConsoleFlood>().is_some() => {
                let why = format!("{e:#}");
                return Ok(Err(MeasureCut {
                    why,
                    cause: Cause::OutputOverLimit,
                }));
            }
            Err(e) => return self.no_answer(b, rep, wait, e).map(Err),
        };
        let log = t.dir.join(format!("bench-{}-r{rep}.log", b.name));
        std::fs::write(
            &log,
            format!(
                "$ {cmd}\n# {}\n{}\n# stderr\n{}",
                proc::exit_words(out.status),
                out.stdout,
                out.stderr
            ),
        )
        .with_context(|| format!("write {}", log.display()))?;
        if let Some(g) = bench::guest_span(&out.stdout) {
            let wall = out.elapsed.as_secs_f64();
            self.learned.pace.observe(wall, g);
            t.pace.observe(wall, g);
        }
        let (event, ops) = self.outcome(b, rep, &out)?;
        self.with_profile(t, &crate::bench::unit_of_work(b), event, ops).map(Ok)
    }

    /// A repetition's output read: its metrics (and the op count the
    /// output gave), or why it failed.
    fn outcome(&mut self, b: &Benchmark, rep: u32, out: &Output) -> Result<(BootEvent, Option<u64>)> {
        let vmalloc = matches!(b.kind, BenchKind::TestVmalloc { .. });
        Ok(match bench::parse(b, &out.stdout, &out.stderr) {
            Ok(p) if out.status == Some(0) || vmalloc => {
                self.learned
                    .seen
                    .repetition(&b.name, self.job.vcpus, out.elapsed.as_secs_f64());
                let done = BootEvent::RepetitionDone {
                    benchmark: b.name.clone(),
                    params: serde_json::to_value(&b.kind)?,
                    repetition: rep,
                    warmup: rep < self.ctx.m.sampling.warmup_repetitions,
                    metrics: p.metrics,
                    cpu: p.cpu,
                };
                (done, p.ops)
            }
            other => {
                let (cause, error) = failure(b, out, other.err());
                let failed = BootEvent::RepetitionFailed {
                    benchmark: b.name.clone(),
                    repetition: rep,
                    error,
                    cause,
                };
                (failed, None)
            }
        })
    }

    /// Tells a repetition's outcome with the profiler window it closed,
    /// if the plugin wrote one: its instructions per op join the
    /// repetition's metrics, and the window is told as a `Profile`. A
    /// failed repetition's window is passed over. `ops`, the op count the
    /// output gave, is written into a window closed without one.
    fn with_profile(&mut self, t: &mut Try, unit: &[&str], mut event: BootEvent, ops: Option<u64>) -> Result<()> {
        let Some(w) = t.windows.as_mut().and_then(|w| w.take(ops, unit)) else {
            return self.tell(event);
        };
        let BootEvent::RepetitionDone {
            benchmark,
            repetition,
            warmup,
            metrics,
            ..
        } = &mut event
        else {
            return self.tell(event);
        };
        let (ops, error) = match w.read {
            Ok((ops, ms)) => {
                metrics.extend(ms);
                (Some(ops), None)
            }
            Err(e) => (None, Some(e)),
        };
        let path = w.path.strip_prefix(&self.ctx.run.dir).unwrap_or(&w.path).to_path_buf();
        let profile = BootEvent::Profile {
            benchmark: benchmark.clone(),
            repetition: *repetition,
            warmup: *warmup,
            path,
            ops,
            error,
        };
        self.tell(event)?;
        self.tell(profile)
    }

    /// A repetition without a result: QEMU died from a signal (a cut, not
    /// the kernel's failure), the guest stopped answering, or SSH failed.
    fn no_answer(&mut self, b: &Benchmark, rep: u32, wait: Duration, e: anyhow::Error) -> Result<MeasureCut> {
        let e = interruption(e)?;
        if let Ok(Exit::Signal(sig)) = self.machine.exit(Duration::from_secs(1)) {
            let qlog = self.machine.log();
            let why = format!(
                "QEMU died from signal {sig} ({}) in repetition {rep}: {}",
                signal_name(sig),
                last_line(&qlog).unwrap_or("no QEMU output")
            );
            return Ok(MeasureCut {
                why,
                cause: Cause::QemuSignal,
            });
        }
        let (cause, why) = if e.downcast_ref::<Timeout>().is_some() && self.ctx.clock() == MeasureClock::TcgIcount {
            (
                Cause::GuestHung,
                format!(
                    "guest stopped answering: no result within {} host seconds ({})",
                    wait.as_secs(),
                    icount_bound()
                ),
            )
        } else if e.downcast_ref::<Timeout>().is_some() {
            (
                Cause::GuestHung,
                format!(
                    "guest stopped answering: no result {} s after the benchmark's timeout",
                    (wait.as_secs()).saturating_sub(b.timeout_s)
                ),
            )
        } else {
            (Cause::Ssh, format!("{e:#}"))
        };
        self.tell(BootEvent::RepetitionFailed {
            benchmark: b.name.clone(),
            repetition: rep,
            error: why.clone(),
            cause,
        })?;
        Ok(MeasureCut { why, cause })
    }
}

/// Why a repetition failed that did produce output.
fn failure(b: &Benchmark, out: &Output, parsed: Option<anyhow::Error>) -> (Cause, String) {
    match (out.status, parsed) {
        (Some(0), Some(e)) if e.downcast_ref::<bench::NoProgress>().is_some() => (Cause::NoProgress, format!("{e:#}")),
        (Some(124) | Some(137), _) => (Cause::BenchTimeout, timed_out(b, out)),
        (status, None) => (
            Cause::BenchError,
            format!("{}: {}", proc::exit_words(status), out.stderr.trim()),
        ),
        (status, Some(e)) => (
            Cause::BenchError,
            format!("{e:#} ({}; {})", proc::exit_words(status), out.stderr.trim()),
        ),
    }
}

/// Output from which a benchmark killed at its timeout is called a flood:
/// the shipped benchmarks print a few hundred bytes a repetition.
const FLOOD_BYTES: usize = 1 << 20;

/// Why a repetition was killed at its timeout; after a flood of output,
/// how much it printed in how many guest seconds and its last line (under
/// icount the guest's clock runs on while the host drains what it
/// printed, so its timeout comes before the output cap).
fn timed_out(b: &Benchmark, out: &Output) -> String {
    let killed = format!("killed at its {} s timeout", b.timeout_s);
    let printed = out.stdout.len() + out.stderr.len();
    if printed < FLOOD_BYTES {
        return killed;
    }
    let last = out
        .stdout
        .lines()
        .chain(out.stderr.lines())
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or_default();
    let last: String = crate::ui::printable(last).chars().take(200).collect();
    format!(
        "{killed} after printing {} in {} guest seconds, a flood of output (docs/benchmarks.md); its last line: {last}",
        crate::util::human(printed as u64),
        b.timeout_s
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 47: a repetition killed at its timeout after a flood of output
    /// (as under icount, where the cap is never reached) says how much it
    /// printed in how many guest seconds and its last line; a quiet one
    /// says only that it was killed.
    #[test]
    fn a_timeout_after_a_flood_of_output_is_named_a_flood() {
        let yaml = "variants: [{name: base}]\nvcpus: [2]\nbenchmarks: [{name: s, kind: doexec, timeout_s: 120}]\n";
        let m = crate::config::parse(yaml, std::path::Path::new("/m.yaml"), None).unwrap();
        let out = |stdout: String| Output {
            stdout,
            stderr: String::new(),
            status: Some(124),
            elapsed: Duration::from_secs(900),
        };
        let flood = format!("{}\nline 99999 \u{1b}[31m\n", "x".repeat(2 << 20));
        let (cause, why) = failure(&m.benchmarks[0], &out(flood), None);
        assert_eq!(cause, Cause::BenchTimeout);
        assert_eq!(
            why,
            "killed at its 120 s timeout after printing 2.0 MiB in 120 guest seconds, a flood of output \
             (docs/benchmarks.md); its last line: line 99999 \\x1b[31m"
        );
        let (_, quiet) = failure(&m.benchmarks[0], &out("ran\n".into()), None);
        assert_eq!(quiet, "killed at its 120 s timeout");
    }
}
