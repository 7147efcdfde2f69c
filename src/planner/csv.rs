//! MiniMalloc's CSV format: `id,lower,upper,size[,offset]`, one buffer a
//! line, half-open ranges, an optional header line naming the columns.

use std::fmt;

use super::interval::Buffer;

/// A parsed CSV instance: ids as written, buffers, and offsets when the file
/// carried an `offset` column (a solution).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CsvInstance {
    /// The `id` column, as written.
    pub ids: Vec<String>,
    /// The buffers, in file order.
    pub buffers: Vec<Buffer>,
    /// The `offset` column, when present.
    pub offsets: Option<Vec<usize>>,
}

/// A malformed CSV line.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct CsvError {
    /// 1-based line number.
    pub line: usize,
    /// What is wrong with it.
    pub message: String,
}

impl fmt::Display for CsvError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: {}", self.line, self.message)
    }
}

impl std::error::Error for CsvError {}

/// Parses MiniMalloc's CSV. Columns are found by the header's names when
/// there is one (`id`, `lower`, `upper`, `size`, optional `offset`; `begin`
/// and `end` are accepted for `lower` and `upper`), else taken in that order.
///
/// ```
/// use warmarena::planner::{parse_csv, Buffer};
/// let inst = parse_csv("id,lower,upper,size\nx,0,4,16\ny,2,6,8\n").unwrap();
/// assert_eq!(inst.buffers, vec![Buffer::new(0, 4, 16), Buffer::new(2, 6, 8)]);
/// assert!(parse_csv("id,lower,upper,size\nx,0,4\n").is_err());
/// ```
pub fn parse_csv(text: &str) -> Result<CsvInstance, CsvError> {
    let mut cols: [Option<usize>; 5] = [Some(0), Some(1), Some(2), Some(3), None];
    let mut width = 4;
    // One row a line, less the header: reserved once, not grown by copies.
    let lines = text.bytes().filter(|&c| c == b'\n').count() + 1;
    let mut inst = CsvInstance {
        ids: Vec::with_capacity(lines),
        buffers: Vec::with_capacity(lines),
        offsets: None,
    };
    let mut offsets = Vec::new();
    let mut first = true;
    // Lines as `str::lines` cuts them (its `\r` is trimmed with the rest)
    // and their fields, in one scan of the bytes.
    let bytes = text.as_bytes();
    let (mut at, mut next_line) = (0, 0);
    while at < bytes.len() {
        let n = next_line;
        next_line += 1;
        let begin = at;
        // Fields of the line, without an allocation for the usual widths.
        let mut small = [""; 8];
        let mut more: Vec<&str> = Vec::new();
        let mut count = 0;
        let mut push = |a: usize, b: usize| {
            let f = text[a..b].trim_ascii();
            if count < small.len() {
                small[count] = f;
            } else {
                if more.is_empty() {
                    more.extend_from_slice(&small);
                }
                more.push(f);
            }
            count += 1;
        };
        let mut from = at;
        while at < bytes.len() && bytes[at] != b'\n' {
            if bytes[at] == b',' {
                push(from, at);
                from = at + 1;
            }
            at += 1;
        }
        push(from, at);
        let line = text[begin..at].trim_ascii();
        at += 1;
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let fields: &[&str] = if count <= small.len() {
            &small[..count]
        } else {
            &more
        };
        let err = |message: String| CsvError {
            line: n + 1,
            message,
        };
        if std::mem::take(&mut first) && fields.iter().skip(1).any(|f| f.parse::<usize>().is_err())
        {
            cols = [None; 5];
            for (k, name) in fields.iter().enumerate() {
                let slot = match name.to_ascii_lowercase().as_str() {
                    "id" => 0,
                    "lower" | "begin" | "start" => 1,
                    "upper" | "end" => 2,
                    "size" => 3,
                    "offset" => 4,
                    _ => continue,
                };
                cols[slot] = Some(k);
            }
            if cols[..4].iter().any(Option::is_none) {
                return Err(err("header needs id, lower, upper and size columns".into()));
            }
            width = fields.len();
            continue;
        }
        if fields.len() < width {
            return Err(err(format!(
                "expected {width} fields, found {}",
                fields.len()
            )));
        }
        let num = |slot: usize, what: &str| -> Result<usize, CsvError> {
            let k = cols[slot].unwrap_or(slot);
            number(fields[k]).ok_or_else(|| {
                err(format!(
                    "{what} `{}` is not a non-negative integer",
                    fields[k]
                ))
            })
        };
        let (lower, upper, size) = (num(1, "lower")?, num(2, "upper")?, num(3, "size")?);
        if upper < lower {
            return Err(err(format!("upper {upper} is below lower {lower}")));
        }
        if cols[4].is_some() {
            offsets.push(num(4, "offset")?);
        }
        inst.ids.push(fields[cols[0].unwrap_or(0)].to_string());
        inst.buffers.push(Buffer::new(lower, upper, size));
    }
    if cols[4].is_some() {
        inst.offsets = Some(offsets);
    }
    Ok(inst)
}

