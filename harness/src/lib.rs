//! harness: tells kernel maintainers, with evidence, whether a patch series
//! makes Linux faster or slower at scale. See ARCHITECTURE.md for the map.
#![deny(missing_docs)]

pub mod bench;
pub mod bisect;
pub mod boot;
pub mod builtin;
pub mod calibrate;
pub mod check;
pub mod cli;
pub mod config;
pub mod coverage;
pub mod finish;
pub mod gc;
pub mod guest;
pub mod history;
pub mod host;
pub mod image;
pub mod kernel;
pub mod nightly;
pub mod pipeline;
pub mod plan;
pub mod proc;
pub mod profile;
pub mod records;
pub mod report;
pub mod slurm;
pub mod stats;
pub mod store;
#[cfg(test)]
mod testutil;
pub mod trial;
pub mod ui;
pub mod util;
pub mod vm;
pub mod vocab;
pub mod workdir;
