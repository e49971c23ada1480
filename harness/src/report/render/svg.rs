//! Hand-made SVG plots for the HTML report: a scaling curve (median and its
//! interval against vCPUs on a linear axis from 0, one line per variant, each
//! interval bar on its point; a linear-scaling reference only when asked, for
//! throughput whose workers follow the vCPU count), a differential profile's
//! bars (the forest plot and a cell's boots are in `plots.rs`); and a nightly trend (median and interval per night,
//! change points marked, each point a link to its run's report). Pure functions from numbers to SVG text; no fonts or
//! external files needed.

use std::fmt::Write;

/// Colours of variants, in order (base first).
pub const PALETTE: &[&str] = &[
    "#222222", "#d62728", "#1f77b4", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#17becf",
];

/// One point of a curve: x, median, interval.
#[derive(Debug, Clone, Copy)]
pub struct Point {
    /// vCPUs.
    pub x: f64,
    /// Median.
    pub y: f64,
    /// Interval low.
    pub lo: f64,
    /// Interval high.
    pub hi: f64,
    /// The interval is a 95% CI (false: the range of too few boots).
    pub ci: bool,
}

pub(super) const W: f64 = 560.0;
pub(super) const H: f64 = 300.0;
pub(super) const L: f64 = 70.0;
pub(super) const R: f64 = 150.0;
pub(super) const T: f64 = 20.0;
pub(super) const B: f64 = 40.0;

pub(super) fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

pub(super) fn fmt(v: f64) -> String {
    crate::report::num(v)
}

pub(super) fn frame(out: &mut String, ylo: f64, yhi: f64, ylabel: &str) {
    let _ = write!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {W} {H}" width="{W}" height="{H}" font-family="sans-serif" font-size="11">"#
    );
    let _ = write!(
        out,
        r##"<rect x="{L}" y="{T}" width="{}" height="{}" fill="none" stroke="#999"/>"##,
        W - L - R,
        H - T - B
    );
    for i in 0..=4 {
        let v = ylo + (yhi - ylo) * i as f64 / 4.0;
        let y = H - B - (H - T - B) * i as f64 / 4.0;
        let _ = write!(
            out,
            r##"<line x1="{L}" x2="{}" y1="{y:.1}" y2="{y:.1}" stroke="#eee"/><text x="{}" y="{:.1}" text-anchor="end">{}</text>"##,
            W - R,
            L - 4.0,
            y + 4.0,
            fmt(v)
        );
    }
    let _ = write!(
        out,
        r#"<text x="12" y="{}" transform="rotate(-90 12 {})" text-anchor="middle">{}</text>"#,
        H / 2.0,
        H / 2.0,
        esc(ylabel)
    );
}

fn yrange(vals: impl Iterator<Item = f64>) -> (f64, f64) {
    let v: Vec<f64> = vals.filter(|x| x.is_finite()).collect();
    let lo = v.iter().cloned().fold(f64::INFINITY, f64::min);
    let hi = v.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    if !lo.is_finite() {
        return (0.0, 1.0);
    }
    let lo = lo.min(0.0);
    let hi = if hi <= lo { lo + 1.0 } else { hi * 1.05 };
    (lo, hi)
}

/// The x positions and the y scale of a scaling plot.
struct Axes {
    xmax: f64,
    ylo: f64,
    yhi: f64,
}

impl Axes {
    fn px(&self, x: f64) -> f64 {
        L + 10.0 + (W - L - R - 20.0) * x / self.xmax
    }

    fn py(&self, y: f64) -> f64 {
        H - B - (H - T - B) * ((y.min(self.yhi) - self.ylo) / (self.yhi - self.ylo))
    }
}

