//! The plan's packing as an SVG: offset (y) over time (x), one rectangle per
//! buffer, the lower bound and the height as horizontal lines, the peak-time
//! windows shaded, and a header with the figures.
//!
//! The picture is three layers in one document: `plotters` draws the frame
//! (background, axes, ticks, peak windows), this module writes the buffer
//! rectangles (fractional pixels, a hover `<title>` each), and `plotters`
//! draws the lines, their labels and the header on top.

use super::svg_text::{escape, split_svg, trim_number, ByteUnit};
use super::DrawError;
use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::element::DashedPathElement;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use std::fmt::Write as _;

/// Most buffers drawn with a hover title (id, size, interval, offset);
/// above it the rectangles carry no text, and the picture says so.
pub const TITLE_LIMIT: usize = 2000;
/// Most buffers drawn with an outline; above it outlines would cover the
/// thinnest buffers.
pub const OUTLINE_LIMIT: usize = 2000;

const WIDTH: u32 = 1400;
const HEIGHT: u32 = 860;
/// Pixels above the chart for the title, the figures and the legend.
const HEADER: u32 = 100;
/// Peak windows drawn at most (the header counts all of them).
const MAX_PEAK_BANDS: usize = 64;
const FONT: &str = "sans-serif";
const HEIGHT_COLOR: RGBColor = RGBColor(200, 30, 30);
const LB_COLOR: RGBColor = RGBColor(20, 70, 200);
const PEAK_COLOR: RGBColor = RGBColor(245, 190, 0);

/// One buffer of a plan: live over `[start, end)`, `size` bytes at `offset`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlanBuffer {
    /// The buffer's name (CSV id, or the values a slot backs).
    pub id: String,
    /// Bytes.
    pub size: usize,
    /// First moment the buffer is live.
    pub start: usize,
    /// First moment it is dead again (exclusive).
    pub end: usize,
    /// Its offset in the block.
    pub offset: usize,
}

/// What [`plan_svg`] draws: a packed plan and how it was found.
///
/// ```
/// use warmarena_cli::draw::{plan_svg, PlanBuffer, PlanPicture};
/// let b = |id: &str, start, end, size, offset| PlanBuffer { id: id.into(), size, start, end, offset };
/// let picture = PlanPicture {
///     title: "three buffers".into(),
///     buffers: vec![b("a", 0, 2, 4096, 0), b("b", 1, 3, 1024, 4096), b("c", 2, 4, 4096, 0)],
///     lower_bound: 5120,
///     height: 5120,
///     time_ms: 0.1,
///     optimal: true,
/// };
/// let svg = plan_svg(&picture).unwrap();
/// assert!(svg.contains("height 5120 B"));
/// assert_eq!(svg.matches("<rect class=\"buf\"").count(), 3);
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct PlanPicture {
    /// What was planned (a file name).
    pub title: String,
    /// Every buffer with its offset.
    pub buffers: Vec<PlanBuffer>,
    /// The largest total size live at one moment (as the planner reports it).
    pub lower_bound: usize,
    /// The block's height: the largest `offset + size`.
    pub height: usize,
    /// Time the planner took.
    pub time_ms: f64,
    /// True when the planner proved the height optimal.
    pub optimal: bool,
}

/// The value ranges of the chart; offsets are drawn in `unit`s so that the
/// axis ticks fall on round numbers of that unit.
struct Frame {
    t0: f64,
    t1: f64,
    top: f64,
    unit: ByteUnit,
}

impl Frame {
    fn of(p: &PlanPicture) -> Frame {
        let t0 = p.buffers.iter().map(|b| b.start).min().unwrap_or(0);
        let t1 = p
            .buffers
            .iter()
            .map(|b| b.end)
            .max()
            .unwrap_or(0)
            .max(t0 + 1);
        let used = p.buffers.iter().map(|b| b.offset.saturating_add(b.size));
        let top = used.chain([p.height, p.lower_bound, 1]).max().unwrap_or(1) as f64;
        let unit = ByteUnit::for_max(top);
        Frame {
            t0: t0 as f64,
            t1: t1 as f64,
            top: top * 1.08 / unit.bytes,
            unit,
        }
    }

