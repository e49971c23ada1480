//! The one module that spawns host processes. Every child runs in its own
//! process group, has a deadline, tees its output to a log file, and the whole
//! group is killed when its guard drops, when the deadline passes, or when the
//! harness is interrupted (SIGINT/SIGTERM/SIGHUP). No shell is ever involved:
//! a program and its argument vector go straight to `execve`.
//!
//! A harness that dies without unwinding (SIGKILL, the OOM killer) takes its
//! children along: each direct child gets PR_SET_PDEATHSIG=SIGKILL, and a
//! watchdog process forked at start-up ([`start_watchdog`]) is told every
//! child group; when the harness's end of the pipe closes, it kills each
//! group still registered (`make -j`'s jobs, not only `make`).

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::fs::File;
use std::io::Write;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, Once};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

static LIVE_GROUPS: Mutex<BTreeSet<i32>> = Mutex::new(BTreeSet::new());
static WATCHDOG: Mutex<Option<File>> = Mutex::new(None);
static INTERRUPTED: AtomicBool = AtomicBool::new(false);
static HANDLER: Once = Once::new();

/// Set when SIGINT or SIGTERM arrived; long loops poll it and stop.
pub fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::SeqCst)
}

/// Error returned by waits cut short by SIGINT/SIGTERM.
#[derive(Debug, thiserror::Error)]
#[error("stop: interrupted by a signal")]
pub struct Interrupted;

/// Installs the SIGINT/SIGTERM/SIGHUP handler (a dropped SSH session is a
/// SIGHUP): marks the run interrupted and kills every live child group
/// (SIGTERM, then SIGKILL after 3 s). A second signal while the first is
/// handled exits at once with 130.
pub fn install_signal_handler() -> Result<()> {
    let mut res = Ok(());
    HANDLER.call_once(|| {
        let signals = signal_hook::iterator::Signals::new([libc::SIGINT, libc::SIGTERM, libc::SIGHUP]);
        match signals {
            Err(e) => res = Err(anyhow::Error::new(e).context("install the signal handler")),
            Ok(mut signals) => {
                std::thread::spawn(move || {
                    for _ in signals.forever() {
                        if INTERRUPTED.swap(true, Ordering::SeqCst) {
                            kill_all(libc::SIGKILL);
                            std::process::exit(130);
                        }
                        kill_all(libc::SIGTERM);
                        std::thread::sleep(Duration::from_secs(3));
                        kill_all(libc::SIGKILL);
                    }
                });
            }
        }
    });
    res
}

/// Forks the watchdog that kills every registered child group once the
/// harness is gone, however it died. Call it first in `main`, while the
/// process has a single thread (the child runs Rust code after `fork`).
/// Without it (unit tests), only PR_SET_PDEATHSIG protects: direct children
/// die with the harness, their own children may not.
pub fn start_watchdog() -> Result<()> {
    let mut fds = [0i32; 2];
    // SAFETY: pipe2 fills two descriptors we then own; O_CLOEXEC keeps the
    // write end out of every child, so only this process holds it.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(std::io::Error::last_os_error()).context("make the watchdog pipe");
    }
    // SAFETY: called while single-threaded (see above).
    match unsafe { libc::fork() } {
        -1 => Err(std::io::Error::last_os_error()).context("fork the watchdog"),
        0 => {
            // SAFETY: plain syscalls on descriptors this process owns.
            unsafe {
                libc::close(fds[1]);
                for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT, libc::SIGPIPE] {
                    libc::signal(sig, libc::SIG_IGN);
                }
                libc::prctl(libc::PR_SET_NAME, c"harness-watch".as_ptr());
                let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR);
                for fd in 0..3 {
                    libc::dup2(null, fd);
                }
                watch(std::os::fd::FromRawFd::from_raw_fd(fds[0]));
                libc::_exit(0)
            }
        }
        _ => {
            // SAFETY: the read end belongs to the watchdog now; the write end is ours.
            unsafe { libc::close(fds[0]) };
            let f = unsafe { <File as std::os::fd::FromRawFd>::from_raw_fd(fds[1]) };
            *WATCHDOG.lock().map_err(|_| anyhow::anyhow!("watchdog lock poisoned"))? = Some(f);
            Ok(())
        }
    }
}