/// Scaling curve: one polyline per variant with an interval bar on each point
/// (dashed when it is only the range of too few boots), x to scale from 0 vCPUs;
/// with `linear_reference`, a dashed linear-scaling line through base's first
/// point.
pub fn scaling(series: &[(String, Vec<Point>)], ylabel: &str, linear_reference: bool) -> String {
    let xs = measured_xs(series);
    let reference: Vec<(f64, f64)> = match series.first().and_then(|(_, p)| p.first()) {
        Some(p0) if linear_reference && xs.len() > 1 && p0.x > 0.0 => {
            xs.iter().map(|&x| (x, p0.y * x / p0.x)).collect()
        }
        _ => vec![],
    };
    let data_hi = series.iter().flat_map(|(_, p)| p.iter().map(|p| p.hi.max(p.y)));
    let (ylo, yhi) = yrange(data_hi.chain(std::iter::once(0.0)));
    let ax = Axes {
        xmax: xs.last().copied().unwrap_or(1.0).max(1.0),
        ylo,
        yhi,
    };
    let mut out = String::new();
    frame(&mut out, ylo, yhi, ylabel);
    let ticks: Vec<f64> = std::iter::once(0.0).chain(xs.iter().copied()).collect();
    x_axis(&mut out, &ticks, |x| ax.px(x), "vCPUs");
    if !reference.is_empty() {
        let pts: Vec<String> = reference
            .iter()
            .map(|(x, y)| format!("{:.1},{:.1}", ax.px(*x), ax.py(*y)))
            .collect();
        let _ = write!(
            out,
            r##"<polyline class="reference" points="{}" fill="none" stroke="#bbb" stroke-dasharray="4 3"/>"##,
            pts.join(" ")
        );
    }
    for (i, (name, pts)) in series.iter().enumerate() {
        curve(&mut out, &ax, (i, series.len()), name, pts);
    }
    if !reference.is_empty() {
        let ly = T + 14.0 + series.len() as f64 * 16.0;
        let _ = write!(
            out,
            r##"<line x1="{}" x2="{}" y1="{}" y2="{}" stroke="#bbb" stroke-dasharray="4 3"/><text x="{}" y="{}">linear</text>"##,
            W - R + 10.0,
            W - R + 20.0,
            ly - 4.0,
            ly - 4.0,
            W - R + 24.0,
            ly
        );
    }
    out.push_str("</svg>");
    out
}

/// Every vCPU count the series measured, ascending, once.
pub(super) fn measured_xs(series: &[(String, Vec<Point>)]) -> Vec<f64> {
    let mut v: Vec<f64> = series.iter().flat_map(|(_, p)| p.iter().map(|p| p.x)).collect();
    v.sort_by(f64::total_cmp);
    v.dedup();
    v
}

/// The vCPU axis: a tick at each of `ticks`, placed by `px`, and `label`
/// under them.
pub(super) fn x_axis(out: &mut String, ticks: &[f64], px: impl Fn(f64) -> f64, label: &str) {
    for &x in ticks {
        let _ = write!(
            out,
            r##"<line x1="{0:.1}" x2="{0:.1}" y1="{1}" y2="{2}" stroke="#999"/><text x="{0:.1}" y="{3}" text-anchor="middle">{4}</text>"##,
            px(x),
            H - B,
            H - B + 4.0,
            H - B + 16.0,
            x
        );
    }
    let _ = write!(
        out,
        r#"<text x="{}" y="{}" text-anchor="middle">{label}</text>"#,
        (L + W - R) / 2.0,
        H - 6.0
    );
}

