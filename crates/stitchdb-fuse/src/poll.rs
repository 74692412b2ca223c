//! [`Poller`]: the session thread polls `/dev/fuse` for a short while after each request
//! instead of sleeping in `read(2)`.
//!
//! Why: a FUSE request is a ping-pong between the caller's thread and the session thread.
//! When the session thread sleeps in `read`, each request has to wake it, and on a virtual
//! machine whose idle CPUs halt (no halt-polling in the guest), waking a thread on another,
//! halted CPU costs tens of microseconds: more than the operation itself (docs/kvfs.md,
//! "Serving").
//!
//! How: `fuser`'s session loop retries a read that fails with `EAGAIN` at once, so making the
//! device's file description non-blocking turns that loop into a poll. Every request marks
//! the mount busy ([`Poller::busy`]); a controller thread puts the descriptor back into
//! blocking mode once no request has come for the poll window, so an idle mount sleeps and
//! costs nothing. The first request of a burst wakes the thread as before and starts the
//! polling again.

use parking_lot::{Condvar, Mutex};
use rustix::event::{poll, PollFd, PollFlags, Timespec};
use rustix::fs::{fcntl_getfl, fcntl_setfl, OFlags};
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The default poll window: how long the session thread keeps polling after a request.
/// About what a program takes between the system calls of a burst (tar between files,
/// `find` between directories), and what Linux's guest halt-polling allows by default.
pub const DEFAULT_POLL_WINDOW: Duration = Duration::from_micros(200);

/// Switches the FUSE device between polling and sleeping; see the module's doc.
pub struct Poller {
    shared: Arc<Shared>,
    controller: Option<std::thread::JoinHandle<()>>,
}

struct Shared {
    /// A duplicate of the session's `/dev/fuse` descriptor: the same open file description,
    /// so its `O_NONBLOCK` is the session loop's.
    device: OwnedFd,
    window: Duration,
    epoch: Instant,
    /// When the last request came, in nanoseconds since `epoch`.
    last_request: AtomicU64,
    /// Whether the device is non-blocking now (read without the lock on every request).
    polling: AtomicBool,
    /// Guards the switches of `O_NONBLOCK`, and `stop`.
    state: Mutex<bool>,
    /// Wakes the controller when polling starts, or to stop it.
    wake: Condvar,
}

impl Poller {
    /// Polls `device` (a duplicate of the session's descriptor) for `window` after each
    /// request. `None` when the window is zero: the session thread always sleeps.
    pub fn start(device: OwnedFd, window: Duration) -> std::io::Result<Option<Poller>> {
        if window.is_zero() {
            return Ok(None);
        }
        let shared = Arc::new(Shared {
            device,
            window,
            epoch: Instant::now(),
            last_request: AtomicU64::new(0),
            polling: AtomicBool::new(false),
            state: Mutex::new(false),
            wake: Condvar::new(),
        });
        let s = shared.clone();
        let controller = std::thread::Builder::new()
            .name("kvfs-poll".into())
            .spawn(move || s.control())?;
        Ok(Some(Poller {
            shared,
            controller: Some(controller),
        }))
    }

    /// Marks the mount busy: called at the start of every request.
    pub fn busy(&self) {
        let s = &self.shared;
        s.last_request.store(s.now(), Ordering::Relaxed);
        if !s.polling.load(Ordering::Relaxed) {
            let _stop = s.state.lock();
            if !s.polling.load(Ordering::Relaxed) && s.set_nonblocking(true) {
                s.polling.store(true, Ordering::Relaxed);
                s.wake.notify_one();
            }
        }
    }

    /// Whether a request is waiting on the device now (a poll that does not sleep): the
    /// session thread serves a short read itself only when nothing queues behind it.
    pub fn request_waiting(&self) -> bool {
        let mut fds = [PollFd::new(&self.shared.device, PollFlags::IN)];
        let zero = Timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        matches!(poll(&mut fds, Some(&zero)), Ok(n) if n > 0)
    }
}

impl Drop for Poller {
    fn drop(&mut self) {
        *self.shared.state.lock() = true;
        self.shared.wake.notify_one();
        if let Some(t) = self.controller.take() {
            let _ = t.join();
        }
    }
}

