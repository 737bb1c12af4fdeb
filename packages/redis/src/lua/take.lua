-- The rate limiter's take on Redis (RateLimiterRedis.takeLibrary). TypeScript twin: the memory
-- store's take (@tollgate/core RateLimiter.makeStoreMemory).
-- A rolling window's current bucket id, as text: the last one is kept (a Function library keeps its
-- locals between calls), as it changes once a bucket.
local bucketId, bucketText
local function takeAll(K, A, k, a, n)
-- Sized for a take of a few limits (the slots past its answer are cleared at the end), instead of
-- grown a slot at a time.
local out = { false, false, false, false, false, false, false, false }
local o = 0
local sub = string.sub
while a <= n do
  local groups = A[a] + 0
  local dry = groups < 0
  if dry then groups = -groups end
  -- An unchecked take adds to every counter and is admitted whatever the counters' room.
  local checked = groups < UNCHECKED
  if not checked then groups = groups - UNCHECKED end
  local a0 = a + 1
  local k0 = k
  o = o + 1
  local head = o
  out[head] = 1
  -- stale: per rolling group, its buckets that left the window (only once one has); rolling:
  -- whether the take has a rolling group, whose addition waits for the second pass.
  local stale, rolling
  a = a0
  for g = 1, groups do
    k = k + 1
    local key = K[k]
    local fields = A[a]
    local m = #fields
    if m > 0 then
      local p = a + 1
      if dry then
        for f = 1, m do
          o = o + 1
          out[o] = tonumber(redis.call("HGET", key, sub(fields, f, f))) or 0
        end
      else
        local fresh = false
        for f = 1, m do
          local amount = A[p + m + f]
          local used
          if amount == "0" then
            used = tonumber(redis.call("HGET", key, sub(fields, f, f))) or 0
          else
            used = redis.call("HINCRBY", key, m == 1 and fields or sub(fields, f, f), amount)
            if used == amount + 0 then fresh = true end
            if checked and used > A[p + f] + 0 then out[head] = 0 end
          end
          o = o + 1
          out[o] = used
        end
        if fresh then redis.call("PEXPIRE", key, A[p]) end
      end
      a = p + 1 + 2 * m
    else
      rolling = true
      local now = A[a + 1] + 0
      local window = A[a + 2] + 0
      local limit = A[a + 3] + 0
      local amount = A[a + 4] + 0
      local bucket = A[a + 5] + 0
      local span = (window - window % bucket) / bucket
      local oldest = (now - now % bucket) / bucket - span + 1
      local flat = redis.call("HGETALL", key)
      local old
      local used = 0
      local first
      for f = 1, #flat, 2 do
        local b = flat[f] + 0
        if b >= oldest then
          used = used + flat[f + 1]
          if not first or b < first then first = b end
        else
          old = old or {}
          old[#old + 1] = flat[f]
        end
      end
      if old then
        stale = stale or {}
        stale[g] = old
      end
      local reset, retry = 0, 0
      if first then reset = (first + span) * bucket - now end
      local need = used + amount - limit
      if amount > 0 and need > 0 then
        -- Refused: when enough of the oldest buckets have left the window (sorted only here, as
        -- an admission needs no more than the oldest).
        local live = {}
        for f = 1, #flat, 2 do
          local b = tonumber(flat[f])
          if b >= oldest then live[#live + 1] = { b, tonumber(flat[f + 1]) } end
        end
        table.sort(live, function(x, y) return x[1] < y[1] end)
        retry = window
        local freed = 0
        for f = 1, #live do
          freed = freed + live[f][2]
          if freed >= need then
            retry = (live[f][1] + span) * bucket - now
            break
          end
        end
        if checked then out[head] = 0 end
      end
      out[o + 1] = used
      out[o + 2] = reset
      out[o + 3] = retry
      o = o + 3
      a = a + 6
    end
  end
  if not dry and (out[head] == 0 or rolling) then
    local admitted = out[head] == 1
    local b = a0
    local j = k0
    local q = head + 1
    for g = 1, groups do
      j = j + 1
      local key = K[j]
      local fields = A[b]
      local m = #fields
      if m > 0 then
        if not admitted then
          for f = 1, m do
            local amount = A[b + 1 + m + f]
            if amount ~= "0" then
              if out[q] == amount + 0 then
                redis.call("HDEL", key, sub(fields, f, f))
              else
                redis.call("HINCRBY", key, sub(fields, f, f), "-" .. amount)
              end
            end
            q = q + 1
          end
        else
          q = q + m
        end
        b = b + 2 + 2 * m
      else
        local amount = A[b + 4]
        if admitted and amount ~= "0" then
          local at, size = A[b + 1] + 0, A[b + 5] + 0
          local id = (at - at % size) / size
          if id ~= bucketId then bucketId, bucketText = id, string.format("%d", id) end
          local sum = redis.call("HINCRBY", key, bucketText, amount)
          if stale and stale[g] then redis.call("HDEL", key, unpack(stale[g])) end
          -- A window after its newest bucket's first use, every bucket in the key has left the window.
          if sum == amount + 0 then redis.call("PEXPIRE", key, A[b + 2]) end
        end
        q = q + 3
        b = b + 6
      end
    end
  end
end
for i = o + 1, 8 do out[i] = nil end
return out
end
