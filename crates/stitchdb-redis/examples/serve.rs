//! Serves a store over the Redis protocol until SIGTERM: `cargo run -p stitchdb-redis
//! --example serve -- STORE PORT` (creates STORE if missing). For trying the server before
//! the `stitchdb serve` command exists.

use std::sync::Arc;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut a = std::env::args().skip(1);
    let path = a.next().ok_or("usage: serve STORE PORT")?;
    let port: u16 = a.next().ok_or("usage: serve STORE PORT")?.parse()?;
    let opts = stitchdb::Options::default();
    let db = if std::path::Path::new(&path).exists() {
        stitchdb::Db::open(&path, opts)?
    } else {
        stitchdb::Db::create(&path, opts)?
    };
    let config = stitchdb_redis::Config {
        port,
        ..Default::default()
    };
    let server = stitchdb_redis::Server::start(Arc::new(db), config)?;
    println!("listening on {}", server.local_addr());
    server.wait()?;
    Ok(())
}