/// The watchdog's loop: `+pgid` registers a group, `-pgid` forgets it (4
/// bytes each, native endian); at end of file every registered group gets
/// SIGKILL.
pub fn watch(mut pipe: File) {
    use std::io::Read;
    let mut groups = BTreeSet::new();
    let mut buf = [0u8; 4];
    while pipe.read_exact(&mut buf).is_ok() {
        match i32::from_ne_bytes(buf) {
            g if g > 0 => groups.insert(g),
            g => groups.remove(&-g),
        };
    }
    for g in groups {
        // SAFETY: killpg only sends a signal.
        unsafe { libc::killpg(g, libc::SIGKILL) };
    }
}

/// Tells the watchdog (if any) about a group: `+pgid` added, `-pgid` gone.
fn tell_watchdog(msg: i32) {
    if let Ok(mut w) = WATCHDOG.lock() {
        if let Some(f) = w.as_mut() {
            // one 4-byte write to a pipe is atomic; a dead watchdog is ignored
            let _ = f.write_all(&msg.to_ne_bytes());
        }
    }
}

fn forget_group(pgid: i32) {
    if LIVE_GROUPS.lock().map(|mut g| g.remove(&pgid)).unwrap_or(false) {
        tell_watchdog(-pgid);
    }
}

fn kill_all(sig: i32) {
    let groups: Vec<i32> = LIVE_GROUPS
        .lock()
        .map(|g| g.iter().copied().collect())
        .unwrap_or_default();
    for pg in groups {
        // SAFETY: killpg only sends a signal; pg is a group we created.
        unsafe {
            libc::killpg(pg, sig);
        }
    }
}

/// What to run.
#[derive(Debug, Clone)]
pub struct Cmd {
    program: OsString,
    args: Vec<OsString>,
    dir: Option<PathBuf>,
    env: Vec<(OsString, OsString)>,
    env_removed: Vec<OsString>,
    log: Option<PathBuf>,
    deadline: Option<Duration>,
    capture: bool,
    stdin: Option<Vec<u8>>,
}

/// How a finished command ended.
#[derive(Debug, Clone)]
pub struct Finished {
    /// Exit code, or None when killed by a signal.
    pub code: Option<i32>,
    /// The signal that killed it, if one did.
    pub signal: Option<i32>,
    /// Killed because the deadline passed.
    pub timed_out: bool,
    /// Wall time.
    pub elapsed: Duration,
    /// stdout+stderr, when captured.
    pub output: String,
}

impl Finished {
    /// Exited with status 0 in time.
    pub fn success(&self) -> bool {
        self.code == Some(0) && !self.timed_out
    }
}

impl Cmd {
    /// A program with no arguments yet.
    pub fn new(program: impl Into<OsString>) -> Self {
        Cmd {
            program: program.into(),
            args: Vec::new(),
            dir: None,
            env: Vec::new(),
            env_removed: Vec::new(),
            log: None,
            deadline: None,
            capture: false,
            stdin: None,
        }
    }
    /// Appends one argument.
    pub fn arg(mut self, a: impl Into<OsString>) -> Self {
        self.args.push(a.into());
        self
    }
    /// Appends arguments.
    pub fn args<I: IntoIterator<Item = S>, S: Into<OsString>>(mut self, a: I) -> Self {
        self.args.extend(a.into_iter().map(Into::into));
        self
    }
    /// Working directory.
    pub fn dir(mut self, d: impl AsRef<Path>) -> Self {
        self.dir = Some(d.as_ref().to_path_buf());
        self
    }
    /// Sets an environment variable.
    pub fn env(mut self, k: impl Into<OsString>, v: impl Into<OsString>) -> Self {
        self.env.push((k.into(), v.into()));
        self
    }
    /// Removes an environment variable the harness has from the child's.
    pub fn env_remove(mut self, k: impl Into<OsString>) -> Self {
        self.env_removed.push(k.into());
        self
    }
    /// Appends stdout and stderr to this log file.
    pub fn log(mut self, p: impl AsRef<Path>) -> Self {
        self.log = Some(p.as_ref().to_path_buf());
        self
    }
    /// Kills the group after this long.
    pub fn deadline(mut self, d: Duration) -> Self {
        self.deadline = Some(d);
        self
    }
    /// Keeps stdout+stderr in memory (and in the log, if one is set).
    pub fn capture(mut self) -> Self {
        self.capture = true;
        self
    }

