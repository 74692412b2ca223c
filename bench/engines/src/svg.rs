//! A grid of small horizontal bar charts, one per workload, as one SVG file (no plotting
//! crate: the chart is a few rectangles and labels).

use std::fmt::Write as _;

/// One chart: a title and a bar per engine.
pub struct Panel {
    pub title: String,
    pub unit: &'static str,
    pub bars: Vec<(String, f64)>,
}

const COLUMNS: usize = 3;
const WIDTH: f64 = 330.0;
const LABEL: f64 = 90.0;
const BAR: f64 = 16.0;
const GAP: f64 = 4.0;
const TOP: f64 = 28.0;

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

fn number(v: f64) -> String {
    if v >= 1e6 {
        format!("{:.2}M", v / 1e6)
    } else if v >= 1e4 {
        format!("{:.0}K", v / 1e3)
    } else if v >= 100.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

pub fn chart(panels: &[Panel]) -> String {
    let bars = panels.iter().map(|p| p.bars.len()).max().unwrap_or(0) as f64;
    let height = TOP + bars * (BAR + GAP) + 16.0;
    let rows = panels.len().div_ceil(COLUMNS);
    let (w, h) = (WIDTH * COLUMNS as f64, height * rows as f64);
    let mut out = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" \
         font-family=\"sans-serif\" font-size=\"11\">\n<rect width=\"{w}\" height=\"{h}\" fill=\"white\"/>\n"
    );
    let colors = [
        "#d62728", "#1f77b4", "#2ca02c", "#9467bd", "#8c564b", "#ff7f0e",
    ];
    for (i, panel) in panels.iter().enumerate() {
        let (x0, y0) = ((i % COLUMNS) as f64 * WIDTH, (i / COLUMNS) as f64 * height);
        let _ = writeln!(
            out,
            "<text x=\"{}\" y=\"{}\" font-weight=\"bold\">{} ({})</text>",
            x0 + 6.0,
            y0 + 16.0,
            escape(&panel.title),
            panel.unit
        );
        let max = panel.bars.iter().map(|b| b.1).fold(0.0, f64::max);
        let span = WIDTH - LABEL - 60.0;
        for (j, (name, value)) in panel.bars.iter().enumerate() {
            let y = y0 + TOP + j as f64 * (BAR + GAP);
            let len = if max > 0.0 { value / max * span } else { 0.0 };
            let _ = writeln!(
                out,
                "<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>\
                 <rect x=\"{}\" y=\"{y}\" width=\"{len:.1}\" height=\"{BAR}\" fill=\"{}\"/>\
                 <text x=\"{}\" y=\"{}\">{}</text>",
                x0 + LABEL - 4.0,
                y + BAR - 4.0,
                escape(name),
                x0 + LABEL,
                colors[j % colors.len()],
                x0 + LABEL + len + 4.0,
                y + BAR - 4.0,
                number(*value)
            );
        }
    }
    out.push_str("</svg>\n");
    out
}
