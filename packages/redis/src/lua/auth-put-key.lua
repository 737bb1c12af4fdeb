-- A key's record and its policy (restrictions, accepted secrets) written together on Redis
-- (AuthStoreRedis.putKey), so keyStatus never reads one without the other. TypeScript twin: the
-- memory store's putKey (@tollgate/core AuthStore.layerMemory), where the policy is the record's.
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
if ARGV[3] == '' then redis.call('DEL', KEYS[2]) else redis.call('SET', KEYS[2], ARGV[3]) end
return 1
