//! `metav1.Time` and `metav1.MicroTime` as their JSON text, from protobuf seconds and nanos.
//!
//! Invariants: the output is what Go writes for the same instant in UTC — `Time` to the
//! second (`2006-01-02T15:04:05Z`; Go's protobuf decoding drops nanoseconds too),
//! `MicroTime` with exactly six fractional digits.

/// A timestamp's text, on the stack.
pub(crate) struct Rfc3339 {
    buf: [u8; 48],
    len: usize,
}

impl Rfc3339 {
    pub(crate) fn as_str(&self) -> &str {
        // Only ASCII digits and separators are written.
        std::str::from_utf8(&self.buf[..self.len]).unwrap_or_default()
    }

    fn push(&mut self, bytes: &[u8]) {
        self.buf[self.len..self.len + bytes.len()].copy_from_slice(bytes);
        self.len += bytes.len();
    }

    /// `n` in at least `width` decimal digits.
    fn push_digits(&mut self, n: u64, width: usize) {
        let mut digits = [b'0'; 20];
        let mut at = digits.len();
        let mut n = n;
        while n > 0 || digits.len() - at < width {
            at -= 1;
            digits[at] = b'0' + (n % 10) as u8;
            n /= 10;
        }
        self.push(&digits[at..]);
    }
}

/// `seconds` since the Unix epoch as `YYYY-MM-DDTHH:MM:SSZ`.
pub(crate) fn rfc3339_seconds(seconds: i64) -> Rfc3339 {
    let mut text = date_time(seconds);
    text.push(b"Z");
    text
}

/// `seconds` and `nanos` as `YYYY-MM-DDTHH:MM:SS.ffffffZ`.
pub(crate) fn rfc3339_micros(seconds: i64, nanos: u32) -> Rfc3339 {
    let mut text = date_time(seconds);
    text.push(b".");
    text.push_digits(u64::from(nanos / 1000), 6);
    text.push(b"Z");
    text
}

fn date_time(seconds: i64) -> Rfc3339 {
    let days = seconds.div_euclid(86_400);
    let secs = seconds.rem_euclid(86_400) as u64;
    let (y, m, d) = civil_from_days(days);
    let mut text = Rfc3339 { buf: [0; 48], len: 0 };
    if y < 0 {
        text.push(b"-");
    }
    text.push_digits(y.unsigned_abs(), 4);
    for (sep, n) in [(b"-", u64::from(m)), (b"-", u64::from(d)), (b"T", secs / 3600), (b":", secs / 60 % 60), (b":", secs % 60)] {
        text.push(sep);
        text.push_digits(n, 2);
    }
    text
}

/// The proleptic Gregorian date `days` after 1970-01-01 (the days-to-civil algorithm:
/// eras of 400 years, years starting in March so the leap day comes last).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_instants() {
        assert_eq!(rfc3339_seconds(0).as_str(), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339_seconds(1_767_323_045).as_str(), "2026-01-02T03:04:05Z");
        assert_eq!(rfc3339_seconds(951_782_400).as_str(), "2000-02-29T00:00:00Z");
        assert_eq!(rfc3339_seconds(-1).as_str(), "1969-12-31T23:59:59Z");
        assert_eq!(rfc3339_micros(1_767_323_045, 123_456_789).as_str(), "2026-01-02T03:04:05.123456Z");
        assert_eq!(rfc3339_micros(1_767_323_045, 1_000).as_str(), "2026-01-02T03:04:05.000001Z");
        // The extremes of i64 seconds fit the buffer.
        assert_eq!(rfc3339_seconds(-62_135_596_801).as_str(), "0000-12-31T23:59:59Z");
        assert_eq!(rfc3339_seconds(-62_167_219_201).as_str(), "-0001-12-31T23:59:59Z");
        assert!(rfc3339_micros(i64::MAX, 999_999_999).as_str().ends_with("T15:30:07.999999Z"));
        assert!(rfc3339_micros(i64::MIN, 0).as_str().starts_with('-'));
    }

    #[test]
    fn every_day_of_four_centuries_round_trips() {
        // Days back from civil dates (Julian day arithmetic) must match.
        let mut expected = (1900i64, 1u32, 1u32);
        let start = -25_567; // 1900-01-01
        for days in start..start + 146_097 {
            assert_eq!(civil_from_days(days), expected, "day {days}");
            let (y, m, d) = expected;
            let leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
            let len = [31, if leap { 29 } else { 28 }, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][m as usize - 1];
            expected = if d < len { (y, m, d + 1) } else if m < 12 { (y, m + 1, 1) } else { (y + 1, 1, 1) };
        }
    }
}
