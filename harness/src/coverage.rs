//! Which benchmarks execute what a series changes: the model (each changed
//! function's calls per op per benchmark, the table and its words,
//! `coverage.json`) in [`model`], and the coverage cache of the work
//! directory (each base kernel's calls per op as its last run kept them,
//! read by `check` and `try --covering` without a boot) in [`cache`]. A
//! run's coverage step (`pipeline/coverage.rs`) fills both; the report
//! shows the model.

pub mod cache;
pub mod model;

pub use cache::{
    base_identity, cache_file, changed_functions, from_cache, kernel_symbols, remember, source_files, Cached,
};
pub use model::{mean_calls, read, table, text, CallsPerOp, Changes, Coverage, FunctionRow, FILE};
