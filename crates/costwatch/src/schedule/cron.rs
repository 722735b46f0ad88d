//! The `schedule` section, and cron schedules: parsing (5 fields, or 6 with seconds first) and the next
//! fire time, computed in the schedule's time zone.
//!
//! The cron engine is croner. Its daylight saving rules (see its README):
//! a fixed-time job (single second, minute and hour, such as `0 30 2 * * *`)
//! whose time falls into a spring-forward gap runs once at the first instant
//! after the gap (03:00 local for a 02:00 to 03:00 gap), and runs only once,
//! at the first of the two instants, when its time is repeated by a fall-back.
//! An interval job (`*/15 * * * *`) skips the times in a gap and runs on both
//! passes of a repeated hour, so it keeps its spacing in real time.

use crate::settings::Settings;
use crate::settings::units::{positive, time_zone};
use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use croner::Cron;
use croner::parser::{CronParser, Seconds, Year};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// When the detection job runs (the `schedule` section).
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
#[schemars(transform = crate::settings::in_declared_order::<ScheduleConfig>)]
pub struct ScheduleConfig {
    /// Cron expression: 5 fields, or 6 with seconds first, or a nickname
    /// such as `@hourly`; one that can never fire is refused.
    #[schemars(with = "String")]
    pub cron: CronExpr,
    /// IANA time zone name the expression is read in; daylight saving is
    /// handled as croner does.
    #[serde(with = "time_zone")]
    #[schemars(with = "String")]
    pub timezone: Tz,
    /// Most windows processed in one catch-up after downtime; older windows
    /// beyond `windows.max_backfill` are skipped with a warning.
    #[schemars(range(min = 1))]
    pub max_catch_up_windows: usize,
    /// How long one tick may read the gateway. A window not read by then
    /// stays due; a tick that read none counts as a failed read of the
    /// gateway.
    #[serde(with = "positive")]
    #[schemars(with = "crate::settings::units::DurationText")]
    pub tick_timeout: Duration,
}

impl Default for ScheduleConfig {
    fn default() -> Self {
        ScheduleConfig {
            cron: CronExpr::every_five_minutes(),
            timezone: Tz::UTC,
            max_catch_up_windows: 672,
            // Twice the default window: a tick that cannot read one window
            // in that time would fall behind the windows anyway.
            tick_timeout: Duration::from_secs(30 * 60),
        }
    }
}

impl Settings for ScheduleConfig {}

/// A cron expression as written, and parsed.
#[derive(Clone, Deserialize, Serialize)]
#[serde(try_from = "String", into = "String")]
pub struct CronExpr {
    text: String,
    cron: Cron,
}

impl CronExpr {
    /// The expression as written.
    pub fn text(&self) -> &str {
        &self.text
    }

    fn every_five_minutes() -> CronExpr {
        let text = "*/5 * * * *";
        match parse_cron(text) {
            Ok(cron) => CronExpr {
                text: text.to_owned(),
                cron,
            },
            Err(e) => unreachable!("{text}: {e}"),
        }
    }
}

impl std::fmt::Debug for CronExpr {
    /// The expression as written.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CronExpr({:?})", self.text)
    }
}

impl TryFrom<String> for CronExpr {
    type Error = String;

    fn try_from(text: String) -> Result<CronExpr, String> {
        let cron = parse_cron(&text)?;
        Ok(CronExpr { text, cron })
    }
}

impl From<CronExpr> for String {
    fn from(c: CronExpr) -> String {
        c.text
    }
}

impl ScheduleConfig {
    /// Builds a schedule from a cron expression, checked as the loader checks
    /// `schedule.cron`, with the default `tick_timeout`. The error is a
    /// lower-case message such as
    /// `cannot parse "61 * * * *": component error: number out of bounds`.
    pub fn new(cron: &str, timezone: Tz, max_catch_up_windows: usize) -> Result<Self, String> {
        Ok(ScheduleConfig {
            cron: CronExpr::try_from(cron.to_owned())?,
            timezone,
            max_catch_up_windows,
            ..ScheduleConfig::default()
        })
    }

    /// The first time the schedule fires strictly after `t`, computed on the
    /// wall clock of [`Self::timezone`] (daylight saving handled as the
    /// module documentation describes) and returned in UTC. `None` only when
    /// there is no such time before the year 5000.
    pub fn next_after(&self, t: DateTime<Utc>) -> Option<DateTime<Utc>> {
        next_after(&self.cron.cron, t, self.timezone)
    }
}

