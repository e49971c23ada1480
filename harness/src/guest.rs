//! Guest control over SSH (libssh2 through the `ssh2` crate): wait for the
//! guest's sshd within a deadline with backoff, refuse any server whose host
//! key is not the one pinned in the run's image, run one command with its
//! own timeout and collect stdout, stderr and the exit status, and power off.

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

/// The most a guest command may print (stdout and stderr together): 64 MiB.
/// A benchmark that prints more is stopped and its repetition recorded as
/// over the limit, so a flooding guest cannot exhaust the host's memory.
pub const MAX_OUTPUT: usize = 64 << 20;

/// A guest command printed more than [`MAX_OUTPUT`].
#[derive(Debug, thiserror::Error)]
#[error("output over limit: the guest command printed more than {} MiB", .0 >> 20)]
pub struct OverLimit(pub usize);

/// Adds `bytes` to `buf`, refusing when `buf` and `other` together would
/// hold more than `limit` bytes.
pub fn take(buf: &mut Vec<u8>, other: usize, bytes: &[u8], limit: usize) -> std::result::Result<(), OverLimit> {
    if buf.len() + other + bytes.len() > limit {
        return Err(OverLimit(limit));
    }
    buf.extend_from_slice(bytes);
    Ok(())
}

/// The command did not finish within its timeout.
#[derive(Debug, thiserror::Error)]
#[error("wait for a guest command: no result after {0:?}")]
pub struct Timeout(pub Duration);

/// No login before the boot deadline (the last attempt's error is its source).
#[derive(Debug, thiserror::Error)]
#[error("reach the guest over SSH before the boot deadline")]
pub struct Deadline;

/// The server on the guest's port showed a host key that is not the run's:
/// something other than the guest answered. Never retried.
#[derive(Debug, thiserror::Error)]
#[error("check the guest's SSH host key: the server on 127.0.0.1:{port} showed {got}, not the run's pinned key; refusing it (another process may be on the port)")]
pub struct ForeignHostKey {
    /// The port.
    pub port: u16,
    /// What it showed: key type and SHA-256 of the key.
    pub got: String,
}