    /// The corners of time window `w` from `y0` to `y1`, widened to about
    /// four pixels when narrower (a one-step peak on a long trace).
    fn visible(&self, w: (usize, usize), y0: f64, y1: f64) -> [(f64, f64); 2] {
        let (a, b) = (w.0 as f64, w.1 as f64);
        let pad = ((self.t1 - self.t0) * 4.0 / WIDTH as f64 - (b - a)).max(0.0) / 2.0;
        [(a - pad, y0), (b + pad, y1)]
    }

    /// `bytes` on the chart's offset axis.
    fn y(&self, bytes: usize) -> f64 {
        bytes as f64 / self.unit.bytes
    }
}

/// Linear map from plan values to pixels, anchored on two chart corners.
struct PixelMap {
    x: (f64, f64, f64, f64),
    y: (f64, f64, f64, f64),
}

impl PixelMap {
    fn px(&self, t: f64) -> f64 {
        let (v0, v1, p0, p1) = self.x;
        p0 + (t - v0) / (v1 - v0) * (p1 - p0)
    }
    fn py(&self, v: f64) -> f64 {
        let (v0, v1, p0, p1) = self.y;
        p0 + (v - v0) / (v1 - v0) * (p1 - p0)
    }
}

/// Live bytes at their maximum and the time windows where they are reached.
struct Peak {
    live: u128,
    windows: Vec<(usize, usize)>,
}

fn peak_windows(bufs: &[PlanBuffer]) -> Peak {
    // (time, starts after ends at the same moment: half-open ranges, size)
    let mut events: Vec<(usize, bool, usize)> = Vec::with_capacity(bufs.len() * 2);
    for b in bufs.iter().filter(|b| b.size > 0 && b.start < b.end) {
        events.push((b.start, true, b.size));
        events.push((b.end, false, b.size));
    }
    events.sort_unstable();
    let mut peak = Peak {
        live: 0,
        windows: Vec::new(),
    };
    let mut live: u128 = 0;
    let mut k = 0;
    while k < events.len() {
        let t = events[k].0;
        while k < events.len() && events[k].0 == t {
            let (_, born, size) = events[k];
            if born {
                live += size as u128;
            } else {
                live -= size as u128;
            }
            k += 1;
        }
        let Some(&(next, _, _)) = events.get(k) else {
            break;
        };
        if live > peak.live {
            peak.live = live;
            peak.windows = vec![(t, next)];
        } else if live == peak.live && live > 0 {
            match peak.windows.last_mut() {
                Some(w) if w.1 == t => w.1 = next,
                _ => peak.windows.push((t, next)),
            }
        }
    }
    peak
}

type Chart<'a, 'b> = ChartContext<'a, SVGBackend<'b>, Cartesian2d<RangedCoordf64, RangedCoordf64>>;

/// The chart below the header, laid out the same way for both layers.
fn chart<'a, 'b>(
    root: &'a DrawingArea<SVGBackend<'b>, Shift>,
    f: &Frame,
) -> Result<Chart<'a, 'b>, DrawError> {
    let (_, plot) = root.split_vertically(HEADER);
    Ok(ChartBuilder::on(&plot)
        .margin(14)
        .margin_right(30)
        .x_label_area_size(46)
        .y_label_area_size(100)
        .build_cartesian_2d(f.t0..f.t1, 0.0..f.top)?)
}

