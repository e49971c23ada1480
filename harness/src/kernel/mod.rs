//! The kernel side: a work tree the harness owns (never the user's),
//! patch series applied or reverted in it, config fragments merged, and one
//! build per variant, cached by content so reruns and resumes do not rebuild.

pub mod build;
mod cache;
pub mod fault;
pub mod hunks;
pub mod kconfig;
pub mod mail;
pub mod patch;
pub mod series;
pub mod stack;
pub mod tree;