/// Variant `i` of `n`: its line, its points with their interval bars (all
/// at one small sideways offset) and its legend entry.
fn curve(out: &mut String, ax: &Axes, (i, n): (usize, usize), name: &str, pts: &[Point]) {
    let c = PALETTE[i % PALETTE.len()];
    let dx = (i as f64 - (n as f64 - 1.0) / 2.0) * 3.0;
    let line: Vec<String> = pts
        .iter()
        .map(|p| format!("{:.1},{:.1}", ax.px(p.x) + dx, ax.py(p.y)))
        .collect();
    let _ = write!(
        out,
        r#"<polyline class="variant" points="{}" fill="none" stroke="{c}" stroke-width="2"/>"#,
        line.join(" ")
    );
    for p in pts {
        let x = ax.px(p.x) + dx;
        let (dash, what) = if p.ci {
            ("", "95% CI")
        } else {
            (r#" stroke-dasharray="2 2""#, "range, too few boots for a CI")
        };
        let _ = write!(
            out,
            r#"<line class="interval" x1="{x:.1}" x2="{x:.1}" y1="{:.1}" y2="{:.1}" stroke="{c}"{dash}/><circle cx="{x:.1}" cy="{:.1}" r="3" fill="{c}"><title>{}: {} at {} vCPUs, {what} [{}, {}]</title></circle>"#,
            ax.py(p.lo),
            ax.py(p.hi),
            ax.py(p.y),
            esc(name),
            fmt(p.y),
            p.x,
            fmt(p.lo),
            fmt(p.hi)
        );
    }
    legend(out, i, c, name);
}

/// Series `i`'s entry in the legend right of a plot: a swatch of colour
/// `c` and the series' name.
pub(super) fn legend(out: &mut String, i: usize, c: &str, name: &str) {
    let ly = T + 14.0 + i as f64 * 16.0;
    let _ = write!(
        out,
        r#"<rect x="{}" y="{}" width="10" height="10" fill="{c}"/><text x="{}" y="{}">{}</text>"#,
        W - R + 10.0,
        ly - 9.0,
        W - R + 24.0,
        ly,
        esc(name)
    );
}

/// One bar of a differential profile's chart: a function, its Δ
/// instructions per op, whether the change is called.
#[derive(Debug, Clone)]
pub struct Bar {
    /// Function.
    pub name: String,
    /// Δ instructions per op (variant − base).
    pub delta: f64,
    /// Above its noise threshold.
    pub called: bool,
    /// Calls per op, base and variant: shown where they differ (the
    /// mechanism's rows).
    pub calls: (f64, f64),
}

/// Horizontal bar chart of a differential profile's rows: Δ instructions
/// per op from a zero line, more in red, fewer in blue, a change under its
/// noise threshold pale; at the right the calls per op of the rows whose
/// calls changed.
pub fn delta_bars(bars: &[Bar]) -> String {
    let h = T + BAR_ROW * bars.len().max(1) as f64 + B;
    let m = bars.iter().map(|b| b.delta.abs()).fold(0.0, f64::max).max(1e-9);
    let x0 = BAR_NAME + (BAR_WIDTH - BAR_NAME - 80.0) / 2.0;
    let mut out = String::new();
    let _ = write!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {0} {h}" width="{0}" height="{h}" font-family="sans-serif" font-size="11">"#,
        BAR_WIDTH + BAR_CALLS
    );
    let _ = write!(
        out,
        r##"<line x1="{x0}" x2="{x0}" y1="{T}" y2="{}" stroke="#999"/><text x="{}" y="{}" text-anchor="end">calls/op</text>"##,
        h - B,
        BAR_WIDTH + BAR_CALLS - 6.0,
        T - 6.0
    );
    for (i, b) in bars.iter().enumerate() {
        bar_row(&mut out, b, T + BAR_ROW * i as f64, m);
    }
    let _ = write!(
        out,
        r#"<text x="{x0}" y="{}" text-anchor="middle">Δ instructions per op (variant − base)</text>"#,
        h - B + 24.0
    );
    out.push_str("</svg>");
    out
}

const BAR_ROW: f64 = 18.0;
const BAR_NAME: f64 = 260.0;
const BAR_WIDTH: f64 = 720.0;
const BAR_CALLS: f64 = 130.0;

