-- A video job finished on Redis (VideoJobsRedis). TypeScript twin: the memory store's
-- (@tollgate/core VideoJobs.layerMemory).
local current = redis.call('HMGET', KEYS[1], 'job', 'state', 'finishedAt', 'error')
if not current[1] then return false end
if current[2] ~= 'queued' then return {0, current[1], current[2], current[3] or '', current[4] or ''} end
redis.call('HSET', KEYS[1], 'state', ARGV[1], 'finishedAt', ARGV[2], 'error', ARGV[3])
return {1, current[1], ARGV[1], ARGV[2], ARGV[3]}
