-- The rate limiter's adjustments on Redis (RateLimiterRedis.adjustLibrary). TypeScript twin: the
-- memory store's adjust (@tollgate/core RateLimiter.makeStoreMemory).
local function adjustAll(K, A, k, a, count)
  for i = 0, count - 1 do
    local key = K[k + 1 + i]
    local field = A[a + 2 * i]
    if redis.call("HEXISTS", key, field) == 1 then
      local next = redis.call("HINCRBY", key, field, A[a + 2 * i + 1])
      if next < 0 then redis.call("HSET", key, field, 0) end
    end
  end
end
