//! The report's progress line: an indicatif bar on standard error, drawn
//! only when standard error is a terminal, so it never mixes with the tables
//! or the JSON on standard output, or with a pipe or CI log.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// A progress bar over `len` steps that draws only on a terminal.
///
/// ```
/// let bar = warmarena_cli::progress::steps(3);
/// bar.set_message("scenario 1 on warmarena");
/// bar.inc(1);
/// bar.finish_and_clear();
/// ```
pub fn steps(len: u64) -> ProgressBar {
    // `stderr()` hides itself when standard error is not a terminal.
    let bar = ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::stderr());
    if let Ok(style) = ProgressStyle::with_template("[{pos}/{len}] {bar:30} {elapsed} {msg}") {
        bar.set_style(style);
    }
    bar
}
