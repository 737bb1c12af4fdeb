-- The abandon script's entry (IdempotencyStoreRedis), after record.lua.
abandonRecord(KEYS[1])
return 1
