//! FUSE over io_uring (Linux 6.14 and later): a FUSE daemon's requests served by one
//! io_uring queue per CPU instead of `read(2)` and `write(2)` on `/dev/fuse`.
//!
//! Why: a request made on a CPU is handed to the queue of that CPU, and the queue's thread
//! is pinned there, so the caller and the thread serving it take turns on one CPU: no
//! wake-up of another (on a virtual machine, waking a halted CPU costs tens of
//! microseconds), and the reply and the fetch of the next request are one system call.
//!
//! How it fits a daemon: it makes the rings when it opens the device ([`Prepared::new`]),
//! starts the queues while it answers INIT ([`Prepared::start`]; they register once the
//! kernel has the reply), and asks for [`abi::FUSE_OVER_IO_URING`] in that reply if the
//! kernel offers it (the `fuse` module's `enable_uring` parameter), stopping the queues if
//! not. From then on the kernel sends every request through them except FORGET and
//! INTERRUPT, which still come on `/dev/fuse`. A [`Handler`] serves the requests, on all
//! queue threads at once. If registering fails, the kernel falls back to `/dev/fuse` by
//! itself.
//!
//! While requests keep coming (within the poll window given to [`Prepared::new`]), one thread
//! per CPU polls its ring instead of sleeping, so that no CPU halts between a reply and the
//! caller's next request, unless its CPU turns out busy with other work; an idle
//! connection's threads all sleep.

pub mod abi;
mod queue;

pub use abi::{FuseAttr, Request};
pub use queue::{Later, Prepared, Queues};

/// Serves the requests of the queues (on every queue's thread, concurrently).
pub trait Handler: Send + Sync + 'static {
    /// Runs first on each queue thread (already pinned to its CPU), for per-thread settings.
    fn thread_started(&self) {}

    /// Serves `req`: appends the reply's arguments to `out` (empty on entry), or returns the
    /// errno to answer with. A handler that answers from another thread takes `later` and
    /// sends the reply through it; what it returns is then ignored.
    fn handle(
        &self,
        req: &Request<'_>,
        out: &mut Vec<u8>,
        later: &mut Option<Later>,
    ) -> Result<(), i32>;
}