impl Shared {
    fn now(&self) -> u64 {
        self.epoch.elapsed().as_nanos() as u64
    }

    /// Sets or clears `O_NONBLOCK`; false if the descriptor refused (then nothing changes).
    fn set_nonblocking(&self, on: bool) -> bool {
        let flags = match fcntl_getfl(&self.device) {
            Ok(f) => f,
            Err(e) => {
                tracing::warn!("reading the FUSE device's flags: {e}");
                return false;
            }
        };
        let flags = if on {
            flags | OFlags::NONBLOCK
        } else {
            flags - OFlags::NONBLOCK
        };
        match fcntl_setfl(&self.device, flags) {
            Ok(()) => true,
            Err(e) => {
                tracing::warn!("switching the FUSE device's O_NONBLOCK: {e}");
                false
            }
        }
    }

    /// The controller: sleeps while the session thread sleeps; while it polls, looks every
    /// window whether a whole window passed without a request, and if so puts the device
    /// back to blocking reads.
    fn control(&self) {
        let mut stop = self.state.lock();
        loop {
            if *stop {
                if self.polling.load(Ordering::Relaxed) {
                    self.set_nonblocking(false);
                }
                return;
            }
            if !self.polling.load(Ordering::Relaxed) {
                self.wake.wait(&mut stop);
                continue;
            }
            let idle = Duration::from_nanos(
                self.now()
                    .saturating_sub(self.last_request.load(Ordering::Relaxed)),
            );
            if idle >= self.window {
                if self.set_nonblocking(false) {
                    self.polling.store(false, Ordering::Relaxed);
                }
                continue;
            }
            // A whole window at a time: while requests keep coming the controller wakes once
            // per window (waking more often costs CPU the requests need), and the device goes
            // back to sleeping at most two windows after the last request.
            let _ = self.wake.wait_for(&mut stop, self.window);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    fn nonblocking(fd: impl AsFd) -> bool {
        fcntl_getfl(fd).unwrap().contains(OFlags::NONBLOCK)
    }

    /// Waits up to two seconds for the device to reach `want`.
    fn settles(device: &OwnedFd, want: bool) -> bool {
        let deadline = Instant::now() + Duration::from_secs(2);
        while Instant::now() < deadline {
            if nonblocking(device) == want {
                return true;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        false
    }

    #[test]
    fn polls_after_a_request_and_sleeps_once_idle_for_the_window() {
        let (read_end, _write_end) = rustix::pipe::pipe().unwrap();
        let ours = read_end.try_clone().unwrap();
        let poller = Poller::start(ours, Duration::from_millis(20))
            .unwrap()
            .unwrap();
        assert!(!nonblocking(&read_end), "idle before any request");
        poller.busy();
        assert!(nonblocking(&read_end), "polling from the first request on");
        // Requests more often than the window keep it polling.
        for _ in 0..10 {
            std::thread::sleep(Duration::from_millis(5));
            poller.busy();
            assert!(nonblocking(&read_end));
        }
        assert!(settles(&read_end, false), "back to sleeping once idle");
        // The next burst polls again.
        poller.busy();
        assert!(nonblocking(&read_end));
        drop(poller);
        assert!(
            !nonblocking(&read_end),
            "left blocking when the session ends"
        );
    }

    #[test]
    fn a_waiting_request_is_seen_without_taking_it() {
        let (read_end, write_end) = rustix::pipe::pipe().unwrap();
        let poller = Poller::start(read_end.try_clone().unwrap(), Duration::from_millis(20))
            .unwrap()
            .unwrap();
        assert!(!poller.request_waiting(), "nothing written yet");
        rustix::io::write(&write_end, b"r").unwrap();
        assert!(poller.request_waiting());
        assert!(poller.request_waiting(), "looking does not consume it");
        let mut byte = [0u8];
        rustix::io::read(&read_end, &mut byte).unwrap();
        assert!(!poller.request_waiting(), "taken");
    }

    #[test]
    fn a_zero_window_never_polls() {
        let (read_end, _write_end) = rustix::pipe::pipe().unwrap();
        let poller = Poller::start(read_end.try_clone().unwrap(), Duration::ZERO).unwrap();
        assert!(poller.is_none());
        assert!(!nonblocking(&read_end));
    }
}
