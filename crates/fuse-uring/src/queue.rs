//! The queues: a few threads per CPU, pinned to it, each with its own io_uring and a few
//! entries (a header and a payload buffer each) registered with the kernel's queue of that
//! CPU.

#![allow(unsafe_code)]

use crate::abi::{self, Request};
use crate::Handler;
use io_uring::{opcode, squeue, types, IoUring};
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, Sender};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Threads per queue: two, so that a request waiting for the disk (a cold read) does not
/// hold up the next. The kernel hands a request to the entry committed last (its list of
/// free entries is a stack), so a lone caller keeps meeting the same thread: the one that
/// polls (see [`Queue::polls`]).
const THREADS_PER_QUEUE: usize = 2;

/// Entries per thread: requests it can hold at once, counting those answered [`Later`].
const ENTRIES: usize = 2;

/// The `user_data` of the read of a thread's wake-up eventfd.
const WAKE: u64 = u64::MAX;

/// How often an idle queue thread looks whether it should stop.
const STOP_CHECK: Duration = Duration::from_millis(100);

/// A yield of a polling thread that takes longer than this gave its CPU to other work: the
/// CPU is busy, so it will not halt, and the thread sleeps until its next request instead
/// of polling behind that work (where the time it spent spinning would make the scheduler
/// put it behind the other work when a request comes, delaying that request by the other
/// work's time slices).
const CONTENDED: Duration = Duration::from_micros(50);

/// The rings of a connection, made before INIT is answered so that the daemon offers the
/// queues only when it has them.
pub struct Prepared {
    device: Arc<OwnedFd>,
    poll_window: Duration,
    /// Each ring with the queue (CPU) it serves, and whether that CPU is online (its threads
    /// are pinned there).
    rings: Vec<(u16, bool, IoUring<squeue::Entry128>)>,
}

