//! The profile's `x` and `xf` lines read into [`Contention`], and the
//! check that its rows add up to its summary.

use std::collections::BTreeMap;

use anyhow::{bail, Context, Result};

use super::{Class, Contention, ContentionRow, Key, Object};

fn num(s: Option<&&str>, what: &str, n: usize) -> Result<u64> {
    let s = s.with_context(|| format!("line {n}: {what} missing"))?;
    let v = s
        .parse::<u64>()
        .with_context(|| format!("line {n}: {what} {s:?} is not a count"))?;
    crate::profile::bounded(v, what, n)
}

fn class(s: Option<&&str>, n: usize) -> Result<Class> {
    match s.copied() {
        Some("static") => Ok(Class::Static),
        Some("heap") => Ok(Class::Heap),
        other => bail!("line {n}: class {other:?} is neither static nor heap"),
    }
}

impl Contention {
    /// Refuses counts whose rows do not add up to their summary: the line
    /// rows' RMWs to its shared RMWs, the lock rows' acquisitions to its
    /// shared acquisitions, each row's functions to the row.
    pub fn check_sums(&self) -> Result<()> {
        let sum = |line: bool| -> u64 {
            self.rows
                .iter()
                .filter(|(k, _)| (k.object == Object::Line) == line)
                .map(|(_, r)| r.events)
                .sum()
        };
        for (what, rows, summary) in [
            ("shared-line RMWs", sum(true), self.rmws.1),
            ("shared-lock acquisitions", sum(false), self.acqs.1),
        ] {
            if rows != summary {
                bail!("its contention rows hold {rows} {what}, its `x summary` line {summary}: contention lines were lost or changed since the plugin wrote it");
            }
        }
        for (k, r) in &self.rows {
            let f: u64 = r.funcs.values().sum();
            if !r.funcs.is_empty() && f != r.events {
                bail!("contention row {} holds {} events, its `xf` lines {f}: lines were lost or changed since the plugin wrote it", k.name, r.events);
            }
        }
        Ok(())
    }

    /// Reads one `x` line's fields after `x` (line `n`).
    pub fn line(&mut self, f: &[&str], n: usize) -> Result<()> {
        let pair =
            |i: usize, what: &str| -> Result<(u64, u64)> { Ok((num(f.get(i), what, n)?, num(f.get(i + 1), what, n)?)) };
        match f.first().copied() {
            Some("watch") => {
                self.watch = (
                    num(f.get(1), "acquire functions", n)?,
                    num(f.get(2), "release functions", n)?,
                    f.get(3).unwrap_or(&"-").to_string(),
                )
            }
            Some("summary") => {
                self.vcpus = num(f.get(1), "vcpus", n)? as u32;
                self.rmws = pair(2, "rmws")?;
                self.lines = pair(4, "lines")?;
                self.acqs = pair(6, "acquisitions")?;
                self.locks = pair(8, "locks")?;
                self.holds = pair(10, "holds")?;
            }
            Some("line") => {
                let key = Key {
                    object: Object::Line,
                    class: class(f.get(1), n)?,
                    name: f.get(2).with_context(|| format!("line {n}: name missing"))?.to_string(),
                };
                let row = ContentionRow {
                    objects: num(f.get(3), "objects", n)?,
                    writers: num(f.get(4), "writers", n)? as u32,
                    events: num(f.get(5), "rmws", n)?,
                    ..ContentionRow::default()
                };
                self.rows.insert(key.clone(), row);
                self.last = Some(key);
            }
            Some("lock") => {
                let key = Key {
                    object: Object::Lock(f.get(3).with_context(|| format!("line {n}: kind missing"))?.to_string()),
                    class: class(f.get(1), n)?,
                    name: f.get(2).with_context(|| format!("line {n}: name missing"))?.to_string(),
                };
                let row = ContentionRow {
                    objects: num(f.get(4), "objects", n)?,
                    writers: num(f.get(5), "writers", n)? as u32,
                    events: num(f.get(6), "acquisitions", n)?,
                    holds: num(f.get(7), "holds", n)?,
                    hold_insns: num(f.get(8), "hold instructions", n)?,
                    funcs: BTreeMap::new(),
                };
                self.rows.insert(key.clone(), row);
                self.last = Some(key);
            }
            // later additions to the format
            _ => {}
        }
        Ok(())
    }

    /// Reads one `xf FUNCTION COUNT` line (line `n`).
    pub fn func(&mut self, f: &[&str], n: usize) -> Result<()> {
        let name = f.first().with_context(|| format!("line {n}: function missing"))?;
        let count = num(f.get(1), "count", n)?;
        let row = self
            .last
            .as_ref()
            .and_then(|k| self.rows.get_mut(k))
            .with_context(|| format!("line {n}: function line before any contention row"))?;
        *row.funcs.entry(name.to_string()).or_insert(0) += count;
        Ok(())
    }
}
