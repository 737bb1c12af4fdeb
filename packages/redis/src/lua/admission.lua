-- A paid call's admission, settlement and give-back on Redis (AdmissionStoreRedis), after the
-- stores' libraries. TypeScript twin: @tollgate/core Admission.layerMemory, which orders the
-- checks the same way.
-- One admission, laid out as AdmissionStoreRedis.admitLayout: its cap is K[k + 1], its counters'
-- keys follow; its hold and periods are V[a] to V[a + 5], its take's arguments follow, to V[last].
local function admit(K, V, k, a, last)
  local ref, amount, version, ttl = V[a], V[a + 1], V[a + 2], V[a + 3] + 0
  local capKey, cap = K[k + 1], nil
  if V[a + 4] ~= '' then
    local reached
    reached, cap = capCheck(capKey, amount, V[a + 4], V[a + 5])
    if reached then return reached end
  end
  local answer, fa, fu = holdCheck(ref, amount)
  if answer and answer[1] == 'err' then return answer end
  local taken = takeAll(K, V, k + 1, a + 6, last)
  if taken[1] == 0 then return { 'limited', taken } end
  if answer then
    -- The hold already placed under ref (its amount is this one), with its price version.
    local hold, before = answer[2], answer[3]
    return { 'ok', taken, hold[2], hold[3], hold[5], before[1], before[2], before[4], before[5], hold[4] }
  end
  local usd, held, _, stake, allowance = balanceValues()
  local faText, fuText, x = holdPlace(ref, amount, version, ttl, fa, fu, not cap)
  if cap then capReserve(capKey, cap, ref, amount, now + ttl) end
  return { 'ok', taken, faText, fuText, x, usd, held, stake, allowance }
end

local function admitMany(K, V)
  local replies, k, a = {}, 6, 3
  while a <= #V do
    local keys, args = V[a] + 0, V[a + 1] + 0
    replies[#replies + 1] = admit(K, V, k, a + 2, a + 7 + args)
    k = k + 1 + keys
    a = a + 8 + args
  end
  return replies
end

-- One settlement, laid out as AdmissionStoreRedis.settleLayout: its record and cap are K[k] and
-- K[k + 1], its n adjustments' keys follow; its capture and response are V[a] to V[a + 5], its
-- adjustments' arguments follow.
local function settle(K, V, k, a, n)
  local ref = V[a]
  local refused, rec = ledgerCapture(ref, V[a + 1] + 0, V[a + 2], V[a + 1])
  if refused then return refused end
  if not rec.nc then capClose(K[k + 1], ref, rec.cfa + rec.cfu) end
  adjustAll(K, V, k + 1, a + 6, n)
  if V[a + 3] ~= '' then completeRecord(K[k], V[a + 3], V[a + 4], V[a + 5]) end
  local usd, held, _, stake, allowance = balanceValues()
  return { 'ok', rec.cfa, rec.cfu, usd, held, stake, allowance }
end

local function settleMany(K, V)
  local replies, k, a = {}, 7, 3
  while a <= #V do
    local n = V[a] + 0
    replies[#replies + 1] = settle(K, V, k, a + 1, n)
    k = k + 2 + n
    a = a + 7 + 2 * n
  end
  return replies
end

-- A give-back, laid out as AdmissionStoreRedis.giveBackLayout.
local function giveBack(K, V)
  ledgerRelease(V[3])
  -- A deferred job may have captured the hold itself: that capture is what counts.
  local rec = holdRecord(V[3])
  if not (rec and rec.nc) then capClose(K[8], V[3], rec and rec.s == 'captured' and tonumber(rec.cfa) + tonumber(rec.cfu) or 0) end
  adjustAll(K, V, 8, 5, #K - 8)
  if V[4] == '1' then abandonRecord(K[7]) end
  return { 'ok' }
end

local function admission(K, V)
  ledgerBegin(K, V[2])
  sweep(false)
  local op, reply = V[1], nil
  if op == 'admit' then
    reply = admit(K, V, 6, 3, #V)
  elseif op == 'admitmany' then
    reply = admitMany(K, V)
  elseif op == 'settle' then
    reply = settle(K, V, 7, 3, #K - 8)
  elseif op == 'settlemany' then
    reply = settleMany(K, V)
  else
    reply = giveBack(K, V)
  end
  saveAccount()
  return reply
end
