//! The FUSE adapter of KVFS (`stitchdb-fs`): serves a store's file system to the kernel
//! through the `fuser` crate (no libfuse: the mount system call as root, `fusermount3` for
//! other users, both in `sysmount`). `stitchdb mount` is built on [`mount::serve`].
//!
//! Modules: `attr` (conversions to FUSE's types), `adapter` (the requests), `poll` (polling
//! the device between the requests of a burst), `bdi` (the mount's readahead and dirty-page
//! limits), `mount` (mount point checks, options, the session and its clean unmount),
//! `sysmount` (mounting, by the system call or through `fusermount3`, and the test of a live
//! connection).

#![forbid(unsafe_code)]

mod adapter;
mod attr;
mod bdi;
pub mod mount;
mod poll;
mod serve;
mod sysmount;
mod uring;

pub use adapter::{AdapterOptions, KvFuse, MAX_REQUEST};
pub use bdi::BdiSettings;
pub use mount::{is_mount_point, open_session, serve, unmount, MountConfig};
pub use poll::{Poller, DEFAULT_POLL_WINDOW};
