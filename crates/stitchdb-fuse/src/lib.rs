//! The FUSE adapter of KVFS (`stitchdb-fs`): serves a store's file system to the kernel
//! through the `fuser` crate (no libfuse: the mount system call as root, `fusermount3`
//! otherwise). `stitchdb mount` is built on [`mount::serve`].
//!
//! Modules: `attr` (conversions to FUSE's types), `adapter` (the requests), `mount` (mount
//! point checks, options, the session and its clean unmount).

#![forbid(unsafe_code)]

mod adapter;
mod attr;
pub mod mount;

pub use adapter::{AdapterOptions, KvFuse, MAX_REQUEST};
pub use mount::{is_mount_point, serve, unmount, MountConfig};
