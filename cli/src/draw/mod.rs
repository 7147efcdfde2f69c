//! Pictures of the CLI's results: the plan's packing as an SVG
//! ([`plan_svg()`]) and the report's comparisons as one self-contained HTML
//! file ([`report_html()`]).
//!
//! The pictures are drawn from plain data ([`PlanPicture`],
//! [`ReportPicture`]); [`convert`] builds them from the planner's and the
//! report's own types. Axes, ticks, bars and legends are drawn with
//! `plotters` (SVG backend); the plan's buffer rectangles are written here,
//! because each carries a hover `<title>` and sub-pixel coordinates, which
//! `plotters` elements do not have.

pub mod convert;
mod plan_svg;
mod report_chart;
mod report_html;
mod svg_text;

#[cfg(test)]
mod samples;

pub use plan_svg::{plan_svg, PlanBuffer, PlanPicture, OUTLINE_LIMIT, TITLE_LIMIT};
pub use report_html::{report_html, BackendFigures, ReportPicture, ScenarioPicture};

use std::fmt;

/// Why a picture could not be drawn (an error of the drawing backend).
///
/// ```
/// use warmarena_cli::draw::DrawError;
/// assert_eq!(DrawError("no room".into()).to_string(), "drawing failed: no room");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DrawError(pub String);

impl fmt::Display for DrawError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "drawing failed: {}", self.0)
    }
}

impl std::error::Error for DrawError {}

impl<E: std::error::Error + Send + Sync> From<plotters::drawing::DrawingAreaErrorKind<E>>
    for DrawError
{
    fn from(e: plotters::drawing::DrawingAreaErrorKind<E>) -> Self {
        DrawError(e.to_string())
    }
}
