//! A small, strict JSON reader and writer for safetensors headers.
//!
//! The reader is driven by the caller's schema (objects of known fields),
//! works on a `&str` that is already valid UTF-8, never indexes out of
//! bounds, bounds its nesting depth when skipping unknown values, and turns
//! every deviation into a [`ForgeError::Format`] naming the byte offset.

use crate::error::{ForgeError, Result};

/// Deepest nesting accepted when skipping a value of an unknown field.
const MAX_DEPTH: usize = 64;

/// A cursor over a JSON text.
pub(crate) struct Parser<'a> {
    s: &'a [u8],
    pos: usize,
}

impl<'a> Parser<'a> {
    pub(crate) fn new(text: &'a str) -> Self {
        Parser {
            s: text.as_bytes(),
            pos: 0,
        }
    }

    /// A format error at the current position.
    pub(crate) fn err(&self, msg: impl std::fmt::Display) -> ForgeError {
        ForgeError::Format(format!("safetensors header: {msg} (at byte {})", self.pos))
    }

    fn ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.s.get(self.pos) {
            self.pos += 1;
        }
    }

    fn peek(&mut self) -> Option<u8> {
        self.ws();
        self.s.get(self.pos).copied()
    }

    fn bump(&mut self) -> Option<u8> {
        let c = self.s.get(self.pos).copied();
        if c.is_some() {
            self.pos += 1;
        }
        c
    }

    fn expect(&mut self, c: u8) -> Result<()> {
        match self.peek() {
            Some(x) if x == c => {
                self.pos += 1;
                Ok(())
            }
            Some(x) => Err(self.err(format!(
                "expected '{}', found '{}'",
                c as char,
                (x as char).escape_default()
            ))),
            None => Err(self.err(format!("expected '{}', found the end", c as char))),
        }
    }

    /// Succeeds when only whitespace remains.
    pub(crate) fn end(&mut self) -> Result<()> {
        match self.peek() {
            None => Ok(()),
            Some(_) => Err(self.err("unexpected bytes after the header object")),
        }
    }

    /// Whether the next value is a string (without consuming it).
    pub(crate) fn at_string(&mut self) -> bool {
        self.peek() == Some(b'"')
    }

    /// A JSON string.
    pub(crate) fn string(&mut self) -> Result<String> {
        self.expect(b'"')?;
        let mut out: Vec<u8> = Vec::new();
        loop {
            let c = self.bump().ok_or_else(|| self.err("unterminated string"))?;
            match c {
                b'"' => break,
                b'\\' => {
                    let e = self.bump().ok_or_else(|| self.err("unterminated escape"))?;
                    let ch = match e {
                        b'"' => '"',
                        b'\\' => '\\',
                        b'/' => '/',
                        b'b' => '\u{8}',
                        b'f' => '\u{c}',
                        b'n' => '\n',
                        b'r' => '\r',
                        b't' => '\t',
                        b'u' => self.unicode_escape()?,
                        _ => return Err(self.err("invalid escape")),
                    };
                    let mut buf = [0u8; 4];
                    out.extend_from_slice(ch.encode_utf8(&mut buf).as_bytes());
                }
                0..=0x1f => return Err(self.err("control character in a string")),
                _ => out.push(c),
            }
        }
        // The input is valid UTF-8, we split it only at ASCII bytes, and
        // escapes push whole characters: this cannot fail, but stay total.
        String::from_utf8(out).map_err(|_| self.err("invalid UTF-8 in a string"))
    }

    fn hex4(&mut self) -> Result<u32> {
        let mut v = 0u32;
        for _ in 0..4 {
            let c = self.bump().ok_or_else(|| self.err("short \\u escape"))?;
            let d = (c as char)
                .to_digit(16)
                .ok_or_else(|| self.err("invalid \\u escape"))?;
            v = v * 16 + d;
        }
        Ok(v)
    }

    fn unicode_escape(&mut self) -> Result<char> {
        let hi = self.hex4()?;
        let code = match hi {
            0xD800..=0xDBFF => {
                if self.bump() != Some(b'\\') || self.bump() != Some(b'u') {
                    return Err(self.err("unpaired surrogate in \\u escape"));
                }
                let lo = self.hex4()?;
                if !(0xDC00..=0xDFFF).contains(&lo) {
                    return Err(self.err("unpaired surrogate in \\u escape"));
                }
                0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00)
            }
            0xDC00..=0xDFFF => return Err(self.err("unpaired surrogate in \\u escape")),
            _ => hi,
        };
        char::from_u32(code).ok_or_else(|| self.err("invalid \\u escape"))
    }

    /// A non-negative integer (no sign, fraction or exponent) that fits u64.
    pub(crate) fn uint(&mut self) -> Result<u64> {
        self.ws();
        let start = self.pos;
        let mut v: u64 = 0;
        while let Some(c @ b'0'..=b'9') = self.s.get(self.pos).copied() {
            v = v
                .checked_mul(10)
                .and_then(|v| v.checked_add(u64::from(c - b'0')))
                .ok_or_else(|| self.err("integer too large"))?;
            self.pos += 1;
        }
        let len = self.pos - start;
        if len == 0 {
            return Err(self.err("expected a non-negative integer"));
        }
        if len > 1 && self.s[start] == b'0' {
            return Err(self.err("integer with a leading zero"));
        }
        if let Some(b'.' | b'e' | b'E') = self.s.get(self.pos) {
            return Err(self.err("expected an integer, found a fraction or exponent"));
        }
        Ok(v)
    }

    /// `{ "key": value, ... }`, calling `field(self, key)` to parse each
    /// value.
    pub(crate) fn object(
        &mut self,
        mut field: impl FnMut(&mut Self, String) -> Result<()>,
    ) -> Result<()> {
        self.expect(b'{')?;
        if self.peek() == Some(b'}') {
            self.pos += 1;
            return Ok(());
        }
        loop {
            let key = self.string()?;
            self.expect(b':')?;
            field(self, key)?;
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b'}') => {
                    self.pos += 1;
                    return Ok(());
                }
                _ => return Err(self.err("expected ',' or '}' in an object")),
            }
        }
    }

    /// `[ value, ... ]`, calling `item(self)` to parse each value.
    pub(crate) fn array(&mut self, mut item: impl FnMut(&mut Self) -> Result<()>) -> Result<()> {
        self.expect(b'[')?;
        if self.peek() == Some(b']') {
            self.pos += 1;
            return Ok(());
        }
        loop {
            item(self)?;
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b']') => {
                    self.pos += 1;
                    return Ok(());
                }
                _ => return Err(self.err("expected ',' or ']' in an array")),
            }
        }
    }

    /// Parses and discards any JSON value (for fields forge does not use).
    pub(crate) fn skip_value(&mut self, depth: usize) -> Result<()> {
        if depth > MAX_DEPTH {
            return Err(self.err("nesting too deep"));
        }
        match self.peek() {
            Some(b'{') => self.object(|p, _| p.skip_value(depth + 1)),
            Some(b'[') => self.array(|p| p.skip_value(depth + 1)),
            Some(b'"') => self.string().map(drop),
            Some(b't') => self.literal("true"),
            Some(b'f') => self.literal("false"),
            Some(b'n') => self.literal("null"),
            Some(b'-' | b'0'..=b'9') => self.number(),
            _ => Err(self.err("expected a JSON value")),
        }
    }

    fn literal(&mut self, word: &str) -> Result<()> {
        let end = self.pos + word.len();
        if self.s.get(self.pos..end) == Some(word.as_bytes()) {
            self.pos = end;
            Ok(())
        } else {
            Err(self.err("invalid literal"))
        }
    }

    fn digits(&mut self) -> usize {
        let start = self.pos;
        while let Some(b'0'..=b'9') = self.s.get(self.pos) {
            self.pos += 1;
        }
        self.pos - start
    }

    /// Any JSON number: `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`.
    fn number(&mut self) -> Result<()> {
        if self.s.get(self.pos) == Some(&b'-') {
            self.pos += 1;
        }
        let start = self.pos;
        let n = self.digits();
        if n == 0 || (n > 1 && self.s[start] == b'0') {
            return Err(self.err("invalid number"));
        }
        if self.s.get(self.pos) == Some(&b'.') {
            self.pos += 1;
            if self.digits() == 0 {
                return Err(self.err("invalid number"));
            }
        }
        if let Some(b'e' | b'E') = self.s.get(self.pos) {
            self.pos += 1;
            if let Some(b'+' | b'-') = self.s.get(self.pos) {
                self.pos += 1;
            }
            if self.digits() == 0 {
                return Err(self.err("invalid number"));
            }
        }
        Ok(())
    }
}

