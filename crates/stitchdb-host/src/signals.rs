//! The process's stop signals as a surface: it ends at the first SIGTERM, SIGINT or SIGHUP,
//! which is how a host is told from outside to stop everything.

use crate::surface::Surface;
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
use signal_hook::iterator::Signals;

/// Catches SIGTERM, SIGINT and SIGHUP from now on (a signal that comes before the surface is
/// waited for is kept for it). Stopping it only stops the watching: the signals stay caught,
/// so a second Ctrl-C cannot interrupt the store's close.
pub fn surface() -> Result<Surface, String> {
    let mut signals = Signals::new([SIGTERM, SIGINT, SIGHUP])
        .map_err(|e| format!("installing signal handlers: {e}"))?;
    let handle = signals.handle();
    let wait = move || {
        if let Some(sig) = signals.forever().next() {
            tracing::info!("signal {sig}: stopping");
        }
        Ok(())
    };
    Ok(Surface::new("signals", move || handle.close(), wait))
}
