//! The HTML report's two pictures of the answer, hand-made SVG: the forest
//! plot (one row per compared cell, its relative change with the 95%
//! interval against the cell's threshold as a shaded band, coloured by its
//! verdict, each row a link to its cell) and a cell's boots (each boot a
//! dot, the median and its interval beside them, per variant, on a y axis
//! fitted to the data so that a 1% change shows); and a per-op cost
//! against vCPUs on a log2 axis (the scaling view's). Pure functions from
//! numbers to SVG text.

use std::fmt::Write;

use super::svg::{esc, fmt, frame, Point, B, H, L, PALETTE, R, T, W};

/// One row of the forest plot: a compared cell.
#[derive(Debug, Clone)]
pub struct ForestRow {
    /// What the row is: variant, benchmark, metric, vCPUs.
    pub label: String,
    /// Where the row links to (`#cell-…`).
    pub href: String,
    /// The variant's value against base, in percent: (change, lo, hi);
    /// None when the cell has no comparison.
    pub change: Option<(f64, f64, f64)>,
    /// The cell's threshold, in percent.
    pub threshold: f64,
    /// The colour of its verdict.
    pub colour: &'static str,
    /// The change and the verdict in words, at the row's right.
    pub text: String,
}

const FW: f64 = 900.0;
const LABEL: f64 = 370.0;
const TEXT: f64 = 190.0;
const ROW: f64 = 22.0;

/// A label cut to `n` characters (the whole one is the row's tooltip).
fn cut(s: &str, n: usize) -> String {
    if s.chars().count() > n {
        format!("{}…", s.chars().take(n - 1).collect::<String>())
    } else {
        s.to_string()
    }
}

/// The half-width of the forest plot's x axis in percent: every interval
/// and threshold inside with a margin, at least 0.5%.
fn half_range(rows: &[ForestRow]) -> f64 {
    rows.iter()
        .flat_map(|r| {
            let (c, lo, hi) = r.change.unwrap_or_default();
            [c.abs(), lo.abs(), hi.abs(), r.threshold]
        })
        .filter(|x| x.is_finite())
        .fold(0.5, f64::max)
        * 1.15
}

/// A tick step for an axis of half-width `m`: 1, 2 or 5 times a power of
/// ten, two or three ticks a side.
fn tick_step(m: f64) -> f64 {
    let raw = m / 2.5;
    let p = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|k| k * p)
        .find(|s| *s >= raw)
        .unwrap_or(p * 10.0)
}

/// The forest plot of `rows` (drawn in the given order).
pub fn forest(rows: &[ForestRow]) -> String {
    let h = T + 14.0 + ROW * rows.len().max(1) as f64 + B;
    let m = half_range(rows);
    let (x0, x1) = (LABEL + 10.0, FW - TEXT - 10.0);
    let px = |v: f64| x0 + (x1 - x0) * (v.clamp(-m, m) + m) / (2.0 * m);
    let top = T + 14.0;
    let bottom = h - B;
    let mut out = String::new();
    let _ = write!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" class="forest" viewBox="0 0 {FW} {h}" width="{FW}" height="{h}" font-family="sans-serif" font-size="11">"#
    );
    let step = tick_step(m);
    let k = (m / step).floor() as i64;
    for i in -k..=k {
        let v = step * i as f64;
        let label = if i == 0 { "0%".to_string() } else { format!("{v:+}%") };
        let _ = write!(
            out,
            r##"<line x1="{0:.1}" x2="{0:.1}" y1="{top}" y2="{bottom}" stroke="{1}"/><text x="{0:.1}" y="{2}" text-anchor="middle">{3}</text>"##,
            px(v),
            if i == 0 { "#666" } else { "#e4e4e4" },
            bottom + 14.0,
            label.replace('-', "−")
        );
    }
    let _ = write!(
        out,
        r#"<text x="{:.1}" y="{}" text-anchor="middle">the variant's value against base's, with its 95% interval (shaded: the threshold)</text>"#,
        (x0 + x1) / 2.0,
        bottom + 30.0
    );
    let _ = write!(
        out,
        r#"<text x="{:.1}" y="{}" text-anchor="middle">change</text><text x="{}" y="{}">verdict</text>"#,
        (x0 + x1) / 2.0,
        T + 4.0,
        x1 + 12.0,
        T + 4.0
    );
    for (i, r) in rows.iter().enumerate() {
        forest_row(&mut out, r, top + ROW * i as f64, &px, (x0, x1));
    }
    out.push_str("</svg>");
    out
}

