//! The MessagePack the sync script speaks (`cmsgpack`, the library Redis and Valkey give their
//! scripts): what the sidecar writes, and a reader of what Redis holds, which may be anything.
//!
//! Written: arrays, maps, strings (as `str`, never `bin`, which Redis's library does not read; a
//! string may hold any bytes), booleans, unsigned and small negative integers. Read: every type,
//! but only arrays, maps, strings and integers come back as values; a value that is not
//! MessagePack, is cut short, nests deeper than [`MAX_DEPTH`] or claims more items than its bytes
//! can hold is `None`, never a panic or an allocation of what it claims.

/// A value read: what the script's lists and maps hold.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Int(i64),
    Bytes(Vec<u8>),
    Array(Vec<Value>),
    /// Its keys and values, in the order written (Lua's table order: any).
    Map(Vec<(Value, Value)>),
    /// Any other type (nil, booleans, floats, extensions): never ours.
    Other,
}

/// Arrays and maps nested deeper are not read (the script's reply nests three deep).
pub const MAX_DEPTH: usize = 8;

/// Appends MessagePack to a buffer.
#[derive(Default)]
pub struct Writer {
    pub bytes: Vec<u8>,
}

impl Writer {
    pub fn array(&mut self, len: usize) -> &mut Self {
        self.head(len, (0x90, 15), None, [0xdc, 0xdd])
    }

    /// The head of a map of `len` entries: each a key, then its value, written next.
    pub fn map(&mut self, len: usize) -> &mut Self {
        self.head(len, (0x80, 15), None, [0xde, 0xdf])
    }

    pub fn bool(&mut self, value: bool) -> &mut Self {
        self.bytes.push(if value { 0xc3 } else { 0xc2 });
        self
    }

    pub fn bytes(&mut self, value: &[u8]) -> &mut Self {
        self.head(value.len(), (0xa0, 31), Some(0xd9), [0xda, 0xdb]);
        self.bytes.extend_from_slice(value);
        self
    }

    /// The head of an array, a map or a string of `len` items: the fixed marker with the length in it,
    /// up to its most; else the marker of an 8-bit length (strings have one), of a 16-bit one,
    /// or of a 32-bit one, and the length.
    fn head(&mut self, len: usize, (fixed, most): (u8, usize), by8: Option<u8>, [by16, by32]: [u8; 2]) -> &mut Self {
        match (len, by8) {
            _ if len <= most => self.bytes.push(fixed | len as u8),
            (..=0xff, Some(marker)) => self.bytes.extend_from_slice(&[marker, len as u8]),
            (..=0xffff, _) => {
                self.bytes.push(by16);
                self.bytes.extend_from_slice(&(len as u16).to_be_bytes());
            }
            _ => {
                self.bytes.push(by32);
                self.bytes.extend_from_slice(&(len as u32).to_be_bytes());
            }
        }
        self
    }

    pub fn uint(&mut self, value: u64) -> &mut Self {
        match value {
            0..=0x7f => self.bytes.push(value as u8),
            0x80..=0xff => self.bytes.extend_from_slice(&[0xcc, value as u8]),
            0x100..=0xffff => {
                self.bytes.push(0xcd);
                self.bytes.extend_from_slice(&(value as u16).to_be_bytes());
            }
            0x1_0000..=0xffff_ffff => {
                self.bytes.push(0xce);
                self.bytes.extend_from_slice(&(value as u32).to_be_bytes());
            }
            _ => {
                self.bytes.push(0xcf);
                self.bytes.extend_from_slice(&value.to_be_bytes());
            }
        }
        self
    }

    pub fn int(&mut self, value: i64) -> &mut Self {
        match value {
            0.. => self.uint(value as u64),
            -32..=-1 => {
                self.bytes.push(value as i8 as u8);
                self
            }
            _ => {
                self.bytes.push(0xd3);
                self.bytes.extend_from_slice(&value.to_be_bytes());
                self
            }
        }
    }
}

/// The one value `bytes` holds, read whole; `None` when they are not exactly one value.
pub fn read(bytes: &[u8]) -> Option<Value> {
    let mut reader = Reader { bytes, at: 0 };
    let value = reader.value(0)?;
    (reader.at == bytes.len()).then_some(value)
}

