/**
 * The Redis layer of `CreditLedger`: the ledger shared by every instance. Each operation is one Lua
 * script over the account's keys, which share the hash tag `{accountId}` so a Redis Cluster keeps
 * an account on one slot: a hash of balances and daily allowance counters, a hash of holds with a
 * sorted set of when each needs attention (an open hold's expiry, a closed hold's forgetting: see
 * `CreditLedger.CLOSED_HOLD_RETENTION_MS`), a hash of applied references, and two streams, the
 * journal and the usage entries (the capture entries of the journal with their request details).
 * Stream ids are the journal ids (`<ms>-<seq>`), so a usage page is an `XRANGE` from its cursor:
 * its cost does not grow with the history. Times come from the caller's `Clock`, so both layers run under TestClock.
 *
 * The balances hash also counts the account's open holds (`open`), so `holdStats` reads the open
 * holds and the held amounts of every account from the store, and keeps `sweepAt`, a time at or
 * before the earliest deadline, so a script looks at the deadlines only when one may have passed.
 * A script reads the balances hash once and writes it once. A closed hold's record carries the time
 * it is forgotten (`f`) and reads as unknown from then on; the records themselves are deleted in
 * batches, the holds closed within the same minute at once. `sweepExpired` and `holdStats` find
 * the accounts with `SCAN` over the key pattern (incremental, never blocking Redis; on a Redis
 * Cluster `RedisConnection` walks every master), and `sweepExpired` runs the ledger script's sweep
 * on each account whose earliest deadline has passed, which releases its expired holds.
 *
 * What earlier releases wrote reads the same (a rolling deploy runs both): `sweepAt` holds only
 * for the journal position it was written at (`sweptId`), and a script of an earlier release
 * appends to the journal whenever it changes the deadlines, so after one the next script sweeps; a
 * closed hold without `f` is deleted at its deadline, as it was then. A hold's record is JSON either
 * way: this release writes its fields in a fixed order (joined as strings, and an open one read
 * with one match), and decodes any other order, an earlier release's, with cjson, which is how
 * an earlier release reads this one's.
 *
 * Amounts are integer strings in Redis (Lua numbers are doubles, exact below 2^53 like `Money`).
 *
 * @since 0.1.0
 */
import { CreditLedger, Errors, Money, Spans } from "@tollgate/core"
import { Clock, Effect, Layer } from "effect"
import { Redis } from "effect/persistence"
import * as RedisConnection from "./RedisConnection.ts"

/**
 * The ledger's Lua functions over the account's keys: `ledgerHold` (or `holdCheck` then
 * `holdPlace`), `ledgerCapture`, `ledgerRelease`, `sweep` and `balance`, keeping journal and usage
 * entries for `retentionMs`. It only defines (a Function library runs it once): a call starts with
 * `ledgerBegin(keys, now)` (the keys of `accountKeys` first, in that order; `now` the integer
 * string of the caller's time), runs `sweep` before
 * anything else and calls `saveAccount()` before it returns.
 *
 * @category internals
 */
