//! The server's settings: where it listens, who may use it, and the limits Redis has, with
//! Redis's defaults (`CONFIG GET`/`SET` reads and changes them while it runs).

use crate::resp::parse::ParseLimits;
use stitchdb::Durability;

/// The server's settings.
#[derive(Debug, Clone)]
pub struct Config {
    /// The address to listen on (`127.0.0.1`).
    pub bind: String,
    /// The port (6379; 0 picks a free one, see `Server::local_addr`).
    pub port: u16,
    /// The password `AUTH` wants (`requirepass`; `None`: every client is in).
    pub requirepass: Option<String>,
    /// Clients at once (`maxclients`, 10,000); one more is told so and closed.
    pub maxclients: usize,
    /// Databases (`databases`, 16).
    pub databases: usize,
    /// What a request may be.
    pub parse: ParseLimits,
    /// Bytes a client's unparsed input and half-read request may hold
    /// (`client-query-buffer-limit`, 1 GiB); past it the client is closed.
    pub query_buffer_limit: usize,
    /// Replies are sent once this many bytes of them wait (and after each read's requests):
    /// a client that never reads holds at most this much, and its own thread.
    pub reply_chunk: usize,
    /// A new connection's durability (`SX.DURABILITY` changes a connection's): `Sync`, every
    /// acknowledged write durable.
    pub durability: Durability,
    /// How often a second active expiry looks for expired keys (`hz`, 10).
    pub hz: u32,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            bind: "127.0.0.1".into(),
            port: 6379,
            requirepass: None,
            maxclients: 10_000,
            databases: 16,
            parse: ParseLimits::default(),
            query_buffer_limit: 1 << 30,
            reply_chunk: 64 << 10,
            durability: Durability::Sync,
            hz: 10,
        }
    }
}

/// A durability level by its name (`sync`, `written`, `ordered`, `async`; any case).
pub fn parse_durability(name: &str) -> Option<Durability> {
    Some(match name.to_ascii_lowercase().as_str() {
        "sync" => Durability::Sync,
        "written" => Durability::Written,
        "ordered" => Durability::Ordered,
        "async" => Durability::Async,
        _ => return None,
    })
}

/// A durability level's name.
pub fn durability_name(d: Durability) -> &'static str {
    match d {
        Durability::Sync => "sync",
        Durability::Written => "written",
        Durability::Ordered => "ordered",
        Durability::Async => "async",
    }
}
