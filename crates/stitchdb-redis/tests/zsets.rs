//! Sorted-set commands end to end, against the replies Redis 7.0 gives (see `script`), and
//! a randomized run against a `BTreeMap` model.

mod script;
mod support;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::{BTreeMap, HashMap};
use stitchdb_redis::resp::reply::format_double;
use support::{bulk, TestServer, Value};

fn run(script: &str) {
    let s = TestServer::start();
    script::run(&mut s.client(), script);
}

#[test]
fn zadd_and_zincrby() {
    run(r##"
    ZADD z 1 a 2 b 3 c          => :3
    ZADD z 1 a 4 d              => :1
    ZADD z CH 5 a 4 d 0 e       => :2
    ZRANGE z 0 -1 WITHSCORES    => ["e", "0", "b", "2", "c", "3", "d", "4", "a", "5"]
    # NX adds only, XX updates only; GT and LT update only upwards or downwards.
    ZADD z NX 9 a 9 f           => :1
    ZADD z XX CH 9 a 9 g        => :1
    ZADD z GT CH 1 a 10 b 7 h   => :2
    ZADD z LT CH 10 a 1 b       => :1
    ZADD z XX GT CH 0 c 20 c    => :1
    ZRANGE z 0 -1 WITHSCORES    => ["e", "0", "b", "1", "d", "4", "h", "7", "a", "9", "f", "9", "c", "20"]
    ZADD z XX NX 1 a            => -ERR XX and NX options at the same time are not compatible
    ZADD z GT LT 1 a            => -ERR GT, LT, and/or NX options at the same time are not compatible
    ZADD z NX GT 1 a            => -ERR GT, LT, and/or NX options at the same time are not compatible
    ZADD z NX LT 1 a            => -ERR GT, LT, and/or NX options at the same time are not compatible
    ZADD z INCR 1 a 2 b         => -ERR INCR option supports a single increment-element pair
    ZADD z 1                    => -ERR wrong number of arguments for 'zadd' command
    ZADD z 1 a 2                => -ERR syntax error
    ZADD z FOO 1 a              => -ERR syntax error
    ZADD z 1 a x b              => -ERR value is not a valid float
    ZADD z nan a                => -ERR value is not a valid float
    ZADD z 1e400 a              => -ERR value is not a valid float
    # INCR replies with the new score, or nil when a flag stops it.
    ZADD z INCR 5 a             => "14"
    ZADD z INCR NX 1 a          => nil
    ZADD z INCR XX 1 nothere    => nil
    ZADD z INCR LT 1 a          => nil
    ZADD z INCR GT -1 a         => nil
    ZADD z INCR GT 1 a          => "15"
    ZADD z INCR -inf a          => "-inf"
    ZADD z INCR +inf a          => -ERR resulting score is not a number (NaN)
    ZSCORE z a                  => "-inf"
    ZINCRBY z 2.5 i             => "2.5"
    ZINCRBY z -1 i              => "1.5"
    ZINCRBY z x i               => -ERR value is not a valid float
    ZINCRBY z NX 1              => -ERR syntax error
    ZINCRBY z 1e308 i           => "1e+308"
    ZINCRBY z 1e308 i           => "inf"
    ZINCRBY z -inf i            => -ERR resulting score is not a number (NaN)
    ZINCRBY z inf i             => "inf"
    ZADD nokey XX 1 a           => :0
    ZADD nokey XX INCR 1 a      => nil
    EXISTS nokey                => :0
    # Scores are read as strtod reads them.
    ZADD f 0x10 a               => :1
    ZADD f 0x1.8p1 b            => :1
    ZADD f -0X.8 c              => :1
    ZADD f inf d                => :1
    ZADD f -INFINITY e          => :1
    ZADD f 1e-310 g             => :1
    ZADD f 1. h                 => :1
    ZADD f .5 i                 => :1
    ZADD f 1.1 j                => :1
    ZADD f 123456789012345678 k => :1
    ZADD f \s5 x                => -ERR value is not a valid float
    ZADD f 5\s x                => -ERR value is not a valid float
    ZADD f \e x                 => -ERR value is not a valid float
    ZADD f 1e-400 x             => -ERR value is not a valid float
    ZADD f 0x x                 => -ERR value is not a valid float
    ZRANGE f 0 -1 WITHSCORES    => ["e", "-inf", "c", "-0.5", "g", "9.9999999999999694e-311", "i", "0.5", "h", "1", "j", "1.1000000000000001", "b", "3", "a", "16", "k", "1.2345678901234568e+17", "d", "inf"]
    # Negative zero is stored as zero, but INCR replies with what it computed.
    ZADD nz -0 a                => :1
    ZSCORE nz a                 => "0"
    ZINCRBY nz -0 b             => "-0"
    ZSCORE nz b                 => "0"
    "##);
}

#[test]
fn scores_ranks_and_counts() {
    run(r##"
    ZADD z 1 a 2 b 2 c 3 d   => :4
    ZCARD z                  => :4
    ZCARD nokey              => :0
    ZSCORE z b               => "2"
    ZSCORE z nothere         => nil
    ZSCORE nokey a           => nil
    ZMSCORE z a nothere d    => ["1", nil, "3"]
    ZMSCORE nokey a b        => [nil, nil]
    ZRANK z a                => :0
    ZRANK z c                => :2
    ZRANK z d                => :3
    ZRANK z nothere          => nil
    ZRANK nokey a            => nil
    ZREVRANK z a             => :3
    ZREVRANK z b             => :2
    ZREVRANK z nothere       => nil
    ZCOUNT z -inf +inf       => :4
    ZCOUNT z 2 2             => :2
    ZCOUNT z (1 (3           => :2
    ZCOUNT z (2 3            => :1
    ZCOUNT z 3 1             => :0
    ZCOUNT z (2 (2           => :0
    ZCOUNT z x 1             => -ERR min or max is not a float
    ZCOUNT z 1 (x            => -ERR min or max is not a float
    ZCOUNT nokey 1 2         => :0
    ZLEXCOUNT z - +          => :4
    ZLEXCOUNT z a b          => -ERR min or max not valid string range item
    ZLEXCOUNT nokey - +      => :0
    ZADD lex 0 a 0 b 0 c 0 d => :4
    ZLEXCOUNT lex [b [c      => :2
    ZLEXCOUNT lex (b +       => :2
    ZLEXCOUNT lex - (b       => :1
    ZLEXCOUNT lex + -        => :0
    ZLEXCOUNT lex - -        => :0
    ZLEXCOUNT lex [c [b      => :0
    HELLO 3                  => (hello)
    ZSCORE z b               => ,2
    ZMSCORE z a nothere      => [,1, nil]
    ZSCORE z nothere         => nil
    ZRANK z nothere          => nil
    "##);
}

#[test]
fn zrange_and_its_older_forms() {
    run(r##"
    ZADD z 1 a 1.5 x 2 b 2.5 y 3 c                    => :5
    ZRANGE z 0 -1                                     => ["a", "x", "b", "y", "c"]
    ZRANGE z 0 -1 WITHSCORES                          => ["a", "1", "x", "1.5", "b", "2", "y", "2.5", "c", "3"]
    ZRANGE z -2 -1 WITHSCORES                         => ["y", "2.5", "c", "3"]
    ZRANGE z 2 1                                      => []
    ZRANGE z 5 10                                     => []
    ZRANGE z -100 1                                   => ["a", "x"]
    ZRANGE z 0 100 REV                                => ["c", "y", "b", "x", "a"]
    ZRANGE z 1 2 REV WITHSCORES                       => ["y", "2.5", "b", "2"]
    ZRANGE z 0 -9223372036854775808                   => []
    ZRANGE z -9223372036854775808 9223372036854775807 => ["a", "x", "b", "y", "c"]
    ZRANGE z (1 3 BYSCORE                             => ["x", "b", "y", "c"]
    ZRANGE z (1 3 BYSCORE LIMIT 0 1 WITHSCORES        => ["x", "1.5"]
    ZRANGE z (1 3 BYSCORE LIMIT 1 2                   => ["b", "y"]
    ZRANGE z (1 3 BYSCORE LIMIT 1 -1                  => ["b", "y", "c"]
    ZRANGE z (1 3 BYSCORE LIMIT 1 0                   => []
    ZRANGE z -inf +inf BYSCORE LIMIT -1 1             => []
    ZRANGE z 3 (1 BYSCORE REV WITHSCORES              => ["c", "3", "y", "2.5", "b", "2", "x", "1.5"]
    ZRANGE z +inf -inf BYSCORE REV LIMIT 1 2          => ["y", "b"]
    ZRANGE z 1 3 byscore withscores limit 2 9 rev     => []
    ZRANGE z 0 -1 LIMIT 5 -1                          => ["a", "x", "b", "y", "c"]
    ZRANGE z 0 -1 LIMIT 0 1                           => -ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX
    ZRANGE z 1 3 BYSCORE BYLEX                        => -ERR syntax error
    ZRANGE z 0 -1 REV REV                             => -ERR syntax error
    ZRANGE z 0 -1 FOO                                 => -ERR syntax error
    ZRANGE z 0 1 LIMIT 0                              => -ERR syntax error
    ZRANGE z 0 1 BYSCORE LIMIT 0 x                    => -ERR value is not an integer or out of range
    ZRANGE z 0 1 BYSCORE LIMIT x 1                    => -ERR value is not an integer or out of range
    ZRANGE z x 1                                      => -ERR value is not an integer or out of range
    ZRANGE z x 1 BYSCORE                              => -ERR min or max is not a float
    ZRANGE z a b BYLEX                                => -ERR min or max not valid string range item
    ZRANGE z [a [b BYLEX WITHSCORES                   => -ERR syntax error, WITHSCORES not supported in combination with BYLEX
    ZRANGE nokey 0 -1                                 => []
    ZRANGE nokey x 1 BYSCORE                          => -ERR min or max is not a float
    # Score range ends read as strtod does: spaces before, nothing after.
    ZRANGE z \e 1 BYSCORE                             => ["a"]
    ZRANGE z \s1 2 BYSCORE                            => ["a", "x", "b"]
    ZRANGE z 1\s 2 BYSCORE                            => -ERR min or max is not a float
    ZRANGE z ( 1 BYSCORE                              => ["a"]
    ZRANGE z (0x1 2 BYSCORE                           => ["x", "b"]
    ZRANGE z -infinity +INF BYSCORE                   => ["a", "x", "b", "y", "c"]
    ZRANGE z 1e400 1e500 BYSCORE                      => []
    ZRANGE z -1e400 1e500 BYSCORE                     => ["a", "x", "b", "y", "c"]
    ZRANGE z nan 1 BYSCORE                            => -ERR min or max is not a float
    ZRANGE z 1 (nan BYSCORE                           => -ERR min or max is not a float
    ZRANGE z (1x 2 BYSCORE                            => -ERR min or max is not a float
    ZRANGEBYSCORE z 1 2                               => ["a", "x", "b"]
    ZRANGEBYSCORE z (1 (2 WITHSCORES                  => ["x", "1.5"]
    ZRANGEBYSCORE z 2 2                               => ["b"]
    ZRANGEBYSCORE z 3 1                               => []
    ZRANGEBYSCORE z -inf +inf LIMIT 1 2               => ["x", "b"]
    ZRANGEBYSCORE z 1 2 WITHSCORES LIMIT 1 1          => ["x", "1.5"]
    ZRANGEBYSCORE z 1 2 LIMIT 0                       => -ERR syntax error
    ZRANGEBYSCORE z 1 2 REV                           => -ERR syntax error
    ZRANGEBYSCORE z 1 2 BYSCORE                       => -ERR syntax error
    ZREVRANGEBYSCORE z 3 1 WITHSCORES                 => ["c", "3", "y", "2.5", "b", "2", "x", "1.5", "a", "1"]
    ZREVRANGEBYSCORE z 1 3                            => []
    ZREVRANGEBYSCORE z +inf (1 LIMIT 1 2              => ["y", "b"]
    ZREVRANGE z 0 -1 WITHSCORES                       => ["c", "3", "y", "2.5", "b", "2", "x", "1.5", "a", "1"]
    ZREVRANGE z 1 2                                   => ["y", "b"]
    ZREVRANGE z 0 -1 BYSCORE                          => -ERR syntax error
    ZREVRANGE z 0 -1 LIMIT 0 1                        => -ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX
    HELLO 3                                           => (hello)
    ZRANGE z 0 1 WITHSCORES                           => [["a", ,1], ["x", ,1.5]]
    ZRANGEBYSCORE z 1 2 WITHSCORES                    => [["a", ,1], ["x", ,1.5], ["b", ,2]]
    ZREVRANGE z 0 0 WITHSCORES                        => [["c", ,3]]
    ZRANGE z 0 1                                      => ["a", "x"]
    "##);
}

#[test]
fn lex_ranges() {
    run(r##"
    ZADD lex 0 a 0 b 0 c 0 d 0 e 0 f 0 g => :7
    ZRANGEBYLEX lex - +                  => ["a", "b", "c", "d", "e", "f", "g"]
    ZRANGEBYLEX lex [b [d                => ["b", "c", "d"]
    ZRANGEBYLEX lex (b (d                => ["c"]
    ZRANGEBYLEX lex (b +                 => ["c", "d", "e", "f", "g"]
    ZRANGEBYLEX lex - (c                 => ["a", "b"]
    ZRANGEBYLEX lex [aa [dd              => ["b", "c", "d"]
    ZRANGEBYLEX lex [a [a                => ["a"]
    ZRANGEBYLEX lex (a [a                => []
    ZRANGEBYLEX lex [d [b                => []
    ZRANGEBYLEX lex - + LIMIT 2 3        => ["c", "d", "e"]
    ZRANGEBYLEX lex - + LIMIT 2 -1       => ["c", "d", "e", "f", "g"]
    ZRANGEBYLEX lex - + LIMIT -1 3       => []
    ZRANGEBYLEX lex - + WITHSCORES       => -ERR syntax error, WITHSCORES not supported in combination with BYLEX
    ZRANGEBYLEX lex - + LIMIT 0 1 FOO    => -ERR syntax error
    ZRANGEBYLEX lex a b                  => -ERR min or max not valid string range item
    ZRANGEBYLEX lex [a +b                => -ERR min or max not valid string range item
    ZRANGEBYLEX lex \e +                 => -ERR min or max not valid string range item
    ZREVRANGEBYLEX lex + -               => ["g", "f", "e", "d", "c", "b", "a"]
    ZREVRANGEBYLEX lex [d [b             => ["d", "c", "b"]
    ZREVRANGEBYLEX lex (d - LIMIT 1 2    => ["b", "a"]
    ZREVRANGEBYLEX lex - +               => []
    ZRANGE lex [c + BYLEX LIMIT 1 2      => ["d", "e"]
    ZRANGE lex + [c BYLEX REV            => ["g", "f", "e", "d", "c"]
    ZADD lex 0 \e                        => :1
    ZRANGEBYLEX lex - (a                 => [""]
    ZRANGEBYLEX lex [\e [a               => ["", "a"]
    # Unequal scores: Redis scans in score order (its listpack's answer), and so do we.
    ZADD mixed 1 b 2 d 3 a 4 c           => :4
    ZRANGEBYLEX mixed - +                => ["b", "d", "a", "c"]
    ZRANGEBYLEX mixed [a [c              => ["b"]
    ZRANGEBYLEX mixed [b [c              => ["b"]
    ZRANGEBYLEX mixed [c [z              => ["d", "a", "c"]
    ZRANGEBYLEX mixed [b [b LIMIT 1 5    => []
    ZREVRANGEBYLEX mixed [c -            => ["c", "a", "d", "b"]
    ZREVRANGEBYLEX mixed + [b            => ["c"]
    ZLEXCOUNT mixed [a [z                => :4
    ZLEXCOUNT mixed [b [c                => :1
    ZADD mixed2 1 b 2 z 3 a              => :3
    ZRANGEBYLEX mixed2 [a [c LIMIT 2 1   => ["a"]
    ZRANGEBYLEX mixed2 [a [c LIMIT 1 1   => []
    ZRANGEBYLEX mixed2 [a [c             => ["b"]
    ZREVRANGEBYLEX mixed2 [c [a          => ["a", "z", "b"]
    ZREMRANGEBYLEX mixed [a [b           => :1
    ZRANGE mixed 0 -1                    => ["d", "a", "c"]
    "##);
}

#[test]
fn removals_delete_an_emptied_key() {
    run(r##"
    ZADD z 1 a 2 b 3 c             => :3
    ZREM z a nothere b             => :2
    ZREM z nothere                 => :0
    ZREM nokey a                   => :0
    ZREM z c                       => :1
    EXISTS z                       => :0
    ZADD r 1 a 2 b 3 c 4 d 5 e 6 f => :6
    ZREMRANGEBYRANK r 0 1          => :2
    ZRANGE r 0 -1                  => ["c", "d", "e", "f"]
    ZREMRANGEBYRANK r -1 -1        => :1
    ZREMRANGEBYRANK r 5 10         => :0
    ZREMRANGEBYRANK r 2 1          => :0
    ZREMRANGEBYRANK r x 1          => -ERR value is not an integer or out of range
    ZREMRANGEBYRANK nokey 0 1      => :0
    ZRANGE r 0 -1 WITHSCORES       => ["c", "3", "d", "4", "e", "5"]
    ZREMRANGEBYSCORE r 3 (4        => :1
    ZREMRANGEBYSCORE r (4 +inf     => :1
    ZREMRANGEBYSCORE r x 1         => -ERR min or max is not a float
    ZREMRANGEBYSCORE nokey 1 2     => :0
    ZRANGE r 0 -1 WITHSCORES       => ["d", "4"]
    ZREMRANGEBYSCORE r -inf +inf   => :1
    EXISTS r                       => :0
    ZADD lex 0 a 0 b 0 c 0 d       => :4
    ZREMRANGEBYLEX lex [b (d       => :2
    ZRANGE lex 0 -1                => ["a", "d"]
    ZREMRANGEBYLEX lex x y         => -ERR min or max not valid string range item
    ZREMRANGEBYLEX nokey - +       => :0
    ZREMRANGEBYLEX lex - +         => :2
    EXISTS lex                     => :0
    ZADD k 1 a                     => :1
    ZREMRANGEBYRANK k 0 -1         => :1
    EXISTS k                       => :0
    "##);
}

#[test]
fn pops() {
    run(r##"
    ZADD p 1 a 2 b 3 c 4 d => :4
    ZPOPMIN p              => ["a", "1"]
    ZPOPMAX p              => ["d", "4"]
    ZPOPMIN p 0            => []
    ZPOPMIN p -1           => -ERR value is out of range, must be positive
    ZPOPMIN p x            => -ERR value is out of range, must be positive
    ZPOPMIN p 1 2          => -ERR syntax error
    ZPOPMAX p 10           => ["c", "3", "b", "2"]
    EXISTS p               => :0
    ZPOPMIN nokey          => []
    ZPOPMIN nokey 2        => []
    ZPOPMAX nokey 0        => []
    ZADD p 1 a 2 b 3 c     => :3
    ZPOPMIN p 2            => ["a", "1", "b", "2"]
    HELLO 3                => (hello)
    ZPOPMAX p              => ["c", ,3]
    ZADD p 1 a 2 b 3 c     => :3
    ZPOPMIN p 1            => [["a", ,1]]
    ZPOPMAX p 5            => [["c", ,3], ["b", ,2]]
    ZPOPMIN p              => []
    ZPOPMIN p 2            => []
    "##);
}

#[test]
fn zrangestore() {
    run(r##"
    ZADD src 1 a 2 b 3 c 4 d                   => :4
    ZRANGESTORE dst src 0 -1                   => :4
    ZRANGE dst 0 -1 WITHSCORES                 => ["a", "1", "b", "2", "c", "3", "d", "4"]
    ZRANGESTORE dst src 0 -1 WITHSCORES        => -ERR syntax error
    ZRANGESTORE dst src 0 -1 REV               => :4
    ZRANGESTORE dst src 1 2                    => :2
    ZRANGE dst 0 -1 WITHSCORES                 => ["b", "2", "c", "3"]
    ZRANGESTORE dst src (1 3 BYSCORE LIMIT 1 1 => :1
    ZRANGE dst 0 -1 WITHSCORES                 => ["c", "3"]
    ZRANGESTORE dst src [a [b BYLEX            => :2
    ZRANGE dst 0 -1 WITHSCORES                 => ["a", "1", "b", "2"]
    ZRANGESTORE dst src 3 +inf BYSCORE REV     => :0
    ZRANGESTORE dst src +inf 3 BYSCORE REV     => :2
    ZRANGE dst 0 -1 WITHSCORES                 => ["c", "3", "d", "4"]
    ZRANGESTORE dst src 5 6                    => :0
    EXISTS dst                                 => :0
    ZRANGESTORE dst src 0 -1                   => :4
    ZRANGESTORE dst nokey 0 -1                 => :0
    EXISTS dst                                 => :0
    SET s x                                    => +OK
    ZRANGESTORE s src 0 0                      => :1
    TYPE s                                     => +zset
    ZRANGESTORE dst s 0 -1                     => :1
    ZRANGESTORE src src 1 2                    => :2
    ZRANGE src 0 -1 WITHSCORES                 => ["b", "2", "c", "3"]
    ZRANGESTORE dst src 0 -1 LIMIT 0 1         => -ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX
    ZRANGESTORE dst src x 1                    => -ERR value is not an integer or out of range
    "##);
}

#[test]
fn unions_intersections_and_differences() {
    run(r##"
    ZADD z1 1 a 2 b 3 c                                 => :3
    ZADD z2 10 b 20 c 30 d                              => :3
    ZUNIONSTORE d 2 z1 z2                               => :4
    ZRANGE d 0 -1 WITHSCORES                            => ["a", "1", "b", "12", "c", "23", "d", "30"]
    ZUNIONSTORE d 2 z1 z2 WEIGHTS 2 0.5                 => :4
    ZRANGE d 0 -1 WITHSCORES                            => ["a", "2", "b", "9", "d", "15", "c", "16"]
    ZUNIONSTORE d 2 z1 z2 AGGREGATE MIN                 => :4
    ZRANGE d 0 -1 WITHSCORES                            => ["a", "1", "b", "2", "c", "3", "d", "30"]
    ZUNIONSTORE d 2 z1 z2 aggregate max weights 1 -1    => :4
    ZRANGE d 0 -1 WITHSCORES                            => ["d", "-30", "a", "1", "b", "2", "c", "3"]
    ZINTERSTORE d 2 z1 z2                               => :2
    ZRANGE d 0 -1 WITHSCORES                            => ["b", "12", "c", "23"]
    ZINTERSTORE d 2 z1 nokey                            => :0
    EXISTS d                                            => :0
    ZDIFFSTORE d 2 z2 z1                                => :1
    ZRANGE d 0 -1 WITHSCORES                            => ["d", "30"]
    ZDIFFSTORE d 2 z1 z1                                => :0
    EXISTS d                                            => :0
    ZUNION 2 z1 z2 WITHSCORES                           => ["a", "1", "b", "12", "c", "23", "d", "30"]
    ZUNION 2 z1 z2                                      => ["a", "b", "c", "d"]
    ZINTER 2 z1 z2 WITHSCORES                           => ["b", "12", "c", "23"]
    ZINTER 2 z1 z2 WEIGHTS 1 2 AGGREGATE SUM WITHSCORES => ["b", "22", "c", "43"]
    ZDIFF 2 z2 z1 WITHSCORES                            => ["d", "30"]
    ZDIFF 1 nokey                                       => []
    ZINTERCARD 2 z1 z2                                  => :2
    ZINTERCARD 2 z1 z2 LIMIT 1                          => :1
    ZINTERCARD 2 z1 z2 LIMIT 0                          => :2
    ZINTERCARD 2 z1 nokey                               => :0
    ZUNION 2 z1 z1 WITHSCORES                           => ["a", "2", "b", "4", "c", "6"]
    ZINTER 2 z2 z2 WEIGHTS 1 2 WITHSCORES               => ["b", "30", "c", "60", "d", "90"]
    ZUNION 1 z1 WEIGHTS -1 WITHSCORES                   => ["c", "-3", "b", "-2", "a", "-1"]
    # Infinities: inf + -inf sums to 0; inf * 0 weighs 0 (but not in ZINTER's later inputs).
    ZADD pinf inf a                                     => :1
    ZADD ninf -inf a                                    => :1
    ZADD one 1 a                                        => :1
    ZUNION 2 pinf ninf WITHSCORES                       => ["a", "0"]
    ZINTER 2 pinf ninf WITHSCORES                       => ["a", "0"]
    ZUNION 2 pinf one WEIGHTS 0 1 WITHSCORES            => ["a", "1"]
    ZINTER 2 one pinf WEIGHTS 1 0 WITHSCORES            => ["a", "0"]
    ZINTER 2 pinf one WEIGHTS 0 1 WITHSCORES            => ["a", "1"]
    ZINTER 2 pinf ninf AGGREGATE MIN WITHSCORES         => ["a", "-inf"]
    ZUNION 2 pinf ninf AGGREGATE MAX WITHSCORES         => ["a", "inf"]
    # Sums are added smallest input first, so they round as Redis's do.
    ZADD f1 0.1 a                                       => :1
    ZADD f2 0.2 a                                       => :1
    ZADD f3 0.3 a 1 b                                   => :2
    ZUNION 3 f1 f2 f3 WITHSCORES                        => ["a", "0.60000000000000009", "b", "1"]
    ZUNION 3 f3 f2 f1 WITHSCORES                        => ["a", "0.60000000000000009", "b", "1"]
    ZINTER 3 f3 f1 f2 WITHSCORES                        => ["a", "0.60000000000000009"]
    # The destination is replaced, whatever it held; it may be an input.
    SET s x                                             => +OK
    ZUNIONSTORE s 1 z1                                  => :3
    TYPE s                                              => +zset
    ZUNIONSTORE z1 2 z1 z2                              => :4
    ZRANGE z1 0 -1 WITHSCORES                           => ["a", "1", "b", "12", "c", "23", "d", "30"]
    SET str x                                           => +OK
    ZUNIONSTORE d 1 str WEIGHTS x                       => -WRONGTYPE Operation against a key holding the wrong kind of value
    ZDIFF 2 z1 str                                      => -WRONGTYPE Operation against a key holding the wrong kind of value
    ZUNION 2 z1 str                                     => -WRONGTYPE Operation against a key holding the wrong kind of value
    ZUNIONSTORE d 0 z1                                  => -ERR at least 1 input key is needed for 'zunionstore' command
    ZUNIONSTORE d 2 z1                                  => -ERR syntax error
    ZUNIONSTORE d -1 z1                                 => -ERR at least 1 input key is needed for 'zunionstore' command
    ZUNIONSTORE d x z1                                  => -ERR value is not an integer or out of range
    ZUNIONSTORE d 1 z1 WEIGHTS x                        => -ERR weight value is not a float
    ZUNIONSTORE d 1 z1 WEIGHTS 1 2                      => -ERR syntax error
    ZUNIONSTORE d 1 z1 AGGREGATE foo                    => -ERR syntax error
    ZUNIONSTORE d 1 z1 WITHSCORES                       => -ERR syntax error
    ZUNIONSTORE d 1 z1 WEIGHTS                          => -ERR syntax error
    ZUNIONSTORE d 1 z1 AGGREGATE                        => -ERR syntax error
    ZINTERSTORE d 0 z1                                  => -ERR at least 1 input key is needed for 'zinterstore' command
    ZUNION 0 z1                                         => -ERR at least 1 input key is needed for 'zunion' command
    ZDIFF 1 z1 WEIGHTS 1                                => -ERR syntax error
    ZDIFF 1 z1 AGGREGATE SUM                            => -ERR syntax error
    ZDIFFSTORE d 1 z1 WITHSCORES                        => -ERR syntax error
    ZUNION 1 z1 WITHSCORES WITHSCORES                   => ["a", "1", "b", "12", "c", "23", "d", "30"]
    ZINTERCARD 1 z1 LIMIT x                             => -ERR LIMIT can't be negative
    ZINTERCARD 1 z1 LIMIT -1                            => -ERR LIMIT can't be negative
    ZINTERCARD 0 z1                                     => -ERR at least 1 input key is needed for 'zintercard' command
    ZINTERCARD 1 z1 WEIGHTS 1                           => -ERR syntax error
    ZINTERCARD 1 z1 WITHSCORES                          => -ERR syntax error
    HELLO 3                                             => (hello)
    ZUNION 2 z1 z2 WITHSCORES                           => [["a", ,1], ["b", ,22], ["c", ,43], ["d", ,60]]
    ZDIFF 1 z2 WITHSCORES                               => [["b", ,10], ["c", ,20], ["d", ,30]]
    "##);
}

#[test]
fn scan_and_random_members() {
    run(r##"
    ZADD z 1 a 2 b 3 c 1.5 ab                     => :4
    ZSCAN z 0                                     => ["0", ["a", "1", "ab", "1.5", "b", "2", "c", "3"]]
    ZSCAN z 0 MATCH a*                            => ["0", ["a", "1", "ab", "1.5"]]
    ZSCAN z 0 MATCH *z*                           => ["0", []]
    ZSCAN z x                                     => -ERR invalid cursor
    ZSCAN z 0 COUNT 0                             => -ERR syntax error
    ZSCAN z 0 FOO bar                             => -ERR syntax error
    ZSCAN z 0 COUNT                               => -ERR syntax error
    ZSCAN nokey 0                                 => ["0", []]
    ZSCAN nokey x                                 => -ERR invalid cursor
    ZSCAN nokey 0 COUNT 0                         => ["0", []]
    ZRANDMEMBER nokey                             => nil
    ZRANDMEMBER nokey 2                           => []
    ZRANDMEMBER nokey 2 WITHSCORES                => []
    ZRANDMEMBER z 0                               => []
    ZRANDMEMBER z 4                               => ["c", "b", "ab", "a"]
    ZRANDMEMBER z 9223372036854775807             => ["c", "b", "ab", "a"]
    ZRANDMEMBER z 5 WITHSCORES                    => ["c", "3", "b", "2", "ab", "1.5", "a", "1"]
    ZRANDMEMBER z -9223372036854775808            => -ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807
    ZRANDMEMBER z 9223372036854775807 WITHSCORES  => -ERR value is out of range
    ZRANDMEMBER z 4611686018427387904 WITHSCORES  => -ERR value is out of range
    ZRANDMEMBER z -4611686018427387904 WITHSCORES => -ERR value is out of range
    ZRANDMEMBER z x                               => -ERR value is not an integer or out of range
    ZRANDMEMBER z 1 FOO                           => -ERR syntax error
    ZRANDMEMBER z x WITHSCORES FOO                => -ERR value is not an integer or out of range
    ZRANDMEMBER z -9223372036854775808 FOO        => -ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807
    ZRANDMEMBER z 1 WITHSCORES FOO                => -ERR syntax error
    HELLO 3                                       => (hello)
    ZSCAN z 0 MATCH b                             => ["0", ["b", "2"]]
    ZRANDMEMBER z 10 WITHSCORES                   => [["c", ,3], ["b", ,2], ["ab", ,1.5], ["a", ,1]]
    ZRANDMEMBER nokey                             => nil
    "##);
}

#[test]
fn wrong_types_and_arguments() {
    run(r##"
    SET s x                        => +OK
    ZADD s 1 a                     => -WRONGTYPE Operation against a key holding the wrong kind of value
    ZINCRBY s 1 a                  => -WRONGTYPE Operation against a key holding the wrong kind of value
    ZREM s a                       => -WRONGTYPE Operation against a key holding the wrong kind of value
    ZCARD s                        => -WRONGTYPE Operation against a key holding the wrong kind of value
    ZSCORE s a                     => -WRONGTYPE Operation against a key holding the wrong kind of value
    ZMSCORE s a                    => -WRONGTYPE Operation against a key holding the wrong kind of value
    ZRANK s a                      => -WRONGTYPE Operation against a key holding the wrong kind of value
    ZREVRANK s a                   => -WRONGTYPE Operation against a key holding the wrong kind of value
    ZCOUNT s 1 2                   => -WRONGTYPE Operation against a key holding the wrong kind of value
    ZLEXCOUNT s - +                => -WRONGTYPE Operation against a key holding the wrong kind of value
    ZRANGE s 0 -1                  => -WRONGTYPE Operation against a key holding the wrong kind of value
    ZRANGEBYSCORE s 1 2            => -WRONGTYPE Operation against a key holding the wrong kind of value
    ZREVRANGEBYSCORE s 2 1         => -WRONGTYPE Operation against a key holding the wrong kind of value
    ZRANGEBYLEX s - +              => -WRONGTYPE Operation against a key holding the wrong kind of value
    ZREVRANGEBYLEX s + -           => -WRONGTYPE Operation against a key holding the wrong kind of value
    ZREVRANGE s 0 -1               => -WRONGTYPE Operation against a key holding the wrong kind of value
    ZREMRANGEBYSCORE s 1 2         => -WRONGTYPE Operation against a key holding the wrong kind of value
    ZREMRANGEBYRANK s 0 1          => -WRONGTYPE Operation against a key holding the wrong kind of value
    ZREMRANGEBYLEX s - +           => -WRONGTYPE Operation against a key holding the wrong kind of value
    ZPOPMIN s                      => -WRONGTYPE Operation against a key holding the wrong kind of value
    ZPOPMAX s 2                    => -WRONGTYPE Operation against a key holding the wrong kind of value
    ZSCAN s 0                      => -WRONGTYPE Operation against a key holding the wrong kind of value
    ZRANDMEMBER s                  => -WRONGTYPE Operation against a key holding the wrong kind of value
    ZRANDMEMBER s 2                => -WRONGTYPE Operation against a key holding the wrong kind of value
    ZUNIONSTORE d 1 s              => -WRONGTYPE Operation against a key holding the wrong kind of value
    ZINTER 1 s                     => -WRONGTYPE Operation against a key holding the wrong kind of value
    ZINTERCARD 1 s                 => -WRONGTYPE Operation against a key holding the wrong kind of value
    GET s                          => "x"
    # Argument errors come first where Redis checks them first.
    ZADD s x a                     => -ERR value is not a valid float
    ZADD s NX XX 1 a               => -ERR XX and NX options at the same time are not compatible
    ZCOUNT s x 1                   => -ERR min or max is not a float
    ZLEXCOUNT s x y                => -ERR min or max not valid string range item
    ZRANGE s 0 -1 LIMIT 0 1        => -ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX
    ZRANGE s 0 1 BYSCORE LIMIT x 1 => -ERR value is not an integer or out of range
    ZREMRANGEBYRANK s x 1          => -ERR value is not an integer or out of range
    ZPOPMIN s -1                   => -ERR value is out of range, must be positive
    ZSCAN s x                      => -ERR invalid cursor
    ZRANDMEMBER s x                => -ERR value is not an integer or out of range
    ZADD                           => -ERR wrong number of arguments for 'zadd' command
    ZADD k 1                       => -ERR wrong number of arguments for 'zadd' command
    ZRANGE k 0                     => -ERR wrong number of arguments for 'zrange' command
    ZRANGESTORE d k 0              => -ERR wrong number of arguments for 'zrangestore' command
    ZUNIONSTORE d 1                => -ERR wrong number of arguments for 'zunionstore' command
    ZRANK k                        => -ERR wrong number of arguments for 'zrank' command
    "##);
}

#[test]
fn bzpop_and_zmpop() {
    run(r##"
    ZADD z 1 a 2 b 3 c 4 d        => :4
    BZPOPMIN nokey z 0            => ["z", "a", "1"]
    BZPOPMAX nokey z 0            => ["z", "d", "4"]
    BZPOPMIN nokey 0.01           => nil
    BZPOPMIN z x                  => -ERR timeout is not a float or out of range
    SET s x                       => +OK
    BZPOPMIN s 0                  => -WRONGTYPE Operation against a key holding the wrong kind of value
    BZPOPMAX nokey s 0            => -WRONGTYPE Operation against a key holding the wrong kind of value
    ZMPOP 1 z MIN                 => ["z", [["b", "2"]]]
    ZMPOP 2 nokey z MAX COUNT 5   => ["z", [["c", "3"]]]
    EXISTS z                      => :0
    ZMPOP 1 nokey MIN             => nil
    ZMPOP 2 nokey s MIN           => -WRONGTYPE Operation against a key holding the wrong kind of value
    ZADD z 1 a 2 b                => :2
    ZMPOP 1 z MID                 => -ERR syntax error
    ZMPOP 0 z MIN                 => -ERR numkeys should be greater than 0
    ZMPOP 1 z MIN COUNT 0         => -ERR count should be greater than 0
    ZMPOP 1 z MIN COUNT 1 COUNT 1 => -ERR syntax error
    BZMPOP 0 1 z MAX COUNT 1      => ["z", [["b", "2"]]]
    BZMPOP 0.01 1 nokey MIN       => nil
    BZMPOP x 1 z MIN              => -ERR timeout is not a float or out of range
    MULTI                         => +OK
    BZPOPMIN nokey 0              => +QUEUED
    BZMPOP 0 1 nokey MIN          => +QUEUED
    EXEC                          => [nil, nil]
    HELLO 3                       => (hello)
    BZPOPMAX z 0                  => ["z", "a", ,1]
    ZADD z 1 a 2 b                => :2
    ZMPOP 1 z MIN COUNT 2         => ["z", [["a", ,1], ["b", ,2]]]
    BZPOPMIN nokey 0.01           => nil
    "##);
}

#[test]
fn bzpopmin_waits_for_a_member() {
    let s = TestServer::start();
    let mut c = s.client();
    let mut waiting = s.client();
    let waiter = std::thread::spawn(move || waiting.cmd(&["BZPOPMIN", "z1", "z2", "0"]));
    std::thread::sleep(std::time::Duration::from_millis(200));
    assert!(!waiter.is_finished());
    assert_eq!(c.cmd(&["ZADD", "z2", "2", "b", "1", "a"]), Value::Int(2));
    let want = Value::Array(vec![bulk("z2"), bulk("a"), bulk("1")]);
    assert_eq!(waiter.join().unwrap(), want);
    let mut waiting = s.client();
    let waiter =
        std::thread::spawn(move || waiting.cmd(&["BZMPOP", "0", "1", "z3", "MAX", "COUNT", "2"]));
    std::thread::sleep(std::time::Duration::from_millis(200));
    c.cmd(&["ZADD", "z3", "1", "x", "2", "y", "3", "z"]);
    let pair = |m: &str, s: &str| Value::Array(vec![bulk(m), bulk(s)]);
    let want = Value::Array(vec![
        bulk("z3"),
        Value::Array(vec![pair("z", "3"), pair("y", "2")]),
    ]);
    assert_eq!(waiter.join().unwrap(), want);
}

#[test]
fn sets_are_inputs_whose_members_score_one() {
    run(r##"
    SADD st a d e                         => :3
    ZADD z1 1 a 2 b 3 c                   => :3
    ZADD z2 10 b 20 c 30 d                => :3
    ZUNIONSTORE d 3 z1 z2 st              => :5
    ZRANGE d 0 -1 WITHSCORES              => ["e", "1", "a", "2", "b", "12", "c", "23", "d", "31"]
    ZUNIONSTORE d 2 st st WEIGHTS 2 3     => :3
    ZRANGE d 0 -1 WITHSCORES              => ["a", "5", "d", "5", "e", "5"]
    ZINTERSTORE d 2 z1 st AGGREGATE MAX   => :1
    ZRANGE d 0 -1 WITHSCORES              => ["a", "1"]
    ZINTER 2 st z1 WEIGHTS 5 1 WITHSCORES => ["a", "6"]
    ZDIFF 2 st z1                         => ["d", "e"]
    ZDIFF 2 z2 st WITHSCORES              => ["b", "10", "c", "20"]
    ZINTERCARD 2 st z2                    => :1
    ZDIFFSTORE d 1 st                     => :3
    ZRANGE d 0 -1 WITHSCORES              => ["a", "1", "d", "1", "e", "1"]
    "##);
}

#[test]
fn a_large_set_scans_pages_and_ranks_from_either_end() {
    let s = TestServer::start();
    let mut c = s.client();
    let n = 1000;
    let mut args: Vec<String> = vec!["ZADD".into(), "z".into()];
    for i in 0..n {
        args.push((i / 2).to_string());
        args.push(format!("m{i:04}"));
    }
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    assert_eq!(c.cmd(&refs), Value::Int(n));
    // Every member once, in pages of about COUNT.
    let (mut cursor, mut seen, mut pages) = ("0".to_string(), HashMap::new(), 0);
    loop {
        let Value::Array(reply) = c.cmd(&["ZSCAN", "z", &cursor, "COUNT", "100"]) else {
            panic!("ZSCAN replies with an array")
        };
        let Value::Array(items) = &reply[1] else {
            panic!("then the items")
        };
        for pair in items.chunks(2) {
            *seen.entry(pair[0].text()).or_insert(0) += 1;
            let i: i64 = pair[0].text()[1..].parse().unwrap();
            assert_eq!(pair[1].text(), (i / 2).to_string());
        }
        pages += 1;
        cursor = reply[0].text();
        if cursor == "0" {
            break;
        }
    }
    assert_eq!(seen.len(), n as usize);
    assert!(seen.values().all(|&k| k == 1));
    assert!(pages >= 10, "{pages} pages");
    for i in [0, 1, 499, 998, 999] {
        let m = format!("m{i:04}");
        assert_eq!(c.cmd(&["ZRANK", "z", &m]), Value::Int(i));
        assert_eq!(c.cmd(&["ZREVRANK", "z", &m]), Value::Int(n - 1 - i));
        let r = i.to_string();
        assert_eq!(
            c.cmd(&["ZRANGE", "z", &r, &r]),
            Value::Array(vec![bulk(&m)])
        );
        let back = (-(n - i)).to_string();
        assert_eq!(
            c.cmd(&["ZRANGE", "z", &back, &back]),
            Value::Array(vec![bulk(&m)])
        );
    }
    assert_eq!(
        c.cmd(&["ZRANGE", "z", "0", "2", "REV"]),
        Value::Array(vec![bulk("m0999"), bulk("m0998"), bulk("m0997")])
    );
    assert_eq!(c.cmd(&["ZCOUNT", "z", "(10", "20"]), Value::Int(20));
    assert_eq!(
        c.cmd(&["ZREMRANGEBYRANK", "z", "100", "-101"]),
        Value::Int(800)
    );
    assert_eq!(c.cmd(&["ZCARD", "z"]), Value::Int(200));
    assert_eq!(c.cmd(&["ZRANK", "z", "m0900"]), Value::Int(100));
}

#[test]
fn a_member_too_long_for_the_store_fails_the_whole_command() {
    let s = TestServer::start();
    let mut c = s.client();
    let long = "x".repeat(stitchdb::MAX_KEY_LEN);
    let reply = c.cmd(&["ZADD", "z", "1", "a", "2", &long]);
    assert!(
        matches!(&reply, Value::Error(e) if e.contains("over this store's limit")),
        "{reply:?}"
    );
    assert_eq!(c.cmd(&["EXISTS", "z"]), Value::Int(0));
    assert_eq!(c.cmd(&["MULTI"]), support::ok());
    c.cmd(&["ZADD", "z", "1", "a", "2", &long]);
    c.cmd(&["ZADD", "z", "3", "b"]);
    let Value::Array(replies) = c.cmd(&["EXEC"]) else {
        panic!("EXEC replies with an array")
    };
    assert!(matches!(replies[0], Value::Error(_)));
    assert_eq!(
        c.cmd(&["ZRANGE", "z", "0", "-1", "WITHSCORES"]),
        Value::Array(vec![bulk("b"), bulk("3")])
    );
}

/// One end of a lex range, as the model reads it.
#[derive(Clone)]
enum Lex {
    Min,
    Max,
    Incl(String),
    Excl(String),
}

impl Lex {
    fn arg(&self) -> String {
        match self {
            Lex::Min => "-".into(),
            Lex::Max => "+".into(),
            Lex::Incl(m) => format!("[{m}"),
            Lex::Excl(m) => format!("({m}"),
        }
    }

    fn above(&self, m: &str) -> bool {
        match self {
            Lex::Min => true,
            Lex::Max => false,
            Lex::Incl(x) => m >= x.as_str(),
            Lex::Excl(x) => m > x.as_str(),
        }
    }

    fn below(&self, m: &str) -> bool {
        match self {
            Lex::Min => false,
            Lex::Max => true,
            Lex::Incl(x) => m <= x.as_str(),
            Lex::Excl(x) => m < x.as_str(),
        }
    }

    fn key(&self) -> (u8, &str) {
        match self {
            Lex::Min => (0, ""),
            Lex::Max => (2, ""),
            Lex::Incl(m) | Lex::Excl(m) => (1, m),
        }
    }
}

/// A score range's end as the model reads it: the value, exclusive.
type End = (f64, bool);

fn end_arg((v, ex): End) -> String {
    format!("{}{}", if ex { "(" } else { "" }, format_double(v))
}

/// The sorted sets the randomized test works on, and Redis's answers over them.
#[derive(Default)]
struct ZModel {
    sets: [BTreeMap<String, f64>; 2],
}

/// Entries in Redis's order: by score, then member.
fn sorted(z: &BTreeMap<String, f64>) -> Vec<(String, f64)> {
    let mut v: Vec<(String, f64)> = z.iter().map(|(m, s)| (m.clone(), *s)).collect();
    v.sort_by(|a, b| a.1.total_cmp(&b.1).then_with(|| a.0.cmp(&b.0)));
    v
}

fn reply(entries: &[(String, f64)], withscores: bool) -> Value {
    let mut out = Vec::new();
    for (m, s) in entries {
        out.push(bulk(m));
        if withscores {
            out.push(bulk(&format_double(*s)));
        }
    }
    Value::Array(out)
}

fn span(start: i64, end: i64, len: usize) -> Option<std::ops::Range<usize>> {
    let len = len as i64;
    let start = if start < 0 {
        (len + start).max(0)
    } else {
        start
    };
    let end = if end < 0 { len + end } else { end.min(len - 1) };
    (start <= end && start < len).then(|| start as usize..end as usize + 1)
}

impl ZModel {
    /// `ZADD` with its flags, as Redis's `zsetAdd` decides each pair.
    fn zadd(&mut self, k: usize, flags: &[&str], pairs: &[(f64, String)]) -> Value {
        let has = |f: &str| flags.contains(&f);
        let z = &mut self.sets[k];
        let (mut added, mut changed, mut last) = (0, 0, None);
        for (score, m) in pairs {
            let old = z.get(m).copied();
            let new = match old {
                Some(_) if has("NX") => continue,
                None if has("XX") => continue,
                Some(cur) if has("INCR") => cur + score,
                _ => *score,
            };
            if new.is_nan() {
                return Value::Error("ERR resulting score is not a number (NaN)".into());
            }
            if let Some(cur) = old {
                if (has("LT") && new >= cur) || (has("GT") && new <= cur) {
                    continue;
                }
                if cur != new {
                    changed += 1;
                }
            } else {
                added += 1;
            }
            last = Some(new);
            z.insert(m.clone(), if new == 0.0 { 0.0 } else { new });
        }
        if has("INCR") {
            last.map_or(Value::Nil, |s| bulk(&format_double(s)))
        } else {
            Value::Int(if has("CH") { added + changed } else { added })
        }
    }

    fn by_score(&self, k: usize, min: End, max: End, rev: bool) -> Vec<(String, f64)> {
        let inside = |s: f64| {
            (if min.1 { s > min.0 } else { s >= min.0 })
                && (if max.1 { s < max.0 } else { s <= max.0 })
        };
        let mut v: Vec<_> = sorted(&self.sets[k])
            .into_iter()
            .filter(|e| inside(e.1))
            .collect();
        if rev {
            v.reverse();
        }
        v
    }

    /// A lex range as Redis's listpack scan finds it, from its first entry on, unchecked
    /// skip then checked take.
    fn by_lex(&self, k: usize, min: &Lex, max: &Lex, rev: bool, skip: usize) -> Vec<(String, f64)> {
        let mut v = sorted(&self.sets[k]);
        let (Some(first), Some(last)) = (v.first().cloned(), v.last().cloned()) else {
            return vec![];
        };
        let empty = match min.key().cmp(&max.key()) {
            std::cmp::Ordering::Greater => true,
            std::cmp::Ordering::Equal => {
                !matches!(min, Lex::Incl(_)) || !matches!(max, Lex::Incl(_))
            }
            std::cmp::Ordering::Less => false,
        };
        if empty || !min.above(&last.0) || !max.below(&first.0) {
            return vec![];
        }
        if rev {
            v.reverse();
        }
        let starts = |m: &str| if rev { max.below(m) } else { min.above(m) };
        let stays = |m: &str| if rev { min.above(m) } else { max.below(m) };
        let Some(at) = v.iter().position(|e| starts(&e.0)) else {
            return vec![];
        };
        if !stays(&v[at].0) {
            return vec![];
        }
        v[at..]
            .iter()
            .skip(skip)
            .take_while(|e| stays(&e.0))
            .cloned()
            .collect()
    }

    fn remove(&mut self, k: usize, gone: &[(String, f64)]) -> Value {
        for (m, _) in gone {
            self.sets[k].remove(m);
        }
        Value::Int(gone.len() as i64)
    }

    /// `ZUNIONSTORE`/`ZINTERSTORE dst 2 z0 z1 WEIGHTS w0 w1 AGGREGATE agg`, adding the
    /// smaller input first.
    fn combine(&mut self, dst: usize, inter: bool, w: [f64; 2], agg: &str) -> Value {
        let fold = |t: f64, v: f64| match agg {
            "SUM" => {
                let s = t + v;
                if s.is_nan() {
                    0.0
                } else {
                    s
                }
            }
            "MIN" => {
                if v < t {
                    v
                } else {
                    t
                }
            }
            _ => {
                if v > t {
                    v
                } else {
                    t
                }
            }
        };
        let weigh = |s: f64, w: f64| if (s * w).is_nan() { 0.0 } else { s * w };
        let order = if self.sets[1].len() < self.sets[0].len() {
            [1, 0]
        } else {
            [0, 1]
        };
        let mut out: BTreeMap<String, f64> = BTreeMap::new();
        if inter {
            for (m, s) in &self.sets[order[0]] {
                if let Some(o) = self.sets[order[1]].get(m) {
                    out.insert(m.clone(), fold(weigh(*s, w[order[0]]), o * w[order[1]]));
                }
            }
        } else {
            for i in order {
                for (m, s) in &self.sets[i] {
                    let v = weigh(*s, w[i]);
                    let t = out.get(m).map_or(v, |t| fold(*t, v));
                    out.insert(m.clone(), t);
                }
            }
        }
        for s in out.values_mut() {
            if *s == 0.0 {
                *s = 0.0;
            }
        }
        let n = out.len();
        self.sets[dst] = out;
        Value::Int(n as i64)
    }
}

#[test]
fn random_operations_match_a_btreemap_model() {
    let s = TestServer::start();
    let mut c = s.client();
    let mut rng = ChaCha8Rng::seed_from_u64(0x25e7);
    let mut m = ZModel::default();
    let keys = ["z0", "z1"];
    let (mut batch, mut batch_len) = (Vec::new(), 1);
    let scores = [
        f64::NEG_INFINITY,
        -1.5,
        0.0,
        1.0,
        1.0,
        2.0,
        2.5,
        3.0,
        f64::INFINITY,
    ];
    for step in 0..4000 {
        let k = rng.gen_range(0..2);
        let key = keys[k].to_string();
        let len = m.sets[k].len() as i64;
        let member =
            |rng: &mut ChaCha8Rng| ["a", "b", "c", "d", "e", "f"][rng.gen_range(0..6)].to_string();
        let score = |rng: &mut ChaCha8Rng| scores[rng.gen_range(0..scores.len())];
        let end = |rng: &mut ChaCha8Rng| (score(rng), rng.gen_bool(0.3));
        let lex = |rng: &mut ChaCha8Rng| match rng.gen_range(0..6) {
            0 => Lex::Min,
            1 => Lex::Max,
            2 | 3 => Lex::Incl(member(rng)),
            _ => Lex::Excl(member(rng)),
        };
        let i = rng.gen_range(-len - 2..=len + 2);
        let j = rng.gen_range(-len - 2..=len + 2);
        let rev = rng.gen_bool(0.5);
        let withscores = rng.gen_bool(0.5);
        let limit = rng
            .gen_bool(0.4)
            .then(|| (rng.gen_range(-1..3), rng.gen_range(-1..4)));
        let op = rng.gen_range(0..17);
        let mut args: Vec<String>;
        let want = match op {
            0 | 1 => {
                let flags: Vec<&str> = match rng.gen_range(0..12) {
                    0 => vec!["NX"],
                    1 => vec!["XX"],
                    2 => vec!["GT", "CH"],
                    3 => vec!["LT"],
                    4 => vec!["XX", "GT"],
                    5 => vec!["INCR"],
                    6 => vec!["CH"],
                    7 => vec!["GT", "INCR"],
                    8 => vec!["LT", "INCR"],
                    9 => vec!["NX", "INCR"],
                    10 => vec!["XX", "LT", "CH"],
                    _ => vec![],
                };
                let n = if flags.contains(&"INCR") {
                    1
                } else {
                    rng.gen_range(1..4)
                };
                let pairs: Vec<(f64, String)> = (0..n)
                    .map(|_| (score(&mut rng), member(&mut rng)))
                    .collect();
                args = vec!["ZADD".into(), key];
                args.extend(flags.iter().map(|f| f.to_string()));
                for (s, mem) in &pairs {
                    args.extend([format_double(*s), mem.clone()]);
                }
                m.zadd(k, &flags, &pairs)
            }
            2 => {
                let (s, mem) = (score(&mut rng), member(&mut rng));
                args = vec!["ZINCRBY".into(), key, format_double(s), mem.clone()];
                m.zadd(k, &["INCR"], &[(s, mem)])
            }
            3 => {
                let (a, b) = (member(&mut rng), member(&mut rng));
                let mut n = 0;
                for x in [&a, &b] {
                    if m.sets[k].remove(x.as_str()).is_some() {
                        n += 1;
                    }
                }
                args = vec!["ZREM".into(), key, a, b];
                Value::Int(n)
            }
            4 => {
                let mut v = sorted(&m.sets[k]);
                if rev {
                    v.reverse();
                }
                let got = span(i, j, v.len()).map_or(vec![], |r| v[r].to_vec());
                args = vec!["ZRANGE".into(), key, i.to_string(), j.to_string()];
                if rev {
                    args.push("REV".into());
                }
                if withscores {
                    args.push("WITHSCORES".into());
                }
                reply(&got, withscores)
            }
            5 | 6 => {
                let (min, max) = (end(&mut rng), end(&mut rng));
                let (first, second) = if rev { (max, min) } else { (min, max) };
                args = vec!["ZRANGE".into(), key, end_arg(first), end_arg(second)];
                let mut got = m.by_score(k, min, max, rev);
                let by_lex = op == 6;
                let (lmin, lmax) = (lex(&mut rng), lex(&mut rng));
                if by_lex {
                    let (first, second) = if rev { (&lmax, &lmin) } else { (&lmin, &lmax) };
                    args[2] = first.arg();
                    args[3] = second.arg();
                    let skip = limit.map_or(0, |(o, _)| o.max(0) as usize);
                    got = m.by_lex(k, &lmin, &lmax, rev, skip);
                    if limit.is_some_and(|(o, _)| o < 0) {
                        got.clear();
                    }
                } else if let Some((o, _)) = limit {
                    got = if o < 0 {
                        vec![]
                    } else {
                        got.into_iter().skip(o as usize).collect()
                    };
                }
                if let Some((_, n)) = limit {
                    if n >= 0 {
                        got.truncate(n as usize);
                    }
                }
                args.push(if by_lex { "BYLEX" } else { "BYSCORE" }.into());
                if rev {
                    args.push("REV".into());
                }
                if let Some((o, n)) = limit {
                    args.extend(["LIMIT".into(), o.to_string(), n.to_string()]);
                }
                let ws = withscores && !by_lex;
                if ws {
                    args.push("WITHSCORES".into());
                }
                reply(&got, ws)
            }
            7 => {
                let mem = member(&mut rng);
                let mut v = sorted(&m.sets[k]);
                if rev {
                    v.reverse();
                }
                args = vec![
                    if rev { "ZREVRANK" } else { "ZRANK" }.into(),
                    key,
                    mem.clone(),
                ];
                v.iter()
                    .position(|e| e.0 == mem)
                    .map_or(Value::Nil, |r| Value::Int(r as i64))
            }
            8 => {
                let (min, max) = (end(&mut rng), end(&mut rng));
                args = vec!["ZCOUNT".into(), key, end_arg(min), end_arg(max)];
                Value::Int(m.by_score(k, min, max, false).len() as i64)
            }
            9 => {
                let (min, max) = (lex(&mut rng), lex(&mut rng));
                args = vec!["ZLEXCOUNT".into(), key, min.arg(), max.arg()];
                Value::Int(m.by_lex(k, &min, &max, false, 0).len() as i64)
            }
            10 => {
                let count = rng.gen_bool(0.5).then(|| rng.gen_range(0..4usize));
                let mut v = sorted(&m.sets[k]);
                if rev {
                    v.reverse();
                }
                v.truncate(count.unwrap_or(1));
                args = vec![if rev { "ZPOPMAX" } else { "ZPOPMIN" }.into(), key];
                args.extend(count.map(|n| n.to_string()));
                m.remove(k, &v);
                reply(&v, true)
            }
            11 => {
                let v = sorted(&m.sets[k]);
                let gone = span(i, j, v.len()).map_or(vec![], |r| v[r].to_vec());
                args = vec!["ZREMRANGEBYRANK".into(), key, i.to_string(), j.to_string()];
                m.remove(k, &gone)
            }
            12 => {
                let (min, max) = (end(&mut rng), end(&mut rng));
                args = vec!["ZREMRANGEBYSCORE".into(), key, end_arg(min), end_arg(max)];
                let gone = m.by_score(k, min, max, false);
                m.remove(k, &gone)
            }
            13 => {
                let (min, max) = (lex(&mut rng), lex(&mut rng));
                args = vec!["ZREMRANGEBYLEX".into(), key, min.arg(), max.arg()];
                let gone = m.by_lex(k, &min, &max, false, 0);
                m.remove(k, &gone)
            }
            14 => {
                let (a, b) = (member(&mut rng), member(&mut rng));
                args = vec!["ZMSCORE".into(), key, a.clone(), b.clone()];
                let score_of = |x: &String| {
                    m.sets[k]
                        .get(x)
                        .map_or(Value::Nil, |s| bulk(&format_double(*s)))
                };
                Value::Array(vec![score_of(&a), score_of(&b)])
            }
            15 => {
                let inter = rng.gen_bool(0.4);
                let w = [scores[rng.gen_range(2..8)], scores[rng.gen_range(2..8)]];
                let agg = ["SUM", "MIN", "MAX"][rng.gen_range(0..3)];
                let name = if inter { "ZINTERSTORE" } else { "ZUNIONSTORE" };
                args = vec![name.into(), key, "2".into(), "z0".into(), "z1".into()];
                args.extend(["WEIGHTS".into(), format_double(w[0]), format_double(w[1])]);
                args.extend(["AGGREGATE".into(), agg.into()]);
                m.combine(k, inter, w, agg)
            }
            _ => {
                args = vec!["ZCARD".into(), key];
                Value::Int(len)
            }
        };
        // Sent in pipelined batches, which the server runs as groups.
        batch.push((args, want, step));
        if batch.len() >= batch_len {
            script::pipelined(&mut c, &mut batch);
            batch_len = rng.gen_range(1..=8);
        }
        if step % 100 == 0 {
            script::pipelined(&mut c, &mut batch);
            for (k, key) in keys.iter().enumerate() {
                let all = c.cmd(&["ZRANGE", key, "0", "-1", "WITHSCORES"]);
                assert_eq!(all, reply(&sorted(&m.sets[k]), true), "step {step}");
                let exists = Value::Int(i64::from(!m.sets[k].is_empty()));
                assert_eq!(c.cmd(&["EXISTS", key]), exists, "step {step}");
            }
        }
    }
}