/// One row: the label, the threshold band, the interval and its point,
/// the words; all inside a link to the cell.
fn forest_row(out: &mut String, r: &ForestRow, y: f64, px: &dyn Fn(f64) -> f64, (x0, x1): (f64, f64)) {
    let mid = y + ROW / 2.0;
    let _ = write!(
        out,
        r##"<a href="{}"><g class="forest-row"><title>{}: {}</title><rect x="0" y="{y:.1}" width="{FW}" height="{ROW}" fill="#fff" fill-opacity="0"/>"##,
        esc(&r.href),
        esc(&r.label),
        esc(&r.text)
    );
    let _ = write!(
        out,
        r##"<text class="forest-label" x="{}" y="{:.1}" text-anchor="end" fill="#1a4f8b">{}</text>"##,
        LABEL,
        mid + 4.0,
        esc(&cut(&r.label, 60))
    );
    let (a, b) = (px(-r.threshold), px(r.threshold));
    let _ = write!(
        out,
        r##"<rect class="threshold" x="{a:.1}" y="{:.1}" width="{:.1}" height="{:.1}" fill="#000" fill-opacity="0.07"/>"##,
        y + 2.0,
        (b - a).max(0.5),
        ROW - 4.0
    );
    if let Some((c, lo, hi)) = r.change {
        let _ = write!(
            out,
            r#"<line class="ci" x1="{:.1}" x2="{:.1}" y1="{mid:.1}" y2="{mid:.1}" stroke="{2}" stroke-width="2"/><circle cx="{3:.1}" cy="{mid:.1}" r="4.5" fill="{2}"/>"#,
            px(lo),
            px(hi),
            r.colour,
            px(c)
        );
    } else {
        let _ = write!(
            out,
            r##"<text x="{:.1}" y="{:.1}" text-anchor="middle" fill="#777">no comparison</text>"##,
            (x0 + x1) / 2.0,
            mid + 4.0
        );
    }
    let _ = write!(
        out,
        r#"<text class="forest-text" x="{}" y="{:.1}" fill="{}">{}</text></g></a>"#,
        x1 + 12.0,
        mid + 4.0,
        r.colour,
        esc(&cut(&r.text, 30))
    );
}

/// One variant's boots in a cell's plot.
#[derive(Debug, Clone)]
pub struct Column {
    /// Variant.
    pub name: String,
    /// One value per boot.
    pub boots: Vec<f64>,
    /// Median and interval (`ci`: a 95% CI, else the range of too few boots).
    pub summary: Option<(f64, f64, f64, bool)>,
}

/// The y range of a cell's plot: its data with a margin of 15% of their
/// spread on both sides (not from 0, so that a change of 1% shows).
pub fn fitted(vals: impl Iterator<Item = f64>) -> (f64, f64) {
    let v: Vec<f64> = vals.filter(|x| x.is_finite()).collect();
    let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if !lo.is_finite() {
        return (0.0, 1.0);
    }
    let spread = if hi > lo { hi - lo } else { lo.abs().max(1.0) * 0.01 };
    (lo - spread * 0.15, hi + spread * 0.15)
}