struct Reader<'b> {
    bytes: &'b [u8],
    at: usize,
}

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Option<&[u8]> {
        let end = self.at.checked_add(n)?;
        let taken = self.bytes.get(self.at..end)?;
        self.at = end;
        Some(taken)
    }

    fn uint(&mut self, n: usize) -> Option<u64> {
        Some(self.take(n)?.iter().fold(0u64, |value, &byte| value << 8 | u64::from(byte)))
    }

    fn items(&mut self, count: usize, depth: usize) -> Option<Vec<Value>> {
        // Every item takes a byte at least: a count past the bytes left is a lie.
        if count > self.bytes.len() - self.at {
            return None;
        }
        (0..count).map(|_| self.value(depth + 1)).collect()
    }

    fn entries(&mut self, count: usize, depth: usize) -> Option<Value> {
        // A key and its value take two bytes at least.
        if count.checked_mul(2)? > self.bytes.len() - self.at {
            return None;
        }
        (0..count)
            .map(|_| Some((self.value(depth + 1)?, self.value(depth + 1)?)))
            .collect::<Option<_>>()
            .map(Value::Map)
    }

    fn value(&mut self, depth: usize) -> Option<Value> {
        if depth > MAX_DEPTH {
            return None;
        }
        let marker = *self.take(1)?.first()?;
        let bytes = |reader: &mut Self, n: usize| reader.take(n).map(|b| Value::Bytes(b.to_vec()));
        match marker {
            0x00..=0x7f => Some(Value::Int(i64::from(marker))),
            0x80..=0x8f => self.entries(usize::from(marker & 0x0f), depth),
            0x90..=0x9f => self.items(usize::from(marker & 0x0f), depth).map(Value::Array),
            0xa0..=0xbf => bytes(self, usize::from(marker & 0x1f)),
            0xc0 | 0xc2 | 0xc3 => Some(Value::Other),
            0xc1 => None,
            0xc4 | 0xd9 => {
                let n = self.uint(1)? as usize;
                bytes(self, n)
            }
            0xc5 | 0xda => {
                let n = self.uint(2)? as usize;
                bytes(self, n)
            }
            0xc6 | 0xdb => {
                let n = self.uint(4)? as usize;
                bytes(self, n)
            }
            0xc7..=0xc9 => {
                let n = self.uint([1, 2, 4][usize::from(marker - 0xc7)])? as usize;
                self.take(n.checked_add(1)?).map(|_| Value::Other)
            }
            0xca => self.take(4).map(|_| Value::Other),
            0xcb => self.take(8).map(|_| Value::Other),
            0xcc..=0xcf => {
                let value = self.uint(1 << (marker - 0xcc))?;
                Some(i64::try_from(value).map_or(Value::Other, Value::Int))
            }
            0xd0..=0xd3 => {
                let n = 1 << (marker - 0xd0);
                let value = self.uint(n)?;
                let shift = 64 - 8 * n as u32;
                Some(Value::Int(((value << shift) as i64) >> shift))
            }
            0xd4..=0xd8 => self.take(1 + (1 << (marker - 0xd4))).map(|_| Value::Other),
            0xdc => {
                let n = self.uint(2)? as usize;
                self.items(n, depth).map(Value::Array)
            }
            0xdd => {
                let n = self.uint(4)? as usize;
                self.items(n, depth).map(Value::Array)
            }
            0xde => {
                let n = self.uint(2)? as usize;
                self.entries(n, depth)
            }
            0xdf => {
                let n = self.uint(4)? as usize;
                self.entries(n, depth)
            }
            0xe0..=0xff => Some(Value::Int(i64::from(marker as i8))),
        }
    }
}

/// A bucket's rows: `service, successes, failures, rejections`, as the script keeps them.
pub type Rows = Vec<(Vec<u8>, [u64; 3])>;

/// The rows packed, as the script reads them.
pub fn pack_rows(rows: &Rows) -> Vec<u8> {
    let mut writer = Writer::default();
    writer.array(rows.len() * 4);
    for (service, counts) in rows {
        writer.bytes(service);
        for &count in counts {
            writer.uint(count);
        }
    }
    writer.bytes
}

