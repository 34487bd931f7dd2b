-- weir example: a time-of-day schedule. Off-site backups get most of the
-- uplink at night and little during office hours.
--
-- What it shows: weir.at timers changing classes with weir.set_class. At
-- 22:00 the backup class's rate goes up and the office's down; at 06:00
-- they go back. The top level applies the schedule for the time the script
-- is loaded, so a reload at midnight starts with the night rates. Each
-- change recompiles the policy and the workers switch to it between two
-- bursts, nothing queued is lost.
--
-- How to use it: policy = { script = "../lua/examples/schedule.lua"; }; in
-- the config file; set BACKUP_SERVER to your backup server's address and
-- the hours and rates to taste. Times are weir's local time (its TZ).

local LINK = 100e6                      -- bit/s, the uplink
local BACKUP_SERVER = "198.51.100.10"
local NIGHT_FROM, NIGHT_TO = 22, 6      -- hours, local time

local day = { office = 90e6, backup = 10e6 }
local night = { office = 40e6, backup = 60e6 }

weir.link{ dir = "outbound", rate = LINK, default = "office" }
weir.class{ dir = "outbound", name = "office", rate = day.office, prio = 0 }
weir.class{ dir = "outbound", name = "backup", rate = day.backup, prio = 1 }
weir.link{ dir = "inbound", rate = LINK }

weir.rule{ class = "backup", wan = BACKUP_SERVER }

local function is_night(now)
  local h = weir.date(now).hour
  return h >= NIGHT_FROM or h < NIGHT_TO
end

local function apply(now)
  local r = is_night(now) and night or day
  -- Lower one class before raising the other: the policy is compiled only
  -- after the hook returns, so the order does not matter to the workers.
  weir.set_class{ dir = "outbound", name = "office", rate = r.office }
  weir.set_class{ dir = "outbound", name = "backup", rate = r.backup }
end

apply(weir.time())
weir.at(string.format("%02d:00", NIGHT_FROM), apply)
weir.at(string.format("%02d:00", NIGHT_TO), apply)
