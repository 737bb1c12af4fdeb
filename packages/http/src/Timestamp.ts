/**
 * The ISO-8601 time of the current millisecond, as the service headers and the request log write
 * it. Under load many responses fall in one millisecond, and formatting a date is a measurable
 * part of a small response, so the text is made once per millisecond.
 *
 * @since 0.1.0
 */

let formattedAt = 0
let formatted = ""

/**
 * Now, as `2026-01-31T12:00:00.000Z`.
 *
 * @category clock
 */
export const now = (): string => {
  const millis = Date.now()
  if (millis !== formattedAt) {
    formattedAt = millis
    formatted = new Date(millis).toISOString()
  }
  return formatted
}
