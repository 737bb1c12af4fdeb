-- Due webhook deliveries claimed on Redis (WebhookStoreRedis). TypeScript twin: the memory
-- store's (@tollgate/core Webhooks.layerStoreMemory).
local ids = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', ARGV[1], 'LIMIT', '0', ARGV[3])
if #ids == 0 then return {} end
local lease = tonumber(ARGV[1]) + tonumber(ARGV[2])
for _, id in ipairs(ids) do redis.call('ZADD', KEYS[2], lease, id) end
return redis.call('HMGET', KEYS[1], unpack(ids))
