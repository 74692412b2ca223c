//! Progress bars on stderr, shown only when stderr is a terminal (so pipes and logs stay clean).

use indicatif::{ProgressBar, ProgressStyle};
use std::io::IsTerminal;

/// Inputs smaller than this import too fast for a bar to be worth drawing.
const LARGE_INPUT: u64 = 4 << 20;

/// A progress bar, or nothing when there is no one to watch it.
pub struct Progress(ProgressBar);

const BYTES: &str =
    "{elapsed_precise} [{wide_bar}] {bytes}/{total_bytes} ({bytes_per_sec}, {eta} left)";
const BYTES_UNKNOWN_TOTAL: &str = "{spinner} {elapsed_precise} {bytes} read ({bytes_per_sec})";
const ITEMS: &str =
    "{elapsed_precise} [{wide_bar}] {human_pos}/{human_len} {msg} ({per_sec}, {eta} left)";

impl Progress {
    /// Progress through an input of `total` bytes; `None` (a pipe): a spinner counting bytes.
    pub fn bytes(total: Option<u64>) -> Progress {
        match total {
            Some(total) if total < LARGE_INPUT => Progress(ProgressBar::hidden()),
            Some(total) => Progress::shown(ProgressBar::new(total).with_style(style(BYTES))),
            None => {
                Progress::shown(ProgressBar::new_spinner().with_style(style(BYTES_UNKNOWN_TOTAL)))
            }
        }
    }

    /// Progress through `total` items of work described by `what`.
    pub fn items(total: u64, what: &'static str) -> Progress {
        Progress::shown(
            ProgressBar::new(total)
                .with_style(style(ITEMS))
                .with_message(what),
        )
    }

    /// A spinner for work of unknown length described by `what`.
    pub fn spinner(what: &'static str) -> Progress {
        let bar = ProgressBar::new_spinner()
            .with_style(style("{spinner} {elapsed_precise} {msg}"))
            .with_message(what);
        bar.enable_steady_tick(std::time::Duration::from_millis(100));
        Progress::shown(bar)
    }

    fn shown(bar: ProgressBar) -> Progress {
        if std::io::stderr().is_terminal() {
            Progress(bar)
        } else {
            Progress(ProgressBar::hidden())
        }
    }

    pub fn set_position(&self, position: u64) {
        self.0.set_position(position);
    }

    /// Removes the bar, so the summary that follows stands alone.
    pub fn finish(self) {
        self.0.finish_and_clear();
    }
}

fn style(template: &str) -> ProgressStyle {
    ProgressStyle::with_template(template)
        .expect("progress templates are constants and valid")
        .progress_chars("=> ")
}