/// The first fire time of `cron` strictly after `t`, read in `tz`.
pub(crate) fn next_after(cron: &Cron, t: DateTime<Utc>, tz: Tz) -> Option<DateTime<Utc>> {
    // croner's exclusive search starts at the next whole second after `t`,
    // so the answer is always later than `t`, also when `t` has a fraction.
    cron.find_next_occurrence(&t.with_timezone(&tz), false)
        .ok()
        .map(|next| next.with_timezone(&Utc))
}

/// Parses a cron expression: 5 fields (minute first), 6 fields (second
/// first), or one of croner's nicknames (`@hourly`, `@daily`, ...). An
/// expression that can never fire (`0 0 30 2 *`) is an error.
pub(crate) fn parse_cron(text: &str) -> Result<Cron, String> {
    let cannot = |why: String| format!("cannot parse \"{text}\": {why}");
    let fields: Vec<&str> = text.split_whitespace().collect();
    let nickname = text.trim_start().starts_with('@');
    if !nickname && !(5..=6).contains(&fields.len()) {
        return Err(cannot(format!(
            "expected 5 fields, or 6 with seconds first, got {}",
            fields.len()
        )));
    }
    if !nickname && let Some((name, field, why)) = step_past_range(&fields) {
        return Err(cannot(format!("{name} field `{field}`: {why}")));
    }
    let cron = parser().parse(text).map_err(|e| {
        let why = croner_message(&e);
        match culprit(&fields) {
            Some((name, field)) => cannot(format!("{name} field `{field}`: {why}")),
            None => cannot(why),
        }
    })?;
    // Without a year field a schedule that fires at all fires again within
    // every 400-year calendar cycle, so one search from a fixed instant
    // decides it, whatever the current time.
    if next_after(&cron, DateTime::<Utc>::UNIX_EPOCH, Tz::UTC).is_none() {
        return Err(format!("\"{text}\" never fires"));
    }
    Ok(cron)
}

fn parser() -> CronParser {
    CronParser::builder()
        .seconds(Seconds::Optional)
        .year(Year::Disallowed)
        .build()
}

/// The names of the fields of a 5- or 6-field expression, with how many
/// values each field has.
fn field_names(count: usize) -> Option<Vec<(&'static str, u32)>> {
    const FIVE: [(&str, u32); 5] = [
        ("minute", 60),
        ("hour", 24),
        ("day-of-month", 31),
        ("month", 12),
        ("day-of-week", 7),
    ];
    match count {
        5 => Some(FIVE.to_vec()),
        6 => Some(std::iter::once(("second", 60)).chain(FIVE).collect()),
        _ => None,
    }
}

/// The first field with a step longer than the field's range (`*/61` of
/// minutes), which croner takes as firing once: a typo, not a schedule.
fn step_past_range<'a>(fields: &[&'a str]) -> Option<(&'static str, &'a str, String)> {
    let names = field_names(fields.len())?;
    fields
        .iter()
        .zip(names)
        .find_map(|(field, (name, values))| {
            field.split(',').find_map(|part| {
                let step: u32 = part.split_once('/')?.1.parse().ok()?;
                (step > values).then(|| {
                    let why = format!("the step {step} is longer than the field's {values} values");
                    (name, *field, why)
                })
            })
        })
}

/// The first field that croner rejects on its own (the others set to `*`),
/// with its name; croner's own messages do not say which field is wrong.
fn culprit<'a>(fields: &[&'a str]) -> Option<(&'static str, &'a str)> {
    let names = field_names(fields.len())?;
    (0..fields.len()).find_map(|i| {
        let alone: Vec<&str> = (0..fields.len())
            .map(|j| if i == j { fields[j] } else { "*" })
            .collect();
        parser()
            .parse(&alone.join(" "))
            .is_err()
            .then(|| (names[i].0, fields[i]))
    })
}

/// A croner error as a lower-case fragment without a trailing period.
fn croner_message(e: &croner::errors::CronError) -> String {
    use croner::errors::CronError as E;
    let message = match e {
        E::ComponentError(m) | E::InvalidPattern(m) => m.clone(),
        E::IllegalCharacters(m) => m.replace("CronPattern contains ", ""),
        other => other.to_string(),
    };
    lower_first(message.trim_end_matches('.'))
}

