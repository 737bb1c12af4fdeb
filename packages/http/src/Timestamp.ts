/**
 * The ISO-8601 time of the current millisecond, as the service headers and the request log write
 * it. Every response needs it, and formatting a date is a measurable part of a small response, so
 * the date and time up to the second are formatted once per second and only the milliseconds are
 * written per call, once per millisecond.
 *
 * @since 0.1.0
 */

let formattedAt = 0
let formatted = ""
let secondAt = -1
let secondPrefix = ""

const MILLIS = Array.from({ length: 1000 }, (_, ms) => `.${String(ms).padStart(3, "0")}Z`)

/**
 * Now, as `2026-01-31T12:00:00.000Z`.
 *
 * @category clock
 */
export const now = (): string => {
  const millis = Date.now()
  if (millis !== formattedAt) {
    formattedAt = millis
    const second = Math.floor(millis / 1000)
    if (second !== secondAt) {
      secondAt = second
      secondPrefix = new Date(second * 1000).toISOString().slice(0, 19)
    }
    formatted = secondPrefix + MILLIS[millis - second * 1000]!
  }
  return formatted
}
