use std::hint::black_box;
use stitch_filter::*;
fn main() {
    let n: u64 = std::env::args().nth(1).unwrap().parse().unwrap();
    let mode = std::env::args().nth(2).unwrap();
    let mut f = QuotientFilter::with_spare_bits(n, 0.01, 0).unwrap();
    let hs: Vec<u64> = (0..n).map(|i| hash_key(&i.to_le_bytes())).collect();
    for &h in &hs {
        f.insert(h).unwrap();
    }
    let qs: Vec<u64> = (0..10_000_000u64)
        .map(|i| hash_key(&(i + (1 << 40)).to_le_bytes()))
        .collect();
    let t = std::time::Instant::now();
    let mut c = 0u64;
    if mode == "miss" {
        for &q in &qs {
            c += black_box(f.contains(q)) as u64;
        }
    } else if mode == "insert" {
        for _ in 0..20 {
            let mut g = QuotientFilter::with_spare_bits(n, 0.01, 0).unwrap();
            for &h in &hs {
                g.insert(h).unwrap();
            }
            black_box(&g);
        }
    } else {
        for _ in 0..10 {
            for &q in &hs {
                c += black_box(f.contains(q)) as u64;
            }
        }
    }
    println!("{c} {:?}", t.elapsed());
}