/// The running queues of a connection.
pub struct Queues {
    stop: Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Prepared {
    /// The rings of `THREADS_PER_QUEUE` threads for each online CPU, and of one for each CPU
    /// that is possible but not online (the kernel's queues are one per possible CPU, and
    /// it serves none until all have registered), for the connection of `device` (a
    /// descriptor of its `/dev/fuse`). While a request came to any queue within
    /// `poll_window`, the thread of each online CPU's queue that served its last request
    /// polls its ring instead of sleeping (zero: the threads always sleep).
    pub fn new(device: OwnedFd, poll_window: Duration) -> std::io::Result<Prepared> {
        let sys = |name| std::fs::read_to_string(format!("/sys/devices/system/cpu/{name}"));
        let possible = sys("possible").map_or(1, |l| cpu_list(&l).len()).max(1);
        let online = sys("online").map(|l| cpu_list(&l)).unwrap_or_default();
        let rings = (0..possible)
            .flat_map(|qid| {
                let on = online.is_empty() || online.contains(&qid);
                let threads = if on { THREADS_PER_QUEUE } else { 1 };
                std::iter::repeat_n((qid as u16, on), threads)
            })
            .map(|(qid, on)| {
                // 128-byte entries carry the command; the ring serves one thread, which
                // runs the kernel's work for it only when it waits (DEFER_TASKRUN). It is
                // enabled on that thread, its only submitter.
                IoUring::builder()
                    .setup_single_issuer()
                    .setup_defer_taskrun()
                    .setup_r_disabled()
                    .build(2 * ENTRIES as u32 + 1)
                    .map(|ring| (qid, on, ring))
            })
            .collect::<std::io::Result<Vec<_>>>()?;
        Ok(Prepared {
            device: Arc::new(device),
            poll_window,
            rings,
        })
    }

    /// Starts the queue threads; `payload` is each entry's payload buffer (at least the
    /// connection's largest request: `max_write` and `max_pages` pages).
    pub fn start(self, handler: Arc<dyn Handler>, payload: usize) -> std::io::Result<Queues> {
        let stop = Arc::new(AtomicBool::new(false));
        let busy = Arc::new(Busy::new(self.poll_window));
        let mut threads = Vec::new();
        let mut previous: Option<(u16, usize, Arc<AtomicUsize>)> = None;
        for (qid, pinned, ring) in self.rings {
            let (device, handler, stop) = (self.device.clone(), handler.clone(), stop.clone());
            let (member, last_server) = match previous.take() {
                Some((q, n, last)) if q == qid => (n + 1, last),
                _ => (0, Arc::new(AtomicUsize::new(0))),
            };
            previous = Some((qid, member, last_server.clone()));
            let may_poll = pinned && !self.poll_window.is_zero();
            let busy = busy.clone();
            let t = std::thread::Builder::new()
                .name(format!("fuse-queue-{qid}"))
                .spawn(move || {
                    let q = Queue {
                        qid,
                        pinned,
                        may_poll,
                        member,
                        last_server,
                        busy,
                        device,
                        handler,
                        stop,
                    };
                    if let Err(e) = q.run(ring, payload) {
                        tracing::error!("FUSE queue {qid}: {e}");
                    }
                })?;
            threads.push(t);
        }
        Ok(Queues { stop, threads })
    }
}

impl Queues {
    /// Stops the threads (once the connection is gone: a queue stopped while the kernel
    /// still sends it requests leaves them unanswered) and waits for them.
    pub fn stop(self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads {
            let _ = t.join();
        }
    }
}

/// The CPUs of a list in the kernel's format (`0-3,8,10-11`).
fn cpu_list(list: &str) -> Vec<usize> {
    list.trim()
        .split(',')
        .filter_map(|r| match r.split_once('-') {
            Some((a, b)) => Some(a.parse().ok()?..=b.parse().ok()?),
            None => r.parse().ok().map(|c| c..=c),
        })
        .flatten()
        .collect()
}

/// An entry's buffers. They stay where they are while the kernel holds their addresses: it
/// writes a request into them (in this thread's context, while it waits in the ring) and
/// reads the reply from them when the entry is committed.
struct Slot {
    header: Box<[u8]>,
    payload: Box<[u8]>,
    iov: Box<[libc::iovec; 2]>,
    /// The `unique` and commit id of the request the slot holds while it is answered
    /// [`Later`].
    waiting: Option<(u64, u64)>,
}

/// A reply that another thread sends (see [`crate::Handler::handle`]). Dropped unsent, it
/// answers `EIO`.
pub struct Later {
    slot: usize,
    back: Arc<Back>,
    sent: bool,
}

/// How replies sent [`Later`] reach their queue thread: a channel of the slots answered, and
/// an eventfd whose read the thread keeps pending in its ring, so that a write to it wakes
/// the thread.
struct Back {
    tx: Sender<(usize, Result<Vec<u8>, i32>)>,
    wake: OwnedFd,
}

impl Later {
    /// Sends the reply: its arguments, or the errno to answer with.
    pub fn send(mut self, reply: Result<Vec<u8>, i32>) {
        self.sent = true;
        self.deliver(reply);
    }

    fn deliver(&self, reply: Result<Vec<u8>, i32>) {
        // The receiver lives as long as the thread's ring; a reply after it stopped has no
        // request left to answer.
        if self.back.tx.send((self.slot, reply)).is_ok() {
            let _ = rustix::io::write(&self.back.wake, &1u64.to_ne_bytes());
        }
    }
}

impl Drop for Later {
    fn drop(&mut self) {
        if !self.sent {
            self.deliver(Err(libc::EIO));
        }
    }
}

/// Writes a reply into a slot's buffers: its arguments, or the errno.
fn write_reply(header: &mut [u8], payload: &mut [u8], unique: u64, reply: Result<&[u8], i32>) {
    match reply {
        Ok(bytes) if bytes.len() <= payload.len() => {
            payload[..bytes.len()].copy_from_slice(bytes);
            abi::set_reply_header(header, unique, 0, bytes.len());
        }
        Ok(bytes) => {
            tracing::error!("a FUSE reply of {} bytes does not fit", bytes.len());
            abi::set_reply_header(header, unique, libc::EIO, 0);
        }
        Err(errno) => abi::set_reply_header(header, unique, errno, 0),
    }
}

/// When the connection last had a request, for the threads that poll while it is busy.
///
/// Why poll: on a virtual machine whose idle CPUs halt, a caller woken by its reply is put on
/// the other CPU whenever that one is idle (the queue thread that wakes it still runs on
/// the caller's own), and waking a halted CPU costs tens of microseconds; the caller's next
/// request then goes to that CPU's queue, whose thread must be woken too. While the mount
/// is busy, one thread per CPU keeps its CPU out of the halt by polling its ring, yielding
/// to anything else that wants the CPU between looks, so the caller stays where it is and
/// its next request is taken without a wake-up (docs/kvfs.md, "Polling while the mount is
/// busy").
struct Busy {
    epoch: Instant,
    /// Nanoseconds since `epoch` when a request last came to any queue.
    last: AtomicU64,
    window: Duration,
}

impl Busy {
    fn new(window: Duration) -> Busy {
        Busy {
            epoch: Instant::now(),
            last: AtomicU64::new(0),
            window,
        }
    }