export const ledgerLibrary = (retentionMs: number) => `
local DAY = 86400000
local RETAIN_MS = ${retentionMs}
local FORGET_MS = ${CreditLedger.CLOSED_HOLD_RETENTION_MS}
local FORGET_STEP = 60000
local NEVER = 9007199254740992
local NANO = 1000000000
local MAX_NANO = ${Money.MAX}

-- The call's state: its keys, its time (and the caller's text of it), today's allowance counters,
-- the balances as loaded and changed, and the journal id and trimming point once known. Set by
-- ledgerBegin on every call (the keys when the account changes).
local A, H, X, R, J, U, now, nowText, today, AU, AH
local storedLastMs, storedSeq, storedSweptId, lastId
-- values: the balances hash's fields as numbers; changed: the fields to write back, each with its
-- text or true. Both tables are the library's, emptied for each call rather than made anew;
-- values is made anew only once it holds a field loadAccount does not set (another day's
-- allowance counter), so no call sees another's.
local values, changed, otherFields = {}, {}, false

-- Integers go to Redis as strings formatted here: %d costs half of %.0f, and a number passed to
-- redis.call is formatted with %.17g, which costs as much as the command. The two most frequent,
-- 0 and the call's time, are not formatted at all, and a small one (a journal sequence, a count of
-- open holds) is formatted once and kept by the library. (A Function library cannot keep
-- string.format in a local: it sees no globals while it loads.)
local small = {}
local function s(n)
  if n == 0 then return '0' end
  if n == now then return nowText end
  if n > 0 and n < 4096 then
    local text = small[n]
    if not text then
      text = string.format('%d', n)
      small[n] = text
    end
    return text
  end
  return string.format('%d', n)
end

-- The text of a time after now (a hold's expiry, a closed hold's forgetting time): the same for
-- the calls and the settlements of one millisecond, so the last two are kept.
local t1, t1Text, t2, t2Text
local function timeText(ms)
  if ms == t1 then return t1Text end
  if ms == t2 then return t2Text end
  t2, t2Text = t1, t1Text
  t1, t1Text = ms, s(ms)
  return t1Text
end

-- An integer for a reply: Redis answers a number as an integer it formats itself, where a string
-- costs a string.format here. The Node client sums an integer's digits in a double, exact only
-- clear of 2^53, so a number from 2^52 on goes as its string.
local function int(n)
  if n < 4503599627370496 and n > -4503599627370496 then return n end
  return s(n)
end

-- A Function library keeps its locals between calls: today's names are made once a day. The
-- account's six keys are passed, never named here from one of them: a Redis-compatible server or
-- proxy may allow a script only the keys it declares (measured, naming five of them here saved
-- no Redis CPU beyond the runs' noise).
local day
local function ledgerBegin(keys, atText)
  A, H, X, R, J, U = keys[1], keys[2], keys[3], keys[4], keys[5], keys[6]
  now, nowText = atText + 0, atText
  local d = (now - now % DAY) / DAY
  if d ~= day then
    day, today = d, string.format('%d', d)
    AU, AH = 'au:' .. today, 'ah:' .. today
    otherFields = true
  end
  -- A call that failed part way left its changes unsaved: they are dropped.
  for name in pairs(changed) do changed[name] = nil end
  lastId = nil
end

-- The balances hash A is read in one HMGET when the script starts (sweep calls loadAccount), and
-- the fields it changed are written back in one HSET by saveAccount(): a command per change would
-- cost as much again, and the script runs atomically, so nobody sees the difference. Stored numbers
-- are read by arithmetic (x + 0), which parses once where tonumber parses twice.
local function loadAccount()
  local v = redis.call('HMGET', A, 'usd', 'held', 'stake', 'open', 'lastMs', 'seq', 'sweepAt', AU, AH, 'sweptId')
  if otherFields then
    values, otherFields = {}, false
  end
  values.usd, values.held, values.stake, values.open = (v[1] or 0) + 0, (v[2] or 0) + 0, (v[3] or 0) + 0, (v[4] or 0) + 0
  values.lastMs, values.seq, values.sweepAt = (v[5] or 0) + 0, (v[6] or 0) + 0, (v[7] or 0) + 0
  values[AU], values[AH] = (v[8] or 0) + 0, (v[9] or 0) + 0
  -- The journal position as stored, and the one sweepAt was written at (see sweep).
  storedLastMs, storedSeq, storedSweptId = v[5], v[6], v[10]
end
-- Any field by name; the ones loadAccount reads are used as values.<name> (and changed.<name>) on
-- the paid path, where a function call per read would cost more than the read.
local function field(name)
  local v = values[name]
  if v == nil then
    -- Another day's allowance counters, for a hold placed on that day.
    v = tonumber(redis.call('HGET', A, name)) or 0
    values[name] = v
    otherFields = true
  end
  return v
end
-- text: v as a string, when the caller has it (saveAccount formats v otherwise).
local function setField(name, v, text)
  values[name] = v
  changed[name] = text or true
end
local function addField(name, delta) setField(name, field(name) + delta) end

local function nextId()
  local lastMs, seq = values.lastMs, values.seq
  if now > lastMs then lastMs = now; seq = 1 else seq = seq + 1 end
  local ms, sq = s(lastMs), s(seq)
  values.lastMs, values.seq, changed.lastMs, changed.seq = lastMs, seq, ms, sq
  lastId = ms .. '-' .. sq
  return lastId, ms
end

-- Entries older than the retention leave both streams as they grow: XADD trims up to the stream id
-- of the cutoff, approximately (whole nodes of the stream), which costs next to nothing. The cutoff
-- moves by the minute, so its text is made once a minute (the library keeps it).
local cutoffAt, cutoffId
local function cutoff()
  local at = now - RETAIN_MS
  at = at - at % 60000
  if at ~= cutoffAt then
    cutoffAt = at
    if at <= 0 then cutoffId = '0' else cutoffId = s(at) end
  end
  return cutoffId
end

-- A journal entry of delta and held, given as text (d, h); its id and time.
local function journal(kind, ref, currency, d, h)
  local id, ts = nextId()
  redis.call('XADD', J, 'MINID', '~', cutoff(), id, 'k', kind, 'r', ref, 'c', currency, 'd', d, 'h', h)
  return id, ts
end

-- The same, as the entry a reply carries. d and h: delta and held as text, when the caller has them.
local function append(kind, ref, currency, delta, held, d, h)
  d, h = d or s(delta), h or s(held)
  local id, ts = journal(kind, ref, currency, d, h)
  return { id, ts, kind, ref, currency, d, h }
end

-- usd, held, available, staked tokens, allowance left, as numbers a reply carries as integers, or
-- as int() makes them (the Node client reads an integer reply near 2^53, a balance at Money.MAX,
-- one off, and a string exactly).
local function balanceValues()
  local usd, held, stake = values.usd, values.held, values.stake
  local allowance = stake * NANO - values[AU] - values[AH]
  if allowance < 0 then allowance = 0 end
  -- Within 2^51 either way (2.2 million USD) every one of them, the difference too, is a plain
  -- integer: int() is then not called for each.
  if usd < 2251799813685248 and usd > -2251799813685248 and held < 2251799813685248 and held > -2251799813685248 and allowance < 2251799813685248 then
    return usd, held, usd - held, stake, allowance
  end
  return int(usd), int(held), int(usd - held), int(stake), int(allowance)
end
local function balance() return { balanceValues() } end

-- X says when each hold needs attention: an open hold is released at its expiry, a closed one is
-- forgotten once its retention has passed. sweepAt in A is at or before the earliest of them, so
-- a script sweeps only when something may be due. It holds while the journal's last id is sweptId:
-- a script of an earlier release, which changes X without knowing of sweepAt, appends to the
-- journal whenever it does.
local function schedule(ref, at, atText)
  redis.call('ZADD', X, atText, ref)
  if at < values.sweepAt then values.sweepAt, changed.sweepAt = at, true end
end

local function saveAccount()
  -- Sized once for the usual changes, instead of grown a slot at a time.
  local args, n = { false, false, false, false, false, false, false, false, false, false, false, false }, 0
  local sweepMoved = changed.sweepAt
  -- Emptied as it is read (a field may be cleared while a traversal is on it).
  for name, text in pairs(changed) do
    if text == true then text = s(values[name]) end
    args[n + 1] = name
    args[n + 2] = text
    n = n + 2
    changed[name] = nil
  end
  local id = lastId or (storedLastMs and storedLastMs .. '-' .. storedSeq)
  if (lastId or sweepMoved) and id then
    args[n + 1] = 'sweptId'
    args[n + 2] = id
    n = n + 2
  end
  if n > 0 then redis.call('HSET', A, unpack(args, 1, n)) end
end

-- A hold's record is JSON, as every release reads it, written by this one in a fixed order so
-- that it is made by joining strings and an open one is read by one match instead of cjson:
--   {"s":"open","a":"<amount>","fa":"<from allowance>","fu":"<from USD>","d":"<day>","x":"<expiry>","v":<price version>[,"nc":"1"]}
-- and, closed, the same with "s" the closing state and ,"cfa":"..","cfu":"..","f":".." added. A
-- record in any other order (an earlier release's, encoded by cjson) and a closed one are decoded
-- by cjson. An open record read by the match has its leading fields, nc, and raw (its text, which
-- closeHold edits); holdRecord(ref, true) decodes every field.
local OPEN_LAYOUT = '^{"s":"open","a":"(%d+)","fa":"(%d+)","fu":"(%d+)","d":"(%d+)",'
local function readRecord(raw, full)
  if not full then
    local a, fa, fu, d = string.match(raw, OPEN_LAYOUT)
    if a then
      -- A price version is a JSON string, whose quotes are escaped: only nc can put these bytes here.
      -- (Made with the slots closeHold fills, so that filling them does not grow the table.)
      return { s = 'open', a = a, fa = fa, fu = fu, d = d, nc = string.find(raw, ',"nc":"1"', 1, true) and '1' or nil, raw = raw, cfa = false, cfu = false, f = false }
    end
  end
  return cjson.decode(raw)
end

-- A hold's record; none once it has been closed for FORGET_MS, whether or not the sweep has
-- deleted it yet (f, its forgetting time, is missing from records closed by earlier releases,
-- which the sweep deletes on time).
local function holdRecord(ref, full)
  local raw = redis.call('HGET', H, ref)
  if not raw then return nil end
  local rec = readRecord(raw, full)
  if rec.f and rec.f + 0 <= now then return nil end
  return rec
end

-- fuText: fu as text, when the caller has it.
local forgetAtLast, forgetAtText
local function closeHold(ref, rec, state, fa, fu, fuText)
  fuText = fuText or s(fu)
  rec.s = state
  rec.cfa = s(fa)
  rec.cfu = fuText
  rec.f = timeText(now + FORGET_MS)
  -- Deleted in batches: the holds closed within one FORGET_STEP are due together, and one sweep
  -- deletes them all (the step's text is made once a step).
  local forgetAt = now + FORGET_MS
  if forgetAt % FORGET_STEP > 0 then forgetAt = forgetAt - forgetAt % FORGET_STEP + FORGET_STEP end
  if forgetAt ~= forgetAtLast then forgetAtLast, forgetAtText = forgetAt, s(forgetAt) end
  schedule(ref, forgetAt, forgetAtText)
  if rec.raw then
    redis.call('HSET', H, ref, '{"s":"' .. state .. '"' .. string.sub(rec.raw, 12, -2) .. ',"cfa":"' .. rec.cfa .. '","cfu":"' .. fuText .. '","f":"' .. rec.f .. '"}')
  else
    redis.call('HSET', H, ref, cjson.encode(rec))
  end
  local ha, hu = rec.fa + 0, rec.fu + 0
  if ha > 0 or fa > 0 then
    addField('ah:' .. rec.d, -ha)
    addField('au:' .. rec.d, fa)
  end
  values.held, values.usd, values.open = values.held - hu, values.usd - fu, values.open - 1
  changed.held, changed.usd, changed.open = true, true, true
  local kind = 'release'
  if state == 'captured' then kind = 'capture' end
  -- Its journal entries: DIEM's when the allowance was held or taken, USD's otherwise or as well.
  local diem, usd
  if ha > 0 or fa > 0 then diem = append(kind, ref, 'DIEM', -fa, -ha) end
  if hu > 0 or fu > 0 or not diem then
    usd = append(kind, ref, 'USD', -fu, -hu, fu == 0 and '0' or '-' .. fuText, hu == 0 and '0' or '-' .. rec.fu)
  end
  return diem, usd
end

-- Releases the expired open holds and deletes the forgotten closed ones, at most 100 a run; with
-- force, even when sweepAt says nothing is due (the background sweep, which found something due).
local function sweep(force)
  loadAccount()
  local at = values.sweepAt
  local journalAt = storedLastMs and storedLastMs .. '-' .. storedSeq
  if not force and now < at and storedSweptId == journalAt then return end
  local due = redis.call('ZRANGEBYSCORE', X, '-inf', s(now), 'LIMIT', '0', '100')
  if #due > 0 then
    local records = redis.call('HMGET', H, unpack(due))
    local forgotten = {}
    for i, ref in ipairs(due) do
      -- Only an open hold's record holds "s":"open" (a quote inside a value is escaped), so a
      -- closed one is deleted without decoding it.
      local raw = records[i]
      if raw and string.find(raw, '"s":"open"', 1, true) then
        closeHold(ref, readRecord(raw), 'released', 0, 0)
      else
        forgotten[#forgotten + 1] = ref
      end
    end
    if #forgotten > 0 then
      redis.call('HDEL', H, unpack(forgotten))
      redis.call('ZREM', X, unpack(forgotten))
    end
  end
  local first = redis.call('ZRANGE', X, '0', '0', 'WITHSCORES')
  -- An account that was never written (a wallet that only looked at its balance or was refused a
  -- hold) stays unwritten: nothing is stored for it, so it leaves no key behind.
  if first[2] or storedLastMs then setField('sweepAt', tonumber(first[2]) or NEVER) end
end

-- The paid path's operations, shared with the admission store's script (AdmissionStoreRedis).

-- Whether a hold is funded outside the balance (CreditLedger.FUNDED_HOLD_PREFIX, an x402 upto permit).
local function isFunded(ref)
  return string.sub(ref, 1, ${CreditLedger.FUNDED_HOLD_PREFIX.length}) == '${CreditLedger.FUNDED_HOLD_PREFIX}'
end

-- Whether a hold of amount can be placed under ref: nil and the plan (from allowance, from USD)
-- when it can; otherwise the answer, a refusal or the hold already placed under ref. Nothing is
-- written, so a refusal met after it (a rate limit) leaves no trace.
local function holdCheck(ref, amount)
  local rec = holdRecord(ref, true)
  if rec then
    if rec.a ~= amount then return { 'err', 'ReferenceConflict' } end
    return { 'ok', { rec.a, rec.fa, rec.fu, rec.v, rec.x }, balance() }
  end
  if redis.call('HEXISTS', R, ref) == 1 then return { 'err', 'ReferenceConflict' } end
  -- A hold funded outside the balance takes nothing from it.
  if isFunded(ref) then return nil, 0, 0 end
  local allowance = values.stake * NANO - values[AU] - values[AH]
  local total = amount + 0
  local fa = allowance > 0 and math.min(total, allowance) or 0
  local fu = total - fa
  if fu > values.usd - values.held then return { 'err', 'InsufficientFunds' } end
  return nil, fa, fu
end

-- Places the hold holdCheck planned (fa from allowance, fu from USD); returns the record's texts
-- of fa, fu and the expiry. nc: the admission found no spend cap to count the hold against; the
-- record says so, and its settlement then reads no cap (a record without nc, also one of an
-- earlier release, has the cap closed as before).
-- A price version's JSON text, made once per version (the library keeps the last).
local versionSeen, versionJson
local function holdPlace(ref, amount, version, ttl, fa, fu, nc)
  local faText, fuText, x = s(fa), (fa == 0 and fu ~= 0) and amount or s(fu), timeText(now + ttl)
  if version ~= versionSeen then versionSeen, versionJson = version, cjson.encode(version) end
  redis.call('HSET', H, ref, '{"s":"open","a":"' .. amount .. '","fa":"' .. faText .. '","fu":"' .. fuText .. '","d":"' .. today
    .. '","x":"' .. x .. '","v":' .. versionJson .. (nc and ',"nc":"1"}' or '}'))
  schedule(ref, now + ttl, x)
  values.held, values.open, changed.held, changed.open = values.held + fu, values.open + 1, true, true
  if fa > 0 then
    addField(AH, fa)
    journal('hold', ref, 'DIEM', '0', faText)
  end
  if fu > 0 or fa == 0 then journal('hold', ref, 'USD', '0', fuText) end
  return faText, fuText, x
end

local function ledgerHold(ref, amount, version, ttl)
  local answer, fa, fu = holdCheck(ref, amount)
  if answer then return answer end
  local before = balance()
  local faText, fuText, x = holdPlace(ref, amount, version, ttl, fa, fu, false)
  return { 'ok', { amount, faText, fuText, version, x }, before }
end

-- A capture's usage entry, beside its journal entry e.
local function usageEntry(e, charge, details)
  redis.call('XADD', U, 'MINID', '~', cutoff(), e[1], 'c', e[5], 'a', charge, 't', e[2], 'v', details)
end

-- Captures the hold: nil and its record (captured, with cfa and cfu), or the refusal. A capture
-- repeated answers the record as the first left it. amountText: amount as the caller's text, if it
-- has it.
local function ledgerCapture(ref, amount, details, amountText)
  local rec = holdRecord(ref)
  if not rec then return { 'err', 'UnknownHold' } end
  if rec.s == 'captured' then return nil, rec end
  if rec.s ~= 'open' then return { 'err', 'HoldClosed' } end
  if amount > rec.a + 0 then return { 'err', 'ExceedsHold' } end
  local funded = isFunded(ref)
  local fa, fu = 0, 0
  if not funded then
    fa = rec.fa + 0
    if amount < fa then fa = amount end
    fu = amount - fa
  end
  local diem, usd = closeHold(ref, rec, 'captured', fa, fu, fu == amount and amountText or nil)
  -- A usage entry per charge (the DIEM and USD parts taken), or for the last entry when nothing
  -- was charged; a funded hold's usage is the amount.
  local charged = false
  if diem and fa > 0 then
    usageEntry(diem, funded and s(amount) or rec.cfa, details)
    charged = true
  end
  if usd and fu > 0 then
    usageEntry(usd, funded and s(amount) or rec.cfu, details)
    charged = true
  end
  if not charged then usageEntry(usd or diem, funded and s(amount) or '0', details) end
  return nil, rec
end

local function ledgerRelease(ref)
  local rec = holdRecord(ref)
  if not rec then return { 'err', 'UnknownHold' } end
  if rec.s == 'open' then closeHold(ref, rec, 'released', 0, 0) end
  return { 'ok', {}, balance() }
end

`

