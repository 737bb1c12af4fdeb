-- A key's record and its policy (restrictions, accepted secrets) written together on Redis
-- (AuthStoreRedis.putKey), so keyStatus never reads one without the other. A key already stored
-- keeps its secrets and its revocation as stored: only a reroll (auth-reroll.lua) and a revocation
-- (auth-revoke.lua) change them, so a change of description or restrictions made from a record read
-- before them cannot undo them. TypeScript twin: the memory store's putKey (@tollgate/core
-- AuthStore.layerMemory).
local stored = redis.call('HGET', KEYS[1], ARGV[1])
local record = ARGV[2]
local policy = ARGV[3]
if stored then
  local kept = cjson.decode(stored)
  local written = cjson.decode(record)
  written.secrets = kept.secrets
  written.revokedAt = kept.revokedAt
  record = cjson.encode(written)
  if written.restrictions == nil and written.secrets == nil then
    policy = ''
  else
    policy = cjson.encode({ restrictions = written.restrictions, secrets = written.secrets })
  end
end
redis.call('HSET', KEYS[1], ARGV[1], record)
if policy == '' then redis.call('DEL', KEYS[2]) else redis.call('SET', KEYS[2], policy) end
return 1
