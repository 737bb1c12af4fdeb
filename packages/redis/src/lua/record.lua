-- An idempotency record's completion and release on Redis (IdempotencyStoreRedis.recordLibrary).
-- TypeScript twin: the memory store's complete and abandon (@tollgate/core IdempotencyStore.Memory).
local function completeRecord(key, status, headers, body)
  -- Every record holds its claim's fingerprint: one without a status is claimed and not completed.
  local record = redis.call('HMGET', key, 'fingerprint', 'status')
  if record[1] and not record[2] then
    redis.call('HSET', key, 'status', status, 'headers', headers, 'body', body)
  end
end
local function abandonRecord(key)
  if redis.call('HEXISTS', key, 'status') == 0 then redis.call('DEL', key) end
end
