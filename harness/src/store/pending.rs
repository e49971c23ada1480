//! What the runs not finished yet still need from the work directory, for
//! `gc` ([`crate::gc::Needed`]): a run is unfinished while a job of its
//! plan has no `boot_end` in its records (its shards' counted; its profile
//! boots' too), and it needs the kernels its build recorded for the
//! variants of those jobs, and its images.

use std::collections::BTreeSet;
use std::path::Path;

use super::{Run, PROFILE_BOOTS_DIR};
use crate::gc::Needed;
use crate::plan::{self, JobId};
use crate::records::Event;

/// What the unfinished runs under `runs_dir` need. A directory that is
/// not a readable run is no run and needs nothing.
pub fn needed(runs_dir: &Path) -> Needed {
    let mut out = Needed::default();
    let Ok(rd) = std::fs::read_dir(runs_dir) else {
        return out;
    };
    let mut dirs: Vec<_> = rd.flatten().map(|e| e.path()).collect();
    dirs.sort();
    for dir in dirs.iter().filter(|d| d.join("run.json").is_file()) {
        let Ok(run) = Run::open(dir) else { continue };
        let Ok(events) = run.events() else { continue };
        let mut owes = owed(&run, &events);
        if let Ok(Some(sub)) = run.profile_boots() {
            owes.extend(sub.events().map(|e| owed(&sub, &e)).unwrap_or_default());
        }
        if owes.is_empty() {
            continue;
        }
        for key in keys(&events, &owes) {
            out.kernels.entry(key).or_default().insert(run.id.clone());
        }
        out.runs.insert(run.id.clone());
        out.runs.insert(format!("{}.{PROFILE_BOOTS_DIR}", run.id));
    }
    out
}

/// The variants of `run`'s planned jobs that have no `boot_end` in `events`.
fn owed(run: &Run, events: &[Event]) -> BTreeSet<String> {
    let Ok(meta) = run.meta() else {
        return BTreeSet::new();
    };
    let ended: BTreeSet<JobId> = events
        .iter()
        .filter_map(|e| match e {
            Event::BootEnd {
                variant, vcpus, boot, ..
            } => Some(JobId {
                variant: variant.clone(),
                vcpus: *vcpus,
                boot: *boot,
            }),
            _ => None,
        })
        .collect();
    plan::boot_jobs(&meta.matrix)
        .into_iter()
        .filter(|j| !ended.contains(&j.job_id()))
        .map(|j| j.variant)
        .collect()
}

/// The cache key of each variant in `variants`, from its last build event.
fn keys(events: &[Event], variants: &BTreeSet<String>) -> BTreeSet<String> {
    let mut last = std::collections::BTreeMap::new();
    for e in events {
        if let Event::Build {
            variant,
            key: Some(key),
            ..
        } = e
        {
            last.insert(variant.as_str(), key.as_str());
        }
    }
    variants
        .iter()
        .filter_map(|v| last.get(v.as_str()).map(|k| k.to_string()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::tests::meta_with;

    fn build(variant: &str, key: &str) -> Event {
        Event::Build {
            variant: variant.into(),
            key: Some(key.into()),
            build_s: 1.0,
            cached: false,
            release: None,
            errors: vec![],
            error: None,
            failed: None,
        }
    }

    fn end(variant: &str, boot: u32) -> Event {
        Event::BootEnd {
            variant: variant.into(),
            vcpus: 2,
            boot,
            boot_id: Some(format!("{variant}-{boot}")),
            findings: vec![],
            error: None,
            busy_wall_per_guest_s: None,
            failed: None,
        }
    }

    /// A run directory `dir` (2 boots each of base and v at 2 vCPUs) with
    /// `events` in `events.jsonl` and each shard's in its own.
    fn run(dir: &Path, events: &[Event], shards: &[(&str, Vec<Event>)]) {
        let write = |d: &Path, events: &[Event]| {
            std::fs::create_dir_all(d).unwrap();
            let lines: String = events
                .iter()
                .map(|e| serde_json::to_string(e).unwrap() + "\n")
                .collect();
            std::fs::write(d.join("events.jsonl"), lines).unwrap();
        };
        write(dir, events);
        let meta = meta_with(&["base", "v"], "{boots: 2, repetitions: 1}");
        std::fs::write(dir.join("run.json"), serde_json::to_vec(&meta).unwrap()).unwrap();
        for (name, events) in shards {
            write(&dir.join("shards").join(name), events);
        }
    }

    /// Issue 30: gc keeps what a run with planned jobs not ended needs: a
    /// build whose shards have not run, a shard that stopped halfway, a
    /// run whose profile boots are owed; a finished run and a directory
    /// that is no run need nothing.
    #[test]
    fn unfinished_runs_need_the_kernels_of_the_jobs_they_owe() {
        let tmp = tempfile::tempdir().unwrap();
        let runs = tmp.path();
        let all = |v: &str| [end(v, 0), end(v, 1)];
        // built, no shard ran
        run(&runs.join("built"), &[build("base", "k1"), build("v", "k2")], &[]);
        // shard 0 ended base's jobs, shard 1 one of v's
        let s0 = all("base").to_vec();
        let s1 = vec![end("v", 0)];
        run(
            &runs.join("half"),
            &[build("base", "k3"), build("v", "k4")],
            &[("0-of-2", s0), ("1-of-2", s1)],
        );
        // every job ended (v rebuilt: its last key counts, were it owed)
        let mut done = vec![build("base", "k5"), build("v", "k6"), build("v", "k7")];
        done.extend(all("base").into_iter().chain(all("v")));
        run(&runs.join("done"), &done, &[]);
        // the run's jobs ended, its profile boots did not
        run(&runs.join("profiled"), &[build("base", "k8"), build("v", "k9")], &[]);
        std::fs::write(runs.join("profiled/events.jsonl"), {
            let mut l = String::new();
            for e in [build("base", "k8"), build("v", "k9")]
                .iter()
                .chain(&all("base"))
                .chain(&all("v"))
            {
                l += &(serde_json::to_string(e).unwrap() + "\n");
            }
            l
        })
        .unwrap();
        run(&runs.join("profiled").join(PROFILE_BOOTS_DIR), &all("base"), &[]);
        std::fs::create_dir_all(runs.join("not-a-run/shards")).unwrap();

        let got = needed(runs);
        let kernels: Vec<(&str, Vec<&str>)> = got
            .kernels
            .iter()
            .map(|(k, rs)| (k.as_str(), rs.iter().map(String::as_str).collect()))
            .collect();
        assert_eq!(
            kernels,
            [
                ("k1", vec!["built"]),
                ("k2", vec!["built"]),
                ("k4", vec!["half"]),
                ("k9", vec!["profiled"]),
            ]
        );
        let ids: Vec<&str> = got.runs.iter().map(String::as_str).collect();
        assert_eq!(
            ids,
            [
                "built",
                "built.profile-boots",
                "half",
                "half.profile-boots",
                "profiled",
                "profiled.profile-boots"
            ]
        );
    }
}