    fn now(&self) -> u64 {
        self.epoch.elapsed().as_nanos() as u64
    }

    fn request_came(&self) {
        self.last.store(self.now(), Ordering::Relaxed);
    }

    /// Whether a request came within the window.
    fn recent(&self) -> bool {
        let last = self.last.load(Ordering::Relaxed);
        last != 0 && self.now().saturating_sub(last) < self.window.as_nanos() as u64
    }
}

struct Queue {
    qid: u16,
    device: Arc<OwnedFd>,
    handler: Arc<dyn Handler>,
    stop: Arc<AtomicBool>,
    /// Kept on its queue's CPU (false for a CPU that is not online).
    pinned: bool,
    /// Polls its ring while the connection is busy, when it served its queue's last request
    /// (an online queue's thread; see [`Queue::polls`]).
    may_poll: bool,
    /// Which of its queue's threads this is.
    member: usize,
    /// Which of the queue's threads served its last request (shared by them).
    last_server: Arc<AtomicUsize>,
    busy: Arc<Busy>,
}

impl Queue {
    fn run(&self, mut ring: IoUring<squeue::Entry128>, payload: usize) -> std::io::Result<()> {
        // All of a queue's threads stay on its CPU: one left free (to run beside a reader
        // that keeps its CPU busy) would take the requests of callers waiting for their
        // answer too, serving them on the other CPU, which costs the round trips far more
        // than it gains sequential reads.
        if self.pinned {
            pin_to_cpu(self.qid as usize);
        }
        self.handler.thread_started();
        ring.submitter().register_enable_rings()?;
        let mut slots: Vec<Slot> = (0..ENTRIES)
            .map(|_| {
                let mut header = vec![0u8; abi::HEADER_BYTES].into_boxed_slice();
                let mut payload = vec![0u8; payload].into_boxed_slice();
                let iov = Box::new([
                    libc::iovec {
                        iov_base: header.as_mut_ptr().cast(),
                        iov_len: header.len(),
                    },
                    libc::iovec {
                        iov_base: payload.as_mut_ptr().cast(),
                        iov_len: payload.len(),
                    },
                ]);
                Slot {
                    header,
                    payload,
                    iov,
                    waiting: None,
                }
            })
            .collect();
        let (tx, rx) = std::sync::mpsc::channel();
        let wake = rustix::event::eventfd(0, rustix::event::EventfdFlags::CLOEXEC)?;
        let back = Arc::new(Back { tx, wake });
        let mut wake_buf = Box::new([0u8; 8]);
        let served = self.serve(&mut ring, &mut slots, &back, &rx, &mut wake_buf);
        // The ring goes first: its commands end (cancelled) before the buffers they name.
        drop(ring);
        drop(slots);
        drop(wake_buf);
        served
    }

