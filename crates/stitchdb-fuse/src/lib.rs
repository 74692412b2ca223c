//! The FUSE adapter of KVFS (`stitchdb-fs`): serves a store's file system to the kernel
//! through the `fuser` crate (no libfuse: the mount system call as root, `fusermount3` for
//! other users, both in `sysmount`). A [`Mount`] is a surface of a `stitchdb_host::Host`,
//! over a store it may share with others (`stitchdb serve --mount`); `stitchdb mount` is built
//! on [`mount::serve`], which hosts a mount alone.
//!
//! Modules, bottom up (each imports only those before it): `attr` (conversions to FUSE's
//! types), `mountinfo` (the mounts this process sees), `bdi` (the mount's readahead and
//! dirty-page limits), `poll` (polling the device between the requests of a burst),
//! `options` (`-o` options, and what they make of the file system and of serving), `table`
//! (the one table of operations: what each request does and answers), the two transports
//! that decode requests into it and encode its replies, `uring` (the io_uring queues) and
//! `session` (`/dev/fuse` through `fuser`, which also starts the queues), `sysmount`
//! (mounting, by the system call or through `fusermount3`, and the test of a live
//! connection) and `mount` (mount point checks, the session, [`Mount`] and its clean
//! unmount).

#![forbid(unsafe_code)]

mod attr;
mod bdi;
mod control;
mod invalidate;
pub mod mount;
mod mountinfo;
mod nodeid;
mod options;
mod poll;
mod session;
mod sysmount;
mod table;
mod uring;

pub use bdi::BdiSettings;
pub use mount::{check_mountpoint, open_session, serve, unmount, Mount};
pub use mountinfo::is_mount_point;
pub use options::{MountConfig, ServeOptions};
pub use poll::{Poller, DEFAULT_POLL_WINDOW};
#[doc(hidden)]
pub use session::HeldCounts;
pub use session::{KvFuse, MAX_REQUEST};
