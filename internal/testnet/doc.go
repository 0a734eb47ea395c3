// Package testnet hands tests loopback addresses for listeners they stop and start again on
// the same address (a store restarted, a serve killed and run again): addresses that no other
// listener or connection is given while the test's own listener is down.
package testnet
