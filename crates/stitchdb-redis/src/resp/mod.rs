//! RESP, the Redis protocol: requests in ([`parse`]) and replies out ([`reply`]).

pub mod parse;
pub mod reply;