/// The picture of a packed plan as an SVG document.
///
/// Up to [`TITLE_LIMIT`] buffers each rectangle has a hover title and an
/// outline; above, the rectangles are bare (still one per buffer) and the
/// header says so.
///
/// ```
/// use warmarena_cli::draw::{plan_svg, PlanBuffer, PlanPicture};
/// let one = PlanBuffer { id: "x".into(), size: 64, start: 0, end: 1, offset: 0 };
/// let p = PlanPicture { title: "one".into(), buffers: vec![one], lower_bound: 64,
///     height: 64, time_ms: 0.0, optimal: true };
/// let svg = plan_svg(&p).unwrap();
/// assert!(svg.starts_with("<svg") && svg.contains("<title>x: 64 B (64 B), live [0, 1), offset 0</title>"));
/// ```
pub fn plan_svg(p: &PlanPicture) -> Result<String, DrawError> {
    let frame = Frame::of(p);
    let peak = peak_windows(&p.buffers);
    let mut under = String::new();
    let map = draw_frame(&frame, &peak, &mut under)?;
    let mut over = String::new();
    draw_lines_and_header(p, &frame, &peak, &mut over)?;
    let (open, under_body) = split_svg(&under);
    let (_, over_body) = split_svg(&over);
    let mut out = String::with_capacity(under.len() + over.len() + p.buffers.len() * 96);
    out.push_str(open);
    out.push('\n');
    out.push_str(under_body);
    write_buffers(&mut out, p, &map, frame.unit.bytes);
    out.push_str(over_body);
    out.push_str("</svg>\n");
    Ok(out)
}

