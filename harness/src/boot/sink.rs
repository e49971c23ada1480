//! The run's [`Sink`]: a boot job's events become the records of
//! `events.jsonl` (`boot`, `bench_failed`, `notice`, `boot_end`) and
//! `samples.jsonl`, each written as it arrives, and the progress display's
//! stages and notices. The record schema is the run directory's, unchanged.

use anyhow::{Context, Result};

use super::events::{BootEvent, BootStart, Sink, Told};
use crate::plan::BootJob;
use crate::records::{BootEnv, Event, Failed, Sample};
use crate::store::Run;
use crate::ui::Ui;
use crate::vm::Finding;

/// Writes a boot job's events into its run and shows them.
pub struct RunSink<'a> {
    run: &'a Run,
    ui: &'a Ui,
    /// The current attempt.
    start: Option<BootStart>,
    ready_s: Option<f64>,
}

impl<'a> RunSink<'a> {
    /// A sink into `run`, showing progress on `ui`.
    pub fn new(run: &'a Run, ui: &'a Ui) -> RunSink<'a> {
        RunSink {
            run,
            ui,
            start: None,
            ready_s: None,
        }
    }

    fn start(&self) -> Result<&BootStart> {
        self.start.as_ref().context("a boot event came before its start")
    }

    /// The `boot` record of the current attempt.
    fn boot(
        &self,
        j: &BootJob,
        env: Option<BootEnv>,
        error: Option<(String, Failed)>,
        findings: Vec<Finding>,
        wall_per_guest_s: Option<f64>,
        retried: bool,
    ) -> Result<Event> {
        let s = self.start()?;
        let (error, failed) = error.unzip();
        Ok(Event::Boot {
            variant: j.variant.clone(),
            vcpus: j.vcpus,
            boot: j.boot,
            boot_id: s.boot_id.clone(),
            accel: s.accel,
            clock: Some(s.clock),
            wall_per_guest_s,
            // a boot that never reached SSH records no command line
            cmdline: if failed.is_some() {
                String::new()
            } else {
                s.cmdline.clone()
            },
            image: s.image.clone(),
            overcommit: s.overcommit,
            ready_s: if failed.is_some() { None } else { self.ready_s },
            env,
            error,
            findings,
            retried,
            failed,
        })
    }

    /// A repetition's samples, one per metric, stamped with the time it
    /// was told.
    fn samples(&self, j: &BootJob, at: &str, event: BootEvent) -> Result<()> {
        let BootEvent::RepetitionDone {
            benchmark,
            params,
            repetition,
            warmup,
            metrics,
            cpu,
        } = event
        else {
            anyhow::bail!("not a repetition's samples: {event:?}");
        };
        let s = self.start()?;
        for mt in metrics {
            self.run.sample(&Sample {
                variant: j.variant.clone(),
                vcpus: j.vcpus,
                benchmark: benchmark.clone(),
                params: params.clone(),
                metric: mt.metric,
                unit: mt.unit,
                higher_is_better: mt.higher_is_better,
                boot_id: s.boot_id.clone(),
                boot: j.boot,
                repetition,
                warmup,
                value: mt.value,
                series: mt.series,
                cpu,
                clock: Some(s.clock),
                timestamp: at.to_string(),
            })?;
        }
        Ok(())
    }

    fn cut(
        &self,
        j: &BootJob,
        stage: super::BootStage,
        failed: Failed,
        error: String,
        findings: Vec<Finding>,
        again: bool,
    ) -> Result<()> {
        let id = &self.start()?.boot_id;
        if stage.before_ssh() {
            let msg = if again {
                format!("{id}: {error}; not the kernel's failure, booting again")
            } else {
                format!("{id}: boot failed: {error}")
            };
            self.ui.notice(&msg);
            return self
                .run
                .event(&self.boot(j, None, Some((error, failed)), findings, None, again)?);
        }
        if again {
            // no boot_end: the boot is cut off, its samples are not counted
            self.run.notice(self.ui, format!("{id}: {error}; QEMU's failure, not the kernel's: this boot's samples are not counted and the job boots again"))?;
        }
        Ok(())
    }

    /// The record of a repetition's failure or kernel profile.
    fn repetition_record(&self, j: &BootJob, event: BootEvent) -> Result<Event> {
        let s = self.start()?;
        Ok(match event {
            BootEvent::RepetitionFailed {
                benchmark,
                repetition,
                error,
                cause,
            } => Event::BenchFailed {
                variant: j.variant.clone(),
                vcpus: j.vcpus,
                benchmark,
                boot_id: s.boot_id.clone(),
                repetition,
                error,
                failed: Some(Failed::new(crate::records::Stage::Benchmark, cause)),
            },
            BootEvent::Profile {
                benchmark,
                repetition,
                warmup,
                path,
                ops,
                error,
            } => Event::Profile {
                variant: j.variant.clone(),
                vcpus: j.vcpus,
                boot: j.boot,
                boot_id: s.boot_id.clone(),
                benchmark,
                repetition,
                warmup,
                path: path.to_string_lossy().into_owned(),
                ops,
                error,
            },
            e => anyhow::bail!("not a repetition's record: {e:?}"),
        })
    }

    /// The `boot_end` record of a job that ended or was not booted (said on
    /// the display).
    fn end_record(&self, j: &BootJob, event: BootEvent) -> Result<Event> {
        let (boot_id, findings, error, busy_wall_per_guest_s, failed) = match event {
            BootEvent::Ended {
                findings,
                error,
                busy_wall_per_guest_s,
                failed,
            } => (
                Some(self.start()?.boot_id.clone()),
                findings,
                error,
                busy_wall_per_guest_s,
                failed,
            ),
            BootEvent::NotBooted { error } => {
                self.ui.notice(&format!(
                    "{} at {} vCPUs (boot {}): {error}",
                    j.variant, j.vcpus, j.boot
                ));
                let failed = Failed::new(crate::records::Stage::Boot, crate::records::Cause::NotBooted);
                (None, vec![], Some(error), None, Some(failed))
            }
            e => anyhow::bail!("not a job's end: {e:?}"),
        };
        Ok(Event::BootEnd {
            variant: j.variant.clone(),
            vcpus: j.vcpus,
            boot: j.boot,
            boot_id,
            findings,
            error,
            busy_wall_per_guest_s,
            failed,
        })
    }
}