/// Appends `s` as a JSON string literal.
pub(crate) fn write_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_str(s: &str) -> Result<String> {
        let mut p = Parser::new(s);
        let v = p.string()?;
        p.end()?;
        Ok(v)
    }

    #[test]
    fn strings_round_trip_through_the_writer() {
        for s in [
            "",
            "a",
            "é\u{1F600}",
            "q\"b\\s/\n\r\t\u{1}\u{1f}",
            "__metadata__",
        ] {
            let mut out = String::new();
            write_string(&mut out, s);
            assert_eq!(parse_str(&out).unwrap(), s);
        }
        assert_eq!(parse_str(r#""\ud83d\ude00\/""#).unwrap(), "\u{1F600}/");
    }

    #[test]
    fn bad_strings_are_errors() {
        for s in [
            r#""abc"#,
            r#""\x""#,
            r#""\ud83d""#,
            r#""\ude00""#,
            r#""\u12""#,
            "\"a\u{1}\"",
            r#""a" x"#,
        ] {
            assert!(parse_str(s).is_err(), "{s:?}");
        }
    }

    #[test]
    fn integers_are_strict() {
        let u = |s: &str| Parser::new(s).uint();
        assert_eq!(u("0").unwrap(), 0);
        assert_eq!(u("18446744073709551615").unwrap(), u64::MAX);
        for s in ["18446744073709551616", "01", "-1", "1.0", "1e3", "", "x"] {
            assert!(u(s).is_err(), "{s:?}");
        }
    }

    #[test]
    fn skip_accepts_json_and_bounds_depth() {
        let mut p = Parser::new(r#"{"a":[1,-2.5e-3,true,false,null,{"b":"c"}],"d":{}}"#);
        p.skip_value(0).unwrap();
        p.end().unwrap();
        let deep = "[".repeat(100) + &"]".repeat(100);
        assert!(Parser::new(&deep).skip_value(0).is_err());
        for s in ["[1,]", "{\"a\" 1}", "-", "1.", "tru", "01", "[1 2]"] {
            let mut p = Parser::new(s);
            assert!(p.skip_value(0).and_then(|_| p.end()).is_err(), "{s:?}");
        }
    }
}
