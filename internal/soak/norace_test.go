//go:build !race

package soak

// raceEnabled says the test runs with the race detector: the rollup binary is built with it.
const raceEnabled = false
