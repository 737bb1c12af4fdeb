/**
 * Keeps a test's count inside one rate-limit window: `fresh` waits, when the current window has too
 * little left for the count, until the next one starts.
 *
 * **Details**
 *
 * Rate-limit windows are fixed minutes of the real clock (a counter per `floor(now / window)`), so
 * a test that counts up to a limit would fail when a minute ended halfway through its count.
 *
 * @since 0.1.0
 */

/**
 * Resolves at once when the current window of `windowMs` has at least `needMs` left, else just
 * after the next window starts.
 *
 * @category constructors
 */
export const fresh = async (needMs = 20_000, windowMs = 60_000): Promise<void> => {
  const left = windowMs - (Date.now() % windowMs)
  if (left < needMs) await new Promise((resolve) => setTimeout(resolve, left + 50))
}
