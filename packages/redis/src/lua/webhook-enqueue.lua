-- Webhook deliveries enqueued on Redis (WebhookStoreRedis). TypeScript twin: the memory
-- store's (@tollgate/core Webhooks.layerStoreMemory).
for i = 2, #ARGV, 3 do
  redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 2])
  redis.call('ZADD', KEYS[2], ARGV[i + 1], ARGV[i])
  redis.call('ZADD', KEYS[3], ARGV[i + 1], ARGV[i])
end
local over = redis.call('ZCARD', KEYS[3]) - tonumber(ARGV[1])
if over > 0 then
  local old = redis.call('ZRANGE', KEYS[3], 0, over - 1)
  redis.call('HDEL', KEYS[1], unpack(old))
  redis.call('ZREM', KEYS[2], unpack(old))
  redis.call('ZREM', KEYS[3], unpack(old))
end
return 1
