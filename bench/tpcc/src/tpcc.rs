//! The TPC-C schema (one warehouse), its initial population, and the new-order transaction
//! (TPC-C 5.11, clause 2.4), in SQL both engines run as written.
//!
//! GlueSQL 0.20 takes only one-column primary keys, so each table's TPC-C composite key is
//! folded into one INTEGER column (`d_key`, `c_key`, `s_key`, `o_key`, `no_key`, `ol_key`),
//! its parts kept as columns too; SQLite gets the same schema (its `INTEGER PRIMARY KEY` is
//! the rowid, SQLite's fastest lookup). Money is FLOAT (GlueSQL's and SQLite's doubles),
//! dates INTEGER seconds.

use crate::client::{Client, Result, V};

/// A small deterministic generator (splitmix64), so every engine runs the same transactions.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in `lo..=hi`.
    pub fn range(&mut self, lo: i64, hi: i64) -> i64 {
        lo + (self.next() % (hi - lo + 1) as u64) as i64
    }
    pub fn float(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (self.next() >> 11) as f64 / (1u64 << 53) as f64 * (hi - lo)
    }
    /// A random alphanumeric string of `lo..=hi` characters (TPC-C's a-string).
    pub fn astring(&mut self, lo: i64, hi: i64) -> String {
        const CHARS: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
        let n = self.range(lo, hi);
        (0..n)
            .map(|_| CHARS[(self.next() % CHARS.len() as u64) as usize] as char)
            .collect()
    }
    /// A random string of digits (n-string).
    pub fn nstring(&mut self, lo: i64, hi: i64) -> String {
        let n = self.range(lo, hi);
        (0..n)
            .map(|_| (b'0' + (self.next() % 10) as u8) as char)
            .collect()
    }
    /// TPC-C's non-uniform random NURand(A, x, y) with run constant `c`.
    pub fn nurand(&mut self, a: i64, c: i64, x: i64, y: i64) -> i64 {
        (((self.range(0, a) | self.range(x, y)) + c) % (y - x + 1)) + x
    }
}

/// Districts per warehouse.
pub const DISTRICTS: i64 = 10;
/// The one warehouse.
pub const W_ID: i64 = 1;

/// How much is loaded.
#[derive(Clone, Copy)]
pub struct Scale {
    pub items: i64,
    pub customers: i64,
}

pub fn d_key(d: i64) -> i64 {
    W_ID * 100 + d
}
pub fn c_key(d: i64, c: i64) -> i64 {
    d_key(d) * 100_000 + c
}
pub fn s_key(i: i64) -> i64 {
    W_ID * 1_000_000 + i
}
pub fn o_key(d: i64, o: i64) -> i64 {
    d_key(d) * 100_000_000 + o
}
pub fn ol_key(d: i64, o: i64, n: i64) -> i64 {
    o_key(d, o) * 16 + n
}

/// The tables, in creation order.
pub const SCHEMA: &[(&str, &str)] = &[
    (
        "warehouse",
        "CREATE TABLE warehouse (w_id INTEGER PRIMARY KEY, w_name TEXT, w_street_1 TEXT, \
         w_street_2 TEXT, w_city TEXT, w_state TEXT, w_zip TEXT, w_tax FLOAT, w_ytd FLOAT)",
    ),
    (
        "district",
        "CREATE TABLE district (d_key INTEGER PRIMARY KEY, d_id INTEGER, d_w_id INTEGER, \
         d_name TEXT, d_street_1 TEXT, d_street_2 TEXT, d_city TEXT, d_state TEXT, d_zip TEXT, \
         d_tax FLOAT, d_ytd FLOAT, d_next_o_id INTEGER)",
    ),
    (
        "customer",
        "CREATE TABLE customer (c_key INTEGER PRIMARY KEY, c_id INTEGER, c_d_id INTEGER, \
         c_w_id INTEGER, c_first TEXT, c_middle TEXT, c_last TEXT, c_street_1 TEXT, \
         c_street_2 TEXT, c_city TEXT, c_state TEXT, c_zip TEXT, c_phone TEXT, c_since INTEGER, \
         c_credit TEXT, c_credit_lim FLOAT, c_discount FLOAT, c_balance FLOAT, \
         c_ytd_payment FLOAT, c_payment_cnt INTEGER, c_delivery_cnt INTEGER, c_data TEXT)",
    ),
    (
        "item",
        "CREATE TABLE item (i_id INTEGER PRIMARY KEY, i_im_id INTEGER, i_name TEXT, \
         i_price FLOAT, i_data TEXT)",
    ),
    (
        "stock",
        "CREATE TABLE stock (s_key INTEGER PRIMARY KEY, s_i_id INTEGER, s_w_id INTEGER, \
         s_quantity INTEGER, s_dist_01 TEXT, s_dist_02 TEXT, s_dist_03 TEXT, s_dist_04 TEXT, \
         s_dist_05 TEXT, s_dist_06 TEXT, s_dist_07 TEXT, s_dist_08 TEXT, s_dist_09 TEXT, \
         s_dist_10 TEXT, s_ytd INTEGER, s_order_cnt INTEGER, s_remote_cnt INTEGER, s_data TEXT)",
    ),
    (
        "orders",
        "CREATE TABLE orders (o_key INTEGER PRIMARY KEY, o_id INTEGER, o_d_id INTEGER, \
         o_w_id INTEGER, o_c_id INTEGER, o_entry_d INTEGER, o_carrier_id INTEGER, \
         o_ol_cnt INTEGER, o_all_local INTEGER)",
    ),
    (
        "new_order",
        "CREATE TABLE new_order (no_key INTEGER PRIMARY KEY, no_o_id INTEGER, no_d_id INTEGER, \
         no_w_id INTEGER)",
    ),
    (
        "order_line",
        "CREATE TABLE order_line (ol_key INTEGER PRIMARY KEY, ol_o_id INTEGER, ol_d_id INTEGER, \
         ol_w_id INTEGER, ol_number INTEGER, ol_i_id INTEGER, ol_supply_w_id INTEGER, \
         ol_delivery_d INTEGER, ol_quantity INTEGER, ol_amount FLOAT, ol_dist_info TEXT)",
    ),
];

