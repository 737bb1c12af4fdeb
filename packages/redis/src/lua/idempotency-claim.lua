-- An idempotency key's claim on Redis (IdempotencyStoreRedis). TypeScript twin: the memory
-- store's claim (@tollgate/core IdempotencyStore.makeMemory).
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local current = redis.call('HMGET', KEYS[1], 'fingerprint', 'claimedAt', 'status')
if not current[1] then
  redis.call('HSET', KEYS[1], 'fingerprint', ARGV[1], 'claimedAt', now)
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return {'Claimed'}
end
if current[1] ~= ARGV[1] then return {'Mismatch'} end
if current[3] then
  local stored = redis.call('HMGET', KEYS[1], 'status', 'headers', 'body')
  return {'Replay', stored[1], stored[2], stored[3]}
end
if now - tonumber(current[2]) < tonumber(ARGV[3]) then return {'InFlight'} end
redis.call('HSET', KEYS[1], 'claimedAt', now)
return {'Claimed'}
