package store

// Tier names a level of stored data: leaves and 5-minute parents in the counts collection, and
// the hourly and daily summaries of every parent and root.
type Tier string

const (
	TierLeaves Tier = "leaves"
	Tier5m     Tier = "5m"
	Tier1h     Tier = "1h"
	Tier1d     Tier = "1d"
)

// Collections of the hourly and daily summaries.
const (
	HourlyCollection = "rollups_1h"
	DailyCollection  = "rollups_1d"
)
