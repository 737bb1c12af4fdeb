-- A key's spend cap on Redis, for the admission script (KeyCapsRedis.capLibrary), after the ledger's
-- library. TypeScript twin: the memory store's primitives (@tollgate/core KeyCaps.Memory).
local function capReconcile(key, period, spent)
  local all = redis.call('HGETALL', key)
  local next = nil
  for i = 1, #all, 2 do
    local f = all[i]
    if string.sub(f, 1, 2) == 'h:' then
      local rec = holdRecord(string.sub(f, 3))
      local v = all[i + 1]
      local a = string.find(v, ' ', 1, true)
      local b = string.find(v, ' ', a + 1, true)
      if rec and rec.s == 'open' then
        local x = tonumber(string.sub(v, b + 1))
        if not next or x < next then next = x end
      else
        redis.call('HDEL', key, f)
        -- A forgotten hold (no record) stays counted in full: it may have been captured.
        if rec and string.sub(v, 1, a - 1) == period then
          local quote = tonumber(string.sub(v, a + 1, b - 1))
          if rec.s == 'captured' then spent = spent + tonumber(rec.cfa) + tonumber(rec.cfu) - quote else spent = spent - quote end
        end
      end
    end
  end
  return spent, next
end

-- nil and the period id when the key may hold amount more (or has no cap); else the refusal. The
-- holds are reconciled with the ledger only when one may have expired or a new period starts.
local function capCheck(key, amount, day, month)
  local c = redis.call('HMGET', key, 'usd', 'period', 'p', 'spent', 'x')
  if not c[1] then return nil end
  local period = 'L'
  if c[2] == 'EPOCH' then period = day elseif c[2] == 'MONTH' then period = month end
  local spent = 0
  if c[3] == period then spent = tonumber(c[4]) end
  local limit, total, x = tonumber(c[1]), tonumber(amount), tonumber(c[5])
  if c[3] ~= period or (spent + total > limit and x and x <= now) then
    spent, x = capReconcile(key, period, spent)
    redis.call('HSET', key, 'p', period, 'spent', s(spent))
    if x then redis.call('HSET', key, 'x', s(x)) else redis.call('HDEL', key, 'x') end
  end
  if spent + total > limit then return { 'cap', c[1], c[2], s(spent) } end
  return nil, { period = period, x = x }
end

-- plan: what capCheck answered (the period id, and x as it read it).
local function capReserve(key, plan, ref, amount, expiresAt)
  redis.call('HINCRBY', key, 'spent', amount)
  local held = plan.period .. ' ' .. amount .. ' ' .. s(expiresAt)
  if plan.x and plan.x <= expiresAt then
    redis.call('HSET', key, 'h:' .. ref, held)
  else
    redis.call('HSET', key, 'h:' .. ref, held, 'x', s(expiresAt))
  end
end

-- The hold's quote leaves the spend and what was captured of it (0 for a release) enters it.
local function capClose(key, ref, captured)
  local f = 'h:' .. ref
  local c = redis.call('HMGET', key, f, 'p')
  if not c[1] then return end
  redis.call('HDEL', key, f)
  local a = string.find(c[1], ' ', 1, true)
  local b = string.find(c[1], ' ', a + 1, true)
  if string.sub(c[1], 1, a - 1) == c[2] then
    redis.call('HINCRBY', key, 'spent', s(captured - tonumber(string.sub(c[1], a + 1, b - 1))))
  end
end