/// The rows a packed value holds: rows of a service and three counts from 0 to `max`; other
/// rows are left out and counted. `None` when it is not a list of rows at all.
pub fn unpack_rows(bytes: &[u8], max: u64) -> Option<(Rows, u64)> {
    let count = |value: &Value| match value {
        Value::Int(n) => u64::try_from(*n).ok().filter(|&n| n <= max),
        _ => None,
    };
    unpack_records(bytes, 4, |row| match (&row[0], count(&row[1]), count(&row[2]), count(&row[3])) {
        (Value::Bytes(service), Some(s), Some(f), Some(r)) => Some((service.clone(), [s, f, r])),
        _ => None,
    })
}

/// The fleet's resets a packed value holds: `service, time` (unix milliseconds, Redis's clock), as
/// the script keeps them; other records are left out and counted. `None` when it is not such a
/// list at all.
pub fn unpack_resets(bytes: &[u8]) -> Option<(Vec<(Vec<u8>, u64)>, u64)> {
    unpack_records(bytes, 2, |record| match (&record[0], &record[1]) {
        (Value::Bytes(service), &Value::Int(time)) => Some((service.clone(), u64::try_from(time).ok()?)),
        _ => None,
    })
}

/// The records of a packed flat list, `stride` items to a record: those `record` makes
/// something of, and how many it did not. `None` when it is not a flat list of that stride.
fn unpack_records<T>(bytes: &[u8], stride: usize, record: impl Fn(&[Value]) -> Option<T>) -> Option<(Vec<T>, u64)> {
    let Value::Array(items) = read(bytes)? else { return None };
    if items.len() % stride != 0 {
        return None;
    }
    let mut records = Vec::with_capacity(items.len() / stride);
    let mut skipped = 0;
    for items in items.chunks_exact(stride) {
        match record(items) {
            Some(made) => records.push(made),
            None => skipped += 1,
        }
    }
    Some((records, skipped))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_is_written_reads_back() {
        let mut writer = Writer::default();
        writer.array(6).uint(0).uint(200).uint(70_000).uint(5_000_000_000).int(-1).bytes(&[b'x'; 300]);
        assert_eq!(
            read(&writer.bytes),
            Some(Value::Array(vec![
                Value::Int(0),
                Value::Int(200),
                Value::Int(70_000),
                Value::Int(5_000_000_000),
                Value::Int(-1),
                Value::Bytes(vec![b'x'; 300]),
            ]))
        );
        let rows: Rows = vec![(b"a".to_vec(), [1, 2, 3]), (vec![0xff; 40], [0, 268_435_455, 0])];
        assert_eq!(unpack_rows(&pack_rows(&rows), 268_435_455), Some((rows, 0)));
    }

    #[test]
    fn each_length_takes_the_smallest_head() {
        let head = |write: &dyn Fn(&mut Writer) -> &mut Writer| {
            let mut writer = Writer::default();
            write(&mut writer);
            writer.bytes[..writer.bytes.len().min(5)].to_vec()
        };
        assert_eq!(head(&|w| w.array(15)), [0x9f]);
        assert_eq!(head(&|w| w.array(16)), [0xdc, 0, 16]);
        assert_eq!(head(&|w| w.array(70_000)), [0xdd, 0, 1, 0x11, 0x70]);
        assert_eq!(head(&|w| w.map(15)), [0x8f]);
        assert_eq!(head(&|w| w.map(16)), [0xde, 0, 16]);
        assert_eq!(head(&|w| w.map(70_000)), [0xdf, 0, 1, 0x11, 0x70]);
        assert_eq!(head(&|w| w.bytes(&[b'a'; 31])), [0xbf, b'a', b'a', b'a', b'a']);
        assert_eq!(head(&|w| w.bytes(&[b'a'; 32])), [0xd9, 32, b'a', b'a', b'a']);
        assert_eq!(head(&|w| w.bytes(&[b'a'; 256])), [0xda, 1, 0, b'a', b'a']);
        assert_eq!(head(&|w| w.bytes(&vec![b'a'; 70_000])), [0xdb, 0, 1, 0x11, 0x70]);
    }

    #[test]
    fn what_redis_library_writes_reads() {
        // cmsgpack writes a 40-byte string as raw 16 (0xda), and 1.5 as a double.
        let mut bytes = vec![0x93, 0xda, 0, 40];
        bytes.extend_from_slice(&[b'y'; 40]);
        bytes.extend_from_slice(&[0xcd, 1, 0, 0xcb, 0x3f, 0xf8, 0, 0, 0, 0, 0, 0]);
        assert_eq!(read(&bytes), Some(Value::Array(vec![Value::Bytes(vec![b'y'; 40]), Value::Int(256), Value::Other])));
    }

    #[test]
    fn rows_that_are_not_counts_are_left_out_and_counted() {
        let mut writer = Writer::default();
        writer.array(12).bytes(b"fine").uint(1).uint(2).uint(3);
        writer.bytes(b"huge").uint(1 << 40).uint(0).uint(0);
        writer.bytes(b"negative").int(-5).uint(0).uint(0);
        assert_eq!(unpack_rows(&writer.bytes, 268_435_455), Some((vec![(b"fine".to_vec(), [1, 2, 3])], 2)));
        let mut odd = Writer::default();
        odd.array(3).bytes(b"a").uint(1).uint(2);
        assert_eq!(unpack_rows(&odd.bytes, 100), None);
    }

    #[test]
    fn anything_else_is_none_and_costs_only_its_bytes() {
        for bad in [
            &b""[..],
            &[0x91],                         // an array of one, cut short
            &[0xdd, 0xff, 0xff, 0xff, 0xff], // an array claiming 4 billion items
            &[0xdb, 0xff, 0xff, 0xff, 0xff, b'a'],
            &[0xdf, 0xff, 0xff, 0xff, 0xff],
            &[0x01, 0x02], // two values
            &[0xc1],       // never used
        ] {
            assert_eq!(read(bad), None, "{bad:?}");
        }
        let deep = [vec![0x91; MAX_DEPTH + 2], vec![0x01]].concat();
        assert_eq!(read(&deep), None);
        let deep_maps = [[0x81, 0x01].repeat(MAX_DEPTH + 2), vec![0x01]].concat();
        assert_eq!(read(&deep_maps), None);
    }

    #[test]
    fn a_map_reads_back_as_its_entries() {
        let mut writer = Writer::default();
        writer.map(3).bytes(b"name").bytes(b"x").bytes(b"on").bool(true).bytes(b"list").array(1).int(-3);
        assert_eq!(
            read(&writer.bytes),
            Some(Value::Map(vec![
                (Value::Bytes(b"name".to_vec()), Value::Bytes(b"x".to_vec())),
                (Value::Bytes(b"on".to_vec()), Value::Other),
                (Value::Bytes(b"list".to_vec()), Value::Array(vec![Value::Int(-3)])),
            ]))
        );
        // Past 15 entries, a 16-bit count (0xde); past 65,535, a 32-bit one (0xdf).
        for len in [15, 16, 70_000] {
            let mut writer = Writer::default();
            writer.map(len);
            for key in 0..len {
                writer.uint(key as u64).bool(false);
            }
            let Some(Value::Map(entries)) = read(&writer.bytes) else { panic!("a map of {len}") };
            assert_eq!(entries.len(), len);
            assert_eq!(entries[len - 1], (Value::Int(len as i64 - 1), Value::Other));
        }
        // As cmsgpack writes an empty Lua table: an empty array, whatever the table was for.
        assert_eq!(read(&[0x90]), Some(Value::Array(Vec::new())));
        assert_eq!(read(&[0x80]), Some(Value::Map(Vec::new())));
    }

    #[test]
    fn a_map_that_lies_is_none_and_costs_only_its_bytes() {
        for bad in [
            &[0x81, 0x01][..],                  // a key without its value
            &[0x82, 0x01, 0x02, 0x03],          // two entries claimed, one and a half there
            &[0xde, 0xff, 0xff, 0x01, 0x02],    // 65,535 entries claimed
            &[0xdf, 0x80, 0, 0, 0, 0x01, 0x02], // 2 billion entries claimed
            &[0xde, 0x00],                      // a count cut short
            &[0x81, 0xc1, 0x01],                // a key that is no value
            &[0x81, 0x01, 0x02, 0x03],          // a value after the map
        ] {
            assert_eq!(read(bad), None, "{bad:?}");
        }
    }
}
