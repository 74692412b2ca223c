//! StitchDB over the Redis protocol: RESP2 and RESP3, Redis 7.0's commands and replies over
//! a StitchDB store, every acknowledged write durable by default (`docs/redis.md`).
//!
//! ```no_run
//! use std::sync::Arc;
//! let db = Arc::new(stitchdb::Db::create("/tmp/r.store", stitchdb::Options::default())?);
//! let server = stitchdb_redis::Server::start(db, stitchdb_redis::Config::default())?;
//! println!("listening on {}", server.local_addr());
//! server.wait()?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Interior layers
//!
//! Bottom up; a module imports only from modules before it:
//!
//! 1. `resp`: requests in and replies out.
//! 2. `config`: the settings.
//! 3. `keyspace`: Redis's databases over the store's tables, a command's view of them
//!    (`Ctx`), key locks, watches, expiry.
//! 4. `cmd`: the table of commands and the commands over data.
//! 5. `shared`: what the server's threads share.
//! 6. `conn`: one client's connection.
//! 7. `server`: the listener and the expiry thread.

pub mod cmd;
pub mod config;
mod conn;
pub mod keyspace;
pub mod resp;
mod server;
mod shared;

/// The Redis version whose commands and replies the server follows, as `HELLO` and `INFO`
/// report it (clients pick features by it).
pub const REDIS_VERSION: &str = "7.0.15";

pub use config::Config;
pub use server::{Server, Stopper};