/// A cell's boots: per variant a column of dots (one a boot) and beside
/// them the median with its interval (dashed: a range, too few boots for
/// a CI), on a y axis fitted to the data.
pub fn cell(columns: &[Column], ylabel: &str) -> String {
    let all = columns.iter().flat_map(|c| {
        let s = c.summary.map(|(m, lo, hi, _)| [m, lo, hi]).unwrap_or([f64::NAN; 3]);
        c.boots.iter().copied().chain(s)
    });
    let (ylo, yhi) = fitted(all);
    let mut out = String::new();
    frame(&mut out, ylo, yhi, ylabel);
    let n = columns.len().max(1) as f64;
    let py = |y: f64| H - B - (H - T - B) * ((y - ylo) / (yhi - ylo));
    for (i, c) in columns.iter().enumerate() {
        let colour = PALETTE[i % PALETTE.len()];
        let cx = L + (W - L - R) * (i as f64 + 0.5) / n;
        for (j, v) in c.boots.iter().enumerate() {
            let jitter = ((j * 37 % 11) as f64 - 5.0) * 1.6;
            let _ = write!(
                out,
                r#"<circle class="boot" cx="{:.1}" cy="{:.1}" r="3.5" fill="{colour}" fill-opacity="0.75"><title>{} boot {j}: {}</title></circle>"#,
                cx - 14.0 + jitter,
                py(*v),
                esc(&c.name),
                fmt(*v)
            );
        }
        if let Some((m, lo, hi, ci)) = c.summary {
            let (dash, what) = if ci {
                ("", "95% CI")
            } else {
                (r#" stroke-dasharray="3 2""#, "range")
            };
            let _ = write!(
                out,
                r#"<line class="interval" x1="{0:.1}" x2="{0:.1}" y1="{1:.1}" y2="{2:.1}" stroke="{colour}" stroke-width="2"{dash}><title>{3}: median {4}, {what} [{5}, {6}]</title></line><line x1="{7:.1}" x2="{8:.1}" y1="{9:.1}" y2="{9:.1}" stroke="{colour}" stroke-width="3"/>"#,
                cx + 14.0,
                py(lo),
                py(hi),
                esc(&c.name),
                fmt(m),
                fmt(lo),
                fmt(hi),
                cx + 6.0,
                cx + 22.0,
                py(m)
            );
        }
        let _ = write!(
            out,
            r#"<text x="{cx:.1}" y="{}" text-anchor="middle">{}</text>"#,
            H - B + 16.0,
            esc(&cut(&c.name, 26))
        );
    }
    out.push_str("</svg>");
    out
}

/// Per-op cost against vCPUs on a log2 x axis, one line a side: the
/// median at each count, the boots' range as a dashed bar, on a y axis
/// fitted to the data; a tick at every count measured.
pub fn log2_curves(series: &[(String, Vec<Point>)], ylabel: &str) -> String {
    let xs = super::svg::measured_xs(series);
    let (a, z) = (
        xs.first().map_or(0.0, |x| x.log2()),
        xs.last().map_or(0.0, |x| x.log2()),
    );
    let px = |x: f64| L + 10.0 + (W - L - R - 20.0) * if z > a { (x.log2() - a) / (z - a) } else { 0.5 };
    let (ylo, yhi) = fitted(
        series
            .iter()
            .flat_map(|(_, p)| p.iter().flat_map(|p| [p.lo, p.y, p.hi])),
    );
    let py = |y: f64| H - B - (H - T - B) * ((y - ylo) / (yhi - ylo));
    let mut out = String::new();
    frame(&mut out, ylo, yhi, ylabel);
    super::svg::x_axis(&mut out, &xs, px, "vCPUs (log2 scale)");
    for (i, (name, pts)) in series.iter().enumerate() {
        let dx = (i as f64 - (series.len() as f64 - 1.0) / 2.0) * 3.0;
        let at: Vec<(f64, [f64; 3], &Point)> = pts
            .iter()
            .map(|p| (px(p.x) + dx, [p.lo, p.y, p.hi].map(py), p))
            .collect();
        log2_curve(&mut out, i, name, &at);
    }
    out.push_str("</svg>");
    out
}

/// Side `i`'s line, its points (x, and y of its range's low end, median
/// and high end, in pixels) with their range bars, and its legend entry.
fn log2_curve(out: &mut String, i: usize, name: &str, at: &[(f64, [f64; 3], &Point)]) {
    let c = PALETTE[i % PALETTE.len()];
    let line: Vec<String> = at.iter().map(|(x, y, _)| format!("{x:.1},{:.1}", y[1])).collect();
    let _ = write!(
        out,
        r#"<polyline class="variant" points="{}" fill="none" stroke="{c}" stroke-width="2"/>"#,
        line.join(" ")
    );
    for (x, [lo, y, hi], p) in at {
        let _ = write!(
            out,
            r#"<line class="interval" x1="{x:.1}" x2="{x:.1}" y1="{lo:.1}" y2="{hi:.1}" stroke="{c}" stroke-dasharray="2 2"/><circle cx="{x:.1}" cy="{y:.1}" r="3" fill="{c}"><title>{}: median {} at {} vCPUs, boots [{}, {}]</title></circle>"#,
            esc(name),
            fmt(p.y),
            p.x,
            fmt(p.lo),
            fmt(p.hi)
        );
    }
    super::svg::legend(out, i, c, &cut(name, 20));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attr(tag: &str, name: &str) -> f64 {
        let i = tag.find(&format!(" {name}=\"")).unwrap() + name.len() + 3;
        tag[i..].split('"').next().unwrap().parse().unwrap()
    }

    #[test]
    fn a_cells_axis_is_fitted_so_a_one_percent_change_shows() {
        let base = [2819.3, 2821.0, 2826.2, 2823.3, 2824.3];
        let variant = [2789.1, 2790.0, 2788.1, 2791.0, 2790.0];
        let col = |name: &str, b: &[f64]| Column {
            name: name.into(),
            boots: b.to_vec(),
            summary: Some((b[2], b[0], b[4], false)),
        };
        let s = cell(&[col("base", &base), col("v", &variant)], "execs/Ginsn");
        let ys: Vec<f64> = s
            .split(r#"<circle class="boot""#)
            .skip(1)
            .map(|t| attr(t, "cy"))
            .collect();
        assert_eq!(ys.len(), 10, "each boot a dot");
        let lowest_base = ys[..5].iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let highest_variant = ys[5..].iter().copied().fold(f64::INFINITY, f64::min);
        // 1.2% apart: more than half the plot's height between them (from 0 it was 0.4%)
        assert!(highest_variant - lowest_base > (H - T - B) * 0.5, "{ys:?}");
        assert!(s.contains(r#"stroke-dasharray="3 2""#), "a range of 5 boots is dashed");
        assert_eq!(fitted([5.0, 5.0].into_iter()), (5.0 - 0.0075, 5.0 + 0.0075));
    }

    #[test]
    fn forest_rows_link_to_their_cells_with_the_threshold_shaded() {
        let row = |label: &str, c: Option<(f64, f64, f64)>| ForestRow {
            label: label.into(),
            href: format!("#cell-{label}"),
            change: c,
            threshold: 0.5,
            colour: "#d62728",
            text: "−1.2% ±0.1 regressed".into(),
        };
        let s = forest(&[row("a<b>", Some((-1.2, -1.3, -1.1))), row("c", None)]);
        assert_eq!(s.matches(r#"<g class="forest-row">"#).count(), 2);
        assert!(s.contains(r##"<a href="#cell-a&lt;b&gt;">"##) && s.contains("no comparison"));
        assert!(
            s.contains(">−1%<") && s.contains(">0%<") && s.contains(">+1%<"),
            "ticks of 1%: {s}"
        );
        assert_eq!((tick_step(1.5), tick_step(0.6), tick_step(12.0)), (1.0, 0.5, 5.0));
        let band: Vec<&str> = s.split(r#"<rect class="threshold""#).skip(1).collect();
        let circle = s.split("<circle").nth(1).unwrap();
        let (bx, bw) = (attr(band[0], "x"), attr(band[0], "width"));
        let zero = bx + bw / 2.0;
        assert!(attr(circle, "cx") < bx, "a change of −1.2% lies left of the ±0.5% band");
        assert!(
            ((attr(circle, "cx") - zero) / (bw / 2.0) + 2.4).abs() < 0.01,
            "to scale: −1.2 is 2.4 thresholds"
        );
    }

    #[test]
    fn a_log2_axis_spaces_doublings_evenly() {
        let p = |x: f64, y: f64| Point {
            x,
            y,
            lo: y - 1.0,
            hi: y + 1.0,
            ci: false,
        };
        let s = log2_curves(
            &[
                ("base".into(), vec![p(2.0, 100.0), p(8.0, 110.0), p(256.0, 130.0)]),
                ("v<1>".into(), vec![p(2.0, 100.0), p(8.0, 150.0), p(256.0, 400.0)]),
            ],
            "instructions per op",
        );
        let xs: Vec<f64> = s.split("<circle").skip(1).take(3).map(|t| attr(t, "cx")).collect();
        // 2 -> 8 is two doublings, 8 -> 256 five
        assert!((((xs[1] - xs[0]) / (xs[2] - xs[1])) - 2.0 / 5.0).abs() < 0.01, "{xs:?}");
        assert_eq!(s.matches(r#"class="variant""#).count(), 2);
        assert!(s.contains("v&lt;1&gt;") && s.contains("vCPUs (log2 scale)") && s.contains(">256<"));
        assert_eq!(
            s.matches(r#"stroke-dasharray="2 2""#).count(),
            6,
            "each count's boots a range bar"
        );
    }
}
