//! The training curve as CSV and as a small PNG line chart, drawn into an
//! RGB buffer with a 5x7 bitmap font and compressed with flate2 (no
//! plotting crate).

use flate2::write::ZlibEncoder;
use flate2::Compression;
use std::io::Write;
use std::path::Path;

/// One row of the curve.
#[derive(Clone, Copy, Debug)]
pub struct EpochStats {
    pub epoch: usize,
    pub train_loss: f64,
    pub train_accuracy: f64,
    pub test_accuracy: f64,
    pub seconds: f64,
}

/// Writes `epoch,train_loss,train_accuracy,test_accuracy,seconds`.
pub fn write_csv(path: &Path, rows: &[EpochStats]) -> std::io::Result<()> {
    let mut s = String::from("epoch,train_loss,train_accuracy,test_accuracy,seconds\n");
    for r in rows {
        s += &format!(
            "{},{:.6},{:.6},{:.6},{:.3}\n",
            r.epoch, r.train_loss, r.train_accuracy, r.test_accuracy, r.seconds
        );
    }
    std::fs::write(path, s)
}

const W: usize = 820;
const H: usize = 360;
const BLUE: [u8; 3] = [31, 119, 180];
const RED: [u8; 3] = [214, 39, 40];
const GREY: [u8; 3] = [90, 90, 90];
const LIGHT: [u8; 3] = [225, 225, 225];

struct Canvas {
    px: Vec<u8>,
}

impl Canvas {
    fn new() -> Self {
        Canvas {
            px: vec![255; W * H * 3],
        }
    }

    fn set(&mut self, x: i64, y: i64, c: [u8; 3]) {
        if (0..W as i64).contains(&x) && (0..H as i64).contains(&y) {
            let i = (y as usize * W + x as usize) * 3;
            self.px[i..i + 3].copy_from_slice(&c);
        }
    }

    fn line(&mut self, (x0, y0): (f64, f64), (x1, y1): (f64, f64), c: [u8; 3], thick: i64) {
        let steps = ((x1 - x0).abs().max((y1 - y0).abs()).ceil() as usize).max(1);
        for s in 0..=steps {
            let t = s as f64 / steps as f64;
            let (x, y) = (x0 + t * (x1 - x0), y0 + t * (y1 - y0));
            for dx in 0..thick {
                for dy in 0..thick {
                    self.set(x.round() as i64 + dx, y.round() as i64 + dy, c);
                }
            }
        }
    }

    fn text(&mut self, x: i64, y: i64, s: &str, c: [u8; 3]) {
        for (k, ch) in s.chars().enumerate() {
            let rows = glyph(ch);
            for (r, bits) in rows.iter().enumerate() {
                for col in 0..5 {
                    if bits >> (4 - col) & 1 == 1 {
                        for d in 0..4 {
                            // 2x scale
                            self.set(
                                x + k as i64 * 12 + col * 2 + d % 2,
                                y + r as i64 * 2 + d / 2,
                                c,
                            );
                        }
                    }
                }
            }
        }
    }

    fn png(&self) -> Vec<u8> {
        let mut raw = Vec::with_capacity(H * (W * 3 + 1));
        for row in self.px.chunks(W * 3) {
            raw.push(0); // filter: none
            raw.extend_from_slice(row);
        }
        let mut z = ZlibEncoder::new(Vec::new(), Compression::default());
        z.write_all(&raw).expect("writing to memory");
        let idat = z.finish().expect("writing to memory");
        let mut ihdr = Vec::new();
        ihdr.extend_from_slice(&(W as u32).to_be_bytes());
        ihdr.extend_from_slice(&(H as u32).to_be_bytes());
        ihdr.extend_from_slice(&[8, 2, 0, 0, 0]); // 8-bit RGB
        let mut out = vec![0x89, b'P', b'N', b'G', 0x0d, 0x0a, 0x1a, 0x0a];
        for (kind, data) in [(b"IHDR", &ihdr), (b"IDAT", &idat), (b"IEND", &Vec::new())] {
            out.extend_from_slice(&(data.len() as u32).to_be_bytes());
            let start = out.len();
            out.extend_from_slice(kind);
            out.extend_from_slice(data);
            let crc = crc32(&out[start..]);
            out.extend_from_slice(&crc.to_be_bytes());
        }
        out
    }
}

fn crc32(bytes: &[u8]) -> u32 {
    let mut c = 0xffff_ffffu32;
    for &b in bytes {
        c ^= b as u32;
        for _ in 0..8 {
            c = if c & 1 == 1 {
                0xedb8_8320 ^ (c >> 1)
            } else {
                c >> 1
            };
        }
    }
    !c
}