/// Rows per load statement (and per load transaction).
const LOAD_BATCH: usize = 1000;

/// i_data / s_data: 26 to 50 characters, 10% with "ORIGINAL" somewhere.
fn data_string(rng: &mut Rng) -> String {
    let mut s = rng.astring(26, 50);
    if rng.range(1, 10) == 1 {
        let at = rng.range(0, s.len() as i64 - 8) as usize;
        s.replace_range(at..at + 8, "ORIGINAL");
    }
    s
}

/// The last name of number `n` (0 to 999) from TPC-C's syllables.
fn last_name(n: i64) -> String {
    const SYL: [&str; 10] = [
        "BAR", "OUGHT", "ABLE", "PRI", "PRES", "ESE", "ANTI", "CALLY", "ATION", "EING",
    ];
    format!(
        "{}{}{}",
        SYL[(n / 100) as usize],
        SYL[(n / 10 % 10) as usize],
        SYL[(n % 10) as usize]
    )
}

/// Address columns: street 1, street 2, city, state, zip.
fn address(rng: &mut Rng) -> String {
    format!(
        "'{}', '{}', '{}', '{}', '{}11111'",
        rng.astring(10, 20),
        rng.astring(10, 20),
        rng.astring(10, 20),
        rng.astring(2, 2),
        rng.nstring(4, 4)
    )
}

/// Inserts `rows` (SQL tuples) into `table`, `LOAD_BATCH` per statement and transaction.
fn insert_all(
    client: &mut dyn Client,
    table: &str,
    rows: impl Iterator<Item = String>,
) -> Result<()> {
    let mut batch = Vec::with_capacity(LOAD_BATCH);
    let mut flush = |batch: &mut Vec<String>| -> Result<()> {
        if batch.is_empty() {
            return Ok(());
        }
        client.exec("BEGIN", &[])?;
        client.batch(&format!("INSERT INTO {table} VALUES {}", batch.join(", ")))?;
        client.exec("COMMIT", &[])?;
        batch.clear();
        Ok(())
    };
    for row in rows {
        batch.push(row);
        if batch.len() == LOAD_BATCH {
            flush(&mut batch)?;
        }
    }
    flush(&mut batch)
}

