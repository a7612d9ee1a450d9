// When a schedule fires: a CronSpec (cron.h) read in a time zone. Time zones
// and their daylight-saving (DST) transitions come from Abseil's time-zone
// library, which reads the IANA zone files (Debian package `tzdata`,
// /usr/share/zoneinfo, or $TZDIR); no zone rule is written here.
//
// A schedule's civil times (wall-clock readings in its zone) map onto absolute
// times one to one, except at a DST transition, where the wall clock either
// skips a range of readings (spring forward: in Europe/Paris on 2026-03-29
// the clock goes from 01:59:59 CET to 03:00:00 CEST, so 02:00-02:59 never
// happen) or repeats one (fall back: on 2026-10-25 it goes from 02:59:59 CEST
// back to 02:00:00 CET, so 02:00-02:59 happen twice). The rules, after Vixie
// cron's ("jobs that run at a particular time" vs "jobs specified with
// wildcards"), depend on CronSpec::follows_wall_clock():
//
// - Fixed-time specs (no `*` at the start of the second, minute or hour
//   field: `30 2 * * *`, @daily, `0 9 * * MON-FRI`) fire at each matching
//   civil time c at the first instant the wall clock reads c or later
//   (absl::FromCivil):
//     * a skipped time fires once, at the first instant after the gap
//       (`30 2 * * *` in Paris on 2026-03-29 fires at 03:00 CEST). Several
//       skipped times, and a time at the gap's end, fire once together
//       (`0 2,3 * * *` fires once that day, at 03:00).
//     * a repeated time fires once, at its first occurrence (`30 2 * * *` on
//       2026-10-25 fires at 02:30 CEST, not again at 02:30 CET).
//   So a daily fixed-time spec fires exactly once every day, DST or not.
// - Wall-clock specs (`*/15 * * * *`, `0 * * * *`, @hourly, `* * * * * *`)
//   fire at every instant whose wall-clock reading matches: skipped readings
//   do not fire (they never show on the clock), repeated readings fire at
//   each occurrence (`0 * * * *` fires at 02:00 CEST and again at 02:00 CET
//   on 2026-10-25). An hourly or every-N-minutes spec thus keeps its spacing
//   in absolute time across a transition, with neither a gap nor a double
//   firing at the same instant.
//
// Fire times are whole seconds. Thread-safety: the functions here are pure
// and thread-safe (absl::TimeZone is a cheap, thread-safe value).
#pragma once

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "schedule/cron.h"

#include <cstddef>
#include <string_view>

namespace runloom {

// The longest time-zone name LoadScheduleTimeZone accepts, in bytes (IANA
// names are at most about 30).
inline constexpr size_t kMaxTimeZoneNameBytes = 64;

// How far NextFireTime looks, in years of the zone's civil time. The Gregorian
// calendar repeats every 400 years (146,097 days, a whole number of weeks), so
// a spec that CronSpec::Parse accepts always fires within it (the sparsest,
// such as `0 0 29 2 */7`, Feb 29 on a Sunday, fire every 28 to 40 years).
inline constexpr int kMaxFireSearchYears = 400;

// Loads the IANA time zone `name` ("Europe/Paris", "America/New_York",
// "UTC") through absl::LoadTimeZone. The name is checked before any file is
// opened: at most kMaxTimeZoneNameBytes bytes, '/'-separated parts that start
// with a letter and hold only letters, digits, '_', '+' and '-' (so no path,
// no "..", no "file:" prefix). "localtime" (the server's zone) is refused:
// a schedule names its zone.
//
// Returns:
//   kInvalidArgument   a malformed name, or an unknown zone ("time zone
//                      'Europe/Pariss' is unknown; use an IANA name such as
//                      Europe/Paris or UTC")
//   kFailedPrecondition no zone files at all ($TZDIR or /usr/share/zoneinfo
//                      missing: install Debian's tzdata; scripts/bootstrap.sh
//                      does). "UTC" loads even then.
absl::StatusOr<absl::TimeZone> LoadScheduleTimeZone(std::string_view name);

// The first time strictly after `after` at which `spec` fires in `zone`,
// following the DST rules of the file comment. Returns absl::InfiniteFuture()
// when `after` is infinite, or when nothing fires within kMaxFireSearchYears
// (which cannot happen for a spec Parse accepted). The cost is a walk over
// the days up to the next fire time, plus one step per DST transition on the
// way for a wall-clock spec.
//
// Example:
//   absl::StatusOr<CronSpec> spec = CronSpec::Parse("30 2 * * *");
//   absl::StatusOr<absl::TimeZone> paris = LoadScheduleTimeZone("Europe/Paris");
//   absl::Time next = NextFireTime(*spec, *paris, clock->Now());
absl::Time NextFireTime(const CronSpec& spec, absl::TimeZone zone, absl::Time after);

}  // namespace runloom
