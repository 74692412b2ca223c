"""redis-py against a server on 127.0.0.1:PORT (the only argument): pipelines with and
without MULTI/EXEC, WATCH with retries on WatchError from racing threads, hashes, lists and
sorted sets through the client's API, and RESP3 (protocol=3). Exits non-zero on the first
reply that is not what Redis gives. Run by tests/clients.rs."""

import sys
import threading

import redis


def connect(port, protocol=2):
    return redis.Redis(host="127.0.0.1", port=port, protocol=protocol, socket_timeout=30)


def check(got, want, what):
    if got != want:
        raise AssertionError(f"{what}: got {got!r}, want {want!r}")


def pairs(xs):
    """Member-score pairs as tuples (RESP3 gives them as lists)."""
    return [tuple(x) for x in xs]


def leaves(x):
    """A reply's leaves, depth first."""
    if isinstance(x, (list, tuple)):
        return [leaf for item in x for leaf in leaves(item)]
    return [x]


def pipelines(r):
    r.delete("p:a", "p:b", "p:n")
    pipe = r.pipeline(transaction=False)
    for i in range(100):
        pipe.set(f"p:{i}", i)
    pipe.get("p:7").set("p:a", "x").get("p:a")
    results = pipe.execute()
    check(results[:100], [True] * 100, "a pipeline's SETs")
    check(results[100:], [b"7", True, b"x"], "a pipeline's last replies")

    pipe = r.pipeline(transaction=True)
    pipe.set("p:b", "1").incr("p:b").incrby("p:b", 5).get("p:b")
    check(pipe.execute(), [True, 2, 7, b"7"], "MULTI/EXEC through a pipeline")

    # A failing command inside EXEC does not stop the others; redis-py raises it after.
    pipe = r.pipeline(transaction=True)
    pipe.set("p:n", "notanumber").incr("p:n").set("p:a", "y")
    try:
        pipe.execute()
        raise AssertionError("INCR of a non-integer inside EXEC did not fail")
    except redis.ResponseError as e:
        check("not an integer" in str(e), True, f"the EXEC error {e}")
    check(r.get("p:a"), b"y", "the command after a failing one in EXEC")
    r.delete(*[f"p:{i}" for i in range(100)])


def watch_retries(port):
    """Threads add to one counter with WATCH/MULTI/EXEC, retrying when another thread's
    write made EXEC fail: no increment may be lost."""
    r = connect(port)
    r.set("w:counter", 0)
    threads, per_thread = 4, 40
    retries = []

    def add():
        c = connect(port)
        lost = 0
        with c.pipeline() as pipe:
            for _ in range(per_thread):
                while True:
                    try:
                        pipe.watch("w:counter")
                        value = int(pipe.get("w:counter"))
                        pipe.multi()
                        pipe.set("w:counter", value + 1)
                        pipe.execute()
                        break
                    except redis.WatchError:
                        lost += 1
        retries.append(lost)

    workers = [threading.Thread(target=add) for _ in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    check(len(retries), threads, "threads that finished")
    check(int(r.get("w:counter")), threads * per_thread, "the watched counter")

    # A watched key changed by another connection makes EXEC fail, every time.
    other = connect(port)
    with r.pipeline() as pipe:
        pipe.watch("w:counter")
        other.set("w:counter", "changed")
        pipe.multi()
        pipe.set("w:counter", "mine")
        try:
            pipe.execute()
            raise AssertionError("EXEC ran though a watched key changed")
        except redis.WatchError:
            pass
    check(r.get("w:counter"), b"changed", "the watched key after a failed EXEC")


def types(r, resp3):
    r.delete("h", "l", "z", "s")
    check(r.hset("h", mapping={"f1": "v1", "f2": "v2"}), 2, "HSET of a mapping")
    check(r.hgetall("h"), {b"f1": b"v1", b"f2": b"v2"}, "HGETALL")
    check(r.hincrby("h", "n", 5), 5, "HINCRBY")
    check(r.hincrbyfloat("h", "x", 1.5), 1.5, "HINCRBYFLOAT")
    check(r.hmget("h", "f1", "nope"), [b"v1", None], "HMGET")
    check(sorted(r.hkeys("h")), [b"f1", b"f2", b"n", b"x"], "HKEYS")
    check(r.hlen("h"), 4, "HLEN")

    check(r.rpush("l", "a", "b", "c"), 3, "RPUSH")
    check(r.lpush("l", "z"), 4, "LPUSH")
    check(r.lrange("l", 0, -1), [b"z", b"a", b"b", b"c"], "LRANGE")
    check(r.lpop("l"), b"z", "LPOP")
    check(r.rpop("l", 2), [b"c", b"b"], "RPOP with a count")
    check(r.lpos("l", "a"), 0, "LPOS")
    check(r.lmove("l", "l2", "LEFT", "RIGHT"), b"a", "LMOVE")
    check(r.exists("l"), 0, "a list emptied is gone")

    check(r.zadd("z", {"a": 1, "b": 2.5, "c": -1}), 3, "ZADD")
    check(r.zscore("z", "b"), 2.5, "ZSCORE")
    check(r.zincrby("z", 2, "a"), 3.0, "ZINCRBY")
    check(
        pairs(r.zrange("z", 0, -1, withscores=True)),
        [(b"c", -1.0), (b"b", 2.5), (b"a", 3.0)],
        "ZRANGE WITHSCORES",
    )
    check(r.zrangebyscore("z", "(0", "+inf"), [b"b", b"a"], "ZRANGEBYSCORE")
    check(r.zrank("z", "a"), 2, "ZRANK")
    # Its reply's nesting differs between the protocols (the differential test checks it).
    check(leaves(r.zpopmin("z")), [b"c", -1.0], "ZPOPMIN")
    check(r.zcard("z"), 2, "ZCARD")

    check(r.sadd("s", "a", "b", "c"), 3, "SADD")
    check(r.smembers("s"), {b"a", b"b", b"c"}, "SMEMBERS")
    check(r.sismember("s", "b"), True if resp3 else 1, "SISMEMBER")
    r.delete("h", "l2", "z", "s")


def resp3(port):
    r = connect(port, protocol=3)
    check(r.ping(), True, "PING in RESP3")
    check(r.set("r3", "v"), True, "SET in RESP3")
    check(r.get("r3"), b"v", "GET in RESP3")
    check(r.get("r3:none"), None, "a missing key in RESP3")
    types(r, resp3=True)
    pipelines(r)
    r.delete("r3")


def main():
    port = int(sys.argv[1])
    r = connect(port)
    check(r.ping(), True, "PING")
    check(r.set("k", b"\x00\xffbinary"), True, "SET")
    check(r.get("k"), b"\x00\xffbinary", "GET of a binary value")
    pipelines(r)
    watch_retries(port)
    types(r, resp3=False)
    resp3(port)
    print("redis-py", redis.__version__, "ok")


if __name__ == "__main__":
    main()