/// One function's row at `y`: its name, its bar (scaled to the largest
/// |Δ| `m`), the Δ, and its calls per op where they changed.
fn bar_row(out: &mut String, b: &Bar, y: f64, m: f64) {
    let half = (BAR_WIDTH - BAR_NAME - 80.0) / 2.0;
    let x0 = BAR_NAME + half;
    let w = half * b.delta.abs() / m;
    let x = if b.delta >= 0.0 { x0 } else { x0 - w };
    let fill = if b.delta >= 0.0 { "#d62728" } else { "#1f77b4" };
    let op = if b.called { "1" } else { "0.3" };
    let name: String = match b.name.chars().count() {
        n if n > 42 => format!("{}…", b.name.chars().take(41).collect::<String>()),
        _ => b.name.clone(),
    };
    let _ = write!(
        out,
        r#"<text x="{}" y="{:.1}" text-anchor="end">{}</text>"#,
        BAR_NAME - 6.0,
        y + 12.0,
        esc(&name)
    );
    let _ = write!(
        out,
        r#"<rect class="delta" x="{x:.1}" y="{:.1}" width="{w:.1}" height="{}" fill="{fill}" fill-opacity="{op}"><title>{}: {} insns/op{}</title></rect>"#,
        y + 3.0,
        BAR_ROW - 6.0,
        esc(&b.name),
        fmt(b.delta),
        if b.called { "" } else { " (under its threshold)" }
    );
    if b.calls.0 != b.calls.1 {
        let _ = write!(
            out,
            r#"<text class="calls" x="{}" y="{:.1}" text-anchor="end">{} → {}</text>"#,
            BAR_WIDTH + BAR_CALLS - 6.0,
            y + 12.0,
            fmt(b.calls.0),
            fmt(b.calls.1)
        );
    }
    let tx = if b.delta >= 0.0 { x + w + 4.0 } else { x - 4.0 };
    let _ = write!(
        out,
        r#"<text x="{tx:.1}" y="{:.1}" text-anchor="{}">{:+.0}</text>"#,
        y + 12.0,
        if b.delta >= 0.0 { "start" } else { "end" },
        b.delta
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(x: f64, y: f64) -> Point {
        Point {
            x,
            y,
            lo: y * 0.9,
            hi: y * 1.1,
            ci: true,
        }
    }

    #[test]
    fn scaling_has_a_line_per_variant_and_a_reference_only_when_asked() {
        let series = [
            ("base".into(), vec![p(2.0, 100.0), p(4.0, 180.0)]),
            ("v<1>".into(), vec![p(2.0, 90.0), p(4.0, 150.0)]),
        ];
        let s = scaling(&series, "execs/s", true);
        assert!(s.starts_with("<svg") && s.ends_with("</svg>"));
        assert_eq!(s.matches(r#"class="variant""#).count(), 2);
        assert_eq!(s.matches(r#"class="reference""#).count(), 1);
        assert!(s.contains("v&lt;1&gt;"), "names are escaped");
        assert_eq!(s.matches("<circle").count(), 4);
        let without = scaling(&series, "usec", false);
        assert_eq!(without.matches(r#"class="reference""#).count(), 0);
        assert!(!without.contains(">linear<"));
    }

    fn attr(tag: &str, name: &str) -> f64 {
        let i = tag.find(&format!(" {name}=\"")).unwrap() + name.len() + 3;
        tag[i..].split('"').next().unwrap().parse().unwrap()
    }

    #[test]
    fn vcpu_axis_is_to_scale_and_bars_sit_on_their_points() {
        let s = scaling(
            &[("base".into(), vec![p(26.0, 10.0), p(256.0, 50.0), p(448.0, 60.0)])],
            "execs/s",
            true,
        );
        let circles: Vec<f64> = s.split("<circle").skip(1).map(|t| attr(t, "cx")).collect();
        let bars: Vec<f64> = s
            .split(r#"<line class="interval""#)
            .skip(1)
            .map(|t| attr(t, "x1"))
            .collect();
        assert_eq!(circles, bars, "each interval bar at its point's x");
        let (a, b, c) = (circles[0], circles[1], circles[2]);
        // x is linear in vCPUs: (256-26)/(448-256) of the gaps
        assert!((((b - a) / (c - b)) - 230.0 / 192.0).abs() < 0.02, "{circles:?}");
        let short = scaling(
            &[(
                "base".into(),
                vec![Point {
                    ci: false,
                    ..p(2.0, 1.0)
                }],
            )],
            "x",
            false,
        );
        assert!(short.contains("stroke-dasharray=\"2 2\"") && short.contains("range, too few boots"));
    }

    #[test]
    fn delta_bars_grow_from_zero_by_sign() {
        let bars = [
            Bar {
                name: "f<x>".into(),
                delta: 2000.0,
                called: true,
                calls: (1.0, 4.0),
            },
            Bar {
                name: "g".into(),
                delta: -500.0,
                called: false,
                calls: (2.0, 2.0),
            },
        ];
        let s = delta_bars(&bars);
        let rects: Vec<&str> = s.split(r#"<rect class="delta""#).skip(1).collect();
        assert_eq!(rects.len(), 2);
        let (w0, w1) = (attr(rects[0], "width"), attr(rects[1], "width"));
        assert!((w0 / w1 - 4.0).abs() < 0.01, "widths follow |delta|: {w0} {w1}");
        assert!(
            attr(rects[1], "x") + w1 - attr(rects[0], "x") < 0.2,
            "the negative bar ends where the positive one starts"
        );
        assert!(
            rects[0].contains("#d62728") && rects[1].contains("#1f77b4") && rects[1].contains("fill-opacity=\"0.3\"")
        );
        assert!(s.contains("f&lt;x&gt;"));
        assert_eq!(
            s.matches(r#"<text class="calls""#).count(),
            1,
            "calls/op only where they changed"
        );
        assert!(s.contains(">1.00 → 4.00<"), "{s}");
    }
}