/// Background, axes, ticks and the peak windows; returns the pixel map.
fn draw_frame(f: &Frame, peak: &Peak, out: &mut String) -> Result<PixelMap, DrawError> {
    let root = SVGBackend::with_string(out, (WIDTH, HEIGHT)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = chart(&root, f)?;
    let unit = f.unit.name;
    let y_fmt = move |v: &f64| format!("{} {unit}", trim_number(*v, 3));
    chart
        .configure_mesh()
        .disable_x_mesh()
        .y_labels(10)
        .x_labels(12)
        .y_label_formatter(&y_fmt)
        .x_label_formatter(&|v| trim_number(*v, 0))
        .x_desc("time (step)")
        .y_desc(format!("offset ({unit})"))
        .light_line_style(RGBColor(238, 238, 238))
        .label_style((FONT, 16))
        .axis_desc_style((FONT, 17))
        .draw()?;
    let band = PEAK_COLOR.mix(0.22).filled();
    chart.draw_series(
        peak.windows
            .iter()
            .take(MAX_PEAK_BANDS)
            .map(|&w| Rectangle::new(f.visible(w, 0.0, f.top), band)),
    )?;
    let c0 = chart.backend_coord(&(f.t0, 0.0));
    let c1 = chart.backend_coord(&(f.t1, f.top));
    root.present()?;
    Ok(PixelMap {
        x: (f.t0, f.t1, c0.0 as f64, c1.0 as f64),
        y: (0.0, f.top, c0.1 as f64, c1.1 as f64),
    })
}

/// A fill colour per buffer: hues a golden angle apart, three lightnesses.
fn buffer_color(k: usize) -> (u8, u8, u8) {
    let h = (k as f64 * 0.618_033_988_75).fract();
    let l: f64 = [0.62, 0.5, 0.72][k % 3];
    let s = 0.55;
    let a = s * l.min(1.0 - l);
    let f = |n: f64| {
        let q = (n + h * 12.0) % 12.0;
        let c = l - a * (q - 3.0).min(9.0 - q).clamp(-1.0, 1.0);
        (c * 255.0).round() as u8
    };
    (f(0.0), f(8.0), f(4.0))
}

/// One `<rect>` per buffer, in a group; titles and outlines on small plans.
fn write_buffers(out: &mut String, p: &PlanPicture, m: &PixelMap, unit: f64) {
    let many = p.buffers.len() > TITLE_LIMIT;
    if p.buffers.len() > OUTLINE_LIMIT {
        out.push_str("<g class=\"buffers\" stroke=\"none\">\n");
    } else {
        out.push_str(
            "<g class=\"buffers\" stroke=\"#000000\" stroke-opacity=\"0.35\" stroke-width=\"0.5\">\n",
        );
    }
    let n = |v: f64| trim_number(v, 2);
    for (k, b) in p.buffers.iter().enumerate() {
        let x0 = m.px(b.start as f64);
        let x1 = m.px(b.end.max(b.start) as f64);
        let y_top = m.py((b.offset as f64 + b.size as f64) / unit);
        let y_bottom = m.py(b.offset as f64 / unit);
        let (r, g, bl) = buffer_color(k);
        let _ = write!(
            out,
            "<rect class=\"buf\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"#{r:02x}{g:02x}{bl:02x}\"",
            n(x0),
            n(y_top),
            n(x1 - x0),
            n(y_bottom - y_top)
        );
        if many {
            out.push_str("/>\n");
        } else {
            let _ = writeln!(
                out,
                "><title>{}: {} B ({}), live [{}, {}), offset {}</title></rect>",
                escape(&b.id),
                b.size,
                super::svg_text::human_bytes(b.size as f64),
                b.start,
                b.end,
                b.offset
            );
        }
    }
    out.push_str("</g>\n");
}

/// Height and lower-bound lines with labels, the peak marks, the header.
fn draw_lines_and_header(
    p: &PlanPicture,
    f: &Frame,
    peak: &Peak,
    out: &mut String,
) -> Result<(), DrawError> {
    let root = SVGBackend::with_string(out, (WIDTH, HEIGHT)).into_drawing_area();
    let mut chart = chart(&root, f)?;
    let (h, lb) = (f.y(p.height), f.y(p.lower_bound));
    chart.draw_series(LineSeries::new(
        [(f.t0, h), (f.t1, h)],
        HEIGHT_COLOR.stroke_width(2),
    ))?;
    chart.draw_series(DashedLineSeries::new(
        [(f.t0, lb), (f.t1, lb)],
        10,
        6,
        LB_COLOR.stroke_width(2),
    ))?;
    let label = |text: String, y: f64, color: RGBColor, above: bool| {
        let v = if above { VPos::Bottom } else { VPos::Top };
        let style = (FONT, 17)
            .into_font()
            .color(&color)
            .pos(Pos::new(HPos::Right, v));
        let dy = if above { -3 } else { 3 };
        EmptyElement::at((f.t1, y)) + Text::new(text, (-6, dy), style)
    };
    if p.height == p.lower_bound {
        chart.draw_series([label("height = lower bound".into(), h, HEIGHT_COLOR, true)])?;
    } else {
        chart.draw_series([
            label("height".into(), h, HEIGHT_COLOR, true),
            label("lower bound".into(), lb, LB_COLOR, false),
        ])?;
    }
    // A strong strip over each peak window above the packing, so the
    // windows show even where buffers cover the shaded band.
    let strip = PEAK_COLOR.filled();
    let (s0, s1) = (h.max(lb) + (f.top - h.max(lb)) * 0.35, f.top);
    chart.draw_series(
        peak.windows
            .iter()
            .take(MAX_PEAK_BANDS)
            .map(|&w| Rectangle::new(f.visible(w, s0, s1), strip)),
    )?;
    draw_header(&root, p, peak)?;
    root.present()?;
    Ok(())
}

/// Title, figures and legend above the chart.
fn draw_header(
    root: &DrawingArea<SVGBackend<'_>, Shift>,
    p: &PlanPicture,
    peak: &Peak,
) -> Result<(), DrawError> {
    let x = 24;
    let ratio = if p.lower_bound == 0 {
        1.0
    } else {
        p.height as f64 / p.lower_bound as f64
    };
    root.draw_text(
        &p.title,
        &(FONT, 26).into_font().style(FontStyle::Bold).color(&BLACK),
        (x, 10),
    )?;
    let figures = format!(
        "height {} B ({}) = {:.4} × LB{}   ·   lower bound {} B ({})   ·   {} buffers   ·   planned in {} ms",
        p.height,
        super::svg_text::human_bytes(p.height as f64),
        ratio,
        if p.optimal { ", optimal" } else { "" },
        p.lower_bound,
        super::svg_text::human_bytes(p.lower_bound as f64),
        p.buffers.len(),
        trim_number(p.time_ms, if p.time_ms < 10.0 { 3 } else { 1 })
    );
    root.draw_text(&figures, &(FONT, 20).into_font().color(&BLACK), (x, 42))?;
    let y = 82;
    let small = (FONT, 18).into_font().color(&RGBColor(40, 40, 40));
    root.draw(&PathElement::new(
        vec![(x, y), (x + 34, y)],
        HEIGHT_COLOR.stroke_width(2),
    ))?;
    root.draw_text("height", &small, (x + 40, y - 8))?;
    let x = x + 120;
    root.draw(&DashedPathElement::new(
        vec![(x, y), (x + 34, y)],
        10,
        6,
        LB_COLOR.stroke_width(2),
    ))?;
    root.draw_text("lower bound", &small, (x + 40, y - 8))?;
    let x = x + 170;
    root.draw(&Rectangle::new(
        [(x, y - 7), (x + 34, y + 7)],
        PEAK_COLOR.mix(0.6).filled(),
    ))?;
    let windows = match peak.windows.as_slice() {
        [] => "no live bytes".to_string(),
        [(a, b)] => format!("[{a}, {b})"),
        [(a, b), rest @ ..] => format!("[{a}, {b}) and {} more", rest.len()),
    };
    root.draw_text(
        &format!(
            "peak window: live bytes at their maximum ({} B) over t ∈ {windows}",
            peak.live
        ),
        &small,
        (x + 40, y - 8),
    )?;
    let note = if p.buffers.len() > TITLE_LIMIT {
        format!("one rectangle per buffer; above {TITLE_LIMIT} buffers no outlines or hover text")
    } else {
        "hover a rectangle: id, size, live interval, offset".to_string()
    };
    root.draw_text(
        &note,
        &small.pos(Pos::new(HPos::Right, VPos::Top)),
        (WIDTH as i32 - 24, 16),
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn buf(id: &str, start: usize, end: usize, size: usize, offset: usize) -> PlanBuffer {
        PlanBuffer {
            id: id.into(),
            size,
            start,
            end,
            offset,
        }
    }

    fn small() -> PlanPicture {
        PlanPicture {
            title: "small <plan> & co".into(),
            buffers: vec![
                buf("a", 0, 2, 4096, 0),
                buf("b", 1, 3, 1024, 4096),
                buf("c", 2, 4, 4096, 0),
                buf("d", 3, 6, 512, 4096),
            ],
            lower_bound: 5120,
            height: 5120,
            time_ms: 0.25,
            optimal: true,
        }
    }

    fn texts(doc: &roxmltree::Document) -> Vec<String> {
        doc.descendants()
            .filter(|n| n.has_tag_name("text"))
            .map(|n| n.text().unwrap_or("").trim().to_string())
            .collect()
    }

    #[test]
    fn small_plan_parses_and_has_one_titled_shape_per_buffer() {
        let p = small();
        let svg = plan_svg(&p).unwrap();
        let doc = roxmltree::Document::parse(&svg).expect("well-formed XML");
        let bufs: Vec<_> = doc
            .descendants()
            .filter(|n| n.has_tag_name("rect") && n.attribute("class") == Some("buf"))
            .collect();
        assert_eq!(bufs.len(), p.buffers.len());
        let titles: Vec<&str> = bufs
            .iter()
            .filter_map(|r| r.children().find(|c| c.has_tag_name("title"))?.text())
            .collect();
        assert_eq!(titles[1], "b: 1024 B (1 KiB), live [1, 3), offset 4096");
        assert!(texts(&doc).iter().any(|t| t == "small <plan> & co"));
    }

    #[test]
    fn the_height_label_reads_the_height() {
        let mut p = small();
        p.height = 6144;
        p.buffers[3].offset = 5632;
        let svg = plan_svg(&p).unwrap();
        let doc = roxmltree::Document::parse(&svg).unwrap();
        let t = texts(&doc);
        let header = t.iter().find(|t| t.starts_with("height ")).unwrap();
        assert!(
            header.starts_with("height 6144 B (6 KiB) = 1.2000 × LB"),
            "{header}"
        );
        assert!(t.iter().any(|t| t == "height") && t.iter().any(|t| t == "lower bound"));
    }

    #[test]
    fn rectangles_sit_where_their_offsets_and_intervals_say() {
        let p = small();
        let svg = plan_svg(&p).unwrap();
        let doc = roxmltree::Document::parse(&svg).unwrap();
        let get = |id: &str| {
            let r = doc
                .descendants()
                .filter(|n| n.attribute("class") == Some("buf"))
                .find(|n| {
                    n.children()
                        .any(|c| c.text().is_some_and(|t| t.starts_with(&format!("{id}:"))))
                })
                .unwrap();
            let a = |k: &str| r.attribute(k).unwrap().parse::<f64>().unwrap();
            (a("x"), a("y"), a("width"), a("height"))
        };
        let (a, c) = (get("a"), get("c"));
        // Same offset and size: same row; `c` starts where `a` ends.
        assert_eq!((a.1, a.3), (c.1, c.3));
        assert!((a.0 + a.2 - c.0).abs() < 0.01);
        // `b` sits right on top of `a` (y grows downwards).
        let b = get("b");
        assert!((b.1 + b.3 - a.1).abs() < 0.01);
    }

    #[test]
    fn the_only_url_is_the_svg_namespace() {
        let svg = plan_svg(&small()).unwrap();
        let rest = svg.replace("xmlns=\"http://www.w3.org/2000/svg\"", "");
        assert_eq!(svg.len() - rest.len(), 34, "one namespace declaration");
        assert!(!rest.contains("http://") && !rest.contains("https://"));
    }

    #[test]
    fn the_peak_window_is_where_live_bytes_peak() {
        let p = small();
        let peak = peak_windows(&p.buffers);
        assert_eq!(peak.live, 5120);
        // a+b over [1,2), b+c over [2,3); c+d over [3,4) is 4608.
        assert_eq!(peak.windows, vec![(1, 3)]);
        let none = peak_windows(&[]);
        assert_eq!((none.live, none.windows.len()), (0, 0));
    }

    #[test]
    fn an_empty_plan_still_draws_a_frame() {
        let p = PlanPicture {
            title: "empty".into(),
            buffers: vec![],
            lower_bound: 0,
            height: 0,
            time_ms: 0.0,
            optimal: true,
        };
        let svg = plan_svg(&p).unwrap();
        let doc = roxmltree::Document::parse(&svg).unwrap();
        assert!(texts(&doc).iter().any(|t| t.starts_with("height 0 B")));
        assert!(texts(&doc).iter().any(|t| t.contains("no live bytes")));
    }

    #[test]
    fn sixty_thousand_buffers_keep_one_bare_shape_each() {
        let n = 60_000;
        let buffers: Vec<PlanBuffer> = (0..n)
            .map(|k| {
                buf(
                    &format!("t{k}"),
                    k / 8,
                    k / 8 + 3,
                    64 + k % 7 * 64,
                    (k % 24) * 512,
                )
            })
            .collect();
        let p = PlanPicture {
            title: "many".into(),
            buffers,
            lower_bound: 12288,
            height: 12288,
            time_ms: 900.0,
            optimal: false,
        };
        let svg = plan_svg(&p).unwrap();
        let doc = roxmltree::Document::parse(&svg).unwrap();
        let rects = doc
            .descendants()
            .filter(|n| n.attribute("class") == Some("buf"))
            .count();
        assert_eq!(rects, n);
        assert_eq!(
            doc.descendants()
                .filter(|n| n.has_tag_name("title"))
                .count(),
            0
        );
        assert!(texts(&doc)
            .iter()
            .any(|t| t.contains("no outlines or hover text")));
        assert!(svg.len() < 100 * n, "{} bytes", svg.len());
    }
}
