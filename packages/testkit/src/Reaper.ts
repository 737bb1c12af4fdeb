/**
 * The throwaway processes of a test file die with it, and its throwaway folders are removed,
 * however the test process ends.
 *
 * **Details**
 *
 * A file's `afterAll` does not run when a name filter (`vitest run -t ...`) skips every test of the
 * file, and vitest ends its workers without the `exit` event, so neither can be relied on to stop a
 * server started while the file was collected. Each test process instead gets one watchdog: a `sh`
 * reading the process ids (and folders) to clean up from a pipe the test process holds. When the
 * test process ends, however it ends, the pipe closes, and the watchdog kills what is still
 * registered and removes the folders.
 *
 * @since 0.1.0
 */
import * as ChildProcess from "node:child_process"
import type * as Net from "node:net"
import type { Writable } from "node:stream"

// "+ pid" registers a process, "- pid" forgets one that stopped (so a reused id is never killed),
// "d path" a folder to remove. At end of input: kill, then remove.
const script = `pids=" "
dirs=""
while read -r op arg; do
  case "$op" in
    +) pids="$pids$arg " ;;
    -) pids=$(printf '%s' "$pids" | sed "s/ $arg / /") ;;
    d) dirs="$dirs
$arg" ;;
  esac
done
[ -n "$(printf '%s' "$pids" | tr -d ' ')" ] && kill -9 $pids 2>/dev/null
printf '%s\\n' "$dirs" | while IFS= read -r dir; do [ -n "$dir" ] && rm -rf -- "$dir"; done
exit 0`

let watchdog: ChildProcess.ChildProcessByStdio<Writable, null, null> | undefined

const send = (line: string) => {
  if (watchdog === undefined) {
    // Its own process group, so a signal to the test's group does not take the watchdog with it.
    watchdog = ChildProcess.spawn("sh", ["-c", script], { stdio: ["pipe", "ignore", "ignore"], detached: true })
    watchdog.on("error", () => {})
    watchdog.stdin.on("error", () => {})
    // Neither the watchdog nor its pipe keeps the test process alive (the pipe is a `net.Socket`).
    watchdog.unref()
    ;(watchdog.stdin as Net.Socket).unref()
  }
  if (watchdog.stdin.writable) watchdog.stdin.write(`${line}\n`)
}

/**
 * Kills `child` when the test process ends, unless it exited first.
 *
 * @category constructors
 */
export const reap = (child: ChildProcess.ChildProcess): void => {
  const pid = child.pid
  if (pid === undefined) return
  send(`+ ${pid}`)
  child.once("exit", () => send(`- ${pid}`))
}

/**
 * Removes `dir` when the test process ends (a stopped server removes its own folder first).
 *
 * @category constructors
 */
export const removeAtExit = (dir: string): void => send(`d ${dir}`)