/// `s` as a non-negative integer, exactly as `str::parse::<usize>` reads
/// it: plain digits that cannot overflow are read here, anything else
/// (a sign, more digits, an error) by the standard parser.
fn number(s: &str) -> Option<usize> {
    const SAFE_DIGITS: usize = usize::MAX.ilog10() as usize;
    let b = s.as_bytes();
    if b.is_empty() || b.len() > SAFE_DIGITS {
        return s.parse().ok();
    }
    let mut v = 0usize;
    for &c in b {
        let d = c.wrapping_sub(b'0');
        if d > 9 {
            return s.parse().ok();
        }
        v = v * 10 + usize::from(d);
    }
    Some(v)
}

/// Writes a solution in MiniMalloc's CSV with an `offset` column.
///
/// ```
/// use warmarena::planner::{write_csv, Buffer};
/// let text = write_csv(&["a".to_string()], &[Buffer::new(0, 2, 8)], &[16]);
/// assert_eq!(text, "id,lower,upper,size,offset\na,0,2,8,16\n");
/// ```
///
/// An id that starts with `#` would make its line read back as a comment
/// (the reader skips such lines), so when any id does, the id column is
/// written last instead; the reader finds columns by the header's names.
///
/// ```
/// use warmarena::planner::{parse_csv, write_csv, Buffer};
/// let text = write_csv(&["#1".to_string()], &[Buffer::new(0, 2, 8)], &[0]);
/// assert_eq!(text, "lower,upper,size,offset,id\n0,2,8,0,#1\n");
/// assert_eq!(parse_csv(&text).unwrap().ids, ["#1"]);
/// ```
pub fn write_csv(ids: &[String], buffers: &[Buffer], offsets: &[usize]) -> String {
    let id_last = ids.iter().any(|id| id.starts_with('#'));
    let mut out = String::from(if id_last {
        "lower,upper,size,offset,id\n"
    } else {
        "id,lower,upper,size,offset\n"
    });
    for ((id, b), o) in ids.iter().zip(buffers).zip(offsets) {
        let (l, u, s) = (b.lower, b.upper, b.size);
        out.push_str(&if id_last {
            format!("{l},{u},{s},{o},{id}\n")
        } else {
            format!("{id},{l},{u},{s},{o}\n")
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_offsets_and_reordered_columns() {
        let inst = parse_csv("size,id,upper,lower,offset\n8,a,3,1,0\n").unwrap();
        assert_eq!(inst.buffers, vec![Buffer::new(1, 3, 8)]);
        assert_eq!(inst.offsets, Some(vec![0]));
        assert_eq!(inst.ids, vec!["a"]);
    }

    #[test]
    fn headerless_and_bad_lines() {
        assert_eq!(
            parse_csv("0,1,2,3").unwrap().buffers,
            vec![Buffer::new(1, 2, 3)]
        );
        assert!(parse_csv("0,1,2,x").is_err());
        assert!(parse_csv("0,5,2,3").is_err());
        assert!(parse_csv("id,lower,upper\n").is_err());
        assert!(parse_csv("id,lower,upper,size\n0,1,2,-3").is_err());
    }

    #[test]
    fn numbers_read_as_the_standard_parser_reads_them() {
        for s in [
            "0",
            "7",
            "+7",
            "-7",
            "",
            " 1",
            "1 ",
            "12a",
            "007",
            "9999999999999999999",
            "18446744073709551615",
            "18446744073709551616",
            "99999999999999999999",
            "\u{661}",
        ] {
            assert_eq!(number(s), s.parse::<usize>().ok(), "{s:?}");
        }
    }

    #[test]
    fn crlf_comments_blank_lines_and_line_numbers() {
        let inst =
            parse_csv("id,lower,upper,size\r\n# note\r\n\r\na , 0 ,2, 8\r\nb,1,3,8").unwrap();
        assert_eq!(inst.ids, ["a", "b"]);
        assert_eq!(inst.buffers[1], Buffer::new(1, 3, 8));
        let err = parse_csv("id,lower,upper,size\n\n# c\nx,1,2,3\ny,1,2,q\n").unwrap_err();
        assert_eq!(err.line, 5);
        assert!(parse_csv("id,lower,upper,size\nx,1,2,3,4,5,6,7,8,9\n").is_ok());
    }
}