/// Creates the tables and loads one warehouse: its districts, `scale.customers` customers
/// per district, `scale.items` items and their stock. Orders start empty (the new-order
/// transaction reads none); `d_next_o_id` starts at 3001 as after TPC-C's initial orders.
pub fn load(client: &mut dyn Client, scale: Scale, seed: u64) -> Result<()> {
    for (_, ddl) in SCHEMA {
        client.batch(ddl)?;
    }
    let mut rng = Rng::new(seed);
    let now = 1_700_000_000i64;
    let warehouse = format!(
        "({W_ID}, '{}', {}, {:.4}, 300000.0)",
        rng.astring(6, 10),
        address(&mut rng),
        rng.float(0.0, 0.2)
    );
    insert_all(client, "warehouse", std::iter::once(warehouse))?;
    let districts: Vec<String> = (1..=DISTRICTS)
        .map(|d| {
            format!(
                "({}, {d}, {W_ID}, '{}', {}, {:.4}, 30000.0, 3001)",
                d_key(d),
                rng.astring(6, 10),
                address(&mut rng),
                rng.float(0.0, 0.2)
            )
        })
        .collect();
    insert_all(client, "district", districts.into_iter())?;

    let c_load = rng.range(0, 255);
    let items = (1..=scale.items).map(|i| {
        format!(
            "({i}, {}, '{}', {:.2}, '{}')",
            rng.range(1, 10_000),
            rng.astring(14, 24),
            rng.float(1.0, 100.0),
            data_string(&mut rng)
        )
    });
    insert_all(client, "item", items)?;

    let mut rng2 = Rng::new(seed ^ 0x5555);
    let stock = (1..=scale.items).map(|i| {
        let dists: Vec<String> = (0..10)
            .map(|_| format!("'{}'", rng2.astring(24, 24)))
            .collect();
        format!(
            "({}, {i}, {W_ID}, {}, {}, 0, 0, 0, '{}')",
            s_key(i),
            rng2.range(10, 100),
            dists.join(", "),
            data_string(&mut rng2)
        )
    });
    insert_all(client, "stock", stock)?;

    let mut rng3 = Rng::new(seed ^ 0xAAAA);
    let customers = (1..=DISTRICTS).flat_map(|d| (1..=scale.customers).map(move |c| (d, c)));
    let customers = customers.map(|(d, c)| {
        let last = if c <= 1000 {
            last_name(c - 1)
        } else {
            last_name(rng3.nurand(255, c_load, 0, 999))
        };
        let credit = if rng3.range(1, 10) == 1 { "BC" } else { "GC" };
        format!(
            "({}, {c}, {d}, {W_ID}, '{}', 'OE', '{last}', {}, '{}', {now}, '{credit}', 50000.0, \
             {:.4}, -10.0, 10.0, 1, 0, '{}')",
            c_key(d, c),
            rng3.astring(8, 16),
            address(&mut rng3),
            rng3.nstring(16, 16),
            rng3.float(0.0, 0.5),
            rng3.astring(300, 500)
        )
    });
    insert_all(client, "customer", customers)
}

/// One new-order's input (TPC-C 2.4.1).
pub struct NewOrder {
    pub d_id: i64,
    pub c_id: i64,
    /// (item, quantity); an item past the last is the unused one that rolls back.
    pub lines: Vec<(i64, i64)>,
    pub entry_d: i64,
}

/// Draws the inputs of new-order transactions: `scale` bounds the ids.
pub struct Inputs {
    rng: Rng,
    c_id_c: i64,
    ol_i_id_c: i64,
    scale: Scale,
}

impl Inputs {
    pub fn new(seed: u64, scale: Scale) -> Inputs {
        let mut rng = Rng::new(seed);
        let c_id_c = rng.range(0, 1023);
        let ol_i_id_c = rng.range(0, 8191);
        Inputs {
            rng,
            c_id_c,
            ol_i_id_c,
            scale,
        }
    }

    /// NURand over 1..=n with TPC-C's A for `n_spec` (3,000 customers, 100,000 items),
    /// folded into `n` when the database is scaled down.
    fn pick(&mut self, a: i64, c: i64, n_spec: i64, n: i64) -> i64 {
        (self.rng.nurand(a, c, 1, n_spec) - 1) % n + 1
    }

    pub fn next(&mut self) -> NewOrder {
        let d_id = self.rng.range(1, DISTRICTS);
        let c_id = self.pick(1023, self.c_id_c, 3000, self.scale.customers);
        let ol_cnt = self.rng.range(5, 15);
        let rollback = self.rng.range(1, 100) == 1;
        let mut lines = Vec::with_capacity(ol_cnt as usize);
        for n in 0..ol_cnt {
            let item = if rollback && n == ol_cnt - 1 {
                self.scale.items + 1
            } else {
                self.pick(8191, self.ol_i_id_c, 100_000, self.scale.items)
            };
            lines.push((item, self.rng.range(1, 10)));
        }
        NewOrder {
            d_id,
            c_id,
            lines,
            entry_d: 1_700_000_000 + self.rng.range(0, 1_000_000),
        }
    }
}

