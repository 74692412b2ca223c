//! Hosting a StitchDB store's surfaces in one process. A store is locked to the process that
//! opens it, so serving it (the Redis protocol) and mounting it (KVFS over FUSE) at once must
//! happen in one process, over one [`stitchdb::Db`]: the [`Host`] opens it once, shares it
//! among the surfaces started over it, and once the first of them ends (a SIGTERM, SIGINT or
//! SIGHUP, a client's `SHUTDOWN`, an `umount`) stops the others and closes the store
//! durably.
//!
//! ```no_run
//! use stitchdb_host::{Host, OpenOptions, Surface};
//!
//! let db = stitchdb_host::open("my.store".as_ref(), &OpenOptions::default())?;
//! let mut host = Host::new(db);
//! host.watch_signals()?;
//! // A surface: here a thread serving the store until it is told to stop.
//! let (stop, stopped) = std::sync::mpsc::channel::<()>();
//! let db = host.db().clone();
//! let server = std::thread::spawn(move || {
//!     let _ = stopped.recv(); // ... serving `db` ...
//!     drop(db);
//! });
//! host.add(Surface::new(
//!     "server",
//!     move || {
//!         let _ = stop.send(());
//!     },
//!     move || server.join().map_err(|_| "the server panicked".to_string()),
//! ))?;
//! host.run()?; // until a signal; then the store is closed
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Modules, bottom up: `open` (the one open policy every surface and command uses: the lock
//! wait, the options, the errors), `surface` ([`Surface`]: a way to wait for a surface's end
//! and a way to ask it to stop), `signals` (the stop signals as a surface) and `host`.

#![forbid(unsafe_code)]

mod host;
mod open;
mod signals;
mod surface;

pub use host::Host;
pub use open::{open, OpenError, OpenOptions, LOCK_WAIT_MS};
pub use surface::Surface;
