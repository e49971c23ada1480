//! QEMU's QMP monitor on its unix socket: the greeting, capabilities
//! negotiation, then one command at a time with its return (asynchronous
//! events in between are skipped). The harness asks it one thing: which
//! host thread runs each vCPU (`query-cpus-fast`).

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use serde_json::Value;

/// A negotiated QMP connection.
pub struct Qmp {
    read: BufReader<UnixStream>,
    write: UnixStream,
}

impl Qmp {
    /// Connects to the socket at `path`, retrying until `until` while
    /// `alive` says QEMU still runs (it binds the socket during its start),
    /// and leaves the greeting's capabilities negotiation done.
    pub fn connect(path: &Path, until: Instant, mut alive: impl FnMut() -> bool) -> Result<Qmp> {
        let stream = loop {
            match UnixStream::connect(path) {
                Ok(s) => break s,
                Err(e) if Instant::now() >= until || !alive() => {
                    return Err(e).with_context(|| format!("connect to QMP at {}", path.display()))
                }
                Err(_) => std::thread::sleep(Duration::from_millis(20)),
            }
        };
        stream.set_read_timeout(Some(Duration::from_secs(10)))?;
        let write = stream.try_clone()?;
        let mut q = Qmp {
            read: BufReader::new(stream),
            write,
        };
        let greeting = q.line()?;
        if greeting.get("QMP").is_none() {
            bail!("QMP greeting expected, got {greeting}");
        }
        q.execute("qmp_capabilities")?;
        Ok(q)
    }

    fn line(&mut self) -> Result<Value> {
        let mut l = String::new();
        if self.read.read_line(&mut l).context("read from QMP")? == 0 {
            bail!("QMP closed");
        }
        serde_json::from_str(&l).with_context(|| format!("QMP sent no JSON: {}", l.trim()))
    }

    /// Runs `command` (no arguments) and gives its `return`.
    pub fn execute(&mut self, command: &str) -> Result<Value> {
        let msg = serde_json::json!({ "execute": command });
        writeln!(self.write, "{msg}").context("write to QMP")?;
        loop {
            let v = self.line()?;
            if let Some(r) = v.get("return") {
                return Ok(r.clone());
            }
            if let Some(e) = v.get("error") {
                bail!("QMP {command}: {e}");
            }
        }
    }
}

/// `(vCPU index, host thread id)` of each vCPU in a `query-cpus-fast`
/// return, by vCPU index.
pub fn vcpu_threads(ret: &Value) -> Result<Vec<(u32, i32)>> {
    let cpus = ret.as_array().context("query-cpus-fast returned no list")?;
    let mut out = Vec::new();
    for c in cpus {
        let index = c
            .get("cpu-index")
            .and_then(Value::as_u64)
            .context("a vCPU without cpu-index")?;
        let tid = c
            .get("thread-id")
            .and_then(Value::as_i64)
            .context("a vCPU without thread-id")?;
        out.push((index as u32, tid as i32));
    }
    out.sort_unstable();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vcpu_threads_come_by_index() {
        let ret = serde_json::json!([
            {"cpu-index": 1, "thread-id": 4242, "qom-path": "/machine/unattached/device[1]", "target": "x86_64"},
            {"cpu-index": 0, "thread-id": 4241, "qom-path": "/machine/unattached/device[0]", "target": "x86_64"},
        ]);
        assert_eq!(vcpu_threads(&ret).unwrap(), vec![(0, 4241), (1, 4242)]);
        assert!(vcpu_threads(&serde_json::json!([{"cpu-index": 0}])).is_err());
        assert!(vcpu_threads(&serde_json::json!({})).is_err());
    }

    #[test]
    fn a_qmp_conversation_skips_events() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("q.sock");
        let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
        let server = std::thread::spawn(move || {
            let (s, _) = listener.accept().unwrap();
            let mut w = s.try_clone().unwrap();
            let mut r = BufReader::new(s);
            let mut said = Vec::new();
            writeln!(w, r#"{{"QMP": {{"version": {{}}, "capabilities": []}}}}"#).unwrap();
            for reply in [
                r#"{"return": {}}"#.to_string(),
                r#"{"event": "RESUME"}"#.to_string() + "\n" + r#"{"return": [{"cpu-index": 0, "thread-id": 7}]}"#,
            ] {
                let mut l = String::new();
                r.read_line(&mut l).unwrap();
                said.push(l.trim().to_string());
                writeln!(w, "{reply}").unwrap();
            }
            said
        });
        let mut q = Qmp::connect(&path, Instant::now() + Duration::from_secs(5), || true).unwrap();
        let ret = q.execute("query-cpus-fast").unwrap();
        assert_eq!(vcpu_threads(&ret).unwrap(), vec![(0, 7)]);
        assert_eq!(
            server.join().unwrap(),
            [r#"{"execute":"qmp_capabilities"}"#, r#"{"execute":"query-cpus-fast"}"#]
        );
    }
}
