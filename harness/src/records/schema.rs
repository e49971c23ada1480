//! JSON Schemas of the run files, generated from the record types
//! (`schemars`, which reads the serde attributes): `run.json` is a
//! [`RunMeta`], each line of `events.jsonl` an [`Event`], each line of
//! `samples.jsonl` a [`Sample`]. The schemas are checked in under
//! `docs/schema/`; a test fails when the types and the files differ, so a
//! change of the on-disk format is one a reviewer sees, and checks every
//! fixture run's files against them.

use super::{Event, RunMeta, Sample};

/// `(file name under docs/schema/, schema)` of each run file.
pub fn all() -> Vec<(&'static str, serde_json::Value)> {
    let mut run = schemars::schema_for!(RunMeta).to_value();
    // serde aliases, which schemars does not see: older runs' names
    alias(&mut run, "Statistics", "threshold", "floor");
    vec![
        ("run.schema.json", run),
        ("event.schema.json", schemars::schema_for!(Event).to_value()),
        ("sample.schema.json", schemars::schema_for!(Sample).to_value()),
    ]
}

/// Lets the required property `name` of the definition `def` be spelt
/// `old` instead (a `#[serde(alias)]`): one of the two is required.
fn alias(schema: &mut serde_json::Value, def: &str, name: &str, old: &str) {
    let Some(d) = schema.pointer_mut(&format!("/$defs/{def}")) else {
        panic!("no definition {def} in the schema")
    };
    if let Some(r) = d.get_mut("required").and_then(|r| r.as_array_mut()) {
        r.retain(|x| x != name);
    }
    let prop = d["properties"][name].clone();
    d["properties"][old] = prop;
    d["oneOf"] = serde_json::json!([{ "required": [name] }, { "required": [old] }]);
}
