-- The ledger's own operations on Redis (CreditLedgerRedis), after its library, as the `ledger`
-- script's entry: `ledgerOperation(keys, args)`, keys the account's (`accountKeys`), args the
-- operation, the caller's time and the operation's arguments. TypeScript twin: the memory ledger
-- (@tollgate/core CreditLedger.layerMemoryWith).

-- A credit (top-up, grant, refund) or a stake, once per reference.
local function credit(op, ref, amount)
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

local function ledgerOperation(keys, args)
  ledgerBegin(keys, args[2])
  local op = args[1]
  sweep(op == 'sweep')
  local reply
  if op == 'topup' or op == 'grant' or op == 'refund' or op == 'stake' then
    reply = credit(op, args[3], args[4])
  elseif op == 'hold' then
    reply = ledgerHold(args[3], args[4], args[5], tonumber(args[6]))
  elseif op == 'capture' then
    local refused, rec = ledgerCapture(args[3], tonumber(args[4]), args[5])
    reply = refused or { 'ok', { rec.cfa, rec.cfu }, balance() }
  elseif op == 'release' then
    reply = ledgerRelease(args[3])
  else
    reply = { 'ok', {}, balance() }
  end
  saveAccount()
  return reply
end
