//! One scenario's chart for the HTML report: four bar panels (warm ms with
//! min–max whiskers, warm faults per run on a log scale, RSS growth over the
//! live peak, cold-run faults on a log scale), one bar per back end in the
//! back end's fixed colour.

use super::report_html::{BackendFigures, ScenarioPicture};
use super::svg_text::trim_number;
use super::DrawError;
use plotters::coord::combinators::LogCoord;
use plotters::coord::ranged1d::{AsRangedCoord, SegmentValue, ValueFormatter};
use plotters::coord::Shift;
use plotters::element::DashedPathElement;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

/// Size of one scenario's chart in pixels.
pub(crate) const CHART_SIZE: (u32, u32) = (1180, 540);
const FONT: &str = "sans-serif";

/// The colour of back end `name`, the same in every chart and table.
pub(crate) fn backend_color(name: &str) -> RGBColor {
    match name {
        "warmarena" => RGBColor(31, 119, 180),
        "planned" => RGBColor(148, 103, 189),
        "glibc" => RGBColor(127, 127, 127),
        "mimalloc" => RGBColor(255, 127, 14),
        "jemalloc" => RGBColor(44, 160, 44),
        other => {
            const MORE: [RGBColor; 4] = [
                RGBColor(214, 39, 40),
                RGBColor(227, 119, 194),
                RGBColor(188, 189, 34),
                RGBColor(23, 190, 207),
            ];
            let h = other
                .bytes()
                .fold(0usize, |h, b| h.wrapping_mul(31).wrapping_add(b as usize));
            MORE[h % MORE.len()]
        }
    }
}

/// One bar: its value (none: not measured), an optional whisker, its label.
struct Bar {
    value: Option<f64>,
    whisker: Option<(f64, f64)>,
    label: String,
}

/// What one panel shows.
struct Panel<'a> {
    caption: &'a str,
    bars: Vec<Bar>,
    /// A dashed horizontal reference line (the caption says what it is).
    reference: Option<f64>,
}

/// The scenario's four panels as one SVG document.
pub(crate) fn scenario_svg(s: &ScenarioPicture) -> Result<String, DrawError> {
    let names: Vec<&str> = s.backends.iter().map(|b| b.name.as_str()).collect();
    let colors: Vec<RGBColor> = names.iter().map(|n| backend_color(n)).collect();
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, CHART_SIZE).into_drawing_area();
        root.fill(&WHITE)?;
        let areas = root.split_evenly((2, 2));
        let ms = Panel {
            caption: "warm run time, ms (median; whiskers: min–max)",
            bars: s.backends.iter().map(ms_bar).collect(),
            reference: None,
        };
        let top = ms
            .bars
            .iter()
            .filter_map(|b| b.whisker.map(|w| w.1).or(b.value))
            .fold(0.0, f64::max);
        draw_panel(&areas[0], &ms, &names, &colors, 0.0..(top * 1.22).max(1e-3))?;
        let counts = |f: fn(&BackendFigures) -> u64| {
            s.backends
                .iter()
                .map(|b| Bar {
                    value: Some(f(b) as f64),
                    whisker: None,
                    label: f(b).to_string(),
                })
                .collect::<Vec<_>>()
        };
        let faults = Panel {
            caption: "warm-run page faults per run (log scale)",
            bars: counts(|b| b.warm_faults),
            reference: None,
        };
        draw_panel(&areas[1], &faults, &names, &colors, log_range(&faults))?;
        let rss = Panel {
            caption: "RSS growth / live peak (dashed: 1 = the live peak)",
            bars: s
                .backends
                .iter()
                .map(|b| {
                    let r = b.rss_over_peak();
                    Bar {
                        value: r,
                        whisker: None,
                        label: r.map_or("n/a".into(), |r| format!("{r:.2}")),
                    }
                })
                .collect(),
            reference: Some(1.0),
        };
        let top = rss.bars.iter().filter_map(|b| b.value).fold(1.0, f64::max);
        draw_panel(&areas[2], &rss, &names, &colors, 0.0..top * 1.25)?;
        let cold = Panel {
            caption: "cold-run page faults (log scale)",
            bars: counts(|b| b.cold_faults),
            reference: None,
        };
        draw_panel(&areas[3], &cold, &names, &colors, log_range(&cold))?;
        root.present()?;
    }
    Ok(out)
}