const lua = (retentionMs: number) => `
${ledgerLibrary(retentionMs)}
ledgerBegin(KEYS, ARGV[2])
local op = ARGV[1]

local function run()
  sweep(op == 'sweep')
  if op == 'topup' or op == 'grant' or op == 'refund' or op == 'stake' then
    local ref, amount = ARGV[3], ARGV[4]
    local prev = redis.call('HGET', R, ref)
    if prev then
      local p = cjson.decode(prev)
      if p.k ~= op or p.a ~= amount then return { 'err', 'ReferenceConflict' } end
      return { 'ok', p.e, balance() }
    end
    local e
    if op == 'stake' then
      setField('stake', tonumber(amount))
      e = append(op, ref, 'DIEM', 0, 0)
    else
      if field('usd') + tonumber(amount) > MAX_NANO then return { 'err', 'BalanceCeiling' } end
      addField('usd', tonumber(amount))
      e = append(op, ref, 'USD', tonumber(amount), 0)
    end
    redis.call('HSET', R, ref, cjson.encode({ k = op, a = amount, e = e }))
    return { 'ok', e, balance() }
  end
  if op == 'hold' then return ledgerHold(ARGV[3], ARGV[4], ARGV[5], tonumber(ARGV[6])) end
  if op == 'capture' then
    local refused, rec = ledgerCapture(ARGV[3], tonumber(ARGV[4]), ARGV[5])
    return refused or { 'ok', { rec.cfa, rec.cfu }, balance() }
  end
  if op == 'release' then return ledgerRelease(ARGV[3]) end
  return { 'ok', {}, balance() }
end

local reply = run()
saveAccount()
return reply
`