    /// Feeds these bytes to its standard input (otherwise it reads /dev/null).
    pub fn stdin_bytes(mut self, bytes: Vec<u8>) -> Self {
        self.stdin = Some(bytes);
        self
    }

    /// One line describing the command, for logs and errors.
    pub fn describe(&self) -> String {
        let mut s = self.program.to_string_lossy().into_owned();
        for a in &self.args {
            s.push(' ');
            s.push_str(&a.to_string_lossy());
        }
        s
    }

    fn expression(&self) -> Result<duct::Expression> {
        let mut e = duct::cmd(&self.program, &self.args).stderr_to_stdout().unchecked();
        e = match &self.stdin {
            Some(b) => e.stdin_bytes(b.clone()),
            None => e.stdin_null(),
        };
        if let Some(d) = &self.dir {
            e = e.dir(d);
        }
        for k in &self.env_removed {
            e = e.env_remove(k);
        }
        for (k, v) in &self.env {
            e = e.env(k, v);
        }
        if self.capture {
            e = e.stdout_capture();
        } else if let Some(log) = &self.log {
            let f = open_log(log)?;
            e = e.stdout_file(f);
        } else {
            e = e.stdout_null();
        }
        let parent = std::process::id() as i32;
        Ok(e.before_spawn(move |c| {
            c.process_group(0);
            // SAFETY: the closure runs between fork and exec and makes only
            // async-signal-safe calls.
            unsafe {
                c.pre_exec(move || {
                    // die with the harness (strictly: with the thread that
                    // spawned us, so children are spawned from long-lived threads)
                    if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    // the harness may have died before the prctl took effect
                    if libc::getppid() != parent {
                        libc::_exit(137);
                    }
                    Ok(())
                });
            }
            Ok(())
        }))
    }

    /// Starts the command and returns a guard that kills its group on drop.
    pub fn spawn(self) -> Result<Child> {
        if interrupted() {
            return Err(Interrupted.into());
        }
        if let Some(log) = &self.log {
            let mut f = open_log(log)?;
            writeln!(f, "$ {}", self.describe()).ok();
        }
        let handle = self
            .expression()?
            .start()
            .with_context(|| format!("start `{}`", self.describe()))?;
        let pgid = handle.pids().first().copied().unwrap_or(0) as i32;
        if LIVE_GROUPS.lock().map(|mut g| g.insert(pgid)).unwrap_or(false) {
            tell_watchdog(pgid);
        }
        Ok(Child {
            handle: Some(handle),
            pgid,
            started: Instant::now(),
            cmd: self,
        })
    }

    /// Runs to completion (or deadline, or interruption).
    pub fn run(self) -> Result<Finished> {
        let mut child = self.spawn()?;
        child.wait()
    }

    /// Runs and fails unless it exits 0; the error carries the output tail.
    pub fn run_ok(self) -> Result<Finished> {
        let desc = self.describe();
        let log = self.log.clone();
        let f = self.run()?;
        if !f.success() {
            let tail = tail_lines(&f.output, 15);
            let how = if f.timed_out {
                "timed out".to_string()
            } else {
                exit_words(f.code)
            };
            let where_ = log.map(|l| format!(" (log: {})", l.display())).unwrap_or_default();
            bail!("run `{desc}`: {how}{where_}\n{}", tail);
        }
        Ok(f)
    }
}

fn open_log(p: &Path) -> Result<File> {
    if let Some(d) = p.parent() {
        std::fs::create_dir_all(d).with_context(|| format!("create {}", d.display()))?;
    }
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(p)
        .with_context(|| format!("open log {}", p.display()))
}

/// A running child; dropping it kills its whole process group.
pub struct Child {
    handle: Option<duct::Handle>,
    pgid: i32,
    started: Instant,
    cmd: Cmd,
}

impl Child {
    /// The process group (= the child's pid).
    pub fn pgid(&self) -> i32 {
        self.pgid
    }

    /// The signal that ended it, once it has died from one.
    pub fn signal(&self) -> Option<i32> {
        use std::os::unix::process::ExitStatusExt;
        self.handle.as_ref()?.try_wait().ok()??.status.signal()
    }

    /// Has it exited? Returns its exit code (None = signal) once it has.
    pub fn try_status(&mut self) -> Result<Option<Option<i32>>> {
        let Some(h) = &self.handle else { return Ok(Some(None)) };
        match h.try_wait().context("poll child")? {
            Some(out) => Ok(Some(out.status.code())),
            None => Ok(None),
        }
    }