/// 5x7 glyphs for the characters the chart uses (others draw blank).
fn glyph(ch: char) -> [u8; 7] {
    match ch {
        '0' => [14, 17, 19, 21, 25, 17, 14],
        '1' => [4, 12, 4, 4, 4, 4, 14],
        '2' => [14, 17, 1, 2, 4, 8, 31],
        '3' => [30, 1, 1, 14, 1, 1, 30],
        '4' => [2, 6, 10, 18, 31, 2, 2],
        '5' => [31, 16, 30, 1, 1, 17, 14],
        '6' => [6, 8, 16, 30, 17, 17, 14],
        '7' => [31, 1, 2, 4, 8, 8, 8],
        '8' => [14, 17, 17, 14, 17, 17, 14],
        '9' => [14, 17, 17, 15, 1, 2, 12],
        '.' => [0, 0, 0, 0, 0, 12, 12],
        '-' => [0, 0, 0, 31, 0, 0, 0],
        'a' => [0, 0, 14, 1, 15, 17, 15],
        'c' => [0, 0, 14, 16, 16, 17, 14],
        'e' => [0, 0, 14, 17, 31, 16, 14],
        'h' => [16, 16, 22, 25, 17, 17, 17],
        'i' => [4, 0, 12, 4, 4, 4, 14],
        'l' => [12, 4, 4, 4, 4, 4, 14],
        'n' => [0, 0, 22, 25, 17, 17, 17],
        'o' => [0, 0, 14, 17, 17, 17, 14],
        'p' => [0, 0, 30, 17, 30, 16, 16],
        'r' => [0, 0, 22, 25, 16, 16, 16],
        's' => [0, 0, 14, 16, 14, 1, 30],
        't' => [8, 8, 28, 8, 8, 9, 6],
        'u' => [0, 0, 17, 17, 17, 19, 13],
        'y' => [0, 0, 17, 17, 15, 1, 14],
        _ => [0; 7],
    }
}

/// One panel: axes, gridlines with labels, and one line per series.
fn panel(c: &mut Canvas, x0: f64, title: &str, series: &[(&[f64], [u8; 3])], epochs: usize) {
    let (left, top, w, h) = (x0 + 70.0, 40.0, 300.0, 260.0);
    let all: Vec<f64> = series.iter().flat_map(|(s, _)| s.iter().copied()).collect();
    let (mut lo, mut hi) = all
        .iter()
        .fold((f64::MAX, f64::MIN), |(a, b), &v| (a.min(v), b.max(v)));
    if hi.partial_cmp(&lo) != Some(std::cmp::Ordering::Greater) {
        lo -= 0.5;
        hi += 0.5;
    }
    let pad = (hi - lo) * 0.05;
    let (lo, hi) = (lo - pad, hi + pad);
    let sx = |e: usize| {
        left + if epochs > 1 {
            (e - 1) as f64 / (epochs - 1) as f64 * w
        } else {
            w / 2.0
        }
    };
    let sy = |v: f64| top + h - (v - lo) / (hi - lo) * h;
    for k in 0..=4 {
        let v = lo + (hi - lo) * k as f64 / 4.0;
        let y = sy(v);
        c.line((left, y), (left + w, y), LIGHT, 1);
        c.text(x0 as i64 + 4, y as i64 - 7, &format!("{v:.3}"), GREY);
    }
    c.line((left, top), (left, top + h), GREY, 2);
    c.line((left, top + h), (left + w, top + h), GREY, 2);
    c.text(left as i64, top as i64 - 30, title, GREY);
    c.text(left as i64 - 4, (top + h) as i64 + 10, "1", GREY);
    let last = format!("{epochs}");
    c.text(
        (left + w) as i64 - 12 * last.len() as i64 + 4,
        (top + h) as i64 + 10,
        &last,
        GREY,
    );
    c.text(
        (left + w / 2.0) as i64 - 30,
        (top + h) as i64 + 10,
        "epoch",
        GREY,
    );
    for (s, color) in series {
        for (i, pair) in s.windows(2).enumerate() {
            c.line(
                (sx(i + 1), sy(pair[0])),
                (sx(i + 2), sy(pair[1])),
                *color,
                2,
            );
        }
        for (i, &v) in s.iter().enumerate() {
            c.line(
                (sx(i + 1) - 2.0, sy(v) - 2.0),
                (sx(i + 1) + 2.0, sy(v) - 2.0),
                *color,
                5,
            );
        }
    }
}

/// Draws train loss (left) and train/test accuracy (right) per epoch.
pub fn write_png(path: &Path, rows: &[EpochStats]) -> std::io::Result<()> {
    let mut c = Canvas::new();
    let epochs = rows.len();
    let loss: Vec<f64> = rows.iter().map(|r| r.train_loss).collect();
    let train: Vec<f64> = rows.iter().map(|r| r.train_accuracy).collect();
    let test: Vec<f64> = rows.iter().map(|r| r.test_accuracy).collect();
    panel(&mut c, 0.0, "train loss", &[(&loss, BLUE)], epochs);
    panel(
        &mut c,
        410.0,
        "accuracy",
        &[(&train, BLUE), (&test, RED)],
        epochs,
    );
    c.text(600, 10, "train", BLUE);
    c.text(680, 10, "test", RED);
    std::fs::write(path, c.png())
}
