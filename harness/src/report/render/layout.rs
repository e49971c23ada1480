//! How the report's text is laid out: the width it is drawn to (the
//! terminal's, else 100), words wrapped to it, and tables of one line per
//! row whose numbers and names are never cut.

use comfy_table::{CellAlignment, ColumnConstraint, ContentArrangement, Table, TableStyle, Width};

use super::text::printable_lines;
use crate::ui::printable;

/// The width of text printed where no terminal says its own: a pipe, a
/// file, a mail.
pub const DEFAULT_WIDTH: usize = 100;

/// The width the tables are drawn to: `$COLUMNS`, else the terminal's
/// (stdout), else [`DEFAULT_WIDTH`].
pub fn terminal_width() -> usize {
    if let Some(n) = std::env::var("COLUMNS")
        .ok()
        .and_then(|c| c.trim().parse::<usize>().ok())
    {
        return n.max(40);
    }
    Table::new().width().map_or(DEFAULT_WIDTH, |w| (w as usize).max(40))
}

/// Lines at most `width` characters long: `text` broken at spaces, each
/// continuation indented by `indent` spaces (a word longer than a line
/// stays whole on its own line).
pub fn wrap(text: &str, width: usize, indent: usize) -> String {
    let mut out = String::new();
    for para in text.split('\n') {
        let lead = para.len() - para.trim_start_matches(' ').len();
        let mut line = " ".repeat(lead);
        let mut bare = true;
        for word in para.split(' ').filter(|w| !w.is_empty()) {
            let len = line.chars().count();
            if !bare && len + 1 + word.chars().count() > width {
                out.push_str(&line);
                out.push('\n');
                line = " ".repeat(indent.max(lead));
            } else if !bare {
                line.push(' ');
            }
            line.push_str(word);
            bare = false;
        }
        out.push_str(&line);
        out.push('\n');
    }
    out
}

/// A table of one line per row without rules but under its header, the
/// columns `right` right-aligned, two spaces apart (one after column 2, the
/// vCPUs: right-aligned numbers on both sides of it), drawn to `width`
/// (guest text escaped).
pub fn lines_table(header: &[&str], rows: Vec<Vec<String>>, right: &[usize], width: usize) -> String {
    let mut t = Table::new();
    t.load_style(TableStyle::new().header_separator(comfy_table::LineStyle::none().fill('─')))
        .set_content_arrangement(ContentArrangement::Dynamic)
        .set_width(width.min(u16::MAX as usize) as u16);
    t.set_header(header.iter().map(|h| printable(h)).collect::<Vec<_>>());
    for cells in rows {
        t.add_row(cells.iter().map(|c| printable_lines(c)).collect::<Vec<_>>());
    }
    let cols = t.column_count();
    let gaps: Vec<u16> = (0..cols)
        .map(|i| match i {
            _ if i + 1 == cols => 0,
            2 => 1,
            _ => 2,
        })
        .collect();
    let least = least_widths(&t, &gaps, width);
    for i in 0..cols {
        if let Some(c) = t.column_mut(i) {
            c.set_padding((0, gaps[i]));
            c.set_constraint(ColumnConstraint::LowerBoundary(Width::Fixed(least[i] + gaps[i])));
            if right.contains(&i) {
                c.set_cell_alignment(CellAlignment::Right);
            }
        }
    }
    let text: Vec<String> = t.lines().map(|l| l.trim_end().to_string()).collect();
    text.join("\n") + "\n"
}

/// The least widths (padding excluded) that keep the columns of `t`
/// unbroken: each cell's whole line where all of those fit `width` with
/// the `gaps`, else each word: a table too wide for `width` runs over it
/// rather than break a number or a name (a cut number reads as another).
fn least_widths(t: &Table, gaps: &[u16], width: usize) -> Vec<u16> {
    let longest = |i: usize, unit: &dyn Fn(&str) -> Vec<usize>| {
        let head = t.header().and_then(|h| h.cell_iter().nth(i)).map(|c| c.content());
        let head = head
            .iter()
            .flat_map(|h| h.split_whitespace().map(|w| w.chars().count()))
            .max();
        let cells = t
            .row_iter()
            .filter_map(|r| r.cell_iter().nth(i))
            .flat_map(|c| unit(&c.content()))
            .max();
        head.unwrap_or(0).max(cells.unwrap_or(0)) as u16
    };
    let lines = |s: &str| s.lines().map(|l| l.chars().count()).collect::<Vec<_>>();
    let words = |s: &str| s.split_whitespace().map(|w| w.chars().count()).collect::<Vec<_>>();
    let need = |w: &[u16]| w.iter().chain(gaps).map(|&x| x as usize).sum::<usize>();
    let whole: Vec<u16> = (0..gaps.len()).map(|i| longest(i, &lines)).collect();
    if need(&whole) <= width {
        return whole;
    }
    (0..gaps.len()).map(|i| longest(i, &words)).collect()
}
