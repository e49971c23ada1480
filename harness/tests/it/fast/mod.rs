//! Tests without a kernel or QEMU: fixtures, synthetic runs, the docs, the layering rule.

mod docs;
mod history;
mod html;
mod layers;
