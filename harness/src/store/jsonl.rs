//! JSON lines: one record per line, appended with a single `write` on an
//! `O_APPEND` file and synced, so a line is whole or absent. Readers skip a
//! torn last line and any line that is not a valid record (with a notice);
//! only the run lock's holder cuts a torn line off ([`truncate_torn`]).

use std::io::Write;
use std::path::Path;

use anyhow::{Context, Result};
use serde::de::DeserializeOwned;
use serde::Serialize;

/// Appends one JSON line with a single write, then syncs.
pub fn append_line<T: Serialize>(path: &Path, v: &T) -> Result<()> {
    let mut line = serde_json::to_vec(v)?;
    line.push(b'\n');
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .with_context(|| format!("open {}", path.display()))?;
    f.write_all(&line)
        .with_context(|| format!("append to {}", path.display()))?;
    f.sync_data().with_context(|| format!("sync {}", path.display()))
}

/// Reads JSON lines; a last line without its newline is torn and ignored.
/// A line that is not a valid record (torn by a crash, a `null` where a
/// number belongs) is skipped with a notice naming `file:line`: one bad line
/// never makes a whole run unreadable.
pub fn read_lines<T: DeserializeOwned>(path: &Path) -> Result<Vec<T>> {
    let (records, skipped) = read_lines_skipping(path)?;
    for s in &skipped {
        crate::ui::notice(&format!("{s}; line skipped"));
    }
    Ok(records)
}

/// [`read_lines`] without printing: the records and, per skipped line,
/// `file:line: not a valid record (why)`.
pub fn read_lines_skipping<T: DeserializeOwned>(path: &Path) -> Result<(Vec<T>, Vec<String>)> {
    let data = match std::fs::read(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((Vec::new(), Vec::new())),
        Err(e) => return Err(e).with_context(|| format!("read {}", path.display())),
    };
    let complete = match data.iter().rposition(|&b| b == b'\n') {
        Some(i) => &data[..=i],
        None => &[][..],
    };
    let (mut records, mut skipped) = (Vec::new(), Vec::new());
    for (i, line) in complete.split(|&b| b == b'\n').enumerate() {
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        match serde_json::from_slice(line) {
            Ok(r) => records.push(r),
            Err(e) => skipped.push(format!("{}:{}: not a valid record ({e})", path.display(), i + 1)),
        }
    }
    Ok((records, skipped))
}

/// Cuts a torn last line (one without its newline) off `path`.
pub(super) fn truncate_torn(path: &Path) -> Result<()> {
    let Ok(data) = std::fs::read(path) else { return Ok(()) };
    if data.is_empty() || data.ends_with(b"\n") {
        return Ok(());
    }
    let keep = data.iter().rposition(|&b| b == b'\n').map(|i| i + 1).unwrap_or(0);
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .with_context(|| format!("open {}", path.display()))?;
    f.set_len(keep as u64)
        .with_context(|| format!("cut the torn last line of {}", path.display()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn torn_lines_are_ignored_and_cut() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().to_path_buf();
        let p = dir.join("x.jsonl");
        append_line(&p, &serde_json::json!({"a": 1})).unwrap();
        append_line(&p, &serde_json::json!({"a": 2})).unwrap();
        std::fs::OpenOptions::new()
            .append(true)
            .open(&p)
            .unwrap()
            .write_all(b"{\"a\": 3")
            .unwrap();
        let v: Vec<serde_json::Value> = read_lines(&p).unwrap();
        assert_eq!(v.len(), 2);
        truncate_torn(&p).unwrap();
        append_line(&p, &serde_json::json!({"a": 4})).unwrap();
        let v: Vec<serde_json::Value> = read_lines(&p).unwrap();
        assert_eq!(
            v.iter().map(|x| x["a"].as_i64().unwrap()).collect::<Vec<_>>(),
            vec![1, 2, 4]
        );
        std::fs::remove_dir_all(dir).ok();
    }
}
