//! `--plot FILE.svg`: the VT-tree paper's Figure 5 for a run — memtable flushes completed
//! over time, one staircase per benchmark. Flat stretches are time the writers spent waiting
//! for the store (compaction); a steeper staircase is a faster insert rate.
//!
//! Hand-written SVG: axes, 1-2-5 ticks, gridlines, one polyline per series and a legend.

use std::fmt::Write as _;

/// One benchmark's flushes.
pub struct Series {
    pub name: &'static str,
    /// How long the benchmark ran, in seconds (where its staircase ends).
    pub duration: f64,
    /// When each flush completed, in seconds since the benchmark started, ascending.
    pub flushes: Vec<f64>,
}

const WIDTH: f64 = 780.0;
const HEIGHT: f64 = 460.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 200.0;
const TOP: f64 = 56.0;
const BOTTOM: f64 = 56.0;
/// Tableau 10: distinct and readable on white.
const COLORS: [&str; 10] = [
    "#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7",
    "#9c755f", "#bab0ac",
];

/// The SVG document for `series`.
pub fn svg(series: &[Series]) -> String {
    let x_max = series
        .iter()
        .flat_map(|s| s.flushes.iter().copied().chain([s.duration]))
        .fold(0.0, f64::max);
    let y_max = series.iter().map(|s| s.flushes.len()).max().unwrap_or(0) as f64;
    let x_axis = Axis::new(x_max.max(1e-3), false);
    let y_axis = Axis::new(y_max.max(1.0), true);
    let plot = Frame {
        x: x_axis.end,
        y: y_axis.end,
    };

    let mut out = String::new();
    let _ = writeln!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" font-family="DejaVu Sans, Helvetica, Arial, sans-serif" font-size="12">"#
    );
    let _ = writeln!(
        out,
        r##"<rect width="{WIDTH}" height="{HEIGHT}" fill="#ffffff"/>"##
    );
    let _ = writeln!(
        out,
        r#"<text x="{LEFT}" y="24" font-size="16" font-weight="bold">Memtable flushes completed over time</text>"#
    );
    let _ = writeln!(
        out,
        r##"<text x="{LEFT}" y="42" fill="#555555">flat stretches: writers waiting on compaction (cf. VT-tree paper, Figure 5)</text>"##
    );
    grid_and_ticks(&mut out, &plot, &x_axis, &y_axis);
    for (i, s) in series.iter().enumerate() {
        staircase(&mut out, &plot, s, COLORS[i % COLORS.len()]);
    }
    legend(&mut out, series);
    if series.is_empty() {
        let _ = writeln!(
            out,
            r##"<text x="{}" y="{}" text-anchor="middle" fill="#555555">no memtable flushes completed</text>"##,
            LEFT + plot_width() / 2.0,
            TOP + plot_height() / 2.0
        );
    }
    out.push_str("</svg>\n");
    out
}

fn plot_width() -> f64 {
    WIDTH - LEFT - RIGHT
}

fn plot_height() -> f64 {
    HEIGHT - TOP - BOTTOM
}

/// Maps data coordinates (seconds, flushes) to the page.
struct Frame {
    x: f64,
    y: f64,
}

impl Frame {
    fn px(&self, seconds: f64) -> f64 {
        LEFT + seconds / self.x * plot_width()
    }

    fn py(&self, flushes: f64) -> f64 {
        TOP + plot_height() - flushes / self.y * plot_height()
    }
}

/// An axis from 0 to the first tick at or past the data's maximum, ticked at 1, 2 or 5 times a
/// power of ten (whole numbers only for counts).
struct Axis {
    step: f64,
    end: f64,
    decimals: usize,
}

impl Axis {
    fn new(max: f64, whole: bool) -> Axis {
        let raw = max / 5.0;
        let magnitude = 10f64.powf(raw.log10().floor());
        let step = match raw / magnitude {
            n if n <= 1.0 => magnitude,
            n if n <= 2.0 => 2.0 * magnitude,
            n if n <= 5.0 => 5.0 * magnitude,
            _ => 10.0 * magnitude,
        };
        let step = if whole { step.max(1.0).round() } else { step };
        let decimals = if step >= 1.0 {
            0
        } else {
            (-step.log10()).ceil() as usize
        };
        Axis {
            step,
            end: (max / step).ceil() * step,
            decimals,
        }
    }

    fn ticks(&self) -> impl Iterator<Item = f64> + '_ {
        let count = (self.end / self.step).round() as usize;
        (0..=count).map(move |i| i as f64 * self.step)
    }
}