fn lower_first(s: &str) -> String {
    let mut chars = s.chars();
    match chars.next() {
        Some(c) => c.to_lowercase().chain(chars).collect(),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;
    use std::error::Error;

    type TestResult = Result<(), Box<dyn Error>>;

    fn utc(y: i32, mo: u32, d: u32, h: u32, mi: u32, s: u32) -> Result<DateTime<Utc>, String> {
        Utc.with_ymd_and_hms(y, mo, d, h, mi, s)
            .single()
            .ok_or_else(|| "no such utc time".to_owned())
    }

    /// The first `n` fire times after `t`.
    fn fires(
        schedule: &ScheduleConfig,
        mut t: DateTime<Utc>,
        n: usize,
    ) -> Result<Vec<String>, String> {
        let mut out = Vec::new();
        for _ in 0..n {
            t = schedule
                .next_after(t)
                .ok_or_else(|| format!("no fire after {t}"))?;
            out.push(t.format("%Y-%m-%dT%H:%M:%SZ").to_string());
        }
        Ok(out)
    }

    fn berlin() -> Result<Tz, Box<dyn Error>> {
        Ok("Europe/Berlin".parse::<Tz>()?)
    }

    #[test]
    fn five_and_six_field_forms_both_parse() -> TestResult {
        let t = utc(2026, 5, 4, 12, 3, 10)?;
        let five = ScheduleConfig::new("*/5 * * * *", Tz::UTC, 1)?;
        let six = ScheduleConfig::new("0 */5 * * * *", Tz::UTC, 1)?;
        let want = ["2026-05-04T12:05:00Z", "2026-05-04T12:10:00Z"];
        assert_eq!(fires(&five, t, 2)?, want);
        assert_eq!(fires(&six, t, 2)?, want);
        // In the 6-field form the first field is the second.
        let at_30s = ScheduleConfig::new("30 */5 * * * *", Tz::UTC, 1)?;
        assert_eq!(fires(&at_30s, t, 1)?, ["2026-05-04T12:05:30Z"]);
        assert_eq!(five.cron.text(), "*/5 * * * *");
        Ok(())
    }

    #[test]
    fn every_15_minutes_in_utc_fires_on_the_quarter_hours() -> TestResult {
        let s = ScheduleConfig::new("*/15 * * * *", Tz::UTC, 1)?;
        assert_eq!(
            fires(&s, utc(2026, 5, 4, 10, 7, 0)?, 5)?,
            [
                "2026-05-04T10:15:00Z",
                "2026-05-04T10:30:00Z",
                "2026-05-04T10:45:00Z",
                "2026-05-04T11:00:00Z",
                "2026-05-04T11:15:00Z",
            ]
        );
        Ok(())
    }

    #[test]
    fn next_after_is_strictly_after_also_on_a_fire_time_and_within_a_second() -> TestResult {
        let s = ScheduleConfig::new("*/15 * * * *", Tz::UTC, 1)?;
        let on_fire = utc(2026, 5, 4, 10, 15, 0)?;
        assert_eq!(s.next_after(on_fire), Some(utc(2026, 5, 4, 10, 30, 0)?));
        let just_before = on_fire - chrono::Duration::milliseconds(500);
        assert_eq!(s.next_after(just_before), Some(on_fire));
        let just_after = on_fire + chrono::Duration::milliseconds(500);
        assert_eq!(s.next_after(just_after), Some(utc(2026, 5, 4, 10, 30, 0)?));
        Ok(())
    }

    #[test]
    fn a_daily_time_inside_the_spring_forward_gap_fires_once_right_after_it() -> TestResult {
        // On 2026-03-29 Berlin jumps from 02:00 CET to 03:00 CEST, so 02:30
        // does not exist. croner runs a fixed-time job at the first instant
        // after the gap: 03:00 CEST, which is 01:00 UTC.
        let s = ScheduleConfig::new("0 30 2 * * *", berlin()?, 1)?;
        assert_eq!(
            fires(&s, utc(2026, 3, 27, 12, 0, 0)?, 4)?,
            [
                "2026-03-28T01:30:00Z", // 02:30 CET
                "2026-03-29T01:00:00Z", // 03:00 CEST, the gap's end
                "2026-03-30T00:30:00Z", // 02:30 CEST
                "2026-03-31T00:30:00Z",
            ]
        );
        Ok(())
    }

    #[test]
    fn a_daily_time_inside_the_fall_back_hour_fires_once() -> TestResult {
        // On 2026-10-25 Berlin goes back from 03:00 CEST to 02:00 CET, so
        // 02:30 happens twice; the job runs at the first, 00:30 UTC, only.
        let s = ScheduleConfig::new("0 30 2 * * *", berlin()?, 1)?;
        assert_eq!(
            fires(&s, utc(2026, 10, 23, 12, 0, 0)?, 4)?,
            [
                "2026-10-24T00:30:00Z", // 02:30 CEST
                "2026-10-25T00:30:00Z", // 02:30 CEST, first pass
                "2026-10-26T01:30:00Z", // 02:30 CET
                "2026-10-27T01:30:00Z",
            ]
        );
        Ok(())
    }

    #[test]
    fn an_interval_schedule_keeps_its_real_time_spacing_across_dst() -> TestResult {
        let s = ScheduleConfig::new("*/30 * * * *", berlin()?, 1)?;
        // Spring forward: 01:30 CET is followed by 03:00 CEST.
        assert_eq!(
            fires(&s, utc(2026, 3, 29, 0, 10, 0)?, 3)?,
            [
                "2026-03-29T00:30:00Z",
                "2026-03-29T01:00:00Z",
                "2026-03-29T01:30:00Z"
            ]
        );
        // Fall back: both passes of 02:00 to 03:00 local fire.
        assert_eq!(
            fires(&s, utc(2026, 10, 24, 23, 50, 0)?, 5)?,
            [
                "2026-10-25T00:00:00Z", // 02:00 CEST
                "2026-10-25T00:30:00Z", // 02:30 CEST
                "2026-10-25T01:00:00Z", // 02:00 CET
                "2026-10-25T01:30:00Z", // 02:30 CET
                "2026-10-25T02:00:00Z", // 03:00 CET
            ]
        );
        Ok(())
    }

    #[test]
    fn bad_or_impossible_expressions_are_errors() {
        let cases = [
            (
                "61 * * * *",
                "cannot parse \"61 * * * *\": minute field `61`: number out of bounds",
            ),
            (
                "0 0 25 * * *",
                "cannot parse \"0 0 25 * * *\": hour field `25`: number out of bounds",
            ),
            (
                "0 0 * * 8",
                "cannot parse \"0 0 * * 8\": day-of-week field `8`: number out of bounds",
            ),
            (
                "",
                "cannot parse \"\": expected 5 fields, or 6 with seconds first, got 0",
            ),
            (
                "* * * *",
                "cannot parse \"* * * *\": expected 5 fields, or 6 with seconds first, got 4",
            ),
            (
                "0 0 0 1 1 * 2030",
                "cannot parse \"0 0 0 1 1 * 2030\": expected 5 fields, or 6 with seconds first, got 7",
            ),
            (
                "a b c d e",
                "cannot parse \"a b c d e\": minute field `a`: illegal character 'A' in part 'A'",
            ),
            (
                "*/61 * * * *",
                "cannot parse \"*/61 * * * *\": minute field `*/61`: the step 61 is longer than the field's 60 values",
            ),
            (
                "0 0 1-5/25 * * *",
                "cannot parse \"0 0 1-5/25 * * *\": hour field `1-5/25`: the step 25 is longer than the field's 24 values",
            ),
            ("0 0 30 2 *", "\"0 0 30 2 *\" never fires"),
            ("0 0 0 31 4 *", "\"0 0 0 31 4 *\" never fires"),
        ];
        for (text, want) in cases {
            assert_eq!(parse_cron(text).err().as_deref(), Some(want), "{text}");
        }
        // Rare is not never: 29 February fires in leap years.
        assert!(parse_cron("0 0 29 2 *").is_ok());
        assert!(parse_cron("@daily").is_ok());
        // A step as long as its field fires once a cycle, as written.
        assert!(parse_cron("*/60 * * * *").is_ok());
        assert!(parse_cron("0 */5,*/7 * * *").is_ok());
    }
}
