-- The ledger's own operations on Redis (CreditLedgerRedis), after its library. TypeScript twin:
-- the memory ledger (@tollgate/core CreditLedger.layerMemoryWith).
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
