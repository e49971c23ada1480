//! Hand-made SVG plots for the HTML report: a scaling curve (median and its
//! interval against vCPUs on a linear axis from 0, one line per variant, each
//! interval bar on its point; a linear-scaling reference only when asked, for
//! throughput whose workers follow the vCPU count) and a strip plot of the
//! samples of one row; and a nightly trend (median and interval per night,
//! change points marked, each point a link to its run's report). Pure functions from numbers to SVG text; no fonts or
//! external files needed.

use std::fmt::Write;

/// Colours of variants, in order (base first).
pub const PALETTE: &[&str] = &["#222222", "#d62728", "#1f77b4", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#17becf"];

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

const W: f64 = 560.0;
const H: f64 = 300.0;
const L: f64 = 70.0;
const R: f64 = 150.0;
const T: f64 = 20.0;
const B: f64 = 40.0;

fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

fn fmt(v: f64) -> String {
    crate::report::num(v)
}

fn frame(out: &mut String, ylo: f64, yhi: f64, ylabel: &str) {
    let _ = write!(out, r#"<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {W} {H}" width="{W}" height="{H}" font-family="sans-serif" font-size="11">"#);
    let _ = write!(out, r##"<rect x="{L}" y="{T}" width="{}" height="{}" fill="none" stroke="#999"/>"##, W - L - R, H - T - B);
    for i in 0..=4 {
        let v = ylo + (yhi - ylo) * i as f64 / 4.0;
        let y = H - B - (H - T - B) * i as f64 / 4.0;
        let _ = write!(out, r##"<line x1="{L}" x2="{}" y1="{y:.1}" y2="{y:.1}" stroke="#eee"/><text x="{}" y="{:.1}" text-anchor="end">{}</text>"##, W - R, L - 4.0, y + 4.0, fmt(v));
    }
    let _ = write!(out, r#"<text x="12" y="{}" transform="rotate(-90 12 {})" text-anchor="middle">{}</text>"#, H / 2.0, H / 2.0, esc(ylabel));
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

/// Scaling curve: one polyline per variant with an interval bar on each point
/// (dashed when it is only the range of too few boots), x to scale from 0 vCPUs;
/// with `linear_reference`, a dashed linear-scaling line through base's first
/// point.
pub fn scaling(series: &[(String, Vec<Point>)], ylabel: &str, linear_reference: bool) -> String {
    let xs: Vec<f64> = {
        let mut v: Vec<f64> = series.iter().flat_map(|(_, p)| p.iter().map(|p| p.x)).collect();
        v.sort_by(f64::total_cmp);
        v.dedup();
        v
    };
    let xmax = xs.last().copied().unwrap_or(1.0).max(1.0);
    let reference: Vec<(f64, f64)> = match series.first().and_then(|(_, p)| p.first()) {
        Some(p0) if linear_reference && xs.len() > 1 && p0.x > 0.0 => xs.iter().map(|&x| (x, p0.y * x / p0.x)).collect(),
        _ => vec![],
    };
    let data_hi = series.iter().flat_map(|(_, p)| p.iter().map(|p| p.hi.max(p.y)));
    let (ylo, yhi) = yrange(data_hi.chain(std::iter::once(0.0)));
    let mut out = String::new();
    frame(&mut out, ylo, yhi, ylabel);
    let px = |x: f64| -> f64 { L + 10.0 + (W - L - R - 20.0) * x / xmax };
    let py = |y: f64| -> f64 { H - B - (H - T - B) * ((y.min(yhi) - ylo) / (yhi - ylo)) };
    for &x in std::iter::once(&0.0).chain(&xs) {
        let _ = write!(out, r##"<line x1="{0:.1}" x2="{0:.1}" y1="{1}" y2="{2}" stroke="#999"/><text x="{0:.1}" y="{3}" text-anchor="middle">{4}</text>"##, px(x), H - B, H - B + 4.0, H - B + 16.0, x);
    }
    let _ = write!(out, r#"<text x="{}" y="{}" text-anchor="middle">vCPUs</text>"#, (L + W - R) / 2.0, H - 6.0);
    if !reference.is_empty() {
        let pts: Vec<String> = reference.iter().map(|(x, y)| format!("{:.1},{:.1}", px(*x), py(*y))).collect();
        let _ = write!(out, r##"<polyline class="reference" points="{}" fill="none" stroke="#bbb" stroke-dasharray="4 3"/>"##, pts.join(" "));
    }
    for (i, (name, pts)) in series.iter().enumerate() {
        let c = PALETTE[i % PALETTE.len()];
        // a variant's line, points and bars share one small sideways offset
        let dx = (i as f64 - (series.len() as f64 - 1.0) / 2.0) * 3.0;
        let line: Vec<String> = pts.iter().map(|p| format!("{:.1},{:.1}", px(p.x) + dx, py(p.y))).collect();
        let _ = write!(out, r#"<polyline class="variant" points="{}" fill="none" stroke="{c}" stroke-width="2"/>"#, line.join(" "));
        for p in pts {
            let x = px(p.x) + dx;
            let (dash, what) = if p.ci { ("", "95% CI") } else { (r#" stroke-dasharray="2 2""#, "range, too few boots for a CI") };
            let _ = write!(out, r#"<line class="interval" x1="{x:.1}" x2="{x:.1}" y1="{:.1}" y2="{:.1}" stroke="{c}"{dash}/><circle cx="{x:.1}" cy="{:.1}" r="3" fill="{c}"><title>{}: {} at {} vCPUs, {what} [{}, {}]</title></circle>"#,
                py(p.lo), py(p.hi), py(p.y), esc(name), fmt(p.y), p.x, fmt(p.lo), fmt(p.hi));
        }
        let ly = T + 14.0 + i as f64 * 16.0;
        let _ = write!(out, r#"<rect x="{}" y="{}" width="10" height="10" fill="{c}"/><text x="{}" y="{}">{}</text>"#, W - R + 10.0, ly - 9.0, W - R + 24.0, ly, esc(name));
    }
    if !reference.is_empty() {
        let ly = T + 14.0 + series.len() as f64 * 16.0;
        let _ = write!(out, r##"<line x1="{}" x2="{}" y1="{}" y2="{}" stroke="#bbb" stroke-dasharray="4 3"/><text x="{}" y="{}">linear</text>"##, W - R + 10.0, W - R + 20.0, ly - 4.0, ly - 4.0, W - R + 24.0, ly);
    }
    out.push_str("</svg>");
    out
}

/// Strip plot: every sample of one row, one column per variant, with the
/// median marked.
pub fn strip(cells: &[(String, Vec<f64>)], ylabel: &str) -> String {
    let (ylo, yhi) = yrange(cells.iter().flat_map(|(_, v)| v.iter().cloned()));
    let mut out = String::new();
    frame(&mut out, ylo, yhi, ylabel);
    let n = cells.len().max(1) as f64;
    let py = |y: f64| -> f64 { H - B - (H - T - B) * ((y - ylo) / (yhi - ylo)) };
    for (i, (name, vals)) in cells.iter().enumerate() {
        let c = PALETTE[i % PALETTE.len()];
        let cx = L + (W - L - R) * (i as f64 + 0.5) / n;
        for (j, v) in vals.iter().enumerate() {
            let jitter = ((j * 37 % 11) as f64 - 5.0) * 2.0;
            let _ = write!(out, r#"<circle class="sample" cx="{:.1}" cy="{:.1}" r="2.5" fill="{c}" fill-opacity="0.6"><title>{}</title></circle>"#, cx + jitter, py(*v), fmt(*v));
        }
        if let Some(m) = crate::stats::median(vals) {
            let _ = write!(out, r#"<line x1="{:.1}" x2="{:.1}" y1="{:.1}" y2="{:.1}" stroke="{c}" stroke-width="2"/>"#, cx - 18.0, cx + 18.0, py(m), py(m));
        }
        let _ = write!(out, r#"<text x="{cx:.1}" y="{}" text-anchor="middle">{}</text>"#, H - B + 16.0, esc(name));
    }
    out.push_str("</svg>");
    out
}

/// A nightly trend: one point per night with its interval bar, each point a
/// link to `link`, a dashed vertical line before each change's first night.
pub fn trend(t: &super::trend::Trend) -> String {
    let (mut ylo, mut yhi) = t.points.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), p| (a.min(p.lo), b.max(p.hi)));
    if !ylo.is_finite() {
        (ylo, yhi) = (0.0, 1.0);
    } else if yhi <= ylo {
        let d = ylo.abs().max(1.0) * 0.05;
        (ylo, yhi) = (ylo - d, yhi + d);
    }
    let pad = (yhi - ylo) * 0.08;
    let (ylo, yhi) = (ylo - pad, yhi + pad);
    let mut out = String::new();
    frame(&mut out, ylo, yhi, &t.unit);
    let n = t.points.len().max(2) as f64;
    let px = |i: f64| -> f64 { L + 10.0 + (W - L - R - 20.0) * i / (n - 1.0) };
    let py = |y: f64| -> f64 { H - B - (H - T - B) * ((y - ylo) / (yhi - ylo)) };
    let line: Vec<String> = t.points.iter().enumerate().map(|(i, p)| format!("{:.1},{:.1}", px(i as f64), py(p.y))).collect();
    let _ = write!(out, r##"<polyline class="trend" points="{}" fill="none" stroke="#1f77b4" stroke-width="1.5"/>"##, line.join(" "));
    for (i, p) in t.points.iter().enumerate() {
        let x = px(i as f64);
        let dash = if p.ci { "" } else { r#" stroke-dasharray="2 2""# };
        let _ = write!(out, r##"<line class="interval" x1="{x:.1}" x2="{x:.1}" y1="{:.1}" y2="{:.1}" stroke="#1f77b4"{dash}/><a href="{}"><circle cx="{x:.1}" cy="{:.1}" r="3.5" fill="#1f77b4"><title>{} {}: {} [{}, {}], {} boots</title></circle></a>"##,
            py(p.lo), py(p.hi), esc(&p.link), py(p.y), esc(&p.date), esc(&p.run_id), fmt(p.y), fmt(p.lo), fmt(p.hi), p.n);
    }
    for m in &t.marks {
        let x = px(m.index as f64 - 0.5);
        let _ = write!(out, r##"<line class="change" x1="{x:.1}" x2="{x:.1}" y1="{T}" y2="{}" stroke="#d62728" stroke-dasharray="5 3"><title>{}</title></line>"##, H - B, esc(&m.text));
    }
    let label = |i: usize| t.points.get(i).map(|p| esc(&p.date)).unwrap_or_default();
    let last = t.points.len().saturating_sub(1);
    let _ = write!(out, r#"<text x="{:.1}" y="{}" text-anchor="start">{}</text><text x="{:.1}" y="{}" text-anchor="end">{}</text>"#, px(0.0), H - B + 16.0, label(0), px(last as f64), H - B + 16.0, label(last));
    let _ = write!(out, r#"<text x="{}" y="{}" text-anchor="middle">night (run)</text>"#, (L + W - R) / 2.0, H - 6.0);
    out.push_str("</svg>");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(x: f64, y: f64) -> Point {
        Point { x, y, lo: y * 0.9, hi: y * 1.1, ci: true }
    }

    #[test]
    fn scaling_has_a_line_per_variant_and_a_reference_only_when_asked() {
        let series = [("base".into(), vec![p(2.0, 100.0), p(4.0, 180.0)]), ("v<1>".into(), vec![p(2.0, 90.0), p(4.0, 150.0)])];
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
        let s = scaling(&[("base".into(), vec![p(26.0, 10.0), p(256.0, 50.0), p(448.0, 60.0)])], "execs/s", true);
        let circles: Vec<f64> = s.split("<circle").skip(1).map(|t| attr(t, "cx")).collect();
        let bars: Vec<f64> = s.split(r#"<line class="interval""#).skip(1).map(|t| attr(t, "x1")).collect();
        assert_eq!(circles, bars, "each interval bar at its point's x");
        let (a, b, c) = (circles[0], circles[1], circles[2]);
        // x is linear in vCPUs: (256-26)/(448-256) of the gaps
        assert!((((b - a) / (c - b)) - 230.0 / 192.0).abs() < 0.02, "{circles:?}");
        let short = scaling(&[("base".into(), vec![Point { ci: false, ..p(2.0, 1.0) }])], "x", false);
        assert!(short.contains("stroke-dasharray=\"2 2\"") && short.contains("range, too few boots"));
    }

    #[test]
    fn trend_links_every_night_and_marks_changes() {
        use super::super::trend::{Trend, TrendMark, TrendPoint};
        let points = (0..6)
            .map(|i| TrendPoint { date: format!("2026-01-0{}", i + 1), run_id: format!("r{i}"), link: format!("../r{i}/report.html"), y: if i < 3 { 10.0 } else { 11.0 }, lo: 9.5, hi: 11.5, ci: i != 0, n: 5 })
            .collect();
        let t = Trend { title: "t".into(), key: "k".into(), unit: "ms".into(), points, marks: vec![TrendMark { index: 3, text: "+10%".into() }] };
        let s = trend(&t);
        assert_eq!(s.matches("<a href=").count(), 6);
        assert!(s.contains(r#"href="../r3/report.html""#));
        assert_eq!(s.matches(r#"class="change""#).count(), 1);
        assert_eq!(s.matches("stroke-dasharray=\"2 2\"").count(), 1, "the first night had too few boots for a CI");
    }

    #[test]
    fn strip_plots_every_sample() {
        let s = strip(&[("base".into(), vec![1.0, 2.0, 3.0]), ("v".into(), vec![2.0, 2.5])], "usec");
        assert_eq!(s.matches(r#"class="sample""#).count(), 5);
    }
}