    fn serve(
        &self,
        ring: &mut IoUring<squeue::Entry128>,
        slots: &mut [Slot],
        back: &Arc<Back>,
        replies: &Receiver<(usize, Result<Vec<u8>, i32>)>,
        wake_buf: &mut [u8; 8],
    ) -> std::io::Result<()> {
        for (i, slot) in slots.iter().enumerate() {
            self.push(ring, self.register(i, slot))?;
        }
        self.push(ring, wake_read(&back.wake, wake_buf))?;
        let mut live = slots.len();
        let mut done: Vec<(usize, i32)> = Vec::with_capacity(ENTRIES);
        let mut out = Vec::new();
        let wait = types::Timespec::from(STOP_CHECK);
        // Whether the last yield while polling gave the CPU to other work (see `CONTENDED`).
        let mut contended = false;
        while live > 0 && !self.stop.load(Ordering::Relaxed) {
            let polling = self.polls() && !contended && self.busy.recent();
            let entered = if polling {
                let pending = ring.submission().len() as u32;
                // SAFETY: no argument is passed; the entries submitted are those `push`
                // checked.
                unsafe {
                    ring.submitter()
                        .enter::<libc::sigset_t>(pending, 0, abi::ENTER_GETEVENTS, None)
                }
            } else {
                let args = types::SubmitArgs::new().timespec(&wait);
                ring.submitter().submit_with_args(1, &args)
            };
            match entered {
                Ok(_) => {}
                Err(e)
                    if matches!(
                        e.raw_os_error(),
                        Some(libc::ETIME | libc::EINTR | libc::EBUSY)
                    ) => {}
                Err(e) => return Err(e),
            }
            done.clear();
            done.extend(
                ring.completion()
                    .map(|c| (c.user_data() as usize, c.result())),
            );
            if polling && done.is_empty() {
                let yielded = Instant::now();
                std::thread::yield_now();
                contended = yielded.elapsed() > CONTENDED;
                continue;
            }
            if !polling && !done.is_empty() {
                // Woken by a request: poll again after it, unless the CPU is still busy.
                contended = false;
            }
            for &(i, res) in &done {
                if i as u64 == WAKE {
                    if res < 0 {
                        return Err(std::io::Error::from_raw_os_error(-res));
                    }
                    self.commit_replies(ring, slots, replies)?;
                    self.push(ring, wake_read(&back.wake, wake_buf))?;
                    continue;
                }
                let Some(slot) = slots.get_mut(i) else {
                    continue;
                };
                if res == -libc::EAGAIN {
                    // Registered before the kernel took the INIT reply: again, shortly.
                    std::thread::sleep(Duration::from_millis(1));
                    self.push(ring, self.register(i, slot))?;
                } else if res < 0 {
                    // The connection is ending (ENOTCONN, ECANCELED), or refused the entry.
                    if !matches!(-res, libc::ENOTCONN | libc::ECANCELED | libc::ECONNABORTED) {
                        tracing::warn!(
                            "FUSE queue {}: entry {i} ended: {}",
                            self.qid,
                            std::io::Error::from_raw_os_error(-res)
                        );
                    }
                    live -= 1;
                } else {
                    self.busy.request_came();
                    self.last_server.store(self.member, Ordering::Relaxed);
                    if let Some(commit_id) = self.answer(i, slot, &mut out, back) {
                        self.push(ring, self.commit(i, commit_id))?;
                    }
                }
            }
        }
        Ok(())
    }

    /// Whether this thread is its queue's poller: the one that served the queue's last
    /// request, which (the kernel's free entries being a stack) is the one a lone caller's
    /// next request goes to. With the first thread always the poller, a caller that once met
    /// the other thread kept meeting it and woke it for every request, while the poller spun
    /// for nothing.
    fn polls(&self) -> bool {
        self.may_poll && self.last_server.load(Ordering::Relaxed) == self.member
    }

    /// Commits the replies sent [`Later`] since the last wake-up.
    fn commit_replies(
        &self,
        ring: &mut IoUring<squeue::Entry128>,
        slots: &mut [Slot],
        replies: &Receiver<(usize, Result<Vec<u8>, i32>)>,
    ) -> std::io::Result<()> {
        for (i, reply) in replies.try_iter() {
            let Some(slot) = slots.get_mut(i) else {
                continue;
            };
            let Some((unique, commit_id)) = slot.waiting.take() else {
                continue;
            };
            let reply = reply.as_deref().map_err(|&e| e);
            write_reply(&mut slot.header, &mut slot.payload, unique, reply);
            self.push(ring, self.commit(i, commit_id))?;
        }
        Ok(())
    }

