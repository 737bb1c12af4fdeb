-- A failure counted against a caller on Redis (AbuseGuardRedis). TypeScript twin: the memory
-- guard (@tollgate/core AbuseGuard.layerMemory).
local left = redis.call('PTTL', KEYS[2])
if left > 0 then return left end
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - tonumber(ARGV[1]))
redis.call('ZADD', KEYS[1], now, time[1] .. '.' .. time[2] .. '.' .. redis.call('ZCARD', KEYS[1]))
redis.call('PEXPIRE', KEYS[1], ARGV[1])
if redis.call('ZCARD', KEYS[1]) > tonumber(ARGV[2]) then
  redis.call('SET', KEYS[2], '1', 'PX', ARGV[3])
  redis.call('DEL', KEYS[1])
end
return 0
