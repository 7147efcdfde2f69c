//! The report as one self-contained HTML file: the machine and command line
//! at the top, then per scenario a chart (inline SVG) and the same figures
//! as a table. No script, no stylesheet link, no image or font fetched.

use super::report_chart::{backend_color, scenario_svg};
use super::svg_text::{escape, split_svg, trim_number};
use super::DrawError;
use std::fmt::Write as _;

/// One back end's figures in one scenario (the columns of the text table).
#[derive(Clone, Debug, PartialEq)]
pub struct BackendFigures {
    /// Back end name (`warmarena`, `planned`, `glibc`, ...); picks its colour.
    pub name: String,
    /// Minor page faults of the cold (first) run.
    pub cold_faults: u64,
    /// Median minor page faults per warm run.
    pub warm_faults: u64,
    /// Median system calls per warm run, where the back end counts them.
    pub syscalls: Option<u64>,
    /// Median bytes from the OS per warm run, where counted.
    pub system_bytes: Option<u64>,
    /// Payload copies over the warm runs.
    pub copies: u64,
    /// Median warm-run time in milliseconds.
    pub warm_ms_median: f64,
    /// Fastest warm run.
    pub warm_ms_min: f64,
    /// Slowest warm run.
    pub warm_ms_max: f64,
    /// RSS growth over the scenario in bytes.
    pub rss_growth_bytes: usize,
    /// The workload's live peak in bytes (0: unknown).
    pub live_peak_bytes: usize,
}

impl BackendFigures {
    /// RSS growth over the live peak, when the peak is known.
    ///
    /// ```
    /// # use warmarena_cli::draw::BackendFigures;
    /// let mut f = BackendFigures { name: "glibc".into(), cold_faults: 0, warm_faults: 0,
    ///     syscalls: None, system_bytes: None, copies: 0, warm_ms_median: 1.0,
    ///     warm_ms_min: 1.0, warm_ms_max: 1.0, rss_growth_bytes: 150, live_peak_bytes: 100 };
    /// assert_eq!(f.rss_over_peak(), Some(1.5));
    /// f.live_peak_bytes = 0;
    /// assert_eq!(f.rss_over_peak(), None);
    /// ```
    pub fn rss_over_peak(&self) -> Option<f64> {
        (self.live_peak_bytes > 0)
            .then(|| self.rss_growth_bytes as f64 / self.live_peak_bytes as f64)
    }
}

/// One scenario on one workload: a chart and a table.
#[derive(Clone, Debug, PartialEq)]
pub struct ScenarioPicture {
    /// Heading, e.g. `scenario 1 (drop-outputs) on large-model`.
    pub title: String,
    /// One entry per back end, the reference (ratios are against it) first.
    pub backends: Vec<BackendFigures>,
    /// Lines printed under the table (trim results, arena figures).
    pub notes: Vec<String>,
}

/// What [`report_html`] draws.
///
/// ```
/// use warmarena_cli::draw::{report_html, BackendFigures, ReportPicture, ScenarioPicture};
/// let fig = |name: &str, ms: f64, faults: u64| BackendFigures {
///     name: name.into(), cold_faults: 40 + faults, warm_faults: faults, syscalls: None,
///     system_bytes: None, copies: 0, warm_ms_median: ms, warm_ms_min: ms * 0.9,
///     warm_ms_max: ms * 1.1, rss_growth_bytes: 1 << 20, live_peak_bytes: 1 << 20 };
/// let report = ReportPicture {
///     title: "warmarena report".into(),
///     machine: "2 cores".into(),
///     command: "warmarena report --html r.html".into(),
///     notes: vec![],
///     scenarios: vec![ScenarioPicture {
///         title: "scenario 1 (drop-outputs) on large-model".into(),
///         backends: vec![fig("warmarena", 20.0, 0), fig("glibc", 230.0, 87000)],
///         notes: vec![],
///     }],
/// };
/// let html = report_html(&report).unwrap();
/// assert_eq!(html.matches("<svg").count(), 1);
/// assert!(!html.contains("http://") && !html.contains("https://"));
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct ReportPicture {
    /// The page's heading.
    pub title: String,
    /// The machine the figures come from (CPU, cores, kernel).
    pub machine: String,
    /// The command line that produced them.
    pub command: String,
    /// Lines under the heading (workloads, how runs were driven).
    pub notes: Vec<String>,
    /// The scenarios, in report order.
    pub scenarios: Vec<ScenarioPicture>,
}

const STYLE: &str = "body{font-family:sans-serif;margin:24px auto;max-width:1200px;color:#222}\
h1{font-size:24px;margin:0 0 8px}h2{font-size:18px;margin:28px 0 6px}\
p{margin:4px 0}code{background:#f3f3f3;padding:1px 4px}\
.legend span{display:inline-block;margin-right:18px}\
.sw{display:inline-block;width:14px;height:14px;margin-right:6px;vertical-align:-2px}\
table{border-collapse:collapse;font-size:14px;margin-top:6px}\
th,td{border-bottom:1px solid #ddd;padding:3px 10px;text-align:right}\
th:first-child,td:first-child{text-align:left}th{background:#f6f6f6}\
.note{font-size:13px;color:#555}svg{display:block}";

