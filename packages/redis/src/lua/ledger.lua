-- The ledger's library on Redis (CreditLedgerRedis.ledgerLibrary), after the constants Lua.header
-- generates. TypeScript twin: the memory ledger (@tollgate/core CreditLedger.layerMemoryWith).
-- It reads the hold records and sweep marks of earlier releases too (docs/operations.md,
-- "Upgrading and rolling deploys").
local DAY = 86400000
local FORGET_STEP = 60000
local NEVER = 9007199254740992
local NANO = 1000000000

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
  return string.sub(ref, 1, FUNDED_HOLD_PREFIX_LENGTH) == FUNDED_HOLD_PREFIX
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
  -- The hold's split, allowance first: twin of CreditLedger.split (TypeScript), as in ledgerCapture.
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
  -- The capture's split, from what the hold reserved: twin of CreditLedger.split (TypeScript).
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