/// Runs one new-order transaction: true if it committed, false if it rolled back on the
/// unused item (as TPC-C requires of 1% of them).
pub fn new_order(client: &mut dyn Client, o: &NewOrder) -> Result<bool> {
    let d = o.d_id;
    client.exec("BEGIN", &[])?;
    let w = client
        .row("SELECT w_tax FROM warehouse WHERE w_id = $1", &[V::I(W_ID)])?
        .ok_or("no warehouse")?;
    let w_tax = w[0].float()?;
    let dist = client
        .row(
            "SELECT d_tax, d_next_o_id FROM district WHERE d_key = $1",
            &[V::I(d_key(d))],
        )?
        .ok_or("no district")?;
    let (d_tax, o_id) = (dist[0].float()?, dist[1].int()?);
    let n = client.exec(
        "UPDATE district SET d_next_o_id = d_next_o_id + 1 WHERE d_key = $1",
        &[V::I(d_key(d))],
    )?;
    if n != 1 {
        return Err(format!("district update changed {n} rows"));
    }
    let c = client
        .row(
            "SELECT c_discount, c_last, c_credit FROM customer WHERE c_key = $1",
            &[V::I(c_key(d, o.c_id))],
        )?
        .ok_or("no customer")?;
    let c_discount = c[0].float()?;
    let ol_cnt = o.lines.len() as i64;
    client.exec(
        "INSERT INTO orders (o_key, o_id, o_d_id, o_w_id, o_c_id, o_entry_d, o_carrier_id, \
         o_ol_cnt, o_all_local) VALUES ($1, $2, $3, $4, $5, $6, NULL, $7, 1)",
        &[
            V::I(o_key(d, o_id)),
            V::I(o_id),
            V::I(d),
            V::I(W_ID),
            V::I(o.c_id),
            V::I(o.entry_d),
            V::I(ol_cnt),
        ],
    )?;
    client.exec(
        "INSERT INTO new_order (no_key, no_o_id, no_d_id, no_w_id) VALUES ($1, $2, $3, $4)",
        &[V::I(o_key(d, o_id)), V::I(o_id), V::I(d), V::I(W_ID)],
    )?;
    let stock_select =
        format!("SELECT s_quantity, s_data, s_dist_{d:02} FROM stock WHERE s_key = $1");
    let mut total = 0.0;
    for (number, &(i_id, qty)) in (1..).zip(&o.lines) {
        let Some(item) = client.row(
            "SELECT i_price, i_name, i_data FROM item WHERE i_id = $1",
            &[V::I(i_id)],
        )?
        else {
            client.exec("ROLLBACK", &[])?;
            return Ok(false);
        };
        let price = item[0].float()?;
        let i_data = item[2].text()?;
        let stock = client
            .row(&stock_select, &[V::I(s_key(i_id))])?
            .ok_or("no stock")?;
        let s_quantity = stock[0].int()?;
        let _brand = i_data.contains("ORIGINAL") && stock[1].text()?.contains("ORIGINAL");
        let dist_info = stock[2].text()?.to_owned();
        let quantity = if s_quantity >= qty + 10 {
            s_quantity - qty
        } else {
            s_quantity - qty + 91
        };
        let n = client.exec(
            "UPDATE stock SET s_quantity = $1, s_ytd = s_ytd + $2, \
             s_order_cnt = s_order_cnt + 1 WHERE s_key = $3",
            &[V::I(quantity), V::I(qty), V::I(s_key(i_id))],
        )?;
        if n != 1 {
            return Err(format!("stock update changed {n} rows"));
        }
        let amount = qty as f64 * price;
        total += amount;
        client.exec(
            "INSERT INTO order_line (ol_key, ol_o_id, ol_d_id, ol_w_id, ol_number, ol_i_id, \
             ol_supply_w_id, ol_delivery_d, ol_quantity, ol_amount, ol_dist_info) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, NULL, $8, $9, $10)",
            &[
                V::I(ol_key(d, o_id, number)),
                V::I(o_id),
                V::I(d),
                V::I(W_ID),
                V::I(number),
                V::I(i_id),
                V::I(W_ID),
                V::I(qty),
                V::F(amount),
                V::T(dist_info),
            ],
        )?;
    }
    let _total = total * (1.0 - c_discount) * (1.0 + w_tax + d_tax);
    client.exec("COMMIT", &[])?;
    Ok(true)
}

/// Checks what the run left against what it committed: `committed` orders and new-order
/// rows, `lines` order lines, and each district's next order id moved past them.
pub fn verify(client: &mut dyn Client, committed: usize, lines: usize) -> Result<()> {
    let count = |client: &mut dyn Client, sql: &str| -> Result<i64> {
        client.row(sql, &[])?.ok_or("no row")?[0].int()
    };
    let orders = count(client, "SELECT COUNT(*) FROM orders")?;
    let new_orders = count(client, "SELECT COUNT(*) FROM new_order")?;
    let order_lines = count(client, "SELECT COUNT(*) FROM order_line")?;
    let next = count(client, "SELECT SUM(d_next_o_id) FROM district")?;
    let want = (
        committed as i64,
        committed as i64,
        lines as i64,
        DISTRICTS * 3001 + committed as i64,
    );
    let got = (orders, new_orders, order_lines, next);
    if got != want {
        return Err(format!(
            "after the run (orders, new orders, order lines, sum of next order ids) = {got:?}, \
             expected {want:?}"
        ));
    }
    Ok(())
}
