-- A key's expiry set on Redis (AuthStoreRedis). TypeScript twin: the memory store's
-- (@tollgate/core AuthStore.layerMemory).
local raw = redis.call('HGET', KEYS[1], ARGV[1])
if not raw then return 0 end
local record = cjson.decode(raw)
if ARGV[2] == '' then record.expiresAt = nil else record.expiresAt = ARGV[2] end
redis.call('HSET', KEYS[1], ARGV[1], cjson.encode(record))
if not record.revokedAt then
  if ARGV[3] == '' then redis.call('DEL', KEYS[2]) else redis.call('SET', KEYS[2], ARGV[3]) end
end
return 1
