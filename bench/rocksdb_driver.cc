// rocksdb_driver: the VT-tree paper's RANDOM-APPEND and SEQUENTIAL-INSERTION workloads on
// RocksDB, which db_bench does not have, with exactly the keys and values `stitchdb bench`
// generates (same splitmix64 streams, same key format, same value pool; docs/benchmarks.md
// defines them) and db_bench's default options, printing db_bench's result lines.
//
//   g++ -O2 -DNDEBUG -fno-rtti -std=c++20 -I$ROCKSDB/include bench/rocksdb_driver.cc
//       $ROCKSDB/librocksdb.a -lpthread -ldl -o rocksdb_driver
// ($ROCKSDB: what bench/build-rocksdb.sh prints; bench/compare.sh does this.)
//   rocksdb_driver --benchmarks=randomappend,seqinsert --num=200000 --db=/tmp/rdb
//
// Flags (db_bench's names, --flag=value): --benchmarks --num --value_size --key_size --db
// --sync --disable_wal --use_existing_db --write_buffer_size --cache_size --bloom_bits --seed.

#include <rocksdb/cache.h>
#include <rocksdb/db.h>
#include <rocksdb/filter_policy.h>
#include <rocksdb/listener.h>
#include <rocksdb/options.h>
#include <rocksdb/table.h>
#include <rocksdb/version.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

namespace {

// ---- the generated data (keep in step with keys.rs in stitchdb-cli) -----------------------

struct SplitMix64 {
  uint64_t state;
  explicit SplitMix64(uint64_t seed) : state(seed) {}
  uint64_t next() {
    state += 0x9e3779b97f4a7c15ULL;
    uint64_t z = state;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  // Uniform over [0, n) as db_bench draws keys (Next() % n); 0 when n is 0 (still using up
  // one output, so the streams stay in step with stitchdb's).
  uint64_t below(uint64_t n) {
    uint64_t x = next();
    return n == 0 ? 0 : x % n;
  }
};

// db_bench's GenerateKeyFromInt: the low min(size, 8) bytes of n big-endian, '0' padding.
void encode_key(uint64_t n, std::string* key) {
  size_t fill = std::min<size_t>(key->size(), 8);
  for (size_t i = 0; i < fill; ++i) {
    (*key)[i] = static_cast<char>((n >> ((fill - i - 1) * 8)) & 0xff);
  }
  std::fill(key->begin() + fill, key->end(), '0');
}

const uint64_t kAppendRanges = 2040;
const uint64_t kSeqRun = 16384;

// RANDOM-APPEND: range r gets total/R appends (+1 if r < total%R); each append picks
// live[rng % live.size()], writes key r<<32 | seq, and removes a full range by moving the
// last live range into its slot.
class RandomAppend {
 public:
  RandomAppend(SplitMix64 rng, uint64_t total) : rng_(rng), appended_(kAppendRanges, 0) {
    for (uint64_t r = 0; r < kAppendRanges; ++r) {
      quota_.push_back(total / kAppendRanges + (r < total % kAppendRanges ? 1 : 0));
      if (quota_[r] > 0) live_.push_back(r);
    }
  }
  uint64_t next() {
    if (live_.empty()) return 0;
    size_t slot = rng_.below(live_.size());
    uint64_t range = live_[slot];
    uint64_t seq = appended_[range]++;
    if (appended_[range] == quota_[range]) {
      live_[slot] = live_.back();
      live_.pop_back();
    }
    return (range << 32) | seq;
  }

 private:
  SplitMix64 rng_;
  std::vector<uint64_t> live_, appended_, quota_;
};

// SEQUENTIAL-INSERTION: runs of kSeqRun consecutive keys from 1 + rng % (2^64 - kSeqRun).
class SeqInsert {
 public:
  explicit SeqInsert(SplitMix64 rng) : rng_(rng) {}
  uint64_t next() {
    if (left_ == 0) {
      next_ = 1 + rng_.below(0 - kSeqRun);
      left_ = kSeqRun;
    }
    --left_;
    return next_++;
  }

 private:
  SplitMix64 rng_;
  uint64_t next_ = 0, left_ = 0;
};

// max(1 MiB, value_size) bytes: little-endian outputs of splitmix64 seeded with ~seed.
std::string value_pool(uint64_t seed, size_t value_size) {
  SplitMix64 rng(~seed);
  size_t len = std::max<size_t>(1 << 20, value_size);
  std::string pool;
  pool.reserve(len + 8);
  while (pool.size() < len) {
    uint64_t word = rng.next();
    for (int i = 0; i < 8; ++i) pool.push_back(static_cast<char>((word >> (8 * i)) & 0xff));
  }
  pool.resize(len);
  return pool;
}

// Consecutive slices of the pool, starting over when one would run past its end.
class Values {
 public:
  Values(const std::string& pool, size_t size) : pool_(pool), size_(size) {}
  rocksdb::Slice next() {
    if (pos_ + size_ > pool_.size()) pos_ = 0;
    pos_ += size_;
    return rocksdb::Slice(pool_.data() + pos_ - size_, size_);
  }

