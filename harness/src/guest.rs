//! Guest control over SSH (libssh2 through the `ssh2` crate): wait for the
//! guest's sshd within a deadline with backoff, run one command with its own
//! timeout and collect stdout, stderr and the exit status, and power off.

use std::io::Read;
use std::net::TcpStream;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};

/// A logged-in SSH session to a guest.
pub struct Guest {
    sess: ssh2::Session,
}

/// What a guest command produced.
#[derive(Debug, Clone)]
pub struct Output {
    /// Standard output.
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
    /// Exit status (None if the channel closed without one).
    pub status: Option<i32>,
    /// Wall time.
    pub elapsed: Duration,
}

/// The command did not finish within its timeout.
#[derive(Debug, thiserror::Error)]
#[error("wait for a guest command: no result after {0:?}")]
pub struct Timeout(pub Duration);

impl Guest {
    /// One attempt to connect and authenticate as root with `key`.
    pub fn connect(port: u16, key: &Path, timeout: Duration) -> Result<Guest> {
        let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
        let tcp = TcpStream::connect_timeout(&addr, timeout).context("connect to the guest's sshd")?;
        let mut sess = ssh2::Session::new().context("create an SSH session")?;
        sess.set_timeout(timeout.as_millis() as u32);
        sess.set_tcp_stream(tcp);
        sess.handshake().context("SSH handshake")?;
        sess.userauth_pubkey_file("root", None, key, None).context("log in as root with the run's key")?;
        if !sess.authenticated() {
            bail!("log in as root: not authenticated");
        }
        Ok(Guest { sess })
    }

    /// Retries [`Guest::connect`] with backoff until `deadline`, giving up
    /// early when `abort` says the guest is gone (QEMU exited, kernel panic).
    pub fn wait_ready(
        port: u16,
        key: &Path,
        deadline: Instant,
        mut abort: impl FnMut() -> Option<String>,
    ) -> Result<Guest> {
        let mut delay = Duration::from_millis(250);
        let mut last = anyhow!("no attempt made");
        loop {
            crate::proc::check_interrupted()?;
            if let Some(why) = abort() {
                bail!("{why}");
            }
            match Guest::connect(port, key, Duration::from_secs(10)) {
                Ok(g) => return Ok(g),
                Err(e) => last = e,
            }
            if Instant::now() + delay > deadline {
                return Err(last.context("reach the guest over SSH before the boot deadline"));
            }
            std::thread::sleep(delay);
            delay = (delay * 2).min(Duration::from_secs(3));
        }
    }

    /// Runs `cmd` (a guest shell command built only from harness-made words
    /// and numbers) and collects its output within `timeout`.
    pub fn run(&self, cmd: &str, timeout: Duration) -> Result<Output> {
        let start = Instant::now();
        // libssh2 blocking calls give up after this; we loop to the deadline
        self.sess.set_timeout(1000);
        let mut ch = loop {
            match self.sess.channel_session() {
                Ok(c) => break c,
                Err(e) if start.elapsed() < Duration::from_secs(30) && is_timeout(&e) => continue,
                Err(e) => return Err(e).context("open an SSH channel"),
            }
        };
        ch.exec(cmd).with_context(|| format!("start `{cmd}` in the guest"))?;
        let mut out = Vec::new();
        let mut err = Vec::new();
        let mut buf = [0u8; 16384];
        loop {
            crate::proc::check_interrupted()?;
            if start.elapsed() > timeout {
                return Err(Timeout(timeout).into());
            }
            let mut progressed = false;
            match ch.read(&mut buf) {
                Ok(0) => {}
                Ok(n) => {
                    out.extend_from_slice(&buf[..n]);
                    progressed = true;
                }
                Err(e) if e.kind() == std::io::ErrorKind::TimedOut || e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(e).context("read the guest command's output"),
            }
            match ch.stderr().read(&mut buf) {
                Ok(0) => {}
                Ok(n) => {
                    err.extend_from_slice(&buf[..n]);
                    progressed = true;
                }
                Err(e) if e.kind() == std::io::ErrorKind::TimedOut || e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(e).context("read the guest command's errors"),
            }
            if !progressed && ch.eof() {
                break;
            }
        }
        let _ = ch.wait_close();
        let status = ch.exit_status().ok();
        Ok(Output {
            stdout: String::from_utf8_lossy(&out).into_owned(),
            stderr: String::from_utf8_lossy(&err).into_owned(),
            status,
            elapsed: start.elapsed(),
        })
    }

    /// Asks the guest to power off (the connection drops; errors ignored).
    pub fn poweroff(self) {
        self.sess.set_timeout(3000);
        if let Ok(mut ch) = self.sess.channel_session() {
            let _ = ch.exec("sync; poweroff -f");
            let _ = ch.wait_close();
        }
    }
}

fn is_timeout(e: &ssh2::Error) -> bool {
    matches!(e.code(), ssh2::ErrorCode::Session(-9) | ssh2::ErrorCode::Session(-37))
}