    /// Waits for exit, the deadline, or an interruption.
    pub fn wait(&mut self) -> Result<Finished> {
        loop {
            if let Some(code) = self.try_status()? {
                return Ok(self.finish(code, false));
            }
            if interrupted() {
                self.kill();
                return Err(Interrupted.into());
            }
            if let Some(d) = self.cmd.deadline {
                if self.started.elapsed() > d {
                    self.kill();
                    let code = self.try_status()?.unwrap_or(None);
                    return Ok(self.finish(code, true));
                }
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn finish(&mut self, code: Option<i32>, timed_out: bool) -> Finished {
        use std::os::unix::process::ExitStatusExt;
        let (mut output, mut signal) = (String::new(), None);
        if let Some(h) = self.handle.take() {
            if let Ok(Some(out)) = h.try_wait() {
                output = String::from_utf8_lossy(&out.stdout).into_owned();
                signal = out.status.signal();
            }
        }
        // the group may still hold grandchildren (make's jobs): end them too
        unsafe {
            libc::killpg(self.pgid, libc::SIGKILL);
        }
        forget_group(self.pgid);
        if self.cmd.capture {
            if let Some(log) = &self.cmd.log {
                if let Ok(mut f) = open_log(log) {
                    f.write_all(output.as_bytes()).ok();
                }
            }
        }
        Finished {
            code,
            signal,
            timed_out,
            elapsed: self.started.elapsed(),
            output,
        }
    }

    /// Kills the group: SIGTERM, a short grace, then SIGKILL; reaps the child.
    pub fn kill(&mut self) {
        if self.pgid <= 0 {
            return;
        }
        unsafe {
            libc::killpg(self.pgid, libc::SIGTERM);
        }
        let until = Instant::now() + Duration::from_secs(2);
        while Instant::now() < until {
            if matches!(self.handle.as_ref().map(|h| h.try_wait()), Some(Ok(Some(_))) | None) {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        unsafe {
            libc::killpg(self.pgid, libc::SIGKILL);
        }
        if let Some(h) = &self.handle {
            let _ = h.wait();
        }
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        if self.handle.is_some() {
            self.kill();
        }
        forget_group(self.pgid);
    }
}

/// The last `n` lines of `text` (all of it when it has fewer), as one
/// slice: a failed command's output or a log, shown at its end.
pub fn tail_lines(text: &str, n: usize) -> &str {
    let body = text.trim_end_matches('\n');
    if n == 0 {
        return "";
    }
    let mut at = body.len();
    for _ in 0..n {
        match body[..at].rfind('\n') {
            Some(i) => at = i,
            None => return body,
        }
    }
    &body[at + 1..]
}

/// A process's end in words: `exited with status 2`, or `ended without an
/// exit status (killed by a signal)` where there is none; never `Some(2)`.
pub fn exit_words(code: Option<i32>) -> String {
    match code {
        Some(n) => format!("exited with status {n}"),
        None => "ended without an exit status (killed by a signal)".to_string(),
    }
}

/// Looks a program up on PATH.
pub fn which(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(program))
        .find(|p| is_executable(p))
}

/// Whether `p` is a file someone may execute (any `x` bit), as `which`
/// and `execve` see it.
pub fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Returns an error when the run was interrupted.
pub fn check_interrupted() -> Result<()> {
    if interrupted() {
        return Err(Interrupted.into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tail_lines_keeps_the_last_n() {
        for (text, n, want) in [
            ("a\nb\nc\n", 2, "b\nc"),
            ("a\nb\nc", 2, "b\nc"),
            ("a\nb\nc\n", 3, "a\nb\nc"),
            ("a\nb\nc\n", 9, "a\nb\nc"),
            ("a\n\nc\n\n", 2, "\nc"),
            ("", 3, ""),
            ("only", 0, ""),
        ] {
            assert_eq!(tail_lines(text, n), want, "{text:?} {n}");
        }
    }
    use std::os::fd::FromRawFd;

    /// Issue 47: a failed tool's message says its status in words.
    #[test]
    fn a_failed_command_says_its_status_in_words() {
        assert_eq!(exit_words(Some(2)), "exited with status 2");
        assert_eq!(exit_words(None), "ended without an exit status (killed by a signal)");
        let e = Cmd::new("sh").args(["-c", "exit 2"]).capture().run_ok().unwrap_err();
        let text = format!("{e:#}");
        assert!(
            text.contains("exited with status 2") && !text.contains("Some("),
            "{text}"
        );
    }

    #[test]
    fn captures_output_and_status() {
        let f = Cmd::new("sh")
            .args(["-c", "echo out; echo err >&2; exit 3"])
            .capture()
            .run()
            .unwrap();
        assert_eq!(f.code, Some(3));
        assert!(f.output.contains("out") && f.output.contains("err"));
        assert!(!f.success());
    }

    #[test]
    fn deadline_kills_the_whole_group() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().to_path_buf();
        let pidfile = dir.join("grandchild.pid");
        // the grandchild would outlive a plain kill of the direct child
        let script = format!("sleep 60 & echo $! > {}; wait", pidfile.display());
        let f = Cmd::new("sh")
            .args(["-c", &script])
            .deadline(Duration::from_millis(500))
            .run()
            .unwrap();
        assert!(f.timed_out);
        let pid: i32 = std::fs::read_to_string(&pidfile).unwrap().trim().parse().unwrap();
        std::thread::sleep(Duration::from_millis(100));
        // a killed orphan may linger as a zombie until init reaps it
        let state = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let alive = state
            .rsplit(')')
            .next()
            .map(|r| r.trim_start().starts_with(|c| c != 'Z'))
            .unwrap_or(false);
        assert!(!alive, "grandchild {pid} survived the group kill");
        std::fs::remove_dir_all(dir).ok();
    }

    fn alive(pid: i32) -> bool {
        // a killed orphan may linger as a zombie until init reaps it
        let state = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        state
            .rsplit(')')
            .next()
            .map(|r| r.trim_start().starts_with(|c| c != 'Z'))
            .unwrap_or(false)
    }

    fn wait_dead(pid: i32) -> bool {
        let until = Instant::now() + Duration::from_secs(5);
        while Instant::now() < until {
            if !alive(pid) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }

    #[test]
    fn a_child_dies_with_the_thread_that_spawned_it() {
        // PR_SET_PDEATHSIG fires when the spawning thread ends: the same
        // signal a SIGKILLed harness sends its children
        let pid = std::thread::spawn(|| {
            let c = Cmd::new("sleep").arg("60").spawn().unwrap();
            let pid = c.pgid();
            forget_group(pid);
            std::mem::forget(c);
            pid
        })
        .join()
        .unwrap();
        assert!(wait_dead(pid), "sleep {pid} outlived its parent thread");
    }

    #[test]
    fn the_watchdog_kills_registered_groups_when_the_pipe_closes() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().to_path_buf();
        let pidfile = dir.join("grandchild.pid");
        let script = format!("sleep 60 & echo $! > {}; wait", pidfile.display());
        let child = Cmd::new("sh").args(["-c", &script]).spawn().unwrap();
        let mut fds = [0i32; 2];
        assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
        let (r, mut w) = unsafe { (File::from_raw_fd(fds[0]), File::from_raw_fd(fds[1])) };
        let watchdog = std::thread::spawn(move || watch(r));
        // the shell creates the file before `echo` writes it: wait for a whole line
        let until = Instant::now() + Duration::from_secs(5);
        let read = || std::fs::read_to_string(&pidfile).ok().filter(|t| t.ends_with('\n'));
        while read().is_none() && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(20));
        }
        let grandchild: i32 = read()
            .expect("the shell wrote the grandchild's pid")
            .trim()
            .parse()
            .unwrap();
        w.write_all(&12345678i32.to_ne_bytes()).unwrap();
        w.write_all(&(-12345678i32).to_ne_bytes()).unwrap();
        w.write_all(&child.pgid().to_ne_bytes()).unwrap();
        assert!(alive(grandchild));
        drop(w); // the harness is gone
        watchdog.join().unwrap();
        assert!(wait_dead(grandchild), "grandchild {grandchild} survived the watchdog");
        drop(child);
        std::fs::remove_dir_all(dir).ok();
    }

    #[test]
    fn log_receives_command_line_and_output() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().to_path_buf();
        let log = dir.join("x.log");
        Cmd::new("echo").arg("hello").log(&log).run_ok().unwrap();
        let text = std::fs::read_to_string(&log).unwrap();
        assert!(text.starts_with("$ echo hello\n"), "{text}");
        assert!(text.contains("hello\n"));
        std::fs::remove_dir_all(dir).ok();
    }
}
