/**
 * A paid call's Redis steps grouped per account: several admissions (or several settlements) of one
 * account sent in one script call, each still answered on its own (`AdmissionStoreRedis`). A
 * sequential caller is never held back, and no step waits longer than `delayMs`.
 *
 * **When to use**
 *
 * Under load, when many calls of one account meet: Redis spends much of a step on what does not
 * depend on the call (receiving the script call, reading and writing the account's balances hash,
 * the sweep check), so a group of them costs little more than one. An account's keys share one hash
 * tag, so on a Redis Cluster the group goes to one slot's master like a single step.
 *
 * **Details**
 *
 * A step waits only while its account already has one of the same kind in flight, and at most
 * `delayMs`: an account with nothing in flight sends at once, the steps that arrive while one is in
 * flight go together as soon as it is answered or the delay runs out, and a group reaches at most
 * `MAX_GROUP` steps, so one script call stays short. Under load the wait replaces a wait Redis
 * would impose anyway, as it runs one script at a time.
 *
 * @since 0.1.0
 */

/**
 * The most steps one Redis call carries: a script blocks Redis while it runs, and this many
 * admissions or settlements keep it under a millisecond (`pnpm bench admission`: 12 to 22 us each).
 *
 * @category constants
 */
export const MAX_GROUP = 32

/**
 * Sends one group (one step or more, of one account) and calls `done` once Redis answered or the
 * call failed.
 *
 * @category models
 */
export type SendGroup<Item> = (group: ReadonlyArray<Item>, done: () => void) => void

interface Account<Item> {
  inFlight: number
  waiting: Array<Item>
  timer: ReturnType<typeof setTimeout> | undefined
}

/**
 * A function that hands an account's step to `send`, alone or in a group, at most `delayMs` after
 * it is given.
 *
 * @category constructors
 */
export const make = <Item>(delayMs: number, send: SendGroup<Item>) => {
  const accounts = new Map<string, Account<Item>>()

  const dispatch = (accountId: string, account: Account<Item>, group: ReadonlyArray<Item>) => {
    account.inFlight++
    send(group, () => {
      account.inFlight--
      if (account.waiting.length > 0) flush(accountId, account)
      else if (account.inFlight === 0 && account.timer === undefined) accounts.delete(accountId)
    })
  }

  const flush = (accountId: string, account: Account<Item>) => {
    clearTimeout(account.timer)
    account.timer = undefined
    const group = account.waiting
    account.waiting = []
    if (group.length > 0) dispatch(accountId, account, group)
  }

  return (accountId: string, item: Item): void => {
    let account = accounts.get(accountId)
    if (account === undefined) {
      account = { inFlight: 0, waiting: [], timer: undefined }
      accounts.set(accountId, account)
    }
    if (account.inFlight === 0 && account.waiting.length === 0) return dispatch(accountId, account, [item])
    account.waiting.push(item)
    if (account.waiting.length >= MAX_GROUP) return flush(accountId, account)
    if (account.timer === undefined) {
      const waiting = account
      account.timer = setTimeout(() => flush(accountId, waiting), delayMs)
    }
  }
}
