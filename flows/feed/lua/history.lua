
local function history(hist, tp, feed, now, kind, iid, guid, hash, sub, within)
  local id = feed .. ':' .. iid .. ':' .. kind
  if kind == 'edited' then id = id .. ':' .. hash end
  if sub ~= '' then id = id .. ':' .. sub .. ':' .. within end
  local p = cjson.encode({event_id = id, feed_id = feed, iid = iid, guid = guid or '', kind = kind,
    at_ms = tostring(now), hash = hash or '', subscribable = sub, within = within})
  if tp ~= '' then
    redis.call('XADD', hist, '*', 'key', feed, 'type', 'feed.item_event', 'payload', p, 'traceparent', tp)
  else
    redis.call('XADD', hist, '*', 'key', feed, 'type', 'feed.item_event', 'payload', p)
  end
end