/// The report as one HTML document that needs nothing else to display.
///
/// Each scenario gets one `<section class="scenario">` with one inline SVG
/// chart and a table of the same figures. The inline SVGs carry no `xmlns`
/// (HTML puts `<svg>` in the SVG namespace itself), so the file holds no
/// URL at all.
///
/// ```
/// use warmarena_cli::draw::{report_html, ReportPicture};
/// let r = ReportPicture { title: "empty".into(), machine: "m".into(), command: "c".into(),
///     notes: vec![], scenarios: vec![] };
/// let html = report_html(&r).unwrap();
/// assert!(html.starts_with("<!DOCTYPE html>") && html.contains("<h1>empty</h1>"));
/// ```
pub fn report_html(r: &ReportPicture) -> Result<String, DrawError> {
    let mut s = String::new();
    s.push_str("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\"/>\n");
    let _ = writeln!(s, "<title>{}</title>", escape(&r.title));
    let _ = writeln!(s, "<style>{STYLE}</style>\n</head>\n<body>");
    let _ = writeln!(s, "<h1>{}</h1>", escape(&r.title));
    let _ = writeln!(s, "<p>machine: {}</p>", escape(&r.machine));
    let _ = writeln!(s, "<p>command: <code>{}</code></p>", escape(&r.command));
    for n in &r.notes {
        let _ = writeln!(s, "<p class=\"note\">{}</p>", escape(n));
    }
    write_legend(&mut s, r);
    for sc in &r.scenarios {
        write_scenario(&mut s, sc)?;
    }
    s.push_str("</body>\n</html>\n");
    Ok(s)
}

/// Every back end of the report with its colour.
fn write_legend(s: &mut String, r: &ReportPicture) {
    let mut seen: Vec<&str> = Vec::new();
    for b in r.scenarios.iter().flat_map(|sc| &sc.backends) {
        if !seen.contains(&b.name.as_str()) {
            seen.push(&b.name);
        }
    }
    // The usual back ends in their usual order, then any others as met.
    const ORDER: [&str; 5] = ["warmarena", "planned", "glibc", "mimalloc", "jemalloc"];
    seen.sort_by_key(|n| ORDER.iter().position(|o| o == n).unwrap_or(ORDER.len()));
    s.push_str("<p class=\"legend\">");
    for name in seen {
        let _ = write!(s, "<span>{}{}</span>", swatch(name), escape(name));
    }
    s.push_str("</p>\n");
}

fn swatch(name: &str) -> String {
    let c = backend_color(name);
    format!(
        "<i class=\"sw\" style=\"background:#{:02x}{:02x}{:02x}\"></i>",
        c.0, c.1, c.2
    )
}

