//! The resp target: bytes from a client fed to the Redis protocol's request parser
//! (`stitchdb_redis::resp::parse::Parser`) in the chunks the input's first byte picks, as a
//! connection feeds it what each read brought. The parser must not panic, must consume what
//! it parses, must find the same requests however the bytes are cut, and each request it
//! finds must re-encode as a RESP array that parses back to itself.

use stitchdb_redis::resp::parse::{ParseLimits, Parsed, Parser};

/// What a client's bytes parse to: the requests, then whether a protocol error ended them.
#[derive(Debug, PartialEq)]
struct Outcome {
    requests: Vec<Vec<Vec<u8>>>,
    failed: bool,
}

/// Runs the parser over `data`: its first byte says whether the client has authenticated
/// (bit 7, which picks the parser's limits) and how the rest is cut into reads (bits 0-6:
/// the longest read, 0 for all at once); the rest is what the client sent.
pub fn resp(data: &[u8]) {
    let Some((&how, input)) = data.split_first() else {
        return;
    };
    let authenticated = how & 0x80 != 0;
    let cut = parse(input, authenticated, usize::from(how & 0x7f));
    let whole = parse(input, authenticated, 0);
    assert_eq!(cut, whole, "the requests depend on how the bytes arrive");
    for request in &cut.requests {
        round_trip(request);
    }
}

/// Parses `input` arriving in reads of at most `longest` bytes (varying, from a generator
/// seeded by `longest`; 0: one read), as a connection does: what the parser leaves stays
/// in the buffer for the next read.
fn parse(input: &[u8], authenticated: bool, longest: usize) -> Outcome {
    let mut parser = Parser::new(ParseLimits::default());
    let mut buffer = Vec::new();
    let mut outcome = Outcome {
        requests: Vec::new(),
        failed: false,
    };
    let mut rest = input;
    let mut state = longest as u32 | 1;
    while !rest.is_empty() {
        let n = if longest == 0 {
            rest.len()
        } else {
            state ^= state << 13;
            state ^= state >> 17;
            state ^= state << 5;
            (state as usize % longest + 1).min(rest.len())
        };
        buffer.extend_from_slice(&rest[..n]);
        rest = &rest[n..];
        if drain(&mut parser, &mut buffer, authenticated, &mut outcome) {
            break;
        }
    }
    outcome
}

/// Parses what `buffer` holds until the parser needs more; true after a protocol error
/// (the connection would be closed).
fn drain(
    parser: &mut Parser,
    buffer: &mut Vec<u8>,
    authenticated: bool,
    outcome: &mut Outcome,
) -> bool {
    loop {
        let (used, parsed) = parser.parse(buffer, authenticated);
        assert!(used <= buffer.len(), "the parser consumed more than it had");
        buffer.drain(..used);
        match parsed {
            Parsed::Incomplete => return false,
            Parsed::Error(e) => {
                assert!(e.starts_with("Protocol error: "), "{e}");
                outcome.failed = true;
                return true;
            }
            Parsed::Request(args) => {
                assert!(
                    used > 0,
                    "a request that consumed nothing would repeat forever"
                );
                assert!(!args.is_empty(), "an empty request");
                outcome.requests.push(args);
            }
        }
    }
}

/// `request` as a RESP array parses back to exactly itself, consuming all of it (for an
/// authenticated client: an inline request is not held to the unauthenticated limits).
fn round_trip(request: &[Vec<u8>]) {
    let mut encoded = format!("*{}\r\n", request.len()).into_bytes();
    for arg in request {
        encoded.extend_from_slice(format!("${}\r\n", arg.len()).as_bytes());
        encoded.extend_from_slice(arg);
        encoded.extend_from_slice(b"\r\n");
    }
    let mut parser = Parser::new(ParseLimits::default());
    let (used, parsed) = parser.parse(&encoded, true);
    assert_eq!(
        (used, parsed),
        (encoded.len(), Parsed::Request(request.to_vec())),
        "a parsed request re-encodes to itself"
    );
}
