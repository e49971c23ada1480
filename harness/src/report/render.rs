//! The report's renderers: each draws the model of [`crate::report`] and
//! decides nothing. The terminal table ([`compact`]) and its layout
//! ([`layout`]), cell and verdict text and CSV ([`text`]), the HTML page
//! ([`html`]) with its plots ([`plots`], [`svg`]), the scaling view
//! ([`scaling`]: text, the HTML table and plots), JUnit XML for CI
//! ([`junit`]), and nightly trends as a table and a page ([`trend`]).

pub mod compact;
pub mod html;
pub mod junit;
pub mod layout;
pub mod plots;
pub mod scaling;
pub mod svg;
pub mod text;
pub mod trend;
