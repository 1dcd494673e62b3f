//! Patch carried by Portcullis: `timestamp()` reads its string as Go's
//! `time.Parse(time.RFC3339, s)` does, which cel-go uses: a port of Go's
//! layout-driven parser for that one layout (its fast path takes a subset
//! of the same strings, with the same meaning), then cel-go's range check.
//! Upstream used chrono's RFC 3339 reader, which takes a lower-case `t`
//! or `z`, a space for the `T` and a leap second (`:60`), all refused by
//! Go, and refuses what Go reads: a one-digit hour (`T1:00:00Z`), a `,`
//! before the fraction, and an offset of 24 hours or more (up to
//! `+24:60`). Such an offset is kept as UTC, since chrono's fixed offsets
//! stop short of a day: only `string()` of such a timestamp then differs
//! from cel-go's.

use chrono::{DateTime, FixedOffset, NaiveDate, TimeZone};

/// The earliest and latest seconds since the epoch of a CEL timestamp
/// (`0001-01-01T00:00:00Z`, `9999-12-31T23:59:59Z`), as cel-go bounds them.
const SECONDS: std::ops::RangeInclusive<i64> = -62_135_596_800..=253_402_300_799;

/// `text` read as Go reads an RFC 3339 time, or why not.
pub fn parse_rfc3339(text: &str) -> Result<DateTime<FixedOffset>, String> {
    let parsed = Reader { rest: text.as_bytes() }
        .time()
        .ok_or_else(|| format!("cannot parse {text:?} as RFC 3339"))?;
    if !SECONDS.contains(&parsed.timestamp()) {
        return Err(format!("timestamp {text:?} out of range"));
    }
    Ok(parsed)
}

struct Reader<'a> {
    rest: &'a [u8],
}

impl Reader<'_> {
    fn time(&mut self) -> Option<DateTime<FixedOffset>> {
        let year = self.year()?;
        self.expect(b'-')?;
        let month = self.number(true).filter(|m| (1..=12).contains(m))?;
        self.expect(b'-')?;
        let day = self.number(true)?;
        self.expect(b'T')?;
        let hour = self.number(false).filter(|h| *h < 24)?;
        self.expect(b':')?;
        let minute = self.number(true).filter(|m| *m < 60)?;
        self.expect(b':')?;
        let second = self.number(true).filter(|s| *s < 60)?;
        let nanos = self.fraction();
        let offset = self.zone()?;
        if !self.rest.is_empty() {
            return None;
        }
        // Day 0 or past the month's last is refused here.
        let date = NaiveDate::from_ymd_opt(year, month, day)?;
        let local = date.and_hms_nano_opt(hour, minute, second, nanos)?;
        match FixedOffset::east_opt(offset) {
            Some(zone) => zone.from_local_datetime(&local).single(),
            None => {
                let utc = local.checked_sub_signed(chrono::Duration::seconds(i64::from(offset)))?;
                Some(FixedOffset::east_opt(0)?.from_utc_datetime(&utc))
            }
        }
    }

    /// Four digits.
    fn year(&mut self) -> Option<i32> {
        let digits = self.rest.get(..4).filter(|d| d.iter().all(u8::is_ascii_digit))?;
        self.rest = &self.rest[4..];
        Some(digits.iter().fold(0, |year, d| year * 10 + i32::from(d - b'0')))
    }

    fn expect(&mut self, byte: u8) -> Option<()> {
        let (&first, rest) = self.rest.split_first()?;
        (first == byte).then(|| self.rest = rest)
    }

    /// Two digits, or (not `fixed`) one where a second does not follow:
    /// Go's `getnum`.
    fn number(&mut self, fixed: bool) -> Option<u32> {
        let digit = |at: usize| self.rest.get(at).filter(|d| d.is_ascii_digit()).map(|d| u32::from(d - b'0'));
        let (value, length) = match (digit(0)?, digit(1)) {
            (tens, Some(ones)) => (tens * 10 + ones, 2),
            (ones, None) if !fixed => (ones, 1),
            _ => return None,
        };
        self.rest = &self.rest[length..];
        Some(value)
    }

    /// A `.` or `,` and digits, if there: nanoseconds, digits past the
    /// ninth read and dropped.
    fn fraction(&mut self) -> u32 {
        let starts = matches!(self.rest, [b'.' | b',', d, ..] if d.is_ascii_digit());
        if !starts {
            return 0;
        }
        let digits = self.rest[1..].iter().take_while(|d| d.is_ascii_digit()).count();
        let kept = &self.rest[1..1 + digits.min(9)];
        let nanos = kept.iter().fold(0, |n, d| n * 10 + u32::from(d - b'0'));
        self.rest = &self.rest[1 + digits..];
        nanos * 10u32.pow(9 - kept.len() as u32)
    }

    /// `Z`, or a signed `hh:mm` of at most 24 hours and 60 minutes, as
    /// Go's parser bounds it: the offset east of UTC in seconds.
    fn zone(&mut self) -> Option<i32> {
        if self.expect(b'Z').is_some() {
            return Some(0);
        }
        let (&sign, rest) = self.rest.split_first()?;
        self.rest = rest;
        let hours = self.number(true).filter(|h| *h <= 24)?;
        self.expect(b':')?;
        let minutes = self.number(true).filter(|m| *m <= 60)?;
        let seconds = i32::try_from((hours * 60 + minutes) * 60).ok()?;
        match sign {
            b'+' => Some(seconds),
            b'-' => Some(-seconds),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::parse_rfc3339;

    #[test]
    fn times_read_as_go_reads_them() {
        // Go 1.26's time.Parse(time.RFC3339, s), then cel-go's range.
        let read = [
            ("2020-01-01T00:00:00Z", "2020-01-01T00:00:00+00:00"),
            ("2020-01-01T00:00:00+01:00", "2020-01-01T00:00:00+01:00"),
            ("2020-01-01T1:00:00Z", "2020-01-01T01:00:00+00:00"),
            ("2020-01-01T00:00:00,5Z", "2020-01-01T00:00:00.500+00:00"),
            ("2020-01-01T00:00:00.1234567891Z", "2020-01-01T00:00:00.123456789+00:00"),
            ("2020-01-01T00:00:00+24:00", "2019-12-31T00:00:00+00:00"),
            ("2020-01-01T00:00:00-23:60", "2020-01-02T00:00:00+00:00"),
            ("2020-02-29T00:00:00Z", "2020-02-29T00:00:00+00:00"),
            ("0001-01-01T00:00:00Z", "0001-01-01T00:00:00+00:00"),
        ];
        for (text, expected) in read {
            let parsed = parse_rfc3339(text).unwrap_or_else(|e| panic!("{text}: {e}"));
            assert_eq!(parsed.to_rfc3339(), expected, "{text}");
        }
        for text in [
            "2020-01-01t00:00:00Z",
            "2020-01-01T00:00:00z",
            "2020-01-01 00:00:00Z",
            "2020-01-01T00:00:60Z",
            "2020-01-01T24:00:00Z",
            "2020-01-01T00:00:00",
            "2020-01-01T00:00:00+25:00",
            "2020-01-01T00:00:00+01:61",
            "2020-01-01T00:00:00+0100",
            "2020-01-01T00:00:00.Z",
            "2019-02-29T00:00:00Z",
            "2020-1-01T00:00:00Z",
            "20-01-01T00:00:00Z",
            "2020-01-01T00:00:00Z ",
            "0000-01-01T00:00:00Z",
            "9999-12-31T23:59:59-01:00",
            "",
        ] {
            assert!(parse_rfc3339(text).is_err(), "{text}");
        }
    }
}
