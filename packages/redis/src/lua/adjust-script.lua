-- The adjust script's entry (RateLimiterRedis), after adjust.lua.
local function adjust(keys, args)
  adjustAll(keys, args, 0, 1, #keys)
  return 1
end