 private:
  const std::string& pool_;
  size_t size_, pos_ = 0;
};

// ---- flags -----------------------------------------------------------------------------

struct Flags {
  std::string benchmarks = "randomappend,seqinsert";
  uint64_t num = 1000000;
  size_t value_size = 100;
  size_t key_size = 16;
  std::string db = "/tmp/rocksdb_driver";
  bool sync = false;
  bool disable_wal = false;
  bool use_existing_db = false;
  size_t write_buffer_size = 64 << 20;  // db_bench's default
  size_t cache_size = 8 << 20;          // db_bench's default
  int bloom_bits = 0;                   // 0: no filter (db_bench's default)
  uint64_t seed = 42;
};

[[noreturn]] void usage(const std::string& why) {
  std::fprintf(stderr, "rocksdb_driver: %s\n", why.c_str());
  std::exit(2);
}

bool parse_bool(const std::string& name, const std::string& v) {
  if (v == "1" || v == "true") return true;
  if (v == "0" || v == "false") return false;
  usage("--" + name + "=" + v + " is not 0 or 1");
}

uint64_t parse_number(const std::string& name, const std::string& v) {
  char* end = nullptr;
  errno = 0;
  unsigned long long n = std::strtoull(v.c_str(), &end, 10);
  if (v.empty() || v[0] == '-' || *end != '\0' || errno != 0) {
    usage("--" + name + "=" + v + " is not a number");
  }
  return n;
}

Flags parse_flags(int argc, char** argv) {
  Flags f;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg.rfind("--", 0) != 0) usage("unexpected argument " + arg);
    size_t eq = arg.find('=');
    std::string name = arg.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
    bool bare = eq == std::string::npos;
    std::string value = bare ? "1" : arg.substr(eq + 1);
    bool boolean = name == "sync" || name == "disable_wal" || name == "use_existing_db";
    if (bare && !boolean) usage("--" + name + " needs a value (--" + name + "=...)");
    if (name == "benchmarks") f.benchmarks = value;
    else if (name == "num") f.num = parse_number(name, value);
    else if (name == "value_size") f.value_size = parse_number(name, value);
    else if (name == "key_size") f.key_size = parse_number(name, value);
    else if (name == "db") f.db = value;
    else if (name == "sync") f.sync = parse_bool(name, value);
    else if (name == "disable_wal") f.disable_wal = parse_bool(name, value);
    else if (name == "use_existing_db") f.use_existing_db = parse_bool(name, value);
    else if (name == "write_buffer_size") f.write_buffer_size = parse_number(name, value);
    else if (name == "cache_size") f.cache_size = parse_number(name, value);
    else if (name == "bloom_bits") f.bloom_bits = static_cast<int>(std::min<uint64_t>(parse_number(name, value), 64));
    else if (name == "seed") f.seed = parse_number(name, value);
    else usage("unknown flag --" + name);
  }
  if (f.key_size == 0) usage("--key_size must be at least 1");
  if (f.value_size > (64u << 20)) usage("--value_size is over 64 MiB");
  return f;
}

// ---- running -----------------------------------------------------------------------------

// Counts flushes and compactions, for the `rocksdb:` line after each benchmark.
class Counter : public rocksdb::EventListener {
 public:
  std::atomic<uint64_t> flushes{0}, compactions{0};
  void OnFlushCompleted(rocksdb::DB*, const rocksdb::FlushJobInfo&) override { ++flushes; }
  void OnCompactionCompleted(rocksdb::DB*, const rocksdb::CompactionJobInfo&) override {
    ++compactions;
  }
};

// The options db_bench 7.8 uses by default, with compression off as in `bench/compare.sh`.
rocksdb::Options db_bench_options(const Flags& f, std::shared_ptr<Counter> counter) {
  rocksdb::Options o;
  o.create_if_missing = true;
  o.compression = rocksdb::kNoCompression;
  o.write_buffer_size = f.write_buffer_size;
  o.enable_pipelined_write = true;  // db_bench's default (RocksDB's own is false)
  rocksdb::BlockBasedTableOptions table;
  table.block_cache = rocksdb::NewLRUCache(f.cache_size);
  if (f.bloom_bits > 0) table.filter_policy.reset(rocksdb::NewBloomFilterPolicy(f.bloom_bits));
  o.table_factory.reset(rocksdb::NewBlockBasedTableFactory(table));
  o.listeners.push_back(counter);
  return o;
}

