"""The Lua scripts of the Redis rate limiter (``gateway.ratelimit.redis``): each runs as one
atomic step on the Redis server, on its clock (``TIME``)."""

from __future__ import annotations

# ARGV: rpm, tpm (-1: unlimited), cost, window seconds, pending settle delta (tokens),
# and optionally: slots wanted (this request included), unused slots and tokens returned,
# the window start (us) they were reserved in, and the requests this one counts as (a
# chat request's n; 1 when absent). Returns ok, requests and tokens counted
# (reservations included), ms to the window's end, extra slots and tokens reserved, and
# the window start.
CHECK_SCRIPT = """
local t = redis.call('TIME')
local now_us = tonumber(t[1]) * 1000000 + tonumber(t[2])
local win_us = tonumber(ARGV[4]) * 1000000
local start = now_us
local rpm = tonumber(ARGV[1])
local tpm = tonumber(ARGV[2])
local cost = tonumber(ARGV[3])
local delta = tonumber(ARGV[5]) or 0
local want = tonumber(ARGV[6]) or 1
local ref_r = tonumber(ARGV[7]) or 0
local ref_t = tonumber(ARGV[8]) or 0
local ref_w = tonumber(ARGV[9]) or -1
local reqs = tonumber(ARGV[10]) or 1
local v = redis.call('HMGET', KEYS[1], 'w', 'r', 't')
local r = 0
local tk = 0
local settled = 0
if v[1] and now_us - tonumber(v[1]) < win_us then
  start = tonumber(v[1])
  r = tonumber(v[2]) or 0
  tk = tonumber(v[3]) or 0
  if delta ~= 0 then
    tk = tk + delta
    if tk < 0 then tk = 0 end
    settled = 1
  end
  if (ref_r > 0 or ref_t > 0) and start == ref_w then
    r = r - ref_r
    if r < 0 then r = 0 end
    tk = tk - ref_t
    if tk < 0 then tk = 0 end
    settled = 1
  end
end
local reset_ms = math.floor((start + win_us - now_us) / 1000)
local ok = 1
local extra = 0
local held = 0
if rpm >= 0 and r + reqs > rpm then ok = 0 end
if ok == 1 and tpm >= 0 and tk > 0 and tk + cost > tpm then ok = 0 end
if ok == 1 then
  r = r + reqs
  tk = tk + cost
  extra = want - 1
  if extra > 0 and rpm >= 0 then extra = math.min(extra, math.floor((rpm - r) / 32)) end
  if extra > 0 and tpm >= 0 and cost > 0 then
    extra = math.min(extra, math.floor((tpm - tk) / 32 / cost))
  end
  if extra < 0 then extra = 0 end
  if tpm >= 0 then held = extra * cost end
  r = r + extra
  tk = tk + held
  redis.call('HSET', KEYS[1], 'w', start, 'r', r, 't', tk)
  redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[4]) * 2000)
elseif settled == 1 then
  redis.call('HSET', KEYS[1], 'r', r, 't', tk)
end
return {ok, r, tk, reset_ms, extra, held, start}
"""

# Unused reserved slots and tokens given back (ARGV: slots, tokens, the window start they
# were reserved in); nothing happens if that window has since been replaced.
REFUND_SCRIPT = """
local v = redis.call('HMGET', KEYS[1], 'w', 'r', 't')
if v[1] and tonumber(v[1]) == tonumber(ARGV[3]) then
  local r = (tonumber(v[2]) or 0) - tonumber(ARGV[1])
  if r < 0 then r = 0 end
  local tk = (tonumber(v[3]) or 0) - tonumber(ARGV[2])
  if tk < 0 then tk = 0 end
  redis.call('HSET', KEYS[1], 'r', r, 't', tk)
  return 1
end
return 0
"""

# A settle's tokens (ARGV: tokens, window seconds) added to the key's current window, none
# below zero; nothing happens once that window has ended.
ADD_TOKENS_SCRIPT = """
local t = redis.call('TIME')
local now_us = tonumber(t[1]) * 1000000 + tonumber(t[2])
local v = redis.call('HGET', KEYS[1], 'w')
if v and now_us - tonumber(v) < tonumber(ARGV[2]) * 1000000 then
  local tk = (tonumber(redis.call('HGET', KEYS[1], 't')) or 0) + tonumber(ARGV[1])
  if tk < 0 then tk = 0 end
  redis.call('HSET', KEYS[1], 't', tk)
end
return 1
"""