    /// Serves the request in slot `i` and writes the reply there; returns its commit id, or
    /// `None` when the handler answers [`Later`].
    fn answer(
        &self,
        i: usize,
        slot: &mut Slot,
        out: &mut Vec<u8>,
        back: &Arc<Back>,
    ) -> Option<u64> {
        out.clear();
        let Some(req) = Request::parse(&slot.header, &slot.payload) else {
            write_reply(&mut slot.header, &mut slot.payload, 0, Err(libc::EIO));
            return Some(0);
        };
        let (unique, commit_id) = (req.unique, req.commit_id);
        let mut later = Some(Later {
            slot: i,
            back: back.clone(),
            sent: false,
        });
        let result = self.handler.handle(&req, out, &mut later);
        match later {
            Some(mut unused) => unused.sent = true,
            None => {
                slot.waiting = Some((unique, commit_id));
                return None;
            }
        }
        write_reply(
            &mut slot.header,
            &mut slot.payload,
            unique,
            result.map(|()| &out[..]),
        );
        Some(commit_id)
    }

    fn register(&self, i: usize, slot: &Slot) -> squeue::Entry128 {
        let entry = opcode::UringCmd80::new(types::Fd(self.device.as_raw_fd()), abi::CMD_REGISTER)
            .cmd(abi::cmd_req(0, self.qid))
            .addr(Some(slot.iov.as_ptr() as u64))
            .build()
            .user_data(i as u64);
        with_len(entry, 2)
    }

    fn commit(&self, i: usize, commit_id: u64) -> squeue::Entry128 {
        opcode::UringCmd80::new(
            types::Fd(self.device.as_raw_fd()),
            abi::CMD_COMMIT_AND_FETCH,
        )
        .cmd(abi::cmd_req(commit_id, self.qid))
        .build()
        .user_data(i as u64)
    }

    fn push(
        &self,
        ring: &mut IoUring<squeue::Entry128>,
        entry: squeue::Entry128,
    ) -> std::io::Result<()> {
        // SAFETY: the entry names buffers of a `Slot`, which outlive the ring (`run` drops
        // the ring first), and the device, which `self` holds.
        if unsafe { ring.submission().push(&entry) }.is_err() {
            // Full: each entry has at most one command in flight, and the ring has room for
            // twice as many, so this submits the earlier ones and makes room.
            ring.submit()?;
            // SAFETY: as above.
            unsafe { ring.submission().push(&entry) }
                .map_err(|_| std::io::Error::other("io_uring submission queue full"))?;
        }
        Ok(())
    }
}

/// The read of a thread's wake-up eventfd into `buf`.
fn wake_read(wake: &OwnedFd, buf: &mut [u8; 8]) -> squeue::Entry128 {
    opcode::Read::new(types::Fd(wake.as_raw_fd()), buf.as_mut_ptr(), 8)
        .build()
        .user_data(WAKE)
        .into()
}

/// Sets `sqe->len` (the iovec count of a REGISTER), which `io_uring`'s `UringCmd80` does not
/// take: the field sits at byte 24 of the kernel's `struct io_uring_sqe`.
fn with_len(entry: squeue::Entry128, len: u32) -> squeue::Entry128 {
    // SAFETY: `Entry128` is `#[repr(C)]`: the kernel's 64-byte `io_uring_sqe` and 64 more
    // bytes, 128 in all, any bit pattern valid.
    let mut raw: [u8; 128] = unsafe { std::mem::transmute(entry) };
    raw[24..28].copy_from_slice(&len.to_ne_bytes());
    // SAFETY: as above.
    unsafe { std::mem::transmute::<[u8; 128], squeue::Entry128>(raw) }
}

/// Keeps this thread on `cpu`, where the requests of its queue are made.
fn pin_to_cpu(cpu: usize) {
    let mut set = rustix::thread::CpuSet::new();
    set.set(cpu);
    if let Err(e) = rustix::thread::sched_setaffinity(None, &set) {
        tracing::warn!("pinning FUSE queue {cpu} to its CPU: {e}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists_read_as_the_kernel_writes_them() {
        assert_eq!(cpu_list("0-1\n"), vec![0, 1]);
        assert_eq!(cpu_list("0"), vec![0]);
        assert_eq!(cpu_list("0-2,5,7-8"), vec![0, 1, 2, 5, 7, 8]);
        assert_eq!(cpu_list(""), Vec::<usize>::new());
        assert_eq!(
            cpu_list("x,3"),
            vec![3],
            "a part that is not a number is skipped"
        );
    }
}
