//! Tests without a kernel or QEMU: fixtures, synthetic runs, the docs, the layering rule.

mod check;
mod docs;
mod history;
mod html;
mod keys;
mod layers;
mod record_types;
mod report_files;
mod schema;
