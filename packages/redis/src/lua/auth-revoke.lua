-- A key's revocation on Redis (AuthStoreRedis). TypeScript twin: the memory store's
-- (@tollgate/core AuthStore.layerMemory).
local raw = redis.call('HGET', KEYS[1], ARGV[1])
if not raw then return 0 end
local record = cjson.decode(raw)
if not record.revokedAt then
  record.revokedAt = ARGV[2]
  redis.call('HSET', KEYS[1], ARGV[1], cjson.encode(record))
end
redis.call('SET', KEYS[2], '0')
return 1
