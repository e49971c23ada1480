//! The edge a boot job stands on: a [`Machine`] that starts a guest, waits
//! for its sshd, runs guest commands with deadlines, shows its console and
//! QEMU's log, says whether and how it ended, and powers it off or kills
//! it. [`Qemu`] is the real one (QEMU through [`crate::vm`], SSH through
//! [`crate::guest`]); tests use a scripted fake, so the lifecycle's rules
//! run without QEMU.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

use crate::guest::{Guest, Output};
use crate::vm::{Exit, Vm, VmSpec};

/// Starts QEMU for a machine on another thread: boot jobs running at once
/// (`run --jobs`) hand their QEMU to the main thread to spawn, since a
/// child's parent-death signal follows the thread that spawned it.
pub type Spawner = std::sync::Arc<dyn Fn(VmSpec, &Path) -> Result<Vm> + Send + Sync>;

/// Asked between SSH attempts whether to give up waiting: `Some(why)` stops.
pub type Abort<'a> = dyn FnMut(&mut dyn Machine) -> Option<String> + 'a;

/// A guest machine, one boot at a time.
pub trait Machine {
    /// Starts a guest as `spec` says (its console in `spec.console`),
    /// QEMU's output logged to `log`; the deadlines of
    /// [`Machine::wait_ssh`] count from here.
    fn start(&mut self, spec: VmSpec, log: &Path) -> Result<()>;
    /// Whether the host's forward to the guest's sshd is in place.
    fn forwarded(&self) -> bool;
    /// Waits until the guest's sshd lets the run's key in, at most
    /// `deadline` after the start, asking `abort` before each attempt.
    /// Returns the wall time from the start to the login.
    fn wait_ssh(&mut self, deadline: Duration, abort: &mut Abort) -> Result<Duration>;
    /// Runs a guest command, waiting at most `wait` for its result
    /// ([`crate::guest::Timeout`] when it does not come).
    fn run(&mut self, cmd: &str, wait: Duration) -> Result<Output>;
    /// The console so far (also once the guest is off).
    fn console(&self) -> String;
    /// How many bytes the guest wrote to its console so far (a flood is
    /// over [`crate::vm::MAX_CONSOLE`]).
    fn console_bytes(&self) -> u64 {
        self.console().len() as u64
    }
    /// QEMU's own output so far.
    fn log(&self) -> String;
    /// Whether the guest has exited and how, waiting up to `grace` for it
    /// to exit.
    fn exit(&mut self, grace: Duration) -> Result<Exit>;
    /// Asks the guest to power off, waits up to `grace`, then kills it.
    fn power_off(&mut self, grace: Duration);
    /// Kills the guest at once.
    fn kill(&mut self);
    /// Puts the threads QEMU started since it was pinned where its other
    /// threads are (before each repetition); nothing for an unpinned guest.
    fn repin(&mut self) {}
}

/// The guest wrote more than [`crate::vm::MAX_CONSOLE`] to its console
/// (found before a stage or while a benchmark command runs).
#[derive(Debug, thiserror::Error)]
#[error("console over limit: the guest wrote more than {} MiB to its console", crate::vm::MAX_CONSOLE >> 20)]
pub struct ConsoleFlood;

/// The real machine: QEMU, and ssh2 with the run's key, refusing any host
/// key but the pinned one.
pub struct Qemu {
    key: PathBuf,
    host_key: String,
    vm: Option<Vm>,
    guest: Option<Guest>,
    started: Instant,
    console: PathBuf,
    log: PathBuf,
    spawn: Option<Spawner>,
}

impl Qemu {
    /// A machine logging in with `key`, pinning `host_key`.
    pub fn new(key: PathBuf, host_key: String) -> Qemu {
        Qemu {
            key,
            host_key,
            vm: None,
            guest: None,
            started: Instant::now(),
            console: PathBuf::new(),
            log: PathBuf::new(),
            spawn: None,
        }
    }

    /// A machine whose QEMU `spawn` starts (on the thread it serves).
    pub fn spawning(key: PathBuf, host_key: String, spawn: Spawner) -> Qemu {
        Qemu {
            spawn: Some(spawn),
            ..Qemu::new(key, host_key)
        }
    }

    fn vm(&mut self) -> Result<&mut Vm> {
        self.vm.as_mut().context("no guest is running")
    }
}

impl Machine for Qemu {
    fn start(&mut self, spec: VmSpec, log: &Path) -> Result<()> {
        self.kill();
        (self.console, self.log) = (spec.console.clone(), log.to_path_buf());
        self.started = Instant::now();
        self.vm = Some(match &self.spawn {
            Some(spawn) => spawn(spec, log)?,
            None => Vm::start(spec, log)?,
        });
        Ok(())
    }

    fn forwarded(&self) -> bool {
        self.vm.as_ref().is_some_and(|v| v.spec.ssh_port != 0)
    }

    fn wait_ssh(&mut self, deadline: Duration, abort: &mut Abort) -> Result<Duration> {
        let port = self.vm.as_ref().map_or(0, |v| v.spec.ssh_port);
        let (key, host_key) = (self.key.clone(), self.host_key.clone());
        let until = self.started + deadline;
        let guest = Guest::wait_ready(port, &key, &host_key, until, || abort(&mut *self))?;
        self.guest = Some(guest);
        Ok(self.started.elapsed())
    }

    /// Runs `cmd`, stopping the wait as soon as the console floods
    /// ([`ConsoleFlood`]): a guest that floods while a benchmark runs costs
    /// a quarter second of checks, not the repetition's whole wait.
    fn run(&mut self, cmd: &str, wait: Duration) -> Result<Output> {
        let console = self.console.clone();
        let mut flooded = || {
            let bytes = std::fs::metadata(&console).map_or(0, |m| m.len());
            (bytes > crate::vm::MAX_CONSOLE).then(|| ConsoleFlood.into())
        };
        self.guest
            .as_ref()
            .context("no SSH session to the guest")?
            .run_watched(cmd, wait, &mut flooded)
    }

    fn console(&self) -> String {
        crate::vm::read_console(&self.console, crate::vm::MAX_CONSOLE)
    }

    fn console_bytes(&self) -> u64 {
        std::fs::metadata(&self.console).map_or(0, |m| m.len())
    }

    fn log(&self) -> String {
        std::fs::read(&self.log)
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_default()
    }

    fn exit(&mut self, grace: Duration) -> Result<Exit> {
        let until = Instant::now() + grace;
        loop {
            match self.vm()?.exited()? {
                Exit::Running if Instant::now() > until => return Ok(Exit::Running),
                Exit::Running => std::thread::sleep(Duration::from_millis(50)),
                exit => return Ok(exit),
            }
        }
    }

    fn power_off(&mut self, grace: Duration) {
        if let Some(g) = self.guest.take() {
            g.poweroff();
        }
        if let Some(vm) = self.vm.take() {
            vm.finish(grace);
        }
    }

    fn kill(&mut self) {
        // QEMU first, as dropping a booted guest did
        self.vm = None;
        self.guest = None;
    }

    fn repin(&mut self) {
        if let Some(vm) = self.vm.as_mut() {
            vm.repin();
        }
    }
}
