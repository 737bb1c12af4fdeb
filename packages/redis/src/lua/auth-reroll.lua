-- A rerolled key's record and policy, written only while the stored record still has the current
-- secret the reroll replaced (ARGV[4]; a key never rerolled has 0) and is not revoked
-- (AuthStoreRedis.rerollKey): of two rerolls that read the same record, one is stored and the other
-- changes nothing. TypeScript twin: the memory store's rerollKey (@tollgate/core AuthStore.layerMemory).
local stored = redis.call('HGET', KEYS[1], ARGV[1])
if not stored then return 0 end
local record = cjson.decode(stored)
if record.revokedAt ~= nil and record.revokedAt ~= cjson.null then return 0 end
local current = 0
if type(record.secrets) == 'table' and type(record.secrets.current) == 'number' then current = record.secrets.current end
if current ~= tonumber(ARGV[4]) then return 0 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('SET', KEYS[2], ARGV[3])
return 1
