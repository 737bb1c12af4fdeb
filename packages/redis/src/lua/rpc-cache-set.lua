-- The RPC cache's write (RpcCacheRedis); its memory twin is `set` of RpcCache.makeMemory.
-- KEYS: the entry, the index (sorted set: entry -> expiry in us), the sizes (hash: entry -> bytes),
-- the total bytes. ARGV: the value, its lifetime in ms, maxEntries, maxBytes.
-- Stores the entry, then drops the entries closest to their expiry until the cache is within both
-- bounds. An entry Redis already expired leaves the index and the total here.
local entry, index, sizes, total = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local value, ttl, maxEntries, maxBytes = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
-- Microseconds (exact in a double for millennia), so two writes never share a score and an order.
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000000 + tonumber(time[2])

local function forget(member)
  local size = redis.call('HGET', sizes, member)
  if size then
    redis.call('HDEL', sizes, member)
    redis.call('DECRBY', total, size)
  end
  redis.call('ZREM', index, member)
end

for _, member in ipairs(redis.call('ZRANGEBYSCORE', index, '-inf', now, 'LIMIT', 0, 64)) do forget(member) end
forget(entry)
local size = #entry + #value
redis.call('SET', entry, value, 'PX', ttl)
redis.call('ZADD', index, now + ttl * 1000, entry)
redis.call('HSET', sizes, entry, size)
local bytes = redis.call('INCRBY', total, size)
while redis.call('ZCARD', index) > maxEntries or bytes > maxBytes do
  local oldest = redis.call('ZPOPMIN', index)[1]
  if not oldest then break end
  local dropped = redis.call('HGET', sizes, oldest)
  redis.call('HDEL', sizes, oldest)
  redis.call('DEL', oldest)
  if dropped then bytes = redis.call('DECRBY', total, dropped) end
end
return 1