type Reply = readonly [status: string, detail: ReadonlyArray<string> | string, balance?: ReadonlyArray<string>]

const ledgerScript = (retentionMs: number) =>
  Redis.script(
    (keys: ReadonlyArray<string>, op: string, now: number, ...args: ReadonlyArray<string | number>) => [...keys, op, now, ...args],
    { numberOfKeys: 6, lua: lua(retentionMs) }
  ).withReturnType<Reply>()

const unavailable = () => Errors.storeUnavailable("The credit ledger")

/** @category constants */
export const defaultPrefix = "tg:cl:"

/**
 * An account's keys, in the order `ledgerLibrary` names them: balances, holds, hold deadlines,
 * applied references, journal, usage. The account id is their hash tag.
 *
 * @category internals
 */
export const accountKeys = (prefix: string, accountId: string) => {
  const base = `${prefix}{${accountId}}:`
  return [`${base}a`, `${base}h`, `${base}x`, `${base}r`, `${base}j`, `${base}u`] as const
}

/**
 * The error of a script's `{ 'err', reason }` reply.
 *
 * @category internals
 */
export const ledgerError = (reason: CreditLedger.LedgerError["reason"]) =>
  new CreditLedger.LedgerError({ reason, message: messages[reason] })

const messages: Record<CreditLedger.LedgerError["reason"], string> = {
  InsufficientFunds: "Insufficient balance",
  UnknownHold: "No such hold",
  HoldClosed: "The hold was released",
  ExceedsHold: "The capture exceeds the hold",
  InvalidAmount: "Invalid amount",
  ReferenceConflict: "The reference was used for another operation",
  BalanceCeiling: CreditLedger.BALANCE_CEILING_MESSAGE
}