fn grid_and_ticks(out: &mut String, plot: &Frame, x_axis: &Axis, y_axis: &Axis) {
    let (left, right) = (LEFT, LEFT + plot_width());
    let (top, bottom) = (TOP, TOP + plot_height());
    for x in x_axis.ticks() {
        let px = plot.px(x);
        let _ = writeln!(
            out,
            r##"<line x1="{px:.1}" y1="{top}" x2="{px:.1}" y2="{bottom}" stroke="#e6e6e6"/>"##
        );
        let _ = writeln!(
            out,
            r#"<text x="{px:.1}" y="{}" text-anchor="middle">{:.*}</text>"#,
            bottom + 18.0,
            x_axis.decimals,
            x
        );
    }
    for y in y_axis.ticks() {
        let py = plot.py(y);
        let _ = writeln!(
            out,
            r##"<line x1="{left}" y1="{py:.1}" x2="{right}" y2="{py:.1}" stroke="#e6e6e6"/>"##
        );
        let _ = writeln!(
            out,
            r#"<text x="{}" y="{:.1}" text-anchor="end">{:.*}</text>"#,
            left - 8.0,
            py + 4.0,
            y_axis.decimals,
            y
        );
    }
    let _ = writeln!(
        out,
        r##"<polyline points="{left},{top} {left},{bottom} {right},{bottom}" fill="none" stroke="#333333"/>"##
    );
    let _ = writeln!(
        out,
        r#"<text x="{}" y="{}" text-anchor="middle">time since the benchmark started (s)</text>"#,
        LEFT + plot_width() / 2.0,
        HEIGHT - 14.0
    );
    let _ = writeln!(
        out,
        r#"<text transform="translate(20 {}) rotate(-90)" text-anchor="middle">memtable flushes completed</text>"#,
        TOP + plot_height() / 2.0
    );
}

/// The count of completed flushes as a step function: flat until each flush, then one up.
fn staircase(out: &mut String, plot: &Frame, s: &Series, color: &str) {
    let mut points = format!("{:.1},{:.1}", plot.px(0.0), plot.py(0.0));
    for (i, &t) in s.flushes.iter().enumerate() {
        let _ = write!(
            points,
            " {x:.1},{:.1} {x:.1},{:.1}",
            plot.py(i as f64),
            plot.py(i as f64 + 1.0),
            x = plot.px(t)
        );
    }
    let end = s.duration.max(s.flushes.last().copied().unwrap_or(0.0));
    let _ = write!(
        points,
        " {:.1},{:.1}",
        plot.px(end),
        plot.py(s.flushes.len() as f64)
    );
    let _ = writeln!(
        out,
        r#"<polyline points="{points}" fill="none" stroke="{color}" stroke-width="2" stroke-linejoin="round"/>"#
    );
}

fn legend(out: &mut String, series: &[Series]) {
    let x = WIDTH - RIGHT + 20.0;
    for (i, s) in series.iter().enumerate() {
        let y = TOP + 10.0 + i as f64 * 36.0;
        let color = COLORS[i % COLORS.len()];
        let _ = writeln!(
            out,
            r#"<line x1="{x}" y1="{y}" x2="{}" y2="{y}" stroke="{color}" stroke-width="3"/>"#,
            x + 22.0
        );
        let _ = writeln!(
            out,
            r#"<text x="{}" y="{}">{}</text>"#,
            x + 30.0,
            y + 4.0,
            s.name
        );
        let _ = writeln!(
            out,
            r##"<text x="{}" y="{}" fill="#555555" font-size="11">{} flushes in {:.1} s</text>"##,
            x + 30.0,
            y + 19.0,
            s.flushes.len(),
            s.duration
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn axes_tick_at_one_two_five_steps() {
        let a = Axis::new(23.0, false);
        assert_eq!((a.step, a.end), (5.0, 25.0));
        let b = Axis::new(0.7, false);
        assert_eq!((b.step, b.end, b.decimals), (0.2, 0.8, 1));
        let c = Axis::new(3.0, true);
        assert_eq!((c.step, c.end), (1.0, 3.0));
    }

    #[test]
    fn the_document_has_one_staircase_per_series() {
        let series = [
            Series {
                name: "fillrandom",
                duration: 2.0,
                flushes: vec![0.5, 1.0, 1.9],
            },
            Series {
                name: "randomappend",
                duration: 3.0,
                flushes: vec![1.5],
            },
        ];
        let doc = svg(&series);
        assert!(doc.starts_with("<svg") && doc.ends_with("</svg>\n"));
        assert_eq!(doc.matches("stroke-width=\"2\"").count(), 2);
        assert!(doc.contains(">fillrandom</text>") && doc.contains(">randomappend</text>"));
        assert!(svg(&[]).contains("no memtable flushes completed"));
    }
}
