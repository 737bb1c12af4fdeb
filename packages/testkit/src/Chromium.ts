/**
 * The system Chromium the browser tests drive through playwright-core (`.ci/run` installs it; a
 * browser build of playwright's own cannot be downloaded here), and the flags that keep it headless,
 * quiet and off the network but for the pages a test opens.
 *
 * @since 0.1.0
 */

/** @category constants */
export const executablePath = "/usr/bin/chromium"

/** @category constants */
export const args: ReadonlyArray<string> = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
  "--no-first-run"
]
