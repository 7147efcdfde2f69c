//! Text helpers shared by the pictures: XML escaping, number formatting, and
//! taking a `plotters` SVG document apart so layers can be stacked.

/// `s` with the five XML special characters escaped (text and attributes).
pub(crate) fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c => out.push(c),
        }
    }
    out
}

/// `v` with at most `decimals` decimals and no trailing zeros (`1.50` → `1.5`).
pub(crate) fn trim_number(v: f64, decimals: usize) -> String {
    let s = format!("{v:.decimals$}");
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

/// A byte unit fitting values up to some maximum: its name and size.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct ByteUnit {
    pub name: &'static str,
    pub bytes: f64,
}

impl ByteUnit {
    /// The largest binary unit not above `max` (bytes below 1 KiB).
    pub fn for_max(max: f64) -> ByteUnit {
        const UNITS: [(&str, f64); 5] = [
            ("TiB", (1u64 << 40) as f64),
            ("GiB", (1u64 << 30) as f64),
            ("MiB", (1u64 << 20) as f64),
            ("KiB", 1024.0),
            ("B", 1.0),
        ];
        let (name, bytes) = UNITS
            .iter()
            .copied()
            .find(|&(_, b)| max >= b)
            .unwrap_or(("B", 1.0));
        ByteUnit { name, bytes }
    }

    /// `v` bytes in this unit, up to three decimals.
    pub fn format(self, v: f64) -> String {
        format!("{} {}", trim_number(v / self.bytes, 3), self.name)
    }
}

/// `v` bytes in the unit that suits it (`1.5 MiB`).
pub(crate) fn human_bytes(v: f64) -> String {
    ByteUnit::for_max(v).format(v)
}

/// The root element's opening tag and the body of an SVG document made by
/// `plotters` (everything between `<svg ...>` and the last `</svg>`).
pub(crate) fn split_svg(doc: &str) -> (&str, &str) {
    let start = doc.find("<svg").unwrap_or(0);
    let open_end = doc[start..].find('>').map_or(doc.len(), |k| start + k + 1);
    let close = doc.rfind("</svg>").unwrap_or(doc.len()).max(open_end);
    (&doc[start..open_end], &doc[open_end..close])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_every_special_character() {
        assert_eq!(escape(r#"a<b>&"c'"#), "a&lt;b&gt;&amp;&quot;c&apos;");
    }

    #[test]
    fn numbers_and_units_read_short() {
        assert_eq!(trim_number(1.50, 2), "1.5");
        assert_eq!(trim_number(2.0, 3), "2");
        assert_eq!(trim_number(120.0, 0), "120");
        assert_eq!(human_bytes(1048576.0), "1 MiB");
        assert_eq!(human_bytes(786432.0), "768 KiB");
        assert_eq!(human_bytes(100.0), "100 B");
        assert_eq!(ByteUnit::for_max(3.0 * (1u64 << 30) as f64).name, "GiB");
    }

    #[test]
    fn splits_a_document_into_root_tag_and_body() {
        let (open, body) = split_svg("<svg a=\"1\">\n<rect/>\n</svg>\n");
        assert_eq!(open, "<svg a=\"1\">");
        assert_eq!(body, "\n<rect/>\n");
    }
}