impl Sink for RunSink<'_> {
    fn emit(&mut self, told: Told) -> Result<()> {
        let Told { job: j, at, event } = told;
        match event {
            BootEvent::Job { .. } => {
                let (variant, vcpus, boot) = (&j.variant, j.vcpus, j.boot);
                self.ui
                    .stage("boot", &format!("{variant} at {vcpus} vCPUs (boot {boot})"));
            }
            BootEvent::Started(s) => (self.start, self.ready_s) = (Some(s), None),
            BootEvent::SshReady { ready_s } => self.ready_s = Some(ready_s),
            BootEvent::Environment {
                env,
                findings,
                wall_per_guest_s,
            } => self
                .run
                .event(&self.boot(j, env, None, findings, wall_per_guest_s, false)?)?,
            BootEvent::Repetition {
                benchmark,
                repetition,
                of,
            } => {
                let (variant, vcpus, boot) = (&j.variant, j.vcpus, j.boot);
                self.ui.stage(
                    "bench",
                    &format!("{variant} {vcpus}cpu b{boot} {benchmark} rep {}/{of}", repetition + 1),
                );
            }
            e @ BootEvent::RepetitionDone { .. } => self.samples(j, &at, e)?,
            e @ (BootEvent::RepetitionFailed { .. } | BootEvent::Profile { .. }) => {
                self.run.event(&self.repetition_record(j, e)?)?
            }
            BootEvent::Cut {
                stage,
                cause,
                error,
                findings,
                again,
            } => self.cut(j, stage, Failed::new(stage.step(), cause), error, findings, again)?,
            BootEvent::PoweredOff { findings } => {
                let id = &self.start()?.boot_id;
                for f in &findings {
                    self.ui.notice(&format!("{id}: console: {} ({})", f.signature, f.line));
                }
            }
            e @ (BootEvent::Ended { .. } | BootEvent::NotBooted { .. }) => self.run.event(&self.end_record(j, e)?)?,
        }
        Ok(())
    }
}