void check(const rocksdb::Status& s, const char* doing) {
  if (!s.ok()) {
    std::fprintf(stderr, "rocksdb_driver: %s: %s\n", doing, s.ToString().c_str());
    std::exit(1);
  }
}

double now_seconds() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

// db_bench's Stats::Report line.
void report(const std::string& name, uint64_t done, uint64_t bytes, double elapsed) {
  if (done < 1) done = 1;
  char rate[100] = "";
  if (bytes > 0) std::snprintf(rate, sizeof rate, " %6.1f MB/s", bytes / 1048576.0 / elapsed);
  std::printf("%-12s : %11.3f micros/op %ld ops/sec %.3f seconds %" PRIu64 " operations;%s\n",
              name.c_str(), elapsed * 1e6 / done, static_cast<long>(done / elapsed), elapsed,
              done, rate);
}

template <typename Keys>
void put_all(rocksdb::DB* db, const Flags& f, const rocksdb::WriteOptions& wo, Keys keys,
             const std::string& pool) {
  std::string key(f.key_size, '\0');
  Values values(pool, f.value_size);
  for (uint64_t i = 0; i < f.num; ++i) {
    encode_key(keys.next(), &key);
    check(db->Put(wo, key, values.next()), "put");
  }
}

}  // namespace

int main(int argc, char** argv) {
  Flags f = parse_flags(argc, argv);
  std::vector<std::string> benchmarks;
  std::stringstream list(f.benchmarks);
  for (std::string name; std::getline(list, name, ',');) {
    if (name.empty()) continue;
    if (name != "randomappend" && name != "seqinsert") {
      usage("unknown benchmark " + name + " (this driver runs randomappend and seqinsert)");
    }
    benchmarks.push_back(name);
  }

  std::printf("RocksDB:    version %d.%d.%d\n", ROCKSDB_MAJOR, ROCKSDB_MINOR, ROCKSDB_PATCH);
  std::printf("Keys:       %zu bytes each\n", f.key_size);
  std::printf("Values:     %zu bytes each (random bytes, no compression)\n", f.value_size);
  std::printf("Entries:    %" PRIu64 "\n", f.num);
  std::printf("RawSize:    %.1f MB (estimated)\n",
              f.num * static_cast<double>(f.key_size + f.value_size) / 1048576.0);
  std::printf("Compression: NoCompression\n");
  std::printf("Seed:       %" PRIu64 " (splitmix64)\n", f.seed);
  std::printf("------------------------------------------------\n");
  std::printf("DB path: [%s]\n", f.db.c_str());

  auto counter = std::make_shared<Counter>();
  rocksdb::Options options = db_bench_options(f, counter);
  rocksdb::WriteOptions wo;
  wo.sync = f.sync;
  wo.disableWAL = f.disable_wal;
  std::string pool = value_pool(f.seed, f.value_size);
  std::unique_ptr<rocksdb::DB> db;

  for (size_t i = 0; i < benchmarks.size(); ++i) {
    const std::string& name = benchmarks[i];
    // Both need an empty store (db_bench's fresh_db).
    if (f.use_existing_db) {
      std::printf("%-12s : skipped (--use_existing_db is true)\n", name.c_str());
      continue;
    }
    db.reset();
    check(rocksdb::DestroyDB(f.db, options), "destroying the old db");
    check(rocksdb::DB::Open(options, f.db, &db), "opening the db");
    uint64_t flushes = counter->flushes, compactions = counter->compactions;

    // The i-th benchmark's single thread uses stream seed + i, as `stitchdb bench` does.
    SplitMix64 rng(f.seed + i);
    double start = now_seconds();
    if (name == "randomappend") {
      put_all(db.get(), f, wo, RandomAppend(rng, f.num), pool);
    } else {
      put_all(db.get(), f, wo, SeqInsert(rng), pool);
    }
    double elapsed = std::max(now_seconds() - start, 1e-9);
    report(name, f.num, f.num * (f.key_size + f.value_size), elapsed);
    std::printf("rocksdb: %" PRIu64 " memtable flushes, %" PRIu64 " compactions\n",
                counter->flushes - flushes, counter->compactions - compactions);
    std::fflush(stdout);
  }
  db.reset();
  return 0;
}