fn ms_bar(b: &BackendFigures) -> Bar {
    Bar {
        value: Some(b.warm_ms_median),
        whisker: Some((b.warm_ms_min, b.warm_ms_max)),
        label: format!("{:.2}", b.warm_ms_median),
    }
}

/// A log axis from 0.5 (where a zero count sits) to above the largest bar.
fn log_range(p: &Panel) -> LogCoord<f64> {
    let top = p.bars.iter().filter_map(|b| b.value).fold(1.0, f64::max);
    (0.5..(top * 8.0).max(10.0)).log_scale().into()
}

/// One bar panel: bars from the axis' base, whiskers, a label over each bar.
fn draw_panel<Y>(
    area: &DrawingArea<SVGBackend<'_>, Shift>,
    p: &Panel,
    names: &[&str],
    colors: &[RGBColor],
    y: Y,
) -> Result<(), DrawError>
where
    Y: AsRangedCoord<Value = f64>,
    Y::CoordDescType: Ranged<ValueType = f64> + ValueFormatter<f64>,
{
    let n = names.len().max(1) as i32;
    let mut chart = ChartBuilder::on(area)
        .caption(p.caption, (FONT, 19))
        .margin(10)
        .margin_right(18)
        .x_label_area_size(30)
        .y_label_area_size(64)
        .build_cartesian_2d((0..n - 1).into_segmented(), y)?;
    let base = chart.y_range().start;
    let top = chart.y_range().end;
    let name_of = |v: &SegmentValue<i32>| match v {
        SegmentValue::CenterOf(k) => names.get(*k as usize).copied().unwrap_or("").to_string(),
        _ => String::new(),
    };
    let tick = |v: &f64| {
        if *v >= 1000.0 {
            format!("{:.0}k", v / 1000.0)
        } else {
            trim_number(*v, 2)
        }
    };
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(names.len())
        .x_label_formatter(&name_of)
        .y_labels(6)
        .y_label_formatter(&tick)
        .light_line_style(TRANSPARENT)
        .bold_line_style(RGBColor(228, 228, 228))
        .label_style((FONT, 16))
        .draw()?;
    for (k, bar) in p.bars.iter().enumerate() {
        let k32 = k as i32;
        let color = colors.get(k).copied().unwrap_or(BLACK);
        if let Some(v) = bar.value.filter(|v| *v > base) {
            let mut r = Rectangle::new(
                [
                    (SegmentValue::Exact(k32), base),
                    (SegmentValue::Exact(k32 + 1), v.min(top)),
                ],
                color.filled(),
            );
            r.set_margin(0, 0, 14, 14);
            chart.draw_series([r])?;
        }
        let mut label_at = bar.value.unwrap_or(base).max(base);
        if let Some((lo, hi)) = bar.whisker {
            let at = SegmentValue::CenterOf(k32);
            let style = BLACK.stroke_width(1);
            chart.draw_series([PathElement::new(
                vec![(at.clone(), lo), (at.clone(), hi)],
                style,
            )])?;
            for y in [lo, hi] {
                chart.draw_series([EmptyElement::at((at.clone(), y))
                    + PathElement::new(vec![(-7, 0), (7, 0)], style)])?;
            }
            label_at = label_at.max(hi);
        }
        let text = (FONT, 16)
            .into_font()
            .color(&BLACK)
            .pos(Pos::new(HPos::Center, VPos::Bottom));
        chart.draw_series([EmptyElement::at((SegmentValue::CenterOf(k32), label_at))
            + Text::new(bar.label.clone(), (0, -3), text)])?;
    }
    if let Some(v) = p.reference {
        let ends = [(SegmentValue::Exact(0), v), (SegmentValue::Exact(n), v)];
        chart.draw_series([DashedPathElement::new(
            ends,
            8,
            5,
            BLACK.mix(0.7).stroke_width(1),
        )])?;
    }
    Ok(())
}
