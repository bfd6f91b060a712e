// Package schedule defines recurring jobs: a cron spec (seconds optional, time zones, descriptors)
// with a catch-up policy, the pure computation of which instants are due, and their persistence in
// jobpipe_schedules and jobpipe_schedule_firings.
//
// The dispatcher runs schedules (dispatcher.AddSchedule): the elected leader of each schedule calls
// Fire whenever its next instant comes. Fire locks the schedule's row, records each due instant once
// (the firings table's primary key refuses a second), enqueues its job through a callback in the same
// transaction, and advances next_run_at. A restart or a new leader continues from the persisted
// next_run_at, so no instant is fired twice, and none is skipped except as the catch-up policy says.
//
// Times follow the spec's zone (UTC unless given). Across daylight-saving changes a spec that names
// its hours runs like the classic cron daemon: a time that does not exist on the day the clocks
// spring forward runs at the change, and a time that occurs twice when they fall back runs once.
// Specs that run every hour follow the real hours instead.
package schedule
