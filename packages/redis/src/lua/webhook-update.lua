-- A webhook delivery updated on Redis (WebhookStoreRedis). TypeScript twin: the memory
-- store's (@tollgate/core Webhooks.layerStoreMemory).
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then return 0 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
if ARGV[3] == '' then redis.call('ZREM', KEYS[2], ARGV[1]) else redis.call('ZADD', KEYS[2], ARGV[3], ARGV[1]) end
return 1