/**
 * A balance as the scripts answer it.
 *
 * @category internals
 */
export const toBalance = (b: ReadonlyArray<string | number>): CreditLedger.Balance => ({
  usd: Money.unsafeNano(Number(b[0])),
  heldUsd: Money.unsafeNano(Number(b[1])),
  availableUsd: Money.unsafeNano(Number(b[2])),
  stakedTokens: Number(b[3]),
  availableAllowance: Money.unsafeNano(Number(b[4]))
})

const toEntry = (e: ReadonlyArray<string>): CreditLedger.JournalEntry => ({
  id: e[0]!,
  timestamp: Number(e[1]),
  kind: e[2] as CreditLedger.EntryKind,
  reference: e[3]!,
  currency: e[4] as CreditLedger.Currency,
  delta: Money.unsafeNano(Number(e[5])),
  held: Money.unsafeNano(Number(e[6]))
})

const fields = (flat: ReadonlyArray<string>): Record<string, string> => {
  const record: Record<string, string> = {}
  for (let i = 0; i + 1 < flat.length; i += 2) record[flat[i]!] = flat[i + 1]!
  return record
}

type StreamEntry = readonly [id: string, fields: ReadonlyArray<string>]

const toUsage = ([id, flat]: StreamEntry): CreditLedger.UsageEntry => {
  const f = fields(flat)
  return {
    ...(JSON.parse(f["v"] ?? "{}") as CreditLedger.UsageDetails),
    id,
    timestamp: Number(f["t"]),
    amount: Money.unsafeNano(Number(f["a"])),
    currency: f["c"] as CreditLedger.Currency
  }
}

