-- The complete script's entry (IdempotencyStoreRedis), after record.lua.
completeRecord(KEYS[1], ARGV[1], ARGV[2], ARGV[3])
return 1
