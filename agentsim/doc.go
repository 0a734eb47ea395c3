// Package agentsim simulates game agents for the demo, the compose simulator and the
// benchmarks: every tick, each agent samples the online counts of its share of a tree's leaves
// and submits them through api/agentclient, exactly as a real agent does (jittered start, one
// submission id per submission, retries that are safe by construction).
//
// The one idea: counts follow a deterministic daily curve with per-leaf noise (Online), so a
// run is reproducible from its seed and a test can compute what the store must hold.
//
// It does not write to the store and does not schedule anything but its own ticks.
package agentsim