impl Guest {
    /// One attempt to connect, check that the server's host key is
    /// `host_key` (a public key line, `ssh-ed25519 AAAA… [comment]`), and
    /// authenticate as root with `key`.
    pub fn connect(port: u16, key: &Path, host_key: &str, timeout: Duration) -> Result<Guest> {
        let want = key_blob(host_key).context("read the run's pinned host key")?;
        let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
        let tcp = TcpStream::connect_timeout(&addr, timeout).context("connect to the guest's sshd")?;
        let mut sess = ssh2::Session::new().context("create an SSH session")?;
        sess.set_timeout(timeout.as_millis() as u32);
        sess.set_tcp_stream(tcp);
        sess.handshake().context("SSH handshake")?;
        match sess.host_key() {
            Some((blob, _)) if blob == want.as_slice() => {}
            got => {
                let got = got.map_or("no host key".to_string(), |(b, t)| {
                    use sha2::Digest;
                    format!(
                        "a host key of type {t:?} with SHA-256 {}",
                        crate::util::hex(&sha2::Sha256::digest(b))
                    )
                });
                return Err(ForeignHostKey { port, got }.into());
            }
        }
        sess.userauth_pubkey_file("root", None, key, None)
            .context("log in as root with the run's key")?;
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
        host_key: &str,
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
            match Guest::connect(port, key, host_key, Duration::from_secs(10)) {
                Ok(g) => return Ok(g),
                Err(e) if e.downcast_ref::<ForeignHostKey>().is_some() => return Err(e),
                Err(e) => last = e,
            }
            if Instant::now() + delay > deadline {
                return Err(last.context(Deadline));
            }
            std::thread::sleep(delay);
            delay = (delay * 2).min(Duration::from_secs(3));
        }
    }

    /// Runs `cmd` (a guest shell command built only from harness-made words
    /// and numbers) and collects its output within `timeout`.
    pub fn run(&self, cmd: &str, timeout: Duration) -> Result<Output> {
        self.run_watched(cmd, timeout, &mut || None)
    }

    /// [`Guest::run`], asking `watch` about four times a second whether to
    /// stop waiting (the error it gives is returned; the command is left
    /// to the guest's end).
    pub fn run_watched(
        &self,
        cmd: &str,
        timeout: Duration,
        watch: &mut dyn FnMut() -> Option<anyhow::Error>,
    ) -> Result<Output> {
        let start = Instant::now();
        let mut watched = start;
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
            if watched.elapsed() >= Duration::from_millis(250) {
                watched = Instant::now();
                if let Some(e) = watch() {
                    return Err(e);
                }
            }
            let progressed = drain(&mut ch, &mut buf, &mut out, &mut err)?;
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

/// Reads what the channel has of stdout and stderr into `out` and `err`
/// (each within [`MAX_OUTPUT`]); whether anything came.
fn drain(ch: &mut ssh2::Channel, buf: &mut [u8], out: &mut Vec<u8>, err: &mut Vec<u8>) -> Result<bool> {
    let quiet = |e: &std::io::Error| matches!(e.kind(), std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock);
    let mut progressed = false;
    match ch.read(buf) {
        Ok(0) => {}
        Ok(n) => {
            take(out, err.len(), &buf[..n], MAX_OUTPUT)?;
            progressed = true;
        }
        Err(e) if quiet(&e) => {}
        Err(e) => return Err(e).context("read the guest command's output"),
    }
    match ch.stderr().read(buf) {
        Ok(0) => {}
        Ok(n) => {
            take(err, out.len(), &buf[..n], MAX_OUTPUT)?;
            progressed = true;
        }
        Err(e) if quiet(&e) => {}
        Err(e) => return Err(e).context("read the guest command's errors"),
    }
    Ok(progressed)
}

/// The key blob of a public key line: its base64 field, decoded.
fn key_blob(line: &str) -> Result<Vec<u8>> {
    let b64 = line
        .split_whitespace()
        .nth(1)
        .context("no key field in the public key line")?;
    crate::util::base64_decode(b64.as_bytes()).map_err(|c| anyhow::anyhow!("`{}` is not base64", c as char))
}

fn is_timeout(e: &ssh2::Error) -> bool {
    matches!(e.code(), ssh2::ErrorCode::Session(-9) | ssh2::ErrorCode::Session(-37))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proc::Cmd;

    fn key(dir: &Path, name: &str) -> (std::path::PathBuf, String) {
        let p = dir.join(name);
        Cmd::new("dropbearkey")
            .args(["-t", "ed25519", "-f"])
            .arg(&p)
            .capture()
            .run_ok()
            .unwrap();
        let out = Cmd::new("dropbearkey")
            .args(["-y", "-f"])
            .arg(&p)
            .capture()
            .run_ok()
            .unwrap()
            .output;
        (p, out.lines().find(|l| l.starts_with("ssh-")).unwrap().to_string())
    }

    #[test]
    fn key_blob_decodes_base64() {
        assert_eq!(key_blob("ssh-ed25519 AAAAC3Nz x").unwrap(), [0, 0, 0, 11, 115, 115]);
        assert_eq!(key_blob("t aGk=").unwrap(), b"hi");
        assert!(key_blob("ssh-ed25519").is_err() && key_blob("t a*b").is_err());
    }

    /// Issue 11 item 7: a real sshd (dropbear) with another host key on the
    /// port is refused at once, before any login; with the pinned key the
    /// same server gets as far as the login.
    #[test]
    fn a_forged_sshd_is_refused() {
        let tmp = tempfile::Builder::new().prefix("harness-forged-").tempdir().unwrap();
        let dir = tmp.path();
        let (forged, forged_pub) = key(dir, "forged_host_key");
        let (_, pinned_pub) = key(dir, "pinned_host_key");
        let (client_db, _) = key(dir, "client");
        let client = dir.join("client_openssh");
        Cmd::new("dropbearconvert")
            .args(["dropbear", "openssh"])
            .arg(&client_db)
            .arg(&client)
            .capture()
            .run_ok()
            .unwrap();
        let sshd = Cmd::new("/usr/sbin/dropbear")
            .args(["-F", "-E", "-s", "-p", "127.0.0.1:0", "-r"])
            .arg(&forged)
            .arg("-P")
            .arg(dir.join("pid"))
            .log(dir.join("sshd.log"))
            .spawn()
            .unwrap();
        let until = Instant::now() + Duration::from_secs(10);
        let port = loop {
            if let Some(p) = crate::vm::listening_port(sshd.pgid()) {
                break p;
            }
            assert!(Instant::now() < until, "dropbear did not listen");
            std::thread::sleep(Duration::from_millis(20));
        };
        let t = Instant::now();
        let e = Guest::wait_ready(
            port,
            &client,
            &pinned_pub,
            Instant::now() + Duration::from_secs(30),
            || None,
        )
        .err()
        .expect("a forged sshd must be refused");
        assert!(e.downcast_ref::<ForeignHostKey>().is_some(), "{e:#}");
        assert!(
            format!("{e:#}").contains(&format!(
                "the server on 127.0.0.1:{port} showed a host key of type Ed25519 with SHA-256 "
            )),
            "{e:#}"
        );
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "a foreign host key is not retried until the deadline"
        );
        // the same server with its own key pinned: past the host key, refused at login
        let e = Guest::connect(port, &client, &forged_pub, Duration::from_secs(10))
            .err()
            .expect("the client key is not authorized");
        assert!(
            e.downcast_ref::<ForeignHostKey>().is_none() && format!("{e:#}").contains("log in as root"),
            "{e:#}"
        );
        drop(sshd);
    }

    #[test]
    fn output_is_taken_up_to_the_limit() {
        let mut out = Vec::new();
        for (other, bytes, ok, len) in [(0, 4, true, 4), (2, 4, true, 8), (3, 1, false, 8), (0, 3, false, 8)] {
            assert_eq!(
                take(&mut out, other, &vec![b'x'; bytes], 10).is_ok(),
                ok,
                "{other} {bytes}"
            );
            assert_eq!(out.len(), len);
        }
    }
}