const checkAmount = (amount: number, allowZero: boolean) =>
  Number.isSafeInteger(amount) && (allowZero ? amount >= 0 : amount > 0)
    ? Effect.void
    : Effect.fail(new CreditLedger.LedgerError({ reason: "InvalidAmount", message: `${amount} is not a valid amount of nano-USD` }))

const msOf = (id: string) => Number(id.split("-")[0])

/**
 * The ledger on Redis. `prefix` namespaces the keys (default `tg:cl:`); `retentionMs` is how long
 * journal and usage entries are kept (default `CreditLedger.DEFAULT_RETENTION_MS`). With
 * `replicaAcknowledgment`, a credit (top-up, grant, refund) is answered only once that many replicas
 * have it, or once the wait times out, which is logged: the credit stands on the master either way,
 * and a failover before a replica has it would lose it (see docs/operations.md).
 *
 * @category layers
 */
export const layerRedis = (
  options: {
    readonly prefix?: string
    readonly retentionMs?: number | undefined
    readonly replicaAcknowledgment?: RedisConnection.ReplicaAcknowledgment | undefined
  } = {}
): Layer.Layer<CreditLedger.CreditLedger, never, Redis.Redis | RedisConnection.RedisConnection> =>
  Layer.effect(CreditLedger.CreditLedger, Effect.gen(function*() {
    const redis = yield* Redis.Redis
    const connection = yield* RedisConnection.RedisConnection
    const acknowledgment = options.replicaAcknowledgment
    const prefix = options.prefix ?? defaultPrefix
    const keysOf = (accountId: string) => accountKeys(prefix, accountId)
    const run = redis.eval(ledgerScript(options.retentionMs ?? CreditLedger.DEFAULT_RETENTION_MS))
    const span = yield* Spans.current

    const call = (accountId: string, op: string, ...args: ReadonlyArray<string | number>) =>
      Effect.gen(function*() {
        const now = yield* Clock.currentTimeMillis
        const reply = yield* run(keysOf(accountId), op, now, ...args).pipe(Effect.mapError(unavailable))
        if (reply[0] === "err") {
          return yield* ledgerError(reply[1] as CreditLedger.LedgerError["reason"])
        }
        return { detail: reply[1] as ReadonlyArray<string>, balance: toBalance(reply[2] ?? []) }
      })

    const replicated = (accountId: string, reference: string) =>
      acknowledgment === undefined
        ? Effect.void
        : Effect.tryPromise(() => RedisConnection.waitForReplicas(connection, keysOf(accountId)[0], acknowledgment)).pipe(
          Effect.flatMap((acknowledged) =>
            acknowledged >= acknowledgment.replicas
              ? Effect.void
              : Effect.logWarning(
                `a credit is on the Redis master but on ${acknowledged} of ${acknowledgment.replicas} replicas after ${acknowledgment.timeoutMs} ms`,
                { accountId, reference }
              )
          ),
          Effect.catch((error) => Effect.logWarning("a credit's replication could not be confirmed", { accountId, reference, error: String(error) }))
        )

    const credit = (op: "topup" | "grant" | "refund") =>
      Effect.fn(`CreditLedger.${op}`)(function*(input: CreditLedger.CreditInput) {
        yield* checkAmount(input.amount, false)
        const { balance, detail } = yield* call(input.accountId, op, input.reference, input.amount)
        yield* replicated(input.accountId, input.reference)
        return { entry: toEntry(detail), balance }
      })

    const send = <A>(command: string, ...args: ReadonlyArray<string>) =>
      redis.send<A>(command, ...args).pipe(Effect.mapError(unavailable))

    const scan = (accountId: string, query: Omit<CreditLedger.UsageQuery, "after"> & { readonly after?: string | undefined }, want: number) =>
      Effect.gen(function*() {
        const key = keysOf(accountId)[5]
        const after = query.after
        let start: string
        let end: string
        if (query.order === "asc") {
          start = after !== undefined && (query.from === undefined || msOf(after) >= query.from)
            ? `(${after}`
            : query.from === undefined ? "-" : String(query.from)
          end = query.to === undefined ? "+" : String(query.to)
        } else {
          end = after !== undefined && (query.to === undefined || msOf(after) <= query.to)
            ? `(${after}`
            : query.to === undefined ? "+" : String(query.to)
          start = query.from === undefined ? "-" : String(query.from)
        }
        const matches: Array<CreditLedger.UsageEntry> = []
        const batch = Math.min(Math.max(want, 16), 1000)
        while (matches.length < want) {
          const entries = query.order === "asc"
            ? yield* send<ReadonlyArray<StreamEntry>>("XRANGE", key, start, end, "COUNT", String(batch))
            : yield* send<ReadonlyArray<StreamEntry>>("XREVRANGE", key, end, start, "COUNT", String(batch))
          for (const entry of entries) {
            const usage = toUsage(entry)
            if (query.currency === undefined || usage.currency === query.currency) matches.push(usage)
            if (matches.length >= want) break
          }
          if (entries.length < batch) break
          const last = entries.at(-1)![0]
          if (query.order === "asc") start = `(${last}`
          else end = `(${last}`
        }
        return matches
      })

    /** Every key of the ledger whose name ends in `suffix` (`:a` balances, `:x` deadlines), by SCAN. */
    const keysEndingIn = (suffix: string) =>
      Effect.gen(function*() {
        const found: Array<string> = []
        let cursor = "0"
        do {
          const [next, keys] = yield* send<readonly [string, ReadonlyArray<string>]>("SCAN", cursor, "MATCH", `${prefix}{*}${suffix}`, "COUNT", "1000")
          for (const key of keys) found.push(key)
          cursor = next
        } while (cursor !== "0")
        return found
      })

    const accountOfKey = (key: string) => key.slice(key.indexOf("{") + 1, key.lastIndexOf("}"))

    const sweepExpired = Effect.gen(function*() {
      const now = yield* Clock.currentTimeMillis
      let swept = 0
      for (const key of yield* keysEndingIn(":x")) {
        // The script releases at most 100 due holds per run: run it until none is due (bounded).
        for (let round = 0; round < 1_000; round++) {
          const due = yield* send<ReadonlyArray<string>>("ZRANGEBYSCORE", key, "-inf", String(now), "LIMIT", "0", "1")
          if (due.length === 0) break
          yield* call(accountOfKey(key), "sweep").pipe(Effect.catchTag("LedgerError", Effect.die))
          if (round === 0) swept++
        }
      }
      return swept
    })

    const holdStats = Effect.gen(function*() {
      const day = String(Math.floor((yield* Clock.currentTimeMillis) / 86_400_000))
      let open = 0
      let held = 0
      for (const key of yield* keysEndingIn(":a")) {
        const [count, usd, allowance] = yield* send<ReadonlyArray<string | null>>("HMGET", key, "open", "held", `ah:${day}`)
        open += Math.max(0, Number(count ?? 0))
        held += Number(usd ?? 0) + Number(allowance ?? 0)
      }
      return { open, held: Money.unsafeNano(held) }
    })

    return CreditLedger.CreditLedger.of({
      sweepExpired,
      holdStats,
      topUp: credit("topup"),
      grant: credit("grant"),
      refund: credit("refund"),
      stake: Effect.fn("CreditLedger.stake")(function*(input) {
        if (!Number.isSafeInteger(input.tokens) || input.tokens < 0) {
          return yield* new CreditLedger.LedgerError({ reason: "InvalidAmount", message: `${input.tokens} is not a whole number of tokens` })
        }
        const { balance, detail } = yield* call(input.accountId, "stake", input.reference, input.tokens)
        return { entry: toEntry(detail), balance }
      }),
      // Hold, capture and release run on every paid request: their spans (when tracing is on) take
      // no call-site stack, which `Effect.fn` would capture on every call.
      hold: Effect.fnUntraced(function*(input) {
        yield* checkAmount(input.amount, true)
        const ttl = input.ttlMs ?? CreditLedger.DEFAULT_HOLD_TTL_MS
        const { balance, detail } = yield* call(input.accountId, "hold", input.reference, input.amount, input.priceVersion, ttl)
        return {
          reference: input.reference,
          amount: Money.unsafeNano(Number(detail[0])),
          fromAllowance: Money.unsafeNano(Number(detail[1])),
          fromUsd: Money.unsafeNano(Number(detail[2])),
          priceVersion: detail[3]!,
          expiresAt: Number(detail[4]),
          before: balance
        }
      }, (effect) => span("CreditLedger.hold", effect)),
      capture: Effect.fnUntraced(function*(input) {
        yield* checkAmount(input.amount, true)
        const { balance, detail } = yield* call(input.accountId, "capture", input.reference, input.amount, JSON.stringify(input.usage))
        return { fromAllowance: Money.unsafeNano(Number(detail[0])), fromUsd: Money.unsafeNano(Number(detail[1])), balance }
      }, (effect) => span("CreditLedger.capture", effect)),
      release: (accountId, reference) =>
        span("CreditLedger.release", Effect.map(call(accountId, "release", reference), ({ balance }) => balance)),
      balance: (accountId) =>
        call(accountId, "balance").pipe(
          Effect.map(({ balance }) => balance),
          Effect.catchTag("LedgerError", Effect.die)
        ),
      journal: (accountId, options) =>
        send<ReadonlyArray<StreamEntry>>(
          "XRANGE",
          keysOf(accountId)[4],
          options.after === undefined ? "-" : `(${options.after}`,
          "+",
          "COUNT",
          String(options.limit)
        ).pipe(Effect.map((entries) =>
          entries.map(([id, flat]) => {
            const f = fields(flat)
            return toEntry([id, String(msOf(id)), f["k"]!, f["r"]!, f["c"]!, f["d"]!, f["h"]!])
          })
        )),
      usage: (accountId, query) =>
        Effect.map(scan(accountId, query, query.limit + 1), (matches) => CreditLedger.finishPage(matches, query.limit)),
      usageOffset: (accountId, query) =>
        Effect.map(scan(accountId, query, Number.MAX_SAFE_INTEGER), (matches) => ({
          entries: matches.slice(query.offset, query.offset + query.limit),
          total: matches.length
        }))
    })
  }))