fn write_scenario(s: &mut String, sc: &ScenarioPicture) -> Result<(), DrawError> {
    let svg = scenario_svg(sc)?;
    let (open, body) = split_svg(&svg);
    let open = open.replace(" xmlns=\"http://www.w3.org/2000/svg\"", "");
    let _ = writeln!(
        s,
        "<section class=\"scenario\">\n<h2>{}</h2>",
        escape(&sc.title)
    );
    s.push_str(&open);
    s.push_str(body);
    s.push_str("</svg>\n<table>\n<tr><th>backend</th><th>cold faults</th><th>warm faults/run</th><th>syscalls/run</th><th>MiB from OS/run</th><th>copies</th><th>warm ms median [min–max]</th><th>time vs first</th><th>RSS growth / live peak</th></tr>\n");
    let base = sc
        .backends
        .first()
        .map_or(1.0, |b| b.warm_ms_median)
        .max(1e-9);
    for b in &sc.backends {
        let na = || "n/a".to_string();
        let _ = writeln!(
            s,
            "<tr><td>{}{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{:.2} [{:.2}–{:.2}]</td><td>{:.2}×</td><td>{}</td></tr>",
            swatch(&b.name),
            escape(&b.name),
            b.cold_faults,
            b.warm_faults,
            b.syscalls.map_or_else(na, |v| v.to_string()),
            b.system_bytes
                .map_or_else(na, |v| trim_number(v as f64 / (1u64 << 20) as f64, 1)),
            b.copies,
            b.warm_ms_median,
            b.warm_ms_min,
            b.warm_ms_max,
            b.warm_ms_median / base,
            b.rss_over_peak().map_or("-".into(), |r| format!("{r:.2}"))
        );
    }
    s.push_str("</table>\n");
    for n in &sc.notes {
        let _ = writeln!(s, "<p class=\"note\">{}</p>", escape(n));
    }
    s.push_str("</section>\n");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn figures(name: &str, ms: f64, warm: u64, cold: u64, rss: f64) -> BackendFigures {
        BackendFigures {
            name: name.into(),
            cold_faults: cold,
            warm_faults: warm,
            syscalls: (name == "warmarena").then_some(0),
            system_bytes: (name == "warmarena").then_some(0),
            copies: 0,
            warm_ms_median: ms,
            warm_ms_min: ms * 0.97,
            warm_ms_max: ms * 1.05,
            rss_growth_bytes: (rss * 100.0 * 1048576.0) as usize,
            live_peak_bytes: 100 << 20,
        }
    }

    fn report(scenarios: usize) -> ReportPicture {
        ReportPicture {
            title: "warmarena report <test>".into(),
            machine: "test machine & co".into(),
            command: "warmarena report --html out.html".into(),
            notes: vec!["each scenario: 1 cold run + 5 warm runs".into()],
            scenarios: (0..scenarios)
                .map(|k| ScenarioPicture {
                    title: format!("scenario {} on large-model", k + 1),
                    backends: vec![
                        figures("warmarena", 20.15, 0, 45, 1.2),
                        figures("planned", 18.12, 0, 38, 1.0),
                        figures("glibc", 237.03, 87360, 88971, 0.0),
                        figures("mimalloc", 22.5, 0, 941, 1.49),
                        figures("jemalloc", 253.69, 98320, 104509, 0.4),
                    ],
                    notes: vec![format!("note {k}")],
                })
                .collect(),
        }
    }

    #[test]
    fn one_chart_per_scenario_in_well_formed_markup() {
        let r = report(3);
        let html = report_html(&r).unwrap();
        let opt = roxmltree::ParsingOptions {
            allow_dtd: true,
            ..Default::default()
        };
        let doc = roxmltree::Document::parse_with_options(&html, opt)
            .expect("the page is well-formed XML too");
        let sections: Vec<_> = doc
            .descendants()
            .filter(|n| n.has_tag_name("section") && n.attribute("class") == Some("scenario"))
            .collect();
        assert_eq!(sections.len(), 3);
        for (sec, sc) in sections.iter().zip(&r.scenarios) {
            let svgs = sec.descendants().filter(|n| n.has_tag_name("svg")).count();
            assert_eq!(svgs, 1);
            let rows = sec.descendants().filter(|n| n.has_tag_name("tr")).count();
            assert_eq!(rows, sc.backends.len() + 1);
            let h2 = sec.descendants().find(|n| n.has_tag_name("h2")).unwrap();
            assert_eq!(h2.text(), Some(sc.title.as_str()));
        }
        assert_eq!(
            doc.descendants().filter(|n| n.has_tag_name("svg")).count(),
            3
        );
        let text: String = doc.descendants().filter_map(|n| n.text()).collect();
        assert!(text.contains("machine: test machine & co"));
        assert!(text.contains("warmarena report --html out.html"));
    }

    #[test]
    fn a_scenario_without_back_ends_still_gets_its_chart() {
        let mut r = report(2);
        r.scenarios[1].backends.clear();
        let html = report_html(&r).unwrap();
        assert_eq!(html.matches("<section class=\"scenario\">").count(), 2);
        assert_eq!(html.matches("<svg").count(), 2);
    }

    #[test]
    fn the_legend_lists_back_ends_in_their_usual_order() {
        let mut r = report(1);
        r.scenarios[0].backends.reverse();
        r.scenarios[0]
            .backends
            .push(figures("tcmalloc", 1.0, 0, 0, 1.0));
        let html = report_html(&r).unwrap();
        let legend = &html[html.find("<p class=\"legend\">").unwrap()..];
        let legend = &legend[..legend.find("</p>").unwrap()];
        let at = |n: &str| legend.find(&format!("</i>{n}</span>")).unwrap();
        let order = [
            "warmarena",
            "planned",
            "glibc",
            "mimalloc",
            "jemalloc",
            "tcmalloc",
        ];
        assert!(order.windows(2).all(|w| at(w[0]) < at(w[1])), "{legend}");
    }

    #[test]
    fn nothing_is_fetched_from_anywhere() {
        let html = report_html(&report(2)).unwrap();
        for bad in [
            "http://", "https://", "<script", "<link", "<img", " src=", "url(", "@import",
        ] {
            assert!(!html.contains(bad), "found {bad}");
        }
    }

    #[test]
    fn the_table_holds_the_same_figures() {
        let html = report_html(&report(1)).unwrap();
        assert!(html.contains("<td>237.03 [229.92–248.88]</td><td>11.76×</td><td>0.00</td>"));
        assert!(html.contains("<td>88971</td><td>87360</td><td>n/a</td><td>n/a</td>"));
        // The chart labels the bars with the same figures.
        assert!(html.contains(">\n87360\n</text>") && html.contains(">\n237.03\n</text>"));
    }

    #[test]
    fn each_back_end_keeps_its_colour_across_charts() {
        let html = report_html(&report(2)).unwrap();
        let c = backend_color("jemalloc");
        let fill = format!("fill=\"#{:02X}{:02X}{:02X}\"", c.0, c.1, c.2);
        // 4 panels × 2 scenarios (the zero-fault bars of other back ends are absent).
        assert_eq!(html.matches(&fill).count(), 8, "{fill}");
        assert_ne!(backend_color("warmarena"), backend_color("mimalloc"));
        assert_eq!(backend_color("tcmalloc"), backend_color("tcmalloc"));
    }
}
