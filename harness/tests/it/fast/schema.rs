//! Issue 33: the run files have JSON Schemas generated from the record
//! types, checked in under `docs/schema/`, and every fixture run's files
//! satisfy them. Regenerate after a deliberate format change with
//! `HARNESS_BLESS=1 cargo test --test it fast::schema`.

use std::path::{Path, PathBuf};

use crate::common::repo;

fn schema_dir() -> PathBuf {
    repo().join("docs/schema")
}

#[test]
fn the_checked_in_schemas_are_the_record_types() {
    let bless = std::env::var_os("HARNESS_BLESS").is_some();
    let mut stale = Vec::new();
    for (name, schema) in harness::records::schema::all() {
        let text = serde_json::to_string_pretty(&schema).unwrap() + "\n";
        let path = schema_dir().join(name);
        if bless {
            std::fs::create_dir_all(schema_dir()).unwrap();
            std::fs::write(&path, &text).unwrap();
        } else if std::fs::read_to_string(&path).ok().as_deref() != Some(text.as_str()) {
            stale.push(path.display().to_string());
        }
    }
    assert!(
        stale.is_empty(),
        "the run files' format changed: {} differ from the record types; if that is meant, run HARNESS_BLESS=1 cargo test --test it fast::schema and commit the diff",
        stale.join(", ")
    );
}

/// Every JSON document of `file` (the whole file, or each line of a
/// `.jsonl`), validated against `schema`: the errors, each naming its line.
fn violations(schema: &serde_json::Value, file: &Path) -> Vec<String> {
    let v = jsonschema::validator_for(schema).expect("a valid schema");
    let text = std::fs::read_to_string(file).unwrap();
    let docs: Vec<(usize, &str)> = if file.extension().is_some_and(|e| e == "jsonl") {
        text.lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty())
            .map(|(i, l)| (i + 1, l))
            .collect()
    } else {
        vec![(1, text.as_str())]
    };
    let mut out = Vec::new();
    for (line, doc) in docs {
        let json: serde_json::Value = serde_json::from_str(doc).unwrap();
        out.extend(
            v.iter_errors(&json)
                .map(|e| format!("{}:{line}: {} at {}", file.display(), e, e.instance_path())),
        );
    }
    out
}

#[test]
fn every_fixture_run_satisfies_the_schemas() {
    let schemas: std::collections::BTreeMap<_, _> = harness::records::schema::all().into_iter().collect();
    let fixtures = repo().join("harness/tests/fixtures");
    let mut runs = Vec::new();
    for group in ["runs", "history-runs"] {
        for e in std::fs::read_dir(fixtures.join(group)).unwrap() {
            let p = e.unwrap().path();
            if p.join("run.json").is_file() {
                runs.push(p);
            }
        }
    }
    assert!(runs.len() >= 6, "{runs:?}");
    let mut found = Vec::new();
    for run in &runs {
        for (file, schema) in [
            ("run.json", "run.schema.json"),
            ("events.jsonl", "event.schema.json"),
            ("samples.jsonl", "sample.schema.json"),
        ] {
            found.extend(violations(&schemas[schema], &run.join(file)));
        }
    }
    assert!(found.is_empty(), "{} violation(s):\n{}", found.len(), found.join("\n"));
    // the check can fail: a sample without its value is refused
    let bad = std::env::temp_dir().join(format!("harness-schema-{}.jsonl", std::process::id()));
    let line = std::fs::read_to_string(runs[0].join("samples.jsonl")).unwrap();
    let mut sample: serde_json::Value = serde_json::from_str(line.lines().next().unwrap()).unwrap();
    sample.as_object_mut().unwrap().remove("value");
    std::fs::write(&bad, sample.to_string()).unwrap();
    let v = violations(&schemas["sample.schema.json"], &bad);
    let _ = std::fs::remove_file(&bad);
    assert!(
        v.len() == 1 && v[0].contains("\"value\" is a required property"),
        "{v:?}"
    );
}
