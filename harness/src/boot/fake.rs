//! A scripted [`Machine`] for tests: each start takes the next [`Script`]
//! (reaches SSH, dies from a signal before it, panics, hangs), each
//! benchmark command the next [`Answer`] (sample lines, a hang, QEMU dying
//! mid-measurement, an interruption). It never sleeps and needs no QEMU;
//! it keeps every call it got, deadlines included.

use std::collections::VecDeque;
use std::path::Path;
use std::time::Duration;

use anyhow::{anyhow, Result};

use super::machine::{Abort, Machine};
use crate::guest::{Deadline, Output, Timeout};
use crate::vm::{Exit, VmSpec};

/// What a scripted guest does until SSH.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Until {
    /// Its sshd lets the key in after this many wall seconds.
    Ssh(f64),
    /// QEMU ends so before SSH comes up.
    Dies(Exit),
    /// No login until the host deadline passes.
    Hangs,
}

/// What a scripted guest answers to one benchmark command.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    /// This output, exit status 0, after `wall_s` wall seconds.
    Says {
        /// Standard output.
        stdout: String,
        /// Wall seconds it took.
        wall_s: f64,
    },
    /// No result within the wait.
    Hangs,
    /// QEMU ends so while the command runs.
    Dies(Exit),
    /// The run is interrupted while the command runs.
    Interrupted,
    /// The command prints more than the harness takes.
    Floods,
    /// The guest floods its console while the command runs.
    FloodsConsole,
}

/// One scripted boot.
#[derive(Debug, Clone)]
pub struct Script {
    /// Until SSH.
    pub until: Until,
    /// The console's text.
    pub console: String,
    /// QEMU's log.
    pub log: String,
    /// The benchmark commands' answers, in order; the last one repeats.
    pub answers: Vec<Answer>,
    /// dmesg's output.
    pub dmesg: String,
}

impl Script {
    /// A guest that reaches SSH after 2 s and answers every benchmark
    /// command with `answers` (the last one repeating).
    pub fn ssh(answers: Vec<Answer>) -> Script {
        Script {
            until: Until::Ssh(2.0),
            console: String::new(),
            log: String::new(),
            answers,
            dmesg: String::new(),
        }
    }

    /// A guest whose QEMU ends as `exit` before SSH.
    pub fn dies(exit: Exit) -> Script {
        Script {
            until: Until::Dies(exit),
            ..Script::ssh(vec![])
        }
    }
}

/// What the fake was asked to do.
#[derive(Debug, Clone, PartialEq)]
pub enum Call {
    /// Start a guest with this command line.
    Start(String),
    /// Wait for SSH up to this host deadline.
    WaitSsh(Duration),
    /// Run this command, waiting this long.
    Run(String, Duration),
    /// Power off, waiting this long.
    PowerOff(Duration),
    /// Kill.
    Kill,
}

/// The fake machine.
#[derive(Debug, Default)]
pub struct Fake {
    boots: VecDeque<Script>,
    now: Option<Script>,
    exit: Option<Exit>,
    answered: usize,
    /// Every call, in order.
    pub calls: Vec<Call>,
}

/// The environment a scripted guest tells: 2 CPUs, 1 GiB, 4 s up.
pub const ENV: &str = "6.12.0\n2\nMemTotal: 1048576 kB\n2\n4.00 3.00\n";

impl Fake {
    /// A machine that boots `boots` in order.
    pub fn new(boots: Vec<Script>) -> Fake {
        Fake {
            boots: boots.into(),
            ..Fake::default()
        }
    }

    fn script(&self) -> &Script {
        self.now.as_ref().expect("no guest started")
    }

    fn gone(&mut self, exit: Exit) -> anyhow::Error {
        self.exit = Some(exit);
        anyhow!("read the guest command's output: connection reset")
    }
}

impl Machine for Fake {
    fn start(&mut self, spec: VmSpec, _log: &Path) -> Result<()> {
        self.calls.push(Call::Start(spec.cmdline));
        self.now = Some(self.boots.pop_front().expect("the job booted more often than scripted"));
        (self.exit, self.answered) = (Some(Exit::Running), 0);
        Ok(())
    }

    fn forwarded(&self) -> bool {
        true
    }

    fn wait_ssh(&mut self, deadline: Duration, abort: &mut Abort) -> Result<Duration> {
        self.calls.push(Call::WaitSsh(deadline));
        if let Some(why) = abort(self) {
            return Err(anyhow!("{why}"));
        }
        match self.script().until {
            Until::Ssh(s) => Ok(Duration::from_secs_f64(s)),
            Until::Dies(exit) => {
                self.exit = Some(exit);
                Err(anyhow!("{}", abort(self).expect("a dead QEMU stops the wait")))
            }
            Until::Hangs => Err(anyhow!("connect to the guest's sshd: connection refused").context(Deadline)),
        }
    }

    fn run(&mut self, cmd: &str, wait: Duration) -> Result<Output> {
        self.calls.push(Call::Run(cmd.to_string(), wait));
        if self.exit != Some(Exit::Running) {
            return Err(anyhow!("open an SSH channel: the guest is gone"));
        }
        let says = |stdout: &str, wall_s: f64| Output {
            stdout: stdout.to_string(),
            stderr: String::new(),
            status: Some(0),
            elapsed: Duration::from_secs_f64(wall_s),
        };
        if cmd.starts_with("uname -r") {
            return Ok(says(ENV, 0.1));
        }
        if cmd == "dmesg" {
            return Ok(says(&self.script().dmesg, 0.1));
        }
        let answers = &self.script().answers;
        let answer = answers
            .get(self.answered)
            .or(answers.last())
            .cloned()
            .expect("no answer scripted");
        self.answered += 1;
        match answer {
            Answer::Says { stdout, wall_s } => Ok(says(&stdout, wall_s)),
            Answer::Hangs => Err(Timeout(wait).into()),
            Answer::Dies(exit) => Err(self.gone(exit)),
            Answer::Interrupted => Err(crate::proc::Interrupted.into()),
            Answer::Floods => Err(crate::guest::OverLimit(crate::guest::MAX_OUTPUT).into()),
            Answer::FloodsConsole => Err(super::machine::ConsoleFlood.into()),
        }
    }

    fn console(&self) -> String {
        self.now.as_ref().map(|s| s.console.clone()).unwrap_or_default()
    }

    fn log(&self) -> String {
        self.now.as_ref().map(|s| s.log.clone()).unwrap_or_default()
    }

    fn exit(&mut self, _grace: Duration) -> Result<Exit> {
        self.exit.ok_or_else(|| anyhow!("no guest is running"))
    }

    fn power_off(&mut self, grace: Duration) {
        self.calls.push(Call::PowerOff(grace));
        self.exit = Some(Exit::Code(0));
    }

    fn kill(&mut self) {
        self.calls.push(Call::Kill);
        if self.exit == Some(Exit::Running) {
            self.exit = Some(Exit::Signal(libc::SIGTERM));
        }
    }
}
